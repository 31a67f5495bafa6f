// Package runtime will hold the embedded MCP client runtime: connecting the
// servers of mcp.servers, importing their tools as server__tool, routing
// calls through the before_tool_call hook boundary, and owning their
// lifecycle (DESIGN.md §2). It has no code yet: the work is tracked as the
// "Embedded client runtime and transports" issue.
package runtime
