package config

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/openclaw-go/openclaw/internal/jsonw"
)

// A JSON value in this package's ordered representation is one of:
// nil (null), bool, float64 (every number, as JavaScript holds it), string,
// []any, or *Object. [ParseOrdered] produces it, [MarshalIndent] prints it.

// Object is a JSON object that remembers the order of its keys, the way a
// JavaScript object does: keys that are array indices ("0", "17") come first
// in ascending numeric order, every other key in insertion order. Setting an
// existing key keeps its position; a new key goes at the end. This is what
// OpenClaw's JSON.stringify prints, so `mcp list --json` and the written
// config keep the user's order. The zero value is an empty object.
type Object struct {
	keys []string
	vals map[string]any
}

// NewObject returns an empty object.
func NewObject() *Object { return &Object{} }

// Len returns the number of keys.
func (o *Object) Len() int {
	if o == nil {
		return 0
	}
	return len(o.keys)
}

// Get returns the value of key and whether it is present.
func (o *Object) Get(key string) (any, bool) {
	if o == nil || o.vals == nil {
		return nil, false
	}
	v, ok := o.vals[key]
	return v, ok
}

// Has reports whether key is present.
func (o *Object) Has(key string) bool {
	_, ok := o.Get(key)
	return ok
}

// Set sets key to v: in place when key exists, at the end otherwise.
func (o *Object) Set(key string, v any) {
	if o.vals == nil {
		o.vals = make(map[string]any)
	}
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
}

// Delete removes key; a missing key is not an error.
func (o *Object) Delete(key string) {
	if o == nil || o.vals == nil {
		return
	}
	if _, ok := o.vals[key]; !ok {
		return
	}
	delete(o.vals, key)
	for i, k := range o.keys {
		if k == key {
			o.keys = append(o.keys[:i:i], o.keys[i+1:]...)
			break
		}
	}
}

// Keys returns the keys in JavaScript property order (see [Object]).
func (o *Object) Keys() []string {
	if o == nil {
		return nil
	}
	var idx, rest []string
	for _, k := range o.keys {
		if isArrayIndex(k) {
			idx = append(idx, k)
		} else {
			rest = append(rest, k)
		}
	}
	if len(idx) == 0 {
		return rest
	}
	sort.Slice(idx, func(i, j int) bool {
		a, _ := strconv.ParseUint(idx[i], 10, 32)
		b, _ := strconv.ParseUint(idx[j], 10, 32)
		return a < b
	})
	return append(idx, rest...)
}

// Clone returns a deep copy of o.
func (o *Object) Clone() *Object {
	c, _ := cloneValue(o).(*Object)
	return c
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case *Object:
		if x == nil {
			return (*Object)(nil)
		}
		c := &Object{keys: append([]string(nil), x.keys...), vals: make(map[string]any, len(x.vals))}
		for k, e := range x.vals {
			c.vals[k] = cloneValue(e)
		}
		return c
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = cloneValue(e)
		}
		return c
	default:
		return v
	}
}

// isArrayIndex reports whether k is a canonical array index (0 ≤ n < 2³²−1),
// which JavaScript orders before other keys.
func isArrayIndex(k string) bool {
	if k == "" || len(k) > 10 || (len(k) > 1 && k[0] == '0') {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < '0' || k[i] > '9' {
			return false
		}
	}
	n, err := strconv.ParseUint(k, 10, 64)
	return err == nil && n < math.MaxUint32
}

// ParseOrdered parses JSON5 text (and so plain JSON) into the ordered
// representation. A duplicate key keeps its first position and its last
// value, as JSON5.parse does. Errors carry the line and column.
func ParseOrdered(data []byte) (any, error) {
	p := &json5Parser{s: data, line: 1, col: 1}
	p.skipSpace()
	if p.err != nil {
		return nil, p.err
	}
	v := p.value(0)
	if p.err != nil {
		return nil, p.err
	}
	p.skipSpace()
	if p.err == nil && p.i < len(p.s) {
		p.fail("unexpected %s after the value", p.describe())
	}
	if p.err != nil {
		return nil, p.err
	}
	return v, nil
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 1000

type json5Parser struct {
	s         []byte
	i         int
	line, col int
	err       error
}

func (p *json5Parser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("line %d column %d: %s", p.line, p.col, fmt.Sprintf(format, args...))
	}
}

func (p *json5Parser) describe() string {
	if p.i >= len(p.s) {
		return "end of input"
	}
	r, _ := utf8.DecodeRune(p.s[p.i:])
	return strconv.QuoteRune(r)
}

func (p *json5Parser) peek() rune {
	if p.i >= len(p.s) {
		return -1
	}
	r, _ := utf8.DecodeRune(p.s[p.i:])
	return r
}

func (p *json5Parser) next() rune {
	if p.i >= len(p.s) {
		return -1
	}
	r, n := utf8.DecodeRune(p.s[p.i:])
	p.i += n
	if r == '\n' || (r == '\r' && p.peek() != '\n') || r == 0x2028 || r == 0x2029 {
		p.line++
		p.col = 1
	} else {
		p.col++
	}
	return r
}

// isJSON5Space reports the JSON5 white space set (ECMAScript WhiteSpace and
// LineTerminator).
func isJSON5Space(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x2028, 0x2029, 0xFEFF:
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

func (p *json5Parser) skipSpace() {
	for p.err == nil && p.i < len(p.s) {
		r := p.peek()
		switch {
		case isJSON5Space(r):
			p.next()
		case r == '/' && p.i+1 < len(p.s) && p.s[p.i+1] == '/':
			for p.i < len(p.s) {
				if c := p.peek(); c == '\n' || c == '\r' || c == 0x2028 || c == 0x2029 {
					break
				}
				p.next()
			}
		case r == '/' && p.i+1 < len(p.s) && p.s[p.i+1] == '*':
			p.next()
			p.next()
			for {
				if p.i >= len(p.s) {
					p.fail("unterminated block comment")
					return
				}
				if p.s[p.i] == '*' && p.i+1 < len(p.s) && p.s[p.i+1] == '/' {
					p.next()
					p.next()
					break
				}
				p.next()
			}
		default:
			return
		}
	}
}

func (p *json5Parser) value(depth int) any {
	if depth > maxDepth {
		p.fail("nesting deeper than %d", maxDepth)
		return nil
	}
	switch r := p.peek(); {
	case r == '{':
		return p.object(depth)
	case r == '[':
		return p.array(depth)
	case r == '"' || r == '\'':
		return p.str()
	case r == '-' || r == '+' || r == '.' || (r >= '0' && r <= '9'):
		return p.number()
	case r == 'I' || r == 'N':
		return p.number()
	case r == 't':
		p.literal("true")
		return true
	case r == 'f':
		p.literal("false")
		return false
	case r == 'n':
		p.literal("null")
		return nil
	default:
		p.fail("unexpected %s", p.describe())
		return nil
	}
}

func (p *json5Parser) literal(word string) {
	if !bytes.HasPrefix(p.s[p.i:], []byte(word)) {
		p.fail("unexpected %s", p.describe())
		return
	}
	for range word {
		p.next()
	}
}

func (p *json5Parser) object(depth int) any {
	p.next() // {
	o := NewObject()
	for {
		p.skipSpace()
		if p.err != nil {
			return nil
		}
		if p.peek() == '}' {
			p.next()
			return o
		}
		var key string
		if r := p.peek(); r == '"' || r == '\'' {
			key = p.str()
		} else {
			key = p.identifier()
		}
		p.skipSpace()
		if p.err != nil {
			return nil
		}
		if p.peek() != ':' {
			p.fail("expected ':' after key %q, found %s", key, p.describe())
			return nil
		}
		p.next()
		p.skipSpace()
		v := p.value(depth + 1)
		if p.err != nil {
			return nil
		}
		o.Set(key, v)
		p.skipSpace()
		switch p.peek() {
		case ',':
			p.next()
		case '}':
		default:
			p.fail("expected ',' or '}' in object, found %s", p.describe())
			return nil
		}
	}
}

func (p *json5Parser) array(depth int) any {
	p.next() // [
	a := []any{}
	for {
		p.skipSpace()
		if p.err != nil {
			return nil
		}
		if p.peek() == ']' {
			p.next()
			return a
		}
		v := p.value(depth + 1)
		if p.err != nil {
			return nil
		}
		a = append(a, v)
		p.skipSpace()
		switch p.peek() {
		case ',':
			p.next()
		case ']':
		default:
			p.fail("expected ',' or ']' in array, found %s", p.describe())
			return nil
		}
	}
}

// identifier reads an unquoted key (ECMAScript IdentifierName, with \uXXXX
// escapes).
func (p *json5Parser) identifier() string {
	var b strings.Builder
	for first := true; ; first = false {
		r := p.peek()
		if r == '\\' {
			p.next()
			if p.next() != 'u' {
				p.fail("bad escape in key")
				return ""
			}
			r = p.hex(4)
		} else if r == '$' || r == '_' || unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) ||
			(!first && (unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r) ||
				unicode.Is(unicode.Pc, r) || r == 0x200C || r == 0x200D)) {
			p.next()
		} else {
			if first {
				p.fail("unexpected %s where a key was expected", p.describe())
			}
			return b.String()
		}
		if p.err != nil {
			return ""
		}
		b.WriteRune(r)
	}
}

func (p *json5Parser) hex(n int) rune {
	var v rune
	for range n {
		c := p.next()
		var d rune
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			p.fail("bad hexadecimal digit in escape")
			return 0
		}
		v = v<<4 | d
	}
	return v
}

// str reads a single- or double-quoted JSON5 string. UTF-16 surrogate
// escapes are paired; a lone surrogate becomes U+FFFD (Go strings are
// UTF-8).
func (p *json5Parser) str() string {
	quote := p.next()
	var units []uint16
	var b strings.Builder
	flush := func() {
		if len(units) > 0 {
			b.WriteString(string(utf16.Decode(units)))
			units = units[:0]
		}
	}
	for {
		if p.i >= len(p.s) {
			p.fail("unterminated string")
			return ""
		}
		r := p.next()
		switch {
		case r == quote:
			flush()
			return b.String()
		case r == '\n' || r == '\r':
			p.fail("line break inside a string")
			return ""
		case r == '\\':
			e := p.next()
			var out rune = -1
			switch e {
			case 'b':
				out = '\b'
			case 'f':
				out = '\f'
			case 'n':
				out = '\n'
			case 'r':
				out = '\r'
			case 't':
				out = '\t'
			case 'v':
				out = '\v'
			case '0':
				if c := p.peek(); c >= '0' && c <= '9' {
					p.fail("octal escape in string")
					return ""
				}
				out = 0
			case 'x':
				out = p.hex(2)
			case 'u':
				units = append(units, uint16(p.hex(4)))
				continue
			case '\r':
				if p.peek() == '\n' {
					p.next()
				}
				continue
			case '\n', 0x2028, 0x2029:
				continue
			case -1:
				p.fail("unterminated string")
				return ""
			default:
				if e >= '1' && e <= '9' {
					p.fail("bad escape \\%c in string", e)
					return ""
				}
				out = e
			}
			if p.err != nil {
				return ""
			}
			flush()
			b.WriteRune(out)
		default:
			flush()
			b.WriteRune(r)
		}
	}
}

// number reads a JSON5 number: sign, decimal with optional leading or
// trailing point, hexadecimal, Infinity, NaN.
func (p *json5Parser) number() any {
	start := p.i
	neg := false
	if c := p.peek(); c == '+' || c == '-' {
		neg = c == '-'
		p.next()
	}
	sign := 1.0
	if neg {
		sign = -1
	}
	rest := p.s[p.i:]
	switch {
	case bytes.HasPrefix(rest, []byte("Infinity")):
		p.literal("Infinity")
		return sign * math.Inf(1)
	case bytes.HasPrefix(rest, []byte("NaN")):
		p.literal("NaN")
		return math.NaN()
	case len(rest) > 1 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X'):
		p.next()
		p.next()
		hs := p.i
		for p.i < len(p.s) && isHexDigit(p.s[p.i]) {
			p.next()
		}
		if p.i == hs {
			p.fail("hexadecimal number without digits")
			return nil
		}
		n, err := strconv.ParseUint(string(p.s[hs:p.i]), 16, 64)
		if err != nil {
			f, _ := new(bigHex).parse(string(p.s[hs:p.i]))
			return sign * f
		}
		return sign * float64(n)
	}
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.next()
			n++
		}
		return n
	}
	intStart := p.i
	nInt := digits()
	if nInt > 1 && p.s[intStart] == '0' {
		p.fail("number with a leading zero")
		return nil
	}
	nFrac := 0
	if p.peek() == '.' {
		p.next()
		nFrac = digits()
	}
	if nInt == 0 && nFrac == 0 {
		p.fail("malformed number")
		return nil
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		p.next()
		if c := p.peek(); c == '+' || c == '-' {
			p.next()
		}
		if digits() == 0 {
			p.fail("number without exponent digits")
			return nil
		}
	}
	text := strings.TrimPrefix(string(p.s[start:p.i]), "+")
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !isRangeErr(err) {
		p.fail("malformed number %q", text)
		return nil
	}
	return f
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func isHexDigit(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// bigHex converts a hexadecimal literal wider than 64 bits to float64.
type bigHex struct{}

func (bigHex) parse(h string) (float64, error) {
	f := 0.0
	for i := 0; i < len(h); i++ {
		d, err := strconv.ParseUint(h[i:i+1], 16, 8)
		if err != nil {
			return 0, err
		}
		f = f*16 + float64(d)
	}
	return f, nil
}

// MarshalIndent prints v (the ordered representation, or plain Go strings,
// bools, numbers, maps and slices) exactly as JavaScript's
// JSON.stringify(v, null, 2) does: 2-space indent, "{}" and "[]" for empty
// containers, JavaScript number formatting, NaN and ±Infinity as null, and
// only '"', '\\' and control characters escaped.
func MarshalIndent(v any) []byte { return jsonw.Indent(MarshalCompact(v)) }

// MarshalCompact prints v like JSON.stringify(v), without white space.
func MarshalCompact(v any) []byte { return appendJSON(nil, v) }

func appendJSON(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, x)
	case float64:
		return append(b, FormatNumber(x)...)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case string:
		return jsonw.AppendString(b, x)
	case *Object:
		o := jsonw.NewObject(b)
		for _, k := range x.Keys() {
			o.Key(k)
			o.Buf = appendJSON(o.Buf, x.vals[k])
		}
		return o.Close()
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e)
		}
		return append(b, ']')
	case []string:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonw.AppendString(b, e)
		}
		return append(b, ']')
	case map[string]any:
		o := NewObject()
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			o.Set(k, x[k])
		}
		return appendJSON(b, o)
	default:
		panic(fmt.Sprintf("config: MarshalIndent: unsupported type %T", v))
	}
}

// plainValue converts the ordered representation to plain Go values
// (map[string]any, []any, float64, string, bool, nil), for comparison with
// other decoders.
func plainValue(v any) any {
	switch x := v.(type) {
	case *Object:
		m := make(map[string]any, x.Len())
		for _, k := range x.keys {
			m[k] = plainValue(x.vals[k])
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = plainValue(e)
		}
		return a
	default:
		return v
	}
}
