package runtime

// notifications/cancelled, sent as the call ends and flushed before close.
//
// go-sdk retires a call whose context ends and sends its
// notifications/cancelled from a goroutine of its own (mcp/transport.go
// call): a process that exits, or a session that closes, right after the
// call returned loses it, and the server goes on working for nobody.
// cancelConn writes the notice itself, from the call's context's
// context.AfterFunc, straight to the transport; Close first writes the
// notices still due and waits for those being written. Whichever of
// go-sdk's notice and its own comes first is written; the other is dropped,
// so the server sees one per call.

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/transport"
)

// cancelNoticeTimeout bounds the writing of one notifications/cancelled,
// and Close's wait for those being written.
const cancelNoticeTimeout = 2 * time.Second

// withCancelNotices wraps t so that a call whose context ends sends its
// notifications/cancelled at once and before the connection closes (see
// cancelConn). nil stays nil.
func withCancelNotices(t mcp.Transport) mcp.Transport {
	if t == nil {
		return nil
	}
	return &cancelTransport{inner: t}
}

type cancelTransport struct{ inner mcp.Transport }

// Connect connects the wrapped transport and wraps its connection.
func (t *cancelTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &cancelConn{Connection: c, calls: map[jsonrpc.ID]*outCall{}, noticed: map[jsonrpc.ID]bool{}, cancelled: map[jsonrpc.ID]*callEnd{}}, nil
}

// outCall is a call written and not yet answered.
type outCall struct {
	ctx  context.Context
	stop func() bool // stops the AfterFunc
	end  *callEnd    // the call context's, or nil
}

type cancelConn struct {
	mcp.Connection

	mu        sync.Mutex
	calls     map[jsonrpc.ID]*outCall
	noticed   map[jsonrpc.ID]bool     // a notice was written: the second one is dropped
	cancelled map[jsonrpc.ID]*callEnd // cancelled calls whose end is awaited
	writing   sync.WaitGroup          // notices being written
}

// callEnd tells a tools/call's caller when the call has ended upstream:
// answered (a go-sdk server answers a cancelled call once its handler
// returns), never sent, cancelled over streamable HTTP (whose late answer
// nobody reads), or its connection closed. The runtime holds a cancelled
// call's rate-limit slots until then.
type callEnd struct {
	sent atomic.Bool // the request was written to the server
	once sync.Once
	done chan struct{}
}

func newCallEnd() *callEnd { return &callEnd{done: make(chan struct{})} }

// finish marks the call ended; later calls do nothing.
func (e *callEnd) finish() {
	if e != nil {
		e.once.Do(func() { close(e.done) })
	}
}

func (e *callEnd) finished() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// callEndKey is the context key of a call's *callEnd.
type callEndKey struct{}

// callEndOf returns ctx's *callEnd, or nil.
func callEndOf(ctx context.Context) *callEnd {
	e, _ := ctx.Value(callEndKey{}).(*callEnd)
	return e
}

// releaseWhenEnded calls release once the call whose context is ctx has
// ended upstream (end): at once for a call that was answered, failed or
// never sent; for a call the caller gave up while the server had it, when
// end finishes or, at the latest, grace (the server's request timeout)
// after the call returned.
func releaseWhenEnded(ctx context.Context, end *callEnd, grace time.Duration, release func()) {
	if ctx.Err() == nil || !end.sent.Load() || end.finished() {
		release()
		return
	}
	go func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-end.done:
		case <-t.C:
			end.finish() // given up on: cancelConn drops it
		}
		release()
	}()
}

// Write notes each call before writing it, and lets one
// notifications/cancelled per call through.
func (c *cancelConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	req, ok := msg.(*jsonrpc.Request)
	switch {
	case ok && req.IsCall():
		id := req.ID
		oc := &outCall{ctx: ctx, end: callEndOf(ctx)}
		if oc.end != nil {
			oc.end.sent.Store(true)
		}
		c.mu.Lock()
		c.calls[id] = oc
		oc.stop = context.AfterFunc(ctx, func() { c.notice(id, ctx) })
		c.mu.Unlock()
		err := c.Connection.Write(ctx, msg)
		if err != nil {
			c.settled(id) // never sent: nothing to cancel
		}
		return err
	case ok && req.Method == "notifications/cancelled":
		id, ok := transport.CancelledID(req)
		if !ok {
			break
		}
		c.mu.Lock()
		if c.noticed[id] {
			delete(c.noticed, id)
			c.mu.Unlock()
			return nil // ours went first
		}
		if oc, ok := c.calls[id]; ok {
			oc.stop()
			delete(c.calls, id)
			c.awaitLocked(id, oc.end)
		}
		c.noticed[id] = true
		c.writing.Add(1)
		c.mu.Unlock()
		defer c.writing.Done()
	}
	return c.Connection.Write(ctx, msg)
}

// Read forgets the calls that were answered.
func (c *cancelConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if resp, ok := m.(*jsonrpc.Response); ok && err == nil {
		c.settled(resp.ID)
	}
	return m, err
}

// settled forgets call id: answered (perhaps after it was cancelled), or
// never sent.
func (c *cancelConn) settled(id jsonrpc.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if oc, ok := c.calls[id]; ok {
		oc.stop()
		delete(c.calls, id)
		oc.end.finish()
	}
	if e, ok := c.cancelled[id]; ok {
		delete(c.cancelled, id)
		e.finish()
	}
}

// awaitLocked keeps end, the end of call id that was just cancelled, until
// the server's late answer (settled) or Close; ends given up on meanwhile
// are dropped.
func (c *cancelConn) awaitLocked(id jsonrpc.ID, end *callEnd) {
	if end == nil {
		return
	}
	for k, e := range c.cancelled {
		if e.finished() {
			delete(c.cancelled, k)
		}
	}
	c.cancelled[id] = end
}

// notice writes call id's notifications/cancelled, unless it was answered
// or noticed already; ctx is the call's (ended) context.
func (c *cancelConn) notice(id jsonrpc.ID, ctx context.Context) {
	c.mu.Lock()
	oc, ok := c.calls[id]
	if !ok || c.noticed[id] {
		c.mu.Unlock()
		return
	}
	delete(c.calls, id)
	c.awaitLocked(id, oc.end)
	c.noticed[id] = true
	c.writing.Add(1)
	c.mu.Unlock()
	defer c.writing.Done()
	reason := cancelReason(ctx)
	params, _ := json.Marshal(&mcp.CancelledParams{RequestID: id.Raw(), Reason: reason})
	wctx, stop := context.WithTimeout(context.Background(), cancelNoticeTimeout)
	defer stop()
	_ = c.Connection.Write(wctx, &jsonrpc.Request{Method: "notifications/cancelled", Params: params})
}

// Close writes the notices of calls whose context has ended (their
// AfterFunc may not have run yet), waits for the notices being written
// (within cancelNoticeTimeout), then closes the connection.
func (c *cancelConn) Close() error {
	c.mu.Lock()
	var due []jsonrpc.ID
	var ctxs []context.Context
	for id, oc := range c.calls {
		if oc.ctx.Err() != nil {
			due, ctxs = append(due, id), append(ctxs, oc.ctx)
		}
	}
	c.mu.Unlock()
	for i, id := range due {
		c.notice(id, ctxs[i])
	}
	waitNotices(&c.writing)
	err := c.Connection.Close()
	c.mu.Lock()
	for id, e := range c.cancelled {
		delete(c.cancelled, id)
		e.finish()
	}
	for _, oc := range c.calls {
		oc.end.finish()
	}
	c.mu.Unlock()
	return err
}

// cancelReason is the reason a notifications/cancelled gives for the call
// whose context ctx ended.
func cancelReason(ctx context.Context) string {
	err := context.Cause(ctx)
	switch {
	case err == nil:
		return "request cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "request timed out"
	}
	return err.Error()
}

// waitNotices waits for the notices being written, at most
// cancelNoticeTimeout.
func waitNotices(writing *sync.WaitGroup) {
	done := make(chan struct{})
	go func() {
		writing.Wait()
		close(done)
	}()
	t := time.NewTimer(cancelNoticeTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
