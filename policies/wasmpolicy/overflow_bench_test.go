package wasmpolicy

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/internal/procfs"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// rssMiB returns the process's resident set size, in MiB (Linux).
func rssMiB(b *testing.B) float64 {
	kib, _, ok := procfs.Status(0)
	if !ok {
		b.Skip("no /proc/self/status")
	}
	return float64(kib) / 1024
}

// BenchmarkStackOverflowRSS measures the host's memory around 8
// concurrent calls that exhaust the guest call stack (unbounded
// recursion, guests/testdata/extreme.wasm): RSS before (base-MiB), right
// after (after-MiB) and 10 s later (idle-MiB). Run it once:
//
//	go test -run '^$' -bench StackOverflowRSS -benchtime 1x ./policies/wasmpolicy/
func BenchmarkStackOverflowRSS(b *testing.B) {
	wasm, err := os.ReadFile("../../guests/testdata/extreme.wasm")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	m, err := Load(ctx, "extreme", wasm, nil, &Options{Host: wasmhost.Options{PoolSize: 8, CallTimeout: 10 * time.Second}})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(ctx)
	base := rssMiB(b)
	for b.Loop() {
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				v, err := m.BeforeToolCall(ctx, &policies.ToolCall{Surface: policies.SurfaceServe, SessionKey: "R", Tool: policies.ToolRef{Name: "t"}})
				if err == nil || v.Decision != policies.Block {
					b.Errorf("overflow: %+v, %v", v, err)
				}
			})
		}
		wg.Wait()
	}
	after := rssMiB(b)
	time.Sleep(10 * time.Second)
	b.ReportMetric(base, "base-MiB")
	b.ReportMetric(after, "after-MiB")
	b.ReportMetric(rssMiB(b), "idle-MiB")
}
