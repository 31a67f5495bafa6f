// Package transport turns the entries of OpenClaw's `mcp.servers` config
// into go-sdk client transports, with OpenClaw's runtime rules
// (docs/protocol-facts.md, Transport resolution) and openclaw-go's hardening; every log line and error about a
// server goes through the server's redactor (internal/redact, docs/protocol-facts.md, Redaction).
//
//	r, err := transport.Resolve("github", entry, &transport.Options{Logger: log})
//	if err != nil { … } // *BlockedEnvError, ErrUnusable, bad URL or header
//	ctx, cancel := context.WithTimeout(ctx, r.ConnectTimeout)
//	session, err := client.Connect(ctx, r.Transport, nil)
//	cancel()
//	…
//	session.Close() // for stdio: the server and everything it started are gone
//
// # Resolution
//
// An entry is a config.ServerEntry, resolved by config.ResolveEntry: a
// non-blank command means stdio. Otherwise `transport` (or its alias
// `type`: "http" means streamable HTTP) picks "sse" or "streamable-http",
// and an http: or https: URL without one means SSE. Anything else is an
// error wrapping [ErrUnusable], which OpenClaw reports as a skipped server.
//
// # stdio
//
// [StdioTransport] starts the server under a supervisor: this same
// executable, re-run with an environment marker that this package's init
// function recognizes before main runs, so any binary linking the package
// can supervise. The supervisor is a child subreaper in a process group of
// its own; it holds the read end of a pipe only our process can write, so
// it sees EOF when our process dies in any way (even SIGKILL), and it kills
// every descendant, including grandchildren that called setsid, when the
// server exits, on Close, and on our death. It adds no copy: the server
// reads and writes our pipes directly. Outside Linux the server runs in
// its own process group without a supervisor.
//
// The child's environment is the SDK-default safe set of ours (HOME,
// LOGNAME, PATH, SHELL, TERM, USER) with the entry's env merged over it
// after OpenClaw's filter (docs/protocol-facts.md, stdio env filter); a key on the blocklist refuses to start
// the server with a *[BlockedEnvError] naming it. stderr lines are logged
// (capped at [MaxStderrLine]) with server=<name>; stdout lines that are not
// one JSON-RPC 2.0 message are counted, logged (rate limited) and skipped;
// messages up to [Options.MaxMessageBytes] (64 MiB by default) pass, and a
// longer answer fails its call at once.
//
// # HTTP
//
// SSE ([SSETransport]) and streamable HTTP (go-sdk's client transport)
// share an HTTP client that sends the entry's headers with ${NAME}
// expanded from the environment ([ExpandEnv]), verifies TLS unless
// sslVerify is false, presents clientCert/clientKey for mTLS, and bounds
// dialing and TLS by connectionTimeoutMs and response headers by
// requestTimeoutMs. When a streamable server answers 404 for a session it
// forgot, the client starts a new session and resends the request, so the
// caller never sees the expiry (protocol revisions up to 2025-11-25; the
// 2026-07-28 revision has no sessions).
//
// # OAuth
//
// An entry with auth "oauth" loses any Authorization header of its config
// (as in OpenClaw) and sends the access token that [Login] (`openclaw mcp
// login`) saved in a [TokenStore] instead: files of mode 0600 under
// [DefaultTokenDir], one per server name and URL origin, replaced
// atomically. The token is refreshed with its refresh token when it is
// within [TokenExpirySkew] of its expiry or when the server answers 401,
// and the refreshed token is saved. Without a usable token the connection
// fails with an *[AuthRequiredError]: `MCP server "x" requires OAuth
// authorization. Run openclaw mcp login x.` Discovery, client registration
// and the authorization code flow with PKCE are go-sdk's (packages auth and
// oauthex); [OAuthOptions.Flow] lets a connection run that flow itself.
// With oauth.identity "per-requester" ([OAuthOptions.PerRequester]) tokens
// are kept per principal and each request sends the token of the principal
// its context names ([WithPrincipal]); a request naming none, or a
// principal who never logged in, fails closed and nothing is sent.
//
// # Serving
//
// ServeStdioTransport is the server side of stdio for `openclaw mcp serve`:
// it passes go-sdk only lines that decode as one JSON-RPC 2.0 message and
// answers every other line with a JSON-RPC error whose id is null (-32700
// for invalid JSON, -32600 for JSON that is not a message), so one bad line
// never ends the session.
//
// # Frames
//
// Both stdio directions and the proxy's HTTP handlers check each frame
// (a line, a POST body) whole with [DecodeFrame] before go-sdk sees it:
// go-sdk's decoder takes the first JSON value of its input and ignores
// trailing bytes.
//
// # Not here
//
// OAuth auth profiles (oauth.authProfileId): their credentials live in
// OpenClaw's auth-profile store, which openclaw-go does not have; login and
// the runtime refuse such servers. Serving MCP over HTTP is the proxy
// package's (streamable HTTP and legacy SSE through go-sdk's handlers).
package transport
