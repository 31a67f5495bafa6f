package gwclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/openclaw-go/openclaw/internal/redact"

	"github.com/coder/websocket"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// State is the connection state reported to Options.OnStateChange.
type State int

// Connection states.
const (
	// StateConnected: the handshake and sessions.subscribe succeeded; the
	// client is ready and requests are sent.
	StateConnected State = iota + 1
	// StateDisconnected: a ready connection ended; requests in flight failed
	// and new ones fail at once with [ErrNotConnected] until the next
	// connection is ready.
	StateDisconnected
	// StateReconnecting: a connection attempt is scheduled after a delay.
	StateReconnecting
)

// String returns the state's lowercase name, e.g. "connected".
func (s State) String() string {
	switch s {
	case StateConnected:
		return "connected"
	case StateDisconnected:
		return "disconnected"
	case StateReconnecting:
		return "reconnecting"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// StateChange is one connection state transition.
type StateChange struct {
	State State
	// Err is why the connection ended (StateDisconnected) or why the last
	// attempt failed (StateReconnecting; nil after a plain disconnect).
	Err error
	// Delay is the wait before the next attempt (StateReconnecting).
	Delay time.Duration
}

// Hello is what the client keeps from the Gateway's hello-ok (docs/protocol-facts.md, hello-ok).
type Hello struct {
	// Protocol is the negotiated protocol version (4).
	Protocol int
	// ServerVersion is server.version, e.g. "2026.9.6".
	ServerVersion string
	// Methods is features.methods; it is not exhaustive (docs/protocol-facts.md, Gateway frames).
	Methods []string
	// TickInterval is policy.tickIntervalMs, or [DefaultTickInterval].
	TickInterval time.Duration
	// DeviceToken is auth.deviceToken, issued to a paired device identity.
	DeviceToken string
	// Role and Scopes are what the Gateway granted (auth.role, auth.scopes).
	Role   string
	Scopes []string
}

// Client is a Gateway connection that reconnects until closed. Create it
// with [New], drive it with [Client.Run], stop it with [Client.Close].
// Request, WaitReady, HasMethod, Hello and Close are safe for concurrent use.
type Client struct {
	opts    Options
	runDone chan struct{}

	mu      sync.Mutex
	closed  bool
	running bool
	cancel  context.CancelFunc
	fatal   error
	wasUp   bool          // a connection was ready once: requests no longer wait
	ready   *session      // non-nil while a connection is ready
	changed chan struct{} // closed and replaced on every change of the above
	hello   *Hello        // from the latest hello-ok
	methods map[string]struct{}
}

// New returns a client for opts, copied and completed with defaults. It has
// no side effects: nothing is dialled, validated or started until Run.
func New(opts *Options) *Client {
	return &Client{
		opts:    opts.withDefaults(nil),
		runDone: make(chan struct{}),
		changed: make(chan struct{}),
	}
}

// Run connects and keeps the client connected until ctx is done or Close is
// called, and then returns nil after every goroutine it started has ended.
//
// A ws:// URL to a host not trusted for plaintext (see [CheckSecureURL])
// ends Run at once with a *[PlaintextRemoteError]; nothing is dialled.
//
// The first connection follows OpenClaw's startup policy (docs/protocol-facts.md, Connect failures): a
// retryable Gateway error, a connect timeout or a challenge timeout is
// retried with backoff; anything else ends Run with that error, unwrapped
// so that `MCP server failed to start: <err>` reads like OpenClaw: a
// *[protocol.RequestError] carrying the Gateway's message (for example
// "unauthorized: gateway token mismatch"), a *[DialError] naming the
// address, or a handshake error. Waiting requests are then released with
// that error. After the first successful handshake no error is fatal: a
// dropped connection is retried forever with a backoff starting at
// Options.InitialBackoff, doubling, capped at Options.MaxBackoff, never
// below a retryable error's retryAfterMs.
//
// Run may be called once; it returns [ErrAlreadyRunning] on a second call
// and [ErrClosed] after Close.
func (c *Client) Run(ctx context.Context) error {
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return ErrClosed
	case c.running:
		c.mu.Unlock()
		return ErrAlreadyRunning
	}
	c.running = true
	ctx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	c.mu.Unlock()
	defer close(c.runDone)
	defer cancel()

	err := c.run(ctx)
	if err != nil {
		if c.opts.OnFatal != nil {
			c.opts.OnFatal(err)
		}
		c.mu.Lock()
		c.fatal = err
		c.broadcastLocked()
		c.mu.Unlock()
	}
	return err
}

func (c *Client) run(ctx context.Context) error {
	hc, tr, err := c.httpClient()
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	log := c.opts.Logger
	backoff := c.opts.InitialBackoff
	everReady := false
	for {
		s, err := c.connect(ctx, hc)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			everReady = true
			backoff = c.opts.InitialBackoff
			c.setReady(s)
			log.Info("gateway connected", "url", redact.URL(c.opts.URL))
			c.notify(StateChange{State: StateConnected})
			select {
			case <-s.done:
				c.clearReady(s)
				s.shutdown(websocket.StatusNormalClosure, "")
				log.Warn("gateway disconnected", "err", s.err)
				c.notify(StateChange{State: StateDisconnected, Err: s.err})
			case <-ctx.Done():
				c.clearReady(s)
				s.shutdown(websocket.StatusNormalClosure, "")
				return nil
			}
		} else {
			log.Warn("gateway connect failed", "url", redact.URL(c.opts.URL), "err", err)
			if !everReady && !retryableInitial(err) {
				return err
			}
		}
		delay := backoff
		if ra := retryAfter(err); ra > delay {
			delay = ra
		}
		backoff = min(2*backoff, c.opts.MaxBackoff)
		log.Info("gateway reconnecting", "in", delay)
		c.notify(StateChange{State: StateReconnecting, Err: err, Delay: delay})
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}

// httpClient validates the URL and the pin and builds the transport.
func (c *Client) httpClient() (*http.Client, *http.Transport, error) {
	u, err := url.Parse(c.opts.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("gwclient: gateway URL: %s", redact.Text(err.Error()))
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return nil, nil, fmt.Errorf("gwclient: gateway URL %q: scheme must be ws:// or wss://", redact.URL(c.opts.URL))
	}
	if u.Host == "" {
		return nil, nil, fmt.Errorf("gwclient: gateway URL %q has no host", redact.URL(c.opts.URL))
	}
	if err := CheckSecureURL(c.opts.URL, c.opts.AllowInsecurePrivateWS); err != nil {
		return nil, nil, err
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: c.opts.ChallengeTimeout,
	}
	if c.opts.TLSFingerprint != "" {
		if u.Scheme != "wss" {
			return nil, nil, errors.New("gateway tls fingerprint requires wss:// gateway url")
		}
		pin, err := ParseFingerprint(c.opts.TLSFingerprint)
		if err != nil {
			return nil, nil, err
		}
		tr.TLSClientConfig = pinnedTLSConfig(pin)
	}
	return &http.Client{Transport: tr}, tr, nil
}

// connect dials, performs the handshake and subscribes. On success the
// session is ready; on failure everything it started has ended.
func (c *Client) connect(ctx context.Context, hc *http.Client) (*session, error) {
	dctx, cancel := context.WithTimeout(ctx, c.opts.ChallengeTimeout)
	ws, _, err := websocket.Dial(dctx, c.opts.URL, &websocket.DialOptions{HTTPClient: hc})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &DialError{URL: c.opts.URL, Err: err, Timeout: c.opts.ChallengeTimeout}
	}
	ws.SetReadLimit(c.opts.MaxMessageBytes)
	s := newSession(c, ws)
	if err := s.handshake(ctx); err != nil {
		if ctx.Err() != nil {
			s.shutdown(websocket.StatusNormalClosure, "")
			return nil, ctx.Err()
		}
		s.shutdown(protocol.ClosePolicyViolation, "connect failed")
		return nil, err
	}
	return s, nil
}

// Request sends one Gateway RPC and returns its payload (JSON null when the
// response carried none). params is encoded with encoding/json; nil
// becomes {}.
//
// Before the first connection is ready (the handshake done and
// sessions.subscribe answered), Request waits for it, at most
// Options.RequestTimeout; OpenClaw's bridge waits here too, without a
// bound. Once a connection was ready, a Request made while none is (the
// Gateway went away and the client is reconnecting) fails at once with
// [ErrNotConnected], as OpenClaw's client answers "gateway not connected".
// The response is then awaited for at most Options.RequestTimeout.
//
// Errors: a Gateway error response is a *[protocol.RequestError] whose
// Error() is the Gateway's message; a timeout wraps [ErrRequestTimeout]
// ("gateway request timeout for <method> …"); no connection after the
// first wraps [ErrNotConnected]; a connection that dropped before the
// response wraps [ErrConnectionLost]; after Close, [ErrClosed]; after a
// fatal first connection, that error, wrapped.
func (c *Client) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	wctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	s, err := c.waitReady(wctx, method, true)
	expired := errors.Is(wctx.Err(), context.DeadlineExceeded)
	cancel()
	if err != nil && ctx.Err() == nil && expired {
		return nil, fmt.Errorf("%w: no Gateway connection for %s within %v", ErrRequestTimeout, method, c.opts.RequestTimeout)
	}
	if err != nil {
		return nil, err
	}
	return s.call(ctx, method, params, c.opts.RequestTimeout)
}

// WaitReady blocks until the client is ready, ctx is done, the client is
// closed or its first connection failed fatally.
func (c *Client) WaitReady(ctx context.Context) error {
	_, err := c.waitReady(ctx, "connect", false)
	return err
}

// waitReady returns the ready session. With failFast, once a connection
// was ready, it does not wait for the next one: it fails with
// ErrNotConnected.
func (c *Client) waitReady(ctx context.Context, what string, failFast bool) (*session, error) {
	for {
		c.mu.Lock()
		closed, fatal, s, ch, wasUp := c.closed, c.fatal, c.ready, c.changed, c.wasUp
		c.mu.Unlock()
		switch {
		case closed:
			return nil, ErrClosed
		case fatal != nil:
			return nil, fmt.Errorf("gwclient: gateway unavailable: %w", fatal)
		case s != nil:
			select {
			case <-s.done: // dropped; Run has yet to clear it
			default:
				return s, nil
			}
		}
		if failFast && wasUp {
			return nil, fmt.Errorf("%w: %s not sent (reconnecting)", ErrNotConnected, what)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("gwclient: %s: waiting for the gateway connection: %w", what, ctx.Err())
		}
	}
}

// HasMethod reports whether the latest hello-ok listed method in
// features.methods; false before the first hello-ok. The list is not
// exhaustive (docs/protocol-facts.md, Gateway frames), so false does not prove a method is missing.
func (c *Client) HasMethod(method string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.methods[method]
	return ok
}

// Hello returns what the latest hello-ok said, or nil before the first one.
// The result is a copy.
func (c *Client) Hello() *Hello {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hello == nil {
		return nil
	}
	h := *c.hello
	h.Methods = append([]string(nil), h.Methods...)
	h.Scopes = append([]string(nil), h.Scopes...)
	return &h
}

// Close stops the client: it closes the connection (1000), releases every
// waiting or in-flight request with [ErrClosed], and waits until Run and
// all goroutines it started have ended. It is idempotent and safe to call
// concurrently, before or without Run. It must not be called from OnEvent
// or OnStateChange, which Close would wait for.
func (c *Client) Close() error {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	cancel, running := c.cancel, c.running
	if !already {
		c.broadcastLocked()
	}
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if running {
		<-c.runDone
	}
	return nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Client) broadcastLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *Client) setHello(h *Hello) {
	m := make(map[string]struct{}, len(h.Methods))
	for _, name := range h.Methods {
		m[name] = struct{}{}
	}
	c.mu.Lock()
	c.hello, c.methods = h, m
	c.mu.Unlock()
}

func (c *Client) setReady(s *session) {
	c.mu.Lock()
	c.ready, c.wasUp = s, true
	c.broadcastLocked()
	c.mu.Unlock()
}

func (c *Client) clearReady(s *session) {
	c.mu.Lock()
	if c.ready == s {
		c.ready = nil
		c.broadcastLocked()
	}
	c.mu.Unlock()
}

func (c *Client) notify(sc StateChange) {
	if c.opts.OnStateChange != nil {
		c.opts.OnStateChange(sc)
	}
}

// deliver hands one event to OnEvent, containing a panic.
func (c *Client) deliver(name string, payload json.RawMessage) {
	if c.opts.OnEvent == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.opts.Logger.Error("gateway event handler failed", "event", name, "panic", r)
		}
	}()
	c.opts.OnEvent(name, payload)
}

// connectParams builds connect's params as `openclaw mcp serve` sends them.
func (c *Client) connectParams(nonce string, signedAtMs int64) *protocol.ConnectParams {
	o := &c.opts
	var auth *protocol.Auth
	switch {
	case o.Token != "":
		auth = &protocol.Auth{Token: o.Token}
	case o.Password != "":
		auth = &protocol.Auth{Password: o.Password}
	}
	p := &protocol.ConnectParams{
		MinProtocol: protocol.Version,
		MaxProtocol: protocol.Version,
		Client: protocol.ClientInfo{ID: ClientID, DisplayName: ClientDisplayName, Version: o.ClientVersion,
			Platform: o.Platform, DeviceFamily: o.DeviceFamily, Mode: ClientMode},
		Caps:   []string{CapApprovals},
		Auth:   auth,
		Role:   protocol.RoleOperator,
		Scopes: []string{protocol.ScopeOperatorRead, protocol.ScopeOperatorWrite, protocol.ScopeOperatorApproval},
	}
	if o.Identity != nil {
		p.Device = o.Identity.Prove(protocol.SignedFields{ClientID: ClientID, ClientMode: ClientMode,
			Role: p.Role, Scopes: p.Scopes, SignedAtMs: signedAtMs, Token: protocol.TokenForSignature(auth),
			Nonce: nonce, Platform: o.Platform, DeviceFamily: o.DeviceFamily})
	}
	return p
}
