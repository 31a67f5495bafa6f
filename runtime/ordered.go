package runtime

// Notifications before the answer they precede.
//
// go-sdk's client connection hands a server's notifications to a queue that
// one goroutine works through in order, but settles a response as soon as
// it is read: a tool that logs 10,000 lines and then answers has its call
// return while most of its lines still wait in the queue. Relayed further
// (the proxy), those lines then land after the answer, or on a POST stream
// that the answer closed; the call's last progress finds its handler gone.
// orderedConn holds each response that follows a notification behind a
// barrier: a notifications/progress with a token of its own, queued after
// the notifications read before the response, which barrierMiddleware
// takes out of the queue (no handler sees it). The response is handed on
// once the barrier's turn has come, so every notification read before it
// has been handled.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// barrierPrefix starts the progress token of a barrier.
const barrierPrefix = "openclaw-barrier/"

// barrierWait bounds how long a response waits for the notifications ahead
// of it while none of them is handled (a handler that blocks must not hold
// the connection for good). A queue that is being worked through is waited
// for: 10,000 log lines relayed on a loaded machine take longer than this.
const barrierWait = 5 * time.Second

// barriers are the barriers of one client connection not yet handled.
type barriers struct {
	mu      sync.Mutex
	next    uint64
	pending map[string]chan struct{}

	handled atomic.Uint64 // messages the connection's handlers finished
}

// wait waits until reached is closed, ctx ends, or barrierWait passes
// without a message handled, and reports whether reached was.
func (b *barriers) wait(ctx context.Context, reached chan struct{}) bool {
	t := time.NewTimer(barrierWait)
	defer t.Stop()
	last := b.handled.Load()
	for {
		select {
		case <-reached:
			return true
		case <-ctx.Done():
			return false
		case <-t.C:
			n := b.handled.Load()
			if n == last {
				return false
			}
			last = n
			t.Reset(barrierWait)
		}
	}
}

func newBarriers() *barriers { return &barriers{pending: map[string]chan struct{}{}} }

// add returns a new barrier's token and the channel closed when it is handled.
func (b *barriers) add() (string, chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	tok := barrierPrefix + strconv.FormatUint(b.next, 10)
	ch := make(chan struct{})
	b.pending[tok] = ch
	return tok, ch
}

// reached closes the barrier tok's channel.
func (b *barriers) reached(tok string) {
	b.mu.Lock()
	ch, ok := b.pending[tok]
	delete(b.pending, tok)
	b.mu.Unlock()
	if ok {
		close(ch)
	}
}

// middleware is the client's outermost receiving middleware: it takes the
// barriers out of the notification queue.
func (b *barriers) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "notifications/progress" {
			if p, ok := req.GetParams().(*mcp.ProgressNotificationParams); ok {
				if tok, ok := p.ProgressToken.(string); ok && strings.HasPrefix(tok, barrierPrefix) {
					b.reached(tok)
					return nil, nil
				}
			}
		}
		defer b.handled.Add(1)
		return next(ctx, method, req)
	}
}

// withOrderedNotifications wraps t so that its responses wait for the
// notifications read before them (see orderedConn). nil stays nil.
func withOrderedNotifications(t mcp.Transport, b *barriers) mcp.Transport {
	if t == nil {
		return nil
	}
	return &orderedTransport{inner: t, b: b}
}

type orderedTransport struct {
	inner mcp.Transport
	b     *barriers
}

// Connect connects the wrapped transport and wraps its connection.
func (t *orderedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &orderedConn{Connection: c, b: t.b}, nil
}

// orderedConn puts a barrier before each response that follows a
// notification. go-sdk calls Read from one goroutine.
type orderedConn struct {
	mcp.Connection
	b *barriers

	unsynced bool            // a queued notification was read since the last barrier
	held     jsonrpc.Message // the response behind the barrier
	reached  chan struct{}   // closed when that barrier is handled
}

// Read returns the next message; a response that follows notifications
// comes after a barrier, once the barrier was handled (or the handlers
// stalled: barriers.wait).
func (c *orderedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if c.held != nil {
		if !c.b.wait(ctx, c.reached) && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		m := c.held
		c.held, c.reached = nil, nil
		return m, nil
	}
	m, err := c.Connection.Read(ctx)
	if err != nil {
		return m, err
	}
	switch m := m.(type) {
	case *jsonrpc.Request:
		// notifications/cancelled is acted on as it is read, not queued.
		if !m.IsCall() && m.Method != "notifications/cancelled" {
			c.unsynced = true
		}
	case *jsonrpc.Response:
		if c.unsynced {
			c.unsynced = false
			tok, reached := c.b.add()
			params, _ := json.Marshal(map[string]any{"progressToken": tok, "progress": 0})
			c.held, c.reached = m, reached
			return &jsonrpc.Request{Method: "notifications/progress", Params: params}, nil
		}
	}
	return m, nil
}

// withOrderedStreams returns base with the event streams of its POST
// responses ordered like orderedConn's messages: over streamable HTTP,
// where go-sdk's connection cannot be wrapped, a response event that
// follows notifications on the stream of a call is held behind a barrier
// event (orderedStream).
func withOrderedStreams(base http.RoundTripper, b *barriers) http.RoundTripper {
	return &orderedTripper{base: base, b: b}
}

type orderedTripper struct {
	base http.RoundTripper
	b    *barriers
}

// RoundTrip implements http.RoundTripper.
func (t *orderedTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost || resp.StatusCode != http.StatusOK || resp.Body == nil {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		resp.Body = &orderedStream{ReadCloser: resp.Body, b: t.b, ctx: req.Context()}
	}
	return resp, nil
}

// orderedStream is an event stream that go-sdk reads (through a
// bufio.Reader, event by event): it passes the stream's events on as they
// come, except that a response event read after a notification event is
// preceded by a barrier event and handed on once the barrier was handled
// (or the handlers stalled: barriers.wait). go-sdk's reader finds the whole barrier event in
// its buffer, so it hands the barrier to the notification queue before it
// reads on.
type orderedStream struct {
	io.ReadCloser
	b   *barriers
	ctx context.Context

	in       []byte        // bytes read and not yet passed on: an unfinished event
	out      []byte        // bytes to pass on
	held     []byte        // the response event behind the barrier
	reached  chan struct{} // closed when that barrier is handled
	unsynced bool          // a notification event passed since the last barrier
	err      error         // the stream's read error, once in is passed on
	buf      []byte        // read buffer
}

// Read implements io.Reader.
func (s *orderedStream) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		switch {
		case s.held != nil:
			s.b.wait(s.ctx, s.reached)
			s.out, s.held, s.reached = s.held, nil, nil
			s.events()
		case s.err != nil:
			if len(s.in) == 0 {
				return 0, s.err
			}
			s.out, s.in = s.in, nil // an unfinished event at the end
		default:
			if s.buf == nil {
				s.buf = make([]byte, 32<<10)
			}
			n, err := s.ReadCloser.Read(s.buf)
			s.in = append(s.in, s.buf[:n]...)
			s.err = err
			s.events()
		}
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// events moves the complete events of in to out, stopping at a response
// event that waits behind a barrier.
func (s *orderedStream) events() {
	for s.held == nil {
		end, next := eventEnd(s.in)
		if end < 0 {
			return
		}
		ev := s.in[:next:next]
		s.in = s.in[next:]
		switch m := eventMessage(ev[:end]); {
		case m.Method != "" && len(m.ID) == 0:
			if m.Method != "notifications/cancelled" { // acted on as read, not queued
				s.unsynced = true
			}
		case m.Method == "" && len(m.ID) > 0 && s.unsynced:
			s.unsynced = false
			tok, reached := s.b.add()
			params, _ := json.Marshal(map[string]any{"progressToken": tok, "progress": 0})
			s.out = append(s.out, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":"...)
			s.out = append(append(s.out, params...), "}\n\n"...)
			s.held, s.reached = ev, reached
			return
		}
		s.out = append(s.out, ev...)
	}
}

// eventEnd finds the blank line that ends the first event of b: end is
// where the event's lines end, next where the following event starts; -1
// when b holds no complete event.
func eventEnd(b []byte) (end, next int) {
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1, -1
		}
		line := bytes.TrimSuffix(b[i:i+j], []byte("\r"))
		if len(line) == 0 {
			return i, i + j + 1
		}
		i += j + 1
	}
	return -1, -1
}

// eventMessage reads the id and method of the JSON-RPC message in an
// event's data lines (zero when they hold none).
func eventMessage(ev []byte) (m struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}) {
	var data []byte
	for line := range bytes.Lines(ev) {
		line = bytes.TrimRight(line, "\r\n")
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
		}
	}
	if json.Unmarshal(data, &m) != nil || string(m.ID) == "null" {
		m.ID = nil
	}
	return m
}
