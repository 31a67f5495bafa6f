package config

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/titanous/json5"
)

var json5Inputs = []string{
	`{}`,
	`[]`,
	`{"a":1,"b":[true,false,null],"c":{"d":"e"}}`,
	`{a: 1, 'b': 'two', $c_d: [1,2,],}`,
	"// comment\n{ /* block */ x: 0x1F, y: .5, z: 5., w: +3, v: -Infinity, u: 1e3 }",
	`{"s": "tab\tnew\\nline \u00e9 \' \" \/"}`,
	`{"s": 'line \
continued'}`,
	`{"big": 123456789012345678901234567890, "small": 1e-7, "neg": -0.0}`,
	`{"dup": 1, "other": 2, "dup": 3}`,
	`{"emoji": "\ud83d\ude00", "nested": {"deep": [[[{}]]]}}`,
	`  "just a string"  `,
	`12.25`,
}

func TestParseOrderedAgreesWithJSON5(t *testing.T) {
	t.Parallel()
	for _, in := range json5Inputs {
		t.Run(in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseOrdered([]byte(in))
			if err != nil {
				t.Fatalf("ParseOrdered: %v", err)
			}
			var want any
			if err := json5.Unmarshal([]byte(in), &want); err != nil {
				t.Fatalf("json5: %v", err)
			}
			if !reflect.DeepEqual(normalizeInf(plainValue(got)), normalizeInf(want)) {
				t.Fatalf("ParseOrdered = %#v\njson5 = %#v", plainValue(got), want)
			}
		})
	}
}

// normalizeInf maps infinities to a marker: DeepEqual handles them, but
// keep NaN out of the comparison (NaN != NaN).
func normalizeInf(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeInf(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeInf(e)
		}
	case float64:
		if math.IsNaN(x) {
			return "NaN"
		}
	}
	return v
}

func TestParseOrderedErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{`, "line 1 column 2"},
		{`{"a" 1}`, `expected ':' after key "a"`},
		{`{"a":1 "b":2}`, "expected ',' or '}'"},
		{`[1 2]`, "expected ',' or ']'"},
		{`{"a":01}`, "leading zero"},
		{`"abc`, "unterminated string"},
		{"\"a\nb\"", "line break inside a string"},
		{`/* open`, "unterminated block comment"},
		{`{} x`, "after the value"},
		{`tru`, "unexpected"},
		{`{"a": 0x}`, "hexadecimal number without digits"},
		{`{"a": 1e}`, "exponent digits"},
		{"{\n\n  a: @}", "line 3 column 6"},
		{strings.Repeat("[", 2000), "nesting deeper than"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			_, err := ParseOrdered([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseOrdered(%q) error = %v, want it to contain %q", tt.in, err, tt.want)
			}
		})
	}
}

func FuzzParseOrdered(f *testing.F) {
	for _, in := range json5Inputs {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseOrdered(data)
		if err != nil {
			return
		}
		// Where the JSON5 decoder config.Load uses accepts the input too, both
		// must read the same value.
		var want any
		if json5.Unmarshal(data, &want) == nil {
			if got := normalizeInf(plainValue(v)); !reflect.DeepEqual(got, normalizeInf(want)) {
				t.Fatalf("%q: ParseOrdered = %#v, json5 = %#v", data, got, want)
			}
		}
		// What we print must parse back to the same value.
		out := MarshalIndent(v)
		back, err := ParseOrdered(out)
		if err != nil {
			t.Fatalf("reparse of %q: %v", out, err)
		}
		if again := MarshalIndent(back); string(again) != string(out) {
			t.Fatalf("not stable:\n%s\n%s", out, again)
		}
	})
}

func TestObjectKeyOrder(t *testing.T) {
	t.Parallel()
	v, err := ParseOrdered([]byte(`{"b":1,"10":2,"a":3,"2":4,"01":5,"4294967295":6}`))
	if err != nil {
		t.Fatal(err)
	}
	o := v.(*Object)
	// Array indices first, ascending (as JavaScript orders them); "01" and
	// 2^32-1 are not indices.
	want := []string{"2", "10", "b", "a", "01", "4294967295"}
	if got := o.Keys(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Keys = %q, want %q", got, want)
	}
	o.Set("b", 9) // existing key keeps its place
	o.Set("c", 1) // new key goes last
	o.Delete("a")
	want = []string{"2", "10", "b", "01", "4294967295", "c"}
	if got := o.Keys(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after edits Keys = %q, want %q", got, want)
	}
}

func TestMarshalIndentLikeJSONStringify(t *testing.T) {
	t.Parallel()
	o := NewObject()
	o.Set("empty", NewObject())
	o.Set("list", []any{})
	o.Set("s", "<a&b> \u2028 \x01 \"q\" \\")
	o.Set("n", []any{1e21, 1e20, 0.000001, 1e-7, 123.456, -0.5, math.Inf(1), math.NaN(), 5e-324, 1.7976931348623157e308, 100.0})
	inner := NewObject()
	inner.Set("k", true)
	o.Set("inner", inner)
	got := string(MarshalIndent(o))
	want := `{
  "empty": {},
  "list": [],
  "s": "<a&b> ` + "\u2028" + ` \u0001 \"q\" \\",
  "n": [
    1e+21,
    100000000000000000000,
    0.000001,
    1e-7,
    123.456,
    -0.5,
    null,
    null,
    5e-324,
    1.7976931348623157e+308,
    100
  ],
  "inner": {
    "k": true
  }
}`
	if got != want {
		t.Fatalf("MarshalIndent:\n%s\nwant:\n%s", got, want)
	}
	if c := string(MarshalCompact(inner)); c != `{"k":true}` {
		t.Fatalf("MarshalCompact = %s", c)
	}
}
