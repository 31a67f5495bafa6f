package runtime

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// handlerLife is, per MCP session of a conn, the context that ends the
// handlers of that session's server-to-client requests (sampling,
// elicitation, roots, log messages) when the session is closed.
type handlerLife struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// handlerLife returns the context that ends when cs is closed by
// closeSession. A handler that starts while cs is being closed gets a
// context already ended.
func (c *conn) handlerLife(cs *mcp.ClientSession) context.Context {
	l := &handlerLife{}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	v, loaded := c.lives.LoadOrStore(cs, l)
	if loaded {
		l.cancel()
	}
	return v.(*handlerLife).ctx
}

// closeSession closes cs after ending the contexts of its request
// handlers: go-sdk's ClientSession.Close waits for them, and one waiting
// on an embedder's answer that never comes would hold it forever. Once
// Close returned no handler of cs runs, and its entry is dropped.
func (c *conn) closeSession(cs *mcp.ClientSession) error {
	ended := &handlerLife{}
	ended.ctx, ended.cancel = context.WithCancel(context.Background())
	ended.cancel()
	if v, loaded := c.lives.LoadOrStore(cs, ended); loaded {
		v.(*handlerLife).cancel()
	}
	err := cs.Close()
	c.lives.Delete(cs)
	return err
}

// closeSessionLater closes cs in the background: closing may take the
// transport's terminate duration, which the caller must not wait for. The
// Session owns that goroutine (its Close waits for bg); once Close has
// begun, bg is no longer joined and cs is closed here and now.
func (c *conn) closeSessionLater(cs *mcp.ClientSession) {
	c.s.mu.Lock()
	closed := c.s.closed // Close waits for bg only after setting closed
	if !closed {
		c.s.bg.Go(func() { _ = c.closeSession(cs) })
	}
	c.s.mu.Unlock()
	if closed {
		_ = c.closeSession(cs)
	}
}
