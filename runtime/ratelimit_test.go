package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/policies/ratelimit"
)

// A concurrent-calls limit of one per identity: alice's second call is
// refused (audited, before it reaches the server) while her first runs,
// bob's is not, and her slot comes back when the call completes, fails or
// is cancelled.
func TestRateLimitConcurrentCalls(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 1)
	unblock := make(chan struct{})
	calls := make(chan string, 64) // every call that reached the server
	srv := newServer("docs", nil)
	srv.AddTool(&mcp.Tool{Name: "wait", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls <- "wait"
			entered <- struct{}{}
			select {
			case <-unblock:
			case <-ctx.Done():
			}
			return textResult("done"), nil
		})
	srv.AddTool(&mcp.Tool{Name: "fail", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls <- "fail"
			return nil, errors.New("upstream broke")
		})
	echoTool(srv, "echo")
	web := newServer("web", nil) // a server of its own: an in-process server runs one request at a time
	echoTool(web, "echo")
	audit := &policiestest.AuditRecorder{}
	store := &releaseStore{Store: ratelimit.NewMemoryStore(), released: make(chan string, 64)}
	lim, err := ratelimit.New([]config.PolicyRateLimit{{Name: "one-at-a-time", Concurrent: 1}}, store, audit)
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, []Server{inProcess(t, "docs", srv), inProcess(t, "web", web)}, &Options{Limiter: lim, Audit: audit})
	alice := WithIdentity(context.Background(), &policies.Identity{Issuer: "https://idp.test", Subject: "alice"})
	bob := WithIdentity(context.Background(), &policies.Identity{Issuer: "https://idp.test", Subject: "bob"})

	// blockedCall runs docs__wait as alice until unblocked (or ctx ends)
	// and returns its outcome.
	blockedCall := func(ctx context.Context) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := s.CallTool(ctx, "docs__wait", nil)
			done <- err
		}()
		<-entered
		return done
	}
	refused := func(when string) {
		t.Helper()
		_, err := s.CallTool(alice, "docs__echo", []byte(`{}`))
		var le *policies.LimitError
		if !errors.As(err, &le) || le.Limit != "one-at-a-time" || le.Kind != policies.LimitConcurrent {
			t.Fatalf("%s: alice's second call: err = %v, want the one-at-a-time limit", when, err)
		}
		want := `rate limit "one-at-a-time" reached: at most 1 concurrent call; retry after 1 s (when a call in progress ends)`
		if err.Error() != want {
			t.Errorf("%s: message %q, want %q", when, err.Error(), want)
		}
	}
	admitted := func(when string, ctx context.Context, tool string) {
		t.Helper()
		if _, err := s.CallTool(ctx, tool, []byte(`{}`)); err != nil {
			t.Fatalf("%s: %v, want admitted", when, err)
		}
	}

	// Completion.
	done := blockedCall(alice)
	refused("while a call runs")
	admitted("bob while alice's call runs", bob, "web__echo")
	unblock <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	admitted("after completion", alice, "docs__echo")

	// Cancellation: the slot comes back once the server answered the
	// cancelled call too (its handler returns on the cancellation).
	ctx, cancel := context.WithCancel(alice)
	done = blockedCall(ctx)
	refused("while a call to be cancelled runs")
	for len(store.released) > 0 {
		<-store.released
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	<-store.released
	admitted("after cancellation", alice, "docs__echo")

	// Error.
	if res, err := s.CallTool(alice, "docs__fail", nil); err == nil && !res.IsError {
		t.Fatalf("docs__fail: %+v, want an error", res)
	}
	admitted("after an error", alice, "docs__echo")

	// The refusals never reached the server; each is audited.
	close(calls)
	var reached []string
	for c := range calls {
		reached = append(reached, c)
	}
	if len(reached) != 3 {
		t.Errorf("calls that reached the server: %v, want wait, wait, fail", reached)
	}
	var refusals int
	for _, r := range audit.Records() {
		if r.Hook == policies.HookRateLimit {
			refusals++
			if r.Module != "one-at-a-time" || r.Subject != "alice" || r.Tool != "docs__echo" || r.Server != "docs" || r.Decision != "block" {
				t.Errorf("audit record %+v: want alice's docs__echo blocked by one-at-a-time", r)
			}
		}
	}
	if refusals != 2 {
		t.Errorf("%d rate_limit records, want 2", refusals)
	}
}

// BenchmarkCallToolRateLimited measures what the rate limiter adds to a
// tools/call under its limits: two sessions on one in-process server,
// one with a requests-per-window and a concurrent-calls limit per
// identity (never reached) and one without, interleaved in one run; it
// reports both medians and their difference.
func BenchmarkCallToolRateLimited(b *testing.B) {
	ctx := WithIdentity(context.Background(), &policies.Identity{Issuer: "https://idp.test", Subject: "alice"})
	srv := newServer("bench", nil)
	echoTool(srv, "echo")
	lim, err := ratelimit.New([]config.PolicyRateLimit{
		{Name: "per-agent", Requests: 1 << 40, IntervalS: 60, Concurrent: 64},
		{Name: "deploys", Tool: "prod__deploy*", Per: []string{"all"}, Requests: 1, IntervalS: 3600},
	}, ratelimit.NewMemoryStore(), nil)
	if err != nil {
		b.Fatal(err)
	}
	plain := open(b, []Server{inProcess(b, "bench", srv)}, &Options{Enforcer: policiestest.AllowAll{}})
	limited := open(b, []Server{inProcess(b, "bench", srv)}, &Options{Enforcer: policiestest.AllowAll{}, Limiter: lim})
	args := []byte(`{"message":"hi"}`)
	pd := make([]time.Duration, 0, b.N)
	ld := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := plain.CallTool(ctx, "bench__echo", args); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := limited.CallTool(ctx, "bench__echo", args); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		pd = append(pd, t1.Sub(t0))
		ld = append(ld, t2.Sub(t1))
	}
	b.StopTimer()
	pm, lm := median(pd), median(ld)
	b.ReportMetric(float64(pm.Nanoseconds()), "unlimited-median-ns")
	b.ReportMetric(float64(lm.Nanoseconds()), "limited-median-ns")
	b.ReportMetric(float64((lm - pm).Nanoseconds()), "added-median-ns")
}

// releaseStore is a ratelimit.Store that says on released each time a
// slot or counter is given back.
type releaseStore struct {
	ratelimit.Store
	released chan string
}

func (s *releaseStore) Release(ctx context.Context, key string) error {
	err := s.Store.Release(ctx, key)
	s.released <- key
	return err
}

// A cancelled call keeps its concurrent-call slot while the server is
// still working on it: the slot comes back when the server's answer
// arrives (go-sdk servers answer a cancelled call once its handler
// returns), not when the caller gave up.
func TestRateLimitCancelledCallHoldsItsSlot(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 1)
	finish := make(chan struct{})
	var finishOnce sync.Once
	srv := newServer("docs", nil)
	srv.AddTool(&mcp.Tool{Name: "stubborn", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			entered <- struct{}{}
			<-finish // a server that goes on working after notifications/cancelled
			return textResult("finished anyway"), nil
		})
	web := newServer("web", nil)
	echoTool(web, "echo")
	store := &releaseStore{Store: ratelimit.NewMemoryStore(), released: make(chan string, 8)}
	lim, err := ratelimit.New([]config.PolicyRateLimit{{Name: "one-at-a-time", Per: []string{"all"}, Concurrent: 1}}, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, []Server{inProcess(t, "docs", srv), inProcess(t, "web", web)}, &Options{Limiter: lim})
	t.Cleanup(func() { finishOnce.Do(func() { close(finish) }) }) // before the session closes
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.CallTool(ctx, "docs__stubborn", nil)
		done <- err
	}()
	<-entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	_, err = s.CallTool(context.Background(), "web__echo", []byte(`{}`))
	var le *policies.LimitError
	if !errors.As(err, &le) || le.Kind != policies.LimitConcurrent {
		t.Fatalf("a call while the cancelled one still runs upstream: err = %v, want the one-at-a-time limit", err)
	}
	finishOnce.Do(func() { close(finish) })
	<-store.released // the server's late answer gave the slot back
	if _, err := s.CallTool(context.Background(), "web__echo", []byte(`{}`)); err != nil {
		t.Fatalf("after the server finished the cancelled call: %v, want admitted", err)
	}
}
