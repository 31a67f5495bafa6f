package runtime

import (
	"errors"
	"fmt"
	"time"

	"github.com/openclaw-go/openclaw/policies"
)

// ErrClosed is returned by every method of a Session after Close, and by
// calls that Close interrupted.
var ErrClosed = errors.New("runtime: session closed")

// ErrUnknownTool is wrapped by CallTool's error when no tool of the catalog
// has the exposed name asked for.
var ErrUnknownTool = errors.New("runtime: unknown tool")

// ErrNotConnected is wrapped when a call reaches a server that is not
// connected (its connection failed, or Connect was not called).
var ErrNotConnected = errors.New("runtime: MCP server not connected")

// PolicyError refuses a tool call on a policy decision: a before_tool_call
// block, or a require_approval that was not approved (denied by
// decide_approval, refused or not answered by the embedder's callback).
type PolicyError struct {
	// Tool is the exposed name called; Server the raw server name.
	Tool, Server string
	// Decision is policies.Block, or policies.RequireApproval when the
	// approval was not granted.
	Decision policies.Decision
	// Module names the module that decided: the blocking before_tool_call
	// module, or the decide_approval module that denied. It is empty when
	// the embedder's callback refused.
	Module string
	// Reason is the module's reason, or why the approval failed.
	Reason string
	// Err is the error Options.AskHuman returned, when it failed rather
	// than refused (nil otherwise); Unwrap returns it, so a surface can
	// answer what the approver's error says (the proxy: a client that
	// lacks the elicitation capability, -32021).
	Err error
}

// Unwrap returns [PolicyError.Err].
func (e *PolicyError) Unwrap() error { return e.Err }

// Error reads `runtime: tool "web__fetch": ` followed by [PolicyError.Message].
func (e *PolicyError) Error() string {
	return fmt.Sprintf("runtime: tool %q: %s", e.Tool, e.Message())
}

// Message is the refusal as every surface shows it to the caller:
// `blocked by policy "rules": reason`, `approval denied by policy
// "approvals": reason` (decide_approval denied), or `approval denied by
// the approver: reason` (the human, or nobody to ask).
func (e *PolicyError) Message() string {
	if e.Decision == policies.Block {
		return policies.Outcome{Decision: policies.Block, Module: e.Module, Reason: e.Reason}.Message()
	}
	who := "the approver"
	if e.Module != "" {
		who = fmt.Sprintf("policy %q", e.Module)
	}
	if e.Reason == "" {
		return "approval denied by " + who
	}
	return fmt.Sprintf("approval denied by %s: %s", who, e.Reason)
}

// PausedError refuses a call to a server paused after consecutive failures
// (docs/protocol-facts.md, Defaults and limits: 3 failures pause it for 60 s).
type PausedError struct {
	// Server is the raw server name.
	Server string
	// Failures is the count of consecutive failures that paused it.
	Failures int
	// Until is when the pause ends.
	Until time.Time
}

// Error reads `runtime: MCP server "web" is paused after 3 consecutive
// failures; retry after 2026-11-29T21:00:00.000Z`.
func (e *PausedError) Error() string {
	return fmt.Sprintf("runtime: MCP server %q is paused after %d consecutive failures; retry after %s",
		e.Server, e.Failures, e.Until.UTC().Format("2006-01-02T15:04:05.000Z"))
}

// UnavailableError refuses a call of a tool whose server is down (its
// connection ended or failed, and a retry has not connected it yet): the
// tool left the catalog with its server and comes back when the server
// connects again. It wraps ErrNotConnected and the server's last
// diagnostic.
type UnavailableError struct {
	// Tool is the exposed name called; Server the raw server name.
	Tool, Server string
	// Since is when the server was found down.
	Since time.Time
	// Err is the server's last diagnostic (a *ServerError); nil when it
	// has none.
	Err error
}

// Error reads `runtime: MCP server "web" is unavailable since
// 2026-11-29T21:00:00.000Z (tool "web__fetch"): <diagnostic>`.
func (e *UnavailableError) Error() string {
	msg := fmt.Sprintf("runtime: MCP server %q is unavailable since %s (tool %q)",
		e.Server, e.Since.UTC().Format("2006-01-02T15:04:05.000Z"), e.Tool)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrNotConnected and the diagnostic.
func (e *UnavailableError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrNotConnected}
	}
	return []error{ErrNotConnected, e.Err}
}

// ServerError is a server's diagnostic: what failed (Op) and why. A failing server never
// fails the session: its ServerError is listed by Session.Diagnostics and
// returned by calls routed to it.
type ServerError struct {
	// Server is the server's name in mcp.servers.
	Server string
	// Op is the step that failed: "resolve", "connect", "tools/list",
	// "tools/call", "resources/read", "prompts/get",
	// "completion/complete", "close", or "session" (the connection ended
	// while in use: the server exited or closed it).
	Op string
	// Err is the cause, with secrets redacted.
	Err error
}

// Error reads `runtime: MCP server "web": connect: <cause>`.
func (e *ServerError) Error() string {
	return fmt.Sprintf("runtime: MCP server %q: %s: %v", e.Server, e.Op, e.Err)
}

// Unwrap returns Err.
func (e *ServerError) Unwrap() error { return e.Err }

// ListError is the cause of a failed tools/list: a pagination cap exceeded
// or a cursor the server sent twice.
type ListError struct {
	// Reason says which rule broke, e.g. `cursor "c1" repeated` or
	// `more than 128 pages`.
	Reason string
}

// Error reads `listing broke OpenClaw's caps: more than 128 pages` (the
// ServerError around it names the tools/list step).
func (e *ListError) Error() string { return "listing broke OpenClaw's caps: " + e.Reason }
