package exepages

import (
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openclaw-go/openclaw/internal/procfs"
)

// Every folio of cut bytes or more that lies within a mapping has a cut
// inside it, for mappings at any file offset; the marked ranges alternate,
// are page-aligned and stay within the mapping.
func TestNohugeRanges(t *testing.T) {
	t.Parallel()
	for _, off := range []int64{0, 0x1000, 0x1b000, cut / 2, 0x102a000, 0x14afb60 &^ 0xfff} {
		m := procfs.Mapping{Start: 0x1400000 + uintptr(off%0x200000), Offset: off}
		m.End = m.Start + 0x480000 + 0x3000
		rs := nohugeRanges(m)
		if len(rs) == 0 {
			t.Fatalf("offset %#x: no ranges", off)
		}
		var bounds []uintptr
		for i, r := range rs {
			if r[0] < m.Start || r[1] > m.End || r[0] >= r[1] || r[0]%4096 != 0 || r[1]%4096 != 0 {
				t.Errorf("offset %#x: range %#x-%#x outside %#x-%#x or unaligned", off, r[0], r[1], m.Start, m.End)
			}
			if i > 0 && r[0]-rs[i-1][0] != 2*cut {
				t.Errorf("offset %#x: ranges %#x and %#x not 2·cut apart", off, rs[i-1][0], r[0])
			}
			bounds = append(bounds, r[0], r[1])
		}
		// Folio-aligned blocks of the file within the mapping.
		addr := func(fileOff int64) uintptr { return m.Start + uintptr(fileOff-m.Offset) }
		for o := (off + cut - 1) / cut * cut; addr(o+cut) <= m.End; o += cut {
			lo, hi := addr(o), addr(o+cut)
			if !slices.ContainsFunc(bounds, func(b uintptr) bool { return b > lo && b < hi }) {
				t.Errorf("offset %#x: the folio at file offset %#x (%#x-%#x) has no cut inside", off, o, lo, hi)
			}
		}
	}
}

// Only read-only private mappings of the executable with no written page
// may be dropped.
func TestEligible(t *testing.T) {
	t.Parallel()
	m := func(perms, dev string, ino uint64, anon int64) procfs.Mapping {
		return procfs.Mapping{Perms: perms, Dev: dev, Inode: ino, KiB: map[string]int64{"Anonymous": anon}}
	}
	tests := []struct {
		m    procfs.Mapping
		want bool
	}{
		{m("r-xp", "fe:00", 7, 0), true},
		{m("r--p", "fe:00", 7, 0), true},
		{m("r--p", "fe:00", 7, 4), false}, // a page was written (RELRO)
		{m("rw-p", "fe:00", 7, 0), false},
		{m("r-xs", "fe:00", 7, 0), false},
		{m("r-xp", "fe:01", 7, 0), false},
		{m("r-xp", "fe:00", 8, 0), false},
	}
	for _, tc := range tests {
		if got := eligible(tc.m, "fe:00", 7); got != tc.want {
			t.Errorf("eligible(%s %s %d, Anonymous %d kB) = %v, want %v", tc.m.Perms, tc.m.Dev, tc.m.Inode, tc.m.KiB["Anonymous"], got, tc.want)
		}
	}
}

// On the test binary itself: its code and read-only data end up split into
// pieces, every other one marked "nh" (no huge pages), none PMD-mapped,
// the writable data left whole, and the process still runs.
func TestUseBasePages(t *testing.T) {
	before := exeMappings(t)
	res, err := UseBasePages()
	if err != nil {
		t.Fatal(err)
	}
	if res.Mappings < 1 || res.DroppedKiB <= 0 {
		t.Fatalf("UseBasePages = %+v, want at least one mapping dropped", res)
	}
	// Run code and read data all over the binary again.
	if s := fmt.Sprintf("%v %x", before[0], os.Getpid()); s == "" {
		t.Fatal("empty")
	}
	after := exeMappings(t)
	var ro, nh, rw []procfs.Mapping
	for _, m := range after {
		switch {
		case m.Perms == "rw-p":
			rw = append(rw, m)
		case m.KiB["Anonymous"] == 0:
			ro = append(ro, m)
			if slices.Contains(m.Flags, "nh") {
				nh = append(nh, m)
			}
			if m.KiB["FilePmdMapped"] != 0 {
				t.Errorf("%#x-%#x %s: FilePmdMapped %d kB after UseBasePages", m.Start, m.End, m.Perms, m.KiB["FilePmdMapped"])
			}
			if m.End-m.Start > cut {
				t.Errorf("%#x-%#x %s: %d bytes, want pieces of at most %d", m.Start, m.End, m.Perms, m.End-m.Start, cut)
			}
		}
	}
	if len(ro) <= res.Mappings || len(nh) < len(ro)/2-1 {
		t.Errorf("%d read-only mappings after, %d of them nh; %d before were split", len(ro), len(nh), res.Mappings)
	}
	var rwBefore []procfs.Mapping
	for _, m := range before {
		if m.Perms == "rw-p" {
			rwBefore = append(rwBefore, m)
		}
	}
	if len(rw) != len(rwBefore) || (len(rw) > 0 && (rw[0].Start != rwBefore[0].Start || rw[0].End != rwBefore[0].End)) {
		t.Errorf("writable mappings changed: %d before, %d after", len(rwBefore), len(rw))
	}
}

// exeMappings are this process's mappings of its own executable.
func exeMappings(t *testing.T) []procfs.Mapping {
	t.Helper()
	fi, err := os.Stat("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	dev := fmt.Sprintf("%02x:%02x", unix.Major(st.Dev), unix.Minor(st.Dev))
	maps, err := procfs.Smaps(0)
	if err != nil {
		t.Fatal(err)
	}
	var out []procfs.Mapping
	for _, m := range maps {
		if m.Inode == st.Ino && m.Dev == dev {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		t.Fatal("no mapping of /proc/self/exe in /proc/self/smaps")
	}
	return out
}
