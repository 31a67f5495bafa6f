package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/transport"
)

// Defaults of OpenClaw for failure pauses (docs/protocol-facts.md, Defaults and limits).
const (
	// DefaultPauseAfter is the count of consecutive failed calls that
	// pauses a server.
	DefaultPauseAfter = 3
	// DefaultPauseDuration is how long a paused server refuses calls.
	DefaultPauseDuration = 60 * time.Second
	// ListRetryDelay is how long a server whose tools/list failed keeps an
	// empty tool list before the next catalog use lists it again.
	ListRetryDelay = 5 * time.Second
)

// ApprovalRequest is what the embedder's ApprovalFunc is asked: a call that
// a before_tool_call module wants a human to approve, which decide_approval
// left to a human (answer "ask") or which no decider saw.
type ApprovalRequest struct {
	// Tool is the catalog entry called.
	Tool Tool
	// Arguments are the arguments the tool will be called with (after any
	// rewrite by a policy module).
	Arguments json.RawMessage
	// Module is the before_tool_call module that asked; Title,
	// Description and Reason are its verdict's.
	Module, Title, Description, Reason string
	// Timeout is how long the decision may take (from the verdict's
	// timeout_ms or decide_approval's TTL); 0 means only the call's context
	// bounds it. The callback's ctx carries this deadline.
	Timeout time.Duration
	// SessionKey and Caller are the session's (Options).
	SessionKey string
	Caller     policies.Caller
}

// ApprovalFunc asks a human. It returns true to let the call run, false to
// refuse it; an error refuses it too, with the error as the reason. It must
// return when ctx ends.
type ApprovalFunc func(ctx context.Context, req *ApprovalRequest) (approved bool, err error)

// EventKind names what happened to a server.
type EventKind string

// Event kinds.
const (
	// EventConnected: the server's MCP session is open.
	EventConnected EventKind = "connected"
	// EventFailed: resolving, connecting or listing failed; Err says why
	// (a *ServerError). The session goes on without the server's tools.
	EventFailed EventKind = "failed"
	// EventToolsChanged: the server sent notifications/tools/list_changed
	// (the catalog is listed again on its next use), or a listing that
	// had failed succeeded in the background (the next use has the tools).
	EventToolsChanged EventKind = "tools_changed"
	// EventPaused: consecutive failures paused the server until Until; Err
	// is the *PausedError calls receive meanwhile.
	EventPaused EventKind = "paused"
	// EventResumed: the pause ended; calls reach the server again.
	EventResumed EventKind = "resumed"
	// EventIdle: the session was idle for Options.IdleTTL and the server
	// was disconnected (a stdio server stopped); the next use reconnects.
	EventIdle EventKind = "idle"
)

// Event reports a change of a server's state to Options.OnEvent.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Server is the server's name in mcp.servers.
	Server string
	// Time is when it happened (wall clock).
	Time time.Time
	// Until is the end of a pause (EventPaused).
	Until time.Time
	// Err is the cause (EventFailed, EventPaused).
	Err error
	// URI is the updated resource (EventResourceUpdated).
	URI string
}

// Options configure a Session. Enforcer and Sanitizer are required: the
// absence of a policy is never a silent allow-all (docs/policy-abi.md §5); hand in a
// policy engine, or chains of the built-in modules.
type Options struct {
	// Enforcer decides every call (before_tool_call, surface "embedded").
	Enforcer policies.Enforcer
	// Limiter, when set, admits every call the Enforcer allowed (and an
	// approval granted) before it reaches the server, and refuses the
	// calls over a rate limit with a *policies.LimitError
	// (policies/engine.Engine implements it with the policy file's
	// rate_limits); nil limits nothing.
	Limiter policies.Limiter
	// Sanitizer names the catalog (sanitize_tool_names). Its answer is
	// validated again (policies.ValidateSanitized) before any name is
	// exposed. A session sets the request's Exposed to the names it exposed
	// so far and leaves out any tool answered a name exposed for another
	// ([RepointedError]).
	Sanitizer policies.Sanitizer
	// ApprovalDecider, when set, answers require_approval outcomes first
	// (decide_approval); nil leaves every one to AskHuman.
	ApprovalDecider policies.ApprovalDecider
	// AskHuman asks the embedder's human (decide_approval's "ask"). nil
	// refuses every call that needs approval and that ApprovalDecider did
	// not allow.
	AskHuman ApprovalFunc
	// Approver names who AskHuman asks (such as "terminal", or
	// "mcp-client" for a proxy asking its caller through elicitation): the
	// module of the audit record of each answer is "approve:" + Approver.
	// "" means "approve:embedder".
	Approver string
	// Audit, when set, receives one record of each answer AskHuman gives
	// (hook decide_approval: allow-once, or deny with the refusal's
	// reason), beside the modules' own records. nil records none.
	Audit policies.AuditSink
	// Caller and SessionKey identify the embedder's agent in hook inputs
	// and audit records; [WithCaller] overrides Caller for one call.
	Caller     policies.Caller
	SessionKey string
	// Surface is the surface hook inputs and approval requests name: ""
	// means policies.SurfaceEmbedded; `openclaw mcp proxy` sets
	// policies.SurfaceProxy.
	Surface policies.Surface
	// Reserved names no imported tool may take: the embedder's own tools
	// (compared ignoring ASCII case).
	Reserved []string
	// OnEvent receives server events (connections, failures, tool list
	// changes, pauses and their ends). It is called synchronously from the
	// goroutine where the event happened, never with a lock held, and must
	// not block long. nil drops events.
	OnEvent func(Event)
	// Logger receives the runtime's and the transports' logs (stderr of
	// stdio servers, skipped output), tagged server=<name>. nil means
	// slog.Default().
	Logger *slog.Logger
	// Transport configures how Server.Entry is resolved; its Logger
	// defaults to Logger. nil means the transport defaults.
	Transport *transport.Options
	// ClientInfo is sent in the MCP handshake; nil means
	// {Name: "openclaw-go", Version: "dev"}.
	ClientInfo *mcp.Implementation
	// CreateMessage, Elicit and ListRoots answer the servers' sampling,
	// elicitation and roots requests (runtime/passthrough.go); each
	// capability is advertised to the servers only when its handler is set.
	// A request that arrives while a tool call is in flight on its server
	// is handled with a ctx carrying that call's values (the most recent
	// call when the server supports parallel calls; CallFromContext names
	// it), so an embedder serving several clients finds the right one;
	// otherwise ctx carries no call. OnLog receives the servers' log
	// messages (see Session.SetLoggingLevel), attributed the same way.
	CreateMessage CreateMessageFunc
	Elicit        ElicitFunc
	ListRoots     ListRootsFunc
	OnLog         LogFunc
	// ProtocolVersion is the MCP revision offered to every server whose
	// entry pins none (config.ServerEntry.ProtocolVersion, the entry's
	// "protocolVersion"): one of [ProtocolVersions]; "" means
	// DefaultProtocolVersion. On "2026-07-28" the session asks
	// server/discover first and falls back to initialize on 2025-11-25 when
	// the server refuses it (a server that knows neither negotiates down as
	// usual); an older revision skips server/discover. A server on
	// 2026-07-28 may not send requests or log messages while it serves a
	// call; it returns input requests instead (SEP-2322), which the runtime
	// answers with the same CreateMessage, Elicit and ListRoots handlers and
	// retries the request with (*InputRequestError when it cannot).
	ProtocolVersion string
	// PauseAfter is the count of consecutive failed calls that pauses a
	// server; 0 means DefaultPauseAfter (3).
	PauseAfter int
	// PauseDuration is how long a pause lasts; 0 means
	// DefaultPauseDuration (60 s).
	PauseDuration time.Duration
	// IdleTTL disconnects every server when the session was not used
	// (Tools, CallTool) for that long and no call is in flight, checking
	// every min(IdleTTL, 60 s); the next use connects and lists them again.
	// It is OpenClaw's mcp.sessionIdleTtlMs; 0 (the default) never reaps.
	// A Server.Transport that cannot connect twice (mcp.InMemoryTransport)
	// becomes a diagnostic after a reap.
	IdleTTL time.Duration
	// ConnectWait, when positive, bounds how long Connect waits for the
	// servers: it returns once every server has connected and listed its
	// tools or failed, or ConnectWait has passed, whichever is first, with
	// the catalog of the servers ready by then. The others go on
	// connecting in the background, each bounded by its own
	// connectionTimeoutMs (not by Connect's ctx), and join the catalog
	// when they answer (EventConnected; the proxy's Relay then sends
	// notifications/tools/list_changed). A CallTool of a name the catalog
	// does not have meanwhile waits for them, since one of them may own it:
	// it looks again each time one of them connects and lists, or fails,
	// and answers ErrUnknownTool once none is left starting. 0 (the
	// default) makes Connect wait for every server.
	ConnectWait time.Duration
	// ToolPolicy is OpenClaw's tool policy from openclaw.json
	// (config.Document.ToolPolicy): tools.profile, tools.allow/alsoAllow/
	// deny and, when Sandboxed, tools.sandbox.tools. A tool it hides is
	// neither listed nor callable (*HiddenToolError). nil hides nothing.
	ToolPolicy *ToolPolicy
	// Pins are the tool definitions the user trusted
	// (config.LoadToolPins of the pins file `openclaw mcp trust` writes;
	// docs/tool-pins.md). Every tool of a server with pins is checked when
	// the catalog is built (at connect and after each list_changed): one
	// whose definition differs from its pin, or that has no pin, is acted
	// on by PinMode. Servers without pins are not checked. nil pins
	// nothing; Session.SetPins replaces them. The session reads them and
	// never modifies them: do not modify them while it uses them.
	Pins *config.ToolPins
	// PinMode is config.PinBlock ("" too: the tool is neither listed nor
	// callable, *PinError), config.PinWarn (listed, a warning logged) or
	// config.PinAudit (listed, an audit record to Audit only). Every
	// mismatch is also audited (hook PinAuditHook) to Audit.
	PinMode config.PinMode
	// TracerProvider, when set, traces every CallTool (docs/tracing.md):
	// a span for the call, a child for each policy module run and one for
	// the upstream tools/call, whose W3C trace context is passed on in
	// the request's _meta (traceparent, tracestate). nil (the default)
	// traces nothing and costs a call nothing.
	TracerProvider trace.TracerProvider
}

// DefaultProtocolVersion is the MCP revision the runtime offers servers
// when neither Options.ProtocolVersion nor the server's entry pins one:
// 2026-07-28, the newest, negotiated with server/discover and falling back
// to 2025-11-25 and older with a server that does not offer it
// (docs/RATIONALE.md, "Why does the runtime offer 2026-07-28 by default?").
const DefaultProtocolVersion = "2026-07-28"

// ProtocolVersions returns the MCP revisions a session can offer a server,
// newest first (go-sdk's).
func ProtocolVersions() []string { return mcp.SupportedProtocolVersions() }

// CheckProtocolVersion returns nil when v is "" or one of
// [ProtocolVersions], and otherwise an error naming v and the revisions
// known.
func CheckProtocolVersion(v string) error {
	if v == "" || slices.Contains(ProtocolVersions(), v) {
		return nil
	}
	return fmt.Errorf("%q is not an MCP revision this client speaks (want one of %s)", v, strings.Join(ProtocolVersions(), ", "))
}
