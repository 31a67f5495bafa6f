//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// reloadSignals starts catching SIGHUP (whose default action would end
// the process) and returns the loop that calls reload for each one until
// ctx is done. Catching starts before the loop runs, so that a process is
// never registered for `policy reload` while SIGHUP could still kill it.
func reloadSignals() func(ctx context.Context, reload func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return func(ctx context.Context, reload func()) {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				reload()
			}
		}
	}
}

// processState says whether the process that wrote info still runs: alive
// is false when it is gone or its pid now names another process.
func processState(info runInfo) (alive bool) {
	if err := syscall.Kill(info.PID, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	if info.StartTicks != "" && startTicks(info.PID) != info.StartTicks {
		return false
	}
	return true
}

// signalReload asks the process to reload its policies.
func signalReload(pid int) error { return syscall.Kill(pid, syscall.SIGHUP) }
