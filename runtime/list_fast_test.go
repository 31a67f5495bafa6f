package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fastListServer is an in-process server with tools of every shape a
// listing must carry: annotations, _meta, title, output schema, a tool
// without input properties, and (with header true) an x-mcp-header
// annotation.
func fastListServer(n, pageSize int, header bool) *mcp.Server {
	srv := newServer("fast", &mcp.ServerOptions{PageSize: pageSize})
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return textResult("ok"), nil }
	for i := range n {
		t := &mcp.Tool{
			Name:        fmt.Sprintf("tool_%03d", i),
			Description: "A tool with \"quotes\" and ünïcode.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"where"}},"required":["path"]}`),
		}
		switch i % 4 {
		case 1:
			t.Title = "Title " + t.Name
			t.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "ro"}
		case 2:
			t.OutputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
			t.Meta = mcp.Meta{"vendor/key": "v"}
		case 3:
			t.InputSchema = json.RawMessage(`{"type":"object"}`)
		}
		if header && i == 0 {
			t.InputSchema = json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)
		}
		srv.AddTool(t, handler)
	}
	return srv
}

// connectFast connects a go-sdk client to srv in process, through
// withFastList when fast is set, on the given protocol version ("" is
// go-sdk's latest).
func connectFast(t *testing.T, srv *mcp.Server, fast bool, version string) *mcp.ClientSession {
	t.Helper()
	s := inProcess(t, "fast", srv)
	tr := s.Transport
	if fast {
		tr = withFastList(tr)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fast-test"}, nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// listAll lists every page with listToolsPage and returns the tools as
// JSON (what the catalog passes on) and the number of pages.
func listAll(t *testing.T, cs *mcp.ClientSession) ([]string, int) {
	t.Helper()
	var out []string
	var cur pageCursor
	for pages := 1; ; pages++ {
		res, next, more, _, err := listToolsPage(context.Background(), cs, cur)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			raw, err := json.Marshal(tl)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(raw))
		}
		if !more {
			return out, pages
		}
		cur = pageCursor{cursor: next, set: true}
	}
}

// TestListFastMatchesSDK: tools listed through the fast path are the tools
// go-sdk lists (same fields, same schemas once encoded), page by page,
// on both protocol revisions, with and without x-mcp-header (left to
// go-sdk), and a session keeps working after a fast listing.
func TestListFastMatchesSDK(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		n, page   int
		header    bool
		version   string
		wantPages int
	}{
		{"one page, 2026-07-28", 40, 0, false, "", 1},
		{"one page, 2025-11-25", 40, 0, false, "2025-11-25", 1},
		{"paginated", 25, 10, false, "", 3},
		{"paginated, 2025-11-25", 25, 10, false, "2025-11-25", 3},
		{"x-mcp-header left to go-sdk", 12, 0, true, "", 1},
		{"empty server", 0, 0, false, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want, wantPages := listAll(t, connectFast(t, fastListServer(tc.n, tc.page, tc.header), false, tc.version))
			cs := connectFast(t, fastListServer(tc.n, tc.page, tc.header), true, tc.version)
			got, pages := listAll(t, cs)
			if len(got) != tc.n || pages != tc.wantPages || wantPages != tc.wantPages {
				t.Fatalf("fast: %d tools in %d pages; go-sdk: %d pages; want %d tools in %d pages", len(got), pages, wantPages, tc.n, tc.wantPages)
			}
			for i := range want {
				// Schemas compare as encoded JSON: go-sdk re-encodes its maps
				// (sorted keys), the fast path keeps the server's bytes.
				if canon(t, got[i]) != canon(t, want[i]) {
					t.Errorf("tool %d:\n fast   %s\n go-sdk %s", i, got[i], want[i])
				}
			}
			// Listing again gives the same (nothing was cached without tools),
			// and a call still works on the session.
			again, _ := listAll(t, cs)
			if strings.Join(again, "\n") != strings.Join(got, "\n") {
				t.Errorf("second listing differs:\n%s\n%s", again, got)
			}
			if tc.n > 0 {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "tool_001", Arguments: map[string]any{"path": "x"}})
				if err != nil || res.IsError {
					t.Fatalf("call after a fast listing: %v %+v", err, res)
				}
			}
		})
	}
}

// canon re-encodes a JSON document with sorted object keys.
func canon(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestListFastSchemasStayRaw: the fast path hands the catalog the server's
// schema bytes (no map round trip), and leaves absent schemas nil.
func TestListFastSchemasStayRaw(t *testing.T) {
	t.Parallel()
	cs := connectFast(t, fastListServer(4, 0, false), true, "")
	res, _, _, _, err := listToolsPage(context.Background(), cs, pageCursor{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if _, ok := tl.InputSchema.(json.RawMessage); !ok {
			t.Errorf("%s: inputSchema is %T, want json.RawMessage", tl.Name, tl.InputSchema)
		}
		if tl.Name == "tool_002" {
			if _, ok := tl.OutputSchema.(json.RawMessage); !ok {
				t.Errorf("%s: outputSchema is %T, want json.RawMessage", tl.Name, tl.OutputSchema)
			}
		} else if tl.OutputSchema != nil {
			t.Errorf("%s: outputSchema %v, want nil", tl.Name, tl.OutputSchema)
		}
	}
}

// TestDecodeToolsErrors: a tools array that does not decode is an error
// naming the entry (take then leaves the page to go-sdk), and null entries
// are dropped as go-sdk drops them.
func TestDecodeToolsErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw, wantErr string
		want         int
	}{
		{`[{"name":"a","inputSchema":{"type":"object"}},null]`, "", 1},
		{`[]`, "", 0},
		{``, "", 0},
		{`{"name":"a"}`, "tools:", 0},
		{`[{"name":"a"},{"name":7}]`, "tools[1]", 0},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			t.Parallel()
			tools, err := decodeTools(json.RawMessage(tc.raw))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(tools) != tc.want {
				t.Fatalf("%d tools, %v; want %d", len(tools), err, tc.want)
			}
		})
	}
}

// refPage decodes a tools/list result with encoding/json the way go-sdk
// reads it (member names matched exactly, the last duplicate kept), the
// schemas left raw: the reference of FuzzSplitPage.
// refStrings reads the string members of one tool object the way go-sdk's
// decoder fills a struct: keys matched exactly (case-sensitive), members
// in order, a null leaving the earlier value (a map keeps only the last
// occurrence of a repeated key, even a null one).
func refStrings(obj json.RawMessage, dst map[string]*string) error {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if p, ok := dst[tok.(string)]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, p); err != nil {
				return err
			}
		}
	}
	return nil
}

func refPage(in []byte) ([]*mcp.Tool, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(in, &top); err != nil {
		return nil, err
	}
	if top == nil {
		return nil, fmt.Errorf("result is null")
	}
	var items []map[string]json.RawMessage
	var raws []json.RawMessage
	if raw, ok := top["tools"]; ok {
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &raws); err != nil {
			return nil, err
		}
	}
	var tools []*mcp.Tool
	for i, m := range items {
		if m == nil {
			continue // a null entry
		}
		t := &mcp.Tool{}
		if err := refStrings(raws[i], map[string]*string{"name": &t.Name, "title": &t.Title, "description": &t.Description}); err != nil {
			return nil, err
		}
		for key, dst := range map[string]*any{"inputSchema": &t.InputSchema, "outputSchema": &t.OutputSchema} {
			if raw, ok := m[key]; ok && string(raw) != "null" {
				*dst = raw
			}
		}
		for key, dst := range map[string]any{"_meta": &t.Meta, "annotations": &t.Annotations, "icons": &t.Icons} {
			if raw, ok := m[key]; ok {
				if err := json.Unmarshal(raw, dst); err != nil {
					return nil, err
				}
			}
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// FuzzSplitPage checks the hand-written page decoder against encoding/json:
// what it accepts is valid JSON that encoding/json decodes to the same
// tools, with a remainder that is valid JSON without tools or ttlMs; what
// encoding/json decodes as a page it accepts (nesting beyond go-sdk's
// depth limit aside).
func FuzzSplitPage(f *testing.F) {
	for _, seed := range []string{
		`{"tools":[{"name":"a","inputSchema":{"type":"object"}},null],"nextCursor":"c","ttlMs":5}`,
		`{"tools":[]}`,
		`{"tools":null,"_meta":{"k":[1,2.5e3,-0.1,true,false,null]}}`,
		`{"tools":[{"name":"caf\u00e9 \"q\"","description":"\ud83d\ude00 ünï","title":null,"outputSchema":null,"inputSchema":{"a":[{}]}}]}`,
		`{"tools":[{"name":"a","annotations":{"readOnlyHint":true,"title":"t"},"_meta":{"x":1},"icons":[{"src":"https://x/i.png"}]}]}`,
		`{"tools":[{"name":"a","Name":"b","name":"c","extra":{"deep":[[[]]]}}]}`,
		`{"tools":[{"name":7}]}`,
		`{"tools":[{"name":"a","title":"x","title":null}]}`,
		`{"tools":[{"name":"a","Name":"b","TITLE":"t"}]}`,
		`{"tools":{}}`,
		` { "tools" : [ { "name" : "a" } ] , "nextCursor" : "" } `,
		"{\"tools\":[{\"name\":\"bad \xff utf8\"}]}",
		`{"tools":[{"name":"a"}]} x`,
		`{"tools":[{"name":"a",}]}`,
		`{"t\u006fols":[{"name":"escaped key"}]}`,
		`[]`,
		`null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, rest, err := splitPage(in)
		want, werr := refPage(in)
		if err != nil {
			if werr == nil && !strings.Contains(err.Error(), "nesting deeper") {
				t.Fatalf("splitPage(%q): %v; encoding/json decodes it", in, err)
			}
			return
		}
		if werr != nil {
			t.Fatalf("splitPage(%q) accepted what encoding/json refuses: %v", in, werr)
		}
		var restTop map[string]json.RawMessage
		if err := json.Unmarshal(rest, &restTop); err != nil {
			t.Fatalf("remainder %q of %q: %v", rest, in, err)
		}
		if string(restTop["tools"]) != "[]" {
			t.Fatalf("remainder %q: tools %s, want []", rest, restTop["tools"])
		}
		if _, ok := restTop["ttlMs"]; ok {
			t.Fatalf("remainder %q keeps ttlMs", rest)
		}
		if len(got) != len(want) {
			t.Fatalf("splitPage(%q): %d tools, encoding/json %d", in, len(got), len(want))
		}
		for i := range got {
			g, err := json.Marshal(got[i])
			if err != nil {
				t.Fatal(err)
			}
			w, err := json.Marshal(want[i])
			if err != nil {
				t.Fatal(err)
			}
			if string(g) != string(w) {
				t.Fatalf("tool %d of %q:\n got  %s\n want %s", i, in, g, w)
			}
		}
	})
}
