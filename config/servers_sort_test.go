package config

import (
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// localeCompareRef is LocaleCompare as it was before its ASCII fast paths
// (commit e833f8e): every rune decoded and classified with the unicode
// tables, from the first. The fast version must order every pair of
// strings exactly as this one does.
func localeCompareRef(a, b string) int {
	if c := comparePrimaryRef(a, b); c != 0 {
		return c
	}
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			la, lb := unicode.IsLower(ra), unicode.IsLower(rb)
			if la && !lb {
				return -1
			}
			if lb && !la {
				return 1
			}
			break
		}
		a, b = a[na:], b[nb:]
	}
	return strings.Compare(a, b)
}

func comparePrimaryRef(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		wa, wb := primaryWeight(ra), primaryWeight(rb)
		if wa != wb {
			if wa < wb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	default:
		return 1
	}
}

// sortPieces are the pieces of the adversarial names: ASCII of every
// class and case, white space, control characters, non-ASCII letters with
// case (Latin, Greek, Cyrillic), letters without case, combining marks,
// non-ASCII punctuation, symbols, digits, U+FFFD, and invalid UTF-8
// (bytes that decode to U+FFFD one at a time, and truncated sequences).
var sortPieces = []string{
	"a", "A", "b", "B", "z", "Z", "m", "tool", "Tool", "TOOL", "_", "-", ".", "$", "~", "`", "0", "1", "9",
	" ", "\t", "\n", "\x00", "\x01", "\x7f",
	"é", "É", "e\u0301", "ß", "ẞ", "ñ", "Ñ", "α", "Α", "ω", "Ω", "ж", "Ж", "ı", "İ",
	"中", "あ", "ー", "\u00a0", "\u2003", "\u3000", "—", "«", "»", "¿", "€", "©", "😀", "٣", "５", "Ⅻ",
	"\ufffd", "\xff", "\xfe", "\x80", "\xc3", "\xe2\x82", "\xf0\x9f\x98", "\xed\xa0\x80",
}

// randomName builds a name of up to 6 pieces.
func randomName(r *rand.Rand) string {
	var sb strings.Builder
	for range r.IntN(7) {
		sb.WriteString(sortPieces[r.IntN(len(sortPieces))])
	}
	return sb.String()
}

// mutate returns s with one piece inserted, replaced or case-swapped, so
// that pairs share long prefixes (the common case in a catalog).
func mutate(r *rand.Rand, s string) string {
	i := r.IntN(len(s) + 1)
	p := sortPieces[r.IntN(len(sortPieces))]
	switch r.IntN(4) {
	case 0:
		return s[:i] + p + s[i:]
	case 1:
		return s + p
	case 2:
		if i < len(s) {
			return s[:i] + p + s[i+1:]
		}
		return s + p
	default:
		return strings.ToUpper(s[:i]) + s[i:]
	}
}

func TestLocaleCompareMatchesReference(t *testing.T) {
	t.Parallel()
	fixed := []string{
		"", "a", "A", "aa", "aA", "Aa", "AA", "a_b", "a-b", "a b", "ab", "a1", "a10", "a9", "tool_000", "tool_001",
		"Tool_001", "tool_0010", "é", "e", "E", "f", "\xff", "\ufffd", "\xffa", "\ufffdA", "\xc3", "\xc3\xa9",
		"server-01", "server_01", "server-1", "α", "Ω", "😀", "€", "٣", "3",
	}
	for _, a := range fixed {
		for _, b := range fixed {
			if got, want := LocaleCompare(a, b), localeCompareRef(a, b); got != want {
				t.Errorf("LocaleCompare(%q, %q) = %d, the reference says %d", a, b, got, want)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		a := randomName(r)
		b := randomName(r)
		if r.IntN(2) == 0 {
			b = mutate(r, a)
		}
		if got, want := LocaleCompare(a, b), localeCompareRef(a, b); got != want {
			t.Fatalf("LocaleCompare(%q, %q) = %d, the reference says %d", a, b, got, want)
		}
	}
}

// TestLocaleCompareTotalOrder checks that on valid UTF-8 only equal
// strings compare equal and that the order is antisymmetric, which the
// runtime's catalog sort relies on to rank names.
func TestLocaleCompareTotalOrder(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for range 100_000 {
		a, b := strings.ToValidUTF8(randomName(r), "\ufffd"), strings.ToValidUTF8(randomName(r), "\ufffd")
		if r.IntN(2) == 0 {
			b = strings.ToValidUTF8(mutate(r, a), "\ufffd")
		}
		ab, ba := LocaleCompare(a, b), LocaleCompare(b, a)
		if ab != -ba || (ab == 0) != (a == b) {
			t.Fatalf("LocaleCompare(%q, %q) = %d, reversed %d", a, b, ab, ba)
		}
	}
}

func TestSortLocaleMatchesReference(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		names := make([]string, 1+r.IntN(300))
		for i := range names {
			if i > 0 && r.IntN(3) == 0 {
				names[i] = mutate(r, names[r.IntN(i)])
			} else {
				names[i] = randomName(r)
			}
		}
		want := slices.Clone(names)
		sort.SliceStable(want, func(i, j int) bool { return localeCompareRef(want[i], want[j]) < 0 })
		SortLocale(names)
		if !slices.Equal(names, want) {
			t.Fatalf("SortLocale:\n%q\nthe reference:\n%q", names, want)
		}
	}
}

// FuzzLocaleCompare holds LocaleCompare to the reference on any bytes.
func FuzzLocaleCompare(f *testing.F) {
	for _, p := range [][2]string{{"tool_001", "tool_010"}, {"a", "A"}, {"é", "E"}, {"\xff", "\ufffd"}, {"a b", "a_b"}, {"x\xc3", "x\xc3\xa9"}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if got, want := LocaleCompare(a, b), localeCompareRef(a, b); got != want {
			t.Fatalf("LocaleCompare(%q, %q) = %d, the reference says %d", a, b, got, want)
		}
	})
}

// BenchmarkLocaleCompare compares catalog-like names (a shared prefix,
// ASCII) with LocaleCompare and with the reference.
func BenchmarkLocaleCompare(b *testing.B) {
	pairs := [][2]string{{"tool_013", "tool_047"}, {"server-07", "server-31"}, {"read_file", "Read_File"}, {"search", "search"}, {"café_menu", "cafe_menu"}}
	for _, bc := range []struct {
		name string
		fn   func(a, b string) int
	}{{"fast", LocaleCompare}, {"reference", localeCompareRef}} {
		b.Run(bc.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				for _, p := range pairs {
					n += bc.fn(p[0], p[1])
				}
			}
			_ = n
		})
	}
}
