package config

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// LocaleCompare orders strings the way OpenClaw's String.prototype
// .localeCompare (ICU, root locale) orders server and tool names, closely
// enough for names: white space, then punctuation and symbols (in CLDR root
// order), then digits, then letters case-insensitively with other scripts
// after Latin; ties are broken lowercase-first, then by code point. It
// returns -1, 0 or +1.
//
// For valid UTF-8 it is a total order: 0 means a == b. Names are compared
// a byte at a time, with a table of weights, while both sides are ASCII;
// other runes are classified with the unicode tables.
func LocaleCompare(a, b string) int {
	if a == b {
		return 0
	}
	// Skip the common ASCII prefix: each of its bytes is one rune, the same
	// on both sides, so it decides neither level.
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] && a[i] < utf8.RuneSelf {
		i++
	}
	a, b = a[i:], b[i:]
	if c := comparePrimary(a, b); c != 0 {
		return c
	}
	// Tertiary level: lowercase before uppercase at the first difference.
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

// SortLocale sorts names in place by [LocaleCompare].
func SortLocale(names []string) {
	sort.SliceStable(names, func(i, j int) bool { return LocaleCompare(names[i], names[j]) < 0 })
}

// punctOrder is the CLDR root order of ASCII punctuation and symbols.
const punctOrder = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"

// asciiWeight is primaryWeight of each ASCII rune.
var asciiWeight = func() (w [utf8.RuneSelf]int32) {
	for r := range rune(utf8.RuneSelf) {
		w[r] = int32(primaryWeight(r))
	}
	return w
}()

// primaryWeight returns a sortable weight for r, ignoring case. Weights
// are below 0x120000.
func primaryWeight(r rune) int {
	switch {
	case unicode.IsSpace(r):
		return 0x100 + int(r)
	case r < 0x80 && strings.ContainsRune(punctOrder, r):
		return 0x1000 + strings.IndexRune(punctOrder, r)
	case unicode.IsPunct(r) || unicode.IsSymbol(r):
		return 0x2000 + int(r)
	case r >= '0' && r <= '9':
		return 0x3000 + int(r-'0')
	case unicode.IsDigit(r):
		return 0x3100 + int(r)
	case r < 0x80 && unicode.IsLetter(r):
		return 0x4000 + int(unicode.ToLower(r))
	default:
		return 0x10000 + int(unicode.ToLower(r))
	}
}

// comparePrimary compares the primary weights of a and b, rune by rune; a
// shorter sequence that is a prefix of the other sorts first.
func comparePrimary(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		var wa, wb int32
		if ca, cb := a[i], b[j]; ca < utf8.RuneSelf && cb < utf8.RuneSelf {
			wa, wb = asciiWeight[ca], asciiWeight[cb]
			i, j = i+1, j+1
		} else {
			ra, na := utf8.DecodeRuneInString(a[i:])
			rb, nb := utf8.DecodeRuneInString(b[j:])
			wa, wb = int32(primaryWeight(ra)), int32(primaryWeight(rb))
			i, j = i+na, j+nb
		}
		if wa != wb {
			if wa < wb {
				return -1
			}
			return 1
		}
	}
	switch {
	case i == len(a) && j == len(b):
		return 0
	case i == len(a):
		return -1
	default:
		return 1
	}
}
