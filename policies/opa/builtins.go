package opa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/tetratelabs/wazero/api"
)

// OPA compiles most Rego builtins into the Wasm module; the few it leaves
// to the host are listed by the module's builtins() export and called
// through env.opa_builtin0…4. This host provides only pure ones: no
// network, clock or randomness. A module that needs any other is refused
// at load, naming it.

// hostBuiltin is a host implementation of an OPA builtin: args are the
// arguments in OPA's value text (opa_value_dump, Rego syntax), the result
// is JSON.
type hostBuiltin struct {
	arity int
	fn    func(args []string) ([]byte, error)
}

// hostBuiltins are the builtins this host provides, by OPA name.
var hostBuiltins = map[string]hostBuiltin{
	"sprintf": {2, builtinSprintf},
}

// ProvidedBuiltins returns the names of the OPA builtins the host
// implements for modules that leave them to the host (today: sprintf),
// sorted.
func ProvidedBuiltins() []string {
	names := make([]string, 0, len(hostBuiltins))
	for n := range hostBuiltins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

const exportValueDump = "opa_value_dump"

// callBuiltin runs builtin id with the value addresses args, from inside
// an evaluation (env.opa_builtinN), and returns the address of its result
// in the guest heap, or 0 for undefined.
func (i *instance) callBuiltin(ctx context.Context, id int32, args []uint64) (uint32, error) {
	b, ok := i.m.builtins[id]
	if !ok {
		return 0, fmt.Errorf("called OPA builtin #%d, which this host does not provide", id)
	}
	impl := hostBuiltins[b]
	if len(args) != impl.arity {
		return 0, fmt.Errorf("OPA builtin %q called with %d arguments, want %d", b, len(args), impl.arity)
	}
	texts := make([]string, len(args))
	for n, a := range args {
		s, err := i.dumpValue(ctx, uint32(a))
		if err != nil {
			return 0, fmt.Errorf("OPA builtin %q: argument %d: %w", b, n+1, err)
		}
		texts[n] = s
	}
	out, err := impl.fn(texts)
	if err != nil {
		return 0, fmt.Errorf("OPA builtin %q: %w", b, err)
	}
	stack := []uint64{uint64(len(out))}
	if err := i.malloc.CallWithStack(ctx, stack); err != nil {
		return 0, fmt.Errorf("OPA builtin %q: opa_malloc: %w", b, err)
	}
	p := uint32(stack[0])
	if p == 0 || !i.mem.Write(p, out) {
		return 0, fmt.Errorf("OPA builtin %q: opa_malloc(%d) returned %d, outside memory", b, len(out), p)
	}
	stack = []uint64{uint64(p), uint64(len(out))}
	if err := i.jsonParse.CallWithStack(ctx, stack); err != nil {
		return 0, fmt.Errorf("OPA builtin %q: opa_json_parse: %w", b, err)
	}
	return uint32(stack[0]), nil
}

// dumpValue returns the Rego text of the value at addr.
func (i *instance) dumpValue(ctx context.Context, addr uint32) (string, error) {
	if i.valueDump == nil {
		return "", errors.New("the module does not export " + exportValueDump)
	}
	stack := []uint64{uint64(addr)}
	if err := i.valueDump.CallWithStack(ctx, stack); err != nil {
		return "", err
	}
	b, err := i.cstring(exportValueDump, uint32(stack[0]), i.m.opts.MaxResultBytes)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// builtinFunc is the host function behind env.opa_builtinN.
func (m *Module) builtinFunc(name string) api.GoModuleFunc {
	return func(ctx context.Context, _ api.Module, stack []uint64) {
		i := instFrom(ctx)
		if i == nil {
			panic(errors.New(name + " outside an evaluation"))
		}
		addr, err := i.callBuiltin(ctx, int32(uint32(stack[0])), stack[2:])
		if err != nil {
			if i.hostErr == nil {
				i.hostErr = fmt.Errorf("%s: %w", name, err)
			}
			panic(i.hostErr)
		}
		stack[0] = uint64(addr)
	}
}

// builtinSprintf is OPA's sprintf(format, values): Go's fmt.Sprintf with
// each value converted as OPA's own implementation does (topdown): an
// integer that fits int is an int, a larger one a *big.Int, another number
// a float64, a string a string, and anything else its Rego text.
func builtinSprintf(args []string) ([]byte, error) {
	var format string
	if err := json.Unmarshal([]byte(args[0]), &format); err != nil {
		return nil, fmt.Errorf("operand 1 must be a string, got %s", cut(args[0]))
	}
	elems, err := splitArray(args[1])
	if err != nil {
		return nil, fmt.Errorf("operand 2 must be an array, got %s: %w", cut(args[1]), err)
	}
	vals := make([]any, len(elems))
	for n, e := range elems {
		vals[n] = sprintfValue(e)
	}
	return json.Marshal(fmt.Sprintf(format, vals...))
}

func sprintfValue(text string) any {
	switch c := text[0]; {
	case c == '[' || c == '{':
		if s, err := canonicalRego(text); err == nil {
			return s
		}
	case c == '"':
		var s string
		if json.Unmarshal([]byte(text), &s) == nil {
			return s
		}
	case c == '-' || (c >= '0' && c <= '9'):
		if n, err := strconv.Atoi(text); err == nil {
			return n
		}
		if b, ok := new(big.Int).SetString(text, 10); ok {
			return b
		}
		if f, err := strconv.ParseFloat(text, 64); err == nil {
			return f
		}
	}
	return text
}

func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// splitArray splits the Rego text of an array, "[a, b, c]", into the texts
// of its elements, keeping nested arrays, objects, sets and strings whole.
func splitArray(text string) ([]string, error) {
	text = strings.TrimSpace(text)
	if len(text) < 2 || text[0] != '[' || text[len(text)-1] != ']' {
		return nil, errors.New("not an array")
	}
	body := text[1 : len(text)-1]
	var elems []string
	depth, start, inString := 0, 0, false
	for n := 0; n < len(body); n++ {
		c := body[n]
		if inString {
			switch c {
			case '\\':
				n++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{', '(':
			depth++
		case ']', '}', ')':
			depth--
			if depth < 0 {
				return nil, errors.New("unbalanced brackets")
			}
		case ',':
			if depth == 0 {
				elems = append(elems, strings.TrimSpace(body[start:n]))
				start = n + 1
			}
		}
	}
	if depth != 0 || inString {
		return nil, errors.New("unbalanced brackets or quotes")
	}
	if last := strings.TrimSpace(body[start:]); last != "" {
		elems = append(elems, last)
	} else if len(elems) > 0 {
		return nil, errors.New("empty element")
	}
	for _, e := range elems {
		if e == "" {
			return nil, errors.New("empty element")
		}
	}
	return elems, nil
}

// regoValue is a parsed Rego value text: kind is one of the bytes
// 'n' (null), 'b' (boolean), '#' (number), 's' (string), '[' (array),
// '{' (object) or 'S' (set); text holds a scalar's text; elems an array's
// or set's elements, or an object's keys and values alternately.
type regoValue struct {
	kind  byte
	text  string
	elems []*regoValue
}

// canonicalRego re-renders a Rego value text as OPA's Go implementation
// prints it (ast.Value.String): object keys and set elements sorted. The
// Wasm module's opa_value_dump keeps objects in insertion order.
func canonicalRego(text string) (string, error) {
	p := &regoParser{s: text}
	v, err := p.value()
	if err != nil {
		return "", err
	}
	if p.skip(); p.i != len(p.s) {
		return "", fmt.Errorf("data after the value at offset %d", p.i)
	}
	var b strings.Builder
	v.render(&b)
	return b.String(), nil
}

type regoParser struct {
	s string
	i int
}

func (p *regoParser) skip() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\n' || p.s[p.i] == '\t' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *regoParser) value() (*regoValue, error) {
	p.skip()
	if p.i >= len(p.s) {
		return nil, errors.New("unexpected end")
	}
	switch c := p.s[p.i]; {
	case c == '"':
		start := p.i
		for p.i++; p.i < len(p.s) && p.s[p.i] != '"'; p.i++ {
			if p.s[p.i] == '\\' {
				p.i++
			}
		}
		if p.i >= len(p.s) {
			return nil, errors.New("unterminated string")
		}
		p.i++
		return &regoValue{kind: 's', text: p.s[start:p.i]}, nil
	case c == '[':
		p.i++
		elems, err := p.list(']', false)
		return &regoValue{kind: '[', elems: elems}, err
	case c == '{':
		p.i++
		p.skip()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return &regoValue{kind: '{'}, nil
		}
		first, err := p.value()
		if err != nil {
			return nil, err
		}
		p.skip()
		isObject := p.i < len(p.s) && p.s[p.i] == ':'
		kind := byte('S')
		if isObject {
			kind = '{'
			p.i++
			val, err := p.value()
			if err != nil {
				return nil, err
			}
			first = &regoValue{elems: []*regoValue{first, val}}
		}
		rest, err := p.list('}', isObject)
		if err != nil {
			return nil, err
		}
		v := &regoValue{kind: kind}
		if isObject {
			v.elems = append(first.elems, rest...)
		} else {
			v.elems = append([]*regoValue{first}, rest...)
		}
		return v, nil
	case strings.HasPrefix(p.s[p.i:], "set()"):
		p.i += len("set()")
		return &regoValue{kind: 'S'}, nil
	default:
		start := p.i
		for p.i < len(p.s) && !strings.ContainsRune(",:]}) \n\t\r", rune(p.s[p.i])) {
			p.i++
		}
		t := p.s[start:p.i]
		switch t {
		case "null":
			return &regoValue{kind: 'n', text: t}, nil
		case "true", "false":
			return &regoValue{kind: 'b', text: t}, nil
		}
		if _, ok := new(big.Float).SetString(t); !ok {
			return nil, fmt.Errorf("unknown value %q", cut(t))
		}
		return &regoValue{kind: '#', text: t}, nil
	}
}

// list parses ", v"… (", k: v"… for objects) up to end; the opening
// bracket and, for sets and objects, the first element are already read.
func (p *regoParser) list(end byte, pairs bool) ([]*regoValue, error) {
	var out []*regoValue
	first := end == ']'
	for {
		p.skip()
		if p.i >= len(p.s) {
			return nil, errors.New("unexpected end")
		}
		if p.s[p.i] == end {
			p.i++
			return out, nil
		}
		if !first {
			if p.s[p.i] != ',' {
				return nil, fmt.Errorf("want ',' at offset %d", p.i)
			}
			p.i++
		}
		first = false
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if pairs {
			p.skip()
			if p.i >= len(p.s) || p.s[p.i] != ':' {
				return nil, fmt.Errorf("want ':' at offset %d", p.i)
			}
			p.i++
			val, err := p.value()
			if err != nil {
				return nil, err
			}
			out = append(out, val)
		}
	}
}

// kindRank orders kinds as OPA's ast.Compare does.
var kindRank = map[byte]int{'n': 0, 'b': 1, '#': 2, 's': 3, '[': 4, '{': 5, 'S': 6}

func compareRego(a, b *regoValue) int {
	if ra, rb := kindRank[a.kind], kindRank[b.kind]; ra != rb {
		return ra - rb
	}
	switch a.kind {
	case '#':
		x, _ := new(big.Float).SetString(a.text)
		y, _ := new(big.Float).SetString(b.text)
		return x.Cmp(y)
	case 's':
		var x, y string
		_ = json.Unmarshal([]byte(a.text), &x)
		_ = json.Unmarshal([]byte(b.text), &y)
		return strings.Compare(x, y)
	case 'b', 'n':
		return strings.Compare(a.text, b.text)
	}
	var x, y strings.Builder
	a.render(&x)
	b.render(&y)
	return strings.Compare(x.String(), y.String())
}

func (v *regoValue) render(b *strings.Builder) {
	switch v.kind {
	case '[':
		b.WriteByte('[')
		for n, e := range v.elems {
			if n > 0 {
				b.WriteString(", ")
			}
			e.render(b)
		}
		b.WriteByte(']')
	case 'S':
		if len(v.elems) == 0 {
			b.WriteString("set()")
			return
		}
		elems := append([]*regoValue(nil), v.elems...)
		sort.SliceStable(elems, func(i, j int) bool { return compareRego(elems[i], elems[j]) < 0 })
		b.WriteByte('{')
		for n, e := range elems {
			if n > 0 {
				b.WriteString(", ")
			}
			e.render(b)
		}
		b.WriteByte('}')
	case '{':
		idx := make([]int, len(v.elems)/2)
		for n := range idx {
			idx[n] = 2 * n
		}
		sort.SliceStable(idx, func(i, j int) bool { return compareRego(v.elems[idx[i]], v.elems[idx[j]]) < 0 })
		b.WriteByte('{')
		for n, k := range idx {
			if n > 0 {
				b.WriteString(", ")
			}
			v.elems[k].render(b)
			b.WriteString(": ")
			v.elems[k+1].render(b)
		}
		b.WriteByte('}')
	default:
		b.WriteString(v.text)
	}
}
