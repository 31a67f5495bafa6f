package jsonw

import (
	"bytes"
	"errors"
	"strings"
	"unicode/utf8"
)

// ErrMalformed is the error of the scanner for well-formed JSON
// ([SkipString], [SkipValue], [Members], [Elements]) on input it cannot
// walk.
var ErrMalformed = errors.New("malformed JSON")

// SkipSpace returns the offset of the first byte at or after b[i] that is
// not JSON white space (space, tab, CR, LF).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// SkipString returns the offset after the string whose opening quote is
// b[i]. It finds the closing quote without checking escapes or control
// characters; an unterminated string is [ErrMalformed].
func SkipString(b []byte, i int) (int, error) {
	for i++; i < len(b); {
		// IndexByte is vectorized: most of a Gateway payload is string bytes.
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			break
		}
		end := i + q
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for j := end - 1; j >= i && b[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return end + 1, nil
		}
		i = end + 1
	}
	return 0, ErrMalformed
}

// SkipValue returns the offset after the value that starts at b[i]. It
// matches brackets and strings but does not check the bytes between them:
// b must be well formed where it matters to the caller.
func SkipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, ErrMalformed
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, err := SkipString(b, i)
				if err != nil {
					return 0, err
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, ErrMalformed
	}
	start := i
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' &&
		b[i] != ' ' && b[i] != '\n' && b[i] != '\r' && b[i] != '\t' {
		i++
	}
	if i == start {
		return 0, ErrMalformed
	}
	return i, nil
}

// Members calls fn with each member of the JSON object raw (white space
// around it allowed), in order: key is the raw key without its quotes
// (escapes kept), val the raw value. Anything but an object is
// [ErrMalformed].
func Members(raw []byte, fn func(key, val []byte)) error {
	i := SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return ErrMalformed
	}
	i = SkipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return nil
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return ErrMalformed
		}
		end, err := SkipString(raw, i)
		if err != nil {
			return err
		}
		key := raw[i+1 : end-1]
		i = SkipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return ErrMalformed
		}
		i = SkipSpace(raw, i+1)
		vend, err := SkipValue(raw, i)
		if err != nil {
			return err
		}
		fn(key, raw[i:vend])
		i = SkipSpace(raw, vend)
		if i >= len(raw) {
			return ErrMalformed
		}
		switch raw[i] {
		case ',':
			i = SkipSpace(raw, i+1)
		case '}':
			return nil
		default:
			return ErrMalformed
		}
	}
}

// Elements calls fn with each element of the JSON array raw, in order.
// Anything but an array is [ErrMalformed].
func Elements(raw []byte, fn func(elem []byte)) error {
	i := SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return ErrMalformed
	}
	i = SkipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return nil
	}
	for {
		end, err := SkipValue(raw, i)
		if err != nil {
			return err
		}
		fn(raw[i:end])
		i = SkipSpace(raw, end)
		if i >= len(raw) {
			return ErrMalformed
		}
		switch raw[i] {
		case ',':
			i = SkipSpace(raw, i+1)
		case ']':
			return nil
		default:
			return ErrMalformed
		}
	}
}

// FirstElement returns the first element of the JSON array raw, or nil when
// raw is not an array or is empty.
func FirstElement(raw []byte) []byte {
	i := SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil
	}
	i = SkipSpace(raw, i+1)
	end, err := SkipValue(raw, i)
	if err != nil || raw[i] == ']' {
		return nil
	}
	return raw[i:end]
}

// PlainKey reports whether the raw object key k (without quotes) is
// printable ASCII without escapes, so that its bytes are its value.
func PlainKey(k []byte) bool {
	for _, c := range k {
		if c < 0x20 || c >= utf8.RuneSelf || c == '\\' {
			return false
		}
	}
	return true
}

// FoldsTo reports whether the plain ASCII key k equals one of names
// case-insensitively: a key encoding/json matches to a field where
// JavaScript and an exact comparison do not.
func FoldsTo(k []byte, names []string) bool {
	for _, n := range names {
		if len(n) == len(k) && strings.EqualFold(string(k), n) {
			return true
		}
	}
	return false
}

// PlainString returns the value of the raw JSON string raw (white space
// around it allowed) when it has no escape and is valid UTF-8, which is
// then exactly what encoding/json decodes; ok is false otherwise.
func PlainString(raw []byte) (s string, ok bool) {
	raw = bytes.Trim(raw, " \t\r\n")
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	for _, c := range in {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}
