package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

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
