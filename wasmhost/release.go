package wasmhost

import (
	"runtime/debug"
	"sync"
	"time"
)

// releaseInterval is the shortest time between two returns of free memory
// to the operating system.
const releaseInterval = time.Second

// osRelease returns the memory of discarded instances to the operating
// system. An instance that failed may have grown a large call stack
// (wazero lets a guest's stack reach about 100 MiB before it reports a
// stack overflow, and keeps the copies it grew through until it is
// dropped) or memory up to its cap; once it is discarded that memory is
// garbage, but the Go runtime would keep it mapped, so 8 overflows would
// leave the process ~1 GiB larger for good. debug.FreeOSMemory runs a
// collection and returns the freed pages; it runs off the call path, at
// most once per releaseInterval however many instances are discarded.
var osRelease struct {
	mu      sync.Mutex
	pending bool
	last    time.Time
}

// releaseMemory schedules one return of free memory to the operating
// system, now or releaseInterval after the previous one.
func releaseMemory() {
	r := &osRelease
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending {
		return
	}
	r.pending = true
	wait := max(releaseInterval-time.Since(r.last), 0)
	time.AfterFunc(wait, func() {
		r.mu.Lock()
		r.pending = false
		r.mu.Unlock()
		debug.FreeOSMemory()
		r.mu.Lock()
		r.last = time.Now()
		r.mu.Unlock()
	})
}
