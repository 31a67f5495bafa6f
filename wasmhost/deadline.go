package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// MinRecheck is the shortest wait before a [Deadline] reads the guest
// thread's CPU time again after finding it under the limit.
const MinRecheck = time.Millisecond

// WallCap returns the wall-clock cap of a guest call whose CPU-time
// deadline is limit: max(10 × limit, 2 s). A guest starved of CPU for
// longer than this is interrupted even though it has not used its CPU
// time, so that a call cannot hang for ever on a machine that never runs
// it. The 2 s floor lets a spinning guest on a 2-core machine at load 15
// (about 13 % of a core for its thread) reach a 100 ms deadline before the
// cap, so it is reported as a deadline, not as a cap.
func WallCap(limit time.Duration) time.Duration {
	return max(10*limit, 2*time.Second)
}

// Grace returns the wall time after which a [Deadline] with the given
// limit starts counting the guest thread's CPU time: limit/10, at least
// [MinRecheck] and at most limit.
func Grace(limit time.Duration) time.Duration {
	return min(max(limit/10, MinRecheck), limit)
}

// threadClock reads the CPU time of OS threads. The system clock is per
// OS; internal tests inject a fake through Options.clock to simulate a
// starved thread.
type threadClock interface {
	// self returns an id of the calling OS thread, for thread; ok is false
	// when thread CPU time is not available.
	self() (tid int, ok bool)
	// thread returns the CPU time used so far by thread tid, which may be
	// another thread than the caller's.
	thread(tid int) (cpu time.Duration, ok bool)
}

// Deadline bounds one guest call by the CPU time the call's OS thread
// actually gets, with a wall-clock cap. A wall-clock deadline fails an
// allowed call closed whenever the machine is too busy to run the guest
// for its few microseconds within the deadline; the CPU time of the
// guest's thread does not advance while it waits for a core (or for a Go
// scheduler P), so a starved guest is not interrupted, and a spinning one
// still is, once it has spun for the deadline.
//
// How: [StartDeadline] locks the calling goroutine to its OS thread and
// records the thread's id (gettid). After [Grace] (limit/10) of wall time
// a timer reads the thread's CPU time (on Linux, clock_gettime of the
// thread's CPU clock: the first field of /proc/self/task/<tid>/schedstat)
// as the baseline, and from then on the call is charged the CPU time its
// thread uses. The timer re-reads it when the rest of the deadline could
// have been used (at least [MinRecheck] later), and cancels the call's
// context once the thread has used limit since the baseline, or once
// [WallCap] (max(10 × limit, 2 s)) of wall time has passed. The guest is
// interrupted through that context (wazero's WithCloseOnContextDone); the
// cause, [context.Cause], is a [*DeadlineError].
//
// So a call is never interrupted by the deadline before its thread has
// had limit of CPU time, and a guest that spins is interrupted after
// between limit and limit + Grace of CPU time (100–110 ms for the 100 ms
// default; the CPU time of the first Grace is not charged). The baseline is taken late so that a call that ends within
// the grace time, which is every normal call, costs one gettid and no
// clock read. On systems without thread CPU time (all but Linux), and if
// the clock cannot be read, the deadline is plain wall time.
//
// A Deadline belongs to the goroutine that started it, which must call
// Stop once the guest call has returned. An instance keeps one Deadline
// for all its calls, one at a time, and its timer with it (restart).
type Deadline struct {
	limit, cap, grace time.Duration
	clock             threadClock
	locked            bool // the thread's CPU time is read (check may turn it off)
	pinned            bool // restart locked the goroutine to its thread: Stop unlocks it
	tid               int
	cancel            context.CancelCauseFunc

	mu      sync.Mutex
	timer   *time.Timer
	due     time.Time     // when the timer was last armed to fire
	based   bool          // base and start are set
	base    time.Duration // the thread's CPU time at the baseline
	start   time.Time     // the call's start, estimated at the baseline
	checks  int           // CPU time reads, for tests
	stopped bool
}

// DeadlineError is the cause ([context.Cause]) of a call context ended by
// its [Deadline]. Its message is the one a timed-out call reports:
//
//	deadline of 100ms exceeded
//	wall-clock cap of 2s exceeded (the guest's thread ran 3ms of its 100ms CPU deadline)
type DeadlineError struct {
	// Limit is the deadline, in CPU time of the guest's thread.
	Limit time.Duration
	// Cap is the wall-clock cap ([WallCap] of Limit).
	Cap time.Duration
	// CPU is the CPU time the guest's thread used since the baseline, when
	// known.
	CPU time.Duration
	// WallCap is true when the wall-clock cap, not CPU time, ended the
	// call.
	WallCap bool
	// NoCPUClock is true when thread CPU time was not available: Limit was
	// then applied as wall time.
	NoCPUClock bool
}

// Error implements error.
func (e *DeadlineError) Error() string {
	if e.WallCap {
		return fmt.Sprintf("wall-clock cap of %v exceeded (the guest's thread ran %v of its %v CPU deadline)",
			e.Cap, e.CPU.Round(time.Microsecond), e.Limit)
	}
	return fmt.Sprintf("deadline of %v exceeded", e.Limit)
}

// StartDeadline returns a context derived from ctx that is canceled once
// the calling goroutine's OS thread has used limit of CPU time, or once
// [WallCap](limit) has passed; see [Deadline]. It locks the calling
// goroutine to its OS thread until Stop. ctx's own deadline and
// cancelation still apply, as wall time.
func StartDeadline(ctx context.Context, limit time.Duration) (context.Context, *Deadline) {
	return startDeadline(ctx, limit, 0, nil)
}

// startDeadline is StartDeadline with the wall-clock cap (0: WallCap) and
// the thread clock (nil: the system's) given.
func startDeadline(ctx context.Context, limit, wallCap time.Duration, clock threadClock) (context.Context, *Deadline) {
	d := new(Deadline)
	return d.restart(ctx, limit, wallCap, clock), d
}

// restart starts d for one more call, as startDeadline does, on a Deadline
// that is new or stopped: its timer is reused. A check still running from
// the previous call, or a fire armed for it, finds the new call's due time
// not reached and re-arms the timer for it (check).
func (d *Deadline) restart(ctx context.Context, limit, wallCap time.Duration, clock threadClock) context.Context {
	if clock == nil {
		clock = systemClock
	}
	if wallCap <= 0 {
		wallCap = WallCap(limit)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	first, locked, tid := limit, false, 0
	if clock != nil {
		runtime.LockOSThread()
		var ok bool
		if tid, ok = clock.self(); ok {
			locked = true
			first = Grace(limit)
		} else {
			runtime.UnlockOSThread()
		}
	}
	// check may run before the timer is armed: it waits for mu.
	d.mu.Lock()
	d.limit, d.cap, d.grace, d.clock = limit, max(wallCap, limit), Grace(limit), clock
	d.locked, d.pinned, d.tid, d.cancel = locked, locked, tid, cancel
	d.based, d.base, d.start, d.checks, d.stopped = false, 0, time.Time{}, 0, false
	d.arm(time.Now(), first)
	d.mu.Unlock()
	return cctx
}

// arm makes the timer fire after wait from now. d.mu is held.
func (d *Deadline) arm(now time.Time, wait time.Duration) {
	d.due = now.Add(wait)
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, d.check)
		return
	}
	d.timer.Reset(wait)
}

// Stop ends the deadline: it stops the timer, releases the context and
// unlocks the OS thread. It must be called once, by the goroutine that
// called StartDeadline, after the guest call has returned. Stop of a nil
// Deadline does nothing.
func (d *Deadline) Stop() {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.stopped = true
	d.timer.Stop()
	d.mu.Unlock()
	d.cancel(context.Canceled)
	if d.pinned {
		runtime.UnlockOSThread()
	}
}

// check runs on the timer: it takes the baseline, cancels the call, or
// re-arms the timer for the CPU time the guest has left. It holds mu while
// it reads the clock: Stop, which unlocks the thread, waits for it, so the
// thread runs only the call's goroutine meanwhile.
func (d *Deadline) check() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	now := time.Now()
	if now.Before(d.due) {
		// Armed for an earlier call of a reused Deadline: a timer never
		// fires early, so this fire is not the current call's.
		d.timer.Reset(d.due.Sub(now))
		return
	}
	if !d.locked {
		if d.based && now.Sub(d.start) < d.limit {
			d.arm(now, d.limit-now.Sub(d.start))
			return
		}
		d.cancel(&DeadlineError{Limit: d.limit, Cap: d.cap, NoCPUClock: true})
		return
	}
	d.checks++
	cpu, ok := d.clock.thread(d.tid)
	if !d.based {
		// The call started at least grace ago: start is an estimate
		// that errs late, so the cap never fires early.
		d.based, d.base, d.start = true, cpu, now.Add(-d.grace)
		if !ok {
			// No CPU clock after all: fall back to wall time.
			d.locked = false
			d.arm(now, d.limit-d.grace)
			return
		}
		d.arm(now, min(d.limit, d.cap-d.grace))
		return
	}
	wall := now.Sub(d.start)
	used := cpu - d.base
	switch {
	case !ok:
		// The clock failed mid-call: the guest has had at least limit of
		// wall time since the baseline.
		d.cancel(&DeadlineError{Limit: d.limit, Cap: d.cap, NoCPUClock: true})
	case used >= d.limit:
		d.cancel(&DeadlineError{Limit: d.limit, Cap: d.cap, CPU: used})
	case wall >= d.cap:
		d.cancel(&DeadlineError{Limit: d.limit, Cap: d.cap, CPU: used, WallCap: true})
	default:
		d.arm(now, min(max(d.limit-used, MinRecheck), d.cap-wall))
	}
}

// timeoutMessage says why ctx, the context of a guest call bounded by
// limit, ended: the [DeadlineError] message when a Deadline ended it, else
// "deadline of <limit> exceeded".
func timeoutMessage(ctx context.Context, limit time.Duration) string {
	var de *DeadlineError
	if errors.As(context.Cause(ctx), &de) {
		return de.Error()
	}
	return fmt.Sprintf("deadline of %v exceeded", limit)
}
