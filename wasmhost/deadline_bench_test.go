package wasmhost

import (
	"context"
	"testing"
	"time"
)

// BenchmarkDeadline is the host's cost of bounding one guest call:
// "cpu" is StartDeadline + Stop (thread lock, gettid, a cancelable context
// and a timer), "wall" the context.WithTimeout it replaced, "clock-read"
// one read of a thread's CPU time, paid only by calls still running after
// Grace (limit/10).
func BenchmarkDeadline(b *testing.B) {
	ctx := context.Background()
	b.Run("cpu", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, d := StartDeadline(ctx, time.Second)
			d.Stop()
		}
	})
	b.Run("wall", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, cancel := context.WithTimeout(ctx, time.Second)
			cancel()
		}
	})
	b.Run("clock-read", func(b *testing.B) {
		if systemClock == nil {
			b.Skip("no thread CPU clock")
		}
		tid, _ := systemClock.self()
		for b.Loop() {
			systemClock.thread(tid)
		}
	})
}
