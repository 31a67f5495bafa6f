package e2e

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/internal/procfs"
)

func TestTreeRSS(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sh", "-c", "sleep 60 & sleep 60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range procfs.Descendants(cmd.Process.Pid) {
			p, _ := os.FindProcess(c)
			p.Kill()
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		procs, total, err := TreeRSS(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if len(procs) == 3 {
			if procs[0].Pid != cmd.Process.Pid || procs[0].Name != "sh" || total <= 0 {
				t.Errorf("tree %+v total %d, want sh first and a positive total", procs, total)
			}
			var sum int64
			for _, p := range procs {
				sum += p.RSSKiB
			}
			if sum != total {
				t.Errorf("total %d, want the sum %d", total, sum)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tree %+v, want sh and two sleeps", procs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTreeRSSMissing(t *testing.T) {
	t.Parallel()
	if _, _, err := TreeRSS(1 << 30); err == nil {
		t.Error("TreeRSS of a missing pid succeeded")
	}
}
