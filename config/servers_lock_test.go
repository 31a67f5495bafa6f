package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// serverNamesIn returns the mcp.servers names of the config file at p.
func serverNamesIn(t *testing.T, p string) []string {
	t.Helper()
	doc, err := LoadDocument(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return doc.Servers().Keys()
}

// checkWriteHistory checks what n serialized writes, each adding one server
// to an empty config, leave behind: all n servers in the file and in
// last-good, and the Backups previous versions in the backups, each one
// server short of the next newer one.
func checkWriteHistory(t *testing.T, path string, n int) {
	t.Helper()
	newer := serverNamesIn(t, path)
	if len(newer) != n {
		t.Fatalf("%s holds %d servers %q, want all %d", path, len(newer), newer, n)
	}
	if got := serverNamesIn(t, path+".last-good"); !slices.Equal(got, newer) {
		t.Errorf("last-good holds %q, want %q", got, newer)
	}
	for i := range Backups {
		p := BackupPath(path, i)
		got := serverNamesIn(t, p)
		if len(got) != n-1-i {
			t.Errorf("%s holds %d servers %q, want %d", filepath.Base(p), len(got), got, n-1-i)
		}
		for _, name := range got {
			if !slices.Contains(newer, name) {
				t.Errorf("%s holds %q, which the next newer version lacks", filepath.Base(p), name)
			}
		}
		newer = got
	}
}

// TestLockSerializesConcurrentWriters runs 20 writers at once, each its own
// load, set and save under Lock, as `openclaw mcp set` does: no entry and no
// backup is lost, and no writer is refused.
func TestLockSerializesConcurrentWriters(t *testing.T) {
	t.Parallel()
	if !lockExcludes {
		t.Skip("no flock(2) on this system: Lock excludes nothing")
	}
	path := filepath.Join(t.TempDir(), ".openclaw", "openclaw.json")
	const writers = 20
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			errs[i] = func() error {
				l, err := Lock(t.Context(), path)
				if err != nil {
					return err
				}
				defer l.Unlock()
				doc, err := LoadDocument(path)
				if err != nil {
					return err
				}
				if err := doc.SetServer(fmt.Sprintf("s%d", i), NewObject()); err != nil {
					return err
				}
				e, _ := doc.Server(fmt.Sprintf("s%d", i))
				e.Set("command", "ls")
				return doc.Save()
			}()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	checkWriteHistory(t, path, writers)
	if st, err := os.Stat(LockPath(path)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("lock file %s: %v, mode %v; want it kept, mode 0600", LockPath(path), err, st.Mode().Perm())
	}
}

// TestLockExcludes checks that a held lock keeps a second locker out until
// it is released, that waiting ends with the context, and that Unlock is
// idempotent.
func TestLockExcludes(t *testing.T) {
	t.Parallel()
	if !lockExcludes {
		t.Skip("no flock(2) on this system: Lock excludes nothing")
	}
	path := filepath.Join(t.TempDir(), "openclaw.json")
	held, err := Lock(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if l, err := Lock(ctx, path); !errors.Is(err, context.Canceled) {
		if l != nil {
			l.Unlock()
		}
		t.Fatalf("Lock while held, with a cancelled context: %v, want context.Canceled", err)
	} else if want := "waiting for lock " + LockPath(path); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if err := held.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := held.Unlock(); err != nil {
		t.Fatalf("second Unlock: %v, want nil", err)
	}
	again, err := Lock(t.Context(), path)
	if err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	if err := again.Unlock(); err != nil {
		t.Fatal(err)
	}
}
