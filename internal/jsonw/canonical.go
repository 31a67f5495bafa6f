package jsonw

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendCanonical appends the canonical form of the JSON value src (white
// space around it allowed) to dst: the JSON Canonicalization Scheme of
// RFC 8785, so that two texts an MCP peer may send for one value (members
// in another order, other white space, other escapes, 1.0 for 1) have one
// form, byte for byte:
//
//   - no white space;
//   - object members sorted by their names' UTF-16 code units (RFC 8785
//     §3.2.3); members with the same name, which RFC 8785 does not accept,
//     are all kept, in their order, so that no text two JSON readers could
//     read two ways collapses into one reading;
//   - strings as JSON.stringify writes them ([AppendString]: only '"',
//     '\\' and control characters escaped; invalid UTF-8 becomes U+FFFD);
//   - numbers as ECMAScript's Number.prototype.toString writes the IEEE
//     754 double they denote (1.0 → 1, 1E3 → 1000, 1e21 → 1e+21, -0 → 0);
//     a number beyond the double range keeps its text;
//   - true, false and null as they are.
//
// It fails, naming the offset, on input that is not one JSON value or is
// nested deeper than [MaxDepth].
func AppendCanonical(dst, src []byte) ([]byte, error) {
	n := len(dst)
	dst, end, err := appendCanonical(dst, src, SkipSpace(src, 0), MaxDepth)
	if err == nil && SkipSpace(src, end) != len(src) {
		err = want(src, SkipSpace(src, end), "the end of the value")
	}
	if err != nil {
		return dst[:n], err
	}
	return dst, nil
}

// canonMember is one member of an object being canonicalized: its decoded
// name and the span of its canonical value in the scratch buffer.
type canonMember struct {
	key        string
	start, end int
}

func appendCanonical(dst, b []byte, i, depth int) ([]byte, int, error) {
	if i >= len(b) {
		return dst, i, want(b, i, "a value")
	}
	switch c := b[i]; {
	case c == '{':
		var (
			members []canonMember
			scratch []byte
		)
		end, err := EachMember(b, i, depth, func(key []byte, _, vs int) (int, error) {
			start := len(scratch)
			var e int
			var err error
			scratch, e, err = appendCanonical(scratch, b, vs, depth-1)
			members = append(members, canonMember{key: string(key), start: start, end: len(scratch)})
			return e, err
		})
		if err != nil {
			return dst, end, err
		}
		slices.SortStableFunc(members, func(x, y canonMember) int { return compareUTF16(x.key, y.key) })
		dst = append(dst, '{')
		for k, m := range members {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, m.key)
			dst = append(dst, ':')
			dst = append(dst, scratch[m.start:m.end]...)
		}
		return append(dst, '}'), end, nil
	case c == '[':
		if depth <= 0 {
			return dst, i, errors.New("nesting too deep at offset " + strconv.Itoa(i))
		}
		dst = append(dst, '[')
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return append(dst, ']'), i + 1, nil
		}
		for first := true; ; first = false {
			if !first {
				dst = append(dst, ',')
			}
			var err error
			if dst, i, err = appendCanonical(dst, b, i, depth-1); err != nil {
				return dst, i, err
			}
			i = SkipSpace(b, i)
			switch {
			case i < len(b) && b[i] == ',':
				i = SkipSpace(b, i+1)
			case i < len(b) && b[i] == ']':
				return append(dst, ']'), i + 1, nil
			default:
				return dst, i, want(b, i, ", or ]")
			}
		}
	case c == '"':
		end, plain, err := ScanString(b, i)
		if err != nil {
			return dst, end, err
		}
		if plain { // no escapes, valid UTF-8, no control characters
			return append(dst, b[i:end]...), end, nil
		}
		var s string
		if err := json.Unmarshal(b[i:end], &s); err != nil {
			return dst, end, err
		}
		return AppendString(dst, s), end, nil
	case c == '-' || '0' <= c && c <= '9':
		end, err := scanNumber(b, i)
		if err != nil {
			return dst, end, err
		}
		return appendCanonicalNumber(dst, b[i:end]), end, nil
	case hasLiteral(b, i, "true"):
		return append(dst, "true"...), i + 4, nil
	case hasLiteral(b, i, "false"):
		return append(dst, "false"...), i + 5, nil
	case hasLiteral(b, i, "null"):
		return append(dst, "null"...), i + 4, nil
	}
	return dst, i, want(b, i, "a value")
}

// appendCanonicalNumber appends the JSON number text num in
// Number.prototype.toString's form of the double it denotes; num beyond the
// double range is appended as it is.
func appendCanonicalNumber(dst, num []byte) []byte {
	// An integer of at most 15 digits without a leading zero is exact as a
	// double and written as it is.
	digits := num
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) > 0 && len(digits) <= 15 && digits[0] != '0' {
		plain := true
		for _, d := range digits {
			if d < '0' || d > '9' {
				plain = false
				break
			}
		}
		if plain {
			return append(dst, num...)
		}
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil { // beyond the double range
		return append(dst, num...)
	}
	if f == 0 {
		return append(dst, '0')
	}
	// ECMAScript's form, as encoding/json writes a float64: fixed notation
	// from 1e-6 up to 1e21, exponent notation outside, with the shortest
	// digits that read back as f and no zero-padded exponent.
	format := byte('f')
	if abs := math.Abs(f); abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// compareUTF16 compares a and b by their UTF-16 code units, the order of
// RFC 8785 §3.2.3. It differs from the order of code points (and of UTF-8
// bytes) only between a character above U+FFFF, whose first unit is a
// surrogate (U+D800–U+DBFF), and one of U+E000–U+FFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return utf16Unit(ra) - utf16Unit(rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// utf16Unit returns a key that orders r as its first UTF-16 code unit does,
// and supplementary characters among themselves by code point.
func utf16Unit(r rune) int {
	if r < 0x10000 {
		if r >= 0xE000 {
			return int(r) + 0x4000000 // after every surrogate-led key
		}
		return int(r)
	}
	// 0xD800 + the high ten bits, scaled so that the low bits keep the
	// order of characters sharing a lead surrogate.
	return 0xD800<<10 + int(r-0x10000)
}
