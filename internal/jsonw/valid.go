package jsonw

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// MaxDepth is encoding/json's nesting limit: [Valid] rejects deeper input,
// as json.Valid does.
const MaxDepth = 10000

// Valid reports whether data is one JSON value with optional white space
// around it, exactly as json.Valid does (RFC 8259 syntax, at most
// [MaxDepth] levels of nesting; bytes ≥ 0x80 inside strings are not checked
// as UTF-8, as encoding/json does not), in a plain loop instead of
// encoding/json's state machine, which makes a function call per byte.
func Valid(data []byte) bool {
	end, err := ScanValue(data, SkipSpace(data, 0), MaxDepth)
	return err == nil && SkipSpace(data, end) == len(data)
}

// ScanValue checks the JSON value that starts at b[i] (white space is not
// skipped before it) and returns the offset after it. maxDepth bounds the
// nesting: at most maxDepth arrays and objects, the value itself included,
// may be open at once. The error names the offset of the first byte that
// is not JSON.
func ScanValue(b []byte, i, maxDepth int) (int, error) {
	var open [32]byte
	stack := open[:0] // '{' or '[' per open container
	for {
		// A value is expected at b[i].
		if i >= len(b) {
			return i, want(b, i, "a value")
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) >= maxDepth {
				return i, fmt.Errorf("nesting deeper than %d at offset %d", maxDepth, i)
			}
			stack = append(stack, c)
			i = SkipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '}' or ']'
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				var err error
				if i, err = scanKey(b, i); err != nil {
					return i, err
				}
			}
			continue
		case c == '"':
			end, _, _, err := scanString(b, i)
			if err != nil {
				return end, err
			}
			i = end
		case c == '-' || '0' <= c && c <= '9':
			end, err := scanNumber(b, i)
			if err != nil {
				return end, err
			}
			i = end
		case c == 't':
			if !hasLiteral(b, i, "true") {
				return i, want(b, i, "true")
			}
			i += 4
		case c == 'f':
			if !hasLiteral(b, i, "false") {
				return i, want(b, i, "false")
			}
			i += 5
		case c == 'n':
			if !hasLiteral(b, i, "null") {
				return i, want(b, i, "null")
			}
			i += 4
		default:
			return i, want(b, i, "a value")
		}
		// A value ended at i: close containers, or expect the next member.
		for {
			if len(stack) == 0 {
				return i, nil
			}
			i = SkipSpace(b, i)
			top := stack[len(stack)-1]
			if i < len(b) && b[i] == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if i >= len(b) || b[i] != ',' {
				if top == '{' {
					return i, want(b, i, ", or }")
				}
				return i, want(b, i, ", or ]")
			}
			i = SkipSpace(b, i+1)
			if top == '{' {
				var err error
				if i, err = scanKey(b, i); err != nil {
					return i, err
				}
			}
			break
		}
	}
}

// EachMember walks the object that starts at b[i], checking it as
// [ScanValue] does; maxDepth counts the object itself. For each member it
// calls fn with the decoded name, the offset of the name's opening quote
// and the offset of the value; fn consumes the value (with [ScanValue] or
// its own reader) and returns the offset after it, or an error that stops
// the walk. EachMember returns the offset after the object.
func EachMember(b []byte, i, maxDepth int, fn func(key []byte, ks, vs int) (int, error)) (int, error) {
	if maxDepth <= 0 {
		return i, fmt.Errorf("nesting too deep at offset %d", i)
	}
	if i >= len(b) || b[i] != '{' {
		return i, want(b, i, "an object")
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, want(b, i, "a member name")
		}
		ks := i
		ke, plain, err := ScanString(b, i)
		if err != nil {
			return ke, err
		}
		key := b[ks+1 : ke-1]
		if !plain {
			var k string
			if err := json.Unmarshal(b[ks:ke], &k); err != nil {
				return ke, err
			}
			key = []byte(k)
		}
		i = SkipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return i, want(b, i, ":")
		}
		if i, err = fn(key, ks, SkipSpace(b, i+1)); err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		return i, want(b, i, ", or }")
	}
}

// ScanString checks the JSON string whose opening quote is b[i] and returns
// the offset after its closing quote. plain reports that its bytes are its
// value: no escapes and valid UTF-8 (otherwise encoding/json decodes it,
// replacing invalid UTF-8 with U+FFFD).
func ScanString(b []byte, i int) (end int, plain bool, err error) {
	end, escaped, ascii, err := scanString(b, i)
	if err != nil {
		return end, false, err
	}
	plain = !escaped && (ascii || utf8.Valid(b[i+1:end-1]))
	return end, plain, nil
}

// scanString is ScanString without the UTF-8 check: escaped reports a
// backslash, ascii that every byte is below 0x80.
func scanString(b []byte, i int) (end int, escaped, ascii bool, err error) {
	start := i
	ascii = true
	for i++; i < len(b); i++ {
		for i < len(b) && strByte[b[i]] {
			i++
		}
		if i == len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, ascii, nil
		case c == '\\':
			escaped = true
			i++
			if i >= len(b) {
				break
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return i, false, false, fmt.Errorf("bad \\u escape at offset %d", i-1)
				}
				i += 4
			default:
				return i, false, false, fmt.Errorf("bad escape at offset %d", i-1)
			}
		case c < 0x20:
			return i, false, false, fmt.Errorf("control character %#x in a string at offset %d", c, i)
		default: // c >= utf8.RuneSelf
			ascii = false
		}
	}
	return i, false, false, fmt.Errorf("unterminated string at offset %d", start)
}

// strByte[c] reports that c stands for itself in a JSON string and needs
// no look: printable ASCII other than '"' and '\\'.
var strByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// scanKey checks `"name" :` at b[i] and returns the offset of the value
// after it (white space skipped).
func scanKey(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return i, want(b, i, "a member name")
	}
	i, _, _, err := scanString(b, i)
	if err != nil {
		return i, err
	}
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, want(b, i, ":")
	}
	return SkipSpace(b, i+1), nil
}

func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// scanNumber checks the JSON number at b[i] (RFC 8259 §6) and returns the
// offset after it.
func scanNumber(b []byte, i int) (int, error) {
	start := i
	digits := func() int {
		n := 0
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return i, fmt.Errorf("bad number at offset %d", start)
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return i, fmt.Errorf("bad number at offset %d", start)
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return i, fmt.Errorf("bad number at offset %d", start)
		}
	}
	return i, nil
}

// Describe names the byte at b[i] for an error message: the quoted byte,
// or "end of input".
func Describe(b []byte, i int) string {
	if i >= len(b) {
		return "end of input"
	}
	return fmt.Sprintf("%q", b[i])
}

func want(b []byte, i int, what string) error {
	return fmt.Errorf("%s at offset %d, want %s", Describe(b, i), i, what)
}
