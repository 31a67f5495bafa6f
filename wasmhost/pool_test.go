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

// countingPool is a pool of int instances that records creations and
// destructions.
type countingPool struct {
	created, destroyed atomic.Int64
	*wasmhost.Pool[int]
}

func newCountingPool(size int, fail error) *countingPool {
	c := &countingPool{}
	c.Pool = wasmhost.NewPool("m", size, func(context.Context) (int, error) {
		if fail != nil {
			return 0, fail
		}
		return int(c.created.Add(1)), nil
	}, func(int) { c.destroyed.Add(1) })
	return c
}

// TestPoolReusesAndDiscards: a released instance is reused; a discarded
// one is destroyed and replaced.
func TestPoolReusesAndDiscards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newCountingPool(1, nil)
	a, err := p.Acquire(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	p.Release(ctx, a, false)
	b, _ := p.Acquire(ctx, "f")
	if b != a {
		t.Fatalf("idle instance %d not reused (got %d)", a, b)
	}
	p.Release(ctx, b, true)
	c, _ := p.Acquire(ctx, "f")
	if c == b || p.destroyed.Load() != 1 {
		t.Fatalf("discarded instance reused or not destroyed: got %d, destroyed %d", c, p.destroyed.Load())
	}
	p.Release(ctx, c, false)
}

// TestPoolBound: no more than Size instances are in use at once.
func TestPoolBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newCountingPool(3, nil)
	var inUse, peak atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			inst, err := p.Acquire(ctx, "f")
			if err != nil {
				t.Error(err)
				return
			}
			n := inUse.Add(1)
			for {
				old := peak.Load()
				if n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			inUse.Add(-1)
			p.Release(ctx, inst, false)
		})
	}
	wg.Wait()
	if peak.Load() > 3 || p.created.Load() > 3 {
		t.Fatalf("peak in use %d, created %d; want ≤ 3", peak.Load(), p.created.Load())
	}
}

// TestPoolErrors: a full pool waits until the caller's deadline; a
// creation error frees the slot; after Shutdown every Acquire is refused.
func TestPoolErrors(t *testing.T) {
	t.Parallel()
	p := newCountingPool(1, nil)
	inst, _ := p.Acquire(context.Background(), "f")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	var e *wasmhost.Error
	if _, err := p.Acquire(ctx, "g"); !errors.As(err, &e) || e.Kind != wasmhost.KindTimeout || e.Export != "g" || e.Module != "m" {
		t.Fatalf("full pool: got %v, want a KindTimeout error for m.g", err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if _, err := p.Acquire(cctx, "g"); !errors.As(err, &e) || e.Kind != wasmhost.KindCanceled {
		t.Fatalf("cancelled: got %v, want KindCanceled", err)
	}
	p.Release(ctx, inst, false)

	boom := errors.New("boom")
	f := newCountingPool(1, boom)
	for range 3 { // the slot is freed after each failure: no deadlock
		if _, err := f.Acquire(context.Background(), "f"); !errors.Is(err, boom) {
			t.Fatalf("creation error: got %v, want boom", err)
		}
	}

	sctx, scancel := context.WithTimeout(context.Background(), time.Second)
	defer scancel()
	p.Shutdown(sctx)
	if !p.Closing() {
		t.Fatal("Closing false after Shutdown")
	}
	if _, err := p.Acquire(context.Background(), "f"); !errors.Is(err, wasmhost.ErrClosed) {
		t.Fatalf("after Shutdown: got %v, want ErrClosed", err)
	}
}
