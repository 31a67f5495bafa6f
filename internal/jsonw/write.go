package jsonw

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string the way JavaScript's
// JSON.stringify writes it: '"', '\\' and control characters are escaped
// (\b \f \n \r \t, else \u00xx); '<', '>', '&', U+2028, U+2029 and every
// other character are written as they are. Invalid UTF-8 becomes U+FFFD,
// one per bad byte, as encoding/json decodes it. encoding/json writes the
// same string except that it escapes U+2028 and U+2029, writes U+FFFD as
// \ufffd and, unless told otherwise, escapes '<', '>' and '&'; every JSON
// decoder reads both as the same string.
func AppendString(buf []byte, s string) []byte {
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
		case '"', '\\':
			buf = append(buf, '\\', c)
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

// Object appends one JSON object to Buf, member by member, in the order
// written: a JavaScript object's key order, which a Go map would lose.
// Write a value of a kind without a method by calling [Object.Key] and
// appending the value's JSON to Buf.
type Object struct {
	// Buf holds the JSON written so far.
	Buf []byte
	n   int
}

// NewObject starts an object at the end of buf.
func NewObject(buf []byte) *Object { return &Object{Buf: append(buf, '{')} }

// Key writes the separator, key and colon of the next member; its value
// goes to o.Buf next.
func (o *Object) Key(k string) {
	if o.n > 0 {
		o.Buf = append(o.Buf, ',')
	}
	o.n++
	o.Buf = AppendString(o.Buf, k)
	o.Buf = append(o.Buf, ':')
}

// Str writes a string member.
func (o *Object) Str(k, v string) {
	o.Key(k)
	o.Buf = AppendString(o.Buf, v)
}

// Raw writes a member whose value v is already JSON.
func (o *Object) Raw(k string, v []byte) {
	o.Key(k)
	o.Buf = append(o.Buf, v...)
}

// Int writes an integer member.
func (o *Object) Int(k string, v int64) {
	o.Key(k)
	o.Buf = strconv.AppendInt(o.Buf, v, 10)
}

// Bool writes a boolean member.
func (o *Object) Bool(k string, v bool) {
	o.Key(k)
	o.Buf = strconv.AppendBool(o.Buf, v)
}

// Close ends the object and returns the buffer.
func (o *Object) Close() []byte { return append(o.Buf, '}') }

// Indent renders JSON as JSON.stringify(value, null, 2) does: two spaces
// of indent, key order kept, empty objects and arrays as {} and []. Compact
// input (as this package writes it) takes one pass; other input goes to
// json.Indent, and input that is not JSON is returned as it is.
func Indent(src []byte) []byte {
	if out, ok := indentCompact(src); ok {
		return out
	}
	var b bytes.Buffer
	if err := json.Indent(&b, src, "", "  "); err != nil {
		return src
	}
	return b.Bytes()
}

// indentCompact is json.Indent(…, "", "  ") for compact JSON, in one pass
// without the validating state machine. It reports false, leaving the work
// to json.Indent, when src has white space outside strings or ends inside
// a string.
func indentCompact(src []byte) ([]byte, bool) {
	out := make([]byte, 0, len(src)+len(src)/2)
	depth := 0
	newline := func() {
		out = append(out, '\n')
		for range depth {
			out = append(out, ' ', ' ')
		}
	}
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '"':
			end, err := SkipString(src, i)
			if err != nil {
				return nil, false
			}
			out = append(out, src[i:end]...)
			i = end - 1
		case '{', '[':
			if i+1 < len(src) && (src[i+1] == '}' || src[i+1] == ']') {
				out = append(out, c, src[i+1])
				i++
				continue
			}
			out = append(out, c)
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			out = append(out, c)
		case ',':
			out = append(out, ',')
			newline()
		case ':':
			out = append(out, ':', ' ')
		case ' ', '\t', '\r', '\n':
			return nil, false
		default:
			out = append(out, c)
		}
	}
	return out, true
}

// Compact returns raw without insignificant white space, or raw itself
// when it has none (the common case: one scan) or is not JSON.
func Compact(raw []byte) []byte {
	if !hasInsignificantSpace(raw) {
		return raw
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// hasInsignificantSpace reports whether raw has white space outside its
// strings.
func hasInsignificantSpace(raw []byte) bool {
	inString, escaped := false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\n' || c == '\r' || c == '\t':
			return true
		}
	}
	return false
}
