package wasmhost_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/wasmhost"
)

// BenchmarkCallBytes is the host's own cost of one byte call: the guest
// (guests/testdata/allow.wat) answers a fixed verdict without a loop, with
// interruption on (close-on-done and the call deadline).
func BenchmarkCallBytes(b *testing.B) {
	m := load(b, "allow", &wasmhost.Options{})
	in := []byte(`{"abi":1,"tool":{"name":"t"}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.CallBytes(ctx, "before_tool_call", in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallBytesStarved calls the guest while 40 goroutines spin on
// the same Ps: a call preempted mid-guest waits for 20 scheduler time
// slices (about 200 ms) before it runs again, as under the issue-5 load.
// It reports how many calls failed with ErrTimeout per 10,000 against a
// 20 ms deadline: with a wall-clock deadline every preemption inside the
// guest was a failure; with the CPU-time deadline there should be none.
func BenchmarkCallBytesStarved(b *testing.B) {
	m := load(b, "allow", &wasmhost.Options{CallTimeout: 20 * time.Millisecond})
	in := []byte(`{"abi":1,"tool":{"name":"t"}}`)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var sink atomic.Uint64
	for range 40 {
		wg.Add(1)
		go spin(ctx, &wg, &sink)
	}
	timeouts := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, err := m.CallBytes(context.Background(), "before_tool_call", in)
		switch {
		case errors.Is(err, wasmhost.ErrTimeout):
			timeouts++
		case err != nil:
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cancel()
	wg.Wait()
	b.ReportMetric(float64(timeouts)*1e4/float64(b.N), "timeouts/10k")
}

// spin burns CPU until ctx is done.
func spin(ctx context.Context, wg *sync.WaitGroup, sink *atomic.Uint64) {
	defer wg.Done()
	x := uint64(1)
	for ctx.Err() == nil {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink.Add(x)
}
