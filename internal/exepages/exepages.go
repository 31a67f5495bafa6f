// Package exepages keeps the running executable's code and read-only data
// from being resident in whole large blocks. Linux may cache an executable
// in large folios (2 MiB ones after a linker or a large write() wrote it)
// and then maps a whole folio at the first touch of any byte of it: with a
// PMD entry (FilePmdMapped in /proc/PID/smaps) or, where that is off, with
// page-table entries for the whole folio at once (the page-fault
// "fault-around" of kernels since 6.18 maps every folio that lies within
// the mapping whole). A process's resident set then holds nearly all of its
// text, rodata and pclntab, used or not. [UseBasePages] undoes that for
// this process: afterwards only the pages it touches are resident (in the
// kernel's 64 KiB fault-around windows). See docs/RATIONALE.md, "Why does
// mcp serve split the mappings of its own code?".
package exepages

// Result is what [UseBasePages] changed.
type Result struct {
	// Mappings is how many of the executable's mappings were split.
	Mappings int
	// DroppedKiB is the resident size of those mappings before their
	// pages were dropped (they fault back in as they are used).
	DroppedKiB int64
}
