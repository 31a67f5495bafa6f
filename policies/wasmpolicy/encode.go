package wasmpolicy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/openclaw-go/openclaw/policies"
)

// appendCallInput appends the before_tool_call input for call to buf: the
// JSON encoding/json would produce for the ToolCall fields (same names,
// same omitempty rules) preceded by "abi":1. It is written by hand because
// reflection cost more than the guest's whole decision. Arguments are
// validated and compacted; invalid arguments are an error.
func appendCallInput(buf []byte, call *policies.ToolCall) ([]byte, error) {
	buf = append(buf, `{"abi":1,"surface":`...)
	buf = appendString(buf, string(call.Surface))
	if call.SessionKey != "" {
		buf = append(buf, `,"session_key":`...)
		buf = appendString(buf, call.SessionKey)
	}
	buf = append(buf, `,"caller":{`...)
	sep := ""
	if call.Caller.Name != "" {
		buf = append(buf, `"name":`...)
		buf = appendString(buf, call.Caller.Name)
		sep = ","
	}
	if call.Caller.Version != "" {
		buf = append(buf, sep...)
		buf = append(buf, `"version":`...)
		buf = appendString(buf, call.Caller.Version)
	}
	buf = append(buf, `},"tool":{"name":`...)
	buf = appendString(buf, call.Tool.Name)
	if call.Tool.Server != "" {
		buf = append(buf, `,"server":`...)
		buf = appendString(buf, call.Tool.Server)
	}
	if call.Tool.Original != "" {
		buf = append(buf, `,"original":`...)
		buf = appendString(buf, call.Tool.Original)
	}
	buf = append(buf, '}')
	if len(call.Arguments) > 0 {
		buf = append(buf, `,"arguments":`...)
		n := len(buf)
		var err error
		if buf, err = appendCompact(buf, call.Arguments); err != nil {
			return buf[:n], fmt.Errorf("arguments: %w", err)
		}
	}
	return append(buf, '}'), nil
}

// appendCompact appends src without insignificant space, after checking
// that it is one valid JSON value.
func appendCompact(dst, src []byte) ([]byte, error) {
	b := bytes.NewBuffer(dst)
	err := json.Compact(b, src)
	return b.Bytes(), err
}

// appendString appends s as a JSON string, as encoding/json does (invalid
// UTF-8 becomes U+FFFD, control characters, U+2028 and U+2029 are
// escaped) except that <, > and & are left as they are.
func appendString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
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
				buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			// Escaped by encoding/json too (JavaScript line terminators).
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// inputPool recycles input buffers: CallBytes copies the input into guest
// memory, so a buffer is free again once it returns.
var inputPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
