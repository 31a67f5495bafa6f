package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/engine"
)

// heapAfterGC returns the live heap after two collections.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// settledGoroutines waits (up to 30 s, a hang guard: a loaded machine may
// run them late) for goroutines that are ending, such as the closers of
// discarded instances, and returns the count.
func settledGoroutines(limit int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(30 * time.Second); n > limit && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}

// TestNoLeakOverFailingCalls runs the containment cases of
// guests/testdata/hostile.wat through the engine: 10,000 calls of the
// fast-failing cases (trap, out-of-range result pointer, invalid JSON,
// unknown decision, zero result) and 100 calls that run into their
// deadline. Each is a block naming the module, each failed instance is
// discarded, and neither goroutines nor the live heap grow. Not parallel:
// it measures the whole process.
func TestNoLeakOverFailingCalls(t *testing.T) {
	fast, slow := 10_000, 100
	if testing.Short() {
		fast, slow = 1000, 10
	}
	dir := t.TempDir()
	writeFile(t, dir, "hostile.wasm", fixture(t, "hostile"))
	pf := writeFile(t, dir, "policy.json", []byte(`{"modules":[{"source":"hostile.wasm","timeout_ms":2000}]}`))
	audit := &counter{}
	e, _ := load(t, engine.Options{ConfigFile: pf, Audit: audit})
	ctx := context.Background()
	markers := []struct{ marker, reason string }{
		{"hostile_trap", "unreachable"},
		{"hostile_oob", "is outside memory"},
		{"hostile_badjson", "invalid verdict"},
		{"hostile_unknown", `unknown decision "maybe"`},
		{"hostile_zero", "returned 0"},
	}
	run := func(n int) {
		for i := range n {
			m := markers[i%len(markers)]
			d := e.BeforeToolCall(ctx, call(m.marker))
			if d.Decision != policies.Block || d.Module != "hostile" || !strings.Contains(d.Reason, m.reason) {
				t.Fatalf("call %d (%s): %+v, want a block naming the module and %q", i, m.marker, d, m.reason)
			}
		}
	}
	run(500) // warm up: pools, caches, lazily built runtime state
	g0, h0 := runtime.NumGoroutine(), heapAfterGC()
	run(fast)
	// The spinning calls run into the caller's 5 ms deadline (the module's
	// own is long, so that the fast cases never reach it on a busy machine).
	for i := range slow {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		d := e.BeforeToolCall(cctx, call("hostile_loop"))
		cancel()
		if d.Decision != policies.Block || d.Module != "hostile" || !strings.Contains(d.Reason, "deadline exceeded") {
			t.Fatalf("deadline call %d: %+v", i, d)
		}
	}
	if d := e.BeforeToolCall(ctx, call("")); d.Decision != policies.Allow {
		t.Fatalf("after the failures the host no longer serves: %+v", d)
	}
	g1 := settledGoroutines(g0 + 2)
	h1 := heapAfterGC()
	t.Logf("goroutines %d -> %d; live heap %s -> %s over %d fast-failing and %d deadline calls",
		g0, g1, mib(h0), mib(h1), fast, slow)
	if want := int64(500 + fast + slow + 1); audit.n.Load() != want {
		t.Errorf("audit records = %d, want one per call (%d)", audit.n.Load(), want)
	}
	if g1 > g0+2 {
		t.Errorf("goroutines grew from %d to %d", g0, g1)
	}
	// One leaked instance would be at least its 64 KiB memory, 10,000 of
	// them 640 MiB; even 100 bytes a call would be 1 MiB.
	if h1 > h0+1<<20 {
		t.Errorf("live heap grew from %s to %s", mib(h0), mib(h1))
	}
}

// counter is an audit sink that keeps no records, so that the heap
// measures the engine alone.
type counter struct{ n atomic.Int64 }

func (c *counter) Record(policies.AuditRecord) { c.n.Add(1) }

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
