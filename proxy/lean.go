package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sjson "github.com/segmentio/encoding/json"

	"github.com/openclaw-go/openclaw/transport"
)

// The lean path answers the commonest request of an MCP 2026-07-28 client
// over streamable HTTP, a stateless tools/call, without go-sdk's
// StreamableHTTPHandler: go-sdk v1.8.0 makes a ServerSession for every such
// POST (connection, goroutines), decodes the body again to read its _meta,
// and decodes the tool's input schema again to check the Mcp-Param-*
// headers (docs/RATIONALE.md). The lean path reuses the frame checkFrames
// decoded, checks the headers against the body and against the parameter
// headers of the served tool (read once, when the tool is served), runs the
// proxy's receiving middleware (Proxy.use: the one chain go-sdk's path runs
// too) around the tool's handler, and writes the JSON answer once.
//
// It takes only a request it answers exactly as go-sdk would, and leaves
// every other one to go-sdk, untouched: any other method or revision, a
// request go-sdk refuses (a header that disagrees with the body, _meta
// without clientCapabilities, params that do not decode, a tool not
// served), and whatever may stream before the answer (a progress token, a
// log level).

// use adds receiving middleware to the proxy's MCP server, as
// mcp.Server.AddReceivingMiddleware does (the first of mw outermost, each
// call wrapping the chain so far), and to the lean path's chain, so that
// both paths run the same middleware in the same order.
func (p *Proxy) use(mw ...mcp.Middleware) {
	p.server.AddReceivingMiddleware(mw...)
	p.chainMu.Lock()
	defer p.chainMu.Unlock()
	h := p.chain
	if h == nil {
		h = p.leanCallTool
	}
	for _, m := range slices.Backward(mw) {
		h = m(h)
	}
	p.chain = h
}

// leanChain returns the receiving middleware chain around leanCallTool.
func (p *Proxy) leanChain() mcp.MethodHandler {
	p.chainMu.Lock()
	defer p.chainMu.Unlock()
	if p.chain == nil {
		return p.leanCallTool
	}
	return p.chain
}

// leanCallTool is the end of the lean path's chain, where go-sdk's
// dispatch calls the served tool's handler: it runs the handler and gives
// the result the resultType a 2026-07-28 client gets, and empty content
// rather than none, as go-sdk's Server does.
func (p *Proxy) leanCallTool(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
	cr, ok := req.(*mcp.CallToolRequest)
	if !ok || method != "tools/call" || cr.Params == nil {
		return nil, fmt.Errorf("proxy: the lean path serves tools/call only, not %q", method)
	}
	res, err := p.handler(cr.Params.Name)(ctx, cr)
	if err != nil || res == nil {
		return res, err
	}
	out := withCallResultType(res)
	if out.Content == nil && out.InputRequests == nil {
		out.Content = []mcp.Content{}
	}
	return out, nil
}

// resultTyped holds a CallToolResult of each resultType. go-sdk keeps the
// field unexported: it sets it in its own dispatch, and when it decodes a
// result.
var resultTyped = func() map[bool]*mcp.CallToolResult {
	m := map[bool]*mcp.CallToolResult{}
	for input, rt := range map[bool]string{false: "complete", true: "input_required"} {
		r := new(mcp.CallToolResult)
		if err := json.Unmarshal([]byte(`{"resultType":"`+rt+`"}`), r); err != nil {
			panic(err)
		}
		m[input] = r
	}
	return m
}()

// withCallResultType returns a copy of res with its resultType:
// "input_required" when it carries input requests, else "complete".
func withCallResultType(res *mcp.CallToolResult) *mcp.CallToolResult {
	out := *resultTyped[res.InputRequests != nil]
	dst, src := reflect.ValueOf(&out).Elem(), reflect.ValueOf(res).Elem()
	for i := range dst.NumField() {
		if dst.Type().Field(i).IsExported() {
			dst.Field(i).Set(src.Field(i))
		}
	}
	return &out
}

// metaProgressToken is the _meta key of a request's progress token.
const metaProgressToken = "progressToken"

// serveLean answers r, a POST to /mcp whose body checkFrames decoded into
// msgs, when it is a request the lean path takes, and reports whether it
// did; when it reports false it has written nothing.
func (h *HTTPHandler) serveLean(w http.ResponseWriter, r *http.Request, msgs []jsonrpc.Message) bool {
	if h.p.noLean.Load() || len(msgs) != 1 {
		return false
	}
	jreq, ok := msgs[0].(*jsonrpc.Request)
	hdr := r.Header
	if !ok || !jreq.IsCall() || jreq.Method != "tools/call" ||
		hdr.Get("Mcp-Protocol-Version") != sessionlessRevision || !h.p.leanRevision ||
		hdr.Get("Mcp-Method") != jreq.Method || len(hdr.Values("Last-Event-ID")) > 0 ||
		!leanContentType(hdr) || !leanAccepts(hdr) {
		return false
	}
	params := new(mcp.CallToolParamsRaw)
	if p := bytes.TrimSpace(jreq.Params); len(p) == 0 || p[0] != '{' {
		return false
	}
	if _, err := sjson.Parse(jreq.Params, params, sjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return false
	}
	if params.Name == "" || hdr.Get("Mcp-Name") != params.Name {
		return false
	}
	meta := params.Meta
	if v, _ := meta[mcp.MetaKeyProtocolVersion].(string); v != sessionlessRevision {
		return false
	}
	//lint:ignore SA1019 a request's log level (deprecated by SEP-2577, still served during its deprecation window) means log lines may stream
	if _, ok := meta[mcp.MetaKeyLogLevel]; ok {
		return false // log lines would stream before the answer
	}
	if _, ok := meta[metaProgressToken]; ok {
		return false // so would progress
	}
	call := &mcp.CallToolRequest{Params: params, Extra: &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: hdr}}
	if call.ClientCapabilities() == nil {
		return false
	}
	if _, ok := meta[mcp.MetaKeyClientInfo]; ok && call.ClientInfo() == nil {
		return false
	}
	headers, ok := h.p.leanTool(params.Name)
	if !ok || !paramHeadersAgree(hdr, headers, params.Arguments) {
		return false
	}

	h.p.leanServed.Add(1)
	res, err := h.p.leanChain()(r.Context(), jreq.Method, call)
	status, body := http.StatusOK, []byte(nil)
	if err == nil {
		withServerInfo(res, h.p.impl)
	}
	if err != nil {
		status = errorStatus(err)
		body, err = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: jreq.ID, Error: err})
	} else {
		var raw []byte
		if raw, err = marshalResult(res); err == nil {
			body = transport.AppendResult(make([]byte, 0, len(raw)+40), jreq.ID, raw)
		}
	}
	if err != nil { // a result that does not encode
		h.logger.Error("openclaw mcp proxy: the answer to tools/call does not encode", "err", err)
		status = http.StatusOK
		body, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: jreq.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}})
	}
	wh := w.Header()
	wh.Set("Cache-Control", "no-cache, no-transform")
	wh.Set("Content-Type", "application/json")
	wh.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body) // a client that left misses it
	return true
}

// withServerInfo names the server in the _meta of res, unless it names
// one already: what go-sdk adds to every result of a 2026-07-28 request.
// The result's own _meta is not modified (it may be an upstream's).
func withServerInfo(res mcp.Result, impl *mcp.Implementation) {
	if res == nil || reflect.ValueOf(res).IsNil() {
		return
	}
	m := res.GetMeta()
	if _, ok := m[mcp.MetaKeyServerInfo]; ok {
		return
	}
	m = maps.Clone(m)
	if m == nil {
		m = map[string]any{}
	}
	m[mcp.MetaKeyServerInfo] = impl
	res.SetMeta(m)
}

// errorStatus is the HTTP status of a 2026-07-28 answer carrying err:
// 404 for method not found; 400 for invalid params, an unsupported
// protocol version and a missing client capability; 200 otherwise.
func errorStatus(err error) int {
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		return http.StatusOK
	}
	switch je.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// marshalResult encodes a result as go-sdk writes it: without escaping
// HTML characters.
func marshalResult(res mcp.Result) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// leanContentType reports whether the request's body is application/json.
func leanContentType(hdr http.Header) bool {
	mt, _, err := mime.ParseMediaType(hdr.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// leanAccepts reports whether the request's Accept lists both
// application/json and text/event-stream by name (a client must; a wildcard
// is left to go-sdk).
func leanAccepts(hdr http.Header) bool {
	jsonOK, streamOK := false, false
	for _, v := range hdr.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json":
				jsonOK = true
			case "text/event-stream":
				streamOK = true
			}
		}
	}
	return jsonOK && streamOK
}

// paramHeader is an argument of a tool that a 2026-07-28 client also sends
// as an Mcp-Param-<Header> header (x-mcp-header in the tool's input
// schema): the path of property names to it.
type paramHeader struct {
	path   []string
	header string // the full header name, Mcp-Param-…
}

// leanTool returns the parameter headers of the served tool name, and
// whether the lean path may serve a call of it: it is served, and its
// parameter headers could be read.
func (p *Proxy) leanTool(name string) ([]paramHeader, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.served[name]
	return st.headers, ok && st.headersOK
}

// schemaHeaders is what paramHeaders reads of an input schema, decoded as
// go-sdk decodes it (names matched exactly).
type schemaHeaders struct {
	XMCPHeader json.RawMessage          `json:"x-mcp-header,omitempty"`
	Properties map[string]schemaHeaders `json:"properties,omitempty"`
}

// paramHeaders reads the parameter headers of a served input schema. ok is
// false when the schema names one that is not a plain header name, or
// mentions x-mcp-header elsewhere than as a property's annotation (in any
// case of letters): go-sdk checks such calls.
func paramHeaders(schema json.RawMessage) (out []paramHeader, ok bool) {
	mentions := bytes.Count(bytes.ToLower(schema), []byte("x-mcp-header"))
	if mentions == 0 {
		return nil, true
	}
	var root schemaHeaders
	if _, err := sjson.Parse(schema, &root, sjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return nil, false
	}
	ok = true
	var walk func(props map[string]schemaHeaders, prefix []string)
	walk = func(props map[string]schemaHeaders, prefix []string) {
		for name, prop := range props {
			path := append(slices.Clone(prefix), name)
			if prop.XMCPHeader != nil {
				var h string
				if json.Unmarshal(prop.XMCPHeader, &h) != nil || h == "" || strings.ContainsAny(h, " \t\r\n:") {
					ok = false
				}
				out = append(out, paramHeader{path: path, header: "Mcp-Param-" + h})
			}
			walk(prop.Properties, path)
		}
	}
	walk(root.Properties, nil)
	return out, ok && len(out) == mentions
}

// paramHeadersAgree reports whether the request's Mcp-Param-* headers say
// what its arguments do, for every parameter header of the tool: present,
// in the canonical form (a string as is or base64-wrapped, true/false, an
// integer in decimal), for an argument that is set; absent for one that is
// absent or null. Anything else is go-sdk's to refuse or to accept.
func paramHeadersAgree(hdr http.Header, headers []paramHeader, args json.RawMessage) bool {
	if len(headers) == 0 {
		return true
	}
	var top map[string]json.RawMessage
	if len(args) > 0 {
		if _, err := sjson.Parse(args, &top, sjson.DontMatchCaseInsensitiveStructFields); err != nil {
			return false
		}
	}
	for _, ph := range headers {
		got := hdr.Get(ph.header)
		arg, set := lookupArg(top, ph.path)
		if !set || string(arg) == "null" {
			if got != "" {
				return false
			}
			continue
		}
		if got == "" {
			return false
		}
		if inner, ok := strings.CutPrefix(got, "=?base64?"); ok {
			inner, ok = strings.CutSuffix(inner, "?=")
			if !ok {
				return false
			}
			dec, err := base64.StdEncoding.DecodeString(inner)
			if err != nil {
				return false
			}
			got = string(dec)
		}
		var v any
		if _, err := sjson.Parse(arg, &v, sjson.DontMatchCaseInsensitiveStructFields); err != nil {
			return false
		}
		switch v := v.(type) {
		case string:
			if got != v {
				return false
			}
		case bool:
			if got != strconv.FormatBool(v) {
				return false
			}
		case float64:
			if n := int64(v); float64(n) != v || n > 1<<53-1 || n < -(1<<53-1) || got != strconv.FormatInt(n, 10) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// lookupArg returns the argument at path in the top-level arguments top.
func lookupArg(top map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	cur, ok := top[path[0]]
	for _, name := range path[1:] {
		if !ok {
			return nil, false
		}
		var obj map[string]json.RawMessage
		if _, err := sjson.Parse(cur, &obj, sjson.DontMatchCaseInsensitiveStructFields); err != nil {
			return nil, false
		}
		cur, ok = obj[name]
	}
	return cur, ok
}
