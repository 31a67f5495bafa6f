package testkit

import (
	"context"
	"sync"
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
//
// stop closes the client's connection too: go-sdk v1.8.0's
// ServerSession.Close waits for the requests in flight, and a client on
// MCP 2026-07-28 keeps one open (subscriptions/listen) until its own end
// closes, so a server stopped before its client would wait forever.
func ServeInMemory(srv *mcp.Server) (mcp.Transport, func()) {
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Run(ctx, st)
	}()
	client := &closingTransport{Transport: ct}
	return client, func() {
		cancel()
		client.closeAll()
		<-done
	}
}

// closingTransport is a client transport that remembers its connections,
// for closeAll.
type closingTransport struct {
	mcp.Transport
	mu    sync.Mutex
	conns []mcp.Connection
}

func (t *closingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err == nil {
		t.mu.Lock()
		t.conns = append(t.conns, c)
		t.mu.Unlock()
	}
	return c, err
}

func (t *closingTransport) closeAll() {
	t.mu.Lock()
	conns := t.conns
	t.conns = nil
	t.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}
