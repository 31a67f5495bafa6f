package runtime

//lint:file-ignore SA1019 logging is deprecated by SEP-2577 but still served during its deprecation window: the session passes the client's logging level to its servers on purpose

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/transport"
)

// Tool is one entry of a session's catalog.
type Tool struct {
	// Name is the exposed name chosen by the sanitize_tool_names hook
	// (`server__tool`, ^[a-zA-Z0-9_-]{1,64}$): what the LLM calls.
	Name string
	// Server is the raw name of the server the tool comes from.
	Server string
	// Upstream is the server's definition (its Name is the raw tool name,
	// [Tool.RawName]). It is shared: do not modify it.
	Upstream *mcp.Tool
	// Utility is "" for a tool of the server, or the utility operation
	// (UtilityResourcesList, UtilityResourcesRead, UtilityPromptsList,
	// UtilityPromptsGet) the runtime serves from the server's resources or
	// prompts; Upstream is then the runtime's definition of it.
	Utility string
	// Pin is the tool's pin state when its server has pins
	// (Options.Pins; docs/tool-pins.md), the before_tool_call input's
	// "pin"; nil for a server without pins and for utility tools. It is
	// shared: do not modify it.
	Pin *policies.ToolPin
}

// RawName is the tool's raw name: the server's own name of it
// (Upstream.Name), which policies see as tool.original.
func (t Tool) RawName() string { return t.Upstream.Name }

// EventRetrying is reported when a server whose connection failed (or
// ended) is connected again, in the background: on the first use of the
// catalog at least ListRetryDelay (5 s, OpenClaw's catalog failure retry)
// after the failure, or when its own retry schedule (retryBackoff) comes
// due; EventConnected or EventFailed follows.
const EventRetrying EventKind = "retrying"

// catalog is one build of a session's tools, immutable once published.
type catalog struct {
	// set is the server set the catalog was built from: a call routes to
	// its connections, and a reload (another set) makes it stale.
	set    *connSet
	tools  []Tool
	byName map[string]*Tool
	count  map[string]int // exposed tools per raw server name
	// hidden holds the tools the tool policy hides, by exposed name.
	hidden map[string]*HiddenToolError
	// unpinned holds the tools the pin check hides (mode block), by
	// exposed name.
	unpinned map[string]*PinError
	// down holds, by exposed name, the raw server of each tool that left
	// the catalog because its server is down (conn.unavailable).
	down map[string]string
	// retryAt is the earliest time a server whose listing failed may be
	// listed again; zero when none failed.
	retryAt time.Time
}

// unavailable returns the error of a call of name, a tool that left the
// catalog with its server, while that server is down; nil otherwise.
func (cat *catalog) unavailable(name string) *UnavailableError {
	server, ok := cat.down[name]
	if !ok {
		return nil
	}
	if c := cat.set.byKey[server]; c != nil {
		return c.unavailable(name)
	}
	return nil
}

// connecting reports whether servers that Connect left connecting in the
// background have not settled yet.
func (s *Session) connecting() bool {
	s.mu.Lock()
	startup := s.startup
	s.mu.Unlock()
	if startup == nil {
		return false
	}
	select {
	case <-startup:
		return false
	default:
		return true
	}
}

// Unavailable returns the error that CallTool returns for name, an exposed
// name the latest catalog does not list although it names it: the
// *UnavailableError of a tool that left with its server (its connection
// ended or failed), or the *PinError of a tool the pin check hides (mode
// block); nil for any other name. It never lists or connects: a surface
// that stopped serving the tool (the proxy) uses it to answer a client
// that still calls it with a tool error.
func (s *Session) Unavailable(name string) error {
	s.mu.Lock()
	cat := s.cat
	s.mu.Unlock()
	if cat == nil {
		return nil
	}
	if ue := cat.unavailable(name); ue != nil {
		return ue
	}
	if pe := cat.unpinned[name]; pe != nil {
		e := *pe
		return &e
	}
	return nil
}

// Session is an embedded MCP client runtime: the servers of one agent
// session, their catalog and the policy boundary every call passes. Its
// methods are safe for concurrent use.
type Session struct {
	opts   Options
	log    *slog.Logger
	tracer trace.Tracer // nil when tracing is off (Options.TracerProvider)
	// set is the current server set, replaced as a whole by Reload: every
	// reader loads it once and works on that snapshot.
	set      atomic.Pointer[connSet]
	reloadMu sync.Mutex // one Reload at a time

	// life ends when Close starts: calls in flight (policy, approval,
	// upstream request) are cancelled, which sends notifications/cancelled.
	life    context.Context
	endLife context.CancelFunc
	// requests counts upstream requests in flight (conn.request); drained
	// (capacity 1) is signalled when the last one returns after life
	// ended, so that Close lets them return, cancelled, before it closes
	// their transports (go-sdk retires a cancelled request under a lock
	// that closing the connection holds).
	requests atomic.Int64
	drained  chan struct{}

	// use is held shared by every Tools and CallTool; the idle reaper
	// only takes it with TryLock, so it never disconnects a session in use.
	use     sync.RWMutex
	lastUse atomic.Int64 // UnixNano of the latest use
	bg      sync.WaitGroup

	mu        sync.Mutex
	startup   chan struct{} // closed when the connections Connect left in the background settle; nil without
	settled   chan struct{} // closed (and dropped) when one of the servers connectAll connects settles; nil until asked for
	connected bool
	closed    bool
	idle      bool // reaped: reconnected on next use
	closeDone chan struct{}
	cat       *catalog

	buildMu sync.Mutex    // one catalog build at a time
	exposed *exposedNames // every tool name exposed so far; under buildMu
	dirty   atomic.Bool   // a server's tools changed since the last build
	seq     atomic.Uint64 // approval ids

	progressMu sync.Mutex
	progress   map[string]progressEntry

	policy atomic.Pointer[toolPolicy] // nil: every tool visible
	pins   atomic.Pointer[pinState]   // nil: no server has pins

	// pinDigests holds the digests of the tools listed at the last build,
	// pinReported the digest last reported per mismatching tool; under
	// buildMu.
	pinDigests  map[string]*listingDigests
	pinReported map[pinKey]string

	levelMu  sync.Mutex
	logLevel mcp.LoggingLevel // the latest SetLoggingLevel, for servers a reload adds

	promptMu      sync.Mutex                    // one prompt naming at a time
	promptCache   atomic.Pointer[promptCatalog] // the latest prompt naming
	promptExposed *exposedNames                 // every prompt name exposed so far; under promptMu

	taskMu    sync.Mutex
	taskSlots map[taskKey]*taskSlot // the limiter slots of running tasks (tasks.go); under taskMu

	retryMu    sync.Mutex
	connFailed map[*conn]time.Time     // servers whose connection failed, and when
	retrying   map[*conn]chan struct{} // retries in flight, closed when each ends
	retryTimer map[*conn]*time.Timer   // the background retry of each failed server
	retryCount map[*conn]int           // consecutive failed connections, for the backoff
	// retryValues holds the values (principal, caller) of Connect's ctx
	// for the retries the timers start.
	retryValues context.Context
}

// progressEntry is a call waiting for progress: the exposed tool, the
// handler of WithProgress, and the MCP session the call was sent on, the
// only one whose notifications may carry its token.
type progressEntry struct {
	tool  string
	fn    func(Progress)
	cs    *mcp.ClientSession
	reset func() // resets the call's request timeout (callDeadline.progressed); nil for none
}

// progressToken returns a fresh progress token: "openclaw-" and 128 random
// bits in hex. A counter would let one server predict the tokens of calls
// to the others.
func progressToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "openclaw-" + hex.EncodeToString(b[:])
}

// New returns a session over servers (declaration order: it decides the
// safe server names, docs/tool-names.md §2). It starts nothing: Connect does. It fails when a
// server name is empty or repeated, or a required option is missing.
func New(servers []Server, opts *Options) (*Session, error) {
	if opts == nil || opts.Enforcer == nil {
		return nil, errors.New("runtime: Options.Enforcer is nil: every call must pass a before_tool_call policy (hand in the policy engine or a policies.Chain)")
	}
	if opts.Sanitizer == nil {
		return nil, errors.New("runtime: Options.Sanitizer is nil: the catalog must be named by a sanitize_tool_names policy")
	}
	if err := CheckProtocolVersion(opts.ProtocolVersion); err != nil {
		return nil, fmt.Errorf("runtime: Options.ProtocolVersion: %w", err)
	}
	s := &Session{
		opts:        *opts,
		closeDone:   make(chan struct{}),
		progress:    map[string]progressEntry{},
		connFailed:  map[*conn]time.Time{},
		retrying:    map[*conn]chan struct{}{},
		retryTimer:  map[*conn]*time.Timer{},
		retryCount:  map[*conn]int{},
		retryValues: context.Background(),
		exposed:     newExposedNames(),
		tracer:      newTracer(opts.TracerProvider),

		promptExposed: newExposedNames(),
	}
	if opts.ToolPolicy != nil {
		tp := *opts.ToolPolicy
		s.opts.ToolPolicy = &tp
	}
	s.opts.Reserved = slices.Clone(opts.Reserved)
	if s.opts.PauseAfter <= 0 {
		s.opts.PauseAfter = DefaultPauseAfter
	}
	if s.opts.PauseDuration <= 0 {
		s.opts.PauseDuration = DefaultPauseDuration
	}
	if s.opts.ClientInfo == nil {
		s.opts.ClientInfo = &mcp.Implementation{Name: "openclaw-go", Version: "dev"}
	}
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.Default()
	}
	s.policy.Store(compileToolPolicy(opts.ToolPolicy))
	s.storePins(opts.Pins, opts.PinMode)
	if err := checkServers(servers); err != nil {
		return nil, err
	}
	for _, w := range config.AmbiguousServerNames(serverNames(servers)) {
		s.log.Warn(fmt.Sprintf("MCP server %q: %s", w.Server, w.Message), "server", w.Server)
	}
	set := &connSet{decl: slices.Clone(servers), byKey: make(map[string]*conn, len(servers))}
	for _, sv := range servers {
		set.add(s.newConn(sv))
	}
	s.set.Store(set)
	s.life, s.endLife = context.WithCancel(context.Background())
	s.drained = make(chan struct{}, 1)
	return s, nil
}

// closeDrain bounds how long Close waits for the upstream requests in
// flight to return once cancelled.
const closeDrain = time.Second

// requestStarted counts an upstream request in flight; call the returned
// func when it returns.
func (s *Session) requestStarted() (done func()) {
	s.requests.Add(1)
	return func() {
		if s.requests.Add(-1) == 0 && s.life.Err() != nil {
			select {
			case s.drained <- struct{}{}:
			default:
			}
		}
	}
}

// Connect connects every enabled server concurrently, each bounded by its
// connection timeout, then lists their tools and names the catalog. A server
// that fails becomes a diagnostic (Diagnostics, EventFailed) and contributes
// no tools: it never fails the session. Connect returns an error only when
// the session is closed, Connect was already called, or the catalog cannot
// be named (a failing sanitize_tool_names policy: no unsanitized name is
// ever exposed).
//
// ctx bounds all of Connect, on top of each server's own timeouts. When it
// ends first, a server still connecting fails (a "connect" diagnostic
// saying the caller's context ended; it is retried on the first catalog use
// ListRetryDelay later), and a server still listing its tools is left
// unlisted without a diagnostic: the next Tools or CallTool lists it. A
// sanitizer that honours ctx (the Wasm policy engine does) then fails to
// name the catalog, and Connect returns that error, wrapping ctx's: the
// session is connected all the same, and the next Tools or CallTool names
// the catalog. A ctx shorter than the slowest server's connection timeout
// therefore trades a complete first catalog for a prompt return; pass a
// ctx without a deadline to wait for every server's own bounds. With
// Options.ConnectWait, Connect returns with the servers ready within it
// and the others join the catalog as they answer, bounded by their own
// timeouts only.
func (s *Session) Connect(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return ErrClosed
	case s.connected:
		s.mu.Unlock()
		return errors.New("runtime: Connect called twice")
	}
	s.connected = true
	s.mu.Unlock()
	s.retryMu.Lock()
	s.retryValues = context.WithoutCancel(ctx)
	s.retryMu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.life, cancel) // Close aborts connecting
	defer func() {
		stop()
		cancel()
	}()

	if wait := s.opts.ConnectWait; wait > 0 {
		s.connectReady(ctx, wait)
	} else {
		s.connectAll(ctx, s.set.Load().conns)
	}
	s.lastUse.Store(time.Now().UnixNano())
	if ttl := s.opts.IdleTTL; ttl > 0 {
		s.mu.Lock()
		if !s.closed { // Close waits for bg only after setting closed
			s.bg.Go(func() { s.reapLoop(ttl) })
		}
		s.mu.Unlock()
	}
	_, err := s.rebuild(ctx)
	return err
}

// connectReady connects and lists the servers in the background, under the
// session's life with the values of ctx, and returns when they all settled
// (connected and listed, or failed), when wait has passed, or when ctx
// ends, whichever is first (Options.ConnectWait). Close cancels and waits
// for the connections still in flight.
func (s *Session) connectReady(ctx context.Context, wait time.Duration) {
	bctx := valuesOf{Context: s.life, values: ctx}
	done := make(chan struct{})
	s.mu.Lock()
	if s.closed { // Close waits for bg only after setting closed
		s.mu.Unlock()
		return
	}
	s.startup = done
	s.bg.Go(func() {
		defer close(done)
		s.connectAll(bctx, s.set.Load().conns)
	})
	s.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// WaitConnected waits until the servers that Connect left connecting in
// the background (Options.ConnectWait) have connected and listed or
// failed, or ctx ends (its error is returned), or the session closes
// (ErrClosed). Without such servers it returns nil at once.
func (s *Session) WaitConnected(ctx context.Context) error {
	s.mu.Lock()
	startup := s.startup
	s.mu.Unlock()
	if startup == nil {
		return nil
	}
	select {
	case <-startup:
		// A catalog build in flight (started by EventConnected's listener)
		// has cleared the dirty flag: let it publish its catalog first, so
		// the caller's next catalog use sees these servers.
		s.buildMu.Lock()
		s.buildMu.Unlock()
		return s.closedErr()
	case <-s.life.Done():
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// connectAll connects and lists the enabled servers of conns concurrently.
// A connection retired by a reload meanwhile is left alone: its closer
// takes dialMu after this, so no session it opened survives.
func (s *Session) connectAll(ctx context.Context, conns []*conn) {
	var wg sync.WaitGroup
	for _, c := range conns {
		if c.cfg.Disabled {
			continue
		}
		wg.Go(func() {
			c.dialMu.Lock()
			if c.rl.isRetired() {
				c.dialMu.Unlock()
				return
			}
			if cs, _ := c.open(); cs != nil { // connected by a concurrent Connect or reload
				c.dialMu.Unlock()
				return
			}
			ok := c.connect(ctx)
			c.dialMu.Unlock()
			s.noteConnect(c, ok)
			if ok {
				c.relist(ctx) // no barrier: each server lists as soon as it is up
			}
			s.serverSettled()
		})
	}
	wg.Wait()
}

// settledSignal returns a channel closed when the next server that
// connectAll connects has connected and listed, or failed.
func (s *Session) settledSignal() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.settled == nil {
		s.settled = make(chan struct{})
	}
	return s.settled
}

// serverSettled marks the catalog stale and wakes the callers of
// settledSignal: a server connected and listed, or failed.
func (s *Session) serverSettled() {
	s.dirty.Store(true)
	s.mu.Lock()
	if s.settled != nil {
		close(s.settled)
		s.settled = nil
	}
	s.mu.Unlock()
}

// reapLoop disconnects the servers after ttl without use (OpenClaw's
// mcp.sessionIdleTtlMs), checking every min(ttl, 60 s), until Close.
func (s *Session) reapLoop(ttl time.Duration) {
	tick := time.NewTicker(min(ttl, time.Minute))
	defer tick.Stop()
	for {
		select {
		case <-s.life.Done():
			return
		case <-tick.C:
			s.reapIfIdle(ttl)
		}
	}
}

// reapIfIdle disconnects every server when nothing used the session for
// ttl and nothing is in flight; the next use reconnects them.
func (s *Session) reapIfIdle(ttl time.Duration) {
	if time.Since(time.Unix(0, s.lastUse.Load())) < ttl || !s.use.TryLock() {
		return
	}
	s.mu.Lock()
	if s.closed || s.idle {
		s.mu.Unlock()
		s.use.Unlock()
		return
	}
	s.idle, s.cat = true, nil
	s.mu.Unlock()
	var reaped []string
	for _, c := range s.set.Load().conns {
		if c.reap() {
			reaped = append(reaped, c.cfg.Name)
		}
	}
	s.use.Unlock()
	for _, name := range reaped { // no lock held: OnEvent may use the session
		s.emit(Event{Kind: EventIdle, Server: name})
	}
}

// touch records a use of the session and holds off the reaper until done
// is called.
func (s *Session) touch() (done func()) {
	s.use.RLock()
	s.lastUse.Store(time.Now().UnixNano())
	return func() {
		s.lastUse.Store(time.Now().UnixNano())
		s.use.RUnlock()
	}
}

// Tools returns the catalog in its deterministic order (by safe server name,
// raw tool name, raw server name; docs/tool-names.md §2), listing again the servers
// whose tools changed since the last call.
func (s *Session) Tools(ctx context.Context) ([]Tool, error) {
	defer s.touch()()
	cat, err := s.catalog(ctx)
	if err != nil {
		return nil, err
	}
	return slices.Clone(cat.tools), nil
}

// catalog returns the current catalog, rebuilding it when a server's tools
// changed or a failed listing may be retried.
func (s *Session) catalog(ctx context.Context) (*catalog, error) {
	s.mu.Lock()
	closed, connected, idle, cat := s.closed, s.connected, s.idle, s.cat
	s.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case !connected:
		return nil, fmt.Errorf("%w: Connect has not been called", ErrNotConnected)
	case idle:
		s.revive(ctx)
		return s.rebuild(ctx)
	}
	s.startRetries(ctx, time.Now())
	if !s.stale(cat, time.Now()) {
		return cat, nil
	}
	return s.rebuild(ctx)
}

// noteConnect records the outcome of connecting c: a failed connection
// (not a resolution failure, which a retry cannot mend) is retried
// (connFailed).
func (s *Session) noteConnect(c *conn, ok bool) {
	op := ""
	if !ok {
		c.mu.Lock()
		if c.err != nil {
			op = c.err.Op
		}
		c.mu.Unlock()
	}
	if op == "connect" {
		s.markFailed(c)
		return
	}
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	delete(s.connFailed, c)
	if ok {
		delete(s.retryCount, c)
	}
	if tm := s.retryTimer[c]; tm != nil {
		tm.Stop()
		delete(s.retryTimer, c)
	}
}

// RetryBackoffMax bounds the delay between two background retries of a
// server whose connection failed: the n-th consecutive failure is retried
// ListRetryDelay·2^(n-1) later (5 s, 10 s, 20 s, …), at most
// RetryBackoffMax, until it connects or the session closes.
const RetryBackoffMax = 5 * time.Minute

// retryBackoff returns the delay before the background retry of the n-th
// consecutive failed connection (n ≥ 1).
func retryBackoff(n int) time.Duration {
	d := ListRetryDelay
	for i := 1; i < n && d < RetryBackoffMax; i++ {
		d *= 2
	}
	return min(d, RetryBackoffMax)
}

// markFailed records that c's connection failed (or ended) now: it is
// retried on the first catalog use ListRetryDelay later (OpenClaw's
// catalog failure retry), and in the background on its own schedule
// (retryBackoff), so that a server that comes back joins the catalog
// (EventConnected) without waiting for a use. Nothing is scheduled once
// the session's life ended.
func (s *Session) markFailed(c *conn) {
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	if s.life.Err() != nil {
		return
	}
	s.connFailed[c] = time.Now()
	s.retryCount[c]++
	if tm := s.retryTimer[c]; tm != nil {
		tm.Stop()
	}
	s.retryTimer[c] = time.AfterFunc(retryBackoff(s.retryCount[c]), func() { s.retryDue(c) })
}

// retryDue is the background retry timer of c: it starts the retries due
// (c's among them) with the values of Connect's ctx.
func (s *Session) retryDue(c *conn) {
	s.retryMu.Lock()
	delete(s.retryTimer, c)
	values := s.retryValues
	s.retryMu.Unlock()
	if s.life.Err() != nil {
		return
	}
	s.startRetries(values, time.Now())
}

// stale reports whether cat must be rebuilt at now: there is none, a
// server's tools changed (or a server connected), or a failed listing may
// be retried. A failed connection does not make it stale: its retry runs
// in the background (startRetries) and marks the catalog dirty when it
// connects.
func (s *Session) stale(cat *catalog, now time.Time) bool {
	return cat == nil || cat.set != s.set.Load() || s.dirty.Load() || (!cat.retryAt.IsZero() && !now.Before(cat.retryAt))
}

// retryAt returns when c's failed connection may be retried; zero when it
// did not fail.
func (s *Session) retryAt(c *conn) time.Time {
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	at, ok := s.connFailed[c]
	if !ok {
		return time.Time{}
	}
	return at.Add(ListRetryDelay)
}

// startRetries starts, in the background, the retry of every server of the
// current set whose connection failed at least ListRetryDelay before now,
// one retry at a time per server: the caller never waits for it. A retry
// runs under the session's life (Close cancels it and waits for it) with
// the values of ctx (the principal and caller of the use that started it).
func (s *Session) startRetries(ctx context.Context, now time.Time) {
	var due []*conn
	s.retryMu.Lock()
	for _, c := range s.set.Load().conns {
		at, ok := s.connFailed[c]
		if !ok || now.Before(at.Add(ListRetryDelay)) || s.retrying[c] != nil {
			continue
		}
		delete(s.connFailed, c) // noteConnect records the retry's outcome
		s.retrying[c] = make(chan struct{})
		due = append(due, c)
	}
	s.retryMu.Unlock()
	if len(due) == 0 {
		return
	}
	rctx := valuesOf{Context: s.life, values: ctx}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range due {
		if s.closed { // Close waits for bg only after setting closed
			s.endRetry(c)
			continue
		}
		s.bg.Go(func() {
			defer s.endRetry(c)
			s.retryConnect(rctx, c)
		})
	}
}

// endRetry records that c's retry is over.
func (s *Session) endRetry(c *conn) {
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	if done := s.retrying[c]; done != nil {
		close(done)
		delete(s.retrying, c)
	}
}

// valuesOf is a context with the deadline and cancellation of Context and
// the values of values: a background task started by a request keeps the
// request's principal and caller but not its end.
type valuesOf struct {
	context.Context
	values context.Context
}

func (v valuesOf) Value(key any) any { return v.values.Value(key) }

// retryConnect connects c again after a failed connection (EventRetrying)
// and reports whether it is connected. On success the connection marks the
// catalog dirty before EventConnected, so the next use lists the server.
func (s *Session) retryConnect(ctx context.Context, c *conn) bool {
	s.emit(Event{Kind: EventRetrying, Server: c.cfg.Name})
	c.dialMu.Lock()
	if c.rl.isRetired() { // replaced by a reload: its closer owns it
		c.dialMu.Unlock()
		return false
	}
	c.mu.Lock()
	ok := c.cs != nil
	c.mu.Unlock()
	if !ok {
		ok = c.connect(ctx)
	}
	c.dialMu.Unlock()
	s.noteConnect(c, ok)
	return ok
}

// revive reconnects the servers of a reaped session.
func (s *Session) revive(ctx context.Context) {
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	s.mu.Lock()
	idle := s.idle
	s.mu.Unlock()
	if !idle {
		return // revived by the caller we waited for
	}
	s.connectAll(ctx, s.set.Load().conns)
	s.mu.Lock()
	s.idle = false
	s.mu.Unlock()
}

// rebuild lists the servers that need it and names a new catalog.
func (s *Session) rebuild(ctx context.Context) (*catalog, error) {
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	s.mu.Lock()
	cat := s.cat
	s.mu.Unlock()
	if !s.stale(cat, time.Now()) {
		return cat, nil // built by the caller we waited for
	}
	prev := cat
	s.dirty.Store(false)
	set := s.set.Load()
	now := time.Now()
	var wg sync.WaitGroup
	for _, c := range set.conns {
		if c.needsList(now) {
			wg.Go(func() { c.relist(ctx) })
		}
	}
	wg.Wait()
	if err := s.closedErr(); err != nil {
		return nil, err
	}

	req := &policies.SanitizeRequest{Reserved: s.opts.Reserved, Servers: make([]policies.SanitizeServer, len(set.conns))}
	upstream := make([][]*mcp.Tool, len(set.conns))
	utils := make([][]string, len(set.conns))
	keys := make([][]toolKey, len(set.conns)) // who each name of the batch is for
	cat = &catalog{set: set, count: map[string]int{}, hidden: map[string]*HiddenToolError{}}
	earliest := func(at time.Time) {
		if !at.IsZero() && (cat.retryAt.IsZero() || at.Before(cat.retryAt)) {
			cat.retryAt = at
		}
	}
	for i, c := range set.conns {
		tools, retryAt := c.listing()
		upstream[i], utils[i] = tools, c.utilities()
		// The utility tools are named after the server's own, as in
		// OpenClaw: a tool of the server keeps a name they would share.
		names := make([]string, 0, len(tools)+len(utils[i]))
		for _, t := range tools {
			names = append(names, t.Name)
		}
		names = append(names, utils[i]...)
		req.Servers[i] = policies.SanitizeServer{Name: c.cfg.Name, Tools: names}
		keys[i] = make([]toolKey, len(names))
		for j, n := range names {
			keys[i][j] = toolKey{server: c.cfg.Name, tool: n}
			if j >= len(tools) {
				keys[i][j].utility = n
			}
		}
		earliest(retryAt)
	}
	// The names exposed so far are kept (docs/tool-names.md §8): the
	// sanitizer is told them, and whatever it answers, no name moves to
	// another tool (check leaves such a tool out).
	req.Exposed = s.exposed.request(req.Servers, keys)
	res, err := s.opts.Sanitizer.SanitizeToolNames(ctx, req)
	if err == nil {
		err = policies.ValidateSanitized("sanitize_tool_names", req, res)
	}
	if err != nil {
		s.mu.Lock()
		s.cat = nil
		s.mu.Unlock()
		return nil, fmt.Errorf("runtime: naming the catalog: %w", err)
	}
	for _, e := range s.exposed.check(req, res, keys, "tool") {
		s.log.Warn(e.Error(), "server", e.Server, "tool", e.Tool)
	}

	total := 0
	for i := range set.conns {
		total += len(res.Servers[i].Tools)
	}
	tools := make([]Tool, 0, total)
	from := make([]int32, 0, total) // the connection of each tool, by index
	policy := s.policy.Load()
	pc := s.newPinCheck()
	defer pc.done()
	for i, c := range set.conns {
		n := len(upstream[i])
		sc := pc.server(c.cfg.Name, upstream[i])
		for j, tn := range res.Servers[i].Tools {
			t, util := (*mcp.Tool)(nil), ""
			if j < n {
				t = upstream[i][j]
			} else {
				util = utils[i][j-n]
				t = utilityTool(util, c.cfg.Name)
			}
			name := tn.Name
			if name == "" || !allowed(c.cfg.ToolFilter, t.Name, name) {
				continue
			}
			if rule := policy.hides(name, c.cfg.Name, t.Name); rule != "" {
				cat.hidden[name] = &HiddenToolError{Tool: name, Server: c.cfg.Name, Rule: rule}
				continue
			}
			var pin *policies.ToolPin
			if sc != nil && util == "" {
				var refused *PinError
				if pin, refused = sc.check(name, j); refused != nil {
					if cat.unpinned == nil {
						cat.unpinned = map[string]*PinError{}
					}
					cat.unpinned[name] = refused
					continue
				}
			}
			tools = append(tools, Tool{Name: name, Server: c.cfg.Name, Upstream: t, Utility: util, Pin: pin})
			from = append(from, int32(i))
		}
	}
	safe, server := make([]string, len(set.conns)), make([]string, len(set.conns))
	for i, c := range set.conns {
		safe[i], server[i] = res.Servers[i].Safe, c.cfg.Name
	}
	order := catalogOrder(tools, from, safe, server)
	cat.tools = make([]Tool, len(tools))
	cat.byName = make(map[string]*Tool, len(tools))
	perConn := make([]int, len(set.conns))
	for i, k := range order {
		cat.tools[i] = tools[k]
		cat.byName[tools[k].Name] = &cat.tools[i]
		perConn[from[k]]++
	}
	for i, c := range set.conns {
		if perConn[i] > 0 {
			cat.count[c.cfg.Name] += perConn[i]
		}
	}
	cat.down = downTools(prev, cat)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.cat = cat
	s.mu.Unlock()
	return cat, nil
}

// downTools returns the tools of prev (and those prev held as down) that
// are not in cat because their server, still declared in cat's set, is
// down: a call of one of them says so (UnavailableError) instead of
// "unknown tool".
func downTools(prev, cat *catalog) map[string]string {
	if prev == nil {
		return nil
	}
	var down map[string]string
	keep := func(name, server string) {
		if _, listed := cat.byName[name]; listed {
			return
		}
		if c := cat.set.byKey[server]; c == nil || c.unavailable(name) == nil {
			return
		}
		if down == nil {
			down = map[string]string{}
		}
		down[name] = server
	}
	for _, t := range prev.tools {
		keep(t.Name, t.Server)
	}
	for name, server := range prev.down {
		keep(name, server)
	}
	return down
}

// catalogOrder returns the indices of tools in OpenClaw's catalog order:
// by the safe name of the tool's server, then the raw tool name, then the
// raw server name, each by config.LocaleCompare; ties keep the order of
// tools (a stable sort). from[k] is the connection of tools[k], safe and
// server hold each connection's names.
//
// The two server names belong to a connection, so they are ranked once per
// connection and the tools are sorted as indices: a comparison is two
// integer comparisons around one LocaleCompare of tool names, and the index
// breaks the remaining ties. For valid UTF-8 (every JSON-decoded name) the
// order is the one of a stable sort of tools by the three LocaleCompares.
func catalogOrder(tools []Tool, from []int32, safe, server []string) []int32 {
	safeRank, serverRank := localeRanks(safe), localeRanks(server)
	order := make([]int32, len(tools))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int {
		cx, cy := from[x], from[y]
		if c := cmp.Compare(safeRank[cx], safeRank[cy]); c != 0 {
			return c
		}
		if c := config.LocaleCompare(tools[x].RawName(), tools[y].RawName()); c != 0 {
			return c
		}
		if c := cmp.Compare(serverRank[cx], serverRank[cy]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	return order
}

// localeRanks ranks names by config.LocaleCompare: rank[i] < rank[j] when
// names[i] sorts first, equal ranks for names that compare equal.
func localeRanks(names []string) []int {
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(x, y int) int { return config.LocaleCompare(names[x], names[y]) })
	rank := make([]int, len(names))
	for k := 1; k < len(idx); k++ {
		rank[idx[k]] = rank[idx[k-1]]
		if config.LocaleCompare(names[idx[k-1]], names[idx[k]]) != 0 {
			rank[idx[k]]++
		}
	}
	return rank
}

// CallTool calls the tool exposed as name with args (a JSON object; nil,
// blank or JSON null mean none: other JSON, or no JSON, is refused with
// ErrInvalidArguments before any policy runs). Every call first passes before_tool_call (surface "embedded",
// Options.Caller and SessionKey): a block returns a *PolicyError with the
// module's reason; require_approval goes to Options.ApprovalDecider
// (decide_approval), then, for "ask", to Options.AskHuman. The call then runs
// under the server's request timeout (requestTimeoutMs, 60 s by default),
// reset by each progress notification of a call made WithProgress, up to
// MaxTotalTimeoutFactor times it in all; when ctx ends or the timeout
// passes, notifications/cancelled is sent upstream. Calls to a server without supportsParallelToolCalls wait for
// their turn. Progress notifications go to the handler of WithProgress.
//
// Ill-formed UTF-8 in args is first replaced by U+FFFD as Node.js decodes
// it ([transport.RepairUTF8]).
//
// The result is the server's, tool errors (isError) included. Errors:
// ErrClosed, ErrUnknownTool (wrapped), ErrInvalidArguments (wrapped),
// *PolicyError, *PausedError, ctx.Err() when ctx ends first (also while
// the policy decides: a chain audits that call as cancelled), and a
// *ServerError for a server that is not connected or failed the request;
// three consecutive failures pause the server (EventPaused). An input
// request (SEP-2322) this session refuses, having no handler or a failing
// one, fails the call with an *InputRequestError naming its Method; it is
// not the server's failure and does not count.
func (s *Session) CallTool(ctx context.Context, name string, args []byte) (res *mcp.CallToolResult, err error) {
	if s.tracer != nil {
		var span trace.Span
		ctx, span = s.startCallSpan(ctx, name)
		defer func() { endSpan(span, err) }()
	}
	// Ill-formed UTF-8 in the arguments is repaired before anything sees
	// them (transport.RepairUTF8): the policy, the audit and the server
	// get one value.
	args = transport.RepairUTF8(args)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.life, cancel)
	defer func() {
		stop()
		cancel()
	}()
	defer s.touch()()
	res, err = s.callTool(ctx, name, args)
	if err != nil && s.life.Err() != nil {
		return nil, ErrClosed
	}
	return res, err
}

func (s *Session) callTool(ctx context.Context, name string, args []byte) (*mcp.CallToolResult, error) {
	// A reload may retire the tool's connection between the catalog read
	// and the call: the catalog is then stale, and the next one holds the
	// new connection (or no such tool). Two tries suffice unless reloads
	// follow each other faster than a catalog build.
	for try := 0; ; try++ {
		var settled <-chan struct{}
		if s.connecting() {
			settled = s.settledSignal() // before the catalog read: no settling is missed
		}
		cat, err := s.catalog(ctx)
		if err != nil {
			return nil, err
		}
		t := cat.byName[name]
		if t == nil {
			if h := cat.hidden[name]; h != nil {
				e := *h
				return nil, &e
			}
			if pe := cat.unpinned[name]; pe != nil {
				e := *pe
				return nil, &e
			}
			if ue := cat.unavailable(name); ue != nil {
				return nil, ue
			}
			if settled != nil {
				// A server still starting (Options.ConnectWait) may own
				// the name: the call waits for the next one to settle, and
				// looks again, until none is left starting.
				s.mu.Lock()
				startup := s.startup
				s.mu.Unlock()
				select {
				case <-settled:
				case <-startup:
					if err := s.WaitConnected(ctx); err != nil { // the last catalog build published
						return nil, err
					}
				case <-s.life.Done():
					return nil, ErrClosed
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				try--
				continue
			}
			return nil, fmt.Errorf("%w %q", ErrUnknownTool, name)
		}
		c := cat.set.byKey[t.Server]
		if !c.rl.acquire() {
			if try < 2 {
				continue
			}
			return nil, &ServerError{Server: t.Server, Op: "tools/call", Err: errRetired}
		}
		res, err := s.callConn(ctx, c, t, args)
		c.rl.release()
		return res, err
	}
}

// callConn runs the policy and the call of t on c, whose connection the
// caller holds (c.rl.acquire).
func (s *Session) callConn(ctx context.Context, c *conn, t *Tool, args []byte) (*mcp.CallToolResult, error) {
	args, err := objectArguments(t.Name, args)
	if err != nil {
		return nil, err
	}
	c, release, err := c.forPrincipal(ctx) // per-requester OAuth: the principal's connection
	if err != nil {
		return nil, err
	}
	defer release()
	call := &policies.ToolCall{
		Surface:    s.surface(),
		SessionKey: s.opts.SessionKey,
		Caller:     s.caller(ctx),
		Identity:   IdentityFrom(ctx),
		Tool:       policies.ToolRef{Name: t.Name, Server: t.Server, RawName: t.RawName()},
		Pin:        t.Pin,
		Arguments:  args,
	}
	d := s.opts.Enforcer.BeforeToolCall(ctx, call)
	if s.tracer != nil {
		trace.SpanFromContext(ctx).SetAttributes(AttrServer.String(t.Server), AttrDecision.String(string(d.Decision)))
	}
	if err := ctx.Err(); err != nil {
		// The caller gave up (or its deadline passed) while the policy ran:
		// the call does not run, and the policy did not refuse it (a chain
		// audits it as cancelled and blocks only to stop it).
		return nil, err
	}
	if d.Arguments != nil && d.Decision != policies.Block {
		// A module's rewrite is held to the same rule as the caller's
		// arguments: one JSON object, or the call is refused (fail closed).
		rewritten, err := objectArguments(t.Name, d.Arguments)
		if err != nil {
			return nil, &PolicyError{Tool: t.Name, Server: t.Server, Decision: policies.Block, Module: d.RewrittenBy,
				Reason: "rewrote the arguments into invalid ones: " + err.Error()}
		}
		args = rewritten
	}
	switch d.Decision {
	case policies.Allow:
	case policies.RequireApproval:
		if err := c.checkPaused(); err != nil {
			return nil, err // do not ask a human for a call that cannot run
		}
		if err := s.approve(ctx, t, d, args); err != nil {
			return nil, err
		}
	default: // Block, or an outcome no chain should produce: fail closed.
		return nil, &PolicyError{Tool: t.Name, Server: t.Server, Decision: policies.Block, Module: d.Module, Reason: d.Reason}
	}
	if s.opts.Limiter == nil {
		if t.Utility != "" {
			return c.utility(ctx, t, args)
		}
		return c.call(ctx, t, args)
	}
	slot, err := s.acquireLimit(ctx, call)
	if err != nil {
		return nil, err // a *policies.LimitError, audited by the limiter
	}
	// A cancelled call keeps its slots while the server still works on it
	// (releaseWhenEnded); a call the server answered with a task keeps them
	// until the task ends (holdTaskSlot).
	end := newCallEnd()
	ctx = context.WithValue(ctx, callEndKey{}, end)
	held := false
	defer func() {
		if !held {
			releaseWhenEnded(ctx, end, c.cfg.requestTimeout(), slot)
		}
	}()
	if t.Utility != "" {
		return c.utility(ctx, t, args)
	}
	res, err := c.call(ctx, t, args)
	if err == nil {
		if task, ok := TaskCreated(res); ok {
			held = s.holdTaskSlot(task, c.cfg.requestTimeout(), slot)
		}
	}
	return res, err
}

// ErrInvalidArguments is wrapped by CallTool when the arguments are not a
// JSON object: MCP's tools/call "arguments" is an object (or absent).
var ErrInvalidArguments = errors.New("runtime: tool arguments must be a JSON object")

// objectArguments checks a call's arguments before any policy sees them:
// empty, blank or JSON null mean none (nil is returned); otherwise they
// must be one JSON object. The error wraps ErrInvalidArguments and names
// the exposed tool.
func objectArguments(tool string, args []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil, nil
	}
	if !json.Valid(trimmed) {
		return nil, fmt.Errorf("%w: tool %q: the arguments are not valid JSON", ErrInvalidArguments, tool)
	}
	if trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: tool %q: the arguments are a JSON %s", ErrInvalidArguments, tool, jsonKind(trimmed[0]))
	}
	return args, nil
}

// jsonKind names the kind of a JSON value by its first byte.
func jsonKind(b byte) string {
	switch b {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	}
	return "number"
}

// approve settles a require_approval decision: decide_approval first, then
// the embedder's callback for "ask".
func (s *Session) approve(ctx context.Context, t *Tool, d policies.Outcome, args []byte) error {
	var askErr error // AskHuman's error, kept as the refusal's cause
	refuse := func(module, reason string) error {
		return &PolicyError{Tool: t.Name, Server: t.Server, Decision: policies.RequireApproval, Module: module, Reason: reason, Err: askErr}
	}
	timeout := time.Duration(d.TimeoutMs) * time.Millisecond
	if s.opts.ApprovalDecider != nil {
		payload, _ := json.Marshal(map[string]string{ // cannot fail: strings only
			"reason": d.Reason, "title": d.Title, "description": d.Description, "module": d.Module,
		})
		out := s.opts.ApprovalDecider.DecideApproval(ctx, &policies.ApprovalRequest{
			Kind:       policies.ApprovalTool,
			ID:         string(s.surface()) + "-" + strconv.FormatUint(s.seq.Add(1), 10),
			Surface:    s.surface(),
			SessionKey: s.opts.SessionKey,
			Requester:  s.caller(ctx),
			Identity:   IdentityFrom(ctx),
			Tool:       policies.ToolRef{Name: t.Name, Server: t.Server, RawName: t.RawName()},
			Request:    payload,
		})
		switch out.Decision {
		case policies.AllowOnce, policies.AllowAlways:
			return nil
		case policies.Ask:
			if out.TTL > 0 {
				timeout = out.TTL
			}
		default: // Deny, or anything else: fail closed.
			return refuse(out.Module, out.Reason)
		}
	}
	if s.opts.AskHuman == nil {
		return refuse("", "nobody to ask: Options.AskHuman is nil")
	}
	actx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	start := time.Now()
	caller := s.caller(ctx)
	ok, err := s.opts.AskHuman(actx, &ApprovalRequest{
		Tool: *t, Arguments: args, Module: d.Module, Title: d.Title, Description: d.Description,
		Reason: d.Reason, Timeout: timeout, SessionKey: s.opts.SessionKey, Caller: caller,
	})
	var reason string
	switch {
	case ctx.Err() != nil:
		s.recordAnswer(ctx, t, caller, policies.Deny, "the call was cancelled: "+ctx.Err().Error(), start)
		return ctx.Err()
	case actx.Err() != nil && (err != nil || !ok):
		reason = fmt.Sprintf("not answered within %v", timeout)
	case err != nil:
		reason, askErr = err.Error(), err
	case !ok:
		reason = "refused"
	default:
		s.recordAnswer(ctx, t, caller, policies.AllowOnce, "", start)
		return nil
	}
	s.recordAnswer(ctx, t, caller, policies.Deny, reason, start)
	if reason == "refused" {
		reason = ""
	}
	return refuse("", reason)
}

// recordAnswer audits the answer of Options.AskHuman to a call of t.
func (s *Session) recordAnswer(ctx context.Context, t *Tool, caller policies.Caller, decision policies.ApprovalDecision, reason string, start time.Time) {
	if s.opts.Audit == nil {
		return
	}
	who := s.opts.Approver
	if who == "" {
		who = "embedder"
	}
	r := policies.AuditRecord{Time: start.UTC(), Hook: policies.HookDecideApproval, Surface: s.surface(),
		SessionKey: s.opts.SessionKey, Caller: caller.Name, Tool: t.Name, Server: t.Server,
		Module: "approve:" + who, Mode: policies.Enforce, Decision: string(decision), Reason: reason,
		DurationUs: time.Since(start).Microseconds()}
	r.SetIdentity(IdentityFrom(ctx))
	s.opts.Audit.Record(r)
}

// Progress is one notifications/progress of a running call.
type Progress struct {
	// Tool is the exposed name of the call.
	Tool string
	// Progress and Total are the server's figures (Total 0 when unknown).
	Progress, Total float64
	Message         string
}

type progressKey struct{}

type callerKey struct{}

// WithCaller returns a context whose CallTool names caller, instead of
// Options.Caller, in hook inputs, approval requests and audit records: a
// surface serving several clients (the proxy) passes each client's
// identity this way.
func WithCaller(ctx context.Context, caller policies.Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

type identityKey struct{}

// WithIdentity returns a context whose CallTool names id, the
// authenticated caller, in hook inputs (policies.ToolCall.Identity,
// policies.ApprovalRequest.Identity) and audit records: a surface that
// verified a bearer token (the proxy) passes who it verified this way. A
// nil id leaves ctx unchanged.
func WithIdentity(ctx context.Context, id *policies.Identity) context.Context {
	if id == nil {
		return ctx
	}
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity ctx names ([WithIdentity]), or nil.
func IdentityFrom(ctx context.Context) *policies.Identity {
	id, _ := ctx.Value(identityKey{}).(*policies.Identity)
	return id
}

func (s *Session) caller(ctx context.Context) policies.Caller {
	if c, ok := ctx.Value(callerKey{}).(policies.Caller); ok {
		return c
	}
	return s.opts.Caller
}

func (s *Session) surface() policies.Surface {
	if s.opts.Surface != "" {
		return s.opts.Surface
	}
	return policies.SurfaceEmbedded
}

// WithProgress returns a context whose CallTool asks the server for
// progress notifications and passes each to fn, from the goroutine that
// reads the server's messages (fn must not block long).
func WithProgress(ctx context.Context, fn func(Progress)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// onProgress passes a notifications/progress to the handler of the call
// whose token it carries, when it comes from the MCP session that call was
// sent on; any other (a token of another server's call, of no call, or of
// another type) is dropped.
func (s *Session) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	tok, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	s.progressMu.Lock()
	e, ok := s.progress[tok]
	s.progressMu.Unlock()
	if ok && e.cs != nil && e.cs == req.Session {
		if e.reset != nil {
			e.reset()
		}
		e.fn(Progress{Tool: e.tool, Progress: req.Params.Progress, Total: req.Params.Total, Message: req.Params.Message})
	}
}

// ServerStatus is a server's state, for status output.
type ServerStatus struct {
	// Name is the raw server name.
	Name string
	// Kind is the resolved transport; empty for a Server.Transport of the
	// embedder's, or when resolution failed.
	Kind transport.Kind
	// Launch is the redacted command line or URL (`mcp status`).
	Launch string
	// Enabled is false for a disabled server.
	Enabled bool
	// Connected reports an open MCP session. It is false as soon as a call
	// saw the session end (a stdio server that exited mid-call), and while
	// a server paused after timeouts waits to be redialed.
	Connected bool
	// Tools is the count of the server's tools in the current catalog.
	Tools int
	// PausedUntil is the end of the current pause, zero when not paused.
	PausedUntil time.Time
	// Err is the latest diagnostic (a *ServerError), nil when healthy. Its
	// Op says what failed: "resolve", "connect" (connecting), "tools/list",
	// "session" (an open session ended: the server exited or dropped the
	// connection), or, while the server is paused, the op of the failure
	// that paused it ("tools/call" or a utility's).
	Err error
	// Principals are, for a per-requester OAuth server, the principals it
	// has a connection for, sorted: the listing principal and each one that
	// called. nil for other servers.
	Principals []string
	// SkippedLines counts, for a stdio server, the lines of its stdout
	// skipped since the session began, over every restart: lines that are
	// not one JSON-RPC message, lines over the size cap, cut-off parts
	// (transport.StdioTransport.SkippedLines). 0 for other transports.
	SkippedLines int64
	// ProtocolVersion is the MCP revision negotiated with the server, such
	// as "2026-07-28"; "" while it is not connected.
	ProtocolVersion string
}

// Status returns every declared server's state, in declaration order.
func (s *Session) Status() []ServerStatus {
	s.mu.Lock()
	cat := s.cat
	s.mu.Unlock()
	set := s.set.Load()
	out := make([]ServerStatus, len(set.conns))
	now := time.Now()
	for i, c := range set.conns {
		c.mu.Lock()
		st := ServerStatus{
			Name: c.cfg.Name, Kind: c.kind, Launch: c.launch, Enabled: !c.cfg.Disabled,
			Connected: c.cs != nil,
		}
		if c.cs != nil && c.cs.InitializeResult() != nil {
			st.ProtocolVersion = c.cs.InitializeResult().ProtocolVersion
		}
		if c.err != nil {
			st.Err = c.err
		}
		if now.Before(c.pausedUntil) {
			st.PausedUntil = c.pausedUntil
		}
		st.SkippedLines = c.skippedBefore
		if c.skips != nil {
			st.SkippedLines += c.skips.SkippedLines()
		}
		c.mu.Unlock()
		st.Principals = c.principalList()
		if cat != nil {
			st.Tools = cat.count[c.cfg.Name]
		}
		out[i] = st
	}
	return out
}

// Diagnostics returns the servers' current failures, in declaration order:
// each a *ServerError naming the server and the step that failed.
func (s *Session) Diagnostics() []error {
	var out []error
	for _, c := range s.set.Load().conns {
		c.mu.Lock()
		if c.err != nil {
			out = append(out, c.err)
		}
		c.mu.Unlock()
	}
	return out
}

// Close disconnects every server (a stdio server and everything it started
// is killed by the transport's supervisor) and makes every later call fail
// with ErrClosed. Calls in flight fail with ErrClosed. It is idempotent and
// safe for concurrent use; when ctx ends first, Close returns ctx.Err()
// while the disconnections finish in the background, each bounded by the
// transport's terminate duration.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		select {
		case <-s.closeDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.closed = true
	s.cat = nil
	s.mu.Unlock()
	s.endLife()
	s.releaseTaskSlots()
	s.retryMu.Lock()
	for c, tm := range s.retryTimer { // no retry is scheduled after endLife
		tm.Stop()
		delete(s.retryTimer, c)
	}
	s.retryMu.Unlock()

	errc := make(chan error, 1)
	go func() {
		defer close(s.closeDone)
		// Requests in flight were cancelled with life: let them return
		// before their transports close under them.
		if s.requests.Load() > 0 {
			t := time.NewTimer(closeDrain)
			select {
			case <-s.drained:
			case <-t.C:
			}
			t.Stop()
		}
		// No Reload swaps the set any more: it checks closed under mu.
		conns := s.set.Load().conns
		errs := make([]error, len(conns))
		var wg sync.WaitGroup
		for i, c := range conns {
			// A connection being opened meanwhile sees closed and
			// closes itself (conn.connect).
			wg.Go(func() { errs[i] = c.close() })
		}
		wg.Wait()
		s.bg.Wait() // the idle reaper, the closers of retired connections
		errc <- errors.Join(errs...)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Session) closedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

func (s *Session) emit(ev Event) {
	if s.opts.OnEvent == nil {
		return
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	s.opts.OnEvent(ev)
}
