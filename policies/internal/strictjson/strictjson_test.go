package strictjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/policies/internal/strictjson"
)

type verdict struct {
	Decision string          `json:"decision"`
	Reason   string          `json:"reason,omitempty"`
	TTL      int64           `json:"ttl_ms,omitempty"`
	Args     json.RawMessage `json:"arguments,omitempty"`
}

type catalog struct {
	Servers []server          `json:"servers"`
	Index   map[string]server `json:"index,omitempty"`
	Next    *catalog          `json:"next,omitempty"`
}

type server struct {
	Safe  string `json:"safe"`
	Tools []tool `json:"tools"`
}

type tool struct {
	Name string `json:"name,omitempty"`
}

func TestUnmarshal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		v    any
		want string // "" for accepted
	}{
		{`{"decision":"deny","reason":"r","ttl_ms":5}`, new(verdict), ""},
		{` {"decision" : "deny"} `, new(verdict), ""},
		{`{"decision":"deny","decision":"allow-always"}`, new(verdict), `repeated field "decision"`},
		{`{"decision":"deny","d\u0065cision":"allow-always"}`, new(verdict), `repeated field "decision"`},
		{`{"Decision":"allow-always"}`, new(verdict), `unknown field "Decision" (field names are case-sensitive: want "decision")`},
		{`{"decision":"deny","DECISION":"allow-always"}`, new(verdict), `unknown field "DECISION"`},
		{`{"deciſion":"allow-always"}`, new(verdict), `unknown field "deciſion"`}, // U+017F folds to s in encoding/json
		{`{"decision":"deny","extra":1}`, new(verdict), `unknown field "extra"`},
		// Arguments are the tool's, not ours: their keys are not checked.
		{`{"decision":"allow","arguments":{"a":1,"a":2,"A":3}}`, new(verdict), ""},
		{`{"servers":[{"safe":"a","tools":[{"name":"x"},{"Name":"y"}]}]}`, new(catalog), `servers[0].tools[1]: unknown field "Name"`},
		{`{"servers":[{"safe":"a","tools":[],"safe":"b"}]}`, new(catalog), `servers[0]: repeated field "safe"`},
		{`{"servers":[],"index":{"a":{"safe":"a","tools":[]},"a":{"safe":"b","tools":[]}}}`, new(catalog), `index: repeated field "a"`},
		{`{"servers":[],"index":{"a":{"safe":"a","tools":[]},"A":{"safe":"b","tools":[]}}}`, new(catalog), ""},
		{`{"servers":[],"next":{"servers":[],"next":{"servers":[{"tools":[{"nam":"x"}]}]}}}`, new(catalog), `next.next.servers[0].tools[0]: unknown field "nam"`},
		{`[{"result":1},{"result":2,"result":3}]`, new([]map[string]json.RawMessage), `[1]: repeated field "result"`},
		{`{"a":{"x":1,"x":2}}`, new(map[string]json.RawMessage), ""},
		{`{"decision":"deny"} {}`, new(verdict), "invalid character '{' after top-level value"},
		{``, new(verdict), "unexpected end of JSON input"},
		{`{"decision":1}`, new(verdict), "cannot unmarshal number"},
	} {
		err := strictjson.Unmarshal([]byte(tc.in), tc.v)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Unmarshal(%s) = %v, want %q", tc.in, err, tc.want)
		}
	}
	if err := strictjson.Unmarshal([]byte(`{}`), verdict{}); err == nil {
		t.Error("a non-pointer was accepted")
	}
}

// FuzzUnmarshal checks Unmarshal against encoding/json on a nested type:
// what it accepts, encoding/json decodes to the same value, with no
// repeated key in any object and every struct key exact; what is valid
// that way (encoding/json decodes it, no repeated key, every key exact),
// it accepts.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"servers":[{"safe":"a","tools":[{"name":"x"}]}],"index":{"k":{"safe":"b","tools":[]}}}`,
		`{"servers":[],"next":{"servers":null}}`,
		`{"servers":[{"Safe":"a"}]}`, `{"servers":[],"servers":[]}`, `{"index":{"k":null,"k":null}}`,
		`{"servers":[{"s\u0061fe":"é\ud800"}]}`, `[]`, `"x"`, `{"servers":[{"tools":[{"name":1}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var got catalog
		err := strictjson.Unmarshal(in, &got)
		var std catalog
		stdErr := json.Unmarshal(in, &std)
		exact := stdErr == nil && noRepeatedKeys(in) && exactKeys(t, in, reflect.TypeFor[catalog]())
		if err == nil {
			if !exact {
				t.Fatalf("accepted %q: encoding/json %v, repeated keys %v, exact keys %v", in, stdErr, !noRepeatedKeys(in), exactKeys(t, in, reflect.TypeFor[catalog]()))
			}
			if !reflect.DeepEqual(got, std) {
				t.Fatalf("%q: strict %+v, encoding/json %+v", in, got, std)
			}
			return
		}
		if exact {
			t.Fatalf("refused %q, which encoding/json reads one way: %v", in, err)
		}
	})
}

// noRepeatedKeys walks in with json.Decoder tokens and reports whether no
// object repeats a key.
func noRepeatedKeys(in []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(in))
	type level struct {
		obj    bool
		keys   map[string]bool
		expect bool // the next string token is a key
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return true // a syntax error: encoding/json refuses it anyway
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if top != nil && top.obj {
					top.expect = true
				}
				stack = append(stack, &level{obj: d == '{', keys: map[string]bool{}, expect: d == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if top != nil && top.obj {
			if top.expect {
				k := tok.(string)
				if top.keys[k] {
					return false
				}
				top.keys[k] = true
				top.expect = false
			} else {
				top.expect = true
			}
		}
	}
}

// exactKeys decodes in generically and reports whether every key of an
// object decoded into a struct of type t is exactly one of its JSON names.
func exactKeys(t *testing.T, in []byte, typ reflect.Type) bool {
	var x any
	if json.Unmarshal(in, &x) != nil {
		return false
	}
	return exactIn(x, typ)
}

func exactIn(x any, typ reflect.Type) bool {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch v := x.(type) {
	case map[string]any:
		switch typ.Kind() {
		case reflect.Map:
			for _, e := range v {
				if !exactIn(e, typ.Elem()) {
					return false
				}
			}
		case reflect.Struct:
			for k, e := range v {
				f, ok := fieldByJSONName(typ, k)
				if !ok || !exactIn(e, f.Type) {
					return false
				}
			}
		}
	case []any:
		if typ.Kind() == reflect.Slice {
			for _, e := range v {
				if !exactIn(e, typ.Elem()) {
					return false
				}
			}
		}
	}
	return true
}

func fieldByJSONName(typ reflect.Type, name string) (reflect.StructField, bool) {
	for i := range typ.NumField() {
		f := typ.Field(i)
		if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
