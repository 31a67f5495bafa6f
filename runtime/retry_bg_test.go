package runtime

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/openclaw-go/openclaw/internal/testkit"
)

// drain returns the kinds of the events of server received so far.
func (e *events) drain(server string) []EventKind {
	var out []EventKind
	for {
		select {
		case ev := <-e.ch:
			if ev.Server == server {
				out = append(out, ev.Kind)
			}
		default:
			return out
		}
	}
}

// A server that is down is retried in the background on its own schedule,
// without any use of the session: 5 s after the failure, then with a
// doubling delay (bounded by RetryBackoffMax); when it comes up it joins
// (EventConnected, then its tools), when it dies it leaves (EventFailed);
// Close stops the retries.
func TestBackgroundRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer("late", nil)
		echoTool(srv, "ping")
		rt := &testkit.Restartable{T: t, Server: srv, Refuse: true}
		ev := newEvents()
		s := open(t, []Server{{Name: "late", Transport: rt}}, &Options{OnEvent: ev.on})
		if got := ev.drain("late"); !slices.Equal(got, []EventKind{EventFailed}) {
			t.Fatalf("events after Connect = %v, want [failed]", got)
		}
		step := func(d time.Duration) {
			time.Sleep(d)
			synctest.Wait()
		}
		// Attempts at 5 s, then 10 s and 20 s later: nothing uses the session.
		for i, d := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second} {
			step(d - time.Millisecond)
			if n := rt.Attempts(); n != i+1 {
				t.Fatalf("%d attempts %v before retry %d, want %d", n, d, i+1, i+1)
			}
			step(time.Millisecond)
			if n := rt.Attempts(); n != i+2 {
				t.Fatalf("%d attempts at retry %d, want %d", n, i+1, i+2)
			}
			if got := ev.drain("late"); !slices.Equal(got, []EventKind{EventRetrying, EventFailed}) {
				t.Fatalf("events of retry %d = %v, want [retrying failed]", i+1, got)
			}
		}
		// The server comes up: the next retry (40 s later) connects it.
		rt.Up()
		step(40 * time.Second)
		if got := ev.drain("late"); !slices.Equal(got, []EventKind{EventRetrying, EventConnected}) {
			t.Fatalf("events when the server came up = %v, want [retrying connected]", got)
		}
		if got := toolNames(t, s); !slices.Equal(got, []string{"late__ping"}) {
			t.Fatalf("catalog = %v", got)
		}
		// It dies: it leaves at once and is retried 5 s later (the count
		// starts again).
		rt.Kill()
		synctest.Wait()
		if got := ev.drain("late"); !slices.Equal(got, []EventKind{EventFailed}) {
			t.Fatalf("events when the server died = %v, want [failed]", got)
		}
		n := rt.Attempts()
		step(5 * time.Second)
		if rt.Attempts() != n+1 {
			t.Fatalf("%d attempts 5 s after the server died, want %d", rt.Attempts(), n+1)
		}
		ev.drain("late")
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		n = rt.Attempts()
		step(time.Hour)
		if rt.Attempts() != n {
			t.Errorf("%d attempts after Close, want %d", rt.Attempts(), n)
		}
	})
}

func TestRetryBackoff(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 4: 40 * time.Second, 7: RetryBackoffMax, 1000: RetryBackoffMax} {
		if got := retryBackoff(n); got != want {
			t.Errorf("retryBackoff(%d) = %v, want %v", n, got, want)
		}
	}
}

// A server whose listing failed is listed again in the background (5 s
// later, then with the backoff): when it succeeds, EventToolsChanged
// tells the embedder (and the proxy's Relay) without any use.
func TestBackgroundRelistAfterAFailedListing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sv := scriptPeer(t, "b", []scriptTool{{"t", ""}}, scriptHooks{list: func(_ context.Context, n int) *jsonrpc.Error {
			if n <= 2 {
				return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "warming up"}
			}
			return nil
		}})
		ev := newEvents()
		s := open(t, []Server{sv}, &Options{OnEvent: ev.on})
		if got := ev.drain("b"); !slices.Equal(got, []EventKind{EventConnected, EventFailed}) {
			t.Fatalf("events after Connect = %v, want [connected failed]", got)
		}
		time.Sleep(ListRetryDelay)
		synctest.Wait()
		if got := ev.drain("b"); !slices.Equal(got, []EventKind{EventFailed}) {
			t.Fatalf("events of the first background listing = %v, want [failed]", got)
		}
		time.Sleep(retryBackoff(2))
		synctest.Wait()
		if got := ev.drain("b"); !slices.Equal(got, []EventKind{EventToolsChanged}) {
			t.Fatalf("events of the second background listing = %v, want [tools_changed]", got)
		}
		if got := toolNames(t, s); !slices.Equal(got, []string{"b__t"}) {
			t.Fatalf("catalog = %v", got)
		}
		if d := s.Diagnostics(); len(d) != 0 {
			t.Errorf("diagnostics %v after the listing succeeded", d)
		}
	})
}
