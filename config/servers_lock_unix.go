//go:build unix && !aix && !solaris && !illumos

package config

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// lockExcludes reports whether [Lock] keeps other lockers out here.
const lockExcludes = true

// lockFile takes flock(LOCK_EX) on f. It asks without blocking and waits
// between attempts (1 ms doubling up to 50 ms), so that ctx can end the
// wait: a blocking flock could not be interrupted.
func lockFile(ctx context.Context, f *os.File) error {
	fd := int(f.Fd())
	wait := time.Millisecond
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case !errors.Is(err, syscall.EWOULDBLOCK):
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}
