// Package proxy serves the embedded runtime's imported catalog as one MCP
// server: `openclaw mcp proxy`. Every tools/call is routed to
// runtime.Session.CallTool, so it passes before_tool_call like any other
// call. Create the session with runtime.Options.Surface set to
// policies.SurfaceProxy; each call carries the identity of the MCP client
// that made it (clientInfo of its initialize request) via runtime.WithCaller.
//
// A policy block is answered as an MCP tool error (isError) whose text is the
// module's reason. A tool whose server is down leaves the served tools; a
// client that still calls it gets a tool error saying the server is
// unavailable, since when and why (runtime.UnavailableError). The catalog is compared with the served tools before every
// tools/list, when a server reports a change (with a Relay) or else after
// every tools/call; added and removed tools are applied with Server.AddTool
// and Server.RemoveTools, which sends notifications/tools/list_changed to
// connected clients.
//
// Beyond tools the proxy passes through resources and resource templates
// (reads routed by the runtime to the server that owns the URI), prompts
// (under exposed names from the same sanitizer as tools), completion,
// logging (logging/setLevel fanned out; upstream log messages relayed to
// the client whose call produced them, else to every client), resource
// subscriptions and notifications/resources/updated, progress and
// cancellation. It advertises tools always, and resources, prompts,
// completions and logging only when a connected server has them (decided
// once, in New).
//
// With a [Relay] (Options.Relay, installed in the runtime session's
// Options before it connects), the servers' sampling, elicitation and roots
// requests go to the client whose tools/call is in flight on that server
// (else to the first connected client that declared the capability); list
// changes of tools, resources and prompts are relayed to connected clients
// as soon as a server notifies them, by a worker goroutine that Close ends;
// and a require_approval that decide_approval leaves to a human is asked to
// the calling client through MCP elicitation (form mode, one "approve"
// boolean) when it declared elicitation, else refused. A client on
// protocol 2026-07-28, where a server may not send requests during a call,
// gets them as input requests (SEP-2322 multi round-trip): the call answers
// with the input requests, the upstream call waits (at most RoundTimeout),
// and the client's retry carries the responses back to it. Outside a call,
// such a client is never chosen for a server's request.
//
// The package never loads Wasm: the policy engine is handed in through the
// runtime session's Options.
package proxy

//lint:file-ignore SA1019 logging and roots are deprecated by SEP-2577 but still served during its deprecation window: the proxy announces and relays them on purpose

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw-go/openclaw/internal/jsonw"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/runtime"
)

// Options configure a proxy server. A nil *Options means the defaults.
type Options struct {
	// Name and Version are the serverInfo of the initialize answer;
	// empty means "openclaw-go-proxy" and "dev".
	Name, Version string
	// Logger receives the diagnostics (tools skipped or patched, catalog
	// errors). nil means slog.Default().
	Logger *slog.Logger
	// Relay, installed in the session's runtime.Options before the
	// session connected, carries server-to-client requests, log messages,
	// list changes and approval questions to the downstream clients. nil
	// means none of these: list changes are then relayed on next use
	// only, and require_approval goes to the session's own Options.AskHuman.
	Relay *Relay
	// ProtocolVersions, when set, narrows the MCP protocol revisions the
	// proxy negotiates (mcp.ServerOptions.SupportedProtocolVersions), e.g.
	// []string{"2025-11-25"} so that clients receive the servers'
	// sampling, elicitation and roots requests during a call. nil means
	// every revision the go-sdk supports.
	ProtocolVersions []string
	// UtilityTools serves the runtime's utility tools as well
	// (`<server>__resources_list`, `__resources_read`, `__prompts_list`,
	// `__prompts_get`, runtime.Tool.Utility). false (the default) leaves
	// them out: the proxy serves the servers' resources and prompts
	// themselves, and a client sees the tools the servers have.
	UtilityTools bool
	// StateKey is the HMAC-SHA256 key that seals the requestState the
	// proxy hands a 2026-07-28 client with input requests (SEP-2322), at
	// least MinStateKeyBytes long: replicas behind one load balancer share
	// it, so that any of them resumes a request another began, and no
	// client can forge or alter a state. nil means a random key per
	// process.
	StateKey []byte
	// StateNonces records the requestStates used, so that each runs its
	// request once: replicas share one (*sharedstate.State). nil means
	// NewMemoryStateNonces (one process).
	StateNonces StateNonces
	// TracerProvider, when set, traces every MCP request a client sends
	// (one server span each, docs/tracing.md); hand the same provider to
	// the session's runtime.Options.TracerProvider so that the policy and
	// upstream spans of a call are its children. nil traces nothing.
	TracerProvider trace.TracerProvider
}

// Proxy is an MCP server whose tools are a runtime session's catalog.
// Its methods are safe for concurrent use.
type Proxy struct {
	sess     *runtime.Session
	server   *mcp.Server
	logger   *slog.Logger
	utilOpts bool         // serve the utility tools (Options.UtilityTools)
	tracer   trace.Tracer // nil when tracing is off (Options.TracerProvider)

	mu     sync.Mutex            // serializes Sync, guards served
	served map[string]servedTool // exposed name → what is served

	caps *mcp.ServerCapabilities // what upstream servers offer (at New)

	passMu    sync.Mutex                              // serializes the resource and prompt syncs; guards below
	resources map[string]servedItem                   // URI → served resource
	templates map[string]servedItem                   // URI template → served template
	prompts   map[string]servedItem                   // exposed name → served prompt
	levels    map[*mcp.ServerSession]mcp.LoggingLevel // logging/setLevel of each client

	subMu sync.Mutex
	subs  map[string]map[*mcp.ServerSession]bool // URI → downstream subscribers

	life     context.Context // ends at Close
	end      context.CancelFunc
	workDone chan struct{} // closed when the worker ends; nil without a Relay

	states   *stateSealer // seals the requestState of input requests
	nonces   StateNonces  // the requestStates used (Options.StateNonces)
	roundsMu sync.Mutex
	rounds   map[string]*rounds // requestState → a call waiting for its client's input

	impl         *mcp.Implementation // the serverInfo
	chainMu      sync.Mutex
	chain        mcp.MethodHandler // the receiving middleware around leanCallTool (use)
	leanRevision bool              // the server negotiates 2026-07-28: the lean path may serve it
	noLean       atomic.Bool       // the lean path is off (tests)
	leanServed   atomic.Uint64     // requests the lean path answered (tests)

	// Relayed notifications a client did not get (its stream or session
	// had ended), by kind; see NotificationsDropped.
	droppedLogs, droppedProgress atomic.Uint64
}

// NotificationsDropped returns how many upstream notifications/message
// (logs) and notifications/progress (progress) the proxy could not relay
// to the client they were for, because its session or its call's stream
// had ended. A log line the client's logging/setLevel filters out is not
// counted.
func (p *Proxy) NotificationsDropped() (logs, progress uint64) {
	return p.droppedLogs.Load(), p.droppedProgress.Load()
}

// servedTool is one served tool: the definition and the upstream
// definition (pointer and JSON) it was made from, compared to spot changes:
// an unchanged pointer costs no encoding.
type servedTool struct {
	def       *mcp.Tool
	upstream  []byte
	src       *mcp.Tool     // the runtime's definition upstream was encoded from
	headers   []paramHeader // the Mcp-Param-* headers of its arguments (lean.go)
	headersOK bool          // headers could be read: the lean path may serve it
}

// New builds the MCP server for sess and serves its current catalog:
// sess.Tools is called once (connect sess first). The error is the
// catalog's. The server is run by the caller (Server().Run or Connect).
func New(ctx context.Context, sess *runtime.Session, opts *Options) (*Proxy, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "openclaw-go-proxy"
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	p := &Proxy{
		sess: sess, logger: o.Logger, served: map[string]servedTool{}, utilOpts: o.UtilityTools,
		resources: map[string]servedItem{}, templates: map[string]servedItem{}, prompts: map[string]servedItem{},
		levels: map[*mcp.ServerSession]mcp.LoggingLevel{}, subs: map[string]map[*mcp.ServerSession]bool{},
		rounds: map[string]*rounds{},
	}
	states, err := newStateSealer(o.StateKey)
	if err != nil {
		return nil, err
	}
	p.states = states
	p.nonces = o.StateNonces
	if p.nonces == nil {
		p.nonces = NewMemoryStateNonces()
	}
	up := sess.Capabilities()
	// tools is announced even while the catalog is empty, so that a client
	// listens for list_changed.
	p.caps = &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	sopts := &mcp.ServerOptions{
		Capabilities: p.caps, SupportedProtocolVersions: o.ProtocolVersions,
		// A client's roots changed: the servers ask roots/list again.
		RootsListChangedHandler: func(context.Context, *mcp.RootsListChangedRequest) { sess.RootsChanged() },
	}
	if up.Resources != nil {
		p.caps.Resources = &mcp.ResourceCapabilities{ListChanged: true, Subscribe: up.Resources.Subscribe}
		if up.Resources.Subscribe {
			sopts.SubscribeHandler, sopts.UnsubscribeHandler = p.subscribe, p.unsubscribe
		}
	}
	if up.Prompts != nil {
		p.caps.Prompts = &mcp.PromptCapabilities{ListChanged: true}
	}
	if up.Completions != nil {
		p.caps.Completions = &mcp.CompletionCapabilities{}
		sopts.CompletionHandler = p.complete
	}
	if up.Logging != nil {
		p.caps.Logging = &mcp.LoggingCapabilities{}
	}
	if up.Extensions[runtime.TasksExtension] != nil {
		p.caps.Extensions = map[string]any{runtime.TasksExtension: map[string]any{}}
	}
	p.impl = &mcp.Implementation{Name: o.Name, Version: o.Version}
	p.server = mcp.NewServer(p.impl, sopts)
	p.leanRevision = o.ProtocolVersions == nil || slices.Contains(o.ProtocolVersions, sessionlessRevision)
	p.use(requesterPrincipal, withoutCacheHints, p.syncBeforeList, p.passthroughMiddleware, p.taskMiddleware)
	if err := p.serveTasks(); err != nil {
		return nil, err
	}
	if o.TracerProvider != nil {
		// Added last, so outermost: the span covers the proxy's own work.
		p.tracer = o.TracerProvider.Tracer(tracerName)
		p.use(p.traceRequests)
	}
	p.life, p.end = context.WithCancel(context.WithoutCancel(ctx))
	if err := p.Sync(ctx); err != nil {
		p.end()
		return nil, err
	}
	for what, fn := range map[string]func(context.Context) error{"resources": p.syncResources, "prompts": p.syncPrompts} {
		if err := fn(ctx); err != nil {
			p.logger.Warn("proxy: "+what+" not served yet; listed again on next use", "err", err)
		}
	}
	if o.Relay != nil {
		if err := o.Relay.attach(p); err != nil {
			p.end()
			return nil, err
		}
		p.workDone = make(chan struct{})
		go p.work(o.Relay)
	}
	return p, nil
}

// Server returns the MCP server to run on a transport.
func (p *Proxy) Server() *mcp.Server { return p.server }

// Tools returns the exposed names currently served, sorted.
func (p *Proxy) Tools() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.served))
}

// unavailable returns the runtime's error for a call of name, a tool that
// is not served because its server is down or the tool pins hide it; nil
// when it is served or unknown.
func (p *Proxy) unavailable(name string) error {
	p.mu.Lock()
	_, served := p.served[name]
	p.mu.Unlock()
	if served {
		return nil
	}
	return p.sess.Unavailable(name)
}

// awaitTool makes a call of name, a tool not served (yet), wait for the
// servers still starting (runtime.Options.ConnectWait), one of which may
// own it, and serves what they brought before the call is dispatched.
func (p *Proxy) awaitTool(ctx context.Context, name string) {
	p.mu.Lock()
	_, served := p.served[name]
	p.mu.Unlock()
	if served || p.sess.WaitConnected(ctx) != nil {
		return
	}
	p.warnSync("tools", p.Sync(ctx))
}

// withoutCacheHints leaves the caching hints ttlMs and cacheScope, which
// go-sdk writes on every list result, out of the results for a client that
// negotiated a revision before 2026-07-28 (docs/protocol-facts.md): those
// revisions do not define them.
func withoutCacheHints(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || res == nil {
			return res, err
		}
		if _, ok := res.(mcp.CacheableResult); !ok {
			return res, err
		}
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
			if ip := ss.InitializeParams(); ip != nil && ip.ProtocolVersion < sessionlessRevision {
				return uncachedResult{res}, nil
			}
		}
		return res, nil
	}
}

// uncachedResult is a result written without its ttlMs and cacheScope
// members.
type uncachedResult struct{ mcp.Result }

func (r uncachedResult) MarshalJSON() ([]byte, error) {
	raw, err := json.Marshal(r.Result)
	if err != nil {
		return nil, err
	}
	out := append(make([]byte, 0, len(raw)), '{')
	err = jsonw.Members(raw, func(k, v []byte) {
		if string(k) == "ttlMs" || string(k) == "cacheScope" {
			return
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(append(out, '"'), k...), '"', ':'), v...)
	})
	if err != nil {
		return nil, err
	}
	return append(out, '}'), nil
}

// syncBeforeList brings the served tools up to date before a tools/list is
// answered, so a listing never shows a catalog the runtime knows is stale.
func (p *Proxy) syncBeforeList(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "tools/list" {
			if err := p.Sync(ctx); err != nil {
				p.logger.Warn("proxy: catalog not refreshed; serving the previous one", "err", err)
			}
		}
		return next(ctx, method, req)
	}
}

// Sync compares the runtime's catalog with the served tools and adds,
// replaces and removes tools so they match; connected clients receive
// notifications/tools/list_changed when anything changed. A tool whose
// input schema's root has no "type" is served with "type":"object" added
// (go-sdk serves only object-typed input schemas; the other keywords are
// kept); one whose schema is not an object schema is served with its
// schema patched to {"type":"object"} (logged); one whose schema cannot be
// read is skipped (logged). The error is the runtime's (session closed, catalog
// unnamed).
func (p *Proxy) Sync(ctx context.Context) error {
	_, err := p.syncTools(ctx)
	return err
}

// NotifyToolsChanged brings the served tools up to date and sends
// notifications/tools/list_changed to the connected clients even when
// nothing changed here: a change on another replica (a reload, a policy
// swap) tells every replica's clients to list again. The error is the
// runtime's, as for [Proxy.Sync].
func (p *Proxy) NotifyToolsChanged(ctx context.Context) error { return p.relayToolsChanged(ctx) }

// relayToolsChanged brings the served tools up to date after a server
// reported notifications/tools/list_changed, and passes the notification
// on to the connected clients (their subscription streams on 2026-07-28)
// even when the served definitions did not change: the server said its
// list changed, and a client re-listing finds out what did.
func (p *Proxy) relayToolsChanged(ctx context.Context) error {
	changed, err := p.syncTools(ctx)
	if err != nil || changed {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.served) == 0 {
		return nil
	}
	// go-sdk sends notifications/tools/list_changed only from its own
	// changes: the tool served first is served again, unchanged.
	name := slices.Min(slices.Collect(maps.Keys(p.served)))
	p.server.AddTool(p.served[name].def, p.handler(name))
	return nil
}

// syncTools is Sync; changed reports whether a served tool was added,
// replaced or removed.
func (p *Proxy) syncTools(ctx context.Context) (changed bool, err error) {
	tools, err := p.sess.Tools(ctx)
	if err != nil {
		return false, fmt.Errorf("proxy: list the runtime catalog: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.utilOpts {
		tools = slices.DeleteFunc(tools, func(t runtime.Tool) bool { return t.Utility != "" })
	}
	want := make(map[string]runtime.Tool, len(tools))
	for _, t := range tools {
		want[t.Name] = t
	}
	var gone []string
	for name := range p.served {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		p.server.RemoveTools(gone...)
		changed = true
		for _, n := range gone {
			delete(p.served, n)
		}
	}
	for _, t := range tools {
		if prev, ok := p.served[t.Name]; ok && prev.src == t.Upstream {
			continue // the same definition the runtime listed before
		}
		raw, err := json.Marshal(t.Upstream)
		if err != nil {
			p.logger.Warn("proxy: tool skipped: its definition does not encode", "tool", t.Name, "server", t.Server, "err", err)
			continue
		}
		if prev, ok := p.served[t.Name]; ok && string(prev.upstream) == string(raw) {
			prev.src = t.Upstream
			p.served[t.Name] = prev
			continue
		}
		def, err := p.definition(t)
		if err != nil {
			p.logger.Warn("proxy: tool skipped", "tool", t.Name, "server", t.Server, "err", err)
			if _, ok := p.served[t.Name]; ok {
				p.server.RemoveTools(t.Name)
				delete(p.served, t.Name)
				changed = true
			}
			continue
		}
		p.server.AddTool(def, p.handler(t.Name))
		schema, _ := def.InputSchema.(json.RawMessage) // objectSchema's
		headers, ok := paramHeaders(schema)
		p.served[t.Name] = servedTool{def: def, upstream: raw, src: t.Upstream, headers: headers, headersOK: ok}
		changed = true
	}
	return changed, nil
}

// definition is the tool served for catalog entry t: the upstream
// definition under the exposed name, with its raw input schema typed
// "object" at the root (objectSchema; go-sdk refuses any other).
func (p *Proxy) definition(t runtime.Tool) (*mcp.Tool, error) {
	if t.Upstream == nil {
		return nil, errors.New("no upstream definition")
	}
	def := *t.Upstream // shallow: the shared upstream is never modified
	def.Name = t.Name
	var schema json.RawMessage
	if t.Upstream.InputSchema != nil {
		raw, err := json.Marshal(t.Upstream.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("input schema does not encode: %w", err)
		}
		schema = raw
	}
	served, replaced := objectSchema(schema)
	if replaced {
		p.logger.Warn("proxy: input schema is not an object schema; served as {\"type\":\"object\"}",
			"tool", t.Name, "server", t.Server, "schema", string(schema))
	}
	def.InputSchema = served
	if def.OutputSchema != nil {
		raw, err := json.Marshal(def.OutputSchema)
		if err != nil {
			return nil, fmt.Errorf("output schema does not encode: %w", err)
		}
		def.OutputSchema = json.RawMessage(raw)
	}
	return &def, nil
}

// objectSchema is the input schema the proxy serves for the upstream's
// schema: go-sdk's Server.AddTool takes only a schema whose root has
// "type":"object". A JSON object with no "type" member (a root $ref,
// allOf, ...) gets that one member added in front, its own bytes kept; an
// object typed "object" is served as it is; anything else (no schema,
// null, another type, not an object) is replaced by {"type":"object"}, and
// replaced says so.
func objectSchema(schema json.RawMessage) (served json.RawMessage, replaced bool) {
	bare := json.RawMessage(`{"type":"object"}`)
	var probe map[string]json.RawMessage
	if json.Unmarshal(schema, &probe) != nil || probe == nil {
		return bare, true
	}
	typ, ok := probe["type"]
	if !ok {
		if len(probe) == 0 {
			return bare, false
		}
		rest := bytes.TrimSpace(schema)[1:] // the members after '{'
		return json.RawMessage(append([]byte(`{"type":"object",`), rest...)), false
	}
	var s string
	if json.Unmarshal(typ, &s) != nil || s != "object" {
		return bare, true
	}
	return schema, false
}

// handler routes a tools/call of the exposed name to the runtime session,
// with the caller's identity in ctx and progress relayed when the client
// asked for it. It serves both paths of a call: go-sdk's (a ServerSession
// per request) and the lean one (lean.go, no session); what it knows of the
// client it reads from the request (its _meta on 2026-07-28, else its
// session's initialize).
func (p *Proxy) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c := clientOf(req)
		ctx = runtime.WithCaller(ctx, c.caller)
		// Who the bearer token was verified as (HTTPOptions.OAuth, Tokens).
		ctx = runtime.WithIdentity(ctx, identityFromExtra(req.Extra))
		// The Relay finds the client of this call here.
		ctx = context.WithValue(ctx, downstreamKey{}, c)
		if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
			ss := req.Session
			ctx = runtime.WithProgress(ctx, func(pr runtime.Progress) {
				// A client that went away misses progress; it is counted.
				if err := ss.NotifyProgress(context.WithoutCancel(ctx), &mcp.ProgressNotificationParams{
					ProgressToken: tok, Progress: pr.Progress, Total: pr.Total, Message: pr.Message,
				}); err != nil {
					p.droppedProgress.Add(1)
					p.logger.Debug("proxy: progress not relayed", "tool", name, "err", err)
				}
			})
		}
		if c.mrtr {
			// A 2026-07-28 client: the servers learn what it can answer,
			// and their requests during the call travel as input requests
			// (passthrough.go).
			ctx = runtime.WithClientCapabilities(ctx, c.caps)
			return p.callRounds(ctx, name, req, c)
		}
		res, err := p.sess.CallTool(ctx, name, req.Params.Arguments)
		return p.answer(ctx, res, err)
	}
}

// client is the MCP client whose tools/call is being served, as the
// policies, the Relay and the rounds of a call see it.
type client struct {
	ss     *mcp.ServerSession      // nil for a call the lean path serves (no session)
	sid    string                  // the session's id; "" when stateless
	caller policies.Caller         // its clientInfo
	mrtr   bool                    // protocol 2026-07-28 or later (multiRoundTrip)
	caps   *mcp.ClientCapabilities // what it declared, never nil
}

// clientOf returns the client of req: its session's initialize (on
// 2026-07-28 go-sdk fills it in from the request's _meta), or, without a
// session, the request's own _meta.
func clientOf(req *mcp.CallToolRequest) *client {
	c := &client{ss: req.Session}
	var ci *mcp.Implementation
	if ss := req.Session; ss != nil {
		c.sid, c.mrtr, c.caps = ss.ID(), multiRoundTrip(ss), clientCapabilities(ss)
		if ip := ss.InitializeParams(); ip != nil {
			ci = ip.ClientInfo
		}
	} else {
		c.mrtr, c.caps, ci = req.ProtocolVersion() >= sessionlessRevision, requestCapabilities(req), req.ClientInfo()
	}
	if ci != nil {
		c.caller = policies.Caller{Name: ci.Name, Version: ci.Version}
	}
	return c
}

// answer turns the runtime's answer to a call into the client's.
func (p *Proxy) answer(ctx context.Context, res *mcp.CallToolResult, err error) (*mcp.CallToolResult, error) {
	if p.workDone == nil {
		// Without a Relay no worker relays list changes as they come: a
		// call is a use of the catalog, so a list_changed the server sent
		// meanwhile is relayed now. (With one, this would only cost every
		// call a catalog comparison.)
		defer func() {
			if err := p.Sync(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, runtime.ErrClosed) {
				p.logger.Warn("proxy: catalog not refreshed after a call", "err", err)
			}
		}()
	}
	if err == nil {
		return res, nil
	}
	if errors.Is(err, runtime.ErrUnknownTool) || errors.Is(err, runtime.ErrClosed) {
		return nil, err // a protocol error: the tool is not there
	}
	if je := missingCapabilityError(err); je != nil {
		return nil, je // the server refused before running: a protocol error (HTTP 400)
	}
	var pe *runtime.PolicyError
	if errors.As(err, &pe) {
		return toolError(pe.Message()), nil
	}
	// Paused, not connected, failed upstream: the model may retry or
	// choose another tool, so it is told as a tool error.
	return toolError(err.Error()), nil
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// clientCapabilities returns the capabilities the client of ss declared
// (on 2026-07-28, in the request's _meta), never nil.
func clientCapabilities(ss *mcp.ServerSession) *mcp.ClientCapabilities {
	if ip := ss.InitializeParams(); ip != nil && ip.Capabilities != nil {
		return ip.Capabilities
	}
	return &mcp.ClientCapabilities{}
}

// missingCapabilityError returns the upstream server's
// MissingRequiredClientCapabilityError (-32021) that err carries, else nil.
func missingCapabilityError(err error) *jsonrpc.Error {
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code == mcp.CodeMissingRequiredClientCapabilities {
		return je
	}
	return nil
}
