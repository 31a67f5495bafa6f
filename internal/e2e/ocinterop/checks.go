package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/e2e"
)

// toolNames are the tools of `openclaw mcp serve` 2026.9.6, in the order
// its tools/list returns them (testdata/openclaw/empty-gateway/tools-list.json).
var toolNames = []string{
	"conversations_list", "conversation_get", "messages_read", "attachments_fetch",
	"events_poll", "events_wait", "messages_send", "permissions_list_open", "permissions_respond",
}

// Seeded conversations written by peers/openclaw-real/seed.mjs
// (testdata/openclaw/README.md).
const (
	seededMainKey    = "agent:main:main"
	seededTgKey      = "agent:main:tg-dm"
	seededNoRouteKey = "agent:main:noroute"
)

// status is the outcome of one check.
type status string

// Check outcomes.
const (
	pass status = "PASS"
	fail status = "FAIL"
	skip status = "SKIP" // not applicable to this server (said why in Detail)
	// warn is a difference from the real OpenClaw that MCP clients do not
	// depend on (for example the order of tools/list); it does not fail a run.
	warn status = "WARN"
)

// checkResult is one named interop check.
type checkResult struct {
	Name   string
	Status status
	// Detail says what was seen; for a failure, what differs from the real
	// OpenClaw behaviour.
	Detail string
}

// checkOptions are the Gateway-side helpers the checks use.
type checkOptions struct {
	// Inject makes the Gateway store a user message with this text in
	// conversation agent:main:main and emit its session.message, for example
	// by running `gw-call.sh chat.send`. Nil skips the events_wait and
	// channel-notification checks.
	Inject func(ctx context.Context, text string) error
	// Approve raises one exec and one plugin approval from a requester with
	// the bridge's device identity (approver.mjs) and blocks until both are
	// decided, returning the requester's JSON output
	// {execAccepted, execFinal, pluginAccepted, pluginFinal}. Its exec id
	// must be ExecID. Nil skips the approval checks.
	Approve func(ctx context.Context) (json.RawMessage, error)
	// ExecID is the id of the exec approval Approve raises.
	ExecID string
	// WaitTimeout bounds each wait for something the Gateway does (an event,
	// an approval). Zero means 30 s.
	WaitTimeout time.Duration
	// Log receives progress lines. Nil discards them.
	Log io.Writer
}

// runChecks runs the interop checks against the initialized server s, in
// order: initialize, tools/list, each of the 9 tools, the seeded
// conversations, a live events_wait, the Claude channel notification, and
// the approval round trip. It does not end s.
func runChecks(ctx context.Context, s *e2e.Serve, o checkOptions) []checkResult {
	if o.WaitTimeout == 0 {
		o.WaitTimeout = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	c := &checker{ctx: ctx, s: s, o: o}
	c.initialize()
	c.toolsList()
	c.eachTool()
	c.seeded()
	c.liveEvent()
	c.approvals()
	return c.out
}

type checker struct {
	ctx context.Context
	s   *e2e.Serve
	o   checkOptions
	out []checkResult
}

func (c *checker) add(name string, st status, format string, args ...any) {
	r := checkResult{Name: name, Status: st, Detail: fmt.Sprintf(format, args...)}
	c.out = append(c.out, r)
	fmt.Fprintf(c.o.Log, "%s %s: %s\n", r.Status, r.Name, r.Detail)
}

// call runs one tools/call bounded by the wait timeout.
func (c *checker) call(name string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.o.WaitTimeout)
	defer cancel()
	return c.s.Session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

func (c *checker) initialize() {
	ir := c.s.Session.InitializeResult()
	if ir == nil || ir.ServerInfo == nil {
		c.add("initialize", fail, "no initialize result")
		return
	}
	if ir.Capabilities == nil || ir.Capabilities.Tools == nil {
		c.add("initialize", fail, "capabilities lack tools: %s", jsonOf(ir.Capabilities))
		return
	}
	c.add("initialize", pass, "server %s %s, protocol %s, capabilities %s, after %.0f ms",
		ir.ServerInfo.Name, ir.ServerInfo.Version, ir.ProtocolVersion, jsonOf(ir.Capabilities), ms(c.s.Initialized))
}

func (c *checker) toolsList() {
	ctx, cancel := context.WithTimeout(c.ctx, c.o.WaitTimeout)
	defer cancel()
	res, err := c.s.Session.ListTools(ctx, nil)
	if err != nil {
		c.add("tools/list has the 9 tools", fail, "tools/list: %v", err)
		return
	}
	var names []string
	var bad []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
		if m, ok := t.InputSchema.(map[string]any); !ok || m["type"] != "object" {
			bad = append(bad, t.Name)
		}
	}
	sorted, want := slices.Sorted(slices.Values(names)), slices.Sorted(slices.Values(toolNames))
	switch {
	case !slices.Equal(sorted, want):
		c.add("tools/list has the 9 tools", fail, "got %q, want %q", names, toolNames)
		return
	case len(bad) > 0:
		c.add("tools/list has the 9 tools", fail, "input schema not an object schema for %q", bad)
		return
	}
	c.add("tools/list has the 9 tools", pass, "%s", strings.Join(names, ", "))
	if !slices.Equal(names, toolNames) {
		c.add("tools/list order matches OpenClaw", warn, "got %q, OpenClaw lists %q", names, toolNames)
	} else {
		c.add("tools/list order matches OpenClaw", pass, "fixed OpenClaw order")
	}
}

// toolCase is one call of one tool with what the real OpenClaw answers
// against the seeded Gateway (testdata/openclaw/seeded/, empty-gateway/).
type toolCase struct {
	tool  string
	args  map[string]any
	check func(r *mcp.CallToolResult) error
}

func (c *checker) eachTool() {
	cases := []toolCase{
		{"conversations_list", map[string]any{}, func(r *mcp.CallToolResult) error {
			return wantPrefix(r, false, "conversations: ")
		}},
		{"conversation_get", map[string]any{"session_key": seededMainKey}, func(r *mcp.CallToolResult) error {
			if err := wantPrefix(r, false, "conversation "+seededMainKey); err != nil {
				return err
			}
			var v struct {
				Conversation struct{ SessionKey, Channel, To string }
			}
			if err := structured(r, &v); err != nil {
				return err
			}
			if v.Conversation.Channel != "imessage" || v.Conversation.To != "+15551234567" {
				return fmt.Errorf("conversation %+v, want channel imessage to +15551234567", v.Conversation)
			}
			return nil
		}},
		{"messages_read", map[string]any{"session_key": seededMainKey, "limit": 200}, func(r *mcp.CallToolResult) error {
			if err := wantPrefix(r, false, "messages: "); err != nil {
				return err
			}
			var v struct{ Messages []json.RawMessage }
			if err := structured(r, &v); err != nil {
				return err
			}
			ids := map[string]bool{}
			for _, m := range v.Messages {
				ids[messageID(m)] = true
			}
			for _, want := range []string{"msg-1", "msg-attachment", "msg-inline-img"} {
				if !ids[want] {
					return fmt.Errorf("seeded message %q missing among %d messages", want, len(v.Messages))
				}
			}
			return nil
		}},
		{"attachments_fetch", map[string]any{"session_key": seededMainKey, "message_id": "msg-attachment"}, func(r *mcp.CallToolResult) error {
			if err := wantPrefix(r, false, "attachments: 1"); err != nil {
				return err
			}
			var v struct {
				Attachments []struct {
					Type  string
					Media struct{ URL, ContentType string }
				}
			}
			if err := structured(r, &v); err != nil {
				return err
			}
			if len(v.Attachments) != 1 || v.Attachments[0].Type != "openclaw_media" || v.Attachments[0].Media.URL != "media://inbound/seeded-image.png" {
				return fmt.Errorf("attachments %+v, want one openclaw_media media://inbound/seeded-image.png", v.Attachments)
			}
			return nil
		}},
		{"events_poll", map[string]any{}, func(r *mcp.CallToolResult) error {
			if err := wantPrefix(r, false, "events: "); err != nil {
				return err
			}
			var v struct {
				NextCursor *int64 `json:"next_cursor"`
			}
			if err := structured(r, &v); err != nil {
				return err
			}
			if v.NextCursor == nil {
				return fmt.Errorf("structuredContent lacks next_cursor: %s", jsonOf(r.StructuredContent))
			}
			return nil
		}},
		{"events_wait", map[string]any{"after_cursor": 1 << 40, "timeout_ms": 200}, func(r *mcp.CallToolResult) error {
			return wantPrefix(r, false, "timeout")
		}},
		{"messages_send", map[string]any{"session_key": seededMainKey, "text": "interop check"}, func(r *mcp.CallToolResult) error {
			// No channel plugin on the test Gateway: the real one reports
			// the Gateway's send error.
			return wantPrefix(r, true, "unsupported channel: imessage")
		}},
		{"permissions_list_open", map[string]any{}, func(r *mcp.CallToolResult) error {
			return wantPrefix(r, false, "approvals: ")
		}},
		{"permissions_respond", map[string]any{"kind": "exec", "id": "interop-bogus", "decision": "deny"}, func(r *mcp.CallToolResult) error {
			return wantPrefix(r, true, "unknown or expired approval id")
		}},
	}
	for _, tc := range cases {
		name := "tool " + tc.tool + " answers"
		t0 := time.Now()
		r, err := c.call(tc.tool, tc.args)
		if err != nil {
			c.add(name, fail, "%s %s: %v", tc.tool, jsonOf(tc.args), err)
			continue
		}
		if err := tc.check(r); err != nil {
			c.add(name, fail, "%s %s: %v; result %s", tc.tool, jsonOf(tc.args), err, clip(jsonOf(r), 400))
			continue
		}
		c.add(name, pass, "%q in %.1f ms", clip(firstLine(resultText(r)), 60), ms(time.Since(t0)))
	}
}

func (c *checker) seeded() {
	const name = "conversations_list returns the seeded conversations"
	r, err := c.call("conversations_list", map[string]any{})
	if err != nil {
		c.add(name, fail, "%v", err)
		return
	}
	var v struct {
		Conversations []struct{ SessionKey, Channel, To string }
	}
	if err := structured(r, &v); err != nil {
		c.add(name, fail, "structuredContent: %v", err)
		return
	}
	got := map[string]string{}
	var keys []string
	for _, cv := range v.Conversations {
		got[cv.SessionKey] = cv.Channel + " " + cv.To
		keys = append(keys, cv.SessionKey)
	}
	want := map[string]string{seededMainKey: "imessage +15551234567", seededTgKey: "telegram 12345"}
	for k, route := range want {
		if got[k] != route {
			c.add(name, fail, "%s: got route %q, want %q (conversations %q)", k, got[k], route, keys)
			return
		}
	}
	if _, ok := got[seededNoRouteKey]; ok {
		c.add(name, fail, "unrouted %s listed; the real OpenClaw drops rows without a route", seededNoRouteKey)
		return
	}
	c.add(name, pass, "%q (unrouted %s dropped)", keys, seededNoRouteKey)
}

// cursor returns the next_cursor of an events_poll with a high limit,
// following pages to the end of the queue.
func (c *checker) cursor() (int64, error) {
	var after int64
	for {
		r, err := c.call("events_poll", map[string]any{"after_cursor": after, "limit": 200})
		if err != nil {
			return 0, err
		}
		var v struct {
			Events     []json.RawMessage
			NextCursor int64 `json:"next_cursor"`
		}
		if err := structured(r, &v); err != nil {
			return 0, err
		}
		if len(v.Events) == 0 || v.NextCursor <= after {
			return max(after, v.NextCursor), nil
		}
		after = v.NextCursor
	}
}

type event struct {
	Cursor     int64  `json:"cursor"`
	Type       string `json:"type"`
	SessionKey string `json:"sessionKey"`
	Role       string `json:"role"`
	Text       string `json:"text"`
	MessageID  string `json:"messageId"`
	Raw        json.RawMessage
}

func (c *checker) liveEvent() {
	const name = "events_wait receives a message injected during the wait"
	const notifName = "notifications/claude/channel for the injected user message"
	if c.o.Inject == nil {
		c.add(name, skip, "no injector configured")
		c.add(notifName, skip, "no injector configured")
		return
	}
	after, err := c.cursor()
	if err != nil {
		c.add(name, fail, "reading the queue cursor: %v", err)
		c.add(notifName, skip, "events_wait failed")
		return
	}
	text := fmt.Sprintf("interop live %d", time.Now().UnixNano())
	type waitRes struct {
		r   *mcp.CallToolResult
		err error
	}
	ch := make(chan waitRes, 1)
	// The wait outlasts the injection's own bound (the openclaw CLI behind
	// gw-call.sh takes seconds to start), so a slow injector is not
	// mistaken for a missed wake-up.
	waitMs := min(2*c.o.WaitTimeout.Milliseconds(), 300000)
	go func() { // owner: liveEvent; ends when the call returns (bounded by its timeout)
		ctx, cancel := context.WithTimeout(c.ctx, time.Duration(waitMs)*time.Millisecond+5*time.Second)
		defer cancel()
		r, err := c.s.Session.CallTool(ctx, &mcp.CallToolParams{Name: "events_wait", Arguments: map[string]any{
			"after_cursor": after, "session_key": seededMainKey, "timeout_ms": waitMs,
		}})
		ch <- waitRes{r, err}
	}()
	// Give the wait a moment to register. Correctness does not depend on
	// it: an event that lands first is returned at once from the queue.
	select {
	case <-time.After(300 * time.Millisecond):
	case <-c.ctx.Done():
	}
	ictx, cancel := context.WithTimeout(c.ctx, c.o.WaitTimeout)
	t0 := time.Now()
	injectErr := c.o.Inject(ictx, text)
	injected := time.Since(t0)
	cancel()
	w := <-ch
	switch {
	case injectErr != nil:
		c.add(name, fail, "injecting %q: %v", text, injectErr)
	case w.err != nil:
		c.add(name, fail, "events_wait: %v", w.err)
	default:
		var v struct {
			Event *event
		}
		if err := structured(w.r, &v); err != nil || v.Event == nil {
			c.add(name, fail, "no event (err %v) within %d ms; the injection took %.0f ms: %s", err, waitMs, ms(injected), clip(jsonOf(w.r), 400))
			break
		}
		e := v.Event
		if e.Type != "message" || e.SessionKey != seededMainKey || e.Role != "user" || e.Text != text || e.Cursor <= after {
			c.add(name, fail, "event %+v, want a user message %q in %s after cursor %d", *e, text, seededMainKey, after)
			break
		}
		if want := fmt.Sprintf("event %d", e.Cursor); resultText(w.r) != want {
			c.add(name, fail, "text %q, want %q", resultText(w.r), want)
			break
		}
		c.add(name, pass, "event %d, role user, text %q (injection took %.0f ms)", e.Cursor, text, ms(injected))
	}

	ir := c.s.Session.InitializeResult()
	if ir.Capabilities == nil || ir.Capabilities.Experimental["claude/channel"] == nil {
		c.add(notifName, skip, "server does not announce experimental claude/channel")
		return
	}
	// The notification may trail the result a little; it is read from
	// the raw stdout record, since go-sdk ignores unknown notifications.
	deadline := time.Now().Add(c.o.WaitTimeout)
	for {
		if n, ok := findChannelNotification(c.s.Raw.Lines(), text); ok {
			c.add(notifName, pass, "%s", clip(n, 300))
			return
		}
		if time.Now().After(deadline) || c.ctx.Err() != nil {
			c.add(notifName, fail, "no notifications/claude/channel with content %q within %v", text, c.o.WaitTimeout)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// findChannelNotification returns the first server line that is a
// notifications/claude/channel whose content is text and whose meta carries
// the seeded imessage route.
func findChannelNotification(lines []e2e.Line, text string) (string, bool) {
	for _, l := range lines {
		if l.Out || !strings.Contains(l.Text, "notifications/claude/channel") {
			continue
		}
		var m struct {
			Method string
			Params struct {
				Content string
				Meta    map[string]string
			}
		}
		if json.Unmarshal([]byte(l.Text), &m) != nil || m.Method != "notifications/claude/channel" {
			continue
		}
		if m.Params.Content == text && m.Params.Meta["session_key"] == seededMainKey &&
			m.Params.Meta["channel"] == "imessage" && m.Params.Meta["to"] == "+15551234567" {
			return l.Text, true
		}
	}
	return "", false
}

type approval struct {
	Kind        string `json:"kind"`
	ID          string `json:"id"`
	CreatedAtMs *int64 `json:"createdAtMs"`
	ExpiresAtMs *int64 `json:"expiresAtMs"`
}

func (c *checker) approvals() {
	names := []string{
		"approvals from our device identity are seen by permissions_list_open",
		"events_poll shows exec_approval_requested and plugin_approval_requested",
		"permissions_respond resolves the exec approval (deny)",
		"permissions_respond resolves the plugin approval (allow-once)",
		"the requester receives the decisions",
		"permissions_list_open is empty after resolution",
	}
	if c.o.Approve == nil {
		for _, n := range names {
			c.add(n, skip, "no approver configured")
		}
		return
	}
	after, err := c.cursor()
	if err != nil {
		c.add(names[0], fail, "reading the queue cursor: %v", err)
		return
	}
	type apprRes struct {
		out json.RawMessage
		err error
	}
	ch := make(chan apprRes, 1)
	actx, cancelApprover := context.WithTimeout(c.ctx, 2*c.o.WaitTimeout+30*time.Second)
	defer cancelApprover()
	go func() { // owner: approvals; ends when the approver returns or actx ends
		out, err := c.o.Approve(actx)
		ch <- apprRes{out, err}
	}()
	// Wait until both approvals are listed.
	var exec, plugin *approval
	deadline := time.Now().Add(c.o.WaitTimeout)
	var last string
	for exec == nil || plugin == nil {
		select {
		case a := <-ch: // the approver gave up early
			c.add(names[0], fail, "approver ended before the bridge listed both approvals: err %v, output %s; last list %s", a.err, clip(string(a.out), 400), last)
			return
		default:
		}
		r, err := c.call("permissions_list_open", map[string]any{})
		if err != nil {
			c.add(names[0], fail, "permissions_list_open: %v", err)
			return
		}
		last = clip(jsonOf(r.StructuredContent), 300)
		var v struct{ Approvals []approval }
		if err := structured(r, &v); err == nil {
			for i := range v.Approvals {
				switch a := &v.Approvals[i]; {
				case a.Kind == "exec" && a.ID == c.o.ExecID:
					exec = a
				case a.Kind == "plugin" && strings.HasPrefix(a.ID, "plugin:"):
					plugin = a
				}
			}
		}
		if exec == nil || plugin == nil {
			if time.Now().After(deadline) || c.ctx.Err() != nil {
				c.add(names[0], fail, "after %v: exec %s seen %v, plugin seen %v; last list %s", c.o.WaitTimeout, c.o.ExecID, exec != nil, plugin != nil, last)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if exec.CreatedAtMs == nil || exec.ExpiresAtMs == nil {
		c.add(names[0], fail, "exec approval lacks createdAtMs/expiresAtMs: %+v", *exec)
	} else {
		c.add(names[0], pass, "exec %s, plugin %s", exec.ID, plugin.ID)
	}

	// The requested events are in the queue after the cursor taken above.
	r, err := c.call("events_poll", map[string]any{"after_cursor": after, "limit": 200})
	if err != nil {
		c.add(names[1], fail, "events_poll: %v", err)
	} else {
		var v struct{ Events []event }
		structured(r, &v)
		seen := map[string]bool{}
		for _, e := range v.Events {
			seen[e.Type] = true
		}
		if seen["exec_approval_requested"] && seen["plugin_approval_requested"] {
			c.add(names[1], pass, "%d events after cursor %d", len(v.Events), after)
		} else {
			c.add(names[1], fail, "event types %v after cursor %d", keysOf(seen), after)
		}
	}

	for i, d := range []struct {
		a        *approval
		decision string
	}{{exec, "deny"}, {plugin, "allow-once"}} {
		name := names[2+i]
		r, err := c.call("permissions_respond", map[string]any{"kind": d.a.Kind, "id": d.a.ID, "decision": d.decision})
		if err != nil {
			c.add(name, fail, "%v", err)
			continue
		}
		var v struct{ Result struct{ OK bool } }
		structured(r, &v)
		if r.IsError || resultText(r) != "approval resolved" || !v.Result.OK {
			c.add(name, fail, "result %s, want text \"approval resolved\" and {result:{ok:true}}", clip(jsonOf(r), 300))
			continue
		}
		c.add(name, pass, "%s %s", d.a.ID, d.decision)
	}

	a := <-ch
	var out struct {
		ExecFinal, PluginFinal *struct {
			ID       string
			Decision *string
		}
	}
	if a.err != nil {
		c.add(names[4], fail, "approver: %v; output %s", a.err, clip(string(a.out), 400))
	} else if err := json.Unmarshal(a.out, &out); err != nil || out.ExecFinal == nil || out.PluginFinal == nil {
		c.add(names[4], fail, "approver output %s", clip(string(a.out), 400))
	} else if dec := func(p *string) string {
		if p == nil {
			return "null"
		}
		return *p
	}; dec(out.ExecFinal.Decision) != "deny" || dec(out.PluginFinal.Decision) != "allow-once" {
		c.add(names[4], fail, "exec decision %s, plugin decision %s; want deny, allow-once", dec(out.ExecFinal.Decision), dec(out.PluginFinal.Decision))
	} else {
		c.add(names[4], pass, "exec deny, plugin allow-once")
	}

	// The *_resolved events remove the entries; they may trail the
	// permissions_respond results a little.
	deadline = time.Now().Add(c.o.WaitTimeout)
	for {
		r, err := c.call("permissions_list_open", map[string]any{})
		if err != nil {
			c.add(names[5], fail, "%v", err)
			return
		}
		if resultText(r) == "approvals: 0" {
			c.add(names[5], pass, "approvals: 0")
			return
		}
		if time.Now().After(deadline) || c.ctx.Err() != nil {
			c.add(names[5], fail, "still %s", clip(jsonOf(r.StructuredContent), 300))
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func wantPrefix(r *mcp.CallToolResult, isError bool, prefix string) error {
	if r.IsError != isError {
		return fmt.Errorf("isError %v, want %v (text %q)", r.IsError, isError, clip(resultText(r), 200))
	}
	if t := resultText(r); !strings.HasPrefix(t, prefix) {
		return fmt.Errorf("text %q, want it to start with %q", clip(t, 200), prefix)
	}
	if !isError && r.StructuredContent == nil {
		return fmt.Errorf("no structuredContent")
	}
	return nil
}

// messageID is entry.id, else entry.__openclaw.id (docs/protocol-facts.md, Gateway RPCs).
func messageID(m json.RawMessage) string {
	var v struct {
		ID string `json:"id"`
		OC struct {
			ID string `json:"id"`
		} `json:"__openclaw"`
	}
	json.Unmarshal(m, &v)
	if v.ID != "" {
		return v.ID
	}
	return v.OC.ID
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
