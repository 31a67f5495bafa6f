package bridge

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/openclaw-go/openclaw/internal/jsonw"
)

// realSessionsList is the payload of a captured real sessions.list response.
func realSessionsList(tb testing.TB) []byte {
	tb.Helper()
	var rec struct {
		Res struct {
			Payload json.RawMessage `json:"payload"`
		} `json:"res"`
	}
	readJSON(tb, filepath.Join(fixtures, "gateway-frames", "rpc-sessions.list.json"), &rec)
	return rec.Res.Payload
}

// slowRows is what conversations_list did before the scanner: encoding/json
// for the rows array and for each row.
func slowRows(payload []byte) ([]*Conversation, error) {
	var res struct {
		Sessions []json.RawMessage `json:"sessions"`
	}
	if err := json.Unmarshal(payload, &res); err != nil {
		return nil, err
	}
	var out []*Conversation
	for _, raw := range res.Sessions {
		var r sessionRow
		if kindOf(raw) != kindObject || json.Unmarshal(raw, &r) != nil {
			out = append(out, nil)
			continue
		}
		out = append(out, conversationFromSessionRow(&r))
	}
	return out, nil
}

func fastRows(payload []byte) ([]*Conversation, error) {
	rows, err := sessionRows(payload)
	if err != nil {
		return nil, err
	}
	var out []*Conversation
	for _, raw := range rows {
		c, _ := conversationFromRow(raw)
		out = append(out, c)
	}
	return out, nil
}

func convJSON(cs []*Conversation) string {
	var b []byte
	for _, c := range cs {
		if c == nil {
			b = append(b, "none;"...)
			continue
		}
		b = append(c.appendJSON(b), ';')
	}
	return string(b)
}

func TestScanRowAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	real := realSessionsList(t)
	for _, tc := range []struct {
		name    string
		payload string
		// scanned says the scanner must take the row itself (no fallback).
		scanned bool
	}{
		{"captured real payload", string(real), true},
		{"null payload", `null`, false},
		{"no sessions", `{"count":0}`, true},
		{"sessions null", `{"sessions":null}`, true},
		{"sessions not an array", `{"sessions":"x"}`, false},
		{"payload not an object", `[1,2]`, false},
		{"plain row", `{"sessions":[{"key":"k","deliveryContext":{"channel":"Telegram","to":"1","threadId":7},"updatedAt":5}]}`, true},
		{"route from last* and origin", `{"sessions":[{"key":"k","lastChannel":"","channel":"sms","origin":{"provider":"x","accountId":"a","threadId":"t"},"lastTo":"+1"}]}`, true},
		{"escaped value", `{"sessions":[{"key":"k\u00e9\"","deliveryContext":{"channel":"c","to":"t\n"},"label":"\ud800x"}]}`, true},
		{"invalid UTF-8 value", "{\"sessions\":[{\"key\":\"k\xff\",\"deliveryContext\":{\"channel\":\"c\",\"to\":\"t\"}}]}", true},
		{"case-folded key", `{"sessions":[{"Key":"k","deliveryContext":{"channel":"c","to":"t"}}]}`, false},
		{"case-folded nested key", `{"sessions":[{"key":"k","deliveryContext":{"Channel":"c","to":"t"}}]}`, false},
		{"case-folded sessions", `{"Sessions":[{"key":"k","deliveryContext":{"channel":"c","to":"t"}}]}`, false},
		{"duplicate key", `{"sessions":[{"key":"a","key":"b","deliveryContext":{"channel":"c","to":"t"}}]}`, false},
		{"duplicate nested object", `{"sessions":[{"key":"a","deliveryContext":{"channel":"c"},"deliveryContext":{"to":"t"}}]}`, false},
		{"deliveryContext not an object", `{"sessions":[{"key":"a","deliveryContext":"c","lastChannel":"c","lastTo":"t"}]}`, false},
		{"deliveryContext null", `{"sessions":[{"key":"a","deliveryContext":null,"lastChannel":"c","lastTo":"t"}]}`, true},
		{"escaped key", `{"sessions":[{"k\u0065y":"a","deliveryContext":{"channel":"c","to":"t"}}]}`, false},
		{"unknown keys and nesting", `{"x":{"sessions":1},"sessions":[{"a":[{"key":"no"}],"key":"k","origin":{"to":"ignored","provider":"p"},"lastTo":"t"}],"y":"]"}`, true},
		{"row not an object", `{"sessions":[1,"x",null,[],{"key":"k","lastChannel":"c","lastTo":"t"}]}`, true},
		{"whitespace", "{ \"sessions\" : [ { \"key\" : \"k\" , \"deliveryContext\" : { \"channel\" : \"c\" , \"to\" : \"t\" } , \"updatedAt\" : 1e3 } ] }", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want, werr := slowRows([]byte(tc.payload))
			got, gerr := fastRows([]byte(tc.payload))
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("error: encoding/json %v, scanner path %v", werr, gerr)
			}
			if convJSON(got) != convJSON(want) {
				t.Fatalf("conversations differ:\nscanner       %s\nencoding/json %s", convJSON(got), convJSON(want))
			}
			if !tc.scanned {
				return
			}
			rows, err := sessionRows([]byte(tc.payload))
			if err != nil {
				t.Fatal(err)
			}
			for _, raw := range rows {
				var r sessionRow
				if kindOf(raw) == kindObject && !scanRow(raw, &r) {
					t.Fatalf("scanner declined row %s", raw)
				}
			}
		})
	}
	n := 0
	for _, c := range mustRows(t, real) {
		if c != nil {
			n++
		}
	}
	if n < 2 {
		t.Fatalf("%d conversations in the captured payload, want the 2 routed ones", n)
	}
}

func mustRows(t *testing.T, payload []byte) []*Conversation {
	t.Helper()
	cs, err := fastRows(payload)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// FuzzSessionRows checks the scanner path of conversations_list against
// encoding/json on any valid JSON: the same rows, the same conversations,
// an error exactly when encoding/json fails.
func FuzzSessionRows(f *testing.F) {
	f.Add(realSessionsList(f))
	f.Add([]byte(`{"sessions":[{"key":"k","deliveryContext":{"channel":"c","to":"t","threadId":1.5}}]}`))
	f.Add([]byte(`{"sessions":[{"KEY":"k","lastTo":"t","lastChannel":"c","origin":{"provider":"P"}}]}`))
	f.Add([]byte(`{"sessions":[{"key":"\u006b","origin":[],"lastTo":"t","lastChannel":"c"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return // GatewayConn payloads are valid JSON
		}
		want, werr := slowRows(data)
		got, gerr := fastRows(data)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("error: encoding/json %v, scanner path %v on %q", werr, gerr, data)
		}
		if convJSON(got) != convJSON(want) {
			t.Fatalf("on %q:\nscanner       %s\nencoding/json %s", data, convJSON(got), convJSON(want))
		}
	})
}

// FuzzRawString checks the no-escape fast path of rawString against
// encoding/json.
func FuzzRawString(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b"`, "\"\xff\"", `"\ud800"`, ` "x" `, `"é<>&"`, `5`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want string
		if json.Unmarshal(data, &want) != nil {
			return
		}
		got, ok := rawString(data)
		if !ok || got != want {
			t.Fatalf("rawString(%q) = %q, %v; encoding/json %q", data, got, ok, want)
		}
	})
}

// FuzzValidateArgs checks the scanner path of validateArgs against the
// encoding/json tokenizer path on any input: the same arguments, in the
// same order, or the same message.
func FuzzValidateArgs(f *testing.F) {
	for _, s := range []string{`{}`, `{"limit":5,"search":"x","x":[1,{"a":"}"}]}`, `{"limit":1,"limit":2,"channel":"a"}`,
		`{"session_key":"k\u00e9","text":"hi"}`, `{"s\u0065arch":"q"}`, `{"limit": 1.5e2 , "search" : null}`, `[]`, `{"a":tru}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for i := range toolSpecs {
			spec := &toolSpecs[i]
			raw := bytes.TrimSpace(data)
			if kindOf(raw) != kindObject {
				continue
			}
			slow, smsg := decodeArgs(raw, spec.props)
			fast, ok := scanArgs(raw, spec.props)
			if !ok {
				continue
			}
			if slow == nil {
				t.Fatalf("%s: scanner took %q, tokenizer says %q", spec.name, data, smsg)
			}
			if string(fast.JSON()) != string(slow.JSON()) {
				t.Fatalf("%s on %q: scanner %s, tokenizer %s", spec.name, data, fast.JSON(), slow.JSON())
			}
		}
	})
}

// BenchmarkSessionRows compares the two ways of reading the captured real
// sessions.list payload into conversations, and of pretty-printing the
// result: the scanner path conversations_list takes, and encoding/json.
//
//	go test -run '^$' -bench SessionRows -benchmem ./bridge/
func BenchmarkSessionRows(b *testing.B) {
	payload := realSessionsList(b)
	cs, err := fastRows(payload)
	if err != nil {
		b.Fatal(err)
	}
	var out []byte
	for _, c := range cs {
		if c != nil {
			out = c.appendJSON(out)
		}
	}
	for _, bc := range []struct {
		name string
		in   []byte
		fn   func()
	}{
		{"rows/scanner", payload, func() { _, _ = fastRows(payload) }},
		{"rows/encoding-json", payload, func() { _, _ = slowRows(payload) }},
		{"pretty/one-pass", out, func() { _ = jsonw.Indent(out) }},
		{"pretty/json.Indent", out, func() {
			var buf bytes.Buffer
			_ = json.Indent(&buf, out, "", "  ")
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.in)))
			b.ReportAllocs()
			for b.Loop() {
				bc.fn()
			}
		})
	}
}
