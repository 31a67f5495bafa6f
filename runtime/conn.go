package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw-go/openclaw/internal/redact"
	"github.com/openclaw-go/openclaw/transport"
)

// conn is one declared server of a session and its MCP session.
type conn struct {
	s    *Session
	cfg  Server
	turn chan struct{} // one call at a time; nil with SupportsParallelToolCalls

	dialMu sync.Mutex // one reconnection at a time

	dirty atomic.Bool // notifications/tools/list_changed since the last listing

	px passState // resources, prompts, calls in flight (passthrough.go)

	rl connLife // uses in flight and retirement by a reload (reload.go)

	mu            sync.Mutex
	cs            *mcp.ClientSession
	client        *mcp.Client // the client of cs (roots change notifications)
	caps          *mcp.ServerCapabilities
	kind          transport.Kind
	launch        string
	redactor      *redact.Redactor
	err           *ServerError // latest diagnostic
	downSince     time.Time    // when the server was last found down (connect failed, session ended); zero while connected
	listed        bool         // tools holds a listing (or its failure)
	tools         []*mcp.Tool
	listFailedAt  time.Time   // zero unless the latest listing failed
	listFailures  int         // consecutive failed listings, for the backoff
	listRetry     *time.Timer // the background listing after a failed one
	failures      int         // consecutive failed calls
	pausedUntil   time.Time
	pauseGen      uint64
	pauseTimer    *time.Timer
	pauseErr      *ServerError // the failure that paused the server, its diagnostic meanwhile
	recycle       bool         // the session was dropped after timeouts: redial on next call
	skips         lineSkipper  // the transport in use, when it counts skipped lines
	skippedBefore int64        // the lines the transports used before it skipped

	pr principalState // per-requester OAuth connections (principal.go)

	lives sync.Map // *mcp.ClientSession → *handlerLife (handlerlife.go)
}

// lineSkipper is a transport that counts the lines it skipped
// (transport.StdioTransport).
type lineSkipper interface{ SkippedLines() int64 }

// fail records a diagnostic and reports it.
func (c *conn) fail(op string, err error) {
	err = redactErr(c.red(), err)
	se := &ServerError{Server: c.cfg.Name, Op: op, Err: err}
	c.mu.Lock()
	c.err = se
	c.mu.Unlock()
	c.report(se)
}

// markDown records that the server is down from now, unless it was
// already.
func (c *conn) markDown() {
	c.mu.Lock()
	if c.downSince.IsZero() {
		c.downSince = time.Now()
	}
	c.mu.Unlock()
}

// unavailable returns the error of a call of tool (an exposed name of c's
// last catalog) while c is down, nil when it is connected or was never
// found down.
func (c *conn) unavailable(tool string) *UnavailableError {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cs != nil || c.downSince.IsZero() {
		return nil
	}
	e := &UnavailableError{Tool: tool, Server: c.cfg.Name, Since: c.downSince}
	if c.err != nil {
		e.Err = c.err
	}
	return e
}

// report logs a recorded diagnostic and emits EventFailed.
func (c *conn) report(se *ServerError) {
	c.s.log.Warn("MCP server failed", "server", c.cfg.Name, "op", se.Op, "err", se.Err.Error())
	c.s.emit(Event{Kind: EventFailed, Server: c.cfg.Name, Err: se})
}

// red returns the server's redactor (nil before resolution: generic
// redaction only).
func (c *conn) red() *redact.Redactor {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.redactor
}

// connect resolves and connects the server, bounded by its connection
// timeout, and reports whether it is connected. Failures are recorded,
// never returned.
func (c *conn) connect(ctx context.Context) bool {
	if len(c.cfg.BlockedEnv) > 0 {
		keys := slices.Clone(c.cfg.BlockedEnv)
		slices.Sort(keys)
		c.fail("resolve", &transport.BlockedEnvError{Server: c.cfg.Name, Keys: keys})
		return false
	}
	ctx, err := c.principalCheck(ctx)
	if err != nil {
		c.fail(principalOp(err), err)
		return false
	}
	if err := CheckProtocolVersion(c.cfg.Entry.ProtocolVersion); err != nil {
		c.fail("resolve", fmt.Errorf("mcp.servers.%s.protocolVersion: %w", c.cfg.Name, err))
		return false
	}
	tr := c.cfg.Transport
	var kind transport.Kind
	if tr == nil {
		topts := transport.Options{}
		if c.s.opts.Transport != nil {
			topts = *c.s.opts.Transport
		}
		if topts.Logger == nil {
			topts.Logger = c.s.log
		}
		topts.OAuth = c.oauthOptions(topts.OAuth)
		r, err := transport.Resolve(c.cfg.Name, c.cfg.Entry, &topts)
		if err != nil {
			c.fail("resolve", err)
			return false
		}
		tr, kind = r.Transport, r.Kind
		c.mu.Lock()
		c.kind, c.launch, c.redactor = r.Kind, r.Launch, r.Redactor
		c.mu.Unlock()
	}
	if ls, ok := tr.(lineSkipper); ok {
		c.mu.Lock()
		if c.skips != nil && c.skips != ls {
			c.skippedBefore += c.skips.SkippedLines()
		}
		c.skips = ls
		c.mu.Unlock()
	}
	co := c.clientOptions()
	co.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true} // inputMiddleware answers them
	client := mcp.NewClient(c.s.opts.ClientInfo, co)
	addTaskMethods(client)
	client.AddSendingMiddleware(c.inputMiddleware)
	if c.s.opts.ListRoots != nil || c.s.opts.Elicit != nil {
		client.AddReceivingMiddleware(c.requestMiddleware)
	}
	order := newBarriers()
	client.AddReceivingMiddleware(order.middleware) // outermost: added last
	timeout := c.cfg.connectTimeout()
	cctx, cancel := context.WithTimeout(dialContext{ctx}, timeout)
	sopts := &mcp.ClientSessionOptions{ProtocolVersion: cmp.Or(c.cfg.Entry.ProtocolVersion, c.s.opts.ProtocolVersion, DefaultProtocolVersion)}
	if _, sdkHTTP := tr.(*mcp.StreamableClientTransport); sdkHTTP {
		// go-sdk tells its streamable HTTP connection the session's state
		// through an unexported method a wrapper cannot forward (without it
		// the server's requests during a call go unanswered): its HTTP
		// requests are wrapped instead, to the same ends. An embedder's
		// client gets the list-page reader that Resolve's has.
		embedded := kind != transport.KindStreamableHTTP
		tr = withStreamableHTTP(tr, func(rt http.RoundTripper) http.RoundTripper {
			if embedded {
				rt = transport.ListPages(rt)
			}
			return withOrderedStreams(newCancelTripper(rt), order)
		})
	} else {
		tr = withCancelNotices(withOrderedNotifications(withFastList(tr), order))
	}
	cs, err := client.Connect(cctx, tr, sopts)
	cancel()
	if err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			err = fmt.Errorf("no answer within the connection timeout (%v): %w", timeout, err)
		case ctx.Err() != nil && c.s.life.Err() == nil:
			err = fmt.Errorf("stopped before the server answered: the caller's context ended (%w)", err)
		}
		c.markDown()
		c.fail("connect", err)
		return false
	}
	c.s.mu.Lock()
	closed := c.s.closed
	if !closed {
		c.mu.Lock()
		c.cs, c.err, c.client, c.downSince = cs, nil, client, time.Time{}
		// A new session is listed afresh (its tools may differ).
		c.listed, c.listFailedAt = false, time.Time{}
		if ir := cs.InitializeResult(); ir != nil {
			c.caps = ir.Capabilities
		}
		c.mu.Unlock()
		// The watcher ends when cs does: Close closes every session
		// before it waits for bg.
		c.s.bg.Go(func() { c.watch(cs) })
	}
	c.s.mu.Unlock()
	if closed {
		_ = c.closeSession(cs)
		return false
	}
	c.px.resDirty.Store(true) // a new session may list other resources and prompts
	c.px.promptDirty.Store(true)
	_, caps := c.open()
	c.afterConnect(ctx, cs, caps)
	// Before EventConnected: a listener that reads the catalog on it (the
	// proxy's Relay) gets one with this server's tools.
	c.s.dirty.Store(true)
	c.s.emit(Event{Kind: EventConnected, Server: c.cfg.Name})
	return true
}

// watch waits for cs to end and then marks the server's session ended
// (ended), unless it was closed on purpose (by Close, a reload, the idle
// reaper or a recycle, which all clear c.cs first) or a failed call marked
// it already.
func (c *conn) watch(cs *mcp.ClientSession) {
	werr := cs.Wait()
	if werr == nil {
		werr = errors.New("the server closed it")
	}
	c.ended(cs, werr, true)
}

// ended marks cs, when it is still the server's session, as ended by
// cause: the server counts as disconnected at once (Status), its tools
// leave the catalog on its next use, EventFailed is emitted with a
// "session" *ServerError ("the connection ended: <cause>") and, like a
// failed connect, it is retried on the first catalog use ListRetryDelay
// later. A principal's own connection is instead redialed by that
// principal's next call. Calls in flight on cs fail with the connection's
// error. cs is closed, releasing the transport: at once when wait (the
// watcher, cs already done), else in the background (a call saw the
// connection fail; the watcher's Wait returns once cs is closed).
func (c *conn) ended(cs *mcp.ClientSession, cause error, wait bool) {
	c.mu.Lock()
	if c.cs != cs {
		c.mu.Unlock()
		return // closed on purpose, or marked already
	}
	c.cs, c.caps, c.listed, c.tools, c.listFailedAt = nil, nil, false, nil, time.Time{}
	if c.downSince.IsZero() {
		c.downSince = time.Now()
	}
	// The diagnostic is set with the disconnection: Status never shows a
	// server disconnected without it.
	se := &ServerError{Server: c.cfg.Name, Op: "session", Err: redactErr(c.redactor, fmt.Errorf("the connection ended: %w", cause))}
	c.err = se
	sub := c.pr.sub
	if sub {
		c.recycle = true
	}
	c.mu.Unlock()
	c.px.reset()
	if wait {
		_ = c.closeSession(cs) // releases the transport (idempotent)
	} else {
		c.closeSessionLater(cs)
	}
	// The catalog is marked stale and the retry scheduled before
	// EventFailed is emitted: whoever reacts to the event sees a catalog
	// without this server's tools.
	c.dirty.Store(true)
	c.s.dirty.Store(true)
	if !sub && c.s.set.Load().byKey[c.cfg.Name] == c {
		c.s.markFailed(c)
	}
	c.report(se)
}

// connectionEnded reports whether a request's error says that its MCP
// session is over: go-sdk refuses requests on a closed connection
// (mcp.ErrConnectionClosed), and fails the requests in flight with the
// read error when the connection ends (io.EOF from a stdio server that
// exited, or a stream that broke off).
func connectionEnded(err error) bool {
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// toolsChanged handles notifications/tools/list_changed. It only marks the
// catalog stale: listing from inside a go-sdk notification handler would
// block the connection's reader (docs/protocol-facts.md, go-sdk v1.8.0).
func (c *conn) toolsChanged(context.Context, *mcp.ToolListChangedRequest) {
	c.dirty.Store(true)
	c.s.dirty.Store(true)
	c.s.emit(Event{Kind: EventToolsChanged, Server: c.cfg.Name})
}

// needsList reports whether a catalog build must list this server: it is
// connected and was never listed, changed, or failed long enough ago.
func (c *conn) needsList(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cs == nil {
		return false
	}
	changed := c.dirty.Swap(false)
	return !c.listed || changed || (!c.listFailedAt.IsZero() && !now.Before(c.listFailedAt.Add(ListRetryDelay)))
}

// listing returns the latest listing and, after a failure, when it may be
// retried.
func (c *conn) listing() ([]*mcp.Tool, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listFailedAt.IsZero() {
		return c.tools, time.Time{}
	}
	return c.tools, c.listFailedAt.Add(ListRetryDelay)
}

// relist lists the server's tools and records the result: a failed
// listing is a "tools/list" diagnostic, retried ListRetryDelay later, and
// leaves the last good listing in place.
func (c *conn) relist(ctx context.Context) {
	c.mu.Lock()
	cs, caps := c.cs, c.caps
	c.mu.Unlock()
	if cs == nil {
		return // the connection ended meanwhile (watch): nothing to list
	}
	tools, dropped, err := listTools(c.principalCtx(ctx), cs, caps, c.cfg.listTimeout())
	for _, why := range dropped {
		c.s.log.Warn("MCP server lists a tool definition no client can use: it is left out, the others are kept", "server", c.cfg.Name, "tool", why)
	}
	if err != nil && ctx.Err() != nil && c.s.life.Err() == nil {
		// The caller's context ended (a short Connect ctx, a Tools caller
		// that gave up): not the server's failure. Nothing is recorded, and
		// the next catalog use lists the server again, without waiting
		// ListRetryDelay.
		c.dirty.Store(true)
		c.s.dirty.Store(true)
		c.s.log.Debug("listing an MCP server's tools stopped: the caller's context ended", "server", c.cfg.Name, "err", ctx.Err().Error())
		return
	}
	tools, repeated := uniqueTools(tools)
	for _, name := range repeated {
		c.s.log.Warn("MCP server lists a tool more than once: its first definition is kept", "server", c.cfg.Name, "tool", name)
	}
	c.mu.Lock()
	c.listed = true
	if c.listRetry != nil {
		c.listRetry.Stop()
		c.listRetry = nil
	}
	if err != nil {
		// The last good listing stays (a busy server that announced a
		// change and then failed to list keeps its tools) until a listing
		// succeeds; a session that ended took its tools with it (ended).
		c.listFailedAt = time.Now()
		c.listFailures++
		if c.s.life.Err() == nil {
			c.listRetry = time.AfterFunc(retryBackoff(c.listFailures), c.retryList)
		}
	} else {
		c.tools, c.listFailedAt, c.listFailures = tools, time.Time{}, 0
		if c.err != nil && c.err.Op == "tools/list" {
			c.err = nil
		}
	}
	c.mu.Unlock()
	if err != nil {
		c.fail("tools/list", err)
	}
}

// retryList lists the server again in the background after a failed
// listing (the timer relist sets, on the schedule of retryBackoff), so that
// a server whose listing failed joins the catalog without a use: when the
// listing succeeds, the catalog is marked stale and EventToolsChanged is
// emitted. It runs under the session's life, with the values of
// Connect's ctx.
func (c *conn) retryList() {
	s := c.s
	if s.life.Err() != nil || c.rl.isRetired() || s.set.Load().byKey[c.cfg.Name] != c {
		return
	}
	s.retryMu.Lock()
	values := s.retryValues
	s.retryMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed { // Close waits for bg only after setting closed
		return
	}
	s.bg.Go(func() {
		c.relist(valuesOf{Context: s.life, values: values})
		c.mu.Lock()
		ok := c.cs != nil && c.listed && c.listFailedAt.IsZero()
		c.mu.Unlock()
		if ok {
			s.dirty.Store(true)
			s.emit(Event{Kind: EventToolsChanged, Server: c.cfg.Name})
		}
	})
}

// uniqueTools drops every tool whose name an earlier tool has (exact
// comparison), returning the kept tools and the repeated names, each once.
// MCP tool names are unique per server: a repeated name would otherwise
// reach the sanitizer as a second tool, get a suffixed name ("t-2") that
// no tool policy entry written for the name matches, and route to the
// same upstream tool, past a tools.deny entry. tools is not modified.
func uniqueTools(tools []*mcp.Tool) ([]*mcp.Tool, []string) {
	seen := make(map[string]bool, len(tools))
	var out []*mcp.Tool
	var repeated []string
	for i, t := range tools {
		if !seen[t.Name] {
			seen[t.Name] = true
			if out != nil {
				out = append(out, t)
			}
			continue
		}
		if out == nil {
			out = append(make([]*mcp.Tool, 0, len(tools)-1), tools[:i]...)
		}
		if !slices.Contains(repeated, t.Name) {
			repeated = append(repeated, t.Name)
		}
	}
	if out == nil {
		return tools, nil
	}
	return out, repeated
}

// listTools follows nextCursor (cursorTrail) with OpenClaw's caps (docs/protocol-facts.md, Defaults and limits),
// each request bounded by timeout. dropped says which tool definitions
// were left out as unusable (listToolsPage).
func listTools(ctx context.Context, cs *mcp.ClientSession, caps *mcp.ServerCapabilities, timeout time.Duration) (tools []*mcp.Tool, dropped []string, err error) {
	var (
		trail cursorTrail
		size  int
	)
	for pages := 1; ; pages++ {
		if pages > MaxListPages {
			return nil, dropped, &ListError{Reason: "more than " + strconv.Itoa(MaxListPages) + " pages"}
		}
		lctx, cancel := context.WithTimeout(ctx, timeout)
		res, next, more, bad, err := listToolsPage(lctx, cs, trail.at)
		cancel()
		dropped = append(dropped, bad...)
		if err != nil {
			if pages == 1 && methodNotFound(err) && caps != nil && caps.Tools == nil && (caps.Resources != nil || caps.Prompts != nil) {
				return nil, nil, nil // a resources- or prompts-only server (docs/protocol-facts.md, Defaults and limits)
			}
			// The callers' errors name the step (ServerError.Op
			// "tools/list"): no prefix here.
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				return nil, dropped, fmt.Errorf("no answer within %v: %w", timeout, err)
			}
			return nil, dropped, err
		}
		done, keep, err := trail.follow(next, more)
		if err != nil {
			return nil, dropped, err
		}
		if !keep {
			return tools, dropped, nil
		}
		tools = append(tools, res.Tools...)
		if len(tools) > MaxListTools {
			return nil, dropped, &ListError{Reason: "more than " + strconv.Itoa(MaxListTools) + " tools"}
		}
		for _, t := range res.Tools {
			size += toolSize(t)
		}
		if size > MaxListBytes {
			return nil, dropped, &ListError{Reason: "more than " + strconv.Itoa(MaxListBytes) + " bytes of tools"}
		}
		if done {
			return tools, dropped, nil
		}
	}
}

// toolSize approximates a tool's share of the listing bytes (the 10 MiB
// cap): its name, description and title plus the JSON size of its schemas,
// estimated by walking them without encoding.
func toolSize(t *mcp.Tool) int {
	return len(t.Name) + len(t.Description) + len(t.Title) + jsonSize(t.InputSchema) + jsonSize(t.OutputSchema)
}

// jsonSize estimates the encoded size of a decoded JSON value (escapes and
// number formatting aside).
func jsonSize(v any) int {
	switch v := v.(type) {
	case nil:
		return 4
	case string:
		return len(v) + 2
	case bool:
		return 5
	case float64, json.Number:
		return 8
	case json.RawMessage:
		return len(v)
	case map[string]any:
		n := 2
		for k, e := range v {
			n += len(k) + 4 + jsonSize(e)
		}
		return n
	case []any:
		n := 2
		for _, e := range v {
			n += 1 + jsonSize(e)
		}
		return n
	default: // a typed schema (e.g. *jsonschema.Schema) from an in-process peer
		b, _ := json.Marshal(v)
		return len(b)
	}
}

func methodNotFound(err error) bool {
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Code == jsonrpc.CodeMethodNotFound {
		return true
	}
	return strings.Contains(strings.ToLower(err.Error()), "method not found")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// session returns the open MCP session, or the diagnostic that explains why
// there is none.
func (c *conn) session(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	cs, recycle, err := c.cs, c.recycle, c.err
	c.mu.Unlock()
	switch {
	case cs != nil:
		return cs, nil
	case recycle:
		return c.redial(ctx)
	case err != nil:
		return nil, err
	}
	return nil, &ServerError{Server: c.cfg.Name, Op: "tools/call", Err: ErrNotConnected}
}

// redial connects a server whose session was recycled. Its tools are
// listed again on the next catalog use, in case they changed meanwhile.
func (c *conn) redial(ctx context.Context) (*mcp.ClientSession, error) {
	c.dialMu.Lock()
	defer c.dialMu.Unlock()
	c.mu.Lock()
	cs := c.cs
	c.mu.Unlock()
	if cs != nil {
		return cs, nil // redialed by the call we waited for
	}
	if !c.connect(ctx) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.err != nil {
			return nil, c.err
		}
		return nil, ErrClosed
	}
	c.mu.Lock()
	c.recycle, cs = false, c.cs
	c.mu.Unlock()
	c.dirty.Store(true)
	c.s.dirty.Store(true)
	return cs, nil
}

// checkPaused returns a *PausedError while the server is paused.
func (c *conn) checkPaused() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pausedUntil.IsZero() && time.Now().Before(c.pausedUntil) {
		return &PausedError{Server: c.cfg.Name, Failures: c.s.opts.PauseAfter, Until: c.pausedUntil}
	}
	return nil
}

// admit lets one request through to the server: it refuses while the
// server is paused, connects it if needed, and waits for the server's turn
// when it does not support parallel calls (checking the pause again after
// the wait). release ends the turn; call it once the request is answered.
func (c *conn) admit(ctx context.Context) (cs *mcp.ClientSession, release func(), err error) {
	if err := c.checkPaused(); err != nil {
		return nil, nil, err
	}
	if cs, err = c.session(ctx); err != nil {
		return nil, nil, err
	}
	if c.turn == nil {
		return cs, func() {}, nil
	}
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	release = func() { <-c.turn }
	if err := c.checkPaused(); err != nil { // paused while we waited
		release()
		return nil, nil, err
	}
	return cs, release, nil
}

// dialContext is the context a connection is made with: ctx without the
// values go-sdk's mcp package keeps in it. A connection made while serving
// a request (a per-requester principal's own connection, a catalog use
// that retries a server) would otherwise inherit the served request's
// values, among them the Mcp-Protocol-Version a go-sdk server stores for
// its handlers, which go-sdk's streamable client then sends as its own
// header while it initializes: a 2026-07-28 client's version on the
// initialize of a 2025-11-25 connection, refused by the server (400).
type dialContext struct{ context.Context }

// mcpPackage is the import path whose context keys dialContext hides.
var mcpPackage = reflect.TypeFor[mcp.Meta]().PkgPath()

// Value hides the keys of go-sdk's mcp package.
func (d dialContext) Value(key any) any {
	if t := reflect.TypeOf(key); t != nil && t.PkgPath() == mcpPackage {
		return nil
	}
	return d.Context.Value(key)
}

// call runs tools/call for t upstream, on the one request path.
func (c *conn) call(ctx context.Context, t *Tool, args []byte) (*mcp.CallToolResult, error) {
	return c.request(ctx, t, "tools/call", func(ctx context.Context, cs *mcp.ClientSession) (*mcp.CallToolResult, error) {
		params := &mcp.CallToolParams{Name: t.RawName()}
		if len(args) > 0 {
			params.Arguments = json.RawMessage(args)
		}
		if fn, ok := ctx.Value(progressKey{}).(func(Progress)); ok && fn != nil {
			// The token is random and bound to cs: another server cannot
			// guess it, nor use one it learnt (onProgress drops it from them).
			tok := progressToken()
			reset, _ := ctx.Value(progressResetKey{}).(func())
			c.s.progressMu.Lock()
			c.s.progress[tok] = progressEntry{tool: t.Name, fn: fn, cs: cs, reset: reset}
			c.s.progressMu.Unlock()
			defer func() {
				c.s.progressMu.Lock()
				delete(c.s.progress, tok)
				c.s.progressMu.Unlock()
			}()
			params.SetProgressToken(tok)
		}
		if declaresTasks(ctx) {
			// The server may answer with a CreateTaskResult, which go-sdk
			// cannot decode: it is read off the wire (TaskCreated).
			page := &fastPage{}
			page.Repair = taskFold(c.cfg.Name)
			ctx = transport.WithListPage(context.WithValue(ctx, fastPageKey{}, page), &page.ListPage)
		}
		if tr := c.s.tracer; tr != nil {
			raw := SpanToolName(t.RawName())
			ctx, span := tr.Start(ctx, "tools/call "+raw, trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(AttrMCPMethod.String("tools/call"), AttrToolName.String(raw), AttrServer.String(c.cfg.Name)))
			params.Meta = injectTraceContext(ctx, params.Meta)
			res, err := cs.CallTool(ctx, params)
			if res != nil && res.IsError {
				span.SetAttributes(AttrToolIsError.Bool(true))
			}
			endSpan(span, err)
			return res, err
		}
		return cs.CallTool(ctx, params)
	})
}

// request is the one path of a tool's request upstream (op is tools/call,
// or the MCP method behind a utility tool): admission (pause, connect, the
// server's turn when it does not support parallel calls), the call's
// attribution (server-to-client requests that arrive meanwhile, and the
// input requests of its result, belong to it), the request timeout, the
// Session's life (Close fails the request at once with ErrClosed, without
// waiting for the transport to close: a stdio server may take its whole
// grace to stop), and the failure accounting (pause, a dead connection
// marked at once; a JSON-RPC error answer is returned as a *ServerError
// but does not count toward the pause). do sends the request on cs under
// ctx.
func (c *conn) request(ctx context.Context, t *Tool, op string, do func(ctx context.Context, cs *mcp.ClientSession) (*mcp.CallToolResult, error)) (*mcp.CallToolResult, error) {
	cs, release, err := c.admit(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	defer c.s.requestStarted()()
	ctx = context.WithValue(ctx, callInfoKey{}, CallInfo{Tool: t.Name, Server: c.cfg.Name})
	defer c.px.enter(ctx)()
	timeout := c.cfg.requestTimeout()
	rctx, dl := newCallDeadline(ctx, timeout)
	stopLife := context.AfterFunc(c.s.life, dl.stop)
	res, err := do(context.WithValue(rctx, progressResetKey{}, dl.progressed), cs)
	timedOut := dl.expired() && ctx.Err() == nil
	stopLife()
	dl.stop()
	if err == nil {
		c.mu.Lock()
		c.failures = 0
		c.mu.Unlock()
		return res, nil
	}
	if cerr := c.s.closedErr(); cerr != nil {
		return nil, cerr
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // the caller gave up: not the server's failure
	}
	if timedOut {
		err = dl.err()
	}
	se := &ServerError{Server: c.cfg.Name, Op: op, Err: redactErr(c.red(), err)}
	if !timedOut && serverAnswered(err) {
		// The server answered, with a JSON-RPC error: it works, and the
		// answer is the caller's. Only failures to answer count toward the
		// pause, which takes the server away from every caller.
		c.mu.Lock()
		c.failures = 0
		c.mu.Unlock()
		return nil, se
	}
	if !timedOut && clientRefused(err) {
		return nil, se
	}
	c.failed(se, timedOut)
	if !timedOut && connectionEnded(err) {
		c.ended(cs, err, false) // now, not when the watcher gets to it
	}
	return nil, se
}

// MaxTotalTimeoutFactor bounds how far progress extends a request: each
// notifications/progress of a call resets its request timeout
// (requestTimeoutMs; the TypeScript SDK's resetTimeoutOnProgress), but the
// call ends at the latest MaxTotalTimeoutFactor × requestTimeoutMs after it
// was sent (the TypeScript SDK's maxTotalTimeout): 10 minutes for the
// default 60 s.
const MaxTotalTimeoutFactor = 10

// progressResetKey is the context key of the func a call's progress calls
// to reset its timeout (callDeadline.progressed).
type progressResetKey struct{}

// callDeadline is a request's timeout: it ends the request's context
// timeout after it was sent, or after the latest progress, and never
// later than MaxTotalTimeoutFactor × timeout after it was sent.
type callDeadline struct {
	cancel  context.CancelFunc
	timeout time.Duration
	limit   time.Time // the latest end: sent + MaxTotalTimeoutFactor × timeout

	mu     sync.Mutex
	timer  *time.Timer
	fired  bool // the timeout passed
	capped bool // the current end is limit, not timeout after progress
}

// newCallDeadline returns ctx ended by the timeout and the deadline that
// progress extends.
func newCallDeadline(ctx context.Context, timeout time.Duration) (context.Context, *callDeadline) {
	rctx, cancel := context.WithCancel(ctx)
	d := &callDeadline{cancel: cancel, timeout: timeout, limit: time.Now().Add(MaxTotalTimeoutFactor * timeout)}
	d.mu.Lock()
	d.timer = time.AfterFunc(timeout, d.fire)
	d.mu.Unlock()
	return rctx, d
}

func (d *callDeadline) fire() {
	d.mu.Lock()
	d.fired = true
	d.mu.Unlock()
	d.cancel()
}

// progressed resets the timeout: a progress notification of the call
// arrived. Past the limit, or once the timeout passed, it does nothing.
func (d *callDeadline) progressed() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fired || !d.timer.Stop() {
		return
	}
	next := d.timeout
	if left := time.Until(d.limit); left < next {
		next, d.capped = max(left, 0), true
	}
	d.timer.Reset(next)
}

// stop ends the request's context (the request is over, or the session
// closes).
func (d *callDeadline) stop() {
	d.mu.Lock()
	d.timer.Stop()
	d.mu.Unlock()
	d.cancel()
}

// expired reports whether the timeout ended the request.
func (d *callDeadline) expired() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fired
}

// err is the error of a request the timeout ended; it wraps
// context.DeadlineExceeded.
func (d *callDeadline) err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.capped {
		return fmt.Errorf("no answer within the maximum total timeout (%v: progress resets the %v request timeout up to %d times it): %w",
			MaxTotalTimeoutFactor*d.timeout, d.timeout, MaxTotalTimeoutFactor, context.DeadlineExceeded)
	}
	return fmt.Errorf("no answer within the request timeout (%v): %w", d.timeout, context.DeadlineExceeded)
}

// Codes go-sdk gives the errors it makes itself rather than receives
// (its internal jsonrpc2 package: ErrClientClosing, ErrServerClosing,
// ErrRejected). A transport's refusal of a request (an HTTP status without
// a JSON-RPC error body, such as 500) comes back as ErrRejected.
const (
	codeClientClosing       = -32003
	codeServerClosing       = -32004
	codeRejectedByTransport = -32005
)

// serverAnswered reports whether err is the server's own JSON-RPC error
// answer to the request (over stdio, SSE, or HTTP with any status that
// carries a JSON-RPC error body), as opposed to a failure to get one.
func serverAnswered(err error) bool {
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) {
		return false
	}
	switch rpc.Code {
	case codeClientClosing, codeServerClosing, codeRejectedByTransport:
		return false
	}
	return true
}

// clientRefused reports whether err is this client's refusal of a server's
// input request (SEP-2322, an *InputRequestError naming a Method): the
// embedder has no handler for it, or its handler failed or answered
// wrongly. The server did its part, so the failure does not count toward
// its pause (nor does it reset the count). A server that exhausts the
// loop's limits (Method "": it stayed busy, or kept asking) does count.
func clientRefused(err error) bool {
	var ire *InputRequestError
	return errors.As(err, &ire) && ire.Method != ""
}

// failed counts a failed call and pauses the server at the limit.
func (c *conn) failed(cause error, timedOut bool) {
	c.mu.Lock()
	if !c.pausedUntil.IsZero() {
		c.mu.Unlock()
		return // already paused: calls that were in flight do not extend it
	}
	c.failures++
	if c.failures < c.s.opts.PauseAfter {
		c.mu.Unlock()
		return
	}
	d := c.s.opts.PauseDuration
	until := time.Now().Add(d)
	c.pausedUntil, c.failures = until, 0
	// A paused server is not healthy: its last failure is its diagnostic
	// (Status, Diagnostics) until the pause ends or it connects again.
	if se, ok := cause.(*ServerError); ok {
		c.err, c.pauseErr = se, se
	}
	c.pauseGen++
	gen := c.pauseGen
	var drop *mcp.ClientSession
	if timedOut {
		// Repeated timeouts: the connection itself may be stuck; drop it and
		// redial on the first call after the pause (docs/protocol-facts.md, Defaults and limits).
		drop, c.cs, c.recycle = c.cs, nil, true
	}
	c.mu.Unlock()
	if drop != nil {
		c.closeSessionLater(drop)
	}
	perr := &PausedError{Server: c.cfg.Name, Failures: c.s.opts.PauseAfter, Until: until}
	c.s.log.Warn("MCP server paused", "server", c.cfg.Name, "until", until, "err", cause.Error())
	c.s.emit(Event{Kind: EventPaused, Server: c.cfg.Name, Until: until, Err: perr})
	// The timer starts after EventPaused so that EventResumed never
	// precedes it; its callback ignores a pause that is no longer current.
	c.mu.Lock()
	if c.pauseGen == gen && c.s.life.Err() == nil {
		c.pauseTimer = time.AfterFunc(time.Until(until), func() { c.resume(gen) })
	}
	c.mu.Unlock()
}

// resume ends pause number gen (the timer's callback).
func (c *conn) resume(gen uint64) {
	if c.s.closedErr() != nil {
		return
	}
	c.mu.Lock()
	if gen != c.pauseGen || c.pausedUntil.IsZero() {
		c.mu.Unlock()
		return
	}
	c.pausedUntil, c.pauseTimer = time.Time{}, nil
	if c.err != nil && c.err == c.pauseErr {
		c.err = nil
	}
	c.pauseErr = nil
	c.mu.Unlock()
	c.s.emit(Event{Kind: EventResumed, Server: c.cfg.Name})
}

// reap closes an idle server's session and forgets its listing, so that
// the next use connects and lists it again. It reports whether a session
// was open.
func (c *conn) reap() bool {
	c.reapPrincipals()
	c.mu.Lock()
	cs := c.cs
	c.cs, c.caps, c.listed, c.tools, c.listFailedAt, c.recycle = nil, nil, false, nil, time.Time{}, false
	c.mu.Unlock()
	c.px.reset()
	if cs == nil {
		return false
	}
	if err := c.closeSession(cs); err != nil {
		c.s.log.Warn("closing an idle MCP server", "server", c.cfg.Name, "err", redactErr(c.red(), err).Error())
	}
	return true
}

// close ends the server's session and its pause timer.
func (c *conn) close() error {
	perr := c.closePrincipals()
	c.mu.Lock()
	cs := c.cs
	c.cs = nil
	if c.pauseTimer != nil {
		c.pauseTimer.Stop()
		c.pauseTimer = nil
	}
	if c.listRetry != nil {
		c.listRetry.Stop()
		c.listRetry = nil
	}
	c.mu.Unlock()
	if cs == nil {
		return perr
	}
	if err := c.closeSession(cs); err != nil {
		se := &ServerError{Server: c.cfg.Name, Op: "close", Err: redactErr(c.red(), err)}
		if perr != nil {
			return errors.Join(se, perr)
		}
		return se
	}
	return perr
}

// redactedError carries a redacted message and keeps the cause for
// errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactErr masks the server's known secrets and generic secret shapes in
// err's text.
func redactErr(r *redact.Redactor, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := r.Redact(msg); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}
