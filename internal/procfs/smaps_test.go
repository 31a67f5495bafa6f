package procfs

import (
	"runtime"
	"slices"
	"strings"
	"testing"
)

const smapsText = `00400000-0142a000 r-xp 00000000 fe:00 10011846                           /opt/open claw/bin/openclaw
Size:              16552 kB
Rss:               16544 kB
Anonymous:             0 kB
FilePmdMapped:     14336 kB
THPeligible:           0
VmFlags: rd ex mr mw me
7fdba1648000-7fdba1699000 r-xp 00000000 00:00 0 
Size:                324 kB
Rss:                 324 kB
Anonymous:           324 kB
VmFlags: rd ex mr mw me ac nh
`

// ParseSmaps reads each mapping's header (a path with a space kept whole,
// an anonymous mapping without one), its kB fields and its VmFlags.
func TestParseSmaps(t *testing.T) {
	t.Parallel()
	ms, err := ParseSmaps(smapsText)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 {
		t.Fatalf("%d mappings, want 2: %+v", len(ms), ms)
	}
	exe, anon := ms[0], ms[1]
	if exe.Start != 0x400000 || exe.End != 0x142a000 || exe.Perms != "r-xp" || exe.Offset != 0 || exe.Dev != "fe:00" ||
		exe.Inode != 10011846 || exe.Path != "/opt/open claw/bin/openclaw" {
		t.Errorf("header = %+v", exe)
	}
	if exe.KiB["Rss"] != 16544 || exe.KiB["FilePmdMapped"] != 14336 || exe.KiB["Anonymous"] != 0 {
		t.Errorf("fields = %v", exe.KiB)
	}
	if _, ok := exe.KiB["THPeligible"]; ok {
		t.Errorf("THPeligible (no kB) read as a size: %v", exe.KiB)
	}
	if anon.Path != "" || anon.Inode != 0 || anon.KiB["Anonymous"] != 324 || !slices.Contains(anon.Flags, "nh") || slices.Contains(exe.Flags, "nh") {
		t.Errorf("anonymous mapping = %+v", anon)
	}
}

// A header ParseSmaps cannot read, or a field before any header, is an
// error that quotes the line.
func TestParseSmapsBad(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"Rss: 4 kB\n", "00400000 r-xp 00000000 fe:00 1 /x\n", "zz-00400000 r-xp 00000000 fe:00 1\n"} {
		_, err := ParseSmaps(in)
		if err == nil || !strings.Contains(err.Error(), strings.TrimSuffix(in, "\n")) {
			t.Errorf("ParseSmaps(%q) error = %v, want one quoting the line", in, err)
		}
	}
}

// This process's own smaps list its executable; the rollup sums its Rss.
func TestSmapsSelf(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ms, err := Smaps(0)
	if err != nil {
		t.Fatal(err)
	}
	var rss int64
	exec := false
	for _, m := range ms {
		rss += m.KiB["Rss"]
		exec = exec || (m.Perms == "r-xp" && m.Inode != 0)
	}
	if !exec || rss <= 0 {
		t.Errorf("%d mappings, Rss %d kB, a file-backed executable one: %v", len(ms), rss, exec)
	}
	r, err := SmapsRollup(0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Path != "[rollup]" || r.KiB["Rss"] <= 0 {
		t.Errorf("rollup = %+v", r)
	}
}
