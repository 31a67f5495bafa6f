package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
)

// cursorPeer is a raw server that pages its items (tools and prompts) as
// pages says: pages[k] is the page answered to cursor key k, where key ""
// is a request without a cursor and `""` one with the cursor "". Each page
// is its item names and its nextCursor member as raw JSON ("" leaves it
// out). It records the cursor keys it was asked for, in order.
type cursorPeer struct {
	mu    sync.Mutex
	asked []string
}

type cursorPage struct {
	items []string
	next  string // raw JSON of nextCursor; "" for none
}

func (p *cursorPeer) server(t *testing.T, name string, pages map[string]cursorPage) Server {
	return rawServerCaps(t, name, `{"tools":{},"prompts":{}}`, func(_ context.Context, _ *rawConn, req *jsonrpc.Request) *jsonrpc.Response {
		return p.answer(req, pages)
	})
}

// answer answers a tools/list or prompts/list request from pages.
func (p *cursorPeer) answer(req *jsonrpc.Request, pages map[string]cursorPage) *jsonrpc.Response {
	{
		resp := &jsonrpc.Response{ID: req.ID}
		member := map[string]string{"tools/list": "tools", "prompts/list": "prompts"}[req.Method]
		if member == "" {
			resp.Result = json.RawMessage(`{}`)
			return resp
		}
		var params map[string]json.RawMessage
		_ = json.Unmarshal(req.Params, &params)
		key := ""
		if raw, ok := params["cursor"]; ok {
			key = string(raw)
			var c string
			if json.Unmarshal(raw, &c) == nil && c != "" {
				key = c
			}
		}
		p.mu.Lock()
		p.asked = append(p.asked, req.Method+" "+key)
		p.mu.Unlock()
		page := pages[key]
		var items []map[string]any
		for _, n := range page.items {
			items = append(items, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
		}
		b, _ := json.Marshal(map[string]any{member: items})
		if page.next != "" {
			b = append(append(b[:len(b)-1], `,"nextCursor":`...), page.next+"}"...)
		}
		resp.Result = b
		return resp
	}
}

func names(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%st%03d", prefix, i))
	}
	return out
}

// A nextCursor of "" is a cursor: the page behind it is asked for, with
// "cursor":"" on the wire, and only an absent nextCursor ends the list; a
// server that ends its lists with "" (and answers "" with its first page)
// stops there with the pages listed before. Tools (listTools) and prompts
// (listPages) follow the same rule.
func TestEmptyNextCursorIsACursor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		pages map[string]cursorPage
		want  []string // item names, in page order
		asked []string // cursor keys asked for
	}{
		{"empty cursor, then the end", map[string]cursorPage{
			"":   {names("", 0, 50), `""`},
			`""`: {names("", 50, 101), ""},
		}, names("", 0, 101), []string{"", `""`}},
		{"empty cursor as the end marker", map[string]cursorPage{
			"":   {names("", 0, 50), `"c1"`},
			"c1": {names("", 50, 101), `""`},
			`""`: {names("", 0, 50), `"c1"`}, // the first page again
		}, names("", 0, 101), []string{"", "c1", `""`}},
		{"empty cursor as the only end marker", map[string]cursorPage{
			"":   {names("", 0, 3), `""`},
			`""`: {names("", 0, 3), `""`},
		}, names("", 0, 3), []string{"", `""`}},
		{"null ends the list", map[string]cursorPage{
			"": {names("", 0, 3), `null`},
		}, names("", 0, 3), []string{""}},
	} {
		for _, over := range []string{"in-memory", "streamable HTTP (JSON)", "streamable HTTP (SSE)", "go-sdk's streamable transport (JSON)", "go-sdk's streamable transport (SSE)"} {
			t.Run(tc.name+" over "+over, func(t *testing.T) {
				t.Parallel()
				peer := &cursorPeer{}
				var sv Server
				switch sse := strings.HasSuffix(over, "(SSE)"); {
				case over == "in-memory":
					sv = peer.server(t, "p", tc.pages)
				case strings.HasPrefix(over, "go-sdk's"): // an embedder's transport
					sv = Server{Name: "p", Transport: &mcp.StreamableClientTransport{Endpoint: peer.httpServer(t, tc.pages, sse) + "/mcp"}}
				default:
					sv = Server{Name: "p", Entry: config.ServerEntry{URL: peer.httpServer(t, tc.pages, sse) + "/mcp",
						Transport: "streamable-http", RequestTimeoutMs: 30000}}
				}
				s := open(t, []Server{sv}, &Options{})
				var want []string
				for _, n := range tc.want {
					want = append(want, "p__"+n)
				}
				tools, err := s.Tools(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, tl := range tools {
					if tl.Utility == "" {
						got = append(got, tl.Name)
					}
				}
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("catalog has %d tools %v, want %d", len(got), got, len(want))
				}
				prompts, err := s.Prompts(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if len(prompts) != len(tc.want) {
					t.Errorf("%d prompts, want %d", len(prompts), len(tc.want))
				}
				var wantAsked []string
				for _, m := range []string{"tools/list", "prompts/list"} {
					for _, k := range tc.asked {
						wantAsked = append(wantAsked, m+" "+k)
					}
				}
				peer.mu.Lock()
				asked := slices.Clone(peer.asked)
				peer.mu.Unlock()
				if !slices.Equal(asked, wantAsked) {
					t.Errorf("asked for %q, want %q", asked, wantAsked)
				}
			})
		}
	}
}

// cursorHTTP serves cursorPeer's pages over streamable HTTP (stateless
// JSON-RPC over POST), answering each call as a JSON body or, with sse, as
// an event stream that carries a notification before the result.
func (p *cursorPeer) httpServer(t *testing.T, pages map[string]cursorPage, sse bool) string {
	handle := func(req *jsonrpc.Request) *jsonrpc.Response {
		resp := &jsonrpc.Response{ID: req.ID}
		switch req.Method {
		case "initialize":
			resp.Result = json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"prompts":{}},"serverInfo":{"name":"h","version":"1"}}`)
			return resp
		case "tools/list", "prompts/list":
		default:
			resp.Result = json.RawMessage(`{}`)
			return resp
		}
		return p.answer(req, pages)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		msg, err := jsonrpc.DecodeMessage(body)
		req, ok := msg.(*jsonrpc.Request)
		if err != nil || !ok || !req.IsCall() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		out, _ := jsonrpc.EncodeMessage(handle(req))
		if !sse {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(out)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n")
		_, _ = io.WriteString(w, "event: message\ndata: "+string(out)+"\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
