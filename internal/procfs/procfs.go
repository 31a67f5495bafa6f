// Package procfs reads the process tree from Linux's /proc: the one walker
// of descendants that the stdio supervisor (to signal a server's whole
// tree) and the benchmarks (to sum a tree's memory) share, and the checks
// tests use to find processes left behind (by liveness and environment). It imports only
// the standard library. Where there is no /proc it finds nothing.
package procfs

import (
	"os"
	"slices"
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

// Parent returns the parent PID of pid from /proc/<pid>/stat, and false
// when it cannot be read.
func Parent(pid int) (int, bool) {
	f, ok := stat(pid)
	if !ok || len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// Alive reports whether pid is a live process: its /proc/<pid>/stat can be
// read and its state is not Z (a zombie has exited and waits to be reaped).
func Alive(pid int) bool {
	f, ok := stat(pid)
	return ok && len(f) > 0 && f[0] != "Z"
}

// WithEnv lists the live processes whose environment
// (/proc/<pid>/environ) holds entry, a "KEY=VALUE" string compared whole.
// Processes whose environment cannot be read (another user's) are skipped.
func WithEnv(entry string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !Alive(pid) {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		if slices.Contains(strings.Split(string(env), "\x00"), entry) {
			out = append(out, pid)
		}
	}
	return out
}

// stat returns the fields of /proc/<pid>/stat after the parenthesized
// command name (which may itself hold spaces or ')'): the state first, then
// the parent PID, and false when the file cannot be read.
func stat(pid int) ([]string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(s[i+1:]), true
}

// Status returns the resident set size (VmRSS, in KiB of 1024 bytes) and
// the command name (Name) of /proc/<pid>/status; pid 0 reads the calling
// process (/proc/self). ok is false when the file cannot be read; a
// field the file lacks (a kernel thread has no VmRSS) is 0 or "".
func Status(pid int) (rssKiB int64, name string, ok bool) {
	p := "/proc/self/status"
	if pid != 0 {
		p = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, "", false
	}
	rssKiB, name = ParseStatus(string(b))
	return rssKiB, name, true
}

// ParseStatus reads VmRSS (KiB) and Name from the text of a
// /proc/<pid>/status file.
func ParseStatus(s string) (rssKiB int64, name string) {
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
			if f := strings.Fields(v); len(f) > 0 { // "12345 kB"
				rssKiB, _ = strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return rssKiB, name
}
