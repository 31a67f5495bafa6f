package policy

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// Raw is one JSON value exactly as the host sent it (compact, UTF-8), for
// example a tool call's arguments. A Raw taken from a hook's input points
// into the host's input buffer: it is valid only during the hook call, so
// copy it (append(Raw(nil), r...)) to keep it. The zero Raw is an absent
// value.
type Raw []byte

// Get returns the value of member key when r is a JSON object that has
// it, and nil otherwise (r is not an object, or key is absent). It scans r
// without allocating.
func (r Raw) Get(key string) Raw {
	d := decoder{b: r}
	var found Raw
	err := d.object(func(k []byte, d *decoder) error {
		if found == nil && string(k) == key {
			v, err := d.skip()
			found = v
			return err
		}
		_, err := d.skip()
		return err
	})
	if err != nil {
		return nil
	}
	return found
}

// String returns the value of r when it is a JSON string, unescaped.
func (r Raw) String() (string, bool) {
	if len(r) == 0 || r[0] != '"' {
		return "", false
	}
	d := decoder{b: r}
	s, err := d.str()
	if err != nil || d.i != len(r) {
		return "", false
	}
	return s, true
}

// Int returns the value of r when it is a JSON number that is an integer
// in int64's range.
func (r Raw) Int() (int64, bool) {
	n, err := strconv.ParseInt(string(r), 10, 64)
	return n, err == nil
}

// Bool returns the value of r when it is true or false.
func (r Raw) Bool() (value, ok bool) {
	switch string(r) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// Strings returns the elements of r when it is a JSON array of strings.
func (r Raw) Strings() ([]string, bool) {
	d := decoder{b: r}
	var ss []string
	err := d.array(func(d *decoder) error {
		s, err := d.str()
		ss = append(ss, s)
		return err
	})
	if err != nil || d.end() != nil {
		return nil, false
	}
	return ss, true
}

// errSyntax is wrapped by every decoding error.
var errSyntax = errors.New("invalid JSON")

// decoder is a strict, allocation-light JSON reader over one input.
type decoder struct {
	b []byte
	i int
}

func (d *decoder) fail(what string) error {
	return &SyntaxError{Offset: d.i, What: what}
}

// SyntaxError is a malformed hook input or configuration: what was
// expected, and the byte offset where it was not found. It wraps
// errSyntax for errors.Is inside the SDK.
type SyntaxError struct {
	Offset int
	What   string
}

func (e *SyntaxError) Error() string {
	return "invalid JSON at byte " + strconv.Itoa(e.Offset) + ": " + e.What
}

func (e *SyntaxError) Unwrap() error { return errSyntax }

func (d *decoder) ws() {
	for d.i < len(d.b) && isSpace(d.b[d.i]) {
		d.i++
	}
}

// end checks that only white space follows the value just read.
func (d *decoder) end() error {
	d.ws()
	if d.i != len(d.b) {
		return d.fail("data after the JSON value")
	}
	return nil
}

// object reads an object, calling member for each key with the decoder
// positioned at the member's value; member must consume the value.
func (d *decoder) object(member func(key []byte, d *decoder) error) error {
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != '{' {
		return d.fail("want an object")
	}
	d.i++
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return nil
	}
	for {
		d.ws()
		key, err := d.key()
		if err != nil {
			return err
		}
		d.ws()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return d.fail("want ':' after an object key")
		}
		d.i++
		d.ws()
		if err := member(key, d); err != nil {
			return err
		}
		d.ws()
		if d.i >= len(d.b) {
			return d.fail("unterminated object")
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return nil
		default:
			return d.fail("want ',' or '}' in an object")
		}
	}
}

// array reads an array, calling elem with the decoder at each element.
func (d *decoder) array(elem func(d *decoder) error) error {
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != '[' {
		return d.fail("want an array")
	}
	d.i++
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return nil
	}
	for {
		d.ws()
		if err := elem(d); err != nil {
			return err
		}
		d.ws()
		if d.i >= len(d.b) {
			return d.fail("unterminated array")
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return nil
		default:
			return d.fail("want ',' or ']' in an array")
		}
	}
}

// key reads an object key; a key without escapes is returned as a view of
// the input (no allocation).
func (d *decoder) key() ([]byte, error) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, d.fail("want a string key")
	}
	for j := d.i + 1; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			k := d.b[d.i+1 : j]
			d.i = j + 1
			return k, nil
		case c == '\\':
			s, err := d.str()
			return []byte(s), err
		case c < 0x20:
			d.i = j
			return nil, d.fail("control character in a string")
		}
	}
	return nil, d.fail("unterminated string")
}

// str reads a string and returns it unescaped; invalid UTF-8 and lone
// surrogates become U+FFFD.
func (d *decoder) str() (string, error) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return "", d.fail("want a string")
	}
	start := d.i + 1
	j := start
	for j < len(d.b) && d.b[j] != '"' && d.b[j] != '\\' && d.b[j] >= 0x20 && d.b[j] < utf8.RuneSelf {
		j++
	}
	if j < len(d.b) && d.b[j] == '"' {
		d.i = j + 1
		return string(d.b[start:j]), nil
	}
	buf := append([]byte(nil), d.b[start:j]...)
	for j < len(d.b) {
		c := d.b[j]
		switch {
		case c == '"':
			d.i = j + 1
			return string(buf), nil
		case c < 0x20:
			d.i = j
			return "", d.fail("control character in a string")
		case c == '\\':
			if j+1 >= len(d.b) {
				d.i = j
				return "", d.fail("unterminated escape")
			}
			j++
			switch d.b[j] {
			case '"', '\\', '/':
				buf = append(buf, d.b[j])
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, n, ok := hex4(d.b[j+1:])
				if !ok {
					d.i = j
					return "", d.fail("bad \\u escape")
				}
				j += n
				if r >= 0xd800 && r < 0xdc00 && j+6 < len(d.b) && d.b[j+1] == '\\' && d.b[j+2] == 'u' {
					if r2, _, ok := hex4(d.b[j+3:]); ok && r2 >= 0xdc00 && r2 < 0xe000 {
						r = 0x10000 + (r-0xd800)<<10 + (r2 - 0xdc00)
						j += 6
					}
				}
				if r >= 0xd800 && r < 0xe000 {
					r = utf8.RuneError
				}
				buf = utf8.AppendRune(buf, r)
			default:
				d.i = j
				return "", d.fail("unknown escape")
			}
			j++
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			j++
		default:
			r, n := utf8.DecodeRune(d.b[j:])
			buf = utf8.AppendRune(buf, r)
			j += n
		}
	}
	d.i = j
	return "", d.fail("unterminated string")
}

func hex4(b []byte) (rune, int, bool) {
	if len(b) < 4 {
		return 0, 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, 0, false
		}
	}
	return r, 4, true
}

// skip reads any value and returns its bytes.
func (d *decoder) skip() (Raw, error) {
	d.ws()
	start := d.i
	if d.i >= len(d.b) {
		return nil, d.fail("want a value")
	}
	var err error
	switch c := d.b[d.i]; {
	case c == '{':
		err = d.object(func(_ []byte, d *decoder) error { _, err := d.skip(); return err })
	case c == '[':
		err = d.array(func(d *decoder) error { _, err := d.skip(); return err })
	case c == '"':
		_, err = d.key() // validates without unescaping when it can
	case c == 't':
		err = d.lit("true")
	case c == 'f':
		err = d.lit("false")
	case c == 'n':
		err = d.lit("null")
	case c == '-' || ('0' <= c && c <= '9'):
		err = d.number()
	default:
		err = d.fail("want a value")
	}
	if err != nil {
		return nil, err
	}
	return Raw(d.b[start:d.i]), nil
}

func (d *decoder) lit(s string) error {
	if len(d.b)-d.i < len(s) || string(d.b[d.i:d.i+len(s)]) != s {
		return d.fail("want " + s)
	}
	d.i += len(s)
	return nil
}

// number reads a number with JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *decoder) number() error {
	start := d.i
	digits := func() int {
		n := 0
		for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	bad := func() error {
		d.i = start
		return d.fail("bad number")
	}
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	if d.i < len(d.b) && d.b[d.i] == '0' {
		d.i++
	} else if digits() == 0 {
		return bad()
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return bad()
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return bad()
		}
	}
	return nil
}

// integer reads a non-negative JSON integer.
func (d *decoder) integer() (int64, error) {
	v, err := d.skip()
	if err != nil {
		return 0, err
	}
	n, ok := v.Int()
	if !ok {
		return 0, d.fail("want an integer")
	}
	return n, nil
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// so the output is always valid JSON.
func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\ufffd"...)
			i++
			start = i
			continue
		}
		i += n
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// ParseObject decodes a JSON object into its members, keyed by name (the
// last of duplicate keys wins). It suits configurations, read once per
// instance; on the hot path prefer [Raw.Get], which does not allocate.
func ParseObject(b []byte) (map[string]Raw, error) {
	d := decoder{b: b}
	m := map[string]Raw{}
	err := d.object(func(k []byte, d *decoder) error {
		v, err := d.skip()
		m[string(k)] = v
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return m, nil
}
