package wasmhost

import (
	"syscall"
	"time"
	"unsafe"
)

// systemClock reads Linux thread CPU clocks.
var systemClock threadClock = linuxClock{}

// linuxClock reads a thread's CPU time with clock_gettime on the thread's
// own CPU clock, MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) in the kernel's
// posix-cpu-timers: the same nanoseconds as the first field of
// /proc/self/task/<tid>/schedstat, readable from any thread of the
// process, with one system call and no allocation.
type linuxClock struct{}

func (linuxClock) self() (int, bool) { return syscall.Gettid(), true }

func (linuxClock) thread(tid int) (time.Duration, bool) {
	// CPUCLOCK_PERTHREAD_MASK (4) | CPUCLOCK_SCHED (2), with the bitwise
	// complement of the tid above the 3 low bits.
	clk := (^int32(tid))<<3 | 6
	var ts syscall.Timespec
	_, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, uintptr(int(clk)), uintptr(unsafe.Pointer(&ts)), 0)
	if e != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
