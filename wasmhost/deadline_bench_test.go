package wasmhost

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkDeadline is the host's cost of bounding one guest call:
// "cpu" is StartDeadline + Stop (thread lock, gettid, a cancelable context
// and a timer), "cpu-reused" the same on the Deadline an instance keeps
// (its timer reset, not made), "wall" the context.WithTimeout it replaced, "clock-read"
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
	b.Run("cpu-reused", func(b *testing.B) {
		b.ReportAllocs()
		var d Deadline
		for b.Loop() {
			d.restart(ctx, time.Second, 0, nil)
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

// BenchmarkCallMachinery is what bounding a guest call costs inside one
// byte call (the allow guest's before_tool_call, which answers at once):
// "shipped" with wazero's close-on-done and the call Deadline, then
// without the Deadline, without close-on-done, and without either (a
// looping guest is never interrupted in the last three). The differences
// are the shares of each part.
func BenchmarkCallMachinery(b *testing.B) {
	wasm, err := os.ReadFile(filepath.Join("..", "guests", "testdata", "allow.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	in := []byte(`{"abi":1,"tool":{"name":"t"}}`)
	for _, bc := range []struct {
		name                    string
		noInterrupt, noDeadline bool
		clock                   threadClock
	}{
		{"shipped", false, false, nil},
		{"wall-deadline", false, false, &fakeClock{noSelf: true}},
		{"no-deadline", false, true, nil},
		{"no-close-on-done", true, false, nil},
		{"neither", true, true, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			m, err := Load(ctx, "allow", wasm, &Options{PoolSize: 1, noInterrupt: bc.noInterrupt, noDeadline: bc.noDeadline, clock: bc.clock})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = m.Close(ctx) })
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.CallBytes(ctx, "before_tool_call", in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
