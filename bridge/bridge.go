package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/gateway/protocol"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/transport"
)

// ChannelMode is the Claude channel mode of `--claude-channel-mode`
// (docs/protocol-facts.md, Claude channel mode).
type ChannelMode string

// The Claude channel modes. Auto and On behave identically: the initialize
// result advertises the experimental claude/channel capabilities and user
// messages are forwarded as notifications/claude/channel. Off removes both.
const (
	ChannelAuto ChannelMode = "auto"
	ChannelOn   ChannelMode = "on"
	ChannelOff  ChannelMode = "off"
)

// ErrInvalidChannelMode is wrapped by [ParseChannelMode] for a value that is
// not auto, on or off.
var ErrInvalidChannelMode = errors.New("bridge: invalid Claude channel mode")

// ParseChannelMode parses s case-insensitively (surrounding spaces ignored);
// "" means [ChannelAuto], OpenClaw's default. Any other value than auto, on or
// off is an error wrapping [ErrInvalidChannelMode] that quotes s.
func ParseChannelMode(s string) (ChannelMode, error) {
	switch m := ChannelMode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return ChannelAuto, nil
	case ChannelAuto, ChannelOn, ChannelOff:
		return m, nil
	}
	return "", fmt.Errorf("%w %q: want auto, on or off", ErrInvalidChannelMode, s)
}

// DefaultServerVersion is the serverInfo.version used when
// Options.ServerVersion is empty.
const DefaultServerVersion = "0.0.0-dev"

// Options configure a [Bridge]. They are copied by [New]; the zero value of
// each field is its documented default, except Enforcer, which is required.
type Options struct {
	// ClaudeChannelMode is the Claude channel mode; "" means ChannelAuto.
	// Parse user input with [ParseChannelMode].
	ClaudeChannelMode ChannelMode
	// Enforcer decides every tools/call (the before_tool_call hook
	// boundary). Required: with a nil Enforcer every tool call fails closed
	// with an isError result, and no tool runs.
	Enforcer policies.Enforcer
	// Limiter, when set, admits every call the Enforcer allowed (and an
	// approval granted) before the tool runs, and refuses the calls over
	// a rate limit with a tool error naming the limit and when to retry;
	// nil limits nothing.
	Limiter policies.Limiter
	// Logger receives the bridge's diagnostics; it must write to stderr or a
	// file, never stdout (stdout carries MCP). nil discards them.
	Logger *slog.Logger
	// Verbose adds the informational lines of `openclaw mcp serve --verbose`
	// (for example "openclaw mcp: pending Claude permission <id>").
	Verbose bool
	// ServerVersion is serverInfo.version of the initialize result; ""
	// means DefaultServerVersion. serverInfo.name is always "openclaw".
	ServerVersion string
	// Now is the clock for approval and Claude permission expiry; nil means
	// time.Now.
	Now func() time.Time

	// ApprovalDecider decides what a before_tool_call require_approval becomes
	// (decide_approval): allow-once or allow-always run the call, deny
	// fails it, ask routes it to a human. It also decides every exec and
	// plugin approval the Gateway announces (except those this bridge
	// raised): allow-once, allow-always and deny are resolved on the
	// Gateway (exec.approval.resolve, plugin.approval.resolve), ask leaves
	// the request open for a human. nil asks a human every time.
	ApprovalDecider policies.ApprovalDecider
	// ApprovalRaiser raises the Gateway plugin approval of an ask when the
	// MCP client did not advertise elicitation. nil: no Gateway route; such
	// a call fails closed with "no approval route is configured".
	ApprovalRaiser ApprovalRaiser
	// ApprovalMemory remembers the allow-always a human gives on the
	// Gateway, per session key and tool (policies.ApprovalMemoryKey); it
	// stands in for the human on a later ask, never for a deny. nil means a
	// memory of the bridge's own, for the life of the process.
	ApprovalMemory *policies.ApprovalMemory
	// Audit receives one decide_approval record per decision the routing
	// makes (modules bridge:elicitation, bridge:gateway, bridge:no-route,
	// bridge:self-approval, bridge:agent-approval, bridge:gateway-policy)
	// and one before_tool_call record per call whose arguments a module
	// rewrote (bridge:rewrite); the ApprovalDecider audits its own. nil
	// discards them.
	Audit policies.AuditSink
}

// notifyQueueSize bounds the notifications waiting to be written; beyond
// it, notifications are dropped and logged, so a stalled MCP client never
// stalls the Gateway read loop.
const notifyQueueSize = 1024

// Bridge is the channel bridge behind `openclaw mcp serve`: it serves the
// nine OpenClaw tools over MCP, keeps the event queue and the open
// approvals fed by [Bridge.HandleGatewayEvent], and sends Claude channel
// notifications. Create it with [New], run it with [Bridge.Serve], stop it
// with [Bridge.Close]. Its methods are safe for concurrent use.
type Bridge struct {
	gw      GatewayConn
	mode    ChannelMode
	policy  policies.Enforcer
	limiter policies.Limiter
	log     *slog.Logger
	verbose bool
	now     func() time.Time

	server    *mcp.Server
	queue     *eventQueue
	approvals *approvalTracker
	claude    *claudePermissions
	routing   *routing
	gwDecide  gatewayDecider // decide_approval for Gateway approvals

	conn     atomic.Pointer[bridgeConn] // the MCP connection of the running Serve
	handoffs sync.Map                   // token → *decidedCall: require_approval calls the local path handed to go-sdk

	serverInfoMeta []byte // the _meta of a 2026-07-28 result
	outbox         chan notification
	serving        atomic.Bool

	closeOnce sync.Once
	closed    chan struct{}

	initReadOnce sync.Once     // closes initRead
	initRead     chan struct{} // closed once an initialize request is read
	initOnce     sync.Once     // closes initAnswered
	initAnswered chan struct{} // closed once the initialize response is written
}

// InitializeRead is closed once an initialize request has been read, and
// InitializeAnswered once its response has been written. `mcp serve` waits
// on them before it stops writing on a fatal Gateway failure, so that, as
// in OpenClaw, initialize is answered even when the Gateway turns out to be
// unreachable (docs/protocol-facts.md, Failure and shutdown).
func (b *Bridge) InitializeRead() <-chan struct{} { return b.initRead }

// InitializeAnswered: see [Bridge.InitializeRead].
func (b *Bridge) InitializeAnswered() <-chan struct{} { return b.initAnswered }

// notification is one server→client notification waiting to be written;
// sent runs after a successful write.
type notification struct {
	method string
	params json.RawMessage
	sent   func()
}

// ErrServing is returned by [Bridge.Serve] when another Serve of the same
// bridge is running: one bridge serves one MCP client, as `mcp serve` does.
var ErrServing = errors.New("bridge: already serving an MCP client")

// ErrClosed is returned by [Bridge.Serve] after [Bridge.Close].
var ErrClosed = errors.New("bridge: closed")

// New returns a bridge over gw configured by opts (nil means all defaults,
// which leaves Enforcer nil: see [Options]). It starts nothing.
func New(gw GatewayConn, opts *Options) *Bridge {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ClaudeChannelMode == "" {
		o.ClaudeChannelMode = ChannelAuto
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.ServerVersion == "" {
		o.ServerVersion = DefaultServerVersion
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	b := &Bridge{
		gw: gw, mode: o.ClaudeChannelMode, policy: o.Enforcer, limiter: o.Limiter, log: o.Logger, verbose: o.Verbose, now: o.Now,
		queue:     newEventQueue(),
		approvals: newApprovalTracker(o.Now),
		claude:    newClaudePermissions(o.Now),
		routing:   newRouting(&o),
		outbox:    make(chan notification, notifyQueueSize),
		closed:    make(chan struct{}),

		initRead:     make(chan struct{}),
		initAnswered: make(chan struct{}),
	}
	b.server = b.newServer(o.ServerVersion)
	b.serverInfoMeta = serverInfoMeta(o.ServerVersion)
	return b
}

// channelOn reports whether Claude channel notifications are enabled.
func (b *Bridge) channelOn() bool { return b.mode != ChannelOff }

func (b *Bridge) newServer(version string) *mcp.Server {
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	if b.channelOn() {
		caps.Experimental = map[string]any{
			"claude/channel":            map[string]any{},
			"claude/channel/permission": map[string]any{},
		}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "openclaw", Version: version}, &mcp.ServerOptions{
		Capabilities: caps,
		Logger:       slog.New(quietHandler{b.log.Handler()}),
	})
	for i := range toolSpecs {
		spec := &toolSpecs[i]
		s.AddTool(&mcp.Tool{Name: spec.name, Description: spec.description, InputSchema: spec.schema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return b.callTool(ctx, req, spec), nil
			})
	}
	s.AddReceivingMiddleware(b.intercept)
	return s
}

// intercept records the go-sdk session of the bridge's connection (for
// the calls of the local path) and makes go-sdk answer as OpenClaw does
// where they differ:
// tools/call of a tool the bridge does not have is an isError result, not a
// JSON-RPC error (such a call reaches neither a tool nor the policy), and
// the resources and prompts methods, which OpenClaw does not serve, are
// "Method not found" instead of go-sdk's empty lists.
func (b *Bridge) intercept(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
			if c := b.conn.Load(); c != nil && c.session.Load() == nil {
				c.session.Store(ss)
			}
		}
		switch method {
		case "tools/call":
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && toolByName(p.Name) == nil {
				return errorResult(fmt.Sprintf("MCP error -32602: Tool %s not found", p.Name)), nil
			}
		case "resources/list", "resources/templates/list", "resources/read", "resources/subscribe",
			"resources/unsubscribe", "prompts/list", "prompts/get":
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found"}
		}
		return next(ctx, method, req)
	}
}

// Serve runs the MCP server on t until the client disconnects (for stdio:
// stdin reaches EOF) or ctx ends, and returns nil for either. It returns
// [ErrServing] while another Serve runs, [ErrClosed] after Close, or the
// transport's error. Serve does not close the bridge: call [Bridge.Close]
// to release pending events_wait calls.
func (b *Bridge) Serve(ctx context.Context, t mcp.Transport) error {
	select {
	case <-b.closed:
		return ErrClosed
	default:
	}
	if !b.serving.CompareAndSwap(false, true) {
		return ErrServing
	}
	defer b.serving.Store(false)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { b.writeNotifications(ctx) })
	defer wg.Wait()
	defer cancel()

	if lt, ok := t.(interface {
		AnswerLocally(transport.LocalHandler)
	}); ok {
		lt.AnswerLocally(func(req *jsonrpc.Request) transport.LocalAnswer { return b.answerLocally(ctx, req) })
	}
	err := b.server.Run(ctx, &bridgeTransport{inner: t, b: b})
	b.conn.Store(nil)
	if err != nil && ctx.Err() != nil {
		return nil // ctx ended: a requested shutdown, not a failure
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// writeNotifications writes queued notifications to the current MCP
// connection until ctx ends.
func (b *Bridge) writeNotifications(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-b.outbox:
			c := b.conn.Load()
			var err error
			if c == nil {
				err = errors.New("no MCP client connected")
			} else {
				err = c.Write(ctx, &jsonrpc.Request{Method: n.method, Params: n.params})
			}
			if err != nil {
				b.log.Warn("openclaw mcp: notification "+n.method+" failed", "error", err)
				continue
			}
			if n.sent != nil {
				n.sent()
			}
		}
	}
}

// notify queues a notification without blocking; when the queue is full the
// notification is dropped and logged.
func (b *Bridge) notify(method string, params []byte, sent func()) {
	select {
	case b.outbox <- notification{method: method, params: params, sent: sent}:
	default:
		b.log.Warn("openclaw mcp: notification "+method+" failed", "error", "notification queue full")
	}
}

// Close shuts the bridge down: every pending events_wait returns
// `event:null` at once (and later ones too), the approval sweeper stops,
// the worker that puts Gateway approvals to decide_approval ends (Close
// waits for it; the approvals it had not resolved stay open for a human),
// and later Serve calls fail with [ErrClosed]. It does not end a running Serve
// (cancel its ctx) and does not close the GatewayConn. Close is idempotent,
// safe concurrently, and always returns nil.
func (b *Bridge) Close() error {
	b.closeOnce.Do(func() {
		close(b.closed)
		b.queue.close()
		b.approvals.close()
		b.gwDecide.close()
	})
	return nil
}

// HandleGatewayEvent consumes one Gateway event frame: name is its "event"
// field, payload its raw "payload". The bridge uses session.message and the
// four *.approval.* events (docs/protocol-facts.md, Gateway events) and ignores the rest.
// The Gateway client calls it from its read loop, one event at a time; it
// never blocks on the MCP client nor waits on the Gateway: an
// *.approval.requested event is handed to a bounded worker that asks
// Options.ApprovalDecider and resolves the approval. A malformed payload is logged as
// "openclaw mcp: gateway event <name> failed" and dropped.
func (b *Bridge) HandleGatewayEvent(name string, payload json.RawMessage) {
	var err error
	switch name {
	case protocol.EventSessionMessage:
		err = b.onSessionMessage(payload)
	case protocol.EventExecApprovalRequested, protocol.EventPluginApprovalRequested,
		protocol.EventExecApprovalResolved, protocol.EventPluginApprovalResolved:
		err = b.onApproval(name, payload)
	default:
		return
	}
	if err != nil {
		b.log.Warn("openclaw mcp: gateway event "+name+" failed", "error", err)
	}
}

// quietHandler demotes the MCP SDK's lifecycle records ("server run start",
// "server session connected", …) below Warn to Debug, so that stderr of
// `openclaw mcp serve` shows them only with --verbose. go-sdk's "server run
// cancelled" is one of them although it logs it at Error: Serve's ctx
// ending is a requested shutdown, which Serve reports as success.
type quietHandler struct{ slog.Handler }

// sdkRunCancelled is the message go-sdk's Server.Run logs at Error when its
// ctx ends.
const sdkRunCancelled = "server run cancelled"

func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	if l < slog.LevelWarn {
		l = slog.LevelDebug
	}
	return h.Handler.Enabled(ctx, l) // an Error passes; Handle may demote it
}

func (h quietHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == sdkRunCancelled {
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	if r.Level < slog.LevelWarn {
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

func (h quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(as)}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.Handler.WithGroup(name)}
}
