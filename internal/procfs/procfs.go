// Package procfs reads the process tree from Linux's /proc: the one walker
// of descendants that the stdio supervisor (to signal a server's whole
// tree) and the benchmarks (to sum a tree's memory) share. It imports only
// the standard library. Where there is no /proc it finds nothing.
package procfs

import (
	"os"
	"strconv"
	"strings"
)

// Descendants lists the live processes whose ancestry reaches root
// (children, their children, …), breadth first, from the parent field of
// every /proc/<pid>/stat. A process that exits meanwhile is skipped.
func Descendants(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := Parent(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// Parent returns the parent PID of pid from /proc/<pid>/stat (field 4,
// after the parenthesized command name, which may itself hold spaces or
// ')'), and false when it cannot be read.
func Parent(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}
