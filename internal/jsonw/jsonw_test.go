package jsonw

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// stringifyModel is JSON.stringify's rendering of s built from
// encoding/json's: encoding/json without HTML escaping, except that U+2028
// and U+2029 stay as they are and an invalid byte becomes U+FFFD itself
// instead of \ufffd.
func stringifyModel(t testing.TB, s string) []byte {
	t.Helper()
	enc := func(part string) []byte {
		var b bytes.Buffer
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		if err := e.Encode(part); err != nil {
			t.Fatal(err)
		}
		return bytes.TrimSuffix(bytes.TrimSuffix(b.Bytes(), []byte("\n")), []byte(`"`))[1:]
	}
	out := []byte{'"'}
	var part strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if r == '\u2028' || r == '\u2029' {
			out = append(append(out, enc(part.String())...), string(r)...)
			part.Reset()
			continue
		}
		part.WriteRune(r) // an invalid byte is RuneError: U+FFFD
	}
	return append(append(out, enc(part.String())...), '"')
}

func TestAppendString(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                          `""`,
		"plain <&> é":               `"plain <&> é"`,
		"q\" b\\ nl\n cr\r tab\t":   `"q\" b\\ nl\n cr\r tab\t"`,
		"\b\f\x00\x1f\x7f":          `"\b\f\u0000\u001f` + "\x7f" + `"`,
		"bad\xff\xfeend":            "\"bad\ufffd\ufffdend\"",
		"ls\u2028ps\u2029":          "\"ls\u2028ps\u2029\"",
		"surrogate \xed\xa0\x80 go": "\"surrogate \ufffd\ufffd\ufffd go\"",
	} {
		if got := string(AppendString(nil, in)); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", in, got, want)
		}
		if got := string(stringifyModel(t, in)); got != want {
			t.Errorf("model(%q) = %s, want %s", in, got, want)
		}
	}
}

// FuzzAppendString holds AppendString to encoding/json: the same string
// once decoded, and the bytes of the model above.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c\n\x01<&>", "\xff\u2028\u2029é\ufffd", `\u2028`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendString([]byte("x"), s)[1:]
		if want := stringifyModel(t, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
		var back, std string
		stdJSON, _ := json.Marshal(s)
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s: %v", s, got, err)
		}
		if err := json.Unmarshal(stdJSON, &std); err != nil || back != std {
			t.Fatalf("AppendString(%q) decodes to %q, encoding/json's to %q", s, back, std)
		}
	})
}

func TestObject(t *testing.T) {
	t.Parallel()
	o := NewObject([]byte("x"))
	o.Str("b", "v\"")
	o.Int("a", -3)
	o.Bool("ok", true)
	o.Raw("raw", []byte(`[1,{}]`))
	o.Key("nested")
	inner := NewObject(o.Buf)
	o.Buf = inner.Close()
	if got, want := string(o.Close()), `x{"b":"v\"","a":-3,"ok":true,"raw":[1,{}],"nested":{}}`; got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, in := range []string{
		``, ` `, `{}`, `[]`, `[ ]`, `{ }`, `""`, `"\u00e9\n\"\\\/\b\f\r\t"`, `"\u00g0"`, `"\u00e"`, `"\x"`, "\"a\x01\"", "\"\xff\xfe\"",
		`0`, `-0`, `01`, `-`, `1.`, `.5`, `1.5e+3`, `1E-0`, `1e`, `+1`, `-01`, `1.2.3`,
		`true`, `false`, `null`, `tru`, `nul`, `truex`, `[true false]`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`,
		`{"a":[1,{"b":null}],"c":"]}"}`, `[1 2]`, `{"a":1}}`, `{"a":1`, `[`, `]`, `{]`, `[}`, `"abc`, `1 2`,
		` {"type":"res","id":"1","ok":true} `, "\t[\r\n1\n]\n", `{"a":1 "b":2}`, `{,}`, `[,1]`,
		deep(MaxDepth), deep(MaxDepth + 1), `[` + deep(MaxDepth-1) + `,` + deep(MaxDepth) + `]`, `[` + deep(40) + `]`,
	} {
		if got, want := Valid([]byte(in)), json.Valid([]byte(in)); got != want {
			t.Errorf("Valid(%.60q) = %v, json.Valid %v", in, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range []string{`{"type":"res","id":"1:a","ok":true,"payload":{"sessions":[{"key":"k"}]}}`,
		`[1,-2.5e3,"\u12ab",true,null,{}]`, `{"a":"\"}`, "\"\x00\"", `{"a":{"b":[{"c":"d"}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := Valid(data), json.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid %v", data, got, want)
		}
	})
}

// FuzzScanners checks the other readers against encoding/json on valid
// JSON: ScanString's plain strings are their value, Members and EachMember
// see the members json.Decoder sees, Elements the elements, Indent writes
// what json.Indent writes, and Compact what json.Compact writes.
func FuzzScanners(f *testing.F) {
	for _, s := range []string{`{"a":"b","c\"d":[1, 2],"e":{"f":null}}`, `[1,"x\u00e9",{"k":true}]`,
		`"caf\u00e9"`, "\"caf\xc3\xa9\"", `{ "a" : [ ] , "b" : { } }`, `{"A":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var std bytes.Buffer
		if err := json.Indent(&std, data, "", "  "); err != nil {
			t.Fatal(err)
		}
		if _, ok := indentCompact(Compact(data)); !ok {
			t.Fatalf("Indent takes compact %q to json.Indent", Compact(data))
		}
		if got := Indent(data); !bytes.Equal(got, std.Bytes()) {
			t.Fatalf("Indent(%q) = %q, json.Indent %q", data, got, std.Bytes())
		}
		std.Reset()
		_ = json.Compact(&std, data)
		if got := Compact(data); !bytes.Equal(got, std.Bytes()) {
			t.Fatalf("Compact(%q) = %q, json.Compact %q", data, got, std.Bytes())
		}
		i := SkipSpace(data, 0)
		switch data[i] {
		case '"':
			end, plain, err := ScanString(data, i)
			if err != nil || SkipSpace(data, end) != len(data) {
				t.Fatalf("ScanString(%q) = %d, %v", data, end, err)
			}
			var s string
			_ = json.Unmarshal(data, &s)
			if plain && s != string(data[i+1:end-1]) {
				t.Fatalf("ScanString(%q): plain, but it decodes to %q", data, s)
			}
			if ps, ok := PlainString(data); ok != plain || ok && ps != s {
				t.Fatalf("PlainString(%q) = %q, %v; ScanString plain %v", data, ps, ok, plain)
			}
		case '{':
			type member struct{ key, val string }
			var want []member
			dec := json.NewDecoder(bytes.NewReader(data))
			_, _ = dec.Token()
			for dec.More() {
				k, _ := dec.Token()
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					t.Fatal(err)
				}
				want = append(want, member{k.(string), string(v)})
			}
			var got []member
			if err := Members(data, func(k, v []byte) {
				var key string
				if err := json.Unmarshal(append(append([]byte{'"'}, k...), '"'), &key); err != nil {
					t.Fatalf("Members(%q): key %q: %v", data, k, err)
				}
				got = append(got, member{key, string(v)})
			}); err != nil {
				t.Fatalf("Members(%q): %v", data, err)
			}
			var each []member
			end, err := EachMember(data, i, MaxDepth, func(k []byte, _, vs int) (int, error) {
				e, err := ScanValue(data, vs, MaxDepth-1)
				each = append(each, member{string(k), string(data[vs:e])})
				return e, err
			})
			if err != nil || SkipSpace(data, end) != len(data) {
				t.Fatalf("EachMember(%q) = %d, %v", data, end, err)
			}
			if !slices.Equal(got, want) || !slices.Equal(each, want) {
				t.Fatalf("members of %q:\nMembers    %q\nEachMember %q\nDecoder    %q", data, got, each, want)
			}
		case '[':
			var want []json.RawMessage
			_ = json.Unmarshal(data, &want)
			var got []json.RawMessage
			if err := Elements(data, func(e []byte) { got = append(got, e) }); err != nil {
				t.Fatalf("Elements(%q): %v", data, err)
			}
			if len(got) != len(want) {
				t.Fatalf("Elements(%q): %d elements, want %d", data, len(got), len(want))
			}
			for k := range got {
				if !bytes.Equal(got[k], want[k]) {
					t.Fatalf("Elements(%q)[%d] = %q, want %q", data, k, got[k], want[k])
				}
			}
			if first := FirstElement(data); len(want) > 0 && !bytes.Equal(first, want[0]) {
				t.Fatalf("FirstElement(%q) = %q, want %q", data, first, want[0])
			}
		}
	})
}

func TestScanValueErrors(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"a":1 "b":2}`: `'"' at offset 7, want , or }`,
		`[1,]`:          `']' at offset 3, want a value`,
		`[[[1]]]`:       `nesting deeper than 2 at offset 2`,
		`"a` + "\x01":   `control character 0x1 in a string at offset 2`,
		`-`:             `bad number at offset 0`,
		`{"a"`:          `end of input at offset 4, want :`,
	} {
		if _, err := ScanValue([]byte(in), 0, 2); err == nil || err.Error() != want {
			t.Errorf("ScanValue(%q) = %v, want %s", in, err, want)
		}
	}
}
