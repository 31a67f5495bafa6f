// Package runtime is the embedded MCP client runtime of openclaw-go: a Go
// library that imports the tools of the MCP servers in OpenClaw's
// `mcp.servers` into an agent harness, with OpenClaw's lifecycle rules
// (shared/reference/openclaw-protocol.md §11.4–§11.6) and every call passing
// the loaded policies (DESIGN.md §3).
//
// A [Session] holds one agent session's servers. [Session.Connect] connects
// every enabled server concurrently, each bounded by its connectionTimeoutMs;
// a server that fails becomes a diagnostic ([Session.Diagnostics],
// [EventFailed]), never a failed session. Tools are listed following
// nextCursor with OpenClaw's caps (128 pages, 16384 tools, 10 MiB; a repeated
// cursor is an error), named in one batch by the sanitize_tool_names hook
// ([Sanitizer]), filtered by each server's toolFilter and ordered
// deterministically. notifications/tools/list_changed marks the catalog
// stale; it is listed again on its next use.
//
// [Session.CallTool] routes a call by exposed name. before_tool_call runs
// first (surface "embedded"): a block is a [*PolicyError]; require_approval
// goes to decide_approval ([ApprovalDecider]) and, when that answers "ask",
// to the embedder's [ApprovalFunc]. The call then runs under the server's
// requestTimeoutMs; cancelling ctx sends notifications/cancelled upstream;
// progress reaches the handler given by [WithProgress]; servers without
// supportsParallelToolCalls get one call at a time. Three consecutive failed
// calls pause a server for 60 s ([*PausedError], [EventPaused],
// [EventResumed]); when the third was a request timeout, the connection is
// dropped and redialed on the first call after the pause. With
// [Options.IdleTTL] (mcp.sessionIdleTtlMs) an unused session disconnects its
// servers ([EventIdle]) and reconnects them on next use. [Session.Close]
// disposes everything: no child process survives (the transport package
// supervises stdio process trees) and later calls fail with [ErrClosed].
//
// Not yet here (issue 4): the resources_* and prompts_* utility tools, tool
// profiles, tools.deny and the sandbox alsoAllow gate, OAuth.
//
// The package never loads Wasm itself: it is handed the policy interfaces,
// which cmd/openclaw fills with the policy engine.
//
//	doc, _ := config.LoadDocument(path)
//	resolved, diags := doc.ResolveServers()
//	s, err := runtime.New(runtime.ServersFromConfig(resolved), &runtime.Options{
//		Enforcer:  eng, // *engine.Engine: before_tool_call
//		Sanitizer: eng, // sanitize_tool_names
//		Approvals: eng, // decide_approval
//		Approve:   askTheUser,
//		Caller:    policies.Caller{Name: "my-harness"},
//	})
//	if err != nil { … }
//	defer s.Close(context.Background())
//	if err := s.Connect(ctx); err != nil { … } // the catalog could not be named
//	tools, _ := s.Tools(ctx) // hand tools[i].Name and .Upstream.InputSchema to the LLM
//	res, err := s.CallTool(ctx, "everything__echo", []byte(`{"message":"hi"}`))
package runtime
