package transport

import (
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// decodeCorpus are messages, valid and not, whose decoding decodeMessage
// must share with jsonrpc.DecodeMessage.
var decodeCorpus = []string{
	`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},"_meta":{"progressToken":"p"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`,
	`{"jsonrpc":"2.0","id":"a-1","result":{"content":[{"type":"text","text":"x"}]}}`,
	`{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no","data":{"k":[1,2]}}}`,
	`{"jsonrpc":"2.0","id":3,"error":null}`,
	`{"jsonrpc":"2.0","id":3,"error":{"code":"x"}}`,
	`{"jsonrpc":"2.0","id":3}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":{},"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":""}`,
	`{"jsonrpc":"2.0","id":1,"method":null}`,
	`{"jsonrpc":"2.0","id":1,"method":7}`,
	`{"jsonrpc":"2.0","id":1,"Method":"ping"}`,
	`{"JSONRPC":"2.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"2\u002e0","i\u0064":1,"method":"p\u0069ng"}`,
	`{"jsonrpc":"2.0","id":1,"method":"a","method":"b","params":[1],"params":{"x":null}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":null}`,
	`{"jsonrpc":"2.0","method":"ping","result":{}}`,
	`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":-0,"result":"\ud800"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"deep":` + strings.Repeat("[", 998) + strings.Repeat("]", 998) + `}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"deep":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":"` + strings.Repeat("[", 1200) + `"}}`,
	`{}`,
	`{"jsonrpc":2,"id":1,"method":"ping"}`,
}

// TestDecodeMessageAsGoSDK: decodeMessage returns what
// jsonrpc.DecodeMessage returns, message for message, and refuses what it
// refuses.
func TestDecodeMessageAsGoSDK(t *testing.T) {
	t.Parallel()
	for _, msg := range decodeCorpus {
		checkDecodeAsGoSDK(t, []byte(msg))
	}
}

// FuzzDecodeMessage: the same for any one JSON value.
func FuzzDecodeMessage(f *testing.F) {
	for _, msg := range decodeCorpus {
		f.Add([]byte(msg))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if _, err := DecodeFrame(msg); err != nil {
			if fe := err.(*FrameError); fe.Code == jsonrpc.CodeParseError || fe.Batch || strings.Contains(fe.Reason, "not a JSON-RPC message object") {
				return // not one JSON object: decodeMessage is not reached
			}
		}
		checkDecodeAsGoSDK(t, []byte(strings.TrimSpace(string(msg))))
	})
}

func checkDecodeAsGoSDK(t *testing.T, msg []byte) {
	t.Helper()
	want, wantErr := jsonrpc.DecodeMessage(msg)
	got, err := decodeMessage(msg)
	if (err == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
		t.Errorf("decodeMessage(%.200s) = %#v, %v; go-sdk's = %#v, %v", msg, got, err, want, wantErr)
	}
}

// BenchmarkDecodeFrame: the frame check of a tools/call request, against
// go-sdk's jsonrpc.DecodeMessage of the same bytes.
func BenchmarkDecodeFrame(b *testing.B) {
	msg := []byte(decodeCorpus[0])
	b.Run("DecodeFrame", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeFrame(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go-sdk DecodeMessage", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jsonrpc.DecodeMessage(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
