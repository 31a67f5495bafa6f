//go:build !unix

package main

import (
	"context"
	"errors"
)

// reloadSignals returns a loop that waits for ctx: there is no SIGHUP on
// this system, so policies swap on file changes only.
func reloadSignals() func(ctx context.Context, reload func()) {
	return func(ctx context.Context, reload func()) { <-ctx.Done() }
}

// processState cannot check processes here; it trusts the run file.
func processState(info runInfo) bool { return true }

// signalReload is not supported on this system.
func signalReload(pid int) error {
	return errors.New("openclaw policy reload needs SIGHUP, which this system lacks: the process swaps modules when their files change")
}
