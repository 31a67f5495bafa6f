package jsonw

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestAppendCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// RFC 8785 §3.2.3: sorted by UTF-16 code units (the emoji, led by
		// a surrogate, before U+FB33).
		{`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		// RFC 8785 §3.2.2.3 and appendix B number forms.
		{`[333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001, -0, 0.0, 1e21, 1e20, 100, -5, 9007199254740993]`,
			`[333333333.3333333,1e+30,4.5,0.002,1e-27,0,0,1e+21,100000000000000000000,100,-5,9007199254740992]`},
		{" {\n \"b\" : [ true , false , null ] , \"a\" : \"\\u0041\\/\\n<\" } ", `{"a":"A/\n<","b":[true,false,null]}`},
		// Repeated names are kept, in their order.
		{`{"d":"benign","a":1,"d":"evil"}`, `{"a":1,"d":"benign","d":"evil"}`},
		{`1e400`, `1e400`},
		{`{}`, `{}`},
		{`[]`, `[]`},
	} {
		got, err := AppendCanonical(nil, []byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":}`, `[1,]`, `01`, `"a`, `{"a":1} x`, `nul`} {
		if got, err := AppendCanonical([]byte("keep"), []byte(bad)); err == nil || string(got) != "keep" {
			t.Errorf("%q: got %q, %v; want an error and dst unchanged", bad, got, err)
		}
	}
}

// FuzzAppendCanonical holds the canonical form to encoding/json's reading:
// it reads as the same value, and is its own canonical form.
func FuzzAppendCanonical(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1.50,"x\u00e9"]}`, `{"a":1,"a":2}`, `[1e-7,123456789012345678]`, "\"\xff\"", `{"\ud83d\ude00":1,"\ufb33":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := AppendCanonical(nil, in)
		var want any
		if json.Unmarshal(in, &want) != nil {
			return // not JSON, or a number beyond float64: encoding/json refuses it
		}
		if err != nil {
			t.Fatalf("%q: encoding/json reads it, AppendCanonical fails: %v", in, err)
		}
		var got any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q: canonical form %q is not JSON: %v", in, out, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: canonical form %q reads as %#v, want %#v", in, out, got, want)
		}
		var c Canonicalizer // one Canonicalizer for both: its kept buffers change nothing
		if first, _ := c.Append(nil, in); string(first) != string(out) {
			t.Fatalf("%q: Canonicalizer gives %q, AppendCanonical %q", in, first, out)
		}
		again, err := c.Append(nil, out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("%q: canonical form %q is not stable: %q, %v", in, out, again, err)
		}
	})
}
