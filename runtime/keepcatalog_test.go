package runtime

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server whose listing fails after it announced a change (busy: it
// answers tools/list with an error, or not in time) keeps its last good
// tools, listed and callable, with a tools/list diagnostic, until a listing
// succeeds.
func TestFailedRelistKeepsTheLastGoodTools(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"error", "timeout"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			busy := make(chan struct{}, 1)
			sv := scriptPeer(t, "b", []scriptTool{{"t", ""}}, scriptHooks{
				list: func(ctx context.Context, n int) *jsonrpc.Error {
					select {
					case <-busy:
					default:
						return nil
					}
					if mode == "timeout" {
						<-ctx.Done() // no answer before the list timeout
						return nil
					}
					return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "busy"}
				},
				call: func(ctx context.Context, conn mcp.Connection, _ json.RawMessage) string {
					busy <- struct{}{}
					_ = conn.Write(ctx, &jsonrpc.Request{Method: "notifications/tools/list_changed", Params: json.RawMessage(`{}`)})
					return "done"
				},
			})
			if mode == "timeout" {
				sv.Entry.RequestTimeoutMs = 300
			}
			ev := newEvents()
			s := open(t, []Server{sv}, &Options{OnEvent: ev.on})
			if got := toolNames(t, s); !slices.Equal(got, []string{"b__t"}) {
				t.Fatalf("catalog = %v", got)
			}
			if _, err := s.CallTool(context.Background(), "b__t", nil); err != nil {
				t.Fatal(err)
			}
			ev.wait(t, EventToolsChanged, "b")
			if got := toolNames(t, s); !slices.Equal(got, []string{"b__t"}) {
				t.Errorf("catalog after the failed listing = %v, want the last good one [b__t]", got)
			}
			d := s.Diagnostics()
			if len(d) != 1 || !strings.Contains(d[0].Error(), "tools/list") {
				t.Errorf("diagnostics %v, want the failed tools/list", d)
			}
			if st := s.Status(); st[0].Tools != 1 {
				t.Errorf("status counts %d tools, want 1", st[0].Tools)
			}
			if _, err := s.CallTool(context.Background(), "b__t", nil); err != nil {
				t.Errorf("call of a kept tool: %v", err)
			}
		})
	}
}
