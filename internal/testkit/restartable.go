package testkit

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Restartable is an mcp.Transport to an in-process server that can go
// away and come back, for tests of a client's connection lifecycle: each
// Connect runs a fresh session of Server on in-memory transports (ended
// by T's cleanup); Kill ends the current session, as a server that exited
// would, and makes later connections fail with "connection refused
// (test)" until Up.
type Restartable struct {
	T      testing.TB
	Server *mcp.Server
	// Refuse makes connections fail from the start (a server that comes
	// up later: call Up).
	Refuse bool
	// Fails is how many of the next connections fail before they go
	// through again (a flaky server).
	Fails int

	mu       sync.Mutex
	stop     func()
	attempts int
}

// Connect implements mcp.Transport.
func (r *Restartable) Connect(ctx context.Context) (mcp.Connection, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts++
	if r.Fails > 0 {
		r.Fails--
		return nil, errors.New("connection refused (test)")
	}
	if r.Refuse {
		return nil, errors.New("connection refused (test)")
	}
	ct, stop := ServeInMemory(r.Server)
	r.stop = stop
	r.T.Cleanup(stop)
	return ct.Connect(ctx)
}

// Kill ends the current session and refuses new ones until Up.
func (r *Restartable) Kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Refuse = true
	if r.stop != nil {
		r.stop()
	}
}

// Up lets connections through again.
func (r *Restartable) Up() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Refuse = false
}

// Attempts counts the calls of Connect so far.
func (r *Restartable) Attempts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts
}
