package gwclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// session is one WebSocket connection. It owns two goroutines: the read
// loop (started by newSession, ends when the socket does) and, after
// hello-ok, the tick watchdog (ends with the read loop). shutdown ends both.
type session struct {
	c         *Client
	ws        *websocket.Conn
	ctx       context.Context // lifetime of the connection; not the caller's
	cancel    context.CancelFunc
	epoch     time.Time
	lastRecv  atomic.Int64 // time.Since(epoch) of the latest inbound frame, ns
	nextID    atomic.Int64
	challenge chan protocol.Challenge // first connect.challenge, cap 1
	wg        sync.WaitGroup

	mu         sync.Mutex
	pending    map[string]*pendingCall
	ended      bool
	localClose *closedError // set when we closed the socket, for a clearer reason
	lastSeq    int64
	err        error         // why the connection ended; set before done closes
	done       chan struct{} // closed when the read loop ended
}

type pendingCall struct {
	method string
	ch     chan result // cap 1

	// accepted, for a two-phase request, receives the interim
	// {"status":"accepted",…} payload once; the call then keeps waiting for
	// the final response with the same id.
	accepted     func(json.RawMessage)
	acceptedSeen bool
}

type result struct {
	payload json.RawMessage
	err     error
}

func newSession(c *Client, ws *websocket.Conn) *session {
	// The socket outlives any caller's context; only shutdown cancels it.
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{
		c: c, ws: ws, ctx: ctx, cancel: cancel, epoch: time.Now(),
		challenge: make(chan protocol.Challenge, 1),
		pending:   make(map[string]*pendingCall),
		lastSeq:   -1,
		done:      make(chan struct{}),
	}
	s.wg.Add(1)
	go s.readLoop()
	return s
}

// readLoop reads frames in order until the socket ends.
func (s *session) readLoop() {
	defer s.wg.Done()
	for {
		_, data, err := s.ws.Read(s.ctx)
		if err != nil {
			s.end(newClosedError(err))
			return
		}
		s.lastRecv.Store(int64(time.Since(s.epoch)))
		s.handle(data)
	}
}

// handle processes one inbound message. Binary messages are treated like
// text, as the Node client does.
func (s *session) handle(data []byte) {
	log := s.c.opts.Logger
	f, err := decodeFrame(data)
	if err != nil {
		log.Warn("skipping malformed gateway frame", "reason", err, "bytes", len(data))
		return
	}
	switch f.Type {
	case protocol.TypeEvent:
		if f.Event == protocol.EventConnectChallenge {
			var ch protocol.Challenge
			if err := json.Unmarshal(f.Payload, &ch); err != nil {
				log.Warn("skipping malformed connect.challenge", "reason", err)
				return
			}
			select {
			case s.challenge <- ch:
			default:
				log.Debug("ignoring repeated connect.challenge")
			}
			return
		}
		if f.Seq != nil {
			s.mu.Lock()
			last := s.lastSeq
			s.lastSeq = *f.Seq
			s.mu.Unlock()
			if last >= 0 && *f.Seq > last+1 {
				log.Debug("gateway event gap", "expected", last+1, "received", *f.Seq)
			}
		}
		s.c.deliver(f.Event, f.Payload)
	case protocol.TypeResponse:
		s.resolve(f)
	case protocol.TypeRequest:
		log.Warn("ignoring request frame from gateway", "method", f.Method, "id", f.ID)
	}
}

func (s *session) resolve(f *protocol.Frame) {
	s.mu.Lock()
	p, ok := s.pending[f.ID]
	if ok && p.accepted != nil && !p.acceptedSeen && *f.OK && isAccepted(f.Payload) {
		p.acceptedSeen = true
		s.mu.Unlock()
		p.accepted(f.Payload)
		return
	}
	delete(s.pending, f.ID)
	s.mu.Unlock()
	if !ok {
		s.c.opts.Logger.Warn("dropping gateway response to unknown request", "id", f.ID)
		return
	}
	if *f.OK {
		payload := f.Payload
		if payload == nil {
			payload = json.RawMessage("null")
		}
		p.ch <- result{payload: payload}
		return
	}
	shape := protocol.ErrorShape{Code: protocol.CodeUnavailable, Message: "unknown error"}
	if f.Error != nil {
		shape = *f.Error
	}
	p.ch <- result{err: &protocol.RequestError{Method: p.method, ErrorShape: shape}}
}

// end records why the connection ended and releases every waiter.
func (s *session) end(err *closedError) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	if s.localClose != nil {
		err = s.localClose
	}
	s.err = err
	s.pending = nil
	s.mu.Unlock()
	close(s.done)
}

// closeWith closes the socket with code and reason (once); the read loop
// then ends with that reason.
func (s *session) closeWith(code websocket.StatusCode, reason string) {
	s.mu.Lock()
	if s.ended || s.localClose != nil {
		s.mu.Unlock()
		return
	}
	s.localClose = &closedError{Code: int(code), Reason: reason, Err: errors.New("closed by client")}
	s.mu.Unlock()
	_ = s.ws.Close(code, reason) // best effort; the read loop reports the end
}

// shutdown closes the socket if still open and waits for both goroutines.
func (s *session) shutdown(code websocket.StatusCode, reason string) {
	s.closeWith(code, reason)
	s.cancel()
	s.wg.Wait()
}

// call sends one request on this connection and waits for its response.
func (s *session) call(ctx context.Context, method string, params any, timeout time.Duration) (json.RawMessage, error) {
	return s.callPhased(ctx, method, params, timeout, nil)
}

// isAccepted reports whether payload is the interim answer of a two-phase
// request: an object whose "status" is "accepted".
func isAccepted(payload json.RawMessage) bool {
	var p struct {
		Status string `json:"status"`
	}
	return json.Unmarshal(payload, &p) == nil && p.Status == "accepted"
}

// callPhased is call with an optional two-phase acknowledgement: when
// accepted is non-nil, an interim "accepted" response is handed to it (from
// the read loop) and the wait goes on for the final response, which is
// then bounded by ctx only, not by timeout.
func (s *session) callPhased(ctx context.Context, method string, params any, timeout time.Duration, accepted func(json.RawMessage)) (json.RawMessage, error) {
	id := strconv.FormatInt(s.nextID.Add(1), 10) + ":" + uuid.NewString()
	f, err := protocol.Request(id, method, params)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("gwclient: encoding %s request: %w", method, err)
	}
	p := &pendingCall{method: method, ch: make(chan result, 1), accepted: accepted}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return nil, s.lostError(method)
	}
	s.pending[id] = p
	s.mu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	expired := timer.C
	if accepted != nil {
		expired = nil // the Gateway answers when a human decides or the approval expires
	}
	// The write is bounded by the request timeout, not by the caller's ctx:
	// coder/websocket closes the socket when a write is interrupted, which
	// would fail every other request on it.
	wctx, cancel := context.WithTimeout(s.ctx, timeout)
	err = s.ws.Write(wctx, websocket.MessageText, data)
	cancel()
	if err != nil {
		s.forget(id)
		select {
		case <-s.done:
			return nil, s.lostError(method)
		default:
		}
		return nil, fmt.Errorf("gwclient: sending %s: %w", method, err)
	}

	select {
	case r := <-p.ch:
		return r.payload, r.err
	case <-s.done:
		select {
		case r := <-p.ch: // answered just before the socket ended
			return r.payload, r.err
		default:
		}
		return nil, s.lostError(method)
	case <-expired:
		if r, ok := s.forget(id); ok {
			return r.payload, r.err
		}
		return nil, fmt.Errorf("%w for %s (no response within %v)", ErrRequestTimeout, method, timeout)
	case <-ctx.Done():
		if r, ok := s.forget(id); ok {
			return r.payload, r.err
		}
		return nil, fmt.Errorf("gwclient: %s: %w", method, ctx.Err())
	}
}

// forget removes a pending call; when its result raced in, it returns it.
func (s *session) forget(id string) (result, bool) {
	s.mu.Lock()
	p := s.pending[id]
	delete(s.pending, id)
	s.mu.Unlock()
	if p == nil {
		return result{}, false
	}
	select {
	case r := <-p.ch:
		return r, true
	default:
		return result{}, false
	}
}

func (s *session) lostError(method string) error {
	if s.c.isClosed() {
		return ErrClosed
	}
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if err == nil {
		return fmt.Errorf("%w while waiting for %s", ErrConnectionLost, method)
	}
	return fmt.Errorf("%w while waiting for %s: %v", ErrConnectionLost, method, err)
}

func (s *session) pendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// handshake waits for connect.challenge, sends connect, reads hello-ok and
// subscribes. On failure it has closed the socket with the code OpenClaw
// uses for that failure.
func (s *session) handshake(ctx context.Context) error {
	o := &s.c.opts
	timer := time.NewTimer(o.ChallengeTimeout)
	defer timer.Stop()
	var ch protocol.Challenge
	select {
	case ch = <-s.challenge:
	case <-timer.C:
		s.closeWith(protocol.ClosePolicyViolation, "connect challenge timeout")
		return fmt.Errorf("%w (no connect.challenge within %v)", ErrChallengeTimeout, o.ChallengeTimeout)
	case <-s.done:
		return s.beforeReady()
	case <-ctx.Done():
		return ctx.Err()
	}
	nonce := strings.TrimSpace(ch.Nonce)
	if nonce == "" {
		s.closeWith(protocol.ClosePolicyViolation, "connect challenge missing nonce")
		return errors.New("gateway connect challenge missing nonce")
	}
	signedAt := ch.TS
	if signedAt == 0 {
		signedAt = time.Now().UnixMilli()
	}
	payload, err := s.call(ctx, "connect", s.c.connectParams(nonce, signedAt), o.ChallengeTimeout)
	if err != nil {
		if errors.Is(err, ErrRequestTimeout) {
			s.closeWith(protocol.CloseTickTimeout, "connect timeout")
		}
		if errors.Is(err, ErrConnectionLost) {
			return s.beforeReady()
		}
		return err
	}
	hello, err := parseHello(payload)
	if err != nil {
		return err
	}
	s.c.setHello(hello)
	s.wg.Add(1)
	go s.watchTicks(hello.TickInterval)

	payload, err = s.call(ctx, "sessions.subscribe", nil, o.RequestTimeout)
	if err != nil {
		if errors.Is(err, ErrConnectionLost) {
			return s.beforeReady()
		}
		return fmt.Errorf("gateway sessions.subscribe failed: %w", err)
	}
	var sub struct {
		Subscribed bool `json:"subscribed"`
	}
	if err := json.Unmarshal(payload, &sub); err != nil || !sub.Subscribed {
		return fmt.Errorf("gateway sessions.subscribe was not confirmed: %s", truncate(payload, 200))
	}
	return nil
}

// beforeReady describes a socket that ended during the handshake, in
// OpenClaw's words.
func (s *session) beforeReady() error {
	<-s.done
	var ce *closedError
	if errors.As(s.err, &ce) && ce.Code >= 0 {
		return fmt.Errorf("gateway closed before ready (%d): %s", ce.Code, ce.Reason)
	}
	return fmt.Errorf("gateway closed before ready: %w", s.err)
}

// watchTicks closes the socket with 4000 "tick timeout" when nothing arrived
// for more than 2 × interval and no request is pending. It checks once per
// interval and ends with the connection.
func (s *session) watchTicks(interval time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			idle := time.Since(s.epoch) - time.Duration(s.lastRecv.Load())
			if idle > 2*interval && s.pendingCount() == 0 {
				s.c.opts.Logger.Warn("gateway tick timeout", "idle", idle.Round(time.Millisecond), "tickInterval", interval)
				s.closeWith(protocol.CloseTickTimeout, "tick timeout")
				return
			}
		}
	}
}

// helloWire is the part of hello-ok the client reads.
type helloWire struct {
	Type     string `json:"type"`
	Protocol int    `json:"protocol"`
	Server   struct {
		Version string `json:"version"`
	} `json:"server"`
	Features struct {
		Methods []string `json:"methods"`
	} `json:"features"`
	Auth *struct {
		DeviceToken string   `json:"deviceToken"`
		Role        string   `json:"role"`
		Scopes      []string `json:"scopes"`
	} `json:"auth"`
	Policy struct {
		TickIntervalMs *int64 `json:"tickIntervalMs"`
	} `json:"policy"`
}

func parseHello(payload json.RawMessage) (*Hello, error) {
	var w helloWire
	if err := json.Unmarshal(payload, &w); err != nil {
		return nil, fmt.Errorf("gateway connect: malformed hello-ok: %w", err)
	}
	if w.Type != "" && w.Type != "hello-ok" {
		return nil, fmt.Errorf("gateway connect: answered %q, want hello-ok", w.Type)
	}
	h := &Hello{Protocol: w.Protocol, ServerVersion: w.Server.Version, Methods: w.Features.Methods,
		TickInterval: DefaultTickInterval}
	if w.Policy.TickIntervalMs != nil && *w.Policy.TickIntervalMs > 0 {
		h.TickInterval = time.Duration(*w.Policy.TickIntervalMs) * time.Millisecond
	}
	if w.Auth != nil {
		h.DeviceToken, h.Role, h.Scopes = w.Auth.DeviceToken, w.Auth.Role, w.Auth.Scopes
	}
	return h, nil
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
