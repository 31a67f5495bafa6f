package transport

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

func TestWithEmptyCursor(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		``:                      `{"cursor":""}`,
		`null`:                  `{"cursor":""}`,
		`{}`:                    `{"cursor":""}`,
		` { } `:                 `{"cursor":""}`,
		`{"_meta":{"a":1}}`:     `{"cursor":"","_meta":{"a":1}}`,
		`{"cursor":"x","b":2} `: `{"cursor":"","cursor":"x","b":2}`,
		`[1]`:                   `[1]`,
	} {
		got := string(WithEmptyCursor(json.RawMessage(in)))
		if got != want {
			t.Errorf("WithEmptyCursor(%q) = %q, want %q", in, got, want)
		}
	}
}

// The nextCursor of a list result is read as its bytes pass, whatever the
// chunking: a JSON body when it ends, an event stream at the end of the
// result's event (after a notification), absent and null told from "".
func TestListPageBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, ctype, body string
		next              string
		present, read     bool
	}{
		{"json empty cursor", "application/json", `{"jsonrpc":"2.0","id":1,"result":{"tools":[],"nextCursor":""}}`, "", true, true},
		{"json absent", "application/json; charset=utf-8", `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`, "", false, true},
		{"json null", "application/json", `{"jsonrpc":"2.0","id":1,"result":{"nextCursor":null}}`, "", false, true},
		{"json error", "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}`, "", false, false},
		{"sse", "text/event-stream", "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\r\n\r\n" +
			"id: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\n" + "data: \"result\":{\"nextCursor\":\"c2\"}}\n\n", "c2", true, true},
		{"sse cut before the event ends", "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"nextCursor\":\"\"}}\n", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &ListPage{}
			resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {tc.ctype}},
				Body: io.NopCloser(iotest.OneByteReader(strings.NewReader(tc.body)))}
			listPageResponse(resp, p)
			got, err := io.ReadAll(resp.Body)
			if err != nil || string(got) != tc.body {
				t.Fatalf("body = %q, %v; want it unchanged", got, err)
			}
			next, present, read := p.NextCursor()
			if next != tc.next || present != tc.present || read != tc.read {
				t.Errorf("NextCursor() = %q, %v, %v; want %q, %v, %v", next, present, read, tc.next, tc.present, tc.read)
			}
		})
	}
}
