package interop

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Proc is one process of a process tree, read from Linux /proc.
type Proc struct {
	Pid  int
	Name string
	// RSSKiB is VmRSS in KiB (1024 bytes); 0 when unknown.
	RSSKiB int64
}

// TreeRSS returns the processes of the tree rooted at pid (root first, then
// descendants depth first) with their resident set sizes, and the sum in
// KiB. The real openclaw re-spawns itself (a launcher parent and the
// openclaw-mcp child), so only the whole tree is a fair comparison.
// It fails when the root does not exist.
func TreeRSS(pid int) ([]Proc, int64, error) {
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		return nil, 0, fmt.Errorf("interop: process %d: %w", pid, err)
	}
	var procs []Proc
	var total int64
	var walk func(int)
	walk = func(p int) {
		rss, name := status(p)
		procs = append(procs, Proc{Pid: p, Name: name, RSSKiB: rss})
		total += rss
		for _, c := range children(p) {
			walk(c)
		}
	}
	walk(pid)
	return procs, total, nil
}

// RSSKiB returns the summed VmRSS of the child's process tree (see [TreeRSS]).
func (s *Serve) RSSKiB() ([]Proc, int64, error) { return TreeRSS(s.Pid()) }

// children lists the direct children of pid over all its threads.
func children(pid int) []int {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// status reads VmRSS (KiB) and Name from /proc/pid/status.
func status(pid int) (rssKiB int64, name string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, ""
	}
	return parseStatus(string(b))
}

func parseStatus(s string) (rssKiB int64, name string) {
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Name":
			name = v
		case "VmRSS":
			f := strings.Fields(v) // "12345 kB"
			if len(f) > 0 {
				rssKiB, _ = strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return rssKiB, name
}

func procName(pid int) string {
	_, n := status(pid)
	return n
}
