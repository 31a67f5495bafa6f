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
func LocaleCompare(a, b string) int {
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

// primaryWeight returns a sortable weight for r, ignoring case.
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

func comparePrimary(a, b string) int {
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
