package testkit

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServeInMemoryStopsBeforeItsClient: a server stopped while a client on
// MCP 2026-07-28 is still connected (its subscriptions/listen open) stops,
// whatever order a test's cleanups run in. go-sdk's own Close cancels the
// listens it knows of; one still being dispatched when Close looks is
// missed, and only the client end's closing (closeAll) ends it: that race
// hung the runtime's tests once in CI and is not reproduced here.
func TestServeInMemoryStopsBeforeItsClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
		srv.AddTool(&mcp.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		ct, stop := ServeInMemory(srv)
		opts := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, opts).
			Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if _, err := cs.ListTools(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the client's subscriptions/listen is open
		stopped := make(chan struct{})
		go func() { stop(); close(stopped) }()
		synctest.Wait()
		select {
		case <-stopped:
		default:
			t.Fatal("the server's stop waits for its connected client")
		}
	})
}
