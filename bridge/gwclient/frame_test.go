package gwclient

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

func TestFastFrame(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		fast bool // the fast path must take it
	}{
		{`{"type":"res","id":"1:a","ok":true,"payload":{"sessions":[]}}`, true},
		{` { "type" : "res" , "id" : "1:a" , "ok" : false , "payload" : null } `, true},
		{`{"type":"res","id":"1:a","ok":true}`, true},
		{`{"type":"event","event":"session.message","payload":{"x":1},"seq":4,"stateVersion":{"a":1}}`, true},
		{`{"type":"event","event":"tick","payload":{},"extra":[1,"]"]}`, true},
		{`{"type":"res","id":"1:a","ok":false,"error":{"code":"X","message":"m"}}`, false},
		{`{"type":"req","id":"1","method":"m","params":{}}`, false},
		{`{"type":"res","id":"","ok":true}`, false},
		{`{"type":"res","id":"1","ok":"yes"}`, false},
		{`{"type":"res","id":1,"ok":true}`, false},
		{`{"type":"res","id":"1"}`, false},
		{`{"Type":"res","id":"1","ok":true}`, false},
		{`{"type":"res","type":"event","id":"1","ok":true}`, false},
		{`{"typ\u0065":"res","id":"1","ok":true}`, false},
		{`{"type":"r\u0065s","id":"1","ok":true}`, false},
		{`{"type":"event","event":"e","seq":-1}`, false},
		{`{"type":"event","event":"e","seq":1.0}`, false},
		{`{"type":"event","event":"e","seq":null}`, false},
		{`{"type":"event","event":""}`, false},
		{`{"type":"other"}`, false},
		{`{"type":"res","id":"1","ok":true,"payload":{}`, false},
		{`[]`, false}, {`null`, false}, {`not json`, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, ok := fastFrame([]byte(tc.in))
			if ok != tc.fast {
				t.Fatalf("fast path taken = %v, want %v", ok, tc.fast)
			}
			checkFrame(t, []byte(tc.in))
			if !ok {
				return
			}
			want, err := protocol.Decode([]byte(tc.in))
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("fast %+v; protocol.Decode %+v, %v", got, want, err)
			}
		})
	}
}

// checkFrame fails when decodeFrame and protocol.Decode disagree on data.
func checkFrame(t *testing.T, data []byte) {
	t.Helper()
	got, gerr := decodeFrame(data)
	want, werr := protocol.Decode(data)
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("errors on %q: decodeFrame %v, protocol.Decode %v", data, gerr, werr)
	}
	if !reflect.DeepEqual(normalize(got), normalize(want)) {
		t.Fatalf("frames of %q differ:\ndecodeFrame     %+v\nprotocol.Decode %+v", data, got, want)
	}
}

// normalize makes RawMessage fields comparable (nil and empty are the same
// absence) without changing their bytes.
func normalize(f *protocol.Frame) *protocol.Frame {
	if f == nil {
		return nil
	}
	c := *f
	for _, r := range []*json.RawMessage{&c.Params, &c.Payload, &c.StateVersion} {
		if len(*r) == 0 {
			*r = nil
		} else {
			*r = bytes.Clone(*r)
		}
	}
	return &c
}

// FuzzDecodeFrame checks decodeFrame against protocol.Decode: the same
// frame or the same error on any input.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"res","id":"1:a","ok":true,"payload":{"sessions":[{"key":"k"}]}}`,
		`{"type":"event","event":"tick","payload":{"ts":1},"seq":3}`,
		`{"type":"res","id":"1:a","ok":false,"error":{"code":"X","message":"m"}}`,
		`{"type":"event","event":"e","seq":"1","Event":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkFrame(t, data) })
}

func BenchmarkDecodeFrame(b *testing.B) {
	frame, err := os.ReadFile("../../testdata/openclaw/gateway-frames/rpc-sessions.list.json")
	if err != nil {
		b.Skipf("fixture not available: %v", err)
	}
	var pair struct {
		Res json.RawMessage `json:"res"`
	}
	if err := json.Unmarshal(frame, &pair); err != nil {
		b.Fatal(err)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, pair.Res); err != nil {
		b.Fatal(err)
	}
	data := c.Bytes()
	for _, d := range []struct {
		name string
		fn   func([]byte) (*protocol.Frame, error)
	}{{"protocol.Decode", protocol.Decode}, {"decodeFrame", decodeFrame}} {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.fn(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
