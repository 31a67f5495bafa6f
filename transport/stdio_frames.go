package transport

import (
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// This file is what a stdio connection does with the server's stdout lines
// that are not messages: a line over the size cap fails the calls it may
// answer at once, and skipped lines are counted and their warnings rate
// limited per server.

// Warnings about skipped stdout lines: the first skipWarnBurst of a server
// are logged one by one; after them, at most one warning every
// skipWarnInterval sums up the lines skipped since the previous one.
const (
	skipWarnBurst    = 10
	skipWarnInterval = 30 * time.Second
)

// SkippedLines returns how many lines of the server's stdout were skipped
// since t was made, over every connection: lines that are not one JSON-RPC
// 2.0 message, lines over MaxMessageBytes, and the cut-off parts of lines
// that ended in a whole message.
func (t *StdioTransport) SkippedLines() int64 {
	t.skips.mu.Lock()
	defer t.skips.mu.Unlock()
	return t.skips.total
}

// skipCounter counts a server's skipped stdout lines and paces the
// warnings about them.
type skipCounter struct {
	mu         sync.Mutex
	total      int64
	unlogged   int64     // skipped since the last warning, not logged one by one
	lastWarned time.Time // the last summary warning
}

// add counts one skipped line and says how to warn about it: one by one
// (each), or as a summary of unlogged lines (0 means no warning now).
func (s *skipCounter) add(now time.Time) (total int64, each bool, unlogged int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total++
	if s.total <= skipWarnBurst {
		s.lastWarned = now
		return s.total, true, 0
	}
	s.unlogged++
	if now.Sub(s.lastWarned) < skipWarnInterval {
		return s.total, false, 0
	}
	unlogged, s.unlogged, s.lastWarned = s.unlogged, 0, now
	return s.total, false, unlogged
}

// skipLine counts a skipped stdout line (or the cut-off part of one) and
// warns about it as the rate limit allows.
func (c *stdioConn) skipLine(line []byte, reason string) {
	total, each, unlogged := c.skips.add(time.Now())
	sample := c.red.Redact(truncate(string(line), 200))
	switch {
	case each && total == skipWarnBurst:
		c.log.Warn("transport: stdout line is not JSON-RPC 2.0, skipped; further skipped lines are summed up every "+skipWarnInterval.String(),
			"line", sample, "error", reason, "skipped_total", total)
	case each:
		c.log.Warn("transport: stdout line is not JSON-RPC 2.0, skipped", "line", sample, "error", reason, "skipped_total", total)
	case unlogged > 0:
		c.log.Warn("transport: stdout lines that are not JSON-RPC 2.0 were skipped", "lines", unlogged,
			"last_line", sample, "error", reason, "skipped_total", total)
	}
}

// tooLarge handles a stdout line of size bytes, over maxMsg, of which head
// is the start. When head names an id and the line is not a request, the
// call of that id fails at once with CodeMessageTooLarge; when it names no
// id, every call in flight fails so. A request or notification, or a line
// that does not start a JSON object, is only skipped.
func (c *stdioConn) tooLarge(head []byte, size int) {
	h := readFrameHead(head)
	var ids []jsonrpc.ID
	switch {
	case !h.decoded || h.method:
	case h.id.IsValid():
		if c.out.take(h.id) {
			ids = []jsonrpc.ID{h.id}
		}
	default:
		ids = c.out.takeAll()
	}
	what := "the line answers no call in flight"
	switch {
	case len(ids) == 1 && h.id.IsValid():
		what = fmt.Sprintf("the call it answers (id %v) fails", h.id.Raw())
	case len(ids) > 0:
		what = fmt.Sprintf("its id is not readable: the %d calls in flight fail", len(ids))
	case h.method:
		what = "a request or notification from the server, dropped"
	}
	c.skipLine(head, fmt.Sprintf("message too large: %d bytes, over the %d-byte limit; %s", size, c.maxMsg, what))
	for _, id := range ids {
		c.deliver(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
			Code:    CodeMessageTooLarge,
			Message: fmt.Sprintf("message too large: server %q answered with a %d-byte message, over the %d-byte limit", c.server, size, c.maxMsg),
		}})
	}
}

// outbound tracks our calls to the server that are not answered yet, so
// that an answer too large to read can fail them.
type outbound struct {
	mu   sync.Mutex
	open map[jsonrpc.ID]struct{}
}

func newOutbound() *outbound { return &outbound{open: map[jsonrpc.ID]struct{}{}} }

// sending notes a message about to be written: a call now waits for its
// answer; notifications/cancelled withdraws one (no answer is awaited).
func (o *outbound) sending(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if req.IsCall() {
		o.open[req.ID] = struct{}{}
		return
	}
	if id, ok := CancelledID(req); ok {
		delete(o.open, id)
	}
}

// unsent forgets a call that was not written.
func (o *outbound) unsent(msg jsonrpc.Message) {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		o.take(req.ID)
	}
}

// received forgets the call a response read from the server answers.
func (o *outbound) received(msg jsonrpc.Message) {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		o.take(resp.ID)
	}
}

// take forgets the call id and reports whether it was in flight.
func (o *outbound) take(id jsonrpc.ID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.open[id]
	delete(o.open, id)
	return ok
}

// takeAll forgets every call in flight and returns their ids.
func (o *outbound) takeAll() []jsonrpc.ID {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := make([]jsonrpc.ID, 0, len(o.open))
	for id := range o.open {
		ids = append(ids, id)
	}
	clear(o.open)
	return ids
}
