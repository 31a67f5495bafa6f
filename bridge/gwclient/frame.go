package gwclient

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// This file decodes the frames that carry the Gateway's data (responses and
// events) about twice as fast as protocol.Decode: one validating pass over
// the message, then a pass that only finds the top-level members and keeps
// the payload as a slice of the message instead of a copy. A conversations_list
// waits for a sessions.list response of several KB, so this is on the hot
// path of every call. Whenever the result could differ from
// protocol.Decode's, the fast path declines and protocol.Decode decides.

// frameKeys are the members of a protocol.Frame, in the order of their bits
// in fastFrame.
var frameKeys = [...]string{"type", "id", "method", "params", "ok", "payload", "error", "event", "seq", "stateVersion"}

// decodeFrame is protocol.Decode, faster for well-formed responses without
// error and for events.
func decodeFrame(data []byte) (*protocol.Frame, error) {
	if f, ok := fastFrame(data); ok {
		return f, nil
	}
	return protocol.Decode(data)
}

// fastFrame returns the frame protocol.Decode would return for data, or
// false when it cannot be sure to agree: data that is not valid JSON or not
// an object, a key with an escape or a non-ASCII byte, a frame key that
// repeats or matches only case-insensitively (encoding/json folds case), a
// type other than "res" or "event", an error, method or params member, a
// member whose type protocol.Decode would reject, or a frame that
// protocol.Decode reports as malformed. The payload aliases data.
func fastFrame(data []byte) (*protocol.Frame, bool) {
	if !validJSON(data) {
		return nil, false
	}
	var f protocol.Frame
	var seen uint16
	ok := true
	err := scanMembers(data, func(k, v []byte) {
		if !ok {
			return
		}
		if !plainKey(k) {
			ok = false
			return
		}
		idx := -1
		for i, name := range frameKeys {
			if string(k) == name {
				idx = i
				break
			}
		}
		if idx < 0 {
			for _, name := range frameKeys {
				if len(name) == len(k) && strings.EqualFold(string(k), name) {
					ok = false
				}
			}
			return
		}
		if seen&(1<<idx) != 0 {
			ok = false
			return
		}
		seen |= 1 << idx
		switch frameKeys[idx] {
		case "type":
			f.Type, ok = plainString(v)
		case "id":
			f.ID, ok = plainString(v)
		case "event":
			f.Event, ok = plainString(v)
		case "ok":
			switch string(v) {
			case "true", "false":
				b := v[0] == 't'
				f.OK = &b
			default:
				ok = false
			}
		case "payload":
			f.Payload = v
		case "stateVersion":
			f.StateVersion = v
		case "seq":
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n < 0 {
				ok = false
				return
			}
			f.Seq = &n
		default: // method, params, error: left to protocol.Decode
			ok = false
		}
	})
	if !ok || err != nil {
		return nil, false
	}
	switch f.Type {
	case protocol.TypeResponse:
		if f.ID == "" || f.OK == nil || f.Seq != nil {
			return nil, false
		}
	case protocol.TypeEvent:
		if f.Event == "" {
			return nil, false
		}
	default:
		return nil, false
	}
	return &f, true
}

// plainKey reports whether the raw key k (without quotes) is printable
// ASCII without escapes, so that its bytes are its value.
func plainKey(k []byte) bool {
	for _, c := range k {
		if c < 0x20 || c >= utf8.RuneSelf || c == '\\' {
			return false
		}
	}
	return true
}

// plainString returns the value of the JSON string raw when it has no
// escape and is valid UTF-8, which is then exactly what encoding/json
// decodes; false for anything else.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	if bytes.IndexByte(in, '\\') >= 0 || !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// scanMembers calls fn with each member of the JSON object raw, which must
// be valid JSON: key is the raw key without quotes, val the raw value.
func scanMembers(raw []byte, fn func(key, val []byte)) error {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return errNotObject
	}
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return nil
	}
	for i < len(raw) {
		kend := skipStr(raw, i)
		key := raw[i+1 : kend-1]
		i = skipWS(raw, kend)
		i = skipWS(raw, i+1) // ':'
		vend := skipVal(raw, i)
		fn(key, raw[i:vend])
		i = skipWS(raw, vend)
		if i >= len(raw) || raw[i] == '}' {
			return nil
		}
		i = skipWS(raw, i+1) // ','
	}
	return nil
}

var errNotObject = &json.UnmarshalTypeError{Value: "non-object"}

func skipWS(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\n' || raw[i] == '\r' || raw[i] == '\t') {
		i++
	}
	return i
}

// skipStr returns the index after the valid JSON string at raw[i].
func skipStr(raw []byte, i int) int {
	for i++; i < len(raw); {
		q := bytes.IndexByte(raw[i:], '"')
		if q < 0 {
			return len(raw)
		}
		end := i + q
		n := 0
		for j := end - 1; j >= i && raw[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return end + 1
		}
		i = end + 1
	}
	return len(raw)
}

// skipVal returns the index after the valid JSON value at raw[i].
func skipVal(raw []byte, i int) int {
	switch raw[i] {
	case '"':
		return skipStr(raw, i)
	case '{', '[':
		depth := 0
		for ; i < len(raw); i++ {
			switch raw[i] {
			case '"':
				i = skipStr(raw, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(raw)
	}
	for i < len(raw) && raw[i] != ',' && raw[i] != '}' && raw[i] != ']' &&
		raw[i] != ' ' && raw[i] != '\n' && raw[i] != '\r' && raw[i] != '\t' {
		i++
	}
	return i
}

// maxDepth is encoding/json's nesting limit: json.Valid rejects deeper
// input, and so does validJSON.
const maxDepth = 10000

// validJSON is json.Valid (RFC 8259 syntax; bytes ≥ 0x80 inside strings are
// not checked as UTF-8, exactly like encoding/json) in a plain loop instead
// of encoding/json's state machine, which makes a function call per byte.
func validJSON(data []byte) bool {
	var stack []byte // '{' or '[' per open container
	i := skipWS(data, 0)
	for {
		// A value is expected at data[i].
		if i >= len(data) {
			return false
		}
		switch c := data[i]; {
		case c == '{' || c == '[':
			if len(stack) >= maxDepth {
				return false
			}
			stack = append(stack, c)
			i = skipWS(data, i+1)
			if i < len(data) && data[i] == c+2 { // '}' or ']'
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if i = objectKey(data, i); i < 0 {
					return false
				}
			}
			continue
		case c == '"':
			if i = validString(data, i); i < 0 {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			if i = validNumber(data, i); i < 0 {
				return false
			}
		case c == 't':
			if !bytes.HasPrefix(data[i:], []byte("true")) {
				return false
			}
			i += 4
		case c == 'f':
			if !bytes.HasPrefix(data[i:], []byte("false")) {
				return false
			}
			i += 5
		case c == 'n':
			if !bytes.HasPrefix(data[i:], []byte("null")) {
				return false
			}
			i += 4
		default:
			return false
		}
		// A value ended at i: close containers, or expect the next member.
		for {
			i = skipWS(data, i)
			if len(stack) == 0 {
				return i == len(data)
			}
			if i >= len(data) {
				return false
			}
			top := stack[len(stack)-1]
			if data[i] == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if data[i] != ',' {
				return false
			}
			i = skipWS(data, i+1)
			if top == '{' {
				if i = objectKey(data, i); i < 0 {
					return false
				}
			}
			break
		}
	}
}

// objectKey checks `"key" :` at data[i] and returns the index of the value
// after it (spaces skipped), or -1.
func objectKey(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	if i = validString(data, i); i < 0 {
		return -1
	}
	i = skipWS(data, i)
	if i >= len(data) || data[i] != ':' {
		return -1
	}
	return skipWS(data, i+1)
}

// validString checks the string at data[i] == '"' and returns the index
// after it, or -1.
func validString(data []byte, i int) int {
	for i++; i < len(data); {
		c := data[i]
		switch {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(data) {
				return -1
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) {
					return -1
				}
				for _, h := range data[i+2 : i+6] {
					if !isHex(h) {
						return -1
					}
				}
				i += 6
			default:
				return -1
			}
		case c < 0x20:
			return -1
		default:
			// Skip ahead to the next byte that needs a look.
			j := i + 1
			for j < len(data) && data[j] >= 0x20 && data[j] != '"' && data[j] != '\\' {
				j++
			}
			i = j
		}
	}
	return -1
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// validNumber checks the number at data[i] and returns the index after it,
// or -1.
func validNumber(data []byte, i int) int {
	digits := func(i int) int {
		start := i
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		if i == start {
			return -1
		}
		return i
	}
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		i = digits(i)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		if i = digits(i + 1); i < 0 {
			return -1
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i = digits(i); i < 0 {
			return -1
		}
	}
	return i
}
