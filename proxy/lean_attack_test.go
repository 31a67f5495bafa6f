package proxy

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestLeanCraftedRequests sends crafted requests (repeated or case-folded
// keys, escapes, odd ids, batches, trailing bytes, deep nesting, a _meta
// claiming an identity, parameter headers in other forms) through the
// lean path and go-sdk's: the client gets the same answer from both, and
// the blocked tool never runs, whatever name the headers or a repeated
// key show.
func TestLeanCraftedRequests(t *testing.T) {
	t.Parallel()
	f := newLeanFixture(t)
	ctx := context.Background()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	cases := []struct {
		name, tool, body string
		hdr              map[string]string
	}{
		{"dup name echo,reset hdr reset", "up__reset", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","name":"up__reset",` + meta + `}}`, nil},
		{"dup name reset,echo hdr echo", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__reset","name":"up__echo",` + meta + `}}`, nil},
		{"dup name reset,echo hdr reset", "up__reset", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__reset","name":"up__echo",` + meta + `}}`, nil},
		{"Name+name", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"up__reset","name":"up__echo",` + meta + `}}`, nil},
		{"name+Name", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","Name":"up__reset",` + meta + `}}`, nil},
		{"escaped name", "up__reset", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__r\u0065set",` + meta + `}}`, nil},
		{"escaped method", "up__reset", `{"jsonrpc":"2.0","id":1,"method":"tools/c\u0061ll","params":{"name":"up__reset",` + meta + `}}`, nil},
		{"dup method list,call", "up__reset", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"up__reset",` + meta + `}}`, nil},
		{"dup method call,list", "up__reset", `{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/list","params":{"name":"up__reset",` + meta + `}}`, nil},
		{"dup params", "up__reset", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo",` + meta + `},"params":{"name":"up__reset",` + meta + `}}`, nil},
		{"dup params2", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__reset",` + meta + `},"params":{"name":"up__echo",` + meta + `}}`, nil},
		{"Params case", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","Params":{"name":"up__reset",` + meta + `},"params":{"name":"up__echo",` + meta + `}}`, nil},
		{"Method case", "up__reset", `{"jsonrpc":"2.0","id":1,"Method":"tools/list","method":"tools/call","params":{"name":"up__reset",` + meta + `}}`, nil},
		{"huge id", "up__echo", `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/call","params":{"name":"up__echo",` + meta + `}}`, nil},
		{"float id", "up__echo", `{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"up__echo",` + meta + `}}`, nil},
		{"1e2 id", "up__echo", `{"jsonrpc":"2.0","id":1e2,"method":"tools/call","params":{"name":"up__echo",` + meta + `}}`, nil},
		{"neg id", "up__echo", `{"jsonrpc":"2.0","id":-9223372036854775808,"method":"tools/call","params":{"name":"up__echo",` + meta + `}}`, nil},
		{"obj id", "up__echo", `{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{"name":"up__echo",` + meta + `}}`, nil},
		{"bool id", "up__echo", `{"jsonrpc":"2.0","id":true,"method":"tools/call","params":{"name":"up__echo",` + meta + `}}`, nil},
		{"batch", "up__echo", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo",` + meta + `}}]`, nil},
		{"trailing garbage", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo",` + meta + `}}xx`, nil},
		{"trailing second", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo",` + meta + `}}{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__reset",` + meta + `}}`, nil},
		{"deep args", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{"a":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `},` + meta + `}}`, nil},
		{"deep args 5000", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{"a":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `},` + meta + `}}`, nil},
		{"dup _meta", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo",` + meta + `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18"}}}`, nil},
		{"dup _meta rev", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18"},` + meta + `}}`, nil},
		{"meta key case", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","_META":{"x":1},` + meta + `}}`, nil},
		{"meta progress case", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","_meta":{"ProgressToken":1,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, nil},
		{"meta identity claim", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","_meta":{"openclaw.identity":{"subject":"root"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{}}}}}`, nil},
		{"name with NUL", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo\u0000",` + meta + `}}`, nil},
		{"header Mcp-Name with space", "up__echo ", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo ",` + meta + `}}`, nil},
		{"MCP-Protocol-Version lower", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo",` + meta + `}}`, map[string]string{"mcp-protocol-version": "2026-07-28"}},
		{"Protocol older header", "up__reset", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__reset",` + meta + `}}`, map[string]string{"Mcp-Protocol-Version": "2025-06-18"}},
		{"invalid utf8 name", "up__reset", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"up__reset\xff\"," + meta + "}}", nil},
		{"arguments dup key", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{"message":"a","message":"b"},` + meta + `}}`, nil},
		{"arguments dup", "up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{"message":"a"},"arguments":{"message":"b"},` + meta + `}}`, nil},
		{"keyed dup region", "up__keyed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__keyed","arguments":{"region":"eu","region":"us"},` + meta + `}}`, map[string]string{"Mcp-Param-Region": "eu"}},
		{"keyed dup region2", "up__keyed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__keyed","arguments":{"region":"eu","region":"us"},` + meta + `}}`, map[string]string{"Mcp-Param-Region": "us"}},
		{"keyed Region case", "up__keyed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__keyed","arguments":{"Region":"us"},` + meta + `}}`, nil},
		{"keyed b64 bad pad", "up__keyed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__keyed","arguments":{"region":"eu"},` + meta + `}}`, map[string]string{"Mcp-Param-Region": "=?base64?ZXU?="}},
		{"keyed b64 lower", "up__keyed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__keyed","arguments":{"region":"eu"},` + meta + `}}`, map[string]string{"Mcp-Param-Region": "=?BASE64?ZXU=?="}},
		{"keyed unicode", "up__keyed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__keyed","arguments":{"region":"\u00e9"},` + meta + `}}`, map[string]string{"Mcp-Param-Region": "é"}},
		{"keyed n big", "up__keyed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__keyed","arguments":{"opts":{"n":9007199254740993}},` + meta + `}}`, map[string]string{"Mcp-Param-N": "9007199254740992"}},
		{"keyed n 1e0", "up__keyed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__keyed","arguments":{"opts":{"n":3e0}},` + meta + `}}`, map[string]string{"Mcp-Param-N": "3"}},
		{"keyed n -0", "up__keyed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__keyed","arguments":{"opts":{"n":-0}},` + meta + `}}`, map[string]string{"Mcp-Param-N": "0"}},
		{"keyed n 3.0", "up__keyed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__keyed","arguments":{"opts":{"n":3.0}},` + meta + `}}`, map[string]string{"Mcp-Param-N": "3"}},
		{"keyed dup opts", "up__keyed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__keyed","arguments":{"opts":{"n":3},"opts":{"n":4}},` + meta + `}}`, map[string]string{"Mcp-Param-N": "4"}},
		{"keyed dup opts 3", "up__keyed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__keyed","arguments":{"opts":{"n":3},"opts":{"n":4}},` + meta + `}}`, map[string]string{"Mcp-Param-N": "3"}},
		{"keyed bool region", "up__keyed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__keyed","arguments":{"region":true},` + meta + `}}`, map[string]string{"Mcp-Param-Region": "true"}},
		{"keyed header space", "up__keyed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__keyed","arguments":{"region":" eu "},` + meta + `}}`, map[string]string{"Mcp-Param-Region": " eu "}},
	}
	for _, tc := range cases {
		f.onBothPaths(t, tc.name, func(lean bool) leanAnswer {
			a, err := f.post(t, ctx, tc.tool, tc.hdr, tc.body)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if strings.Contains(a.Body, "reset done") {
				t.Errorf("%s (lean %v): the blocked tool ran: %s", tc.name, lean, a.Body)
			}
			a.Raw = ""
			return a
		})
	}
}

// TestLeanConcurrentCalls: calls of a blocked and an allowed tool at once
// on the lean path each get their own answer.
func TestLeanConcurrentCalls(t *testing.T) {
	t.Parallel()
	f := newLeanFixture(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			tool, want := "up__echo", fmt.Sprintf("echo: m%d ", i)
			if i%2 == 0 {
				tool, want = "up__reset", "resets are disabled"
			}
			a, err := f.post(t, ctx, tool, nil, callBody(i, tool, fmt.Sprintf(`{"message":"m%d"}`, i), `{}`, ""))
			if err != nil {
				t.Error(err)
				return
			}
			if !strings.Contains(a.Body, want) || !strings.Contains(a.Body, fmt.Sprintf(`"id":%d,`, i)) {
				t.Errorf("call %d of %s: %s", i, tool, a.Body)
			}
		})
	}
	wg.Wait()
}

// TestRepeatedMcpHeaders: a POST that repeats an Mcp-* header (one
// value agreeing with the body, another not, which an intermediary
// reading the other one would route or filter by) is refused with 400 and
// -32020 naming the header, on the lean path and go-sdk's alike, and the
// call reaches neither the policy nor the tool.
func TestRepeatedMcpHeaders(t *testing.T) {
	t.Parallel()
	f := newLeanFixture(t)
	ctx := context.Background()
	cases := []struct {
		name, header string
		values       []string
		tool, body   string
	}{
		{"Mcp-Name", "Mcp-Name", []string{"up__echo", "up__reset"}, "up__echo", callBody(1, "up__echo", `{"message":"hi"}`, `{}`, "")},
		{"Mcp-Name in another case", "mcp-name", []string{"up__reset"}, "up__echo", callBody(2, "up__echo", `{"message":"hi"}`, `{}`, "")},
		{"Mcp-Method", "Mcp-Method", []string{"tools/list"}, "up__echo", callBody(3, "up__echo", `{"message":"hi"}`, `{}`, "")},
		{"Mcp-Protocol-Version", "MCP-Protocol-Version", []string{"2025-06-18"}, "up__echo", callBody(4, "up__echo", `{"message":"hi"}`, `{}`, "")},
		{"Mcp-Param-Region", "Mcp-Param-Region", []string{"eu-west", "us-east"}, "up__keyed", callBody(5, "up__keyed", `{"region":"eu-west"}`, `{}`, "")},
	}
	for _, tc := range cases {
		for _, lean := range []bool{true, false} {
			f.p.noLean.Store(!lean)
			f.mu.Lock()
			f.seen = nil
			f.mu.Unlock()
			req := f.request(t, ctx, tc.tool, nil, tc.body)
			for _, v := range tc.values {
				req.Header.Add(tc.header, v)
			}
			a, err := f.send(req)
			if err != nil {
				t.Fatal(err)
			}
			canonical := http.CanonicalHeaderKey(tc.header)
			if a.Status != http.StatusBadRequest || !strings.Contains(a.Raw, `"code":-32020`) || !strings.Contains(a.Raw, canonical+" header is repeated") {
				t.Errorf("%s (lean %v): %d %s; want 400, -32020 naming %s", tc.name, lean, a.Status, a.Raw, canonical)
			}
			f.mu.Lock()
			seen := len(f.seen)
			f.mu.Unlock()
			if seen != 0 {
				t.Errorf("%s (lean %v): the policy saw the call", tc.name, lean)
			}
		}
	}
	f.p.noLean.Store(false)
}
