package ratelimit_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/policies/ratelimit"
)

func newLimiter(t *testing.T, audit policies.AuditSink, limits ...config.PolicyRateLimit) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(limits, ratelimit.NewMemoryStore(), audit)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func callBy(subject, tool, server string) *policies.ToolCall {
	c := &policies.ToolCall{Surface: policies.SurfaceProxy, Tool: policies.ToolRef{Name: tool, Server: server}}
	if subject != "" {
		c.Identity = &policies.Identity{Issuer: "https://issuer.test", Subject: subject}
	}
	return c
}

// limitError returns err as a *policies.LimitError, failing otherwise.
func limitError(t *testing.T, err error) *policies.LimitError {
	t.Helper()
	var le *policies.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, want a *policies.LimitError", err)
	}
	return le
}

// A third call in a window of two is refused with the limit's name and
// the seconds left in the window; the window's end admits calls again.
func TestRequestsPerWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		audit := &policiestest.AuditRecorder{}
		l := newLimiter(t, audit, config.PolicyRateLimit{Name: "per-agent", Requests: 2, IntervalS: 60})
		ctx := context.Background()
		for i := range 2 {
			release, err := l.Acquire(ctx, callBy("alice", "docs__search", "docs"))
			if err != nil {
				t.Fatalf("call %d: %v", i+1, err)
			}
			release()
		}
		time.Sleep(20 * time.Second) // the fake clock of the bubble
		_, err := l.Acquire(ctx, callBy("alice", "docs__search", "docs"))
		le := limitError(t, err)
		if le.Limit != "per-agent" || le.Kind != policies.LimitRequests || le.RetryAfter != 40*time.Second {
			t.Errorf("refusal %+v: want per-agent, requests, retry after 40 s", le)
		}
		if want := `rate limit "per-agent" reached: at most 2 calls per 60 s; retry after 40 s`; err.Error() != want {
			t.Errorf("message %q, want %q", err.Error(), want)
		}
		// Bob has counters of his own.
		if _, err := l.Acquire(ctx, callBy("bob", "docs__search", "docs")); err != nil {
			t.Errorf("bob: %v, want admitted", err)
		}
		time.Sleep(40 * time.Second)
		if _, err := l.Acquire(ctx, callBy("alice", "docs__search", "docs")); err != nil {
			t.Errorf("alice after the window: %v, want admitted", err)
		}
		recs := audit.Records()
		if len(recs) != 1 {
			t.Fatalf("audit records %+v: want the one refusal", recs)
		}
		r := recs[0]
		if r.Hook != policies.HookRateLimit || r.Module != "per-agent" || r.Decision != "block" || r.Subject != "alice" ||
			r.Tool != "docs__search" || r.Server != "docs" || !strings.Contains(r.Reason, "retry after 40 s") {
			t.Errorf("audit record %+v: want rate_limit/per-agent block of alice's docs__search with the retry", r)
		}
	})
}

// Without an Identity, the requester key separates callers.
func TestRequesterKeyWithoutIdentity(t *testing.T) {
	l := newLimiter(t, nil, config.PolicyRateLimit{Name: "one", Requests: 1, IntervalS: 10})
	a := &policies.ToolCall{SessionKey: "agent:a", Tool: policies.ToolRef{Name: "t"}}
	b := &policies.ToolCall{SessionKey: "agent:b", Tool: policies.ToolRef{Name: "t"}}
	ctx := context.Background()
	if _, err := l.Acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, a); err == nil {
		t.Error("second call of agent:a admitted, want refused")
	}
	if _, err := l.Acquire(ctx, b); err != nil {
		t.Errorf("agent:b: %v, want admitted", err)
	}
}

// A concurrent slot is held until release; a refusal gives back the
// counters it took in earlier limits.
func TestConcurrentAndGiveBack(t *testing.T) {
	l := newLimiter(t, nil,
		config.PolicyRateLimit{Name: "burst", Requests: 10, IntervalS: 60},
		config.PolicyRateLimit{Name: "docs-slots", Server: "docs", Per: []string{"server"}, Concurrent: 1})
	ctx := context.Background()
	release, err := l.Acquire(ctx, callBy("alice", "docs__search", "docs"))
	if err != nil {
		t.Fatal(err)
	}
	for range 20 { // would exhaust "burst" if refusals counted
		_, err := l.Acquire(ctx, callBy("bob", "docs__search", "docs"))
		le := limitError(t, err)
		if le.Limit != "docs-slots" || le.Kind != policies.LimitConcurrent || le.RetryAfter != time.Second {
			t.Fatalf("refusal %+v: want docs-slots, concurrent, 1 s", le)
		}
	}
	if _, err := l.Acquire(ctx, callBy("bob", "web__fetch", "web")); err != nil {
		t.Errorf("another server: %v, want admitted", err)
	}
	release()
	if _, err := l.Acquire(ctx, callBy("bob", "docs__search", "docs")); err != nil {
		t.Errorf("after the release: %v, want admitted (refusals must not have spent burst)", err)
	}
}

// Tool patterns are OpenClaw's *-only globs.
func TestToolPattern(t *testing.T) {
	l := newLimiter(t, nil, config.PolicyRateLimit{Name: "deploys", Tool: "prod__deploy*", Per: []string{"all"}, Requests: 1, IntervalS: 3600})
	ctx := context.Background()
	if _, err := l.Acquire(ctx, callBy("alice", "prod__deploy_app", "prod")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, callBy("bob", "prod__deploy_db", "prod")); err == nil {
		t.Error("bob's deploy admitted: per all shares one counter")
	}
	if _, err := l.Acquire(ctx, callBy("bob", "prod__status", "prod")); err != nil {
		t.Errorf("prod__status: %v, want admitted (the pattern does not match)", err)
	}
}

type failingStore struct{ ratelimit.Store }

func (failingStore) Take(context.Context, string, int64, time.Duration) (bool, time.Time, error) {
	return false, time.Time{}, errors.New("store down")
}

// A store that fails refuses the call (fail closed), naming the limit.
func TestStoreFailureRefuses(t *testing.T) {
	audit := &policiestest.AuditRecorder{}
	l, err := ratelimit.New([]config.PolicyRateLimit{{Name: "x", Concurrent: 3}}, failingStore{}, audit)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Acquire(context.Background(), callBy("alice", "t", ""))
	le := limitError(t, err)
	if le.Kind != policies.LimitStore || !strings.Contains(err.Error(), "store down") {
		t.Errorf("refusal %v: want the store's error", err)
	}
	if r := audit.Find("x"); r == nil || r.Error != "store down" {
		t.Errorf("audit %+v: want the store's error", r)
	}
}

// A limit that config would refuse is refused by New too.
func TestNewRefusesBadLimit(t *testing.T) {
	_, err := ratelimit.New([]config.PolicyRateLimit{{Name: "x", Requests: 5}}, ratelimit.NewMemoryStore(), nil)
	if err == nil || !strings.Contains(err.Error(), "interval_s") {
		t.Errorf("err = %v, want interval_s named", err)
	}
}

// BenchmarkAcquire is the limiter alone under its limits: one
// requests-per-window and one concurrent-calls limit per identity, from
// parallel goroutines of 8 identities.
func BenchmarkAcquire(b *testing.B) {
	l, err := ratelimit.New([]config.PolicyRateLimit{{Name: "per-agent", Requests: 1 << 40, IntervalS: 60, Concurrent: 1 << 20}},
		ratelimit.NewMemoryStore(), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var n atomicInt
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		call := callBy(string(rune('a'+n.next()%8)), "docs__search", "docs")
		for pb.Next() {
			release, err := l.Acquire(ctx, call)
			if err != nil {
				b.Fatal(err)
			}
			release()
		}
	})
}

type atomicInt struct{ v atomic.Int64 }

func (a *atomicInt) next() int64 { return a.v.Add(1) }

// batchStore is a BatchStore over a MemoryStore that counts TakeAll and
// Take calls.
type batchStore struct {
	*ratelimit.MemoryStore
	batches, takes atomic.Int32
}

func (b *batchStore) Take(ctx context.Context, key string, max int64, ttl time.Duration) (bool, time.Time, error) {
	b.takes.Add(1)
	return b.MemoryStore.Take(ctx, key, max, ttl)
}

func (b *batchStore) TakeAll(ctx context.Context, takes []ratelimit.Take) (int, time.Time, error) {
	b.batches.Add(1)
	for i, tk := range takes {
		ok, exp, err := b.MemoryStore.Take(ctx, tk.Key, tk.Max, tk.TTL)
		if err != nil || !ok {
			for _, done := range takes[:i] {
				_ = b.MemoryStore.Release(ctx, done.Key)
			}
			return i, exp, err
		}
	}
	return -1, time.Time{}, nil
}

// Over a BatchStore a call's counters are taken in one TakeAll; a
// refusal names the limit and kind of the counter at its bound, and
// takes nothing from the others.
func TestBatchStore(t *testing.T) {
	t.Parallel()
	store := &batchStore{MemoryStore: ratelimit.NewMemoryStore()}
	l, err := ratelimit.New([]config.PolicyRateLimit{
		{Name: "per-agent", Requests: 3, IntervalS: 60},
		{Name: "slots", Concurrent: 1},
	}, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	release, err := l.Acquire(ctx, callBy("alice", "docs__search", "docs"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Acquire(ctx, callBy("alice", "docs__search", "docs"))
	if le := limitError(t, err); le.Limit != "slots" || le.Kind != policies.LimitConcurrent {
		t.Fatalf("second call while the first holds the slot: %v", err)
	}
	release()
	if _, err := l.Acquire(ctx, callBy("alice", "docs__search", "docs")); err != nil {
		t.Fatalf("third call: %v (the refused second call must have taken no request)", err)
	}
	if b, n := store.batches.Load(), store.takes.Load(); b != 3 || n != 0 {
		t.Fatalf("%d TakeAll and %d Take calls for 3 calls, want 3 and 0", b, n)
	}
}
