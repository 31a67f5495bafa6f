package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRetiredSessionEndsWaitingHandlers: a server's roots/list that the
// embedder never answers (its client went quiet), with no call in flight,
// does not hold the server's retirement: when a reload removes the server,
// the handler's context ends and the old MCP session closes while the
// Session lives on.
func TestRetiredSessionEndsWaitingHandlers(t *testing.T) {
	t.Parallel()
	asking := newServer("asking", &mcp.ServerOptions{SupportedProtocolVersions: legacy})
	echoTool(asking, "noop")
	other := newServer("other", nil)
	echoTool(other, "ok")
	servers := []Server{inProcess(t, "asking", asking), inProcess(t, "other", other)}
	entered := make(chan struct{}, 1)
	ended := make(chan error, 1)
	s := open(t, servers, &Options{
		//lint:ignore SA1019 the test drives the roots and sampling passthrough (deprecated by SEP-2577, still served during its deprecation window)
		ListRoots: func(ctx context.Context, server string) (*mcp.ListRootsResult, error) {
			entered <- struct{}{}
			<-ctx.Done() // the client never answers
			ended <- ctx.Err()
			return nil, ctx.Err()
		},
	})
	var ss *mcp.ServerSession
	for x := range asking.Sessions() {
		ss = x
	}
	asked := make(chan error, 1)
	go func() {
		//lint:ignore SA1019 the test drives the roots and sampling passthrough (deprecated by SEP-2577, still served during its deprecation window)
		_, err := ss.ListRoots(context.Background(), nil)
		asked <- err
	}()
	hang := time.After(30 * time.Second) // a hang guard, not a timing assertion
	select {
	case <-entered:
	case <-hang:
		t.Fatal("roots/list never reached Options.ListRoots")
	}
	if _, err := s.Reload(context.Background(), servers[1:]); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err == nil {
			t.Error("the handler's context ended without an error")
		}
	case <-hang:
		t.Fatal("the handler of a retired server's request is still waiting (its close would hang)")
	}
	select {
	case <-asked: // the server's request ended with its session
	case <-hang:
		t.Fatal("the retired session was never closed")
	}
	if names := toolNames(t, s); len(names) != 1 || names[0] != "other__ok" {
		t.Errorf("catalog after the reload = %v", names)
	}
}
