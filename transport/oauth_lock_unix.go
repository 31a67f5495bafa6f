//go:build unix && !aix && !solaris && !illumos

package transport

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// lockPath takes an exclusive flock on path (created 0600 if missing), so
// that processes sharing a token store refresh one server's token one at a
// time: with rotating refresh tokens, a second refresh with the same
// refresh token would fail and log the user out. It polls without blocking
// (1 ms doubling up to 50 ms) so that ctx can end the wait.
func lockPath(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	wait := time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return func() { f.Close() }, nil // closing releases the lock
		case errors.Is(err, syscall.EINTR):
			continue
		case !errors.Is(err, syscall.EWOULDBLOCK):
			f.Close()
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}
