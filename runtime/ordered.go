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
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// barrierPrefix starts the progress token of a barrier.
const barrierPrefix = "openclaw-barrier/"

// barrierWait bounds how long a response waits for the notifications ahead
// of it (a handler that blocks must not hold the connection for good).
const barrierWait = 5 * time.Second

// barriers are the barriers of one client connection not yet handled.
type barriers struct {
	mu      sync.Mutex
	next    uint64
	pending map[string]chan struct{}
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
// comes after a barrier, once the barrier was handled (or barrierWait
// passed).
func (c *orderedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if c.held != nil {
		t := time.NewTimer(barrierWait)
		select {
		case <-c.reached:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
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
