package bridge

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// This file holds the small JSON writer the bridge uses to produce objects
// whose key order matches OpenClaw's (JavaScript objects serialize keys in
// insertion order; Go maps do not), and the pretty printer that mirrors
// JSON.stringify(value, null, 2).

// object appends one JSON object, key by key, in the order written.
type object struct {
	buf []byte
	n   int
}

func newObject(buf []byte) *object { return &object{buf: append(buf, '{')} }

func (o *object) key(k string) {
	if o.n > 0 {
		o.buf = append(o.buf, ',')
	}
	o.n++
	o.buf = appendString(o.buf, k)
	o.buf = append(o.buf, ':')
}

// str writes a string member.
func (o *object) str(k, v string) {
	o.key(k)
	o.buf = appendString(o.buf, v)
}

// raw writes a member whose value is already JSON.
func (o *object) raw(k string, v []byte) {
	o.key(k)
	o.buf = append(o.buf, v...)
}

// int writes an integer member.
func (o *object) int(k string, v int64) {
	o.key(k)
	o.buf = strconv.AppendInt(o.buf, v, 10)
}

// bool writes a boolean member.
func (o *object) bool(k string, v bool) {
	o.key(k)
	o.buf = strconv.AppendBool(o.buf, v)
}

func (o *object) close() []byte { return append(o.buf, '}') }

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way JSON.stringify writes it:
// only '"', '\\' and control characters are escaped; '<', '>', '&' and
// non-ASCII characters are written as they are. Invalid UTF-8 becomes U+FFFD.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				buf = append(buf, s[start:i]...)
				buf = append(buf, "\ufffd"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		buf = append(buf, s[start:i]...)
		switch c {
		case '"':
			buf = append(buf, '\\', '"')
		case '\\':
			buf = append(buf, '\\', '\\')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\t':
			buf = append(buf, '\\', 't')
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\f':
			buf = append(buf, '\\', 'f')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// pretty renders compact JSON as JSON.stringify(value, null, 2) would: two
// spaces of indent, key order kept, empty objects and arrays as {} and [].
func pretty(compact []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, compact, "", "  "); err != nil {
		return string(compact)
	}
	return b.String()
}

// compactJSON returns raw without insignificant whitespace. Gateway payloads
// normally arrive compact, so the common case costs one scan.
func compactJSON(raw []byte) []byte {
	if bytes.IndexAny(raw, " \n\r\t") < 0 {
		return raw
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// jsonKind classifies a raw JSON value by its first byte.
type jsonKind byte

const (
	kindNone jsonKind = iota
	kindNull
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func kindOf(raw json.RawMessage) jsonKind {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return kindNone
	}
	switch raw[0] {
	case 'n':
		return kindNull
	case 't', 'f':
		return kindBool
	case '"':
		return kindString
	case '[':
		return kindArray
	case '{':
		return kindObject
	default:
		return kindNumber
	}
}

// rawString returns the string a raw JSON value holds, and whether it is one.
func rawString(raw json.RawMessage) (string, bool) {
	if kindOf(raw) != kindString {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// nonEmptyString returns the value of raw when it is a non-empty string.
func nonEmptyString(raw json.RawMessage) (string, bool) {
	s, ok := rawString(raw)
	return s, ok && s != ""
}

// present reports whether raw holds a value other than null or the empty
// string: JavaScript's notion of a usable optional field.
func present(raw json.RawMessage) bool {
	switch kindOf(raw) {
	case kindNone, kindNull:
		return false
	case kindString:
		s, _ := rawString(raw)
		return s != ""
	}
	return true
}
