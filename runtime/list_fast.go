package runtime

// The catalog fast path (prototype; not wired into conn.go yet).
//
// go-sdk's ClientSession.ListTools decodes every page with its internal
// JSON decoder and then re-encodes and decodes each tool's input schema to
// validate x-mcp-header annotations (filterValidTools). Each of those
// decodes allocates a fresh decoder buffer of tens of KB, so one page of
// 100 tools costs ~2.6 ms and ~4 MB of garbage: most of the 50 × 100
// catalog figure. Here the runtime decodes the page itself with
// encoding/json, keeping schemas as the raw bytes the server sent, and
// hands go-sdk a page without tools.
//
// Wiring (two lines in conn.go):
//
//	cs, err := client.Connect(cctx, withFastList(tr), nil)               // in connect
//	res, err := listToolsPage(lctx, cs, &mcp.ListToolsParams{Cursor: cursor}) // in listTools
//
// A page whose bytes mention x-mcp-header is left to go-sdk, which
// validates the annotations and keeps the tool definitions it needs to
// send Mcp-Param-* headers on tools/call (protocol 2026-07-28 over
// streamable HTTP). A page taken here loses its ttlMs hint for go-sdk's
// list cache, so that go-sdk never answers a later ListTools from a page
// it saw without tools.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// withFastList wraps a client transport so that listToolsPage can decode
// tools/list pages itself. nil stays nil.
func withFastList(t mcp.Transport) mcp.Transport {
	if t == nil {
		return nil
	}
	return &fastListTransport{inner: t}
}

// fastListTransport is the transport of withFastList.
type fastListTransport struct {
	inner mcp.Transport
}

// Connect connects the wrapped transport and wraps its connection.
func (t *fastListTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &fastListConn{Connection: c, pending: map[jsonrpc.ID]*fastPage{}}, nil
}

// fastListConn watches the requests go-sdk writes: a tools/list call whose
// context carries a *fastPage gets its response decoded into that page.
type fastListConn struct {
	mcp.Connection

	mu      sync.Mutex
	pending map[jsonrpc.ID]*fastPage // by request ID, until the response
}

// Write registers a tools/list call made by listToolsPage, then writes.
func (c *fastListConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	req, ok := msg.(*jsonrpc.Request)
	var page *fastPage
	if ok && req.Method == "tools/list" && req.IsCall() {
		page, _ = ctx.Value(fastPageKey{}).(*fastPage)
	}
	if page == nil {
		return c.Connection.Write(ctx, msg)
	}
	c.mu.Lock()
	c.pending[req.ID] = page
	c.mu.Unlock()
	err := c.Connection.Write(ctx, msg)
	if err != nil {
		c.mu.Lock()
		delete(c.pending, req.ID)
		c.mu.Unlock()
	}
	return err
}

// Read passes every message on; the result of a registered tools/list call
// is decoded into its page and replaced by the same result without tools.
func (c *fastListConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	resp, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok {
		return msg, err
	}
	c.mu.Lock()
	page := c.pending[resp.ID]
	delete(c.pending, resp.ID)
	c.mu.Unlock()
	if page == nil || resp.Error != nil {
		return msg, nil
	}
	if rest, ok := page.take(resp.Result); ok {
		cp := *resp
		cp.Result = rest
		return &cp, nil
	}
	return msg, nil
}

// fastPageKey is the context key of the *fastPage of a listToolsPage call.
type fastPageKey struct{}

// fastPage receives the tools of one tools/list result.
type fastPage struct {
	mu    sync.Mutex
	taken bool
	tools []*mcp.Tool
}

var xMCPHeader = []byte("x-mcp-header")

// take decodes the tools of result (a tools/list result) and returns the
// result without its tools and ttlMs for go-sdk to decode. ok is false when
// go-sdk must see the page as it is: a page that mentions x-mcp-header, or
// one that does not decode here (go-sdk then reports the error).
func (p *fastPage) take(result json.RawMessage) (rest json.RawMessage, ok bool) {
	if bytes.Contains(result, xMCPHeader) {
		return nil, false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(result, &top) != nil {
		return nil, false
	}
	tools, err := decodeTools(top["tools"])
	if err != nil {
		return nil, false
	}
	delete(top, "ttlMs")
	top["tools"] = json.RawMessage("[]")
	rest, err = json.Marshal(top)
	if err != nil {
		return nil, false
	}
	p.mu.Lock()
	p.taken, p.tools = true, tools
	p.mu.Unlock()
	return rest, true
}

// result returns the decoded tools, and whether the page was taken.
func (p *fastPage) result() ([]*mcp.Tool, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tools, p.taken
}

// decodeTools decodes a "tools" array: each tool as mcp.Tool, with
// inputSchema and outputSchema kept as json.RawMessage (the server's
// bytes); null entries are dropped, as go-sdk drops them.
func decodeTools(raw json.RawMessage) ([]*mcp.Tool, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	tools := make([]*mcp.Tool, 0, len(items))
	for i, item := range items {
		if bytes.Equal(bytes.TrimSpace(item), []byte("null")) {
			continue
		}
		var in, out json.RawMessage
		// encoding/json decodes into the pointer an interface field
		// holds, so the schemas stay raw instead of becoming maps.
		t := &mcp.Tool{InputSchema: &in, OutputSchema: &out}
		if err := json.Unmarshal(item, t); err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		t.InputSchema = rawOrNil(t.InputSchema)
		t.OutputSchema = rawOrNil(t.OutputSchema)
		tools = append(tools, t)
	}
	return tools, nil
}

// rawOrNil turns a decoded schema field into a json.RawMessage, or nil when
// the field was absent or null.
func rawOrNil(v any) any {
	p, ok := v.(*json.RawMessage)
	if !ok || p == nil || len(*p) == 0 || bytes.Equal(*p, []byte("null")) {
		return nil
	}
	return *p
}

// listToolsPage is cs.ListTools, except that on a connection made through
// withFastList the page's tools are decoded by the runtime (fastPage.take).
func listToolsPage(ctx context.Context, cs *mcp.ClientSession, params *mcp.ListToolsParams) (*mcp.ListToolsResult, error) {
	page := &fastPage{}
	res, err := cs.ListTools(context.WithValue(ctx, fastPageKey{}, page), params)
	if err != nil {
		return nil, err
	}
	if tools, ok := page.result(); ok {
		res.Tools = tools
	}
	return res, nil
}
