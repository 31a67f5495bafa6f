package runtime

//lint:file-ignore SA1019 roots, sampling and logging are deprecated by SEP-2577 but still served during its deprecation window: the passthrough relays them between clients and servers on purpose

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/openclaw-go/openclaw/policies"
)

// This file is the runtime's MCP passthrough beyond tools: resources,
// resource templates, prompts, completion, logging, the list-change and
// resource-update notifications, and the server-to-client requests
// (sampling, elicitation, roots).

// Passthrough event kinds (Options.OnEvent).
const (
	// EventResourcesChanged: the server sent
	// notifications/resources/list_changed; its resources and resource
	// templates are listed again on their next use.
	EventResourcesChanged EventKind = "resources_changed"
	// EventPromptsChanged: the server sent notifications/prompts/list_changed;
	// its prompts are listed again on their next use.
	EventPromptsChanged EventKind = "prompts_changed"
	// EventResourceUpdated: the server sent notifications/resources/updated
	// for Event.URI (a resource subscribed with Session.Subscribe).
	EventResourceUpdated EventKind = "resource_updated"
)

// ErrUnknownResource is wrapped when no connected server owns a resource
// URI: none listed it, none has a matching resource template, and more than
// one server serves resources (a sole resource server gets every URI).
var ErrUnknownResource = errors.New("runtime: no MCP server owns the resource")

// ErrUnknownPrompt is wrapped by GetPrompt's and Complete's error when no
// prompt has the exposed name asked for.
var ErrUnknownPrompt = errors.New("runtime: unknown prompt")

// Resource is a resource listed by a server.
type Resource struct {
	// Server is the raw name of the server that listed it.
	Server string
	// Upstream is the server's definition. It is shared: do not modify it.
	Upstream *mcp.Resource
}

// ResourceTemplate is a resource template listed by a server.
type ResourceTemplate struct {
	// Server is the raw name of the server that listed it.
	Server string
	// Upstream is the server's definition (URITemplate is RFC 6570). It is
	// shared: do not modify it.
	Upstream *mcp.ResourceTemplate
}

// Prompt is one entry of a session's prompts.
type Prompt struct {
	// Name is the exposed name, chosen by the sanitize_tool_names hook in a
	// batch of its own (prompt names, one list per server): the same
	// `server__prompt` shape and rules as tool names, so a policy that
	// names tools names prompts too.
	Name string
	// Server is the raw server name.
	Server string
	// Upstream is the server's definition (its Name is the raw prompt
	// name, [Prompt.RawName]). It is shared: do not modify it.
	Upstream *mcp.Prompt
}

// RawName is the prompt's raw name: the server's own name of it
// (Upstream.Name).
func (p Prompt) RawName() string { return p.Upstream.Name }

// CreateMessageFunc answers a server's sampling/createMessage. ctx carries
// the values of the tool call in flight on that server when there is one
// (see [Options.CreateMessage]); server is the raw server name.
type CreateMessageFunc func(ctx context.Context, server string, params *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)

// ElicitFunc answers a server's elicitation/create; ctx and server as for
// [CreateMessageFunc].
type ElicitFunc func(ctx context.Context, server string, params *mcp.ElicitParams) (*mcp.ElicitResult, error)

// ListRootsFunc answers a server's roots/list; ctx and server as for
// [CreateMessageFunc].
type ListRootsFunc func(ctx context.Context, server string) (*mcp.ListRootsResult, error)

// LogFunc receives a server's notifications/message (a log message at or
// above the level set with Session.SetLoggingLevel). It is called from the
// goroutine that reads the server's messages and must not block long; ctx
// is as for [CreateMessageFunc].
type LogFunc func(ctx context.Context, server string, params *mcp.LoggingMessageParams)

// CallInfo names the tool call in flight whose context a server-to-client
// handler received.
type CallInfo struct {
	// Tool is the exposed name; Server the raw server name.
	Tool, Server string
}

type callInfoKey struct{}

// CallFromContext reports the tool call a server-to-client request
// (sampling, elicitation, roots, a log message) was attributed to: the ctx
// handed to a [CreateMessageFunc], [ElicitFunc], [ListRootsFunc] or
// [LogFunc] carries it when a call was in flight on that server.
func CallFromContext(ctx context.Context) (CallInfo, bool) {
	ci, ok := ctx.Value(callInfoKey{}).(CallInfo)
	return ci, ok
}

// passState is a conn's passthrough state: cached listings and the calls
// in flight.
type passState struct {
	resDirty    atomic.Bool // resources/list_changed since the last listing
	promptDirty atomic.Bool // prompts/list_changed since the last listing

	mu        sync.Mutex
	resListed bool
	resources []*mcp.Resource
	templates []*mcp.ResourceTemplate
	uris      map[string]bool         // the URIs of resources
	compiled  []*uritemplate.Template // templates, compiled (invalid ones left out)
	prListed  bool
	prompts   []*mcp.Prompt
	logLevel  mcp.LoggingLevel // the latest level set, reapplied on reconnection
	inflight  []context.Context
}

// reset forgets the listings (the session was closed or reaped).
func (p *passState) reset() {
	p.mu.Lock()
	p.resListed, p.resources, p.templates, p.uris, p.compiled, p.prListed, p.prompts = false, nil, nil, nil, nil, false, nil
	p.mu.Unlock()
}

// enter records a tool call in flight (ctx carries its values) until the
// returned func is called.
func (p *passState) enter(ctx context.Context) (leave func()) {
	p.mu.Lock()
	p.inflight = append(p.inflight, ctx)
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if i := slices.Index(p.inflight, ctx); i >= 0 {
			p.inflight = slices.Delete(p.inflight, i, i+1)
		}
	}
}

// attribute returns the context a server-to-client request of this server
// is handled with: the values of the most recent tool call in flight on the
// server (exact for a server without supportsParallelToolCalls, which runs
// one call at a time), cancelled when either the request or that call ends.
// With no call in flight it is the request's own context. Either way it is
// also cancelled when the Session closes or when cs, the MCP session the
// request came on, is closed (a reload retiring it, the idle reaper, a
// recycle: see closeSession): go-sdk's ClientSession.Close waits for the
// handlers in flight, so a handler still waiting on whoever answers (a
// proxy's client) would hold that close forever; the stdio transport
// answers the server with an error instead (transport.stdioConn Close).
func (c *conn) attribute(reqCtx context.Context, cs *mcp.ClientSession) (context.Context, context.CancelFunc) {
	c.px.mu.Lock()
	var call context.Context
	if n := len(c.px.inflight); n > 0 {
		call = c.px.inflight[n-1]
	}
	c.px.mu.Unlock()
	var (
		ctx    context.Context
		cancel context.CancelFunc
		stops  []func() bool
	)
	if call == nil {
		ctx, cancel = context.WithCancel(reqCtx)
	} else {
		ctx, cancel = context.WithCancel(context.WithoutCancel(call))
		stops = append(stops, context.AfterFunc(reqCtx, cancel), context.AfterFunc(call, cancel))
	}
	stops = append(stops, context.AfterFunc(c.s.life, cancel))
	if cs != nil {
		stops = append(stops, context.AfterFunc(c.handlerLife(cs), cancel))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// clientOptions returns the go-sdk client options of a connection: the
// notification handlers, and the sampling, elicitation and roots handlers
// (each capability advertised only when the embedder supplied its handler).
func (c *conn) clientOptions() *mcp.ClientOptions {
	o := c.s.opts
	co := &mcp.ClientOptions{
		Capabilities:                &mcp.ClientCapabilities{},
		ToolListChangedHandler:      c.toolsChanged,
		ProgressNotificationHandler: c.s.onProgress,
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			c.px.resDirty.Store(true)
			c.s.emit(Event{Kind: EventResourcesChanged, Server: c.cfg.Name})
		},
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
			c.px.promptDirty.Store(true)
			c.s.emit(Event{Kind: EventPromptsChanged, Server: c.cfg.Name})
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			c.s.emit(Event{Kind: EventResourceUpdated, Server: c.cfg.Name, URI: req.Params.URI})
		},
	}
	if fn := o.OnLog; fn != nil {
		co.LoggingMessageHandler = func(ctx context.Context, req *mcp.LoggingMessageRequest) {
			ctx, cancel := c.attribute(ctx, req.Session)
			defer cancel()
			fn(ctx, c.cfg.Name, req.Params)
		}
	}
	if fn := o.CreateMessage; fn != nil {
		co.CreateMessageHandler = func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			ctx, cancel := c.attribute(ctx, req.Session)
			defer cancel()
			return fn(ctx, c.cfg.Name, req.Params)
		}
	}
	if fn := o.Elicit; fn != nil {
		co.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			ctx, cancel := c.attribute(ctx, req.Session)
			defer cancel()
			return fn(ctx, c.cfg.Name, req.Params)
		}
	}
	if o.ListRoots != nil {
		// go-sdk answers roots/list from a static list; the request is
		// intercepted instead (requestMiddleware). Session.RootsChanged
		// sends notifications/roots/list_changed.
		co.Capabilities.RootsV2 = &mcp.RootCapabilities{ListChanged: true}
	}
	return co
}

// requestMiddleware answers roots/list with Options.ListRoots, and hands
// elicitation/create to Options.Elicit as it came: the go-sdk client would
// first check the requested schema against its own reading of the spec and
// refuse some that MCP clients accept (e.g. titled multi-select enums,
// SEP-1330), so a passthrough leaves the check to the client that answers.
func (c *conn) requestMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	roots, elicit := c.s.opts.ListRoots, c.s.opts.Elicit
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		cs, _ := req.GetSession().(*mcp.ClientSession)
		if er, ok := req.(*mcp.ElicitRequest); ok && method == "elicitation/create" && elicit != nil && er.Params != nil {
			ctx, cancel := c.attribute(ctx, cs)
			defer cancel()
			return elicit(ctx, c.cfg.Name, er.Params)
		}
		if method != "roots/list" || roots == nil {
			return next(ctx, method, req)
		}
		ctx, cancel := c.attribute(ctx, cs)
		defer cancel()
		res, err := roots(ctx, c.cfg.Name)
		if err != nil {
			return nil, err
		}
		if res == nil {
			res = &mcp.ListRootsResult{}
		}
		if res.Roots == nil {
			res.Roots = []*mcp.Root{} // never null on the wire
		}
		return res, nil
	}
}

// rootsChangedMarker is the root Session.RootsChanged adds to a go-sdk
// client's own (never served) list: adding a root is the go-sdk's only way
// to send notifications/roots/list_changed.
const rootsChangedMarker = "openclaw-go:roots-changed"

// RootsChanged tells every connected server that the roots changed
// (notifications/roots/list_changed), so that it asks roots/list again. It
// does nothing without Options.ListRoots (no roots capability was
// advertised).
func (s *Session) RootsChanged() {
	if s.opts.ListRoots == nil {
		return
	}
	for _, c := range s.set.Load().conns {
		c.mu.Lock()
		client, open := c.client, c.cs != nil
		c.mu.Unlock()
		if client != nil && open {
			client.AddRoots(&mcp.Root{URI: rootsChangedMarker}) // replaces the marker and notifies
		}
	}
}

// afterConnect reapplies the logging level set before a reconnection.
func (c *conn) afterConnect(ctx context.Context, cs *mcp.ClientSession, caps *mcp.ServerCapabilities) {
	c.px.mu.Lock()
	level := c.px.logLevel
	c.px.mu.Unlock()
	if level == "" || caps == nil || caps.Logging == nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, c.cfg.listTimeout())
	defer cancel()
	if err := cs.SetLoggingLevel(lctx, &mcp.SetLoggingLevelParams{Level: level}); err != nil {
		c.s.log.Warn("MCP server refused the logging level", "server", c.cfg.Name, "level", level, "err", redactErr(c.red(), err).Error())
	}
}

// open returns the connected session and its capabilities, or nil.
func (c *conn) open() (*mcp.ClientSession, *mcp.ServerCapabilities) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cs, c.caps
}

// listPages follows nextCursor (cursorTrail: "" is a cursor, only an
// absent nextCursor ends the list) with the caps of tools/list (pages,
// items, a repeated cursor), each request bounded by the server's list
// timeout. page sends the request for cursor under ctx and returns the
// items and go-sdk's NextCursor; the cursor "" is sent and the nextCursor
// read from the wire by withFastList or the transport's HTTP client
// (fastPage).
func listPages[T any](ctx context.Context, c *conn, method string, page func(ctx context.Context, cursor string) ([]T, string, error)) ([]T, error) {
	var (
		out   []T
		trail cursorTrail
	)
	timeout := c.cfg.listTimeout()
	for pages := 1; ; pages++ {
		if pages > MaxListPages {
			return nil, fmt.Errorf("%s: more than %d pages", method, MaxListPages)
		}
		fp, pctx := newFastPage(ctx, trail.at, false)
		lctx, cancel := context.WithTimeout(pctx, timeout)
		items, sdkNext, err := page(lctx, trail.at.cursor)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				return nil, fmt.Errorf("%s: no answer within %v: %w", method, timeout, err)
			}
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		done, keep, err := trail.follow(fp.nextCursor(sdkNext))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		if !keep {
			return out, nil
		}
		out = append(out, items...)
		if len(out) > MaxListTools {
			return nil, fmt.Errorf("%s: more than %d items", method, MaxListTools)
		}
		if done {
			return out, nil
		}
	}
}

// resourceListing returns the server's resources and templates, listing
// them when never listed or changed since. A server without the resources
// capability has none. A failed listing is logged and yields none (it is
// tried again on next use).
func (c *conn) resourceListing(ctx context.Context) ([]*mcp.Resource, []*mcp.ResourceTemplate) {
	cs, caps := c.open()
	if cs == nil || caps == nil || caps.Resources == nil {
		return nil, nil
	}
	changed := c.px.resDirty.Swap(false)
	c.px.mu.Lock()
	if c.px.resListed && !changed {
		defer c.px.mu.Unlock()
		return c.px.resources, c.px.templates
	}
	c.px.mu.Unlock()
	res, err := listPages(ctx, c, "resources/list", func(ctx context.Context, cursor string) ([]*mcp.Resource, string, error) {
		r, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return r.Resources, r.NextCursor, nil
	})
	var tpl []*mcp.ResourceTemplate
	if err == nil {
		tpl, err = listPages(ctx, c, "resources/templates/list", func(ctx context.Context, cursor string) ([]*mcp.ResourceTemplate, string, error) {
			r, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				if cursor == "" && methodNotFound(err) {
					return nil, "", nil // templates are optional
				}
				return nil, "", err
			}
			return r.ResourceTemplates, r.NextCursor, nil
		})
	}
	if err != nil {
		c.px.resDirty.Store(true) // try again on next use
		c.s.log.Warn("MCP server resources not listed", "server", c.cfg.Name, "err", redactErr(c.red(), err).Error())
		return nil, nil
	}
	uris := make(map[string]bool, len(res))
	for _, r := range res {
		uris[r.URI] = true
	}
	var compiled []*uritemplate.Template
	for _, t := range tpl {
		if ct, err := uritemplate.New(t.URITemplate); err == nil {
			compiled = append(compiled, ct)
		} else {
			c.s.log.Warn("MCP server resource template ignored for routing: invalid", "server", c.cfg.Name, "template", t.URITemplate, "err", err)
		}
	}
	c.px.mu.Lock()
	defer c.px.mu.Unlock()
	c.px.resListed, c.px.resources, c.px.templates, c.px.uris, c.px.compiled = true, res, tpl, uris, compiled
	return res, tpl
}

// claims reports whether the server listed uri (exact) or has a resource
// template that matches it, from its latest listing.
func (c *conn) claims(ctx context.Context, uri string) (exact, templated bool) {
	c.resourceListing(ctx) // lists when needed
	c.px.mu.Lock()
	defer c.px.mu.Unlock()
	if c.px.uris[uri] {
		return true, false
	}
	for _, t := range c.px.compiled {
		if t.Regexp().MatchString(uri) {
			return false, true
		}
	}
	return false, false
}

// promptListing returns the server's prompts, as resourceListing does.
func (c *conn) promptListing(ctx context.Context) []*mcp.Prompt {
	cs, caps := c.open()
	if cs == nil || caps == nil || caps.Prompts == nil {
		return nil
	}
	changed := c.px.promptDirty.Swap(false)
	c.px.mu.Lock()
	if c.px.prListed && !changed {
		defer c.px.mu.Unlock()
		return c.px.prompts
	}
	c.px.mu.Unlock()
	prompts, err := listPages(ctx, c, "prompts/list", func(ctx context.Context, cursor string) ([]*mcp.Prompt, string, error) {
		r, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return r.Prompts, r.NextCursor, nil
	})
	if err != nil {
		c.px.promptDirty.Store(true)
		c.s.log.Warn("MCP server prompts not listed", "server", c.cfg.Name, "err", redactErr(c.red(), err).Error())
		return nil
	}
	c.px.mu.Lock()
	defer c.px.mu.Unlock()
	c.px.prListed, c.px.prompts = true, prompts
	return prompts
}

// passUse checks that the session may be used and holds off the idle reaper
// until done is called.
func (s *Session) passUse(ctx context.Context) (done func(), err error) {
	if _, err := s.catalog(ctx); err != nil && (errors.Is(err, ErrClosed) || errors.Is(err, ErrNotConnected)) {
		return nil, err
	}
	return s.touch(), nil
}

// Resources lists the resources of every connected server that advertises
// resources, following nextCursor (with the tools/list caps), in
// declaration order of the servers and each server's order. Listings are
// cached until the server sends notifications/resources/list_changed. A
// server whose listing fails is logged and contributes none. Errors:
// ErrClosed, ErrNotConnected.
func (s *Session) Resources(ctx context.Context) ([]Resource, error) {
	done, err := s.passUse(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	var out []Resource
	for _, c := range s.set.Load().conns {
		res, _ := c.resourceListing(ctx)
		for _, r := range res {
			out = append(out, Resource{Server: c.cfg.Name, Upstream: r})
		}
	}
	return out, nil
}

// ResourceTemplates lists the resource templates of every connected server,
// as Resources does.
func (s *Session) ResourceTemplates(ctx context.Context) ([]ResourceTemplate, error) {
	done, err := s.passUse(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	var out []ResourceTemplate
	for _, c := range s.set.Load().conns {
		_, tpl := c.resourceListing(ctx)
		for _, t := range tpl {
			out = append(out, ResourceTemplate{Server: c.cfg.Name, Upstream: t})
		}
	}
	return out, nil
}

// owner returns the server of set that owns uri: the first server
// (declaration order) whose listing holds the exact URI; else the first
// whose resource template (RFC 6570) matches it; else the only connected
// server with resources. A URI claimed by several servers goes to the
// first; the collision is logged.
func (s *Session) owner(ctx context.Context, set *connSet, uri string) (*conn, error) {
	var exact, templated, serving []*conn
	for _, c := range set.conns {
		if _, caps := c.open(); caps == nil || caps.Resources == nil {
			continue
		}
		serving = append(serving, c)
		switch ex, tm := c.claims(ctx, uri); {
		case ex:
			exact = append(exact, c)
		case tm:
			templated = append(templated, c)
		}
	}
	for _, found := range [][]*conn{exact, templated} {
		if len(found) == 0 {
			continue
		}
		if len(found) > 1 {
			names := make([]string, len(found))
			for i, c := range found {
				names[i] = c.cfg.Name
			}
			s.log.Warn("resource URI claimed by several MCP servers; the first is used", "uri", uri, "servers", names)
		}
		return found[0], nil
	}
	if len(serving) == 1 {
		return serving[0], nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownResource, uri)
}

// ReadResource reads uri from the server that owns it: the first server
// (declaration order) that listed the exact URI, else the first whose
// resource template matches it (collisions are logged), else the only
// server with resources. Errors: ErrClosed, ErrNotConnected,
// ErrUnknownResource (wrapped), and a *ServerError (Op "resources/read")
// for the server's failure.
func (s *Session) ReadResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	done, err := s.passUse(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	c, err := s.owner(ctx, s.set.Load(), uri)
	if err != nil {
		return nil, err
	}
	release, err := c.holdFor(ctx, "resources/read")
	if err != nil {
		return nil, err
	}
	defer release()
	cs, _ := c.open()
	if cs == nil {
		return nil, &ServerError{Server: c.cfg.Name, Op: "resources/read", Err: ErrNotConnected}
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout())
	defer cancel()
	res, err := cs.ReadResource(rctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, &ServerError{Server: c.cfg.Name, Op: "resources/read", Err: redactErr(c.red(), err)}
	}
	return res, nil
}

// Subscribe asks the server that owns uri (as ReadResource routes it) for
// notifications/resources/updated, delivered as EventResourceUpdated. The
// server must advertise resources.subscribe. Errors as for ReadResource.
func (s *Session) Subscribe(ctx context.Context, uri string) error {
	return s.subscription(ctx, "resources/subscribe", uri, func(ctx context.Context, cs *mcp.ClientSession) error {
		return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	})
}

// Unsubscribe ends a subscription made with Subscribe.
func (s *Session) Unsubscribe(ctx context.Context, uri string) error {
	return s.subscription(ctx, "resources/unsubscribe", uri, func(ctx context.Context, cs *mcp.ClientSession) error {
		return cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
	})
}

func (s *Session) subscription(ctx context.Context, op, uri string, do func(context.Context, *mcp.ClientSession) error) error {
	done, err := s.passUse(ctx)
	if err != nil {
		return err
	}
	defer done()
	c, err := s.owner(ctx, s.set.Load(), uri)
	if err != nil {
		return err
	}
	release, err := c.holdFor(ctx, op)
	if err != nil {
		return err
	}
	defer release()
	cs, caps := c.open()
	switch {
	case cs == nil:
		return &ServerError{Server: c.cfg.Name, Op: op, Err: ErrNotConnected}
	case caps == nil || caps.Resources == nil || !caps.Resources.Subscribe:
		return &ServerError{Server: c.cfg.Name, Op: op, Err: errors.New("the server does not support resource subscriptions")}
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout())
	defer cancel()
	if err := do(rctx, cs); err != nil {
		return &ServerError{Server: c.cfg.Name, Op: op, Err: redactErr(c.red(), err)}
	}
	return nil
}

// promptCatalog is one naming of the session's prompts, immutable once
// published.
type promptCatalog struct {
	prompts []Prompt
	byName  map[string]*Prompt
	// set and cat are the server set and tool catalog it was named with:
	// a reload or a catalog rebuild (which may follow a policy reload)
	// makes it stale.
	set *connSet
	cat *catalog
}

// promptsChanged reports whether a connected server of set with prompts
// has a listing to refresh (prompts/list_changed, a new connection, a
// failed listing).
func promptsChanged(set *connSet) bool {
	for _, c := range set.conns {
		if !c.px.promptDirty.Load() {
			continue
		}
		if cs, caps := c.open(); cs != nil && caps != nil && caps.Prompts != nil {
			return true
		}
	}
	return false
}

// promptCatalog returns the named prompts: the cached naming while it is
// current (same server set and tool catalog, no server's prompts changed),
// else a new one: every connected server's prompts listed and named by the
// Sanitizer in one batch (Options.Reserved applies). Prompts the sanitizer
// rejects are left out.
func (s *Session) promptCatalog(ctx context.Context) (*promptCatalog, error) {
	current := func() (*promptCatalog, *connSet, *catalog) {
		set := s.set.Load()
		s.mu.Lock()
		cat := s.cat
		s.mu.Unlock()
		if pc := s.promptCache.Load(); pc != nil && pc.set == set && pc.cat == cat && !promptsChanged(set) {
			return pc, set, cat
		}
		return nil, set, cat
	}
	if pc, _, _ := current(); pc != nil {
		return pc, nil
	}
	s.promptMu.Lock()
	defer s.promptMu.Unlock()
	pc, set, cat := current()
	if pc != nil {
		return pc, nil // named by the caller we waited for
	}
	req := &policies.SanitizeRequest{Reserved: s.opts.Reserved, Servers: make([]policies.SanitizeServer, len(set.conns))}
	upstream := make([][]*mcp.Prompt, len(set.conns))
	keys := make([][]toolKey, len(set.conns))
	for i, c := range set.conns {
		upstream[i] = c.promptListing(ctx)
		names := make([]string, len(upstream[i]))
		keys[i] = make([]toolKey, len(upstream[i]))
		for j, p := range upstream[i] {
			names[j] = p.Name
			keys[i][j] = toolKey{server: c.cfg.Name, tool: p.Name}
		}
		req.Servers[i] = policies.SanitizeServer{Name: c.cfg.Name, Tools: names}
	}
	// Prompt names stay within the session as tool names do.
	req.Exposed = s.promptExposed.request(req.Servers, keys)
	res, err := s.opts.Sanitizer.SanitizeToolNames(ctx, req)
	if err == nil {
		err = policies.ValidateSanitized("sanitize_tool_names", req, res)
	}
	if err != nil {
		return nil, fmt.Errorf("runtime: naming the prompts: %w", err)
	}
	for _, e := range s.promptExposed.check(req, res, keys, "prompt") {
		s.log.Warn(e.Error(), "server", e.Server, "prompt", e.Tool)
	}
	pc = &promptCatalog{byName: map[string]*Prompt{}, set: set, cat: cat}
	for i, c := range set.conns {
		for j, p := range upstream[i] {
			if name := res.Servers[i].Tools[j].Name; name != "" {
				pc.prompts = append(pc.prompts, Prompt{Name: name, Server: c.cfg.Name, Upstream: p})
			}
		}
	}
	for i := range pc.prompts {
		pc.byName[pc.prompts[i].Name] = &pc.prompts[i]
	}
	s.promptCache.Store(pc)
	return pc, nil
}

// Prompts lists the prompts of every connected server that advertises
// prompts, following nextCursor, named by the Sanitizer in a batch of
// their own (the tool naming rules: `server__prompt`), in declaration order
// of the servers. Listings are cached until the server sends
// notifications/prompts/list_changed, and so are their names until a
// server's prompts change, a reload, or a new tool catalog.
// Errors: ErrClosed, ErrNotConnected, and the sanitizer's failure (no
// unnamed prompt is ever exposed).
func (s *Session) Prompts(ctx context.Context) ([]Prompt, error) {
	done, err := s.passUse(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	pc, err := s.promptCatalog(ctx)
	if err != nil {
		return nil, err
	}
	return slices.Clone(pc.prompts), nil
}

// prompt finds the exposed prompt name.
func (s *Session) prompt(ctx context.Context, name string) (*Prompt, *conn, error) {
	pc, err := s.promptCatalog(ctx)
	if err != nil {
		return nil, nil, err
	}
	p := pc.byName[name]
	if p == nil {
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownPrompt, name)
	}
	return p, pc.set.byKey[p.Server], nil
}

// GetPrompt gets the prompt exposed as name from its server, with args.
// Prompts do not pass before_tool_call: they return messages, they act on
// nothing. Errors: ErrClosed, ErrNotConnected, ErrUnknownPrompt (wrapped),
// and a *ServerError (Op "prompts/get").
func (s *Session) GetPrompt(ctx context.Context, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	done, err := s.passUse(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	p, c, err := s.prompt(ctx, name)
	if err != nil {
		return nil, err
	}
	release, err := c.holdFor(ctx, "prompts/get")
	if err != nil {
		return nil, err
	}
	defer release()
	cs, _ := c.open()
	if cs == nil {
		return nil, &ServerError{Server: c.cfg.Name, Op: "prompts/get", Err: ErrNotConnected}
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout())
	defer cancel()
	res, err := cs.GetPrompt(rctx, &mcp.GetPromptParams{Name: p.RawName(), Arguments: args})
	if err != nil {
		return nil, &ServerError{Server: c.cfg.Name, Op: "prompts/get", Err: redactErr(c.red(), err)}
	}
	return res, nil
}

// Complete asks for completion/complete. A "ref/prompt" reference names an
// exposed prompt (sent upstream under its raw name); a "ref/resource"
// reference is routed to the server that listed that exact URI template,
// else as ReadResource routes a URI. A server that does not advertise
// completions gets no request: the answer is an empty completion. Errors:
// ErrClosed, ErrNotConnected, ErrUnknownPrompt, ErrUnknownResource (both
// wrapped), and a *ServerError (Op "completion/complete").
func (s *Session) Complete(ctx context.Context, params *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	done, err := s.passUse(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if params == nil || params.Ref == nil {
		return nil, errors.New("runtime: completion/complete without a ref")
	}
	up := *params
	ref := *params.Ref
	up.Ref = &ref
	var c *conn
	switch ref.Type {
	case "ref/prompt":
		p, pc, err := s.prompt(ctx, ref.Name)
		if err != nil {
			return nil, err
		}
		ref.Name, c = p.RawName(), pc
	case "ref/resource":
		set := s.set.Load()
		for _, cc := range set.conns {
			_, tpl := cc.resourceListing(ctx)
			if slices.ContainsFunc(tpl, func(t *mcp.ResourceTemplate) bool { return t.URITemplate == ref.URI }) {
				c = cc
				break
			}
		}
		if c == nil {
			if c, err = s.owner(ctx, set, ref.URI); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("runtime: completion/complete: unknown ref type %q", ref.Type)
	}
	release, err := c.holdFor(ctx, "completion/complete")
	if err != nil {
		return nil, err
	}
	defer release()
	cs, caps := c.open()
	switch {
	case cs == nil:
		return nil, &ServerError{Server: c.cfg.Name, Op: "completion/complete", Err: ErrNotConnected}
	case caps == nil || caps.Completions == nil:
		return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout())
	defer cancel()
	res, err := cs.Complete(rctx, &up)
	if err != nil {
		return nil, &ServerError{Server: c.cfg.Name, Op: "completion/complete", Err: redactErr(c.red(), err)}
	}
	return res, nil
}

// SetLoggingLevel sends logging/setLevel to every connected server that
// advertises logging, concurrently, and remembers the level for servers
// that connect later (reconnections included). Their log messages go to
// Options.OnLog. The error joins the servers' refusals (each a
// *ServerError, Op "logging/setLevel"); ErrClosed and ErrNotConnected as
// for the other methods.
func (s *Session) SetLoggingLevel(ctx context.Context, level mcp.LoggingLevel) error {
	done, err := s.passUse(ctx)
	if err != nil {
		return err
	}
	defer done()
	s.levelMu.Lock()
	s.logLevel = level // for the servers a reload adds
	s.levelMu.Unlock()
	conns := s.set.Load().conns
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		c.px.mu.Lock()
		c.px.logLevel = level
		c.px.mu.Unlock()
		cs, caps := c.open()
		if cs == nil || caps == nil || caps.Logging == nil {
			continue
		}
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout())
			defer cancel()
			if err := cs.SetLoggingLevel(rctx, &mcp.SetLoggingLevelParams{Level: level}); err != nil {
				errs[i] = &ServerError{Server: c.cfg.Name, Op: "logging/setLevel", Err: redactErr(c.red(), err)}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Capabilities returns the union of the capabilities of the connected
// servers (tools, resources with subscribe and listChanged, prompts,
// completions, logging, the tasks extension): what a proxy in front of
// them can offer. A field is nil when no connected server has it.
func (s *Session) Capabilities() *mcp.ServerCapabilities {
	out := &mcp.ServerCapabilities{}
	for _, c := range s.set.Load().conns {
		_, caps := c.open()
		if caps == nil {
			continue
		}
		if caps.Tools != nil {
			if out.Tools == nil {
				out.Tools = &mcp.ToolCapabilities{}
			}
			out.Tools.ListChanged = out.Tools.ListChanged || caps.Tools.ListChanged
		}
		if caps.Resources != nil {
			if out.Resources == nil {
				out.Resources = &mcp.ResourceCapabilities{}
			}
			out.Resources.ListChanged = out.Resources.ListChanged || caps.Resources.ListChanged
			out.Resources.Subscribe = out.Resources.Subscribe || caps.Resources.Subscribe
		}
		if caps.Prompts != nil {
			if out.Prompts == nil {
				out.Prompts = &mcp.PromptCapabilities{}
			}
			out.Prompts.ListChanged = out.Prompts.ListChanged || caps.Prompts.ListChanged
		}
		if caps.Completions != nil {
			out.Completions = &mcp.CompletionCapabilities{}
		}
		if caps.Logging != nil {
			out.Logging = &mcp.LoggingCapabilities{}
		}
		if caps.Extensions[TasksExtension] != nil {
			out.Extensions = map[string]any{TasksExtension: map[string]any{}} // relayed (tasks.go)
		}
	}
	return out
}
