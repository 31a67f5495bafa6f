package runtime

// The catalog fast path: tools/list pages decoded by the runtime.
//
// go-sdk's ClientSession.ListTools decodes every page with its internal
// JSON decoder and then re-encodes and decodes each tool's input schema to
// validate x-mcp-header annotations (filterValidTools). Each of those
// decodes allocates a fresh decoder buffer of 32 KB or more, so one page
// of 100 tools costs ~2.6 ms and ~4 MB of garbage. Here a connection
// wrapper (withFastList, used by conn.connect) hands the page of a
// listToolsPage call to splitPage, a one-pass decoder written for this
// shape: it validates the page as it reads it, copies the names and
// descriptions, keeps the schemas as slices of one copy of the page
// (json.RawMessage, never maps), and gives go-sdk the page without its
// tools. encoding/json only sees the rare members (_meta, annotations,
// icons) and strings with escapes. FuzzSplitPage holds it to
// encoding/json's reading of the same bytes.
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
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/jsonw"
	"github.com/openclaw-go/openclaw/transport"
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
// context carries a *fastPage gets its response decoded into that page, a
// tools/call whose context carries one (taskFold) its result repaired.
type fastListConn struct {
	mcp.Connection

	mu      sync.Mutex
	pending map[jsonrpc.ID]*fastPage // by request ID, until the response
}

// Write registers a list call made by listToolsPage or listPages, then
// writes it, with "cursor":"" added when the page asks for the cursor "".
func (c *fastListConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	req, ok := msg.(*jsonrpc.Request)
	var page *fastPage
	if ok && req.IsCall() && (listMethods[req.Method] || req.Method == "tools/call") {
		page, _ = ctx.Value(fastPageKey{}).(*fastPage)
	}
	if page == nil {
		return c.Connection.Write(ctx, msg)
	}
	if page.EmptyCursor {
		cp := *req
		cp.Params = transport.WithEmptyCursor(req.Params)
		msg = &cp
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
	if !page.decode && page.Repair != nil {
		// A tools/call whose result go-sdk cannot decode as it is (taskFold).
		if fixed := page.Repair(resp.Result); fixed != nil {
			cp := *resp
			cp.Result = fixed
			return &cp, nil
		}
		return msg, nil
	}
	if page.decode {
		if rest, ok := page.take(resp.Result); ok {
			page.readCursor(rest) // rest is the page without its tools: a short read
			cp := *resp
			cp.Result = rest
			return &cp, nil
		}
		if fixed := page.repair(resp.Result); fixed != nil {
			cp := *resp
			cp.Result = fixed
			if rest, ok := page.take(fixed); ok {
				cp.Result = rest
			}
			page.readCursor(cp.Result)
			return &cp, nil
		}
	}
	page.readCursor(resp.Result)
	return msg, nil
}

// listMethods are the MCP list calls whose pages follow nextCursor.
var listMethods = map[string]bool{"tools/list": true, "resources/list": true, "resources/templates/list": true, "prompts/list": true}

// fastPageKey is the context key of the *fastPage of a listToolsPage call.
type fastPageKey struct{}

// fastPage is one list call: what the request carries beyond go-sdk's
// params and what is read of the result on the wire (the cursor part,
// transport.ListPage, which over streamable HTTP the transport's HTTP
// client fills), and, for a tools/list page on a withFastList connection,
// the tools the runtime decodes itself.
type fastPage struct {
	transport.ListPage
	decode bool // a tools/list page: its tools are decoded here (take)

	mu      sync.Mutex
	taken   bool
	tools   []*mcp.Tool
	dropped []string // the tool definitions left out (usableTools)
}

// newFastPage returns the page of a list call at cur and ctx carrying it
// (for withFastList and for the transport's HTTP client).
func newFastPage(ctx context.Context, cur pageCursor, decode bool) (*fastPage, context.Context) {
	p := &fastPage{decode: decode}
	p.EmptyCursor = cur.set && cur.cursor == ""
	if decode {
		p.Repair = p.repair
	}
	return p, transport.WithListPage(context.WithValue(ctx, fastPageKey{}, p), &p.ListPage)
}

// readCursor records the nextCursor member of result, a list result. A
// result that does not read as an object records nothing: go-sdk reports
// it.
func (p *fastPage) readCursor(result []byte) {
	if next, present, ok := transport.NextCursorOf(result); ok {
		p.SetNextCursor(next, present)
	}
}

// nextCursor returns the nextCursor of the page and whether it is present:
// as read from the wire, else go-sdk's decoded value (sdkNext), where ""
// cannot be told from absent (a transport neither withFastList nor the
// transport package's HTTP client sees). A page of the cursor "" that did
// not come from the wire came from go-sdk's list cache (protocol
// 2026-07-28), which keys the first page by the cursor "": it is reported
// as handing out "" again, the first page's repeat (cursorTrail drops it).
func (p *fastPage) nextCursor(sdkNext string) (string, bool) {
	if next, present, read := p.NextCursor(); read {
		return next, present
	}
	if p.EmptyCursor {
		return "", true
	}
	return sdkNext, sdkNext != ""
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
	tools, rest, err := splitPage(result)
	if err != nil {
		return nil, false
	}
	p.mu.Lock()
	p.taken, p.tools = true, tools
	p.mu.Unlock()
	return rest, true
}

// repair is the page's ListPage.Repair: a tools/list result that does not
// decode (splitPage, which reads it as go-sdk does) is returned without the
// tool definitions that fail (usableTools), which are recorded; nil keeps
// the result as it is.
func (p *fastPage) repair(result []byte) []byte {
	if _, _, err := splitPage(result); err == nil {
		return nil
	}
	fixed, dropped := usableTools(result)
	if fixed == nil {
		return nil
	}
	p.mu.Lock()
	p.dropped = append(p.dropped, dropped...)
	p.mu.Unlock()
	return fixed
}

// usableTools returns result, a tools/list result, without the members of
// its tools array that are not a tool definition a client can use (not an
// object, a member of the wrong type, no name, a schema that is not an
// object), and why each was left out ("tools[3] \"x\": ..."). It returns
// nil when none was, or when result has no tools array to mend (go-sdk
// then reports the error).
func usableTools(result []byte) (fixed []byte, dropped []string) {
	var m map[string]json.RawMessage
	if json.Unmarshal(result, &m) != nil {
		return nil, nil
	}
	var raw []json.RawMessage
	if json.Unmarshal(m["tools"], &raw) != nil {
		return nil, nil
	}
	keep := raw[:0]
	for i, def := range raw {
		if err := usableTool(def); err != nil {
			var named struct{ Name any }
			_ = json.Unmarshal(def, &named)
			if s, ok := named.Name.(string); ok && s != "" {
				dropped = append(dropped, fmt.Sprintf("tools[%d] %q: %v", i, truncate(s, 64), err))
			} else {
				dropped = append(dropped, fmt.Sprintf("tools[%d]: %v", i, err))
			}
			continue
		}
		keep = append(keep, def)
	}
	if len(dropped) == 0 {
		return nil, nil
	}
	var err error
	if m["tools"], err = json.Marshal(keep); err != nil {
		return nil, nil
	}
	if fixed, err = json.Marshal(m); err != nil {
		return nil, nil
	}
	return fixed, dropped
}

// usableTool says why def cannot be a tool of the catalog, nil when it can
// (null, which go-sdk drops, can).
func usableTool(def json.RawMessage) error {
	if bytes.Equal(bytes.TrimSpace(def), litNull) {
		return nil
	}
	var t mcp.Tool
	if err := json.Unmarshal(def, &t); err != nil {
		return err
	}
	if t.Name == "" {
		return errors.New("no name")
	}
	for _, f := range [2]struct {
		key string
		v   any
	}{{"inputSchema", t.InputSchema}, {"outputSchema", t.OutputSchema}} {
		var kind string
		switch f.v.(type) {
		case nil, map[string]any:
			continue
		case string:
			kind = "a string"
		case float64:
			kind = "a number"
		case bool:
			kind = "a boolean"
		default:
			kind = "an array"
		}
		return fmt.Errorf("%s is %s, want a JSON Schema object", f.key, kind)
	}
	return nil
}

// result returns the decoded tools, and whether the page was taken.
func (p *fastPage) result() ([]*mcp.Tool, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tools, p.taken
}

// splitPage decodes the "tools" member of a tools/list result and returns
// the result's other members, ttlMs excepted, with "tools":[] for go-sdk.
// It reads the page in one pass (jsonw.ScanValue validates what it skips), so a
// malformed page is an error here as it is in go-sdk. The tools' schemas
// are slices of one copy of the page.
func splitPage(result []byte) (tools []*mcp.Tool, rest []byte, err error) {
	b := bytes.Clone(result)
	rest = make([]byte, 0, 64)
	rest = append(rest, '{')
	end, err := jsonw.EachMember(b, jsonw.SkipSpace(b, 0), maxDepth, func(key []byte, ks, vs int) (int, error) {
		switch string(key) {
		case "tools":
			var e int
			tools, e, err = decodeToolArray(b, vs)
			return e, err
		case "ttlMs":
			return jsonw.ScanValue(b, vs, maxDepth-1)
		}
		e, err := jsonw.ScanValue(b, vs, maxDepth-1)
		if err == nil {
			rest = append(append(rest, b[ks:e]...), ',')
		}
		return e, err
	})
	if err != nil {
		return nil, nil, err
	}
	if jsonw.SkipSpace(b, end) != len(b) {
		return nil, nil, fmt.Errorf("result: data after the object at offset %d", end)
	}
	return tools, append(rest, `"tools":[]}`...), nil
}

// decodeTools decodes a "tools" array: each tool as mcp.Tool, with
// inputSchema and outputSchema kept as json.RawMessage (the server's
// bytes); null entries are dropped, as go-sdk drops them. Empty input is no
// tools.
func decodeTools(raw json.RawMessage) ([]*mcp.Tool, error) {
	i := jsonw.SkipSpace(raw, 0)
	if i == len(raw) {
		return nil, nil
	}
	tools, end, err := decodeToolArray(raw, i)
	if err != nil {
		return nil, err
	}
	if jsonw.SkipSpace(raw, end) != len(raw) {
		return nil, fmt.Errorf("tools: data after the array at offset %d", end)
	}
	return tools, nil
}

// decodeToolArray decodes the array value at b[i:] (null is no tools) and
// returns the offset after it.
func decodeToolArray(b []byte, i int) ([]*mcp.Tool, int, error) {
	if bytes.HasPrefix(b[i:], litNull) {
		return nil, i + len(litNull), nil
	}
	if i >= len(b) || b[i] != '[' {
		return nil, i, fmt.Errorf("tools: %s at offset %d, want an array", jsonw.Describe(b, i), i)
	}
	p := &pageTools{b: b, tools: make([]*mcp.Tool, 0, 16)}
	i = jsonw.SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return p.tools, i + 1, nil
	}
	for n := 0; ; n++ {
		switch {
		case bytes.HasPrefix(b[i:], litNull):
			i += len(litNull)
		case i < len(b) && b[i] == '{':
			t, e, err := p.decodeTool(i)
			if err != nil {
				return nil, i, fmt.Errorf("tools[%d]: %w", n, err)
			}
			p.tools, i = append(p.tools, t), e
		default:
			return nil, i, fmt.Errorf("tools[%d]: %s at offset %d, want an object", n, jsonw.Describe(b, i), i)
		}
		i = jsonw.SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = jsonw.SkipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == ']' {
			return p.tools, i + 1, nil
		}
		return nil, i, fmt.Errorf("tools: %s at offset %d, want , or ]", jsonw.Describe(b, i), i)
	}
}

var litNull = []byte("null")

// pageTools decodes the tools of one tools array in b, with fewer
// allocations than a tool each: tools come from slabs, and the string
// members of a tool share one string.
type pageTools struct {
	b     []byte
	tools []*mcp.Tool
	slab  []mcp.Tool // the next tools
}

// newTool returns a zero tool from the current slab, starting a slab of
// twice the size (4 to 32 tools) when it is full, so that a small page
// leaves little of a slab unused.
func (p *pageTools) newTool() *mcp.Tool {
	if len(p.slab) == cap(p.slab) {
		p.slab = make([]mcp.Tool, 0, min(max(2*cap(p.slab), 4), 32))
	}
	p.slab = p.slab[:len(p.slab)+1]
	return &p.slab[len(p.slab)-1]
}

// toolString is the last value read of a string member of a tool: b[start:end]
// of the page when the value has no escapes, else lit (start < 0). set is
// false until a value is read; null is no value.
type toolString struct {
	set        bool
	start, end int
	lit        string
}

// decodeTool decodes the tool object at p.b[i:] the way go-sdk does
// (member names matched exactly, unknown members ignored, the last of
// duplicate members kept, null leaving a string member as it was), except
// that the schemas stay raw: slices of p.b.
func (p *pageTools) decodeTool(i int) (*mcp.Tool, int, error) {
	b := p.b
	t := p.newTool()
	var strs [3]toolString // name, title, description
	end, err := jsonw.EachMember(b, i, maxDepth-1, func(key []byte, _, vs int) (int, error) {
		var field int
		switch string(key) {
		case "name":
			field = 0
		case "title":
			field = 1
		case "description":
			field = 2
		case "inputSchema", "outputSchema":
			e, err := jsonw.ScanValue(b, vs, maxDepth-2)
			if err != nil {
				return e, err
			}
			var schema any
			if !bytes.Equal(b[vs:e], litNull) {
				schema = json.RawMessage(b[vs:e:e])
			}
			if key[0] == 'i' {
				t.InputSchema = schema
			} else {
				t.OutputSchema = schema
			}
			return e, nil
		case "_meta", "annotations", "icons": // rare: the standard decoder
			e, err := jsonw.ScanValue(b, vs, maxDepth-2)
			if err != nil {
				return e, err
			}
			var dst any = &t.Meta
			if key[0] == 'a' {
				dst = &t.Annotations
			} else if key[0] == 'i' {
				dst = &t.Icons
			}
			if err := json.Unmarshal(b[vs:e], dst); err != nil {
				return e, fmt.Errorf("%s: %w", key, err)
			}
			return e, nil
		default:
			return jsonw.ScanValue(b, vs, maxDepth-2)
		}
		if bytes.HasPrefix(b[vs:], litNull) { // null leaves a string member as it was
			return vs + len(litNull), nil
		}
		if vs >= len(b) || b[vs] != '"' {
			return vs, fmt.Errorf("%s: %s at offset %d, want a string", key, jsonw.Describe(b, vs), vs)
		}
		e, plain, err := jsonw.ScanString(b, vs)
		if err != nil {
			return e, fmt.Errorf("%s: %w", key, err)
		}
		if plain {
			strs[field] = toolString{set: true, start: vs + 1, end: e - 1}
			return e, nil
		}
		var v string
		if err := json.Unmarshal(b[vs:e], &v); err != nil {
			return e, fmt.Errorf("%s: %w", key, err)
		}
		strs[field] = toolString{set: true, start: -1, lit: v}
		return e, nil
	})
	if err != nil {
		return nil, end, err
	}
	// One string holds the plain values.
	n := 0
	for _, s := range strs {
		if s.set && s.start >= 0 {
			n += s.end - s.start
		}
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, s := range strs {
		if s.set && s.start >= 0 {
			sb.Write(b[s.start:s.end])
		}
	}
	all, off := sb.String(), 0
	for k, dst := range [3]*string{&t.Name, &t.Title, &t.Description} {
		switch s := strs[k]; {
		case !s.set:
		case s.start < 0:
			*dst = s.lit
		default:
			*dst = all[off : off+s.end-s.start]
			off += s.end - s.start
		}
	}
	return t, end, nil
}

// maxDepth bounds the nesting of a page, as go-sdk's decoder does.
const maxDepth = 1000

// listToolsPage is cs.ListTools of the page at cur, except that on a
// connection made through withFastList the page's tools are decoded by the
// runtime (fastPage.take) and a present "" cursor is sent and read as
// such. next is the page's nextCursor, more whether it is present. A tool
// definition no client can use is left out of res, and said in dropped,
// instead of failing the page (fastPage.repair).
func listToolsPage(ctx context.Context, cs *mcp.ClientSession, cur pageCursor) (res *mcp.ListToolsResult, next string, more bool, dropped []string, err error) {
	page, pctx := newFastPage(ctx, cur, true)
	res, err = cs.ListTools(pctx, &mcp.ListToolsParams{Cursor: cur.cursor})
	if err != nil {
		return nil, "", false, nil, err
	}
	if tools, ok := page.result(); ok {
		res.Tools = tools
	}
	next, more = page.nextCursor(res.NextCursor)
	page.mu.Lock()
	dropped = page.dropped
	page.mu.Unlock()
	return res, next, more, dropped, nil
}

// pageCursor is the cursor of a list request: set false asks for the first
// page (no cursor); set with cursor "" sends the cursor "" a server handed
// out.
type pageCursor struct {
	cursor string
	set    bool
}

// cursorTrail follows the nextCursor of a listing's pages: only an absent
// nextCursor ends it ("" is a cursor like any other). A server that ends
// its lists with "" answers the cursor "" with its first page, whose
// nextCursor was seen already: a repeated cursor on the page of the cursor
// "" ends the listing there, without that page (the first one again). Any
// other repeated cursor is an error (docs/protocol-facts.md, Defaults and limits).
type cursorTrail struct {
	at   pageCursor // the cursor of the page being read
	seen map[string]bool
}

// follow takes the nextCursor of the page just read (more: present) and
// returns whether the listing is done, whether that page's items are kept,
// and the error of a repeated cursor.
func (t *cursorTrail) follow(next string, more bool) (done, keep bool, err error) {
	if !more {
		return true, true, nil
	}
	if t.seen[next] {
		if t.at.set && t.at.cursor == "" {
			return true, false, nil
		}
		return true, false, &ListError{Reason: fmt.Sprintf("cursor %q repeated", truncate(next, 64))}
	}
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	t.seen[next] = true
	t.at = pageCursor{cursor: next, set: true}
	return false, true, nil
}
