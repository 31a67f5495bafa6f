package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Mapping is one memory mapping of a process as /proc/<pid>/smaps describes
// it (or the single summary entry of /proc/<pid>/smaps_rollup).
type Mapping struct {
	// Start and End are the mapping's addresses, End exclusive.
	Start, End uintptr
	// Perms is the protection and sharing, as "r-xp" (p private, s shared).
	Perms string
	// Offset is the mapping's offset in its file.
	Offset int64
	// Dev is the mapped file's device as the kernel prints it,
	// "MAJOR:MINOR" in hex ("fe:00"); "00:00" for anonymous memory.
	Dev string
	// Inode is the mapped file's inode, 0 for anonymous memory.
	Inode uint64
	// Path is the mapped file's path or a pseudo-name ("[heap]",
	// "[rollup]"); "" for anonymous memory.
	Path string
	// KiB holds the size fields (Rss, Anonymous, FilePmdMapped, …) in
	// KiB of 1024 bytes.
	KiB map[string]int64
	// Flags are the two-letter VmFlags ("rd", "ex", "nh", …).
	Flags []string
}

// Smaps returns the mappings of pid from /proc/<pid>/smaps; pid 0 reads the
// calling process (/proc/self).
func Smaps(pid int) ([]Mapping, error) {
	b, err := os.ReadFile(procPath(pid, "smaps"))
	if err != nil {
		return nil, err
	}
	return ParseSmaps(string(b))
}

// SmapsRollup returns the summary of all mappings of pid from
// /proc/<pid>/smaps_rollup; pid 0 reads the calling process.
func SmapsRollup(pid int) (Mapping, error) {
	p := procPath(pid, "smaps_rollup")
	b, err := os.ReadFile(p)
	if err != nil {
		return Mapping{}, err
	}
	ms, err := ParseSmaps(string(b))
	if err != nil {
		return Mapping{}, err
	}
	if len(ms) != 1 {
		return Mapping{}, fmt.Errorf("procfs: %s: %d entries, want 1", p, len(ms))
	}
	return ms[0], nil
}

// ParseSmaps reads the text of a /proc/<pid>/smaps (or smaps_rollup) file:
// a header line per mapping ("START-END PERMS OFFSET DEV INODE [PATH]")
// followed by its "Key: N kB" fields and its VmFlags line. A header it
// cannot read is an error naming the line.
func ParseSmaps(s string) ([]Mapping, error) {
	var out []Mapping
	for line := range strings.Lines(s) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			continue
		}
		k, v, isField := strings.Cut(line, ":")
		if isField && !strings.Contains(k, " ") && !strings.Contains(k, "-") {
			if len(out) == 0 {
				return nil, fmt.Errorf("procfs: smaps field %q before any mapping", line)
			}
			m := &out[len(out)-1]
			if k == "VmFlags" {
				m.Flags = strings.Fields(v)
				continue
			}
			if f := strings.Fields(v); len(f) == 2 && f[1] == "kB" {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					m.KiB[k] = n
				}
			}
			continue
		}
		m, err := parseMapsLine(line)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// parseMapsLine reads a mapping's header line, as /proc/<pid>/maps has it.
func parseMapsLine(line string) (Mapping, error) {
	bad := func() (Mapping, error) { return Mapping{}, fmt.Errorf("procfs: unreadable mapping line %q", line) }
	f := strings.Fields(line)
	if len(f) < 5 {
		return bad()
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	off, err3 := strconv.ParseInt(f[2], 16, 64)
	ino, err4 := strconv.ParseUint(f[4], 10, 64)
	if !ok || err1 != nil || err2 != nil || err3 != nil || err4 != nil || len(f[1]) != 4 {
		return bad()
	}
	m := Mapping{Start: uintptr(start), End: uintptr(end), Perms: f[1], Offset: off, Dev: f[3], Inode: ino, KiB: map[string]int64{}}
	// The path is the rest of the line after the inode; it may hold spaces.
	rest := line
	for range 5 {
		rest = strings.TrimLeft(rest, " ")
		_, rest, _ = strings.Cut(rest, " ")
	}
	m.Path = strings.TrimLeft(rest, " ")
	return m, nil
}

// procPath is /proc/<pid>/name, /proc/self/name for pid 0.
func procPath(pid int, name string) string {
	if pid == 0 {
		return "/proc/self/" + name
	}
	return "/proc/" + strconv.Itoa(pid) + "/" + name
}
