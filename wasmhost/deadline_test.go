package wasmhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeClock simulates the CPU time of the guest's thread: the n-th read
// (1-based) returns cpu[n-1], the last value repeating. A thread whose CPU
// time stays flat while the timer keeps firing is a starved thread.
type fakeClock struct {
	cpu      []time.Duration
	noSelf   bool // self reports no thread clock
	noThread bool // thread reads fail

	mu    sync.Mutex
	reads int
}

func (c *fakeClock) self() (int, bool) { return 42, !c.noSelf }

func (c *fakeClock) thread(tid int) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tid != 42 {
		panic(fmt.Sprintf("thread(%d): not the tid self returned", tid))
	}
	c.reads++
	if c.noThread {
		return 0, false
	}
	return c.cpu[min(c.reads, len(c.cpu))-1], true
}

func (c *fakeClock) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

const ms = time.Millisecond

func TestDeadline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		clock      *fakeClock
		limit, cap time.Duration
		want       DeadlineError
		wantReads  int // 0: at least 3 (the baseline, then re-arms)
	}{
		{"spinning guest: CPU keeps up with wall time",
			&fakeClock{cpu: []time.Duration{1 * ms, 11 * ms}}, 10 * ms, time.Hour,
			DeadlineError{Limit: 10 * ms, Cap: time.Hour, CPU: 10 * ms}, 2},
		{"starved guest: no interrupt until the thread has used the limit",
			&fakeClock{cpu: []time.Duration{0, 0, 0, 2 * ms, 6 * ms, 10 * ms}}, 10 * ms, time.Hour,
			DeadlineError{Limit: 10 * ms, Cap: time.Hour, CPU: 10 * ms}, 6},
		{"starved for ever: the wall-clock cap interrupts",
			&fakeClock{cpu: []time.Duration{5 * ms, 8 * ms}}, 5 * ms, 300 * ms,
			DeadlineError{Limit: 5 * ms, Cap: 300 * ms, CPU: 3 * ms, WallCap: true}, 0},
		{"no thread clock: wall time",
			&fakeClock{noSelf: true}, 5 * ms, time.Hour,
			DeadlineError{Limit: 5 * ms, Cap: time.Hour, NoCPUClock: true}, 0},
		{"clock fails at the baseline: wall time",
			&fakeClock{noThread: true}, 5 * ms, time.Hour,
			DeadlineError{Limit: 5 * ms, Cap: time.Hour, NoCPUClock: true}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, d := startDeadline(context.Background(), tt.limit, tt.cap, tt.clock)
			<-ctx.Done()
			cause := context.Cause(ctx)
			d.Stop()
			var got *DeadlineError
			if !errors.As(cause, &got) {
				t.Fatalf("cause = %v, want a *DeadlineError", cause)
			}
			if *got != tt.want {
				t.Errorf("cause = %+v, want %+v", *got, tt.want)
			}
			reads := tt.clock.count()
			if tt.wantReads == 0 && tt.clock.noSelf {
				if reads != 0 {
					t.Errorf("%d clock reads without a thread clock", reads)
				}
			} else if tt.wantReads == 0 && reads < 2 {
				// How many checks fit before the cap depends on how often
				// a loaded machine runs the checker: at least one does.
				t.Errorf("%d clock reads, want the baseline and at least one check", reads)
			} else if tt.wantReads != 0 && reads != tt.wantReads {
				t.Errorf("%d clock reads, want %d", reads, tt.wantReads)
			}
		})
	}
}

// TestDeadlineRestart: a Deadline an instance keeps for its calls bounds
// each one afresh: a call stopped at once is not interrupted, the next one
// that spins is, after its own baseline, and the one after that starts
// clean again.
func TestDeadlineRestart(t *testing.T) {
	t.Parallel()
	var d Deadline
	quiet := &fakeClock{cpu: []time.Duration{0}}
	ctx := d.restart(context.Background(), time.Hour, time.Hour, quiet)
	d.Stop()
	if cause := context.Cause(ctx); cause != context.Canceled {
		t.Fatalf("a call stopped at once ended with %v, want context.Canceled", cause)
	}
	spin := &fakeClock{cpu: []time.Duration{1 * ms, 11 * ms}}
	ctx = d.restart(context.Background(), 10*ms, time.Hour, spin)
	<-ctx.Done()
	d.Stop()
	var got *DeadlineError
	if !errors.As(context.Cause(ctx), &got) || *got != (DeadlineError{Limit: 10 * ms, Cap: time.Hour, CPU: 10 * ms}) || spin.count() != 2 {
		t.Fatalf("the spinning call ended with %v after %d clock reads, want a 10ms CPU deadline after 2", context.Cause(ctx), spin.count())
	}
	ctx = d.restart(context.Background(), time.Hour, time.Hour, quiet)
	if ctx.Err() != nil || d.based || d.checks != 0 {
		t.Fatalf("restarted: err %v, based %v, checks %d: state of the previous call kept", ctx.Err(), d.based, d.checks)
	}
	d.Stop()
}

func TestDeadlineMessages(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  DeadlineError
		want string
	}{
		{DeadlineError{Limit: 100 * ms, Cap: 2 * time.Second, CPU: 100 * ms}, "deadline of 100ms exceeded"},
		{DeadlineError{Limit: 100 * ms, NoCPUClock: true}, "deadline of 100ms exceeded"},
		{DeadlineError{Limit: 100 * ms, Cap: 2 * time.Second, CPU: 3*ms + 1234, WallCap: true},
			"wall-clock cap of 2s exceeded (the guest's thread ran 3.001ms of its 100ms CPU deadline)"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestDeadlineStop(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{cpu: []time.Duration{0}}
	ctx, d := startDeadline(context.Background(), time.Hour, 0, clock)
	d.Stop()
	<-ctx.Done()
	if cause := context.Cause(ctx); cause != context.Canceled {
		t.Errorf("cause after Stop = %v, want context.Canceled", cause)
	}
	if n := clock.count(); n != 0 {
		t.Errorf("%d clock reads after Stop", n)
	}
	if d.cap != 10*time.Hour {
		t.Errorf("cap = %v, want WallCap(1h) = 10h", d.cap)
	}
}

func TestWallCapAndGrace(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ limit, cap, grace time.Duration }{
		{100 * ms, 2 * time.Second, 10 * ms},
		{20 * ms, 2 * time.Second, 2 * ms},
		{time.Second, 10 * time.Second, 100 * ms},
		{5 * ms, 2 * time.Second, 1 * ms},
		{500 * time.Microsecond, 2 * time.Second, 500 * time.Microsecond},
	} {
		if got := WallCap(tt.limit); got != tt.cap {
			t.Errorf("WallCap(%v) = %v, want %v", tt.limit, got, tt.cap)
		}
		if got := Grace(tt.limit); got != tt.grace {
			t.Errorf("Grace(%v) = %v, want %v", tt.limit, got, tt.grace)
		}
	}
}

// TestSystemThreadClock checks the real clock: a sleeping thread is not
// charged, a spinning one is, and another thread reads the same time as
// the kernel's schedstat.
func TestSystemThreadClock(t *testing.T) {
	t.Parallel()
	if systemClock == nil {
		t.Skip("no thread CPU clock on " + runtime.GOOS + ": deadlines are wall time")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid, ok := systemClock.self()
	if !ok {
		t.Fatal("self: no thread clock")
	}
	c0, ok := systemClock.thread(tid)
	if !ok || c0 <= 0 {
		t.Fatalf("thread(%d) = %v, %v", tid, c0, ok)
	}
	time.Sleep(50 * ms)
	c1, _ := systemClock.thread(tid)
	if c1-c0 >= 50*ms {
		t.Errorf("a thread asleep for 50ms was charged %v of CPU", c1-c0)
	}
	for {
		c, _ := systemClock.thread(tid)
		if c-c1 >= 5*ms {
			break
		}
	}
	var other time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		other, ok = systemClock.thread(tid)
	}()
	<-done
	if !ok || other < c1+5*ms {
		t.Errorf("read from another thread: %v, %v; want at least %v", other, ok, c1+5*ms)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := bytes.Cut(bytes.TrimSpace(b), []byte(" "))
	sched, err := strconv.ParseInt(string(first), 10, 64)
	if err != nil {
		t.Fatalf("schedstat %q: %v", b, err)
	}
	c2, _ := systemClock.thread(tid)
	if time.Duration(sched) < other || time.Duration(sched) > c2 {
		t.Errorf("schedstat %v, want between the clock reads %v and %v", time.Duration(sched), other, c2)
	}
}

func loadInternal(t *testing.T, name string, opts Options) *Module {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join("..", "guests", "testdata", name+".wasm"))
	if err != nil {
		t.Fatalf("reading fixture (run guests/build.sh): %v", err)
	}
	opts.InitTimeout, opts.PoolSize = time.Minute, 1
	m, err := Load(context.Background(), name, wasm, &opts)
	if err != nil {
		t.Fatalf("Load(%s): %v", name, err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// TestStarvedGuest runs a real spinning guest under a simulated starved
// thread: it is interrupted once the clock says it has had its CPU time,
// or by the wall-clock cap if it never does, with the message saying which.
func TestStarvedGuest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		clock     *fakeClock
		cap       time.Duration
		want      string
		wantReads int // 0: at least 3
	}{
		{"CPU deadline after starvation", &fakeClock{cpu: []time.Duration{0, 0, 0, 20 * ms}}, time.Hour,
			`wasm module "hostile": before_tool_call: deadline of 20ms exceeded`, 4},
		{"wall-clock cap", &fakeClock{cpu: []time.Duration{0}}, 200 * ms,
			`wasm module "hostile": before_tool_call: wall-clock cap of 200ms exceeded (the guest's thread ran 0s of its 20ms CPU deadline)`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := loadInternal(t, "hostile", Options{CallTimeout: 20 * ms, clock: tt.clock, wallCap: tt.cap})
			_, err := m.CallBytes(context.Background(), "before_tool_call", []byte("hostile_loop"))
			if !errors.Is(err, ErrTimeout) || err.Error() != tt.want {
				t.Fatalf("err = %v, want %v: %q", err, ErrTimeout, tt.want)
			}
			reads := tt.clock.count()
			if (tt.wantReads != 0 && reads != tt.wantReads) || (tt.wantReads == 0 && reads < 3) {
				t.Errorf("%d clock reads, want %d (0: at least 3)", reads, tt.wantReads)
			}
			out, err := m.CallBytes(context.Background(), "before_tool_call", []byte("hostile_echo x"))
			if err != nil || string(out) != "hostile_echo x" {
				t.Fatalf("next call = %q, %v", out, err)
			}
		})
	}
}
