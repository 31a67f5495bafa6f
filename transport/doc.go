// Package transport will resolve mcp.servers entries into MCP transports
// (stdio children in their own process group, SSE, streamable HTTP) and
// hold the serving transports and secret redaction (DESIGN.md §2). It has
// no code yet: the work is tracked as the "Embedded client runtime and
// transports" issue.
package transport
