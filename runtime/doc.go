// Package runtime is the embedded MCP client runtime of openclaw-go: a Go
// library that imports the tools of the MCP servers in OpenClaw's
// `mcp.servers` into an agent harness, with OpenClaw's lifecycle rules
// (docs/protocol-facts.md, Transport resolution, Defaults and limits, Tool filter) and every call passing
// the loaded policies (docs/policy-file.md).
//
// A [Session] holds one agent session's servers. [Session.Connect] connects
// every enabled server concurrently, each bounded by its connectionTimeoutMs;
// a server that fails becomes a diagnostic ([Session.Diagnostics],
// [EventFailed]), never a failed session. Tools are listed following
// nextCursor with OpenClaw's caps (128 pages, 16384 tools, 10 MiB; a repeated
// cursor is an error; "" is a cursor, only an absent nextCursor ends a list,
// and a server that answers "" with its first page stops there), named in one batch by the sanitize_tool_names hook
// ([policies.Sanitizer]), filtered by each server's toolFilter and ordered
// deterministically. notifications/tools/list_changed marks the catalog
// stale; it is listed again on its next use. A listing that fails (an
// error answer, no answer in time) is a "tools/list" diagnostic and keeps
// the server's last good tools until a listing succeeds: on the first use
// 5 s later, or in the background on the schedule of a failed connection
// (EventToolsChanged when it succeeds). Within a session a name once
// exposed keeps meaning the same tool or goes away: every rebuild hands the
// sanitizer the names exposed so far (SanitizeRequest.Exposed), and a tool
// answered a name exposed for another is left out with a warning
// ([RepointedError]; docs/tool-names.md §8).
//
// [Session.CallTool] routes a call by exposed name. before_tool_call runs
// first (surface "embedded"): a block is a [*PolicyError]; require_approval
// goes to decide_approval ([policies.ApprovalDecider]) and, when that answers "ask",
// to the embedder's [ApprovalFunc]. The call then runs under the server's
// requestTimeoutMs, which each progress notification of the call resets, up
// to [MaxTotalTimeoutFactor] times it in all; cancelling ctx sends
// notifications/cancelled upstream; progress reaches the handler given by
// [WithProgress] (a call without one asks for no progress); servers without
// supportsParallelToolCalls get one call at a time. Three consecutive failed
// calls pause a server for 60 s ([*PausedError], [EventPaused],
// [EventResumed]); when the third was a request timeout, the connection is
// dropped and redialed on the first call after the pause. With
// [Options.IdleTTL] (mcp.sessionIdleTtlMs) an unused session disconnects its
// servers ([EventIdle]) and reconnects them on next use. [Session.Close]
// disposes everything: no child process survives (the transport package
// supervises stdio process trees) and later calls fail with [ErrClosed].
//
// A server whose connection failed, or whose connection ends (the process
// exited or was killed, the server closed the stream), is marked failed at
// once: [Session.Status] shows it disconnected with its diagnostic (op
// "session" for a connection that ended while in use),
// [EventFailed] is emitted, its calls in flight fail and its tools leave the
// catalog; a call of one of them meanwhile fails with an
// [*UnavailableError] naming the server, since when it is down and its
// last diagnostic ([Session.Unavailable] tells a surface that no longer
// serves the tool). It is connected again in the background, one retry at
// a time per server ([EventRetrying]), never in a loop: on the first use of
// the catalog at least 5 s later (OpenClaw's catalog failure retry; the
// caller gets the current catalog at once), and on its own schedule
// without any use, 5 s after the failure and then with a doubling delay of
// at most [RetryBackoffMax], until it connects or the session closes; when
// it connects, [EventConnected] follows and the next use lists the
// server's tools (the proxy's Relay relays notifications/tools/list_changed
// on EventConnected and EventFailed).
// [Session.Close] cancels a retry in flight and waits for it.
//
// A server that advertises resources or prompts also gets OpenClaw's utility
// tools, named like its tools: `<server>__resources_list`,
// `<server>__resources_read` ({"uri"}), `<server>__prompts_list` and
// `<server>__prompts_get` ({"name", "arguments"}) ([Tool.Utility]). Lists and
// reads answer as one block of indented JSON, a prompt as its messages; they
// pass before_tool_call like every call.
//
// [Options.ToolPolicy] applies openclaw.json's tool policy
// (config.Document.ToolPolicy) to the named catalog, as OpenClaw's pipeline
// does for the tools of its `bundle-mcp` plugin: tools.profile "minimal"
// hides MCP tools unless tools.alsoAllow names them, "coding", "messaging"
// and "full" show them; tools.allow and tools.deny entries match exposed
// names ignoring case, with `*` globs (`docs__*`) and the group names
// `bundle-mcp` and `group:plugins`; a sandboxed session sees an MCP tool only
// when tools.sandbox.tools lets it through (an alsoAllow entry such as
// `bundle-mcp` or `docs__*`). A hidden tool is neither listed nor callable:
// calling it fails with a [*HiddenToolError] (wrapping [ErrUnknownTool])
// naming the rule.
//
// [Session.Reload] applies a new declaration of the servers (openclaw.json
// edited; `openclaw mcp reload` makes `openclaw mcp proxy` call it): what
// changed is computed by [DiffServers]; unchanged servers keep their
// connection; added and changed servers are connected and listed before the
// new set replaces the old one in one step, so a concurrent call sees one
// set or the other, never half of each; the catalog is then named again
// (names already exposed stay, newcomers take suffixes or hashes); the
// connections of removed and changed servers close once their calls in
// flight end ([EventRemoved]; no child process survives). [EventReloaded]
// reports each applied reload. [Session.SetToolPolicy] replaces the tool
// policy the same way.
//
// Beyond tools, the session passes MCP through for a proxy in front of it:
// [Session.Resources], [Session.ResourceTemplates], [Session.ReadResource],
// [Session.Subscribe] (routed to the server that owns the URI),
// [Session.Prompts] and [Session.GetPrompt] (prompt names chosen by the
// same sanitizer, cached until a server's prompts change, a reload or a new
// tool catalog), [Session.Complete], [Session.SetLoggingLevel] with
// [Options.OnLog], [Session.Capabilities], and the servers' sampling,
// elicitation and roots requests ([Options.CreateMessage],
// [Options.Elicit], [Options.ListRoots]), attributed to the call in flight
// ([CallFromContext]).
//
// A server with oauth.identity "per-requester" (docs/protocol-facts.md, mcp.servers entry schema;
// [Server.OAuthIdentity], set by [ServerFromConfig]) gets one MCP connection per principal, since
// servers bind a session to the token's user: a call runs over the
// connection of the principal its context names ([WithPrincipal], the
// transport package's), opened by the principal's first call once the
// policies let it through, with the tokens `openclaw mcp login <name>
// --principal <id>` stored. A call naming no principal is refused with a
// [*PrincipalError]; a principal that never logged in gets the transport's
// *AuthRequiredError and is not kept. The
// catalog is listed over the connection of [Server.ListPrincipal], else of
// the principal named by the context of the Connect (or catalog use) that
// first connects the server; that connection also serves its principal's
// calls. Each connection has its own call turn and failure/pause
// accounting; idle reaping, a reload that retires the server, and Close
// end every principal's connection; [ServerStatus.Principals] lists them. OpenClaw's oauth.authProfileId
// (credentials from its auth-profile store, which openclaw-go does not
// have) is refused: the server's diagnostic is an [*AuthProfileError].
//
// The passthrough requests of a per-requester server ([Session.ReadResource],
// subscriptions, [Session.GetPrompt], [Session.Complete]) run on its
// listing connection, so they are served for the listing principal only:
// a context naming anyone else, or nobody, gets a [*PrincipalError] and
// nothing is sent (resources and prompts are not served per principal).
//
// The package never loads Wasm itself: it is handed the policy interfaces,
// which cmd/openclaw fills with the policy engine.
//
// A catalog needs a sanitize_tool_names module: with no policy file,
// load the default modules a catalog-building surface uses.
//
//	eng, err := engine.Load(ctx, &engine.Options{
//		DefaultModules: []string{"builtin:rules", "builtin:sanitizer", "builtin:approvals"},
//	})
//	if err != nil { … }
//	defer eng.Close(ctx)
//	doc, _ := config.LoadDocument(path)
//	resolved, diags := doc.ResolveServers()
//	s, err := runtime.New(runtime.ServersFromConfig(resolved), &runtime.Options{
//		Enforcer:        eng, // *engine.Engine: before_tool_call
//		Sanitizer:       eng, // sanitize_tool_names
//		ApprovalDecider: eng, // decide_approval
//		AskHuman:        askTheUser,
//		Caller:          policies.Caller{Name: "my-harness"},
//	})
//	if err != nil { … }
//	defer s.Close(context.Background()) // stdio servers get transport.Options.TerminateDuration to exit
//	if err := s.Connect(ctx); err != nil { … } // the catalog could not be named
//	tools, _ := s.Tools(ctx) // hand tools[i].Name and .Upstream.InputSchema to the LLM
//	res, err := s.CallTool(ctx, "everything__echo", []byte(`{"message":"hi"}`))
package runtime
