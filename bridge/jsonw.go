package bridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
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
	if out, ok := indentCompact(compact); ok {
		return out
	}
	var b bytes.Buffer
	if err := json.Indent(&b, compact, "", "  "); err != nil {
		return string(compact)
	}
	return b.String()
}

// indentCompact is json.Indent(…, "", "  ") for compact JSON, in one pass
// without the validating state machine: the bridge only pretty-prints JSON
// it wrote itself. It reports false, leaving the work to json.Indent, when
// src has whitespace outside strings or ends inside a string.
func indentCompact(src []byte) (string, bool) {
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
			end, err := skipString(src, i)
			if err != nil {
				return "", false
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
			return "", false
		default:
			out = append(out, c)
		}
	}
	return string(out), true
}

// compactJSON returns raw without insignificant whitespace. Gateway payloads
// normally arrive compact, so the common case costs one scan.
func compactJSON(raw []byte) []byte {
	if !hasInsignificantSpace(raw) {
		return raw
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// hasInsignificantSpace reports whether raw has whitespace outside its
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
	if s, ok := plainString(raw); ok {
		return s, true
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

// This scanner reads the few members the bridge needs from a large Gateway
// payload without decoding the rest: a session.message payload is a few KB,
// mostly a session row the bridge passes through untouched. It assumes the
// input is valid JSON (the Gateway client decoded the frame it came in) and
// reports malformed structure as errMalformed; it never panics.

var errMalformed = errors.New("malformed JSON")

func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\n' || raw[i] == '\r' || raw[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at raw[i] == '"'.
func skipString(raw []byte, i int) (int, error) {
	for i++; i < len(raw); {
		// IndexByte is vectorized: most of a Gateway payload is string bytes.
		q := bytes.IndexByte(raw[i:], '"')
		if q < 0 {
			break
		}
		end := i + q
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for j := end - 1; j >= i && raw[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return end + 1, nil
		}
		i = end + 1
	}
	return 0, errMalformed
}

// skipValue returns the index after the value starting at raw[i].
func skipValue(raw []byte, i int) (int, error) {
	if i >= len(raw) {
		return 0, errMalformed
	}
	switch raw[i] {
	case '"':
		return skipString(raw, i)
	case '{', '[':
		depth := 0
		for ; i < len(raw); i++ {
			switch raw[i] {
			case '"':
				end, err := skipString(raw, i)
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
		return 0, errMalformed
	}
	start := i
	for i < len(raw) && raw[i] != ',' && raw[i] != '}' && raw[i] != ']' &&
		raw[i] != ' ' && raw[i] != '\n' && raw[i] != '\r' && raw[i] != '\t' {
		i++
	}
	if i == start {
		return 0, errMalformed
	}
	return i, nil
}

// members calls fn with each member of the JSON object raw, in order; key is
// the raw key without quotes (escapes kept), val the raw value.
func members(raw []byte, fn func(key, val []byte)) error {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return errMalformed
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return nil
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return errMalformed
		}
		end, err := skipString(raw, i)
		if err != nil {
			return err
		}
		key := raw[i+1 : end-1]
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return errMalformed
		}
		i = skipSpace(raw, i+1)
		vend, err := skipValue(raw, i)
		if err != nil {
			return err
		}
		fn(key, raw[i:vend])
		i = skipSpace(raw, vend)
		if i >= len(raw) {
			return errMalformed
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return nil
		default:
			return errMalformed
		}
	}
}

// firstElement returns the first element of the JSON array raw, or nil.
func firstElement(raw []byte) []byte {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil
	}
	i = skipSpace(raw, i+1)
	end, err := skipValue(raw, i)
	if err != nil || raw[i] == ']' {
		return nil
	}
	return raw[i:end]
}

// plainKey reports whether the raw object key k (without quotes) is
// printable ASCII without escapes, so that its bytes are its value.
func plainKey(k []byte) bool {
	for _, c := range k {
		if c < 0x20 || c >= utf8.RuneSelf || c == '\\' {
			return false
		}
	}
	return true
}

// foldsTo reports whether the plain ASCII key k equals one of names
// case-insensitively: a key encoding/json would match where JavaScript
// and an exact comparison do not.
func foldsTo(k []byte, names []string) bool {
	for _, n := range names {
		if len(n) == len(k) && strings.EqualFold(string(k), n) {
			return true
		}
	}
	return false
}

// elements calls fn with each element of the JSON array raw, in order.
func elements(raw []byte, fn func(elem []byte)) error {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return errMalformed
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return nil
	}
	for {
		end, err := skipValue(raw, i)
		if err != nil {
			return err
		}
		fn(raw[i:end])
		i = skipSpace(raw, end)
		if i >= len(raw) {
			return errMalformed
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case ']':
			return nil
		default:
			return errMalformed
		}
	}
}

// plainString returns the value of the raw JSON string raw (surrounding
// spaces allowed) when it has no escape and is valid UTF-8, which is then
// exactly what encoding/json would decode; ok is false otherwise.
func plainString(raw []byte) (string, bool) {
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
