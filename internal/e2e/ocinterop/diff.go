package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/e2e"
)

// step is one request of the comparison script that [Transcript] sends.
type step struct {
	// Name identifies the step, e.g. "tools/call conversations_list {}".
	Name string
	// Do sends the request through the session. Its error is not a failure
	// of the comparison: a JSON-RPC error response is compared like a result.
	Do func(ctx context.Context, cs *mcp.ClientSession) error
}

// compareSteps is the fixed request sequence sent to both servers: every
// tool on the seeded Gateway with valid, missing-target and invalid
// arguments, plus ping and the unsupported list methods. None of them
// changes the Gateway's state, so the two servers see the same data:
// messages_send goes only to the imessage route, which fails at once for
// lack of a channel plugin (a send to the telegram route fails too, but
// leaves an outbound delivery entry the Gateway retries).
func compareSteps() []step {
	var steps []step
	tool := func(name string, args map[string]any) {
		steps = append(steps, step{
			Name: "tools/call " + name + " " + jsonOf(args),
			Do: func(ctx context.Context, cs *mcp.ClientSession) error {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
				return err
			},
		})
	}
	steps = append(steps,
		step{"tools/list", func(ctx context.Context, cs *mcp.ClientSession) error { _, err := cs.ListTools(ctx, nil); return err }},
		step{"ping", func(ctx context.Context, cs *mcp.ClientSession) error { return cs.Ping(ctx, nil) }},
		step{"resources/list", func(ctx context.Context, cs *mcp.ClientSession) error {
			_, err := cs.ListResources(ctx, nil)
			return err
		}},
		step{"prompts/list", func(ctx context.Context, cs *mcp.ClientSession) error { _, err := cs.ListPrompts(ctx, nil); return err }},
	)
	tool("conversations_list", map[string]any{})
	tool("conversations_list", map[string]any{"channel": "TELEGRAM"})
	tool("conversations_list", map[string]any{"search": "Seeded", "limit": 1})
	tool("conversations_list", map[string]any{"limit": 0})
	tool("conversation_get", map[string]any{"session_key": seededMainKey})
	tool("conversation_get", map[string]any{"session_key": seededNoRouteKey})
	tool("conversation_get", map[string]any{"session_key": "agent:main:nope"})
	tool("conversation_get", map[string]any{})
	tool("messages_read", map[string]any{"session_key": seededTgKey})
	tool("messages_read", map[string]any{"session_key": "agent:main:nope", "limit": 5})
	tool("attachments_fetch", map[string]any{"session_key": seededMainKey, "message_id": "msg-attachment"})
	tool("attachments_fetch", map[string]any{"session_key": seededMainKey, "message_id": "msg-inline-img"})
	tool("attachments_fetch", map[string]any{"session_key": seededMainKey, "message_id": "m-missing"})
	tool("events_poll", map[string]any{})
	tool("events_poll", map[string]any{"after_cursor": 5, "limit": 3})
	tool("events_poll", map[string]any{"limit": 999})
	tool("events_wait", map[string]any{"timeout_ms": 200})
	tool("events_wait", map[string]any{"timeout_ms": 300001})
	tool("messages_send", map[string]any{"session_key": "agent:main:nope", "text": "hi"})
	tool("messages_send", map[string]any{"session_key": seededMainKey, "text": "hi"})
	tool("permissions_list_open", map[string]any{})
	tool("permissions_respond", map[string]any{"kind": "exec", "id": "bogus", "decision": "deny"})
	tool("permissions_respond", map[string]any{"kind": "nope", "id": "bogus", "decision": "deny"})
	tool("nope_tool", map[string]any{})
	return steps
}

// exchange is the raw request and response lines of one step.
type exchange struct {
	Step     string
	Request  string
	Response string
}

// transcript runs steps against s and returns the raw request/response
// lines of each step, the initialize exchange first. Each step gets at most
// stepTimeout; a step without a response by then has an empty Response (the
// client cancels it) and the next step runs.
func transcript(ctx context.Context, s *e2e.Serve, steps []step, stepTimeout time.Duration) ([]exchange, error) {
	out := []exchange{exchangeOf("initialize", s.Raw.Lines(), 0)}
	for _, st := range steps {
		n := len(s.Raw.Lines())
		sctx, cancel := context.WithTimeout(ctx, stepTimeout)
		st.Do(sctx, s.Session)
		cancel()
		if ctx.Err() != nil {
			return out, fmt.Errorf("interop: %s: %w", st.Name, ctx.Err())
		}
		out = append(out, exchangeOf(st.Name, s.Raw.Lines(), n))
	}
	return out, nil
}

// exchangeOf finds the first request written at or after index from and
// its response.
func exchangeOf(name string, lines []e2e.Line, from int) exchange {
	ex := exchange{Step: name}
	var id string
	for _, l := range lines[from:] {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal([]byte(l.Text), &m) != nil || len(m.ID) == 0 {
			continue
		}
		switch {
		case l.Out && m.Method != "" && id == "":
			ex.Request, id = l.Text, string(m.ID)
		case !l.Out && m.Method == "" && id != "" && string(m.ID) == id:
			ex.Response = l.Text
			return ex
		}
	}
	return ex
}

// difference is one JSON path where two responses differ.
type difference struct {
	// Path is a JSON-pointer-like path ("result.structuredContent.conversations[0].channel").
	Path string
	// A and B are the values (compact JSON) at Path, or "(absent)".
	A, B string
}

// cosmetic reports whether d is a difference MCP clients do not depend on:
// the key order of the JSON-RPC envelope itself ({"result","jsonrpc","id"}
// as Node's SDK writes it, against go-sdk's {"jsonrpc","id","result"}), or
// the text of a tool description (OpenClaw's are its own prose; only their
// presence matters, docs/protocol-facts.md, mcp serve tools).
func cosmetic(d difference) bool {
	if d.Path == "{order}" {
		return true
	}
	var i int
	n, err := fmt.Sscanf(d.Path, "result.tools[%d].description", &i)
	return n == 1 && err == nil && d.Path == fmt.Sprintf("result.tools[%d].description", i) && d.A != "(absent)" && d.B != "(absent)"
}

// diffJSON compares two JSON texts structurally, keeping object key order:
// it reports values that differ, keys present on one side only, and objects
// whose common keys appear in a different order (Path ends in "{order}").
// It fails when either text is not JSON.
func diffJSON(a, b string) ([]difference, error) {
	va, err := parseOrdered(a)
	if err != nil {
		return nil, fmt.Errorf("interop: first value: %w", err)
	}
	vb, err := parseOrdered(b)
	if err != nil {
		return nil, fmt.Errorf("interop: second value: %w", err)
	}
	var out []difference
	diffValue("", va, vb, &out)
	return out, nil
}

// ordered is a JSON value with object key order kept: *object, []any,
// json.Number, string, bool or nil.
type object struct {
	keys []string
	vals map[string]any
}

func parseOrdered(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		o := &object{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; !dup {
				o.keys = append(o.keys, k)
			}
			o.vals[k] = v
		}
		_, err := dec.Token() // '}'
		return o, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token() // ']'
		return arr, err
	}
	return t, nil
}

func diffValue(path string, a, b any, out *[]difference) {
	switch x := a.(type) {
	case *object:
		y, ok := b.(*object)
		if !ok {
			break
		}
		var common []string
		for _, k := range x.keys {
			if _, ok := y.vals[k]; ok {
				common = append(common, k)
				diffValue(join(path, k), x.vals[k], y.vals[k], out)
			} else {
				*out = append(*out, difference{join(path, k), compact(x.vals[k]), "(absent)"})
			}
		}
		var commonB []string
		for _, k := range y.keys {
			if _, ok := x.vals[k]; ok {
				commonB = append(commonB, k)
			} else {
				*out = append(*out, difference{join(path, k), "(absent)", compact(y.vals[k])})
			}
		}
		if !slices.Equal(common, commonB) {
			*out = append(*out, difference{path + "{order}", strings.Join(common, ","), strings.Join(commonB, ",")})
		}
		return
	case []any:
		y, ok := b.([]any)
		if !ok {
			break
		}
		for i := range max(len(x), len(y)) {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= len(y):
				*out = append(*out, difference{p, compact(x[i]), "(absent)"})
			case i >= len(x):
				*out = append(*out, difference{p, "(absent)", compact(y[i])})
			default:
				diffValue(p, x[i], y[i], out)
			}
		}
		return
	}
	if ca, cb := compact(a), compact(b); ca != cb {
		*out = append(*out, difference{path, ca, cb})
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// compact renders an ordered value as compact JSON, keeping key order.
func compact(v any) string {
	var b bytes.Buffer
	writeCompact(&b, v)
	return b.String()
}

func writeCompact(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case *object:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			writeCompact(b, x.vals[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCompact(b, e)
		}
		b.WriteByte(']')
	case json.Number:
		b.WriteString(x.String())
	default:
		vb, _ := json.Marshal(x)
		b.Write(vb)
	}
}
