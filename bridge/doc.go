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
//	b := bridge.New(gw, &bridge.Options{ClaudeChannelMode: mode, Policy: chain, Logger: stderrLogger})
//	defer b.Close()                                 // releases pending events_wait calls
//	// gw's read loop calls b.HandleGatewayEvent(name, payload) for every event frame.
//	err = b.Serve(ctx, &mcp.StdioTransport{})     // until stdin EOF or ctx ends
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
// Reference: shared/reference/openclaw-protocol.md §3–§10.
package bridge
