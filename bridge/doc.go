// Package bridge is the serve side of openclaw-go: the channel bridge behind
// `openclaw mcp serve`. It exposes an OpenClaw Gateway's routed conversations,
// live events and pending approvals as the nine MCP tools of OpenClaw
// 2026.9.6 (conversations_list, conversation_get, messages_read,
// attachments_fetch, events_poll, events_wait, messages_send,
// permissions_list_open, permissions_respond), plus Claude channel
// notifications, and passes every tool call through the before_tool_call
// hook boundary (package policies).
//
// The Gateway WebSocket client lives in the sub-package gwclient; the bridge
// depends only on the [GatewayConn] interface it satisfies, and the client
// feeds Gateway events in through [Bridge.HandleGatewayEvent].
//
// Usage sketch (what `openclaw mcp serve` wires):
//
//	mode, err := bridge.ParseChannelMode(flagMode) // auto|on|off, case-insensitive
//	b := bridge.New(gw, &bridge.Options{ClaudeChannelMode: mode, Enforcer: chain, Logger: stderrLogger})
//	defer b.Close()                                 // releases pending events_wait calls
//	// gw's read loop calls b.HandleGatewayEvent(name, payload) for every event frame.
//	stdio := transport.NewServeStdioTransport(os.Stdin, os.Stdout, nil) // strict framing
//	err = b.Serve(ctx, stdio)                      // until stdin EOF or ctx ends
//
// Compatibility: initialize, tools/list, every tool result and error text,
// the event queue (cursors, 1000 kept, gaps), approval tracking and the
// Claude channel notifications match the captured behaviour of the real
// OpenClaw (testdata/openclaw/, replayed by the golden tests). Where go-sdk
// v1.8.0 differs from the Node SDK OpenClaw uses, the bridge adapts it: a
// receiving middleware turns unknown tools into isError results and the
// resources/prompts methods into "Method not found", and a transport wrapper
// writes and reads the custom claude/channel notifications and gives
// tools/list OpenClaw's order and `execution` member.
//
// Over the stdio transport of `mcp serve` (transport.ServeStdioTransport),
// tools/list and tools/call take a local path: decoded once by the
// transport and passed through the same hook boundary, decided on its
// reading goroutine in the order read. tools/list and the tools answered
// from the bridge's own state (events_poll, permissions_list_open) are
// answered there with one write; the calls that wait (the Gateway tools,
// events_wait) run on a goroutine of their own and are answered when done,
// or not at all once the client cancels them. go-sdk answers everything
// else, and any such request only it can answer exactly (before
// initialize, with a cursor, a multi-round-trip retry, a _meta it refuses,
// a session_key alias the Gateway resolves); a call whose policy requires
// approval is handed to it with its decision.
//
// # Approval routing
//
// When before_tool_call answers require_approval, the bridge first asks
// decide_approval ([Options].ApprovalDecider; kind "tool", the tool, a summary of
// the arguments, the session key, the MCP client as requester):
// allow-once and allow-always run the call, deny fails it with the policy's
// reason, ask hands it to a human, for the TTL the policy gave (else the
// verdict's timeout_ms, else [DefaultToolApprovalTTL]):
//
//   - MCP elicitation when the client advertised the elicitation
//     capability: the call answers input-required with an approve/deny form
//     (go-sdk turns it into elicitation/create for clients before protocol
//     2026-07-28, whose tools/call cannot carry it); the retried call runs
//     when the form came back accepted with "approve".
//   - Otherwise a Gateway plugin approval ([Options].ApprovalRaiser):
//     plugin.approval.request {pluginId "openclaw-go", title, description,
//     toolName, toolCallId, twoPhase, timeoutMs} raised on a short-lived
//     second connection of the same device, so that the bridge's own
//     connection (permissions_list_open), OpenClaw's approval clients of
//     this device and operator.admin clients (the control UI) see it. The
//     call waits for the decision; expiry, a request nobody may see
//     (decision null at once) and MCP cancellation fail it, and a cancelled
//     or timed-out request is withdrawn with a deny.
//   - With neither, the call fails closed: "no approval route is
//     configured".
//
// No agent answers an approval an openclaw-go policy raised:
// permissions_respond of a plugin approval raised by any openclaw-go bridge
// (its own MCP session, another session, or pluginId "openclaw-go" seen from
// another serve), or of an id the bridge cannot name exactly (the Gateway
// also resolves prefixes), is refused (ErrAgentApproval) unless
// decide_approval answers allow-once or allow-always for kind "tool", tool
// "permissions_respond" and a request carrying "self_approval" and
// "agent_approval". Humans answer in OpenClaw, through a Claude channel
// reply, or through the MCP client's own form. A human's allow-always is
// remembered per session key and tool ([Options].ApprovalMemory). Each
// routing decision is audited ([Options].Audit, hook decide_approval,
// modules bridge:*).
//
// Routing arguments are canonical before the policy runs: session_key in
// OpenClaw's form (trimmed, lowercased but for Signal and Matrix ids; an
// alias resolved with sessions.describe), the channel filter of
// conversations_list trimmed and lowercased, so the policy, the audit log
// and the Gateway see one value. When the arguments sent differ from those
// the policy saw, a bridge:rewrite record names the module and the
// rewritten argument names (never their values).
//
// # Gateway approvals
//
// Every exec.approval.requested and plugin.approval.requested event is
// also put to decide_approval (kind "exec" or "plugin", built by
// policies.GatewayApprovalRequest) on a bounded worker off the Gateway
// read loop, except the plugin approvals this bridge raised itself.
// allow-once, allow-always and deny are resolved on the Gateway
// (exec.approval.resolve / plugin.approval.resolve); ask leaves the request
// open for a human, and its ttl_ms, when shorter than the request's own
// expiry, denies it if nobody answered in time. Each is audited as module
// [AuditGatewayPolicy]; a failed resolve is logged and audited, never
// fatal.
//
// Reference: docs/protocol-facts.md, from Gateway RPCs to Failure and shutdown.
package bridge
