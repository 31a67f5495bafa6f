package gateway

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// ErrServerClosed is returned by [Server.Serve] after [Server.Close], and by
// operations on a closed Server.
var ErrServerClosed = errors.New("gateway: server closed")

// Server is a local OpenClaw-protocol Gateway. It serves the Gateway
// WebSocket protocol at "/" and the admin HTTP API under "/admin/v1/" on the
// same listener; see the package documentation. Create it with [New], run it
// with [Server.Serve] (or mount it as an http.Handler) and stop it with
// [Server.Close]. All methods are safe for concurrent use.
//
// What `send` does here: the Gateway has no channel plugins, so a `send` to a
// routed channel is "delivered" by recording the outbound text in the
// session's transcript as an assistant message (model "delivery-mirror"),
// emitting its session.message event, and answering
// {runId, messageId, channel, to, sessionKey?}. Channels listed in
// [Options].UnsupportedChannels answer OpenClaw's "unsupported channel: X"
// instead, as a real Gateway without that plugin does.
type Server struct {
	opts   Options
	token  string
	store  *store
	bootID string
	start  time.Time
	admin  *http.ServeMux

	baseCtx    context.Context
	baseCancel context.CancelFunc

	mu           sync.Mutex // guards the fields below
	conns        map[*conn]struct{}
	closed       bool
	approvals    map[approvalKey]*approval
	deviceTokens map[string]string // device id → issued device token
	idem         map[string]any    // idempotency key → earlier result
	handlers     sync.WaitGroup    // one per WebSocket connection

	// events serializes "change state, then enqueue its events" so that every
	// connection sees events in one global order.
	events sync.Mutex
}

// New validates opts and returns a Server. It loads the state dir (creating
// it when missing) but starts nothing: no goroutine runs until
// [Server.Serve] or [Server.ServeHTTP] is called.
func New(opts *Options) (*Server, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	token := o.Token
	if token == "" && o.Password == "" {
		token = randomToken(24)
	}
	st, err := openStore(o.StateDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts: o, token: token, store: st, bootID: uuid.NewString(), start: o.Now(),
		baseCtx: ctx, baseCancel: cancel,
		conns: map[*conn]struct{}{}, approvals: map[approvalKey]*approval{},
		deviceTokens: map[string]string{}, idem: map[string]any{},
	}
	s.admin = s.adminMux()
	return s, nil
}

// Token returns the shared token clients authenticate with (the configured
// one, or the one New generated).
func (s *Server) Token() string { return s.token }

// StateDir returns the state directory, "" when sessions live in memory.
func (s *Server) StateDir() string { return s.opts.StateDir }

func (s *Server) nowMs() int64 { return s.opts.Now().UnixMilli() }

// Serve accepts connections on ln until ctx is done or [Server.Close] is
// called, then shuts down gracefully (see Close) and returns nil. Any other
// listener error is returned. Serve closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return s.baseCtx }}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.Close(context.Background())
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("gateway: serving: %w", err)
	case <-ctx.Done():
	case <-s.baseCtx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := errors.Join(hs.Shutdown(shutCtx), s.Close(shutCtx))
	<-errc
	return err
}

// Close stops the Gateway: every connection gets a `shutdown` event and a
// 1012 close, pending approval requests end, and Close waits for the
// connection goroutines until ctx is done (then drops the sockets). It is
// idempotent and safe to call concurrently.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	if !already {
		s.expireAllApprovals()
		for _, c := range conns {
			if c.isReady() {
				c.sendEvent("shutdown", object{{"reason", "gateway stopping"}, {"restartExpectedMs", nil}})
			}
			c.closeWith(websocket.StatusServiceRestart, "service restart")
		}
	}
	done := make(chan struct{})
	go func() { s.handlers.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.baseCancel()
		<-done
	}
	s.baseCancel()
	return nil
}

// ServeHTTP serves the WebSocket protocol at "/" (an Upgrade request) and
// the admin API under /admin/v1/.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/admin/") {
		s.admin.ServeHTTP(w, r)
		return
	}
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "openclaw-go local Gateway: connect with a WebSocket client (OpenClaw Gateway protocol", protocol.Version, ")")
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "gateway is shutting down", http.StatusServiceUnavailable)
		return
	}
	s.handlers.Add(1)
	s.mu.Unlock()
	defer s.handlers.Done()
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		s.opts.Logger.Debug("gateway: websocket accept failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	c := newConn(s, ws)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ws.Close(websocket.StatusServiceRestart, "service restart")
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	c.run(s.baseCtx)
}

// checkSecret compares a presented secret with the configured one in
// constant time; an empty configured secret never matches.
func checkSecret(presented, configured string) bool {
	if configured == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(presented), []byte(configured)) == 1
}

// readyConns returns the connections that completed the handshake.
func (s *Server) readyConns() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		if c.isReady() {
			out = append(out, c)
		}
	}
	return out
}
