package wasmhost

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// waitQueued returns once n callers of class wait for a slot.
func (p *Pool[T]) waitQueued(class, n int) {
	for {
		p.mu.Lock()
		got := len(p.waiters[class])
		p.mu.Unlock()
		if got == n {
			return
		}
		runtime.Gosched()
	}
}

// TestPoolServesGoodStandingFirst: a caller whose last call failed waits
// behind callers in good standing, and such callers together hold at most
// Size-1 slots, so one slot stays for the others.
func TestPoolServesGoodStandingFirst(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	p := NewPool("m", 2, func(context.Context) (int, error) { return int(n.Add(1)), nil }, func(int) {})
	bad := WithCaller(context.Background(), "mallory")
	bad2 := WithCaller(context.Background(), "trudy")
	good := WithCaller(context.Background(), "alice")
	for _, ctx := range []context.Context{bad, bad2} { // both fail once
		inst, err := p.Acquire(ctx, "f")
		if err != nil {
			t.Fatal(err)
		}
		p.Release(ctx, inst, true)
	}
	held, err := p.Acquire(bad, "f") // the suspects' one slot
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	got := func(who string) {
		mu.Lock()
		order = append(order, who)
		mu.Unlock()
	}
	// A second suspect waits although a slot is free...
	var wg sync.WaitGroup
	wg.Go(func() {
		inst, err := p.Acquire(bad2, "f")
		if err != nil {
			t.Error(err)
			return
		}
		got("trudy")
		p.Release(bad2, inst, false)
	})
	p.waitQueued(1, 1)
	// ...which a caller in good standing gets at once.
	g, err := p.Acquire(good, "f")
	if err != nil {
		t.Fatal(err)
	}
	// With both slots taken, a good caller queues after the suspect and
	// is still served first.
	wg.Go(func() {
		inst, err := p.Acquire(good, "f")
		if err != nil {
			t.Error(err)
			return
		}
		got("alice")
		p.Release(good, inst, false)
	})
	p.waitQueued(0, 1)
	p.Release(bad, held, false) // mallory's call succeeds: good standing again
	wg.Wait()
	p.Release(good, g, false)
	if len(order) != 2 || order[0] != "alice" {
		t.Fatalf("served %v, want alice before trudy", order)
	}
}

// TestPoolReplacesOffTheCallPath: releasing a failed instance returns at
// once while its replacement is still being created; the next caller
// waits for that replacement (it does not create another: the pool never
// holds more than Size instances) and gets it when it is ready.
func TestPoolReplacesOffTheCallPath(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	var created atomic.Int64
	p := NewPool("m", 1, func(context.Context) (int, error) {
		n := created.Add(1)
		if n > 1 {
			<-gate // the replacement waits for the test
		}
		return int(n), nil
	}, func(int) {})
	ctx := context.Background()
	a, err := p.Acquire(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	p.Release(ctx, a, true) // returns although the replacement is blocked
	got := make(chan int, 1)
	go func() {
		b, err := p.Acquire(ctx, "f")
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	for { // the caller waits for the replacement
		p.mu.Lock()
		waiting := len(p.instWait)
		p.mu.Unlock()
		if waiting == 1 {
			break
		}
		runtime.Gosched()
	}
	close(gate)
	if b := <-got; b != 2 || created.Load() != 2 {
		t.Fatalf("got instance %d after %d creations, want the replacement 2", b, created.Load())
	}
	p.Release(ctx, 2, false)
}

// TestPoolShutdownWaitsForDestroy: Shutdown returns only once every
// instance the pool destroys on its own (a replacement created while it
// closed, an instance released after it started) is destroyed, since the
// caller closes the wazero Runtime next and a module closed beside it is a
// data race in wazero.
func TestPoolShutdownWaitsForDestroy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		created := make(chan struct{}, 4)
		finishCreate := make(chan struct{})
		destroying := make(chan int, 4)
		finishDestroy := make(chan struct{})
		var n atomic.Int64
		create := func(context.Context) (int, error) {
			k := int(n.Add(1))
			if k > 1 { // the replacement of a discarded instance
				created <- struct{}{}
				<-finishCreate
			}
			return k, nil
		}
		destroy := func(k int) {
			if k > 1 {
				destroying <- k
				<-finishDestroy
			}
		}
		p := NewPool("m", 2, create, destroy)
		ctx := context.Background()
		first, err := p.Acquire(ctx, "f")
		if err != nil {
			t.Fatal(err)
		}
		p.Release(ctx, first, true) // discarded: a replacement is being created
		<-created
		down := make(chan struct{})
		go func() { p.Shutdown(ctx); close(down) }()
		synctest.Wait()
		close(finishCreate) // the replacement arrives after Shutdown began
		if k := <-destroying; k != 2 {
			t.Fatalf("destroyed instance %d, want the replacement", k)
		}
		synctest.Wait()
		select {
		case <-down:
			t.Fatal("Shutdown returned while the replacement was being destroyed")
		default:
		}
		close(finishDestroy)
		<-down
	})
}
