package sharedstate_test

import (
	"context"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/proxy/sharedstate"
)

// subscribe runs s.Subscribe for the test and returns its events and
// resyncs.
func subscribe(t *testing.T, s *sharedstate.State) (events chan sharedstate.Event, resyncs chan struct{}) {
	t.Helper()
	events, resyncs = make(chan sharedstate.Event, 16), make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Subscribe(ctx, sharedstate.Subscriber{
			Event:  func(ev sharedstate.Event) { events <- ev },
			Resync: func() { resyncs <- struct{}{} },
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return events, resyncs
}

// publishUntil publishes kind from s until an event reaches events (a
// subscription is not there at once), and returns it.
func publishUntil(t *testing.T, s *sharedstate.State, kind string, events chan sharedstate.Event) sharedstate.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		_ = s.Publish(context.Background(), kind)
		select {
		case ev := <-events:
			return ev
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no %s event received", kind)
		}
	}
}

// TestEvents: an event published by replica A reaches B, not A itself;
// after a Redis restart B subscribes again by itself, resyncs (events
// may have been missed) and receives A's next event.
func TestEvents(t *testing.T) {
	t.Parallel()
	r := testkit.StartRedis(t)
	a, b := open(t, r.URL()), open(t, r.URL())
	aEvents, _ := subscribe(t, a)
	bEvents, bResyncs := subscribe(t, b)
	ev := publishUntil(t, a, sharedstate.EventReload, bEvents)
	if ev.Kind != sharedstate.EventReload || ev.Replica != a.Replica() || ev.V != sharedstate.RecordVersion {
		t.Fatalf("B received %+v", ev)
	}
	// B's own event reaches A, and B never hears itself.
	publishUntil(t, b, sharedstate.EventPolicy, aEvents)
	select {
	case ev := <-bEvents:
		if ev.Replica == b.Replica() {
			t.Fatalf("B received its own event %+v", ev)
		}
	default:
	}
	r.Stop()
	if err := a.Publish(context.Background(), sharedstate.EventReload); err == nil {
		t.Fatal("publish with Redis down succeeded")
	}
	r.Start()
	select {
	case <-bResyncs:
	case <-time.After(10 * time.Second):
		t.Fatal("B did not subscribe again after the Redis restart")
	}
	for len(bEvents) > 0 {
		<-bEvents
	}
	if ev := publishUntil(t, a, sharedstate.EventPolicy, bEvents); ev.Kind != sharedstate.EventPolicy {
		t.Fatalf("after the restart B received %+v", ev)
	}
}
