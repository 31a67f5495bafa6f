package runtime

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/testkit"
)

// backdate makes the server's connection failure ListRetryDelay older, as
// if that time had passed, without sleeping.
func backdate(s *Session, server string) {
	c := s.set.Load().byKey[server]
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	if at, ok := s.connFailed[c]; ok {
		s.connFailed[c] = at.Add(-ListRetryDelay)
	}
}

// awaitRetries waits for the connection retries in flight to end.
func awaitRetries(s *Session) {
	for {
		s.retryMu.Lock()
		var done chan struct{}
		for _, ch := range s.retrying {
			done = ch
			break
		}
		s.retryMu.Unlock()
		if done == nil {
			return
		}
		<-done
	}
}

// retryInFlight reports whether server's connection retry is running.
func retryInFlight(s *Session, server string) bool {
	c := s.set.Load().byKey[server]
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	return s.retrying[c] != nil
}

func TestCatalogRetryAfterConnectFailure(t *testing.T) {
	t.Parallel()
	srv := newServer("flaky", nil)
	echoTool(srv, "ping")
	ft := &testkit.Restartable{T: t, Server: srv, Fails: 2}
	ev := newEvents()
	s := open(t, []Server{
		{Name: "flaky", Transport: ft},
		// A resolution failure is a config error: never retried.
		{Name: "bad", Entry: config.ServerEntry{URL: "ftp://example.invalid/mcp"}},
	}, &Options{OnEvent: ev.on})
	ev.wait(t, EventFailed, "flaky")
	ctx := context.Background()

	// Used again and again within the delay: no new attempt (no busy loop).
	for range 3 {
		if got := toolNames(t, s); len(got) != 0 {
			t.Fatalf("catalog = %v, want empty", got)
		}
	}
	if n := ft.Attempts(); n != 1 {
		t.Fatalf("%d connection attempts before the retry delay, want 1", n)
	}
	if _, err := s.CallTool(ctx, "flaky__ping", nil); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("call before the retry: %v", err)
	}

	// The delay passes: the next use starts a retry in the background,
	// which fails again.
	backdate(s, "flaky")
	if got := toolNames(t, s); len(got) != 0 {
		t.Fatalf("catalog = %v, want empty", got)
	}
	ev.wait(t, EventRetrying, "flaky")
	ev.wait(t, EventFailed, "flaky")
	awaitRetries(s)
	toolNames(t, s)
	if n := ft.Attempts(); n != 2 {
		t.Fatalf("%d connection attempts, want 2 (one retry per delay)", n)
	}

	// The next retry connects: the tools appear on the next use and can be
	// called.
	backdate(s, "flaky")
	toolNames(t, s)
	ev.wait(t, EventRetrying, "flaky")
	ev.wait(t, EventConnected, "flaky")
	awaitRetries(s)
	if got, want := toolNames(t, s), []string{"flaky__ping"}; !slices.Equal(got, want) {
		t.Fatalf("catalog = %v, want %v", got, want)
	}
	res, err := s.CallTool(ctx, "flaky__ping", []byte(`{}`))
	if err != nil || resultText(t, res) != "ping: {}" {
		t.Fatalf("call after the retry: %v %v", res, err)
	}
	for _, d := range s.Diagnostics() {
		var se *ServerError
		if errors.As(d, &se) && se.Server == "flaky" {
			t.Errorf("diagnostic left after the retry connected: %v", d)
		}
	}
	if at := s.retryAt(s.set.Load().byKey["bad"]); !at.IsZero() {
		t.Errorf("a server that failed to resolve is scheduled for a retry at %v", at)
	}
	if n := ft.Attempts(); n != 3 {
		t.Errorf("%d connection attempts, want 3", n)
	}
}
