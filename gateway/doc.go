// Package gateway is a local Gateway that speaks the subset of the OpenClaw
// Gateway WebSocket protocol (version 4, OpenClaw 2026.9.6) that
// `openclaw mcp serve` uses, with persistent sessions and transcripts. It is
// the embedded default for `make demo`, local development and tests.
//
// It has no chat channels and runs no model: inbound messages arrive through
// [Server.Inject] (or the admin HTTP API and `openclaw gateway inject`),
// approvals through [Server.RequestApproval] or the protocol's own
// exec/plugin.approval.request, and history through seeds ([DemoSeed],
// [ParseSeed], [Server.ApplySeed]).
//
// On the wire it behaves as the real Gateway does (docs/protocol-facts.md,
// from Gateway frames to Approval delivery): the server speaks first with
// connect.challenge; connect is validated (protocol, client id and mode,
// role, scopes), authenticated with the shared token or password (constant
// time; OpenClaw's "unauthorized: gateway token mismatch (…)" on failure)
// and its Ed25519 device proof verified with [protocol.VerifyConnect]; every
// failure is a res ok:false INVALID_REQUEST with details {code, reason},
// then a 1008 close. hello-ok has the real shape; tick events follow every
// tickIntervalMs; events carry a per-connection seq from 1. Approval events
// follow OpenClaw's delivery rules (approvals scope, approval client,
// visibility by device id or connection, requester excluded).
//
// Usage:
//
//	srv, err := gateway.New(&gateway.Options{Token: "t", StateDir: dir})
//	if err != nil { … }
//	if _, err := srv.ApplySeed(ctx, gateway.DemoSeed()); err != nil { … }
//	ln, _ := net.Listen("tcp", "127.0.0.1:18789")
//	go srv.Serve(ctx, ln) // clients dial ws://127.0.0.1:18789
//	srv.Inject(ctx, gateway.InjectRequest{SessionKey: "agent:main:main", Text: "hi", SenderIsOwner: true})
//
// Tests in other packages start a seeded Gateway with package gatewaytest.
package gateway
