package transport

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestDecodeFrame(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, frame string
		code        int64 // 0: accepted
		reason      string
	}{
		{"request", ` {"jsonrpc":"2.0","id":2,"method":"tools/list"} `, 0, ""},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0, ""},
		{"trailing comma", `{"jsonrpc":"2.0","id":2,"method":"tools/list"},`, jsonrpc.CodeParseError, "after top-level value"},
		{"trailing brace", `{"jsonrpc":"2.0","id":2,"result":{}}}`, jsonrpc.CodeParseError, "after top-level value"},
		{"two values", `{"jsonrpc":"2.0","id":2,"method":"ping"}{}`, jsonrpc.CodeParseError, "after top-level value"},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, jsonrpc.CodeInvalidRequest, "is null"},
		{"batch", `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`, jsonrpc.CodeInvalidRequest, "batches"},
		{"empty", "  ", jsonrpc.CodeParseError, "empty"},
	} {
		_, err := DecodeFrame([]byte(tc.frame))
		if tc.code == 0 {
			if err != nil {
				t.Errorf("%s: %v, want accepted", tc.name, err)
			}
			continue
		}
		fe, ok := err.(*FrameError)
		if !ok || fe.Code != tc.code || !strings.Contains(fe.Reason, tc.reason) {
			t.Errorf("%s: %v, want code %d and %q", tc.name, err, tc.code, tc.reason)
		}
	}
}

func TestSplitCutOff(t *testing.T) {
	t.Parallel()
	const whole = `{"jsonrpc":"2.0","id":4,"result":{"t":"a \"}\" {"}}`
	for _, tc := range []struct {
		name, line string
		ok         bool
	}{
		{"cut inside a string", `{"jsonrpc":"2.0","id":3,"result":{"t":"ab` + whole, true},
		{"cut after a key", `{"jsonrpc":"2.0","id":3,"res` + whole, true},
		{"two whole messages", `{"jsonrpc":"2.0","id":3,"result":{}}` + whole, false},
		{"trailing bytes", whole + "},", false},
		{"junk before", `junk ` + whole, false},
		{"no cut", whole, false},
		{"cut-off only", `{"jsonrpc":"2.0","id":3,"res`, false},
	} {
		cut, msg, ok := splitCutOff([]byte(tc.line))
		if ok != tc.ok {
			t.Errorf("%s: ok = %v, want %v", tc.name, ok, tc.ok)
			continue
		}
		if ok {
			if r, isResp := msg.(*jsonrpc.Response); !isResp || r.ID.Raw() != int64(4) || string(cut)+whole != tc.line {
				t.Errorf("%s: message %v cut %q, want the answer to id 4", tc.name, msg, cut)
			}
		}
	}
}

func TestReadFrameHead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prefix         string
		id             any
		method, answer bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"yyyy`, int64(7), false, true},
		{`{"jsonrpc":"2.0","id":"a","error":{"code":1,"mess`, "a", false, true},
		{`{"jsonrpc":"2.0","result":{"content":[{"type":"te`, nil, false, true},
		{`{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"mess`, int64(3), true, false},
		{`{"meta":{"a":[1,2,{"b":3}]},"id":5,"result":{`, int64(5), false, true},
		{`not json at all`, nil, false, false},
		{`{"i\u0064":9,"result":{"content":[`, int64(9), false, true},
		// An id that is not an id is skipped whole: its members are not
		// the frame's.
		{`{"id":{"method":1},"result":{"content":[`, nil, false, true},
	} {
		h := readFrameHead([]byte(tc.prefix))
		if h.id.Raw() != tc.id || h.method != tc.method || h.answer != tc.answer {
			t.Errorf("readFrameHead(%q) = %+v, want id %v method %v answer %v", tc.prefix, h, tc.id, tc.method, tc.answer)
		}
	}
	if got := string(EncodeErrorReply(jsonrpc.ID{}, -32600, "x")); got != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}` {
		t.Errorf("EncodeErrorReply = %s", got)
	}
}

// TestResponseID: ResponseID finds the response id that
// jsonrpc.DecodeMessage finds, in any key order, and nothing in requests,
// notifications and ill-formed bytes.
func TestResponseID(t *testing.T) {
	t.Parallel()
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a \"id\":8"}]}}`,
		`{"jsonrpc":"2.0","result":{},"id":"s-1"}`,
		`{"jsonrpc":"2.0","id":-3,"error":{"code":-32600,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"result":{}}`,
		`{"jsonrpc":"2.0","id":2.0,"result":{}}`,
		` {"jsonrpc":"2.0","i\u0064":4, "result":null} `,
		`{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1}}`,
		`{"jsonrpc":"2.0","id":null,"result":{}}`,
		`{"jsonrpc":"2.0","id":{"a":1},"result":{}}`,
		`{"jsonrpc":"2.0","id":5,"result":{`,
		`[{"jsonrpc":"2.0","id":5,"result":{}}]`,
	} {
		want, wantOK := jsonrpc.ID{}, false
		if m, err := jsonrpc.DecodeMessage([]byte(msg)); err == nil {
			if r, isResp := m.(*jsonrpc.Response); isResp && r.ID.IsValid() {
				want, wantOK = r.ID, true
			}
		}
		if got, ok := ResponseID([]byte(msg)); got != want || ok != wantOK {
			t.Errorf("ResponseID(%s) = %v %v, want %v %v (go-sdk's decoding)", msg, got.Raw(), ok, want.Raw(), wantOK)
		}
	}
}
