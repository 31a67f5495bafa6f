package jsonw

import (
	"bytes"
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
	var c Canonicalizer
	return c.Append(dst, src)
}

// Canonicalizer writes canonical forms as [AppendCanonical] does, keeping
// its buffers from one call to the next: for many values in a row (the
// schemas of a catalog) it allocates next to nothing. The zero value is
// ready; it is not safe for concurrent use.
type Canonicalizer struct {
	members []canonMember // the members of the objects open, innermost last
	scratch []byte        // a copy of the members of the object being sorted
}

// Append appends the canonical form of src to dst ([AppendCanonical]).
func (c *Canonicalizer) Append(dst, src []byte) ([]byte, error) {
	n := len(dst)
	c.members = c.members[:0]
	dst, end, err := c.value(dst, src, SkipSpace(src, 0), 0)
	if err == nil && SkipSpace(src, end) != len(src) {
		err = want(src, SkipSpace(src, end), "the end of the value")
	}
	if err != nil {
		return dst[:n], err
	}
	return dst, nil
}

// canonMember is one member of an object being canonicalized: its decoded
// name (a slice of the input when it has no escapes), whether the name
// holds a character that UTF-8 and UTF-16 order differently (highRune),
// and the span of the member's canonical text ("name":value) in the
// output.
type canonMember struct {
	key        []byte
	high       bool
	start, end int
}

// value appends the canonical form of the value at b[i], at nesting level
// level (the containers open around it), and returns the offset after it.
func (c *Canonicalizer) value(dst, b []byte, i, level int) ([]byte, int, error) {
	if i >= len(b) {
		return dst, i, want(b, i, "a value")
	}
	switch ch := b[i]; {
	case ch == '{':
		if level >= MaxDepth {
			return dst, i, errors.New("nesting too deep at offset " + strconv.Itoa(i))
		}
		// The members are written in their order; an object whose names
		// are not in order is then rewritten sorted, from a copy.
		base, obj := len(c.members), len(dst)
		dst = append(dst, '{')
		sorted := true
		end, err := EachMember(b, i, MaxDepth-level, func(key []byte, ks, vs int) (int, error) {
			if len(c.members) > base {
				dst = append(dst, ',')
			}
			m := canonMember{key: key, high: highRune(key), start: len(dst)}
			if len(key) > 0 && &key[0] == &b[ks+1] {
				// A name without escapes (EachMember hands it out as a
				// slice of b): its text is its canonical form.
				dst = append(dst, b[ks:ks+len(key)+2]...)
			} else {
				dst = AppendString(dst, string(key))
			}
			dst = append(dst, ':')
			var e int
			var err error
			dst, e, err = c.value(dst, b, vs, level+1)
			m.end = len(dst)
			if n := len(c.members); n > base && compareMembers(&c.members[n-1], &m) > 0 {
				sorted = false
			}
			c.members = append(c.members, m)
			return e, err
		})
		if err != nil {
			c.members = c.members[:base]
			return dst[:obj], end, err
		}
		if !sorted {
			members := c.members[base:]
			sortMembers(members)
			c.scratch = append(c.scratch[:0], dst[obj:]...)
			dst = append(dst[:obj], '{')
			for k, m := range members {
				if k > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, c.scratch[m.start-obj:m.end-obj]...)
			}
		}
		c.members = c.members[:base]
		return append(dst, '}'), end, nil
	case ch == '[':
		if level >= MaxDepth {
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
			if dst, i, err = c.value(dst, b, i, level+1); err != nil {
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
	case ch == '"':
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
	case ch == '-' || '0' <= ch && ch <= '9':
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

// sortMembers sorts members stably by compareMembers: an insertion sort
// for the few members of most objects.
func sortMembers(m []canonMember) {
	if len(m) > 16 {
		slices.SortStableFunc(m, func(x, y canonMember) int { return compareMembers(&x, &y) })
		return
	}
	for i := 1; i < len(m); i++ {
		for j := i; j > 0 && compareMembers(&m[j-1], &m[j]) > 0; j-- {
			m[j-1], m[j] = m[j], m[j-1]
		}
	}
}

// compareMembers is compareUTF16 of two members' names, by their bytes
// when neither holds a character of U+E000 or above (the only ones whose
// UTF-8 order is not their UTF-16 order).
func compareMembers(x, y *canonMember) int {
	if !x.high && !y.high {
		return bytes.Compare(x.key, y.key)
	}
	return compareUTF16(string(x.key), string(y.key))
}

// highRune reports whether k holds a lead byte of a character of U+E000 or
// above (0xEE–0xF4 in valid UTF-8).
func highRune(k []byte) bool {
	for _, c := range k {
		if c >= 0xEE {
			return true
		}
	}
	return false
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
