package proxy

//lint:file-ignore SA1019 roots, sampling and logging are deprecated by SEP-2577 but still served during its deprecation window: the passthrough relays them between clients and servers on purpose

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/openclaw-go/openclaw/runtime"
)

// Relay carries what the upstream servers send back to the downstream
// clients of a Proxy: sampling, elicitation and roots requests, log
// messages, list changes and resource updates, and the approval questions
// of require_approval. Create it before the runtime session, Install it in
// the session's Options, and hand it to New in Options.Relay:
//
//	relay := proxy.NewRelay()
//	opts := runtime.Options{Enforcer: eng, Sanitizer: eng, ApprovalDecider: eng, Surface: policies.SurfaceProxy}
//	relay.Install(&opts)
//	sess, _ := runtime.New(servers, &opts)
//	_ = sess.Connect(ctx)
//	p, _ := proxy.New(ctx, sess, &proxy.Options{Relay: relay})
//	defer p.Close()
//
// Until New attaches it, a Relay refuses server-to-client requests and drops
// events (New serves the session's state as it is then). A Relay serves one
// Proxy.
type Relay struct {
	next func(runtime.Event) // the OnEvent that Install found

	mu      sync.Mutex
	p       *Proxy
	changed map[runtime.EventKind]bool
	updated []string
	wake    chan struct{} // capacity 1: the worker has something to do
}

// NewRelay returns a Relay to Install in a runtime session's Options.
func NewRelay() *Relay {
	return &Relay{changed: map[runtime.EventKind]bool{}, wake: make(chan struct{}, 1)}
}

// Install sets o's CreateMessage, Elicit, ListRoots, OnLog and AskHuman to
// the Relay's (Approver "mcp-client": the calling client answers), and wraps o.OnEvent (still called first) so that list
// changes and resource updates reach the Proxy. The upstream servers are
// then told the runtime supports sampling, elicitation and roots; a request
// is refused when no downstream client can answer it.
func (r *Relay) Install(o *runtime.Options) {
	r.next = o.OnEvent
	o.OnEvent = r.onEvent
	o.CreateMessage = r.createMessage
	o.Elicit = r.elicit
	o.ListRoots = r.listRoots
	o.OnLog = r.onLog
	o.AskHuman = r.approve
	o.Approver = "mcp-client"
}

func (r *Relay) attach(p *Proxy) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p != nil {
		return errors.New("proxy: the Relay already serves another Proxy")
	}
	r.p = p
	return nil
}

func (r *Relay) proxy() *Proxy {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.p
}

// onEvent records what the worker must relay. It never blocks: the runtime
// calls it from the goroutine that reads a server's messages.
func (r *Relay) onEvent(ev runtime.Event) {
	if r.next != nil {
		r.next(ev)
	}
	switch ev.Kind {
	case runtime.EventToolsChanged, runtime.EventResourcesChanged, runtime.EventPromptsChanged,
		runtime.EventConnected, runtime.EventFailed, runtime.EventReloaded, runtime.EventRemoved:
	case runtime.EventResourceUpdated:
	default:
		return
	}
	r.mu.Lock()
	if r.p == nil {
		r.mu.Unlock()
		return
	}
	if ev.Kind == runtime.EventResourceUpdated {
		r.updated = append(r.updated, ev.URI)
	} else {
		r.changed[ev.Kind] = true
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default: // the worker is already due
	}
}

// take returns and clears the pending work.
func (r *Relay) take() (changed map[runtime.EventKind]bool, updated []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed, updated = r.changed, r.updated
	r.changed, r.updated = map[runtime.EventKind]bool{}, nil
	return changed, updated
}

// work relays list changes and resource updates as they happen, until
// Close. It is the Proxy's only goroutine.
func (p *Proxy) work(r *Relay) {
	defer close(p.workDone)
	for {
		select {
		case <-p.life.Done():
			return
		case <-r.wake:
		}
		changed, updated := r.take()
		ctx := p.life
		// A connection, a server gone down (its tools leave), or a reload
		// that published a new server set, may change everything served.
		all := changed[runtime.EventConnected] || changed[runtime.EventFailed] || changed[runtime.EventReloaded] || changed[runtime.EventRemoved]
		switch {
		case all:
			p.warnSync("tools", p.Sync(ctx))
		case changed[runtime.EventToolsChanged]:
			p.warnSync("tools", p.relayToolsChanged(ctx))
		}
		if all || changed[runtime.EventResourcesChanged] {
			p.warnSync("resources", p.syncResources(ctx))
		}
		if all || changed[runtime.EventPromptsChanged] {
			p.warnSync("prompts", p.syncPrompts(ctx))
		}
		for _, uri := range updated {
			// Sent to the downstream sessions subscribed to uri.
			_ = p.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
		}
	}
}

func (p *Proxy) warnSync(what string, err error) {
	if err != nil && !errors.Is(err, runtime.ErrClosed) && p.life.Err() == nil {
		p.logger.Warn("proxy: "+what+" not refreshed; serving the previous ones", "err", err)
	}
}

// Close stops relaying list changes and resource updates (the worker
// goroutine of a Proxy made with a Relay). It does not close the runtime
// session or the MCP server's sessions. It is idempotent.
func (p *Proxy) Close() error {
	p.end()
	if p.workDone != nil {
		<-p.workDone
	}
	return nil
}

type downstreamKey struct{}

// downstream returns the client session whose tools/call is in flight in
// ctx (set by the tool handler before runtime.Session.CallTool; the runtime
// hands the call's values to its server-to-client handlers), else the first
// connected client whose capabilities satisfy has.
func (r *Relay) downstream(ctx context.Context, what string, has func(*mcp.ClientCapabilities) bool) (*mcp.ServerSession, error) {
	capsOf := func(ss *mcp.ServerSession) *mcp.ClientCapabilities {
		if ip := ss.InitializeParams(); ip != nil && ip.Capabilities != nil {
			return ip.Capabilities
		}
		return &mcp.ClientCapabilities{}
	}
	if c, ok := ctx.Value(downstreamKey{}).(*client); ok && c != nil {
		if !has(c.caps) {
			return nil, fmt.Errorf("proxy: the MCP client that made this call does not support %s", what)
		}
		if err := c.requestable(); err != nil {
			return nil, err
		}
		return c.ss, nil
	}
	p := r.proxy()
	if p == nil {
		return nil, fmt.Errorf("proxy: no MCP client is connected to answer %s", what)
	}
	for ss := range p.server.Sessions() {
		if has(capsOf(ss)) && requestable(ss) == nil {
			return ss, nil
		}
	}
	return nil, fmt.Errorf("proxy: no connected MCP client supports %s", what)
}

// bound returns ctx ended also by the Close of the Proxy the Relay
// serves: a server-to-client request relayed downstream is failed upstream
// at once when the Proxy closes, rather than left for the server to time
// out (a server waiting on an answer may not exit when its stdin closes).
// The caller must call cancel.
func (r *Relay) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	p := r.proxy()
	if p == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(p.life, func() { cancel(errRelayClosed) })
	return ctx, func() { stop(); cancel(nil) }
}

// errRelayClosed is the cause of a relayed request failed by Proxy.Close.
var errRelayClosed = errors.New("proxy: closed before the MCP client answered")

func (r *Relay) createMessage(ctx context.Context, server string, params *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	if rd, ok := ctx.Value(roundsKey{}).(*rounds); ok {
		resp, err := rd.ask(ctx, params)
		if err != nil {
			return nil, err
		}
		switch res := resp.(type) {
		case *mcp.CreateMessageResult:
			return res, nil
		case *mcp.CreateMessageWithToolsResult:
			out := &mcp.CreateMessageResult{Meta: res.Meta, Model: res.Model, Role: res.Role, StopReason: res.StopReason}
			if len(res.Content) > 0 {
				out.Content = res.Content[0]
			}
			return out, nil
		}
		return nil, fmt.Errorf("proxy: the MCP client answered sampling with %T", resp)
	}
	ss, err := r.downstream(ctx, "sampling", func(c *mcp.ClientCapabilities) bool { return c.Sampling != nil })
	if err != nil {
		return nil, err
	}
	return ss.CreateMessage(ctx, params)
}

func (r *Relay) elicit(ctx context.Context, server string, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	if rd, ok := ctx.Value(roundsKey{}).(*rounds); ok {
		return askFor[*mcp.ElicitResult](ctx, rd, "elicitation", params)
	}
	ss, err := r.downstream(ctx, "elicitation", func(c *mcp.ClientCapabilities) bool { return c.Elicitation != nil })
	if err != nil {
		return nil, err
	}
	return ss.Elicit(ctx, params)
}

func (r *Relay) listRoots(ctx context.Context, server string) (*mcp.ListRootsResult, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	if rd, ok := ctx.Value(roundsKey{}).(*rounds); ok {
		return askFor[*mcp.ListRootsResult](ctx, rd, "roots", &mcp.ListRootsParams{})
	}
	ss, err := r.downstream(ctx, "roots", func(c *mcp.ClientCapabilities) bool {
		return c.RootsV2 != nil
	})
	if err != nil {
		return nil, err
	}
	return ss.ListRoots(ctx, nil)
}

// askFor asks the client of a call in rounds and checks the response type.
func askFor[T mcp.InputResponse](ctx context.Context, rd *rounds, what string, req mcp.InputRequest) (T, error) {
	var zero T
	resp, err := rd.ask(ctx, req)
	if err != nil {
		return zero, err
	}
	res, ok := resp.(T)
	if !ok {
		return zero, fmt.Errorf("proxy: the MCP client answered %s with %T", what, resp)
	}
	return res, nil
}

// onLog relays an upstream log message, its logger prefixed with the
// server name, to the client whose call produced it, else to every client
// (each client's logging/setLevel filters what it receives).
func (r *Relay) onLog(ctx context.Context, server string, params *mcp.LoggingMessageParams) {
	msg := *params
	msg.Logger = server
	if params.Logger != "" {
		msg.Logger = server + "/" + params.Logger
	}
	p := r.proxy()
	if p == nil {
		return
	}
	// A client that went away misses the line; it is counted.
	send := func(ss *mcp.ServerSession) {
		if err := ss.Log(ctx, &msg); err != nil {
			p.droppedLogs.Add(1)
			p.logger.Debug("proxy: log message not relayed", "server", server, "err", err)
		}
	}
	if c, ok := ctx.Value(downstreamKey{}).(*client); ok && c != nil {
		if c.ss != nil {
			send(c.ss)
		}
		// Without a session (the lean path), the request set no log
		// level: as go-sdk's session would, it gets no log lines.
		return
	}
	for ss := range p.server.Sessions() {
		send(ss)
	}
}

// requestable refuses a client on protocol 2026-07-28 or later outside
// the rounds of a call: it takes a server's requests only as input requests
// in the answer to a call of its own.
func requestable(ss *mcp.ServerSession) error {
	if multiRoundTrip(ss) {
		return fmt.Errorf("proxy: the MCP client speaks protocol %s, where it takes a server's requests only within its own calls", ss.InitializeParams().ProtocolVersion)
	}
	return nil
}

// requestable is requestable(c.ss) for the client of a call, session or
// not.
func (c *client) requestable() error {
	if c.ss != nil {
		return requestable(c.ss)
	}
	if c.mrtr {
		return fmt.Errorf("proxy: the MCP client speaks protocol %s or later, where it takes a server's requests only within its own calls", sessionlessRevision)
	}
	return nil
}

// approve asks the client whose call needs approval, through MCP
// elicitation (form mode, one boolean "approve"), when it declared the
// elicitation capability. A client that cannot be asked refuses: the call
// got here because decide_approval answered "ask" (or no decider is
// configured), and nobody else can answer. To a 2026-07-28 client the
// refusal is a MissingRequiredClientCapabilityError (-32021) naming
// elicitation, which the proxy answers as a protocol error.
func (r *Relay) approve(ctx context.Context, req *runtime.ApprovalRequest) (bool, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	c, ok := ctx.Value(downstreamKey{}).(*client)
	if !ok || c == nil {
		return false, errors.New("no MCP client to ask")
	}
	if c.caps.Elicitation == nil {
		if c.mrtr {
			// MCP 2026-07-28: a request needing a capability the client
			// did not declare is refused with -32021.
			return false, missingCapabilities(fmt.Sprintf("the approval of tool %q", req.Tool.Name),
				&mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}})
		}
		return false, errors.New("the MCP client cannot be asked (no elicitation capability) and decide_approval did not allow the call")
	}
	var elicit func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error)
	if rd, ok := ctx.Value(roundsKey{}).(*rounds); ok {
		elicit = func(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			if answer := rd.takeApproved(); answer != nil {
				return answer, nil // asked before, through another replica
			}
			return askFor[*mcp.ElicitResult](ctx, rd.approvalAsker(), "the approval", params)
		}
	} else if err := c.requestable(); err != nil {
		return false, err
	} else {
		elicit = c.ss.Elicit
	}
	res, err := elicit(ctx, &mcp.ElicitParams{
		Mode:    "form",
		Message: approvalMessage(req),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approve": map[string]any{
					"type":        "boolean",
					"title":       "Approve",
					"description": fmt.Sprintf("Run %s on MCP server %s", req.Tool.Name, req.Tool.Server),
					"default":     false,
				},
			},
			"required": []string{"approve"},
		},
	})
	if err != nil {
		return false, fmt.Errorf("asking the MCP client: %w", err)
	}
	if res.Action != "accept" {
		return false, fmt.Errorf("the MCP client answered %q", res.Action)
	}
	approved, ok := res.Content["approve"].(bool)
	if !ok {
		return false, errors.New(`the MCP client accepted the approval form without an "approve" answer`)
	}
	return approved, nil
}

// approvalMessage is the question shown to the user: the tool, its server,
// and the policy's title, description and reason.
func approvalMessage(req *runtime.ApprovalRequest) string {
	msg := fmt.Sprintf("Approve the call of tool %q (%q on MCP server %q)?", req.Tool.Name, req.Tool.RawName(), req.Tool.Server)
	for _, part := range []string{req.Title, req.Description, req.Reason} {
		if part != "" {
			msg += "\n" + part
		}
	}
	if req.Module != "" {
		msg += fmt.Sprintf("\n(asked by policy %s)", req.Module)
	}
	if len(req.Arguments) > 0 {
		msg += "\nArguments: " + string(req.Arguments)
	}
	return msg
}

// servedItem is one served resource, template or prompt: the upstream
// definition's JSON it was made from (compared to spot changes).
type servedItem struct {
	upstream []byte
}

// syncResources makes the served resources and resource templates match
// the runtime's; a URI listed by several servers is served once (the
// runtime reads it from the first). Invalid URIs and templates are skipped
// (logged).
func (p *Proxy) syncResources(ctx context.Context) error {
	if p.caps.Resources == nil {
		return nil
	}
	res, err := p.sess.Resources(ctx)
	if err != nil {
		return fmt.Errorf("proxy: list the resources: %w", err)
	}
	tpl, err := p.sess.ResourceTemplates(ctx)
	if err != nil {
		return fmt.Errorf("proxy: list the resource templates: %w", err)
	}
	p.passMu.Lock()
	defer p.passMu.Unlock()
	want := map[string][]byte{}
	var order []string
	defs := map[string]*mcp.Resource{}
	for _, r := range res {
		if _, dup := want[r.Upstream.URI]; dup {
			continue
		}
		if u, err := url.Parse(r.Upstream.URI); err != nil || u.Scheme == "" {
			p.logger.Warn("proxy: resource skipped: its URI is not absolute", "uri", r.Upstream.URI, "server", r.Server)
			continue
		}
		raw, _ := json.Marshal(r.Upstream)
		want[r.Upstream.URI], defs[r.Upstream.URI] = raw, r.Upstream
		order = append(order, r.Upstream.URI)
	}
	var gone []string
	for uri := range p.resources {
		if _, ok := want[uri]; !ok {
			gone = append(gone, uri)
		}
	}
	if len(gone) > 0 {
		p.server.RemoveResources(gone...)
		for _, uri := range gone {
			delete(p.resources, uri)
		}
	}
	for _, uri := range order {
		if prev, ok := p.resources[uri]; ok && string(prev.upstream) == string(want[uri]) {
			continue
		}
		def := *defs[uri]
		p.server.AddResource(&def, p.readResource)
		p.resources[uri] = servedItem{upstream: want[uri]}
	}

	wantT := map[string][]byte{}
	var orderT []string
	defsT := map[string]*mcp.ResourceTemplate{}
	for _, t := range tpl {
		key := t.Upstream.URITemplate
		if _, dup := wantT[key]; dup {
			continue
		}
		if _, err := uritemplate.New(key); err != nil {
			p.logger.Warn("proxy: resource template skipped: invalid", "template", key, "server", t.Server, "err", err)
			continue
		}
		raw, _ := json.Marshal(t.Upstream)
		wantT[key], defsT[key] = raw, t.Upstream
		orderT = append(orderT, key)
	}
	gone = gone[:0]
	for key := range p.templates {
		if _, ok := wantT[key]; !ok {
			gone = append(gone, key)
		}
	}
	if len(gone) > 0 {
		p.server.RemoveResourceTemplates(gone...)
		for _, key := range gone {
			delete(p.templates, key)
		}
	}
	for _, key := range orderT {
		if prev, ok := p.templates[key]; ok && string(prev.upstream) == string(wantT[key]) {
			continue
		}
		def := *defsT[key]
		p.server.AddResourceTemplate(&def, p.readResource)
		p.templates[key] = servedItem{upstream: wantT[key]}
	}
	return nil
}

// syncPrompts makes the served prompts match the runtime's, under their
// exposed names.
func (p *Proxy) syncPrompts(ctx context.Context) error {
	if p.caps.Prompts == nil {
		return nil
	}
	prompts, err := p.sess.Prompts(ctx)
	if err != nil {
		return fmt.Errorf("proxy: list the prompts: %w", err)
	}
	p.passMu.Lock()
	defer p.passMu.Unlock()
	want := map[string]bool{}
	for _, pr := range prompts {
		want[pr.Name] = true
	}
	var gone []string
	for name := range p.prompts {
		if !want[name] {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		p.server.RemovePrompts(gone...)
		for _, n := range gone {
			delete(p.prompts, n)
		}
	}
	for _, pr := range prompts {
		raw, _ := json.Marshal(struct {
			Server string
			Def    *mcp.Prompt
		}{pr.Server, pr.Upstream})
		if prev, ok := p.prompts[pr.Name]; ok && string(prev.upstream) == string(raw) {
			continue
		}
		def := *pr.Upstream
		def.Name = pr.Name
		name := pr.Name
		p.server.AddPrompt(&def, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return p.getPrompt(ctx, name, req)
		})
		p.prompts[pr.Name] = servedItem{upstream: raw}
	}
	return nil
}

// getPrompt gets the exposed prompt name through the runtime; for a
// 2026-07-28 client, the server's input requests are relayed (see
// relayInput).
func (p *Proxy) getPrompt(ctx context.Context, name string, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	ss := req.Session
	if ss == nil || !multiRoundTrip(ss) {
		return p.sess.GetPrompt(ctx, name, req.Params.Arguments)
	}
	owner := stateOwner(identityFromExtra(req.Extra))
	ctx, err := p.relayInput(ctx, ss, owner, "prompts/get", name, req.Params.Arguments, req.Params.RequestState, req.Params.InputResponses)
	if err != nil {
		return nil, err
	}
	res, err := p.sess.GetPrompt(ctx, name, req.Params.Arguments)
	if je := missingCapabilityError(err); je != nil {
		return nil, je
	}
	if err != nil || res.InputRequests == nil {
		return res, err
	}
	if err := p.checkInputCapabilities(clientCapabilities(ss), res.InputRequests); err != nil {
		return nil, err
	}
	out := *res
	out.RequestState = p.states.seal(requestState{Method: "prompts/get", Name: name, Args: argsDigest(req.Params.Arguments), Upstream: res.RequestState, Owner: owner})
	return &out, nil
}

// relayInput returns the context of a 2026-07-28 client's prompts/get or
// resources/read (method, name, args) through the runtime: the upstream
// server is told the client's capabilities and its input requests come
// back as they are; a retry (state, the proxy's sealed requestState)
// carries the client's responses and the server's state back. The error
// refuses a state not issued for this request and this identity (owner).
func (p *Proxy) relayInput(ctx context.Context, ss *mcp.ServerSession, owner, method, name string, args any, state string, responses mcp.InputResponseMap) (context.Context, error) {
	ctx = runtime.WithClientCapabilities(ctx, clientCapabilities(ss))
	if state == "" {
		// Responses without a state go upstream as they are: the server
		// judges them.
		return runtime.WithInputRelay(ctx, &runtime.InputRound{Responses: responses}), nil
	}
	st, err := p.states.open(state, owner, method, name, args)
	if err != nil {
		return nil, err
	}
	if st.Round != "" {
		return nil, errBadState("issued for a tools/call")
	}
	if err := p.useState(ctx, st); err != nil {
		return nil, err
	}
	return runtime.WithInputRelay(ctx, &runtime.InputRound{Responses: responses, State: st.Upstream}), nil
}

// readResource reads through the runtime, which routes the URI to its
// owner; for a 2026-07-28 client the server's input requests are relayed
// (see relayInput) and the result carries its resultType.
func (p *Proxy) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	owner := stateOwner(identityFromExtra(req.Extra))
	mrtr := req.Session != nil && multiRoundTrip(req.Session)
	if mrtr {
		var err error
		if ctx, err = p.relayInput(ctx, req.Session, owner, "resources/read", uri, nil, req.Params.RequestState, req.Params.InputResponses); err != nil {
			return nil, err
		}
	}
	res, err := p.sess.ReadResource(ctx, uri)
	if je := missingCapabilityError(err); je != nil {
		return nil, je
	}
	if err != nil {
		return nil, upstreamError(err, uri)
	}
	if mrtr && res.InputRequests != nil {
		if err := p.checkInputCapabilities(clientCapabilities(req.Session), res.InputRequests); err != nil {
			return nil, err
		}
		out := *res
		out.RequestState = p.states.seal(requestState{Method: "resources/read", Name: uri, Upstream: res.RequestState, Owner: owner})
		return withResultType(&out)
	}
	// What the go-sdk server fills in on its own reads (which this one
	// bypasses): the protocol's default cache scope, the URI read.
	if res.CacheScope == "" {
		res.CacheScope = "public"
	}
	for _, c := range res.Contents {
		if c != nil && c.URI == "" {
			c.URI = uri
		}
	}
	if mrtr {
		return withResultType(res)
	}
	return res, nil
}

// withResultType returns res with its resultType ("complete", or
// "input_required" when it carries input requests), which MCP 2026-07-28
// requires on every result. go-sdk sets it only on the reads its own
// resource registry serves (and keeps the field unexported), so a read the
// proxy answers itself gets it through the result's JSON, which go-sdk
// decodes into the field.
func withResultType(res *mcp.ReadResourceResult) (*mcp.ReadResourceResult, error) {
	raw, err := json.Marshal(res)
	var fields map[string]json.RawMessage
	if err == nil {
		err = json.Unmarshal(raw, &fields)
	}
	if err != nil {
		return nil, fmt.Errorf("proxy: resources/read result does not encode: %w", err)
	}
	fields["resultType"] = json.RawMessage(`"complete"`)
	if res.InputRequests != nil {
		fields["resultType"] = json.RawMessage(`"input_required"`)
	}
	raw, _ = json.Marshal(fields) // RawMessages that just decoded
	out := new(mcp.ReadResourceResult)
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("proxy: resources/read result does not decode: %w", err)
	}
	return out, nil
}

// upstreamError is the error a client sees: "resource not found" for a URI
// nobody owns, the server's own JSON-RPC error when it sent one, else the
// runtime's message.
func upstreamError(err error, uri string) error {
	if errors.Is(err, runtime.ErrUnknownResource) {
		return mcp.ResourceNotFoundError(uri)
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je
	}
	return err
}

// passthroughMiddleware serves what the go-sdk server would answer from its
// own registry or refuse: resources/read for any URI (the runtime routes
// even a URI no server listed), and logging/setLevel, which is also sent
// upstream. It brings resources and prompts up to date before they are
// listed.
func (p *Proxy) passthroughMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "resources/list", "resources/templates/list":
			p.warnSync("resources", p.syncResources(ctx))
		case "prompts/list":
			p.warnSync("prompts", p.syncPrompts(ctx))
		case "tools/call":
			// A tool of a server still starting is waited for; a tool that
			// left with its server, or that the tool pins hide, is not
			// served, but a client that still calls it is told why (a tool
			// error: the server is unavailable, or the tool changed since
			// it was trusted), not that the tool is unknown.
			if cr, ok := req.(*mcp.CallToolRequest); ok && cr.Params != nil {
				p.awaitTool(ctx, cr.Params.Name)
				if err := p.unavailable(cr.Params.Name); err != nil {
					return toolError(err.Error()), nil
				}
			}
		case "resources/read":
			if p.caps.Resources != nil {
				if rr, ok := req.(*mcp.ReadResourceRequest); ok && rr.Params != nil {
					return p.readResource(ctx, rr)
				}
			}
		case "logging/setLevel":
			res, err := next(ctx, method, req)
			if err == nil && p.caps.Logging != nil {
				if sr, ok := req.(*mcp.ServerRequest[*mcp.SetLoggingLevelParams]); ok && sr.Params != nil {
					p.setLevel(ctx, sr.Session, sr.Params.Level)
				}
			}
			return res, err
		}
		return next(ctx, method, req)
	}
}

// logLevels orders MCP log levels, most verbose first (RFC 5424).
var logLevels = []mcp.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// setLevel records a client's level and sets the upstream servers to the
// most verbose level any connected client asked for; each client still
// receives only what its own level lets through.
func (p *Proxy) setLevel(ctx context.Context, ss *mcp.ServerSession, level mcp.LoggingLevel) {
	p.passMu.Lock()
	p.levels[ss] = level
	p.passMu.Unlock()
	p.applyLevels(ctx, p.liveSessions(), true)
}

// liveSessions returns the open downstream sessions.
func (p *Proxy) liveSessions() map[*mcp.ServerSession]bool {
	live := map[*mcp.ServerSession]bool{}
	for s := range p.server.Sessions() {
		live[s] = true
	}
	return live
}

// applyLevels forgets the levels of the sessions not in live and sets the
// upstream servers to the most verbose level left: always, or (always
// false) only when a level was forgotten. With no level left the upstream
// servers keep theirs.
func (p *Proxy) applyLevels(ctx context.Context, live map[*mcp.ServerSession]bool, always bool) {
	p.passMu.Lock()
	min, forgot := -1, false
	for s, l := range p.levels {
		if !live[s] {
			delete(p.levels, s)
			forgot = true
			continue
		}
		if i := slices.Index(logLevels, l); i >= 0 && (min < 0 || i < min) {
			min = i
		}
	}
	p.passMu.Unlock()
	if min < 0 || !always && !forgot {
		return
	}
	if err := p.sess.SetLoggingLevel(ctx, logLevels[min]); err != nil {
		p.logger.Warn("proxy: an MCP server refused logging/setLevel", "err", err)
	}
}

// releaseEnded releases what the proxy holds upstream for downstream
// sessions that ended (closed, deleted, reaped idle, or a legacy SSE
// stream gone): their resource subscriptions, unsubscribed upstream when
// no session is left on a URI, and their log levels, the upstream level
// following the sessions left.
func (p *Proxy) releaseEnded(ctx context.Context) {
	live := p.liveSessions()
	p.applyLevels(ctx, live, false)
	p.subMu.Lock()
	defer p.subMu.Unlock()
	for uri, subs := range p.subs {
		for ss := range subs {
			if !live[ss] {
				delete(subs, ss)
			}
		}
		if len(subs) > 0 {
			continue
		}
		delete(p.subs, uri)
		if err := p.sess.Unsubscribe(ctx, uri); err != nil {
			p.logger.Warn("proxy: unsubscribing upstream after the last subscriber left", "uri", uri, "err", err)
		}
	}
}

// subscribe subscribes upstream on the first downstream subscription to a
// URI.
func (p *Proxy) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	p.subMu.Lock()
	defer p.subMu.Unlock()
	if len(p.subs[uri]) == 0 {
		if err := p.sess.Subscribe(ctx, uri); err != nil {
			return upstreamError(err, uri)
		}
		p.subs[uri] = map[*mcp.ServerSession]bool{}
	}
	p.subs[uri][req.Session] = true
	return nil
}

// unsubscribe unsubscribes upstream when the last downstream subscriber of
// a URI leaves.
func (p *Proxy) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	uri := req.Params.URI
	p.subMu.Lock()
	defer p.subMu.Unlock()
	subs := p.subs[uri]
	if !subs[req.Session] {
		return nil
	}
	delete(subs, req.Session)
	if len(subs) > 0 {
		return nil
	}
	delete(p.subs, uri)
	if err := p.sess.Unsubscribe(ctx, uri); err != nil {
		return upstreamError(err, uri)
	}
	return nil
}

// complete forwards completion/complete; a prompt reference names the
// exposed prompt, a resource reference the template as listed.
func (p *Proxy) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	res, err := p.sess.Complete(ctx, req.Params)
	if err != nil {
		if errors.Is(err, runtime.ErrUnknownPrompt) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		return nil, upstreamError(err, req.Params.Ref.URI)
	}
	return res, nil
}

// multiRoundTrip reports whether the client speaks 2026-07-28 or later,
// where a server may not send requests while it serves a call: it answers
// with input requests the client fulfils and sends back in a retry of the
// call (SEP-2322).
func multiRoundTrip(ss *mcp.ServerSession) bool {
	ip := ss.InitializeParams()
	return ip != nil && ip.ProtocolVersion >= "2026-07-28"
}

// RoundTimeout is how long a tools/call of a 2026-07-28 client waits for
// the client's retry with the input it was asked for (sampling,
// elicitation, roots, an approval) before the upstream call is cancelled.
const RoundTimeout = 10 * time.Minute

// rounds is one tools/call of a 2026-07-28 client whose upstream call runs
// across several rounds: each server request the call makes is answered to
// the client as an input request, and the client's retry carries the
// response back.
type rounds struct {
	client   *client
	approval bool               // the asker of an approval question (approvalAsker)
	owner    string             // the identity it runs for (stateOwner)
	name     string             // the exposed tool
	args     json.RawMessage    // the call's arguments, as the client sent them
	asks     chan *inputAsk     // the Relay's handlers ask here
	done     chan roundsOutcome // the upstream call's end (capacity 1)
	cancel   context.CancelFunc // ends the upstream call

	mu       sync.Mutex
	waiting  map[string]*inputAsk // input request id → its asker
	timer    *time.Timer          // expiry while the client has the input requests
	approved *mcp.ElicitResult    // the client's answer to the approval question, given to a call run again (takeApproved)
}

type inputAsk struct {
	req      mcp.InputRequest
	reply    chan mcp.InputResponse // capacity 1
	approval bool                   // the approval question of a require_approval
}

// approvalAsker returns a view of r whose asks are approval questions.
func (r *rounds) approvalAsker() *rounds {
	return &rounds{asks: r.asks, approval: true}
}

// takeApproved returns the answer to the approval question the call was
// run again with, once; nil when there is none.
func (r *rounds) takeApproved() *mcp.ElicitResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.approved
	r.approved = nil
	return a
}

type roundsOutcome struct {
	res *mcp.CallToolResult
	err error
}

type roundsKey struct{}

// ask hands req to the client of the call in rounds and waits for its
// response (the client's retry), or for ctx to end.
func (r *rounds) ask(ctx context.Context, req mcp.InputRequest) (mcp.InputResponse, error) {
	a := &inputAsk{req: req, reply: make(chan mcp.InputResponse, 1), approval: r.approval}
	select {
	case r.asks <- a:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case resp := <-a.reply:
		if resp == nil {
			return nil, errors.New("proxy: the MCP client sent no response for the input request")
		}
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// callRounds runs a tools/call of a 2026-07-28 client. The upstream call
// runs in a goroutine the rounds own (it ends with the call: its request
// timeout, cancellation, or RoundTimeout without a retry). An upstream
// server on 2026-07-28 that answers with input requests has them relayed
// as they are (runtime.WithInputRelay), its requestState sealed in the
// proxy's; the retry, on any replica that shares the state key, sends the
// client's responses and the server's state back upstream. A server's
// request made during the call (an upstream on 2025-11-25, or an approval)
// is handed to the client as an input request, and the retry
// (RequestState naming the rounds this process holds) delivers the
// response. Either way it answers with the call's result, or with the next
// input requests. A requestState the proxy did not issue for this call is
// refused (invalid params) before anything runs.
func (p *Proxy) callRounds(ctx context.Context, name string, req *mcp.CallToolRequest, c *client) (*mcp.CallToolResult, error) {
	var relay *runtime.InputRound
	if req.Params.InputResponses != nil {
		// Responses without a state go upstream as they are: the server
		// judges them.
		relay = &runtime.InputRound{Responses: req.Params.InputResponses}
	}
	owner := stateOwner(runtime.IdentityFrom(ctx))
	var approved *mcp.ElicitResult
	if state := req.Params.RequestState; state != "" {
		st, err := p.states.open(state, owner, "tools/call", name, req.Params.Arguments)
		if err != nil {
			return nil, err
		}
		if err := p.useState(ctx, st); err != nil {
			return nil, err
		}
		switch r := p.takeRounds(st.Round, c.sid); {
		case r != nil:
			return p.resumeRounds(ctx, r, req)
		case st.Round == "":
			relay = &runtime.InputRound{Responses: req.Params.InputResponses, State: st.Upstream}
		case st.Approval != "":
			// An approval question asked by another process (or one
			// that ended): the call runs here again, and its approval
			// gets the client's answer.
			answer, ok := req.Params.InputResponses[st.Approval].(*mcp.ElicitResult)
			if !ok {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("proxy: the retry has no answer to the approval question (input response %q)", st.Approval)}
			}
			approved = answer
		default:
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: errNoState.Error() + " (the call it continues ran on another proxy process, or ended)"}
		}
	}
	r := &rounds{client: c, owner: owner, name: name, args: req.Params.Arguments, asks: make(chan *inputAsk), done: make(chan roundsOutcome, 1), waiting: map[string]*inputAsk{}, approved: approved}
	callCtx := context.WithValue(context.WithoutCancel(ctx), roundsKey{}, r)
	callCtx = runtime.WithInputRelay(callCtx, relay)
	callCtx, cancel := context.WithCancel(callCtx)
	r.cancel = cancel
	stop := context.AfterFunc(p.life, cancel) // Close ends calls in rounds
	args := req.Params.Arguments
	go func() {
		defer stop()
		res, err := p.sess.CallTool(callCtx, name, args)
		r.done <- roundsOutcome{res, err}
	}()
	return p.nextRound(ctx, r)
}

// takeRounds returns the call in rounds key names and forgets it, when
// this process holds it for the client session sid ("" for every
// stateless request); else nil.
func (p *Proxy) takeRounds(key, sid string) *rounds {
	if key == "" {
		return nil
	}
	p.roundsMu.Lock()
	defer p.roundsMu.Unlock()
	r := p.rounds[key]
	if r == nil || r.client.sid != sid {
		return nil
	}
	delete(p.rounds, key)
	return r
}

// resumeRounds delivers a retry's responses to r, a call in rounds this
// process holds (takeRounds).
func (p *Proxy) resumeRounds(ctx context.Context, r *rounds, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r.mu.Lock()
	if r.timer != nil {
		r.timer.Stop()
	}
	for id, resp := range req.Params.InputResponses {
		if a := r.waiting[id]; a != nil {
			delete(r.waiting, id)
			a.reply <- resp
		}
	}
	for id, a := range r.waiting { // asked, not answered
		delete(r.waiting, id)
		a.reply <- nil
	}
	r.mu.Unlock()
	return p.nextRound(ctx, r)
}

// nextRound waits for the call's end, or for its next server request,
// which it hands to the client as an input request.
func (p *Proxy) nextRound(ctx context.Context, r *rounds) (*mcp.CallToolResult, error) {
	select {
	case o := <-r.done:
		r.cancel()
		if o.err == nil && o.res != nil && o.res.InputRequests != nil {
			// The upstream server's own input requests, relayed.
			if err := p.checkInputCapabilities(r.client.caps, o.res.InputRequests); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Meta: o.res.Meta, InputRequests: o.res.InputRequests, RequestState: p.states.seal(requestState{
				Method: "tools/call", Name: r.name, Args: argsDigest(r.args), Upstream: o.res.RequestState, Owner: r.owner,
			})}, nil
		}
		return p.answer(ctx, o.res, o.err)
	case a := <-r.asks:
		if err := p.checkInputCapabilities(r.client.caps, mcp.InputRequestMap{"": a.req}); err != nil {
			r.cancel()
			return nil, err
		}
		id, key := rand.Text(), rand.Text()
		st := requestState{Method: "tools/call", Name: r.name, Args: argsDigest(r.args), Round: key, Owner: r.owner}
		if a.approval {
			st.Approval = id
		}
		state := p.states.seal(st)
		r.mu.Lock()
		r.waiting[id] = a
		r.timer = time.AfterFunc(RoundTimeout, func() {
			p.roundsMu.Lock()
			expired := p.rounds[key] == r
			delete(p.rounds, key)
			p.roundsMu.Unlock()
			if expired {
				r.cancel()
			}
		})
		r.mu.Unlock()
		p.roundsMu.Lock()
		p.rounds[key] = r
		p.roundsMu.Unlock()
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{id: a.req}, RequestState: state}, nil
	case <-ctx.Done():
		r.cancel() // the client gave up: so does the upstream call
		return nil, ctx.Err()
	}
}

// checkInputCapabilities refuses input requests a client that declared
// caps cannot answer, having not declared the capability (elicitation,
// sampling, roots), with a MissingRequiredClientCapabilityError (-32021)
// naming them.
func (p *Proxy) checkInputCapabilities(caps *mcp.ClientCapabilities, asks mcp.InputRequestMap) error {
	missing := &mcp.ClientCapabilities{}
	lacks := false
	for _, ask := range asks {
		switch ask.(type) {
		case *mcp.ElicitParams:
			if caps.Elicitation == nil {
				missing.Elicitation, lacks = &mcp.ElicitationCapabilities{}, true
			}
		case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
			if caps.Sampling == nil {
				missing.Sampling, lacks = &mcp.SamplingCapabilities{}, true
			}
		case *mcp.ListRootsParams:
			if caps.RootsV2 == nil {
				missing.RootsV2, lacks = &mcp.RootCapabilities{}, true
			}
		}
	}
	if !lacks {
		return nil
	}
	return missingCapabilities("the MCP server", missing)
}

// missingCapabilities is the MissingRequiredClientCapabilityError (-32021)
// naming what the client lacks and who needs it (what: "the MCP server");
// go-sdk answers it with HTTP 400.
func missingCapabilities(what string, missing *mcp.ClientCapabilities) error {
	wire := map[string]any{}
	for k, v := range map[string]bool{"elicitation": missing.Elicitation != nil, "sampling": missing.Sampling != nil, "roots": missing.RootsV2 != nil} {
		if v {
			wire[k] = map[string]any{}
		}
	}
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": wire})
	names := slices.Sorted(maps.Keys(wire))
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Data: data,
		Message: fmt.Sprintf("proxy: %s needs the client capabilities %v, which this client did not declare", what, names)}
}
