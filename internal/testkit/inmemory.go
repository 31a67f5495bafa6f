package testkit

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// InMemory runs srv on one end of a pair of in-memory transports
// (mcp.NewInMemoryTransports) and returns the other end, for a client under
// test to connect to: an upstream MCP server in the test's own process. The
// server's session ends, and InMemory waits for it, when t's cleanup runs.
func InMemory(t testing.TB, srv *mcp.Server) mcp.Transport {
	t.Helper()
	ct, stop := ServeInMemory(srv)
	t.Cleanup(stop)
	return ct
}

// ServeInMemory runs srv on the server end of a new in-memory pair and
// returns the client end and a stop that ends the session and waits for
// srv.Run to return: InMemory for a caller that connects more than once
// (a transport that dials a new session each time) or stops it itself.
func ServeInMemory(srv *mcp.Server) (mcp.Transport, func()) {
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Run(ctx, st)
	}()
	return ct, func() { cancel(); <-done }
}
