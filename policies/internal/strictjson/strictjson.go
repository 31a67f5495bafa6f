// Package strictjson decodes JSON written by a policy module, the one
// party whose output the host must never read two ways.
//
// encoding/json resolves ambiguous objects silently: of a key given twice
// the last one wins, a key matches a struct field whatever its case (and
// under Unicode folding: "deciſion" is "decision"), and unknown keys are
// dropped. [Unmarshal] refuses all three before it lets encoding/json
// decode, so what the host acts on is the one reading any JSON reader
// would give.
package strictjson

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"
)

// Unmarshal decodes data, exactly one JSON value with optional white space
// around it, into v (a non-nil pointer) as [json.Unmarshal] does, after
// checking data against v's type:
//
//   - an object decoded into a struct may hold only keys that are exactly
//     (byte for byte, after unescaping) the JSON name of one of its
//     fields, each at most once;
//   - an object decoded into a map may not repeat a key;
//   - arrays and slices, pointers and nested values are checked the same
//     way; the content of a [json.RawMessage], an interface value or a
//     type with its own UnmarshalJSON or UnmarshalText is not ours to
//     define and is not looked into.
//
// A syntax error is encoding/json's (*json.SyntaxError); a key refused by
// the check is an error naming it and, below the top level, where it is:
// `repeated field "decision"`, `servers[0].tools[1]: unknown field
// "nam"`, `unknown field "Decision" (field names are case-sensitive: want
// "decision")`; a type mismatch is encoding/json's
// *json.UnmarshalTypeError.
func Unmarshal(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("strictjson: Unmarshal needs a non-nil pointer, got %T", v)
	}
	if !json.Valid(data) {
		var x any
		if err := json.Unmarshal(data, &x); err != nil {
			return err
		}
		return fmt.Errorf("strictjson: invalid JSON") // not reached: Valid and Unmarshal agree
	}
	if s := shapeOf(rv.Type().Elem()); s != nil {
		c := checker{b: data}
		if err := c.value(s); err != nil {
			return err
		}
	}
	return json.Unmarshal(data, v)
}

// shape is what the check knows of a Go type: the JSON names of a
// struct's fields, a map's or slice's element. A nil *shape checks
// nothing below it.
type shape struct {
	fields map[string]*shape // a struct: its fields by exact JSON name
	elem   *shape            // a map's or a slice's element
	isMap  bool
	// folded maps each field name under strings.ToLower to its exact
	// name, for the hint in an error.
	folded map[string]string
}

var shapes sync.Map // reflect.Type -> *shape

var (
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// shapeOf returns the shape of t, nil when nothing below t is checked.
func shapeOf(t reflect.Type) *shape {
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	s := buildShape(t, map[reflect.Type]*shape{})
	shapes.Store(t, s)
	return s
}

func buildShape(t reflect.Type, building map[reflect.Type]*shape) *shape {
	if s, ok := building[t]; ok {
		return s // a recursive type
	}
	if t == rawMessageType || t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType) ||
		t.Implements(textUnmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return buildShape(t.Elem(), building)
	case reflect.Slice, reflect.Array:
		e := buildShape(t.Elem(), building)
		if e == nil {
			return nil
		}
		return &shape{elem: e}
	case reflect.Map:
		s := &shape{isMap: true}
		building[t] = s
		s.elem = buildShape(t.Elem(), building)
		return s
	case reflect.Struct:
		s := &shape{fields: map[string]*shape{}, folded: map[string]string{}}
		building[t] = s
		addFields(s, t, building)
		return s
	}
	return nil
}

// addFields adds the JSON fields of struct type t to s, promoting the
// fields of embedded structs as encoding/json does (for the field sets of
// this project: no name conflicts between levels).
func addFields(s *shape, t reflect.Type, building map[reflect.Type]*shape) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(s, ft, building)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s.fields[name] = buildShape(ft, building)
		s.folded[strings.ToLower(name)] = name
	}
}

// checker walks JSON that json.Valid accepted.
type checker struct {
	b    []byte
	i    int
	path []string // where the walk is, for errors: "servers", "[0]", …
}

func (c *checker) ws() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// value checks the value at c.i against s and moves past it.
func (c *checker) value(s *shape) error {
	c.ws()
	switch c.b[c.i] {
	case '{':
		return c.object(s)
	case '[':
		return c.array(s)
	case '"':
		c.str()
		return nil
	}
	// A number or a literal: it ends at a delimiter or white space.
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			return nil
		}
		c.i++
	}
	return nil
}

// str moves past the string at c.i and returns it unescaped, as
// encoding/json would decode it (invalid UTF-8 becomes U+FFFD).
func (c *checker) str() string {
	start := c.i
	plain := true
	for c.i++; ; c.i++ {
		ch := c.b[c.i]
		if ch == '"' {
			break
		}
		if ch == '\\' {
			plain = false
			c.i++ // the escaped byte cannot end the string
		} else if ch >= utf8.RuneSelf {
			plain = false
		}
	}
	c.i++
	raw := c.b[start:c.i]
	if plain {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s) // valid: json.Valid accepted the whole
	return s
}

func (c *checker) object(s *shape) error {
	c.i++ // {
	var seen map[string]bool
	if s != nil {
		seen = map[string]bool{}
	}
	for {
		c.ws()
		if c.b[c.i] == '}' {
			c.i++
			return nil
		}
		if c.b[c.i] == ',' {
			c.i++
			c.ws()
		}
		key := c.str()
		c.ws()
		c.i++ // :
		var child *shape
		if s != nil {
			if seen[key] {
				return c.errorf("repeated field %q", key)
			}
			seen[key] = true
			switch {
			case s.isMap:
				child = s.elem
			default:
				f, ok := s.fields[key]
				if !ok {
					if exact, ok := s.folded[strings.ToLower(key)]; ok {
						return c.errorf("unknown field %q (field names are case-sensitive: want %q)", key, exact)
					}
					return c.errorf("unknown field %q", key)
				}
				child = f
			}
		}
		if err := c.member(key, child); err != nil {
			return err
		}
		c.ws()
	}
}

func (c *checker) array(s *shape) error {
	c.i++ // [
	var elem *shape
	if s != nil && !s.isMap && s.fields == nil {
		elem = s.elem
	}
	for n := 0; ; n++ {
		c.ws()
		if c.b[c.i] == ']' {
			c.i++
			return nil
		}
		if c.b[c.i] == ',' {
			c.i++
		}
		if err := c.member(fmt.Sprintf("[%d]", n), elem); err != nil {
			return err
		}
	}
}

// member checks the value at c.i against s, with where ("key" or "[n]")
// added to the path for errors.
func (c *checker) member(where string, s *shape) error {
	c.path = append(c.path, where)
	err := c.value(s)
	c.path = c.path[:len(c.path)-1]
	return err
}

func (c *checker) errorf(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if len(c.path) == 0 {
		return fmt.Errorf("%s", msg)
	}
	var p strings.Builder
	for i, e := range c.path {
		if i > 0 && !strings.HasPrefix(e, "[") {
			p.WriteByte('.')
		}
		p.WriteString(e)
	}
	return fmt.Errorf("%s: %s", p.String(), msg)
}
