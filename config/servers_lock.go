package config

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// LockPath returns the advisory lock file that guards the config file at
// path: openclaw.json.lock next to openclaw.json. The lock file is created
// on first use and never removed (removing it would let two writers lock
// two different files); its content is unused.
func LockPath(path string) string { return path + ".lock" }

// FileLock is an exclusive advisory lock on a config file, taken by
// [Lock]. Writers that lock (every `openclaw mcp set` and `unset` of
// openclaw-go) hold it across the whole read, change and [Document.Save],
// backup rotation included, so concurrent writers take turns instead of
// overwriting each other. Writers that do not lock (OpenClaw itself, an
// editor) are still caught by Save's changed-since-read check
// ([ErrConfigChanged]).
type FileLock struct {
	mu   sync.Mutex
	f    *os.File // nil once unlocked
	path string
}

// Lock takes the exclusive advisory lock of the config file at path (on
// [LockPath]), waiting while another process or goroutine holds it, until
// ctx is done. The config's folder is created (0700) when missing, the lock
// file with mode 0600. The lock is released by [FileLock.Unlock], or by the
// process's exit.
//
// On Unix systems the lock is flock(2), which every process that locks
// honours. Elsewhere Lock returns a lock that excludes nothing, and only
// Save's changed-since-read check protects the file.
//
// Errors name the lock file; waiting ends with an error wrapping ctx.Err().
func Lock(ctx context.Context, path string) (*FileLock, error) {
	lp := LockPath(path)
	if err := os.MkdirAll(filepath.Dir(lp), 0o700); err != nil {
		return nil, fmt.Errorf("config: creating %s: %w", filepath.Dir(lp), err)
	}
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("config: opening lock file %s: %w", lp, err)
	}
	if err := lockFile(ctx, f); err != nil {
		f.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("config: waiting for lock %s, held by another writer: %w", lp, err)
		}
		return nil, fmt.Errorf("config: locking %s: %w", lp, err)
	}
	return &FileLock{f: f, path: lp}, nil
}

// Unlock releases the lock. It is idempotent and safe for concurrent use;
// calls after the first return nil.
func (l *FileLock) Unlock() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	if err != nil {
		return fmt.Errorf("config: releasing lock %s: %w", l.path, err)
	}
	return nil
}
