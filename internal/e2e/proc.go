package e2e

import (
	"fmt"
	"os"

	"github.com/openclaw-go/openclaw/internal/procfs"
)

// Proc is one process of a process tree, read from Linux /proc.
type Proc struct {
	Pid  int
	Name string
	// RSSKiB is VmRSS in KiB (1024 bytes); 0 when unknown.
	RSSKiB int64
}

// TreeRSS returns the processes of the tree rooted at pid (root first, then
// its descendants, procfs.Descendants) with their resident set sizes, and
// the sum in KiB. The real openclaw re-spawns itself (a launcher parent and
// the openclaw-mcp child), so only the whole tree is a fair comparison.
// It fails when the root does not exist.
func TreeRSS(pid int) ([]Proc, int64, error) {
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		return nil, 0, fmt.Errorf("e2e: process %d: %w", pid, err)
	}
	var procs []Proc
	var total int64
	for _, p := range append([]int{pid}, procfs.Descendants(pid)...) {
		rss, name, _ := procfs.Status(p)
		procs = append(procs, Proc{Pid: p, Name: name, RSSKiB: rss})
		total += rss
	}
	return procs, total, nil
}

// RSSKiB returns the summed VmRSS of the child's process tree (see [TreeRSS]).
func (s *Serve) RSSKiB() ([]Proc, int64, error) { return TreeRSS(s.Pid()) }

func procName(pid int) string {
	_, n, _ := procfs.Status(pid)
	return n
}
