package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sessionMessagePayload returns the captured session.message payload with
// its text replaced, keeping every other field of the real event.
func sessionMessagePayload(t testing.TB, text string, mutate func(m map[string]any)) json.RawMessage {
	t.Helper()
	var ev struct {
		Payload map[string]any `json:"payload"`
	}
	readJSON(t, filepath.Join(fixtures, "gateway-frames", "event-session.message.json"), &ev)
	msg := ev.Payload["message"].(map[string]any)
	msg["content"] = []any{map[string]any{"type": "text", "text": text}}
	if mutate != nil {
		mutate(ev.Payload)
	}
	out, err := json.Marshal(ev.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// reduce keeps what the gap fixtures keep of an event: cursor, type, text.
func reduce(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	sc, _ := m["structuredContent"].(map[string]any)
	reduceOne := func(e any) any {
		em, ok := e.(map[string]any)
		if !ok {
			return e
		}
		return map[string]any{"cursor": em["cursor"], "type": em["type"], "text": em["text"]}
	}
	if evs, ok := sc["events"].([]any); ok {
		for i := range evs {
			evs[i] = reduceOne(evs[i])
		}
	}
	if e, ok := sc["event"]; ok && e != nil {
		sc["event"] = reduceOne(e)
	}
	return m
}

// TestGap replays the gap capture: 1010 injected messages against the
// 1000-entry queue, Claude channel mode off.
func TestGap(t *testing.T) {
	t.Parallel()
	b := New(nil, &Options{Enforcer: allowAll(), ClaudeChannelMode: ChannelOff})
	c := startBridge(t, b)
	init := c.call(1, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "oc-capture", "version": "0"}})
	var want struct {
		Result map[string]any `json:"result"`
	}
	readJSON(t, filepath.Join(fixtures, "gap", "initialize-claude-off.json"), &want)
	if !reflect.DeepEqual(init["capabilities"], want.Result["capabilities"]) {
		t.Errorf("capabilities with mode off = %v, want %v", init["capabilities"], want.Result["capabilities"])
	}
	for i := range 1010 {
		b.HandleGatewayEvent("session.message", sessionMessagePayload(t, fmt.Sprintf("bulk note %d", i), nil))
	}
	tests := []struct {
		fixture string
		tool    string
		args    map[string]any
	}{
		{"events_poll-after0.json", "events_poll", map[string]any{"after_cursor": 0, "limit": 3}},
		{"events_poll-after5-default-limit.json", "events_poll", map[string]any{"after_cursor": 5}},
		{"events_poll-after1005.json", "events_poll", map[string]any{"after_cursor": 1005}},
		{"events_poll-after-end.json", "events_poll", map[string]any{"after_cursor": 1010}},
		{"events_wait-after0.json", "events_wait", map[string]any{"after_cursor": 0}},
		{"events_wait-after-end.json", "events_wait", map[string]any{"after_cursor": 1010, "timeout_ms": 50}},
		{"events_wait-badtimeout.json", "events_wait", map[string]any{"timeout_ms": 300001}},
	}
	for i, tt := range tests {
		got := c.call(10+i, "tools/call", map[string]any{"name": tt.tool, "arguments": tt.args})
		var want struct {
			Result map[string]any `json:"result"`
		}
		readJSON(t, filepath.Join(fixtures, "gap", tt.fixture), &want)
		if g, w := reduce(got), reduce(want.Result); !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n got %v\nwant %v", tt.fixture, g, w)
		}
	}
	// Mode off: no notification at all, although every message was a routed
	// assistant message here; check a routed user message too.
	b.HandleGatewayEvent("session.message", sessionMessagePayload(t, "from the owner", func(m map[string]any) {
		m["message"].(map[string]any)["role"] = "user"
	}))
	c.call(99, "ping", map[string]any{})
	if len(c.notifications) != 0 {
		t.Errorf("mode off sent %d notifications", len(c.notifications))
	}
}

func TestQueuePollAndGap(t *testing.T) {
	t.Parallel()
	q := newEventQueue()
	for i := range 1005 {
		sk := "a"
		if i%2 == 1 {
			sk = "b"
		}
		q.push(sk, []byte(`{"type":"message"}`))
	}
	tests := []struct {
		name      string
		after     int64
		session   string
		limit     int
		cursors   []int64
		next      int64
		gapOldest int64 // 0: no gap
	}{
		{"from zero has a gap", 0, "", 2, []int64{6, 7}, 7, 6},
		{"just before the oldest has no gap", 5, "", 2, []int64{6, 7}, 7, 0},
		{"session filter", 1000, "a", 10, []int64{1001, 1003, 1005}, 1005, 0},
		{"beyond the end", 5000, "", 10, nil, 5000, 0},
		{"filter matching nothing after a gap", 0, "zzz", 10, nil, 5, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			evs, next, gap := q.poll(tt.after, tt.session, tt.limit)
			var cursors []int64
			for _, e := range evs {
				cursors = append(cursors, e.cursor)
			}
			if !reflect.DeepEqual(cursors, tt.cursors) || next != tt.next {
				t.Errorf("poll = %v next %d, want %v next %d", cursors, next, tt.cursors, tt.next)
			}
			switch {
			case tt.gapOldest == 0 && gap != nil:
				t.Errorf("unexpected gap %+v", *gap)
			case tt.gapOldest != 0 && (gap == nil || gap.oldestAvailable != tt.gapOldest || gap.requestedAfter != tt.after):
				t.Errorf("gap = %+v, want oldest %d", gap, tt.gapOldest)
			}
		})
	}
}

// waitForWaiters blocks until n waits are registered; the deadline only
// turns a hang into a failure.
func waitForWaiters(t testing.TB, q *eventQueue, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for q.waiterCount() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters registered, want %d", q.waiterCount(), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestQueueWaitSettles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		session  string
		act      func(q *eventQueue, cancel context.CancelFunc)
		wantCur  int64 // 0: no event
		wantGap  bool
		waitersA int // waiters left afterwards
	}{
		{"a live event", "", func(q *eventQueue, _ context.CancelFunc) { q.push("s", []byte(`{"type":"message"}`)) }, 1, false, 0},
		{"an event of another session does not", "mine", func(q *eventQueue, cancel context.CancelFunc) {
			q.push("other", []byte(`{"type":"message"}`))
			cancel()
		}, 0, false, 0},
		{"cancellation", "", func(_ *eventQueue, cancel context.CancelFunc) { cancel() }, 0, false, 0},
		{"close", "", func(q *eventQueue, _ context.CancelFunc) { q.close() }, 0, false, 0},
		{"the trim passing the cursor", "mine", func(q *eventQueue, _ context.CancelFunc) {
			for range QueueLimit + 1 {
				q.push("other", []byte(`{"type":"message"}`))
			}
		}, 0, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := newEventQueue()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan waitResult, 1)
			go func() { done <- q.wait(ctx, 0, tt.session, time.Hour) }()
			waitForWaiters(t, q, 1)
			tt.act(q, cancel)
			r := <-done
			switch {
			case tt.wantCur == 0 && r.event != nil:
				t.Errorf("got event %d, want none", r.event.cursor)
			case tt.wantCur != 0 && (r.event == nil || r.event.cursor != tt.wantCur):
				t.Errorf("got %+v, want cursor %d", r.event, tt.wantCur)
			}
			if (r.gap != nil) != tt.wantGap {
				t.Errorf("gap = %+v, want gap %v", r.gap, tt.wantGap)
			}
			if tt.wantGap && (r.gap.requestedAfter != 0 || r.gap.oldestAvailable != 2) {
				t.Errorf("gap = %+v, want {0, 2} as captured", *r.gap)
			}
			if n := q.waiterCount(); n != tt.waitersA {
				t.Errorf("%d waiters left", n)
			}
		})
	}
}

// TestEventsWaitOverMCP checks the three ways a pending events_wait ends,
// as a client sees them.
func TestEventsWaitOverMCP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		release  func(t *testing.T, b *Bridge, cancel context.CancelFunc)
		wantText string
	}{
		{"live event", func(t *testing.T, b *Bridge, _ context.CancelFunc) {
			b.HandleGatewayEvent("session.message", sessionMessagePayload(t, "hello", nil))
		}, "event 1"},
		{"client cancellation", func(_ *testing.T, _ *Bridge, cancel context.CancelFunc) { cancel() }, ""},
		{"bridge close", func(_ *testing.T, b *Bridge, _ context.CancelFunc) { b.Close() }, "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := New(nil, &Options{Enforcer: allowAll()})
			cs := connectClient(t, b, "")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type out struct {
				text string
				err  error
			}
			done := make(chan out, 1)
			go func() {
				res, err := cs.CallTool(ctx, toolParams("events_wait", map[string]any{"timeout_ms": 300000}))
				if err != nil {
					done <- out{err: err}
					return
				}
				done <- out{text: resultText(res)}
			}()
			waitForWaiters(t, b.queue, 1)
			tt.release(t, b, cancel)
			o := <-done
			if tt.wantText == "" {
				if o.err == nil {
					t.Errorf("cancelled call returned %q, want the cancellation error", o.text)
				}
				// The server side must have released its waiter.
				deadline := time.Now().Add(20 * time.Second)
				for b.queue.waiterCount() != 0 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				if n := b.queue.waiterCount(); n != 0 {
					t.Errorf("%d waiters left after cancellation", n)
				}
				return
			}
			if o.err != nil || !strings.HasPrefix(o.text, tt.wantText) {
				t.Errorf("events_wait = %q, %v; want %q", o.text, o.err, tt.wantText)
			}
		})
	}
}
