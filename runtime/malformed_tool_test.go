package runtime

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// malformedTools is a tools/list result whose valid tools (good, also)
// surround definitions a client cannot use: a name that is not a string,
// no name, an input schema that is not an object, a tool that is not an
// object, and x-mcp-header on an object property.
const malformedTools = `{"tools":[
 {"name":"good","inputSchema":{"type":"object"}},
 {"name":7,"inputSchema":{"type":"object"}},
 {"inputSchema":{"type":"object"}},
 {"name":"bad_schema","inputSchema":"not a schema"},
 "not a tool",
 {"name":"bad_header","inputSchema":{"type":"object","properties":{"o":{"type":"object","x-mcp-header":"O"}}}},
 {"name":"also","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}}
]}`

// rawAnswer answers the MCP requests of a scripted server: server/discover
// refused (the older handshake follows), initialize, and tools/list with
// malformedTools.
func rawAnswer(method string) (json.RawMessage, *jsonrpc.Error) {
	switch method {
	case "initialize":
		return json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`), nil
	case "tools/list":
		return json.RawMessage(malformedTools), nil
	case "tools/call":
		return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method}
}

// rawInMemory serves rawAnswer on an in-memory transport.
func rawInMemory(t *testing.T) Server {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	conn, err := st.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	go func() {
		for {
			msg, err := conn.Read(context.Background())
			if err != nil {
				return
			}
			req, ok := msg.(*jsonrpc.Request)
			if !ok || !req.IsCall() {
				continue
			}
			res, rerr := rawAnswer(req.Method)
			resp := &jsonrpc.Response{ID: req.ID, Result: res}
			if rerr != nil {
				resp = &jsonrpc.Response{ID: req.ID, Error: rerr}
			}
			if conn.Write(context.Background(), resp) != nil {
				return
			}
		}
	}()
	sv := Server{Name: "raw", Transport: ct}
	sv.Entry.RequestTimeoutMs = 30000
	return sv
}

// rawHTTP serves rawAnswer over streamable HTTP: as JSON responses, or
// with sse as an event stream holding a notification, then the answer.
func rawHTTP(t *testing.T, sse bool) Server {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(b, &req)
		if len(req.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		res, rerr := rawAnswer(req.Method)
		out := map[string]any{"jsonrpc": "2.0", "id": req.ID}
		if rerr != nil {
			out["error"] = rerr
		} else {
			out["result"] = res
		}
		if sse {
			b, _ := json.Marshal(out)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"hi\"}}\n\nid: 7\nevent: message\ndata: "+string(b)+"\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(hs.Close)
	sv := Server{Name: "raw"}
	sv.Entry.URL, sv.Entry.Transport, sv.Entry.RequestTimeoutMs = hs.URL, "streamable-http", 30000
	return sv
}

// TestMalformedToolDefinitionKeepsTheOthers: a tools/list page with
// definitions no client can use still gives the catalog the valid tools,
// which can be called, and each definition left out is logged by its
// place and name (in-process, streamable HTTP with a JSON body and with an
// event stream).
func TestMalformedToolDefinitionKeepsTheOthers(t *testing.T) {
	t.Parallel()
	for name, sv := range map[string]func(*testing.T) Server{
		"in-memory":       rawInMemory,
		"streamable HTTP": func(t *testing.T) Server { return rawHTTP(t, false) },
		"event stream":    func(t *testing.T) Server { return rawHTTP(t, true) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var logs syncBuffer
			s := open(t, []Server{sv(t)}, &Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if d := s.Diagnostics(); len(d) > 0 {
				t.Fatalf("diagnostics: %v", d)
			}
			if got, want := sorted(toolNames(t, s)), []string{"raw__also", "raw__good"}; !slices.Equal(got, want) {
				t.Fatalf("catalog = %v, want %v", got, want)
			}
			res, err := s.CallTool(context.Background(), "raw__good", nil)
			if err != nil || res.IsError {
				t.Fatalf("calling raw__good: %v %+v", err, res)
			}
			for _, want := range []string{`tools[1]: json: cannot unmarshal`, `tools[2]: no name`, `tools[3] \"bad_schema\": inputSchema is a string`, `tools[4]: json: cannot unmarshal`} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the log does not say %s:\n%s", want, logs.String())
				}
			}
		})
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
