package proxy

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	// ListenHost is the host of the listen address. A request whose
	// Origin has this host is allowed, besides loopback origins;
	// a wildcard host ("", 0.0.0.0, ::) allows nothing more.
	ListenHost string
	// AllowOrigins are further origins (scheme://host[:port]) that may
	// send requests, compared ignoring case and a trailing slash.
	AllowOrigins []string
	// MetricsOnly serves /healthz and /metrics alone (stdio mode's
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
	// Logger receives the transport diagnostics; nil means slog.Default().
	Logger *slog.Logger
}

// HTTPHandler serves a [Proxy] over HTTP: streamable HTTP on /mcp (sessions
// up to MCP 2025-11-25, stateless for 2026-07-28) and legacy SSE on /sse,
// all serving the proxy's one *mcp.Server, plus /healthz and /metrics.
// Every request passes an Origin check (a browser page of another
// site is refused 403, against DNS rebinding; go-sdk's own Host check for
// loopback listeners stays on); /mcp, /sse and /metrics need the bearer
// token (401 with WWW-Authenticate: Bearer otherwise). Every POST body on
// /mcp and /sse is read up to MaxMessageBytes and checked as exactly one
// JSON-RPC message before go-sdk sees it (see checkFrames, and
// docs/proxy.md for the answers).
type HTTPHandler struct {
	p         *Proxy
	opts      HTTPOptions
	tokenHash [sha256.Size]byte
	origins   map[string]bool
	logger    *slog.Logger
	mux       *http.ServeMux
	maxBody   int64 // MaxMessageBytes, defaulted

	mu       sync.Mutex
	inFlight int                         // MCP requests being handled (track)
	requests int                         // HTTP requests that are not streams
	streams  map[*int]context.CancelFunc // long-lived streams, ended last
	lastSSE  time.Time                   // the latest write on a legacy SSE stream
	draining bool
	wake     chan struct{} // closed and replaced when a count above drops to 0
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
	h := &HTTPHandler{p: p, opts: *opts, origins: map[string]bool{}, streams: map[*int]context.CancelFunc{}, wake: make(chan struct{})}
	switch {
	case h.opts.Token == "" && !h.opts.NoAuth:
		return nil, errors.New("proxy: HTTP serving needs a bearer token (or NoAuth, on loopback only)")
	case h.opts.Token != "" && h.opts.NoAuth:
		return nil, errors.New("proxy: both a bearer token and NoAuth given")
	}
	h.tokenHash = sha256.Sum256([]byte(h.opts.Token))
	for _, o := range h.opts.AllowOrigins {
		norm, err := normalizeOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("proxy: allowed origin %q: %w", o, err)
		}
		h.origins[norm] = true
	}
	if h.opts.ShutdownTimeout <= 0 {
		h.opts.ShutdownTimeout = DefaultShutdownTimeout
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
	if h.opts.Metrics != nil {
		h.mux.Handle(PathMetrics, h.authorized(h.opts.Metrics.Handler()))
	}
	if !h.opts.MetricsOnly {
		getServer := func(*http.Request) *mcp.Server { return p.Server() }
		// Up to 2025-11-25, stateful: server-to-client requests (sampling,
		// elicitation, roots) need a session to come back on. From
		// 2026-07-28 the protocol is sessionless, and go-sdk serves it
		// only statelessly; its clients name the revision on every request.
		// checkFrames reads and bounds every body first; go-sdk's own cap
		// is set to the same size.
		stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Logger: h.logger, MaxRequestBodyBytes: h.maxBody})
		stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
			Logger: h.logger, Stateless: true, MaxRequestBodyBytes: h.maxBody,
			// The POST is the whole call: a client that hangs up cancels it.
			PropagateRequestCancellation: true,
		})
		h.mux.Handle(PathMCP, h.authorized(h.checkFrames(false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Mcp-Protocol-Version") >= sessionlessRevision {
				stateless.ServeHTTP(w, r)
				return
			}
			stateful.ServeHTTP(w, r)
		}))))
		h.mux.Handle(PathSSE, h.authorized(h.checkFrames(true, mcp.NewSSEHandler(getServer, &mcp.SSEOptions{MaxRequestBodyBytes: h.maxBody}))))
		p.Server().AddReceivingMiddleware(h.track)
	}
	return h, nil
}

// ServeHTTP checks the Origin, then routes the request.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" && !h.originAllowed(o) {
		http.Error(w, fmt.Sprintf("openclaw mcp proxy: Origin %q is not allowed (loopback and the listen host are; add others with --allow-origin)", o), http.StatusForbidden)
		return
	}
	if h.opts.MetricsOnly || (r.URL.Path != PathMCP && r.URL.Path != PathSSE) {
		h.mux.ServeHTTP(w, r)
		return
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
			w = &sseWriter{ResponseWriter: w, h: h}
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

// sseWriter notes when a legacy SSE stream was last written to.
type sseWriter struct {
	http.ResponseWriter
	h *HTTPHandler
}

func (s *sseWriter) Write(b []byte) (int, error) {
	s.h.mu.Lock()
	s.h.lastSSE = time.Now()
	s.h.mu.Unlock()
	return s.ResponseWriter.Write(b)
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

// authorized requires the bearer token before next, unless NoAuth.
func (h *HTTPHandler) authorized(next http.Handler) http.Handler {
	if h.opts.NoAuth {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		scheme, tok, ok := strings.Cut(auth, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="openclaw-mcp-proxy"`)
			http.Error(w, "openclaw mcp proxy: missing bearer token (Authorization: Bearer <token>)", http.StatusUnauthorized)
			return
		}
		// Hashes compare in constant time whatever the lengths.
		got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		if subtle.ConstantTimeCompare(got[:], h.tokenHash[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="openclaw-mcp-proxy", error="invalid_token"`)
			http.Error(w, "openclaw mcp proxy: invalid bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
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
// name) is loopback: 127.0.0.0/8, ::1 or "localhost".
func IsLoopbackHost(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

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
// requests while draining; notifications always pass.
func (h *HTTPHandler) track(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "subscriptions/listen" || strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		h.mu.Lock()
		if h.draining {
			h.mu.Unlock()
			return nil, errShuttingDown
		}
		h.inFlight++
		h.mu.Unlock()
		defer h.done(&h.inFlight)
		return next(ctx, method, req)
	}
}

// Serve serves h on ln until ctx is done, then shuts down gracefully: it
// stops accepting connections, refuses new requests, waits up to
// ShutdownTimeout for the requests in flight (tool calls above all) to be
// answered, closes the MCP sessions (ending their event streams) and the
// server; past the timeout the connections are cut. It returns nil
// after a shutdown that ctx started, or the error that stopped serving.
// ln is closed on return. Closing the runtime is the caller's, after Serve
// returns.
func (h *HTTPHandler) Serve(ctx context.Context, ln net.Listener) error {
	return h.serve(ctx, ln, h)
}

// serve is Serve with front as the server's handler (h, or a test's
// wrapper around it).
func (h *HTTPHandler) serve(ctx context.Context, ln net.Listener, front http.Handler) error {
	srv := &http.Server{
		Handler:           front,
		ReadHeaderTimeout: 10 * time.Second,
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
	// Shutdown closes the listener at once, then waits for the active
	// requests, which include the tool calls in flight.
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(sctx) }()
	h.mu.Lock()
	h.draining = true // new requests are refused from here on
	h.mu.Unlock()
	if n := h.waitZero(sctx, &h.inFlight); n > 0 {
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
