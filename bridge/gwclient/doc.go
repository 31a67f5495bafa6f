// Package gwclient is the OpenClaw Gateway WebSocket client that
// `openclaw mcp serve` uses: it connects to a Gateway (the real OpenClaw one
// or our local one in package gateway), performs the device-signed connect
// handshake, subscribes to session events, and then serves RPCs and delivers
// events until it is closed, reconnecting whenever the connection drops.
//
// It mirrors the Node GatewayClient of OpenClaw 2026.9.6 as `mcp serve`
// configures it (docs/protocol-facts.md, Gateway frames, Connect handshake and Failure and shutdown):
//
//   - handshake: wait for connect.challenge, send connect (protocol 4,
//     client "cli"/"OpenClaw MCP", caps ["approvals"], role operator, scopes
//     operator.read/write/approvals, device proof signed over the v3 string
//     with signedAt = the challenge ts), read hello-ok, send
//     sessions.subscribe {} and only then become ready;
//   - request ids "<n>:<uuid-v4>", n counting from 1 on each connection;
//   - the URL must be wss://, or ws:// to loopback, a private or
//     link-local address, a .local or .ts.net name ([CheckSecureURL],
//     OpenClaw's isSecureWebSocketUrl);
//   - the first connection is fatal unless the error is retryable (docs/protocol-facts.md, Connect failures);
//     after it, drops are retried forever with a 1 s doubling backoff capped
//     at 30 s; requests made before the first connection wait for it, those
//     made while a later connection is down fail at once with
//     [ErrNotConnected] ("gateway not connected", as OpenClaw answers);
//   - keep-alive: the socket is closed with 4000 "tick timeout" when nothing
//     arrived for more than 2 × tickIntervalMs and no request is pending;
//   - two-phase requests ([Client.RequestTwoPhase]): an approval request
//     with twoPhase:true is answered first {"status":"accepted",…}, then
//     with the final {"id","decision"} under the same id.
//
// [ApprovalRaiser] raises an approval on a short-lived connection of its
// own, because the Gateway never shows a request to the connection that
// raised it (docs/protocol-facts.md, Approval delivery).
//
// A [Client] satisfies bridge.GatewayConn without importing package bridge.
//
// Usage:
//
//	c := gwclient.New(&gwclient.Options{
//		URL:      "ws://127.0.0.1:18789",
//		Token:    token,
//		Identity: id, // *protocol.DeviceIdentity, or nil for no device block
//		OnEvent:  func(name string, payload json.RawMessage) { queue.Push(name, payload) },
//	})
//	errc := make(chan error, 1)
//	go func() { errc <- c.Run(ctx) }() // blocks until ctx is done or Close
//	...
//	payload, err := c.Request(ctx, "sessions.list", params) // waits for readiness
//	...
//	if err := <-errc; err != nil {
//		fmt.Fprintf(os.Stderr, "MCP server failed to start: %v\n", err)
//	}
package gwclient
