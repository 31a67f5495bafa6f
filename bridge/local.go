package bridge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/jsonw"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/transport"
)

// The local path answers, through the stdio transport's local handler
// (transport.LocalHandler), the tools/list and tools/call requests of a
// session, without go-sdk's per-request goroutines and decoding. Such a
// request is decoded once (transport.DecodeFrame, then one scan of its
// params) and goes through the same hook boundary as every call
// (decideCall, finishCall: validation, the policy and its audit record),
// decided on the reading goroutine in the order the requests were read.
// tools/list and the tools marked local (events_poll,
// permissions_list_open) are answered there too, with one write; the
// other tools' calls (the Gateway's, events_wait) run on a goroutine of
// their own (transport.LocalAnswer.Later), cancelled by the client's
// notifications/cancelled, and are answered once they are done. go-sdk
// never sees these requests. Everything else, and every request the local
// path cannot answer exactly as go-sdk would, goes to go-sdk unchanged: a
// request before initialize was answered, a tools/list with a cursor, a
// tools/call of a tool the bridge does not have or retried with
// inputResponses or requestState, params or _meta the scan does not read
// as go-sdk does (escaped keys, a null, a wrong type), a 2026-07-28 _meta
// go-sdk refuses (an unsupported protocolVersion, a missing
// clientCapabilities), a session_key alias the Gateway must resolve
// before the policy is asked. A call whose policy answers
// require_approval is handed to go-sdk with its decision (handOff), since
// the approval routing needs go-sdk's session; the policy is not asked
// twice.

// newProtocolVersion is the first protocol revision whose requests carry
// their protocol version, client info and capabilities in _meta
// (SEP-2575) instead of an initialize handshake.
const newProtocolVersion = "2026-07-28"

// handoffKey is the _meta member by which bridgeConn.Read tells callTool
// which decided call a handed-off request continues. Its value is a random
// token, so a client cannot name another call's decision.
const handoffKey = "openclaw-go/handoff"

// localParams are the params of a tools/list or tools/call as go-sdk reads
// them (exact member names, the last of duplicates).
type localParams struct {
	name      string
	arguments json.RawMessage
	meta      map[string]json.RawMessage
	// other reports a member that takes the request to go-sdk: cursor,
	// inputResponses, requestState.
	other bool
}

// readLocalParams scans raw params; ok is false when a member is one the
// scan does not read exactly as go-sdk (an escaped key, a name that is not
// a plain string, a null or non-object _meta, null arguments).
func readLocalParams(raw json.RawMessage) (p localParams, ok bool) {
	if len(raw) == 0 {
		return p, true
	}
	ok = true
	err := jsonw.Members(raw, func(key, val []byte) {
		if !jsonw.PlainKey(key) {
			ok = false
			return
		}
		switch string(key) {
		case "name":
			var plain bool
			p.name, plain = jsonw.PlainString(val)
			ok = ok && plain && p.name != ""
		case "arguments":
			p.arguments = val
			ok = ok && string(val) != "null"
		case "_meta":
			p.meta = map[string]json.RawMessage{}
			if jsonw.Members(val, func(k, v []byte) {
				if !jsonw.PlainKey(k) {
					ok = false
				}
				p.meta[string(k)] = v
			}) != nil {
				ok = false
			}
		case "cursor", "inputResponses", "requestState":
			p.other = true
		}
	})
	return p, ok && err == nil
}

// localRevision is what the local path needs of the protocol a request
// speaks.
type localRevision struct {
	// perRequest: the request carries a 2026-07-28 _meta; its result names
	// the server in _meta.
	perRequest bool
	// legacy: the client used the initialize handshake.
	legacy bool
	// multiRoundTrip: the session's protocol version (the one initialize
	// asked for, else that of its first 2026-07-28 request) has
	// multi-round-trip results, whose tools/call results go-sdk marks
	// resultType "complete".
	multiRoundTrip bool
}

// revision returns the protocol p speaks on c and the caller the policy
// sees (go-sdk's ClientInfo: the request's _meta clientInfo, else the
// session's); ok is false when go-sdk must answer.
func (c *bridgeConn) revision(p *localParams) (rev localRevision, caller policies.Caller, ok bool) {
	c.mu.Lock()
	rev.legacy = c.legacy
	session, ready := c.caller, c.ready
	rev.multiRoundTrip = c.version >= newProtocolVersion
	c.mu.Unlock()
	var hasInfo bool
	if raw, present := p.meta[mcp.MetaKeyClientInfo]; present {
		if caller, ok = callerOf(raw); !ok {
			return rev, caller, false
		}
		hasInfo = true
	}
	v, isString := jsonw.PlainString(p.meta[mcp.MetaKeyProtocolVersion])
	if !isString || v < newProtocolVersion {
		if !ready {
			return rev, caller, false // go-sdk refuses it before initialize
		}
		if !hasInfo {
			caller = session
		}
		return rev, caller, true
	}
	if !slices.Contains(mcp.SupportedProtocolVersions(), v) || !capabilitiesOK(p.meta[mcp.MetaKeyClientCapabilities]) {
		return rev, caller, false // go-sdk answers the error
	}
	rev.perRequest = true
	c.mu.Lock()
	if !c.ready && !c.perRequestSeen {
		// go-sdk takes the session's client from its first such request.
		c.perRequestSeen, c.caller, c.version = true, caller, v
	}
	if !hasInfo {
		caller = c.caller
	}
	rev.multiRoundTrip = c.version >= newProtocolVersion
	c.mu.Unlock()
	return rev, caller, true
}

// callerOf reads an Implementation (clientInfo) as go-sdk does, for its
// name and version; ok is false for anything but an object with plain
// keys whose name and version, when present, are strings.
func callerOf(raw []byte) (policies.Caller, bool) {
	var c policies.Caller
	ok := true
	err := jsonw.Members(raw, func(k, v []byte) {
		if !jsonw.PlainKey(k) {
			ok = false
			return
		}
		var dst *string
		switch string(k) {
		case "name":
			dst = &c.Name
		case "version":
			dst = &c.Version
		default:
			return
		}
		if kindOf(v) != kindString || json.Unmarshal(v, dst) != nil {
			ok = false
		}
	})
	return c, ok && err == nil
}

// capabilitiesOK reports whether raw is a clientCapabilities object go-sdk
// accepts.
func capabilitiesOK(raw []byte) bool {
	if kindOf(raw) != kindObject {
		return false
	}
	var caps mcp.ClientCapabilities
	return json.Unmarshal(raw, &caps) == nil
}

// answerLocally is the bridge's transport.LocalHandler: the answer to a
// request the local path takes, the zero LocalAnswer to pass it to go-sdk.
// tools/list and the calls of local tools are answered at once; the calls
// of the others (the Gateway's tools, events_wait) are validated and
// decided here, in the order read, and run later on their own goroutine.
func (b *Bridge) answerLocally(ctx context.Context, req *jsonrpc.Request) transport.LocalAnswer {
	list := req.Method == "tools/list"
	if !list && req.Method != "tools/call" {
		return transport.LocalAnswer{}
	}
	c := b.conn.Load()
	if c == nil {
		return transport.LocalAnswer{}
	}
	p, ok := readLocalParams(req.Params)
	if !ok || p.other {
		return transport.LocalAnswer{}
	}
	rev, caller, ok := c.revision(&p)
	if !ok {
		return transport.LocalAnswer{}
	}
	buf := transport.AppendResult(nil, req.ID, nil)
	buf = buf[:len(buf)-1] // the result goes before the closing brace
	if list {
		buf = b.appendToolsList(buf, rev)
		return transport.LocalAnswer{Frame: append(buf, '}')}
	}
	spec := toolByName(p.name)
	if spec == nil || len(req.Params) == 0 {
		return transport.LocalAnswer{}
	}
	dc, res := b.decideCall(ctx, spec, p.arguments, caller, false)
	switch {
	case dc == nil && res == nil:
		return transport.LocalAnswer{} // an alias session key: go-sdk's call resolves it
	case res == nil && dc.d.Decision == policies.RequireApproval:
		c.handOff(req.ID, dc)
		return transport.LocalAnswer{}
	case res == nil && !spec.local:
		return transport.LocalAnswer{Later: func(ctx context.Context) []byte {
			out, ok := b.appendCallToolResult(buf, b.finishCall(ctx, nil, spec, dc), rev)
			if !ok { // the tools make no such result
				return transport.EncodeErrorReply(req.ID, jsonrpc.CodeInternalError, "tool "+spec.name+" made a result the bridge cannot encode")
			}
			return append(out, '}')
		}}
	case res == nil:
		res = b.finishCall(ctx, nil, spec, dc)
	}
	buf, ok = b.appendCallToolResult(buf, res, rev)
	if !ok {
		return transport.LocalAnswer{}
	}
	return transport.LocalAnswer{Frame: append(buf, '}')}
}

// appendToolsList appends the tools/list result go-sdk would write,
// rewritten by rewriteToolsList: the nine tools in OpenClaw's order, and
// for a 2026-07-28 request the members go-sdk adds (_meta serverInfo,
// resultType, and, unless the client used initialize, the caching hints).
func (b *Bridge) appendToolsList(buf []byte, rev localRevision) []byte {
	buf = append(buf, `{"tools":[`...)
	for i := range toolSpecs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, toolSpecs[i].listJSON...)
	}
	buf = append(buf, ']')
	if rev.perRequest {
		buf = append(buf, `,"_meta":`...)
		buf = append(buf, b.serverInfoMeta...)
		if !rev.legacy {
			buf = append(buf, `,"cacheScope":"public"`...)
		}
		buf = append(buf, `,"resultType":"complete"`...)
		if !rev.legacy {
			buf = append(buf, `,"ttlMs":0`...)
		}
	}
	return append(buf, '}')
}

// appendCallToolResult appends res as go-sdk writes a CallToolResult,
// with _meta serverInfo for a 2026-07-28 request and resultType for a
// session of multi-round-trip results. ok is false for a
// result the bridge's tools never make (other content than one text
// block, a _meta of its own).
func (b *Bridge) appendCallToolResult(buf []byte, res *mcp.CallToolResult, rev localRevision) ([]byte, bool) {
	if len(res.Content) != 1 || res.Meta != nil || res.InputRequests != nil || res.RequestState != "" {
		return buf, false
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok || tc.Meta != nil || tc.Annotations != nil {
		return buf, false
	}
	buf = append(buf, '{')
	if rev.perRequest {
		buf = append(buf, `"_meta":`...)
		buf = append(buf, b.serverInfoMeta...)
		buf = append(buf, ',')
	}
	buf = append(buf, `"content":[{"type":"text","text":`...)
	buf = jsonw.AppendString(buf, tc.Text)
	buf = append(buf, `}]`...)
	switch sc := res.StructuredContent.(type) {
	case nil:
	case json.RawMessage:
		buf = append(buf, `,"structuredContent":`...)
		buf = append(buf, sc...)
	default:
		return buf, false
	}
	if res.IsError {
		buf = append(buf, `,"isError":true`...)
	}
	if rev.multiRoundTrip {
		buf = append(buf, `,"resultType":"complete"`...)
	}
	return append(buf, '}'), true
}

// serverInfoMeta is the _meta go-sdk gives a 2026-07-28 result: the
// server's Implementation under mcp.MetaKeyServerInfo.
func serverInfoMeta(version string) []byte {
	data, err := json.Marshal(map[string]any{mcp.MetaKeyServerInfo: &mcp.Implementation{Name: "openclaw", Version: version}})
	if err != nil { // two strings always encode
		panic(err)
	}
	return data
}

// handOff records dc as the decision of the tools/call id, which goes on
// to go-sdk: bridgeConn.Read marks the request with it, callTool takes it.
func (c *bridgeConn) handOff(id jsonrpc.ID, dc *decidedCall) {
	c.mu.Lock()
	c.handoffs[id] = dc
	c.mu.Unlock()
}

// markHandoff gives the tools/call req the token of its decided call when
// the local path handed it on, and drops a handoffKey the client sent.
func (c *bridgeConn) markHandoff(req *jsonrpc.Request) {
	c.mu.Lock()
	dc := c.handoffs[req.ID]
	delete(c.handoffs, req.ID)
	c.mu.Unlock()
	if dc == nil && !bytes.Contains(req.Params, []byte(handoffKey)) {
		return
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(req.Params, &params) != nil {
		return // go-sdk answers the invalid params
	}
	var meta map[string]json.RawMessage
	if raw, present := params["_meta"]; present && json.Unmarshal(raw, &meta) != nil {
		return // go-sdk answers the invalid _meta
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	delete(meta, handoffKey)
	if dc != nil {
		token := rand.Text()
		c.b.handoffs.Store(token, dc)
		meta[handoffKey], _ = json.Marshal(token)
	}
	params["_meta"], _ = json.Marshal(meta)
	req.Params, _ = json.Marshal(params)
}

// takeHandoff returns the decided call req continues, if the local path
// handed it on.
func (b *Bridge) takeHandoff(req *mcp.CallToolRequest) *decidedCall {
	token, _ := req.Params.Meta[handoffKey].(string)
	if token == "" {
		return nil
	}
	delete(req.Params.Meta, handoffKey)
	dc, ok := b.handoffs.LoadAndDelete(token)
	if !ok {
		return nil
	}
	return dc.(*decidedCall)
}
