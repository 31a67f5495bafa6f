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
// depends only on the [GatewayConn] interface it satisfies.
//
// Reference: shared/reference/openclaw-protocol.md §3–§10.
package bridge
