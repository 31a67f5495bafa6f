package bridge

import (
	"context"
	"github.com/openclaw-go/openclaw/internal/jsonw"
	"strconv"
	"sync"
	"time"
)

// QueueLimit is how many events the bridge keeps (OpenClaw's QUEUE_LIMIT,
// docs/protocol-facts.md, Event queue): after a push the oldest are dropped until
// QueueLimit remain.
const QueueLimit = 1000

// queuedEvent is one event of the queue. body is the encoded event object
// without its cursor (`{"type":…}`); it is immutable once queued, so readers
// share it without copying. sessionKey is "" for events that have none
// (approvals, Claude permission requests), which any session filter excludes.
type queuedEvent struct {
	cursor     int64
	sessionKey string
	body       []byte
}

// appendJSON writes the event with its cursor first: {"cursor":n,"type":…}.
func (e *queuedEvent) appendJSON(buf []byte) []byte {
	buf = append(buf, `{"cursor":`...)
	buf = strconv.AppendInt(buf, e.cursor, 10)
	if len(e.body) > 2 {
		buf = append(buf, ',')
	}
	return append(buf, e.body[1:]...)
}

// gapInfo says that events the caller asked for were dropped: it wanted
// events after requestedAfter, the oldest kept is oldestAvailable.
type gapInfo struct {
	requestedAfter  int64
	oldestAvailable int64
}

func (g *gapInfo) appendJSON(buf []byte) []byte {
	o := jsonw.NewObject(buf)
	o.Int("requested_after_cursor", g.requestedAfter)
	o.Int("oldest_available_cursor", g.oldestAvailable)
	return o.Close()
}

// waitResult is how a wait ended: with an event, or with none (timeout,
// cancellation, shutdown), and possibly a gap.
type waitResult struct {
	event *queuedEvent
	gap   *gapInfo
}

type waiter struct {
	after   int64
	session string
	ch      chan waitResult // buffered 1; receives exactly one result
}

// eventQueue is the bridge-local event queue (docs/protocol-facts.md, Event queue): a ring of the last
// QueueLimit events with monotonically increasing cursors starting at 1, and
// the events_wait waiters, woken on every push. It is safe for concurrent use.
type eventQueue struct {
	mu      sync.Mutex
	ring    []queuedEvent
	newest  int64 // cursor of the newest event; 0 before the first
	count   int64
	waiters []*waiter
	closed  bool
}

func newEventQueue() *eventQueue { return &eventQueue{ring: make([]queuedEvent, QueueLimit)} }

func (q *eventQueue) oldestLocked() int64 { return q.newest - q.count + 1 }

// gapLocked returns the gap for a reader positioned after `after`, if any:
// the queue is non-empty and after < oldest−1.
func (q *eventQueue) gapLocked(after int64) *gapInfo {
	if q.count == 0 {
		return nil
	}
	if oldest := q.oldestLocked(); after < oldest-1 {
		return &gapInfo{requestedAfter: after, oldestAvailable: oldest}
	}
	return nil
}

func (w *waiter) matches(e *queuedEvent) bool {
	return e.cursor > w.after && (w.session == "" || e.sessionKey == w.session)
}

// push appends an event, trims the queue and settles the waiters the event
// matches or the trim skipped past. It returns the event's cursor.
func (q *eventQueue) push(sessionKey string, body []byte) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.newest++
	e := queuedEvent{cursor: q.newest, sessionKey: sessionKey, body: body}
	q.ring[(q.newest-1)%QueueLimit] = e
	if q.count < QueueLimit {
		q.count++
	}
	if len(q.waiters) == 0 {
		return e.cursor
	}
	kept := q.waiters[:0]
	for _, w := range q.waiters {
		switch {
		case w.matches(&e):
			ev := e
			w.ch <- waitResult{event: &ev}
		case q.gapLocked(w.after) != nil:
			w.ch <- waitResult{gap: q.gapLocked(w.after)}
		default:
			kept = append(kept, w)
		}
	}
	clear(q.waiters[len(kept):])
	q.waiters = kept
	return e.cursor
}

// poll returns up to limit events matching (after, session) in cursor
// order, the next cursor and the gap (docs/protocol-facts.md, Event queue).
func (q *eventQueue) poll(after int64, session string, limit int) ([]queuedEvent, int64, *gapInfo) {
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.gapLocked(after)
	var out []queuedEvent
	if q.count > 0 {
		for c := max(after+1, q.oldestLocked()); c <= q.newest && len(out) < limit; c++ {
			e := &q.ring[(c-1)%QueueLimit]
			if session == "" || e.sessionKey == session {
				out = append(out, *e)
			}
		}
	}
	next := after
	switch {
	case len(out) > 0:
		next = out[len(out)-1].cursor
	case g != nil:
		next = g.oldestAvailable - 1
	}
	return out, next, g
}

// firstLocked returns the first event matching w, if any.
func (q *eventQueue) firstLocked(w *waiter) *queuedEvent {
	if q.count == 0 {
		return nil
	}
	for c := max(w.after+1, q.oldestLocked()); c <= q.newest; c++ {
		e := q.ring[(c-1)%QueueLimit]
		if w.matches(&e) {
			return &e
		}
	}
	return nil
}

// wait returns the first event matching (after, session) at once when there
// is one or a gap; otherwise it waits for the next push that settles it, the
// timeout, ctx's end or close, whichever comes first. Only a settling push
// yields an event; the others yield none.
func (q *eventQueue) wait(ctx context.Context, after int64, session string, timeout time.Duration) waitResult {
	w := &waiter{after: after, session: session, ch: make(chan waitResult, 1)}
	q.mu.Lock()
	if e := q.firstLocked(w); e != nil || q.gapLocked(after) != nil {
		r := waitResult{event: e, gap: q.gapLocked(after)}
		q.mu.Unlock()
		return r
	}
	if q.closed {
		q.mu.Unlock()
		return waitResult{}
	}
	q.waiters = append(q.waiters, w)
	q.mu.Unlock()

	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-w.ch:
		return r
	case <-t.C:
	case <-ctx.Done():
	}
	if q.remove(w) {
		return waitResult{}
	}
	return <-w.ch // settled while we were giving up
}

// remove unregisters w; false means a push or close already settled it.
func (q *eventQueue) remove(w *waiter) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// close settles every waiter with no event; later waits return at once.
func (q *eventQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, w := range q.waiters {
		w.ch <- waitResult{}
	}
	clear(q.waiters)
	q.waiters = nil
}

// waiterCount reports how many waits are pending (for tests).
func (q *eventQueue) waiterCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiters)
}
