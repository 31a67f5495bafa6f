package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// conn is one WebSocket client. Its handler goroutine (ServeHTTP → run)
// owns it: run reads frames, and starts and waits for the writer, the ticker
// and the goroutines of long requests (approval requests), all of which end
// when the connection's context is cancelled.
type conn struct {
	srv   *Server
	ws    *websocket.Conn
	id    string // connId
	nonce string

	// Set once by the handshake, before ready is set; read-only afterwards.
	params   *protocol.ConnectParams
	deviceID string
	scopes   map[string]bool
	caps     map[string]bool
	ready    atomic.Bool

	subscribed atomic.Bool

	out       sync.Mutex // guards the outbound queue fields below
	seq       int64
	queue     [][]byte
	queued    int64
	closeCode websocket.StatusCode
	closeMsg  string
	closing   bool
	notify    chan struct{}

	work sync.WaitGroup // writer, ticker, long requests
}

func newConn(s *Server, ws *websocket.Conn) *conn {
	return &conn{srv: s, ws: ws, id: uuid.NewString(), nonce: uuid.NewString(), notify: make(chan struct{}, 1)}
}

func (c *conn) isReady() bool { return c.ready.Load() }

// run drives the connection until the peer goes away, the handshake fails,
// or parent is cancelled.
func (c *conn) run(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	defer func() {
		cancel()
		c.work.Wait()
		c.ws.CloseNow()
	}()
	c.ws.SetReadLimit(protocol.MaxPreConnectFrame)
	c.work.Add(1)
	go func() {
		defer c.work.Done()
		c.writeLoop(ctx)
	}()
	c.sendEvent(protocol.EventConnectChallenge, protocol.Challenge{Nonce: c.nonce, TS: c.srv.nowMs(),
		Capabilities: []string{"model-catalog-snapshot"}})
	if !c.handshake(ctx) {
		c.waitClosed(ctx)
		return
	}
	c.ws.SetReadLimit(c.srv.opts.MaxPayload)
	c.work.Add(1)
	go func() {
		defer c.work.Done()
		c.tickLoop(ctx)
	}()
	for {
		typ, data, err := c.ws.Read(ctx)
		if err != nil {
			c.logClose(err)
			return
		}
		if typ != websocket.MessageText {
			c.closeWith(websocket.StatusUnsupportedData, "binary frames are not supported")
			c.waitClosed(ctx)
			return
		}
		if !c.handleFrame(ctx, data) {
			c.waitClosed(ctx)
			return
		}
	}
}

// waitClosed keeps reading (and discarding) until the close handshake the
// writer started completes, so that control frames are processed.
func (c *conn) waitClosed(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		if _, _, err := c.ws.Read(rctx); err != nil {
			return
		}
	}
}

func (c *conn) logClose(err error) {
	if st := websocket.CloseStatus(err); st != -1 {
		c.srv.opts.Logger.Debug("gateway: connection closed", "conn", c.id, "code", int(st))
		return
	}
	if !errors.Is(err, context.Canceled) {
		c.srv.opts.Logger.Debug("gateway: connection read failed", "conn", c.id, "err", err)
	}
}

func (c *conn) tickLoop(ctx context.Context) {
	t := time.NewTicker(c.srv.opts.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.sendEvent(protocol.EventTick, object{{"ts", c.srv.nowMs()}})
		}
	}
}

// enqueue adds one encoded frame to the outbound queue. A connection whose
// queue exceeds MaxBufferedBytes is a slow consumer and is dropped.
func (c *conn) enqueueLocked(b []byte) {
	if c.closing {
		return
	}
	c.queue = append(c.queue, b)
	c.queued += int64(len(b))
	if c.queued > c.srv.opts.MaxBufferedBytes {
		c.queue, c.queued, c.closing = nil, 0, true
		c.srv.opts.Logger.Warn("gateway: dropping slow consumer", "conn", c.id)
		go c.ws.Close(protocol.ClosePolicyViolation, "slow consumer")
	}
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *conn) send(f *protocol.Frame) {
	b, err := json.Marshal(f)
	if err != nil {
		c.srv.opts.Logger.Error("gateway: encoding frame", "err", err)
		return
	}
	c.out.Lock()
	c.enqueueLocked(b)
	c.out.Unlock()
}

// sendEvent enqueues an event with the connection's next seq; the
// connect.challenge carries none.
func (c *conn) sendEvent(name string, payload any) {
	raw, err := json.Marshal(payload)
	if err != nil {
		c.srv.opts.Logger.Error("gateway: encoding event", "event", name, "err", err)
		return
	}
	c.sendEventRaw(name, raw)
}

func (c *conn) sendEventRaw(name string, raw json.RawMessage) {
	c.out.Lock()
	defer c.out.Unlock()
	if c.closing {
		return
	}
	seq := int64(-1)
	if name != protocol.EventConnectChallenge {
		c.seq++
		seq = c.seq
	}
	f, err := protocol.Event(name, raw, seq)
	if err == nil {
		var b []byte
		if b, err = json.Marshal(f); err == nil {
			c.enqueueLocked(b)
			return
		}
	}
	c.srv.opts.Logger.Error("gateway: encoding event", "event", name, "err", err)
}

func (c *conn) respond(id string, payload any) {
	f, err := protocol.Response(id, payload)
	if err != nil {
		c.respondErr(id, errInternal(err))
		return
	}
	c.send(f)
}

func (c *conn) respondErr(id string, e *protocol.ErrorShape) {
	c.send(protocol.ErrorResponse(id, *e))
}

// closeWith asks the writer to flush what is queued and then close the
// socket with code and reason (cut to the 123 bytes a close frame allows).
func (c *conn) closeWith(code websocket.StatusCode, reason string) {
	for len(reason) > 123 {
		_, size := utf8.DecodeLastRuneInString(reason)
		reason = reason[:len(reason)-size]
	}
	c.out.Lock()
	defer c.out.Unlock()
	if c.closing {
		return
	}
	c.closing, c.closeCode, c.closeMsg = true, code, reason
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *conn) writeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.notify:
		}
		for {
			c.out.Lock()
			batch := c.queue
			c.queue, c.queued = nil, 0
			closing, code, msg := c.closing, c.closeCode, c.closeMsg
			c.out.Unlock()
			for _, b := range batch {
				if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
					return
				}
			}
			if closing && code != 0 {
				c.ws.Close(code, msg)
				return
			}
			if len(batch) == 0 {
				break
			}
		}
	}
}

func errInternal(err error) *protocol.ErrorShape {
	return &protocol.ErrorShape{Code: protocol.CodeUnavailable, Message: fmt.Sprintf("internal error: %v", err)}
}
