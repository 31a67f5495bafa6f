package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/internal/procfs"
)

// Once initialize is answered and the Gateway connected, serve's own code
// and read-only data are split into small mappings (every other one "nh"),
// none of them PMD-mapped, and it says so at debug level.
func TestServeSplitsItsCodeMappings(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	url, _ := silentGateway(t)
	c := startServeChild(t, ctx, "--url", url, "--token", "t", "--audit-log", "-", "-v")
	c.initialize(t, ctx)
	const done = "executable mapped in base pages"
	for tick := time.NewTicker(20 * time.Millisecond); !strings.Contains(c.stderr.String(), done); {
		select {
		case <-ctx.Done():
			t.Fatalf("no %q line; stderr:\n%s", done, c.stderr.String())
		case <-tick.C:
		}
	}
	if log := c.stderr.String(); !strings.Contains(log, "err=<nil>") || strings.Contains(log, "mappings=0 ") {
		t.Errorf("stderr:\n%s", log)
	}
	bin, err := builtBin()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	maps, err := procfs.Smaps(c.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	var ro, nh int
	for _, m := range maps {
		if m.Inode != ino || m.Perms == "rw-p" || m.KiB["Anonymous"] != 0 {
			continue
		}
		ro++
		if slices.Contains(m.Flags, "nh") {
			nh++
		}
		if m.KiB["FilePmdMapped"] != 0 {
			t.Errorf("%#x-%#x %s: FilePmdMapped %d kB", m.Start, m.End, m.Perms, m.KiB["FilePmdMapped"])
		}
	}
	if ro < 10 || nh < ro/2-1 {
		t.Errorf("%d read-only mappings of %s, %d of them nh; want it split into many", ro, bin, nh)
	}
	_ = c.stdin.Close()
	_ = c.cmd.Wait()
}
