package exepages

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/openclaw-go/openclaw/internal/procfs"
)

// cut is the spacing of the cuts [UseBasePages] makes in a mapping, in
// file offsets, and cut/2 is where the first one lies: every folio of cut
// bytes or more (folios are aligned to their size in the file) then has a
// cut inside it, and smaller ones are no larger than the kernel's 64 KiB
// fault-around window.
const cut = 128 << 10

// UseBasePages makes the executable's read-only private mappings (text,
// rodata, pclntab) resident only where they are used. It splits each into
// pieces at file offsets cut/2 + k·cut, marking every other piece
// MADV_NOHUGEPAGE so the kernel keeps them apart; since no large folio of
// the page cache then lies within one mapping, a fault maps neither a PMD
// (do_set_pmd needs an aligned 2 MiB range within the mapping) nor a whole
// folio (filemap_map_pages maps a folio whole only when it lies within the
// mapping), only its fault-around window. Then it drops the mappings' page
// table entries (MADV_DONTNEED): the pages fault back in as the process
// uses them. The page cache itself is left as it is.
//
// Dropping is safe only for a mapping no page of which was ever written (a
// private page once written is anonymous and would revert to the file's
// bytes), so a mapping that is writable or holds an Anonymous page is left
// alone. It reads /proc/self/smaps; the first failing step is returned,
// with what was done until then.
func UseBasePages() (Result, error) {
	var res Result
	fi, err := os.Stat("/proc/self/exe")
	if err != nil {
		return res, fmt.Errorf("exepages: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return res, fmt.Errorf("exepages: no inode for /proc/self/exe")
	}
	dev := fmt.Sprintf("%02x:%02x", unix.Major(st.Dev), unix.Minor(st.Dev))
	maps, err := procfs.Smaps(0)
	if err != nil {
		return res, fmt.Errorf("exepages: %w", err)
	}
	for _, m := range maps {
		if !eligible(m, dev, st.Ino) {
			continue
		}
		if err := split(m); err != nil {
			return res, err
		}
		if err := madvise(m.Start, m.End, unix.MADV_DONTNEED); err != nil {
			return res, fmt.Errorf("exepages: madvise(%#x-%#x %s, MADV_DONTNEED): %w", m.Start, m.End, m.Perms, err)
		}
		res.Mappings++
		res.DroppedKiB += m.KiB["Rss"]
	}
	return res, nil
}

// split cuts m at the file offsets cut/2 + k·cut by marking every other
// piece MADV_NOHUGEPAGE (the ranges of [nohugeRanges]).
func split(m procfs.Mapping) error {
	page := uintptr(os.Getpagesize())
	for _, r := range nohugeRanges(m) {
		if r[0]%page != 0 || r[1]%page != 0 {
			return fmt.Errorf("exepages: %#x-%#x of %#x-%#x is not page-aligned", r[0], r[1], m.Start, m.End)
		}
		if err := madvise(r[0], r[1], unix.MADV_NOHUGEPAGE); err != nil {
			return fmt.Errorf("exepages: madvise(%#x-%#x %s, MADV_NOHUGEPAGE): %w", r[0], r[1], m.Perms, err)
		}
	}
	return nil
}

// nohugeRanges are the address ranges [start, end) of m that [split] marks:
// from each cut (file offset cut/2 + k·cut) at or after m.Start, every
// other one, to the next cut or m.End.
func nohugeRanges(m procfs.Mapping) [][2]uintptr {
	var out [][2]uintptr
	// The distance from m.Start to the first cut at or after it.
	first := (cut/2 - m.Offset%cut + cut) % cut
	for lo := m.Start + uintptr(first); lo < m.End; lo += 2 * cut {
		out = append(out, [2]uintptr{lo, min(lo+cut, m.End)})
	}
	return out
}

// eligible reports whether m is a mapping of the executable (device dev,
// inode ino) that [UseBasePages] may drop: read-only, private, with no
// page ever written (no Anonymous page).
func eligible(m procfs.Mapping, dev string, ino uint64) bool {
	return m.Inode == ino && m.Dev == dev && (m.Perms == "r-xp" || m.Perms == "r--p") && m.KiB["Anonymous"] == 0
}

func madvise(start, end uintptr, advice int) error {
	if _, _, e := unix.Syscall(unix.SYS_MADVISE, start, end-start, uintptr(advice)); e != 0 {
		return e
	}
	return nil
}
