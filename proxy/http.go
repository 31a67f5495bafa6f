package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/runtime"
)

// DefaultShutdownTimeout bounds how long [HTTPHandler.Serve] waits for the
// tool calls in flight when its context ends.
const DefaultShutdownTimeout = 10 * time.Second

// sessionlessRevision is the first MCP revision without sessions
// (revisions are dates, so they compare as strings).
const sessionlessRevision = "2026-07-28"

// errShuttingDown answers a request that arrives while the proxy drains.
var errShuttingDown = errors.New("proxy: shutting down: no new requests")

// HTTP paths served by [HTTPHandler].
const (
	// PathMCP is the streamable HTTP endpoint (MCP 2025-03-26 and later):
	// stateful sessions up to 2025-11-25, stateless from 2026-07-28.
	PathMCP = "/mcp"
	// PathSSE is the legacy HTTP+SSE endpoint (MCP 2024-11-05): GET opens
	// the stream, POST /sse?sessionid=… carries the client's messages.
	PathSSE = "/sse"
	// PathHealth answers 200 with a small JSON body while serving, 503
	// while draining; it needs no token.
	PathHealth = "/healthz"
	// PathReady answers 200 when the proxy takes traffic (every
	// [ReadyCheck] passes and it is not draining), 503 with a JSON body
	// naming what is not ready otherwise; it needs no token.
	PathReady = "/readyz"
	// PathMetrics serves the Prometheus metrics, behind the token.
	PathMetrics = "/metrics"
)

// HTTPOptions configure [NewHTTPHandler]. A nil *HTTPOptions is refused:
// the bearer token must be given, or turned off explicitly.
type HTTPOptions struct {
	// Token is the bearer token every request to /mcp, /sse and /metrics
	// must carry (Authorization: Bearer <Token>), compared in constant
	// time. It must be set unless NoAuth.
	Token string
	// NoAuth serves without a token. The caller refuses it on a listen
	// address that is not loopback (see [IsLoopbackHost]).
	NoAuth bool
	// Tokens are further static tokens, each naming an identity
	// ([LoadTokensFile]); a request with one carries that identity.
	Tokens []StaticToken
	// OAuth, when set, makes the proxy an OAuth 2.1 resource server: a
	// bearer token that is not a static one must be a JWT access token
	// it verifies, and PathProtectedResource serves the metadata that
	// clients log in from.
	OAuth *OAuthVerifier
	// Scopes are required of every token that names an identity (tokens
	// file, OAuth) on /mcp and /metrics: 403 insufficient_scope otherwise.
	Scopes []string
	// CallScopes are required in addition for tools/call.
	CallScopes []string
	// ListenHost is the host of the listen address. A request whose
	// Origin has this host is allowed, besides loopback origins;
	// a wildcard host ("", 0.0.0.0, ::) allows nothing more.
	ListenHost string
	// AllowOrigins are further origins (scheme://host[:port]) that may
	// send requests, compared ignoring case and a trailing slash.
	AllowOrigins []string
	// AllowedHosts are further names (or IPs) a request's Host header may
	// carry, without the port, compared ignoring case: a load balancer's
	// or a Prometheus scrape's name for the proxy. Loopback names, the
	// listen host and the IP the connection reached are always allowed
	// (see [HTTPHandler]).
	AllowedHosts []string
	// ReadHeaderTimeout bounds the reading of a request's line and
	// headers; 0 or less means [DefaultReadHeaderTimeout].
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds the reading of a POST body on /mcp and /sse,
	// counted from the end of its headers; one not in by then is answered
	// 408 and the connection closed. 0 or less means [DefaultBodyTimeout].
	BodyTimeout time.Duration
	// MaxConnections caps the TCP connections open at once in
	// [HTTPHandler.Serve]; one more is answered 503 and closed. 0 or less
	// means [DefaultMaxConnections].
	MaxConnections int
	// MaxSessions caps the MCP sessions open at once (streamable HTTP and
	// legacy SSE); an initialize or GET /sse over it is answered 503.
	// 0 or less means [DefaultMaxSessions].
	MaxSessions int
	// SessionIdleTimeout closes a streamable HTTP session (before MCP
	// 2026-07-28) that has had no request in flight, and no GET stream
	// open, for that long, releasing what the proxy holds for it (its log
	// level and resource subscriptions upstream); its client gets 404 on
	// its next request and starts a new session, as MCP has it. 0 means
	// [DefaultSessionIdleTimeout]; less than 0 keeps idle sessions.
	SessionIdleTimeout time.Duration
	// MetricsOnly serves /healthz, /readyz and /metrics alone (stdio mode's
	// --metrics-listen); /mcp and /sse answer 404.
	MetricsOnly bool
	// Metrics, when set, is served on /metrics; nil answers 404 there.
	Metrics *Metrics
	// Servers, when set, reports the runtime's servers for /healthz
	// (runtime.Session.Status); nil leaves the servers out of the body.
	Servers func() []runtime.ServerStatus
	// MaxMessageBytes caps one POST body on /mcp and /sse, in bytes; a
	// larger one is answered 413 with a JSON-RPC error (carrying the
	// request's id when its start names one) and the session stays. 0 or
	// less means [DefaultMaxMessageBytes].
	MaxMessageBytes int64
	// ShutdownTimeout bounds the wait for calls in flight in Serve; zero
	// means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Ready are the conditions /readyz checks, besides the ones the
	// handler knows itself (OAuth's JWKS, draining).
	Ready []ReadyCheck
	// Logger receives the transport diagnostics; nil means slog.Default().
	Logger *slog.Logger
	// Sessions, when set, keeps a record of each streamable HTTP session
	// (MCP 2025-11-25 and older) in state shared with other replicas, so
	// that a replica receiving a request for a session it does not hold
	// takes it over ([SessionStore]); nil keeps sessions in this process.
	Sessions SessionStore
}

// HTTPHandler serves a [Proxy] over HTTP: streamable HTTP on /mcp (sessions
// up to MCP 2025-11-25, stateless for 2026-07-28) and legacy SSE on /sse,
// all serving the proxy's one *mcp.Server, plus /healthz, /readyz and /metrics.
// Every request, on every path, passes a Host check and an Origin check
// first (403 otherwise, against DNS rebinding): the Host must be loopback,
// the listen host, the IP the connection reached or one of AllowedHosts (a
// wildcard listener reached on another interface takes any Host unless
// AllowedHosts is set); the Origin, when sent once (twice is refused), must
// be loopback, on the listen host or one of AllowOrigins. /mcp, /sse and
// /metrics need the bearer token (401 with WWW-Authenticate: Bearer
// otherwise). A refusal is answered before any body is read, and closes
// the connection; only a POST to /mcp or /sse may carry a body. Every such
// body is read within BodyTimeout, up to MaxMessageBytes, and checked as
// exactly one JSON-RPC message before go-sdk sees it (see checkFrames, and
// docs/proxy.md for the answers). A stateless 2026-07-28 tools/call is
// answered by the proxy's lean path (lean.go) instead of go-sdk's handler,
// through the same middleware.
type HTTPHandler struct {
	p       *Proxy
	opts    HTTPOptions
	auth    *authState
	origins map[string]bool
	hosts   map[string]bool // AllowedHosts, lower case
	logger  *slog.Logger
	mux     *http.ServeMux
	maxBody int64       // MaxMessageBytes, defaulted
	limits  HTTPOptions // the timeouts and caps, defaulted

	mu       sync.Mutex
	inFlight int                         // MCP requests being handled (track)
	requests int                         // HTTP requests that are not streams
	streams  map[*int]context.CancelFunc // long-lived streams, ended last
	lastSSE  time.Time                   // the latest write on a legacy SSE stream
	draining bool                        // Serve's context ended: not ready, no new sessions
	closing  bool                        // the drain is over: every new request is refused
	wake     chan struct{}               // closed and replaced when a count above drops to 0
	opening  int                         // initialize requests admitted, not yet answered
	calls    map[callKey]bool            // requests in flight on /mcp and /sse sessions; true once cancelled
	idle     *idleSessions               // nil without a SessionIdleTimeout
	shared   *sharedSessions             // nil without Sessions
}

// callKey names a request on a streamable HTTP or legacy SSE session.
type callKey struct {
	session string
	id      jsonrpc.ID
}

// sseSettle is how long legacy SSE streams must have been quiet before
// Serve closes them: an answer is written on the stream just after its
// handler returns, and go-sdk's ServerSession.Close drops one not yet
// written.
const sseSettle = 100 * time.Millisecond

// NewHTTPHandler returns the HTTP handler for p. Unless MetricsOnly, it adds
// a receiving middleware to p.Server() that counts the requests in flight
// (for the graceful shutdown of [HTTPHandler.Serve]) and refuses new ones
// while draining; build one handler per proxy. It fails when neither Token nor
// NoAuth is set, or when an AllowOrigins entry is not an origin.
func NewHTTPHandler(p *Proxy, opts *HTTPOptions) (*HTTPHandler, error) {
	if opts == nil {
		return nil, errors.New("proxy: HTTP options are required (a bearer token, or NoAuth)")
	}
	h := &HTTPHandler{p: p, opts: *opts, origins: map[string]bool{}, hosts: map[string]bool{}, calls: map[callKey]bool{}, streams: map[*int]context.CancelFunc{}, wake: make(chan struct{})}
	tokens := h.opts.Token != "" || len(h.opts.Tokens) > 0 || h.opts.OAuth != nil
	switch {
	case !tokens && !h.opts.NoAuth:
		return nil, errors.New("proxy: HTTP serving needs a bearer token (or NoAuth, on loopback only)")
	case tokens && h.opts.NoAuth:
		return nil, errors.New("proxy: both a bearer token and NoAuth given")
	}
	var err error
	if h.auth, err = newAuthState(&h.opts); err != nil {
		return nil, err
	}
	for _, o := range h.opts.AllowOrigins {
		norm, err := normalizeOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("proxy: allowed origin %q: %w", o, err)
		}
		h.origins[norm] = true
	}
	for _, host := range h.opts.AllowedHosts {
		host = strings.Trim(strings.TrimSpace(host), "[]")
		if host == "" || strings.ContainsAny(host, "/:@ ") && net.ParseIP(host) == nil {
			return nil, fmt.Errorf("proxy: allowed host %q: want a host name or IP, without scheme or port", host)
		}
		h.hosts[strings.ToLower(host)] = true
	}
	h.limits = HTTPOptions{
		ReadHeaderTimeout: orDefault(h.opts.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		BodyTimeout:       orDefault(h.opts.BodyTimeout, DefaultBodyTimeout),
		MaxConnections:    orDefault(h.opts.MaxConnections, DefaultMaxConnections),
		MaxSessions:       orDefault(h.opts.MaxSessions, DefaultMaxSessions),
	}
	if h.opts.ShutdownTimeout <= 0 {
		h.opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if idle := orDefault(h.opts.SessionIdleTimeout, DefaultSessionIdleTimeout); h.opts.SessionIdleTimeout >= 0 && !h.opts.MetricsOnly {
		h.limits.SessionIdleTimeout = idle
		h.idle = newIdleSessions(idle, func(sid string) bool { return h.session(sid) != nil }, h.reapSession)
	}
	h.maxBody = h.opts.MaxMessageBytes
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxMessageBytes
	}
	h.logger = h.opts.Logger
	if h.logger == nil {
		h.logger = slog.Default()
	}

	h.mux = http.NewServeMux()
	h.mux.HandleFunc(PathHealth, h.serveHealth)
	h.mux.HandleFunc(PathReady, h.serveReady)
	if v := h.opts.OAuth; v != nil {
		h.opts.Ready = append(slices.Clone(h.opts.Ready), ReadyCheck{Name: "oauth", Check: v.jwksLoaded})
	}
	if v := h.opts.OAuth; v != nil && !h.opts.MetricsOnly {
		prm := protectedResource(v, append(slices.Clone(h.opts.Scopes), h.opts.CallScopes...))
		h.mux.Handle(PathProtectedResource, prm)
		if meta, _ := url.Parse(v.MetadataURL()); meta.Path != PathProtectedResource {
			h.mux.Handle(meta.Path, prm)
		}
	}
	if m := h.opts.Metrics; m != nil {
		if err := m.observeReadiness(h.readiness); err != nil {
			return nil, err
		}
		if h.opts.OAuth != nil {
			if err := m.observeJWKS(h.opts.OAuth); err != nil {
				return nil, err
			}
		}
		h.mux.Handle(PathMetrics, h.authorized(m.Handler()))
	}
	if !h.opts.MetricsOnly {
		getServer := func(*http.Request) *mcp.Server { return p.Server() }
		// Up to 2025-11-25, stateful: server-to-client requests (sampling,
		// elicitation, roots) need a session to come back on. From
		// 2026-07-28 the protocol is sessionless, and go-sdk serves it
		// only statelessly; its clients name the revision on every request.
		// checkFrames reads and bounds every body first; go-sdk's own cap
		// is set to the same size.
		// go-sdk's own Host check (loopback listeners only) is replaced by
		// hostAllowed, which covers every path and honours AllowedHosts.
		stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Logger: h.logger, MaxRequestBodyBytes: h.maxBody, DisableLocalhostProtection: true})
		stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
			Logger: h.logger, Stateless: true, MaxRequestBodyBytes: h.maxBody, DisableLocalhostProtection: true,
			// The POST is the whole call: a client that hangs up cancels it.
			PropagateRequestCancellation: true,
		})
		h.mux.Handle(PathMCP, h.authorized(h.checkFrames(false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Mcp-Protocol-Version") >= sessionlessRevision {
				stateless.ServeHTTP(w, r)
				return
			}
			if h.shared != nil {
				h.shared.serve(stateful, w, r)
				return
			}
			stateful.ServeHTTP(w, r)
		}))))
		var sse http.Handler = mcp.NewSSEHandler(getServer, &mcp.SSEOptions{MaxRequestBodyBytes: h.maxBody, DisableLocalhostProtection: true})
		if h.auth.identities() {
			sse = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				refuse(w, http.StatusNotFound, errLegacySSEIdentity.Error())
			})
		}
		h.mux.Handle(PathSSE, h.authorized(h.checkFrames(true, sse)))
		p.use(h.track)
		if h.opts.Sessions != nil {
			h.shared = newSharedSessions(h)
			p.use(h.shared.record)
		}
	}
	return h, nil
}

// ServeHTTP checks the Host and the Origin, and that only a POST to /mcp
// or /sse carries a body, then routes the request.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.hostAllowed(r) {
		refuse(w, http.StatusForbidden, fmt.Sprintf("openclaw mcp proxy: Host %q is not allowed (loopback names, the listen host and the address reached are; add others with --allowed-host)", r.Host))
		return
	}
	switch origins := r.Header.Values("Origin"); {
	case len(origins) > 1:
		refuse(w, http.StatusForbidden, "openclaw mcp proxy: more than one Origin header")
		return
	case len(origins) == 1 && !h.originAllowed(origins[0]):
		refuse(w, http.StatusForbidden, fmt.Sprintf("openclaw mcp proxy: Origin %q is not allowed (loopback and the listen host are; add others with --allow-origin)", origins[0]))
		return
	}
	mcpPath := !h.opts.MetricsOnly && (r.URL.Path == PathMCP || r.URL.Path == PathSSE)
	if r.ContentLength != 0 && (r.Method != http.MethodPost || !mcpPath) {
		refuse(w, http.StatusBadRequest, fmt.Sprintf("openclaw mcp proxy: a %s request to %s carries no body", r.Method, r.URL.Path))
		return
	}
	if !mcpPath {
		h.mux.ServeHTTP(w, r)
		return
	}
	if r.URL.Path == PathMCP && h.idle != nil && r.Header.Get("Mcp-Protocol-Version") < sessionlessRevision {
		switch sid := r.Header.Get("Mcp-Session-Id"); {
		case sid != "" && r.Method == http.MethodDelete:
			defer h.p.releaseEnded(context.WithoutCancel(r.Context()))
		case sid != "":
			if h.idle.begin(sid) {
				defer h.idle.end(sid)
			}
		case r.Method == http.MethodPost:
			defer func() {
				if sid := w.Header().Get("Mcp-Session-Id"); sid != "" {
					h.idle.opened(sid)
				}
			}()
		}
	}
	// Graceful shutdown waits for the ordinary requests (a streamable POST
	// carries its answer), then ends the streams that last as long as the
	// session: GETs and subscriptions/listen POSTs.
	if r.Method == http.MethodGet || isListen(r) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		key := new(int)
		h.mu.Lock()
		h.streams[key] = cancel
		h.mu.Unlock()
		defer func() {
			h.mu.Lock()
			delete(h.streams, key)
			h.mu.Unlock()
		}()
		r = r.WithContext(ctx)
		if r.URL.Path == PathSSE {
			if r.Method == http.MethodGet && h.refuseDraining(w, jsonrpc.ID{}) {
				return
			}
			if r.Method == http.MethodGet && !h.admitSession(false) {
				writeTooManySessions(w, jsonrpc.ID{}, h.limits.MaxSessions)
				return
			}
			sw := &sseWriter{ResponseWriter: w, h: h}
			defer h.p.releaseEnded(context.WithoutCancel(r.Context())) // after the session ends with the stream
			defer sw.forget()
			w = sw
		}
	} else {
		h.mu.Lock()
		h.requests++
		h.mu.Unlock()
		defer h.done(&h.requests)
	}
	h.mux.ServeHTTP(w, r)
}

// isListen reports whether r opens a subscriptions/listen stream (MCP
// 2026-07-28, whose clients name the method in the Mcp-Method header, which
// go-sdk checks against the body).
func isListen(r *http.Request) bool {
	return r.Method == http.MethodPost && r.Header.Get("Mcp-Method") == "subscriptions/listen"
}

// sseWriter is the GET stream of a legacy SSE session: it notes when a
// legacy SSE stream was last written to, learns its session id from the
// endpoint event, and leaves out the answer to a request the client
// cancelled (watchCancelSSE). go-sdk writes one event per Write.
type sseWriter struct {
	http.ResponseWriter
	h   *HTTPHandler
	sid string // sseCallSession + the session id, once the endpoint event passed
}

func (s *sseWriter) Write(b []byte) (int, error) {
	if s.sid == "" {
		s.sid = sseCallSession + endpointSession(b)
	}
	id, isAnswer := answered(b)
	s.h.mu.Lock()
	s.h.lastSSE = time.Now()
	cancelled := false
	if isAnswer {
		key := callKey{s.sid, id}
		cancelled = s.h.calls[key]
		delete(s.h.calls, key)
	}
	s.h.mu.Unlock()
	if cancelled {
		return len(b), nil
	}
	return s.ResponseWriter.Write(b)
}

// forget drops the requests of the session still in flight: the stream
// ended, no answer will pass.
func (s *sseWriter) forget() {
	if s.sid == "" {
		return
	}
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	for k := range s.h.calls {
		if k.session == s.sid {
			delete(s.h.calls, k)
		}
	}
}

// endpointSession reads the session id from the endpoint event of a legacy
// SSE stream ("data: /sse?sessionid=…"); "" when b is not one.
func endpointSession(b []byte) string {
	for line := range strings.SplitSeq(string(b), "\n") {
		if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data:"); ok {
			if u, err := url.Parse(strings.TrimSpace(data)); err == nil {
				return u.Query().Get("sessionid")
			}
		}
	}
	return ""
}

// Unwrap lets http.ResponseController reach the Flusher.
func (s *sseWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// done decrements *count and wakes the waiters of Serve.
func (h *HTTPHandler) done(count *int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	*count--
	if *count == 0 {
		close(h.wake)
		h.wake = make(chan struct{})
	}
}

// waitZero waits until *count is 0 or ctx is done; it returns the count.
func (h *HTTPHandler) waitZero(ctx context.Context, count *int) int {
	for {
		h.mu.Lock()
		n, wake := *count, h.wake
		h.mu.Unlock()
		if n == 0 {
			return 0
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return n
		}
	}
}

// refuse answers a request the proxy does not serve with status and msg
// (plain text), and closes the connection after it (see endBody).
func refuse(w http.ResponseWriter, status int, msg string) {
	endBody(w)
	http.Error(w, msg, status)
}

// endBody makes the answer to w's request the last on its connection and
// reads no more of the request's body: net/http would otherwise read what
// is left of it (up to 256 KiB) before writing the answer, or before
// closing, at the client's pace.
func endBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// hostAllowed reports whether r's Host header names this proxy: a loopback
// name or IP, the listen host, the IP the connection reached, or one of
// AllowedHosts. Otherwise, only a wildcard listener reached on a
// non-loopback address without AllowedHosts takes any Host (it is reached
// by whatever name the network gives it; its token guards it).
func (h *HTTPHandler) hostAllowed(r *http.Request) bool {
	host := r.Host
	if hn, _, err := net.SplitHostPort(host); err == nil {
		host = hn
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	if host != "" && (IsLoopbackHost(host) || h.hosts[host]) {
		return true
	}
	lh := strings.Trim(h.opts.ListenHost, "[]")
	wildcard := lh == "" || lh == "0.0.0.0" || lh == "::"
	if host != "" && !wildcard && strings.EqualFold(host, lh) {
		return true
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if lip, _, err := net.SplitHostPort(local.String()); err == nil {
			ip := net.ParseIP(lip)
			if hip := net.ParseIP(host); hip != nil && ip != nil && hip.Equal(ip) {
				return true
			}
			if ip == nil || ip.IsLoopback() {
				return false
			}
		}
	}
	return wildcard && len(h.hosts) == 0
}

// session returns the open streamable HTTP session sid, or nil.
func (h *HTTPHandler) session(sid string) *mcp.ServerSession {
	for ss := range h.p.Server().Sessions() {
		if ss.ID() == sid {
			return ss
		}
	}
	return nil
}

// reapSession closes session sid, idle for SessionIdleTimeout, and
// releases what the proxy holds for it.
func (h *HTTPHandler) reapSession(sid string) {
	ss := h.session(sid)
	if ss == nil {
		return // ended meanwhile
	}
	h.logger.Debug("openclaw mcp proxy: closing an idle session", "idle", h.limits.SessionIdleTimeout)
	_ = ss.Close()
	h.p.releaseEnded(context.Background())
}

// admitSession reports whether one more MCP session may open, below
// MaxSessions. With reserve, the caller is an initialize request: it
// holds a place until sessionOpened, so that concurrent ones cannot
// all pass.
func (h *HTTPHandler) admitSession(reserve bool) bool {
	n := 0
	for range h.p.Server().Sessions() {
		n++
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n+h.opening >= h.limits.MaxSessions {
		return false
	}
	if reserve {
		h.opening++
	}
	return true
}

// sessionOpened gives back the place admitSession(true) reserved.
func (h *HTTPHandler) sessionOpened() {
	h.mu.Lock()
	h.opening--
	h.mu.Unlock()
}

// writeTooManySessions answers 503 with a JSON-RPC error to id.
func writeTooManySessions(w http.ResponseWriter, id jsonrpc.ID, max int) {
	w.Header().Set("Retry-After", "5")
	writeRPCError(w, http.StatusServiceUnavailable, id, CodeTooManySessions,
		fmt.Sprintf("too many MCP sessions: this proxy serves at most %d at once (--max-sessions); close one (DELETE /mcp) or retry later", max))
}

// CodeTooManySessions is the JSON-RPC error code of an initialize (or a
// legacy SSE stream) refused because MaxSessions sessions are open.
const CodeTooManySessions = -32003

// orDefault returns v, or def when v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// originAllowed reports whether a request with Origin o may proceed: a
// loopback origin, one on the listen host, or one of AllowOrigins.
func (h *HTTPHandler) originAllowed(o string) bool {
	norm, err := normalizeOrigin(o)
	if err != nil {
		return false // "null" and junk: an opaque origin is nobody we know
	}
	if h.origins[norm] {
		return true
	}
	u, _ := url.Parse(norm) // parsed once already by normalizeOrigin
	host := u.Hostname()
	if IsLoopbackHost(host) {
		return true
	}
	lh := h.opts.ListenHost
	if lh == "" || lh == "0.0.0.0" || lh == "::" {
		return false
	}
	return strings.EqualFold(host, strings.Trim(lh, "[]"))
}

// normalizeOrigin returns o as scheme://host[:port] in lower case, or an
// error when o is not such an origin.
func normalizeOrigin(o string) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(strings.TrimSpace(o), "/"))
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return "", errors.New("not an origin: want http(s)://host[:port]")
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// IsLoopbackHost reports whether host (an IP, possibly bracketed, or a
// name) is loopback: 127.0.0.0/8, ::1 or "localhost" (config.IsLoopbackHost).
func IsLoopbackHost(host string) bool { return config.IsLoopbackHost(host) }

// health is the /healthz body.
type health struct {
	OK       bool   `json:"ok"`
	Draining bool   `json:"draining,omitempty"`
	Tools    int    `json:"tools"`
	Servers  *count `json:"servers,omitempty"`
}

type count struct {
	Connected int `json:"connected"`
	Total     int `json:"total"`
}

func (h *HTTPHandler) serveHealth(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	draining := h.draining
	h.mu.Unlock()
	body := health{OK: !draining, Draining: draining, Tools: len(h.p.Tools())}
	if h.opts.Servers != nil {
		c := &count{}
		for _, s := range h.opts.Servers() {
			if !s.Enabled {
				continue
			}
			c.Total++
			if s.Connected {
				c.Connected++
			}
		}
		body.Servers = c
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if draining {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body) // a client that left misses it
}

// track counts the requests being handled (every method but
// subscriptions/listen, which lasts as long as its stream) and refuses new
// requests once the drain is over; notifications always pass.
func (h *HTTPHandler) track(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "subscriptions/listen" || strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		h.mu.Lock()
		if h.closing {
			h.mu.Unlock()
			return nil, errShuttingDown
		}
		h.inFlight++
		h.mu.Unlock()
		defer h.done(&h.inFlight)
		return next(ctx, method, req)
	}
}

// Serve serves h on ln until ctx is done, then drains and shuts down
// gracefully. Draining, it keeps accepting connections: /readyz and
// /healthz answer 503, a new session (initialize, GET /sse) or a
// sessionless request is answered 503 with Retry-After, and the requests
// of the sessions already open are served, until no request is in flight
// or ShutdownTimeout has passed. Then it stops accepting connections,
// refuses every new request, waits (within the same ShutdownTimeout) for
// the answers to be written, closes the MCP sessions (ending their event
// streams) and the server; past the timeout the connections are cut. It
// returns nil
// after a shutdown that ctx started, or the error that stopped serving.
// ln is closed on return. Closing the runtime is the caller's, after Serve
// returns.
func (h *HTTPHandler) Serve(ctx context.Context, ln net.Listener) error {
	return h.serve(ctx, ln, h)
}

// serve is Serve with front as the server's handler (h, or a test's
// wrapper around it).
func (h *HTTPHandler) serve(ctx context.Context, ln net.Listener, front http.Handler) error {
	ln = newLimitListener(ln, h.limits.MaxConnections, func() {
		h.logger.Debug("openclaw mcp proxy: connection refused: too many open", "max", h.limits.MaxConnections)
	})
	srv := &http.Server{
		Handler:           front,
		ReadHeaderTimeout: h.limits.ReadHeaderTimeout,
		IdleTimeout:       2 * time.Minute, // idle keep-alive connections; streams are not idle
		ErrorLog:          slog.NewLogLogger(h.logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("proxy: serving HTTP on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.opts.ShutdownTimeout)
	defer cancel()
	h.mu.Lock()
	h.draining = true // not ready; new sessions are refused from here on
	h.mu.Unlock()
	h.logger.Info("openclaw mcp proxy: draining: not ready, new sessions refused; requests in flight may finish", "timeout", h.opts.ShutdownTimeout)
	n := h.waitZero(sctx, &h.inFlight)
	h.mu.Lock()
	h.closing = true // every new request is refused from here on
	h.mu.Unlock()
	// Shutdown closes the listener at once, then waits for the active
	// requests.
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(sctx) }()
	if n > 0 {
		h.logger.Warn("openclaw mcp proxy: shutdown timeout: requests still running are cut off", "requests", n, "timeout", h.opts.ShutdownTimeout)
	} else if !h.opts.MetricsOnly {
		h.endStreams(sctx)
	}
	var err error
	if serr := <-shut; serr != nil {
		// Past the timeout: cut every connection.
		err = errors.Join(fmt.Errorf("proxy: HTTP shutdown: %w", serr), srv.Close())
	}
	<-served // http.ErrServerClosed, once Shutdown began
	return err
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// endStreams runs once no request is being handled: it waits until every
// answer was written (a streamable POST ends once its answer is; a legacy
// SSE stream is written to just after its handler returns), then ends the
// long-lived streams and closes the MCP sessions.
func (h *HTTPHandler) endStreams(ctx context.Context) {
	h.waitZero(ctx, &h.requests)
	handled := time.Now()
	for {
		h.mu.Lock()
		sse, quiet := !h.lastSSE.IsZero(), time.Since(later(h.lastSSE, handled))
		h.mu.Unlock()
		if !sse || quiet >= sseSettle {
			break
		}
		t := time.NewTimer(sseSettle - quiet)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	h.mu.Lock()
	for _, cancel := range h.streams {
		cancel()
	}
	h.mu.Unlock()
	for ss := range h.p.Server().Sessions() {
		_ = ss.Close() // nothing is pending: only the streams end
	}
}
