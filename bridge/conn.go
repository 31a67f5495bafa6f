package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/openclaw-go/openclaw/internal/jsonw"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/policies"
)

// bridgeTransport wraps the MCP server transport to reach what go-sdk
// v1.8.0 has no API for (docs/protocol-facts.md, go-sdk v1.8.0): it captures the connection so the
// bridge can write custom notifications (a jsonrpc.Request without ID), it
// consumes the incoming notifications/claude/channel/permission_request, and
// it rewrites tools/list results into OpenClaw's shape (fixed tool order,
// `execution:{"taskSupport":"forbidden"}`, which go-sdk's Tool lacks).
type bridgeTransport struct {
	inner mcp.Transport
	b     *Bridge
}

func (t *bridgeTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	bc := &bridgeConn{Connection: c, b: t.b, listIDs: map[jsonrpc.ID]struct{}{}, handoffs: map[jsonrpc.ID]*decidedCall{}}
	t.b.conn.Store(bc)
	return bc, nil
}

// SupportsProtocolVersion forwards to the wrapped transport when it can
// tell, so go-sdk negotiates the same versions as without the wrapper.
func (t *bridgeTransport) SupportsProtocolVersion(v string) bool {
	if s, ok := t.inner.(interface{ SupportsProtocolVersion(string) bool }); ok {
		return s.SupportsProtocolVersion(v)
	}
	return true
}

type bridgeConn struct {
	mcp.Connection
	b *Bridge

	session atomic.Pointer[mcp.ServerSession] // go-sdk's session on this connection, once it handled a request

	mu      sync.Mutex
	listIDs map[jsonrpc.ID]struct{} // tools/list requests awaiting their response
	legacy  bool                    // the client used initialize (protocol ≤ 2025-11-25)
	initID  jsonrpc.ID              // the initialize request awaiting its response

	// What the local path (local.go) needs of the session.
	ready          bool                        // an initialize was answered with a result
	initCaller     policies.Caller             // the clientInfo of the initialize awaiting its response
	initVersion    string                      // the protocolVersion the initialize awaiting its response asked for
	caller         policies.Caller             // the session's client: from initialize, else the first 2026-07-28 request
	version        string                      // the session's protocol version, from the same source as caller
	perRequestSeen bool                        // a 2026-07-28 request set caller and version
	handoffs       map[jsonrpc.ID]*decidedCall // tools/call the local path handed on to go-sdk
}

func (c *bridgeConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return nil, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			return msg, nil
		}
		switch {
		case req.Method == MethodClaudePermissionRequest && !req.ID.IsValid():
			if err := c.b.onClaudePermissionRequest(req.Params); err != nil {
				c.b.log.Warn("openclaw mcp: "+MethodClaudePermissionRequest+" ignored", "error", err)
			}
			continue
		case req.Method == "initialize":
			var info struct {
				ProtocolVersion json.RawMessage `json:"protocolVersion"`
				ClientInfo      json.RawMessage `json:"clientInfo"`
			}
			_ = json.Unmarshal(req.Params, &info)
			caller, _ := callerOf(info.ClientInfo)
			version, _ := rawString(info.ProtocolVersion)
			c.mu.Lock()
			c.legacy = true
			c.initID = req.ID
			c.initCaller, c.initVersion = caller, version
			c.mu.Unlock()
			c.b.initReadOnce.Do(func() { close(c.b.initRead) })
		case req.Method == "tools/list" && req.ID.IsValid():
			c.mu.Lock()
			c.listIDs[req.ID] = struct{}{}
			c.mu.Unlock()
		case req.Method == "tools/call" && req.ID.IsValid():
			c.markHandoff(req)
		}
		return msg, nil
	}
}

func (c *bridgeConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if res, ok := msg.(*jsonrpc.Response); ok {
		var werr *jsonrpc.Error
		if errors.As(res.Error, &werr) && werr.Code == jsonrpc.CodeMethodNotFound {
			// OpenClaw's SDK says only "Method not found" (resources/list,
			// prompts/list, …); go-sdk adds the method name.
			rewritten := *res
			rewritten.Error = &jsonrpc.Error{Code: werr.Code, Message: "Method not found", Data: werr.Data}
			msg = &rewritten
		}
	}
	if res, ok := msg.(*jsonrpc.Response); ok && res.ID.IsValid() && res.Error == nil {
		c.mu.Lock()
		_, isList := c.listIDs[res.ID]
		delete(c.listIDs, res.ID)
		legacy := c.legacy
		isInit := c.initID.IsValid() && c.initID == res.ID
		if isInit {
			c.initID = jsonrpc.ID{}
		}
		c.mu.Unlock()
		switch {
		case isList:
			rewritten := *res
			rewritten.Result = rewriteToolsList(res.Result, legacy)
			msg = &rewritten
		case isInit:
			rewritten := *res
			rewritten.Result = reorderInitialize(res.Result)
			err := c.Connection.Write(ctx, &rewritten)
			if err == nil {
				// Only now may the local path answer: never ahead of initialize.
				c.mu.Lock()
				c.ready, c.caller, c.version = true, c.initCaller, c.initVersion
				c.mu.Unlock()
			}
			c.b.initOnce.Do(func() { close(c.b.initAnswered) })
			return err
		}
	}
	return c.Connection.Write(ctx, msg)
}

// rewriteToolsList replaces the tools of a tools/list result by the
// bridge's canonical rendering (OpenClaw's order and keys) and keeps every
// other member of the result, except, for a client of the initialize
// handshake (legacy), the 2026-07-28 caching hints cacheScope and ttlMs,
// which OpenClaw does not send. Tools the bridge does not know are kept.
func rewriteToolsList(result json.RawMessage, legacy bool) json.RawMessage {
	var res map[string]json.RawMessage
	if json.Unmarshal(result, &res) != nil {
		return result
	}
	var tools []struct {
		Name string `json:"name"`
	}
	var raws []json.RawMessage
	if json.Unmarshal(res["tools"], &tools) != nil || json.Unmarshal(res["tools"], &raws) != nil {
		return result
	}
	have := map[string]bool{}
	for _, t := range tools {
		have[t.Name] = true
	}
	buf := []byte(`{"tools":[`)
	n := 0
	for i := range toolSpecs {
		if have[toolSpecs[i].name] {
			if n > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, toolSpecs[i].listJSON...)
			n++
		}
	}
	for i, t := range tools {
		if toolByName(t.Name) == nil {
			if n > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, raws[i]...)
			n++
		}
	}
	buf = append(buf, ']')
	for _, k := range slices.Sorted(maps.Keys(res)) {
		if k == "tools" || legacy && (k == "cacheScope" || k == "ttlMs") {
			continue
		}
		buf = append(buf, ',')
		buf = jsonw.AppendString(buf, k)
		buf = append(buf, ':')
		buf = append(buf, res[k]...)
	}
	return append(buf, '}')
}

// initializeOrder is the key order of OpenClaw's initialize result (its
// SDK's): protocolVersion, capabilities, serverInfo; other members follow
// in go-sdk's order.
var initializeOrder = []string{"protocolVersion", "capabilities", "serverInfo"}

// reorderInitialize writes an initialize result with OpenClaw's key order.
// A result it cannot read is returned unchanged.
func reorderInitialize(result json.RawMessage) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(result))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return result
	}
	var keys []string
	vals := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		k, ok := t.(string)
		if err != nil || !ok {
			return result
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return result
		}
		if _, dup := vals[k]; dup {
			return result
		}
		keys = append(keys, k)
		vals[k] = v
	}
	out := []byte{'{'}
	add := func(k string) {
		v, ok := vals[k]
		if !ok {
			return
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		kb, _ := json.Marshal(k)
		out = append(append(append(out, kb...), ':'), v...)
		delete(vals, k)
	}
	for _, k := range initializeOrder {
		add(k)
	}
	for _, k := range keys {
		add(k)
	}
	return append(out, '}')
}
