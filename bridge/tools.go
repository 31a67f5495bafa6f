package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/openclaw-go/openclaw/internal/jsonw"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/policies"
)

// Tool names, in the order tools/list returns them (docs/protocol-facts.md, The nine tools).
const (
	ToolConversationsList   = "conversations_list"
	ToolConversationGet     = "conversation_get"
	ToolMessagesRead        = "messages_read"
	ToolAttachmentsFetch    = "attachments_fetch"
	ToolEventsPoll          = "events_poll"
	ToolEventsWait          = "events_wait"
	ToolMessagesSend        = "messages_send"
	ToolPermissionsListOpen = "permissions_list_open"
	ToolPermissionsRespond  = "permissions_respond"
)

// Argument defaults and maxima of the tools (docs/protocol-facts.md, The nine tools).
const (
	DefaultConversationsLimit = 50
	DefaultMessagesLimit      = 20
	DefaultAttachmentsLimit   = 100
	DefaultEventsLimit        = 20
	DefaultWaitTimeout        = 30 * time.Second
	MaxCursor                 = 1<<53 - 1 // Number.MAX_SAFE_INTEGER
)

// toolSpec is one of the nine tools: its MCP definition, its argument
// schema and its implementation.
type toolSpec struct {
	name        string
	description string
	props       []prop
	required    []string
	run         func(b *Bridge, ctx context.Context, a *args) (*mcp.CallToolResult, error)
	// local: run answers from the bridge's own state, without a Gateway
	// request or a wait, so the local path (local.go) runs it on the
	// transport's reading goroutine; the other tools' calls it runs on a
	// goroutine of their own (transport.LocalAnswer.Later).
	local bool

	schema   json.RawMessage // draft-07 input schema, OpenClaw's key order
	listJSON []byte          // the tools/list entry: name, description, inputSchema, execution
}

func str(name string, minLength int) prop {
	return prop{name: name, typ: typeString, minLength: minLength}
}
func integer(name string, lo, hi int64) prop {
	return prop{name: name, typ: typeInteger, hasMin: true, min: lo, hasMax: true, max: hi}
}
func boolean(name string) prop              { return prop{name: name, typ: typeBoolean} }
func enum(name string, vals ...string) prop { return prop{name: name, typ: typeString, enum: vals} }

// toolSpecs are the nine tools in tools/list order.
var toolSpecs = []toolSpec{
	{
		name:        ToolConversationsList,
		description: "List the OpenClaw conversations that have a reply route, optionally filtered by search text or channel.",
		props: []prop{integer("limit", 1, 500), str("search", 0), str("channel", 0),
			boolean("includeDerivedTitles"), boolean("includeLastMessage")},
		run: (*Bridge).conversationsList,
	},
	{
		name:        ToolConversationGet,
		description: "Get one OpenClaw conversation and its reply route by session key.",
		props:       []prop{str("session_key", 1)},
		required:    []string{"session_key"},
		run:         (*Bridge).conversationGet,
	},
	{
		name:        ToolMessagesRead,
		description: "Read the recent transcript messages of an OpenClaw conversation.",
		props:       []prop{str("session_key", 1), integer("limit", 1, 200)},
		required:    []string{"session_key"},
		run:         (*Bridge).messagesRead,
	},
	{
		name:        ToolAttachmentsFetch,
		description: "Fetch the non-text parts (images, files, media) of one message in an OpenClaw conversation.",
		props:       []prop{str("session_key", 1), str("message_id", 1), integer("limit", 1, 200)},
		required:    []string{"session_key", "message_id"},
		run:         (*Bridge).attachmentsFetch,
	},
	{
		name:        ToolEventsPoll,
		description: "Return queued OpenClaw bridge events newer than a cursor without waiting.",
		props:       []prop{integer("after_cursor", 0, MaxCursor), str("session_key", 0), integer("limit", 1, 200)},
		run:         (*Bridge).eventsPoll,
		local:       true,
	},
	{
		name:        ToolEventsWait,
		description: "Wait until the next OpenClaw bridge event newer than a cursor arrives, or the timeout passes.",
		props:       []prop{integer("after_cursor", 0, MaxCursor), str("session_key", 0), integer("timeout_ms", 1, 300000)},
		run:         (*Bridge).eventsWait,
	},
	{
		name:        ToolMessagesSend,
		description: "Send a text reply through the OpenClaw conversation's own channel route.",
		props:       []prop{str("session_key", 1), str("text", 1)},
		required:    []string{"session_key", "text"},
		run:         (*Bridge).messagesSend,
	},
	{
		name:        ToolPermissionsListOpen,
		description: "List the OpenClaw exec and plugin approval requests this bridge has seen that are still open.",
		run:         (*Bridge).permissionsListOpen,
		local:       true,
	},
	{
		name:        ToolPermissionsRespond,
		description: "Resolve an OpenClaw exec or plugin approval request with allow-once, allow-always or deny.",
		props: []prop{enum("kind", "exec", "plugin"), str("id", 1),
			enum("decision", "allow-once", "allow-always", "deny")},
		required: []string{"kind", "id", "decision"},
		run:      (*Bridge).permissionsRespond,
	},
}

func init() {
	for i := range toolSpecs {
		t := &toolSpecs[i]
		o := jsonw.NewObject(nil)
		o.Str("$schema", "http://json-schema.org/draft-07/schema#")
		o.Str("type", "object")
		o.Key("properties")
		props := jsonw.NewObject(o.Buf)
		for j := range t.props {
			props.Key(t.props[j].name)
			props.Buf = t.props[j].schemaJSON(props.Buf)
		}
		o.Buf = props.Close()
		if len(t.required) > 0 {
			o.Key("required")
			o.Buf = append(o.Buf, '[')
			for j, r := range t.required {
				if j > 0 {
					o.Buf = append(o.Buf, ',')
				}
				o.Buf = jsonw.AppendString(o.Buf, r)
			}
			o.Buf = append(o.Buf, ']')
		}
		t.schema = o.Close()

		l := jsonw.NewObject(nil)
		l.Str("name", t.name)
		l.Str("description", t.description)
		l.Raw("inputSchema", t.schema)
		l.Raw("execution", []byte(`{"taskSupport":"forbidden"}`))
		t.listJSON = l.Close()
	}
}

func toolByName(name string) *toolSpec {
	for i := range toolSpecs {
		if toolSpecs[i].name == name {
			return &toolSpecs[i]
		}
	}
	return nil
}

// ToolNames returns the names of the nine tools in tools/list order.
func ToolNames() []string {
	out := make([]string, len(toolSpecs))
	for i := range toolSpecs {
		out[i] = toolSpecs[i].name
	}
	return out
}

// errorResult is a tool failure as OpenClaw reports it: one text block and
// isError, no structuredContent.
func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: true}
}

// okResult is a success: a text summary and the structured content.
func okResult(text string, structured []byte) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: json.RawMessage(structured),
	}
}

func validationError(tool, msg string) *mcp.CallToolResult {
	return errorResult(fmt.Sprintf("MCP error -32602: Input validation error: Invalid arguments for tool %s: %s", tool, msg))
}

// callTool is the hook boundary of a tools/call go-sdk handles: validate,
// ask the policy, then run the tool with the arguments the policy allowed.
// A call the local path already decided (a require_approval it handed on)
// continues from its decision.
func (b *Bridge) callTool(ctx context.Context, req *mcp.CallToolRequest, spec *toolSpec) *mcp.CallToolResult {
	if dc := b.takeHandoff(req); dc != nil {
		return b.finishCall(ctx, req, spec, dc)
	}
	var caller policies.Caller
	if ci := req.ClientInfo(); ci != nil {
		caller = policies.Caller{Name: ci.Name, Version: ci.Version}
	}
	dc, res := b.decideCall(ctx, spec, req.Params.Arguments, caller, true)
	if res != nil {
		return res
	}
	return b.finishCall(ctx, req, spec, dc)
}

// decidedCall is a tools/call past the policy: its validated arguments,
// the call the policy was asked about and its decision (allow or
// require_approval).
type decidedCall struct {
	a    *args
	call *policies.ToolCall
	d    policies.Outcome
}

// decideCall validates the arguments raw of a call of spec by caller,
// canonicalizes them and asks the policy. It returns the call's answer when
// it ends there (invalid arguments, no policy, a block), else the decided
// call. With mayWait false it returns neither when deciding needs the
// Gateway (a session_key alias to resolve), and the policy is not asked.
func (b *Bridge) decideCall(ctx context.Context, spec *toolSpec, raw json.RawMessage, caller policies.Caller, mayWait bool) (*decidedCall, *mcp.CallToolResult) {
	a, msg := validateArgs(raw, spec.props, spec.required)
	if a == nil {
		return nil, validationError(spec.name, msg)
	}
	if b.policy == nil {
		return nil, errorResult("blocked: no policy is configured for the bridge, so no tool runs")
	}
	canonicalizeArgs(spec.name, a)
	if sessionKeyTools[spec.name] {
		if key, _ := a.str("session_key"); !mayWait && key != "" && !scopedSessionKey(key) {
			return nil, nil
		}
		if err := b.resolveSessionAlias(ctx, a); err != nil {
			return nil, errorResult(err.Error())
		}
	}
	call := &policies.ToolCall{
		Surface:   policies.SurfaceServe,
		Tool:      policies.ToolRef{Name: spec.name},
		Arguments: a.JSON(),
		Caller:    caller,
	}
	call.SessionKey, _ = a.str("session_key")
	d := b.policy.BeforeToolCall(ctx, call)
	switch d.Decision {
	case policies.Allow, policies.RequireApproval:
		return &decidedCall{a: a, call: call, d: d}, nil
	case policies.Block:
		return nil, errorResult(d.Message())
	default:
		return nil, errorResult(fmt.Sprintf("blocked: policy returned the unknown outcome %q", d.Decision))
	}
}

// finishCall runs a decided call: the approval routing of a
// require_approval (which needs req, go-sdk's request), the check of
// rewritten arguments, the agent-approval check of permissions_respond,
// then the tool. req may be nil for an allowed call (the local path).
func (b *Bridge) finishCall(ctx context.Context, req *mcp.CallToolRequest, spec *toolSpec, dc *decidedCall) *mcp.CallToolResult {
	a, call, d := dc.a, dc.call, &dc.d
	if d.Decision == policies.RequireApproval {
		if res := b.approve(ctx, req, call, d); res != nil {
			return res
		}
	}
	if len(d.Arguments) > 0 && string(d.Arguments) != string(call.Arguments) {
		seen := a
		var msg string
		if a, msg = validateArgs(d.Arguments, spec.props, spec.required); a == nil {
			reason := fmt.Sprintf("%s rewrote the arguments of %s into invalid ones: %s", rewriter(d), spec.name, msg)
			b.recordRewrite(call, call.SessionKey, string(policies.Block), reason)
			return errorResult("blocked: " + reason)
		}
		canonicalizeArgs(spec.name, a)
		if changed := changedArgs(spec.props, seen, a); len(changed) > 0 {
			key, _ := a.str("session_key")
			b.recordRewrite(call, key, AuditDecisionRewrite, fmt.Sprintf("%s rewrote %s; the call was sent with the rewritten values",
				rewriter(d), strings.Join(changed, ", ")))
		}
	}
	if spec.name == ToolPermissionsRespond {
		if res := b.checkAgentApproval(ctx, b.callSession(req), call, a); res != nil {
			return res
		}
	}
	if b.limiter != nil {
		release, err := b.limiter.Acquire(ctx, call)
		if err != nil {
			return errorResult(err.Error()) // a *policies.LimitError, audited by the limiter
		}
		defer release()
	}
	res, err := spec.run(b, ctx, a)
	if err != nil {
		return errorResult(err.Error())
	}
	return res
}

// callSession is the go-sdk session a call comes from: req's, or for a
// call of the local path (req nil) the session go-sdk serves on the
// bridge's connection, nil while go-sdk has handled none of its requests
// (such a session raised no approval).
func (b *Bridge) callSession(req *mcp.CallToolRequest) *mcp.ServerSession {
	if req != nil {
		return req.Session
	}
	if c := b.conn.Load(); c != nil {
		return c.session.Load()
	}
	return nil
}

// AuditRewrite is the module of the before_tool_call audit record the
// bridge writes when the arguments it sends differ from the ones the
// policy was asked about (a module rewrote them): the record's session_key
// is the one sent, its decision [AuditDecisionRewrite] (or "block" when
// the rewrite was invalid), its reason names the rewritten arguments.
// Argument values are not logged, as in every audit record.
const AuditRewrite = "bridge:rewrite"

// AuditDecisionRewrite is the decision of an [AuditRewrite] record for a
// call that went out with rewritten arguments.
const AuditDecisionRewrite = "rewrite"

// rewriter names who rewrote a call's arguments in a message: the
// decision's module when an allow names one (an enforcer that reports the
// module it ran). policies.Chain names the module of a block or an
// approval only, not the one whose rewrite a decision carries (each
// rewrite passes to the next module), so otherwise the message says "a
// before_tool_call module" and the chain's audit records list the modules
// that ran.
func rewriter(d *policies.Outcome) string {
	if d.RewrittenBy != "" {
		return fmt.Sprintf("policy %q", d.RewrittenBy)
	}
	if d.Module != "" && d.Decision == policies.Allow {
		return fmt.Sprintf("policy %q", d.Module)
	}
	return "a before_tool_call module"
}

// changedArgs lists, in schema order, the arguments whose value differs
// between what the policy saw and what is sent.
func changedArgs(props []prop, seen, sent *args) []string {
	var out []string
	for i := range props {
		n := props[i].name
		v1, ok1 := seen.values[n]
		v2, ok2 := sent.values[n]
		if ok1 != ok2 || string(v1) != string(v2) {
			out = append(out, n)
		}
	}
	return out
}

// recordRewrite writes the [AuditRewrite] record of call.
func (b *Bridge) recordRewrite(call *policies.ToolCall, sessionKey, decision, reason string) {
	if b.routing.audit == nil {
		return
	}
	now := b.routing.now()
	b.routing.audit.Record(policies.AuditRecord{Time: now.UTC(), Hook: policies.HookBeforeToolCall, Surface: call.Surface,
		SessionKey: sessionKey, Caller: call.Caller.Name, Tool: call.Tool.Name, Server: call.Tool.Server,
		Module: AuditRewrite, Mode: policies.Enforce, Decision: decision, Reason: reason})
}

// agentIDRE is OpenClaw's valid agent id (src/routing/session-key.ts
// VALID_ID_RE), lowercase as in a canonical key.
var agentIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// scopedSessionKey reports whether a canonical session key names its
// conversation by itself: "agent:<valid agent id>:<rest>" without an empty
// segment. Any other key ("main", "tg-dm", "agent::main:x", "global") is
// an alias the Gateway resolves with its configuration (the default
// agent, session.mainKey, its compatibility owners: OpenClaw
// src/gateway/session-store-key.ts resolveSessionStoreKey), which the
// bridge does not know.
func scopedSessionKey(key string) bool {
	parts := strings.Split(key, ":")
	if len(parts) < 3 || parts[0] != "agent" || !agentIDRE.MatchString(parts[1]) {
		return false
	}
	for _, p := range parts[2:] {
		if p == "" {
			return false
		}
	}
	return true
}

// resolveSessionAlias replaces a session_key that is an alias (see
// [scopedSessionKey]) by the key of the session the Gateway resolves it to,
// with sessions.describe, so that the policy judges the conversation the
// tool will reach ("main" is "agent:main:main", "tg-dm" may be
// "agent:main:tg-dm"). A key the Gateway resolves to no session stays as
// it is: the tool finds nothing either. A Gateway error fails the call.
// Canonical agent-scoped keys, the ones conversations_list returns, cost
// no request.
func (b *Bridge) resolveSessionAlias(ctx context.Context, a *args) error {
	key, ok := a.str("session_key")
	if !ok || key == "" || scopedSessionKey(key) {
		return nil
	}
	p := jsonw.NewObject(nil)
	p.Str("key", key)
	payload, err := b.request(ctx, "sessions.describe", p.Close())
	if err != nil {
		return fmt.Errorf("resolving session key %q: %w", key, err)
	}
	var res struct {
		Session struct {
			Key json.RawMessage `json:"key"`
		} `json:"session"`
	}
	if err := json.Unmarshal(payload, &res); err != nil {
		return fmt.Errorf("resolving session key %q: sessions.describe: decoding result: %w", key, err)
	}
	if k, ok := nonEmptyString(res.Session.Key); ok {
		a.values["session_key"] = jsonw.AppendString(nil, canonicalSessionKey(k))
	}
	return nil
}

// request calls the Gateway with params already encoded in OpenClaw's key
// order.
func (b *Bridge) request(ctx context.Context, method string, params []byte) (json.RawMessage, error) {
	return b.gw.Request(ctx, method, json.RawMessage(params))
}

func (b *Bridge) conversationsList(ctx context.Context, a *args) (*mcp.CallToolResult, error) {
	p := jsonw.NewObject(nil)
	p.Int("limit", a.integer("limit", DefaultConversationsLimit))
	if s, ok := a.str("search"); ok {
		p.Str("search", s)
	}
	p.Bool("includeDerivedTitles", a.boolean("includeDerivedTitles", true))
	p.Bool("includeLastMessage", a.boolean("includeLastMessage", true))
	payload, err := b.request(ctx, "sessions.list", p.Close())
	if err != nil {
		return nil, err
	}
	rows, err := sessionRows(payload)
	if err != nil {
		return nil, err
	}
	channel, _ := a.str("channel") // canonical: trimmed and lowercased
	buf := []byte(`{"conversations":[`)
	n := 0
	for _, row := range rows {
		c, ok := conversationFromRow(row)
		if !ok || (channel != "" && c.Channel != channel) {
			continue
		}
		if n > 0 {
			buf = append(buf, ',')
		}
		buf = c.appendJSON(buf)
		n++
	}
	buf = append(buf, ']', '}')
	return okResult(fmt.Sprintf("conversations: %d\n\n%s", n, pretty(buf)), buf), nil
}

// sessionRows returns the rows of a sessions.list payload: its "sessions"
// array, nil when absent or null. The skipping scanner reads it when it can
// be sure to agree with encoding/json (see [scanFields]); otherwise, and for
// any payload it cannot read, encoding/json decides and reports the error.
func sessionRows(payload json.RawMessage) ([]json.RawMessage, error) {
	var rows []json.RawMessage
	var list []byte
	if scanFields(payload, sessionsKey, func(_ int, v []byte) bool { list = v; return true }) {
		switch kindOf(list) {
		case kindNone, kindNull:
			return nil, nil
		case kindArray:
			if jsonw.Elements(list, func(e []byte) { rows = append(rows, e) }) == nil {
				return rows, nil
			}
		}
	}
	var res struct {
		Sessions []json.RawMessage `json:"sessions"`
	}
	if err := json.Unmarshal(payload, &res); err != nil {
		return nil, fmt.Errorf("sessions.list: decoding result: %w", err)
	}
	return res.Sessions, nil
}

var sessionsKey = []string{"sessions"}

// resolveConversation looks a session key up with sessions.describe; nil
// means not found or without a route. The key is trimmed first, and an
// empty key is not looked up.
func (b *Bridge) resolveConversation(ctx context.Context, key string) (*Conversation, error) {
	key = strings.TrimSpace(key)
	if key == "" {
		return nil, nil
	}
	p := jsonw.NewObject(nil)
	p.Str("key", key)
	p.Bool("includeDerivedTitles", true)
	p.Bool("includeLastMessage", true)
	payload, err := b.request(ctx, "sessions.describe", p.Close())
	if err != nil {
		return nil, err
	}
	var res struct {
		Session json.RawMessage `json:"session"`
	}
	if err := json.Unmarshal(payload, &res); err != nil {
		return nil, fmt.Errorf("sessions.describe: decoding result: %w", err)
	}
	c, ok := conversationFromRow(res.Session)
	if !ok {
		return nil, nil
	}
	return c, nil
}

func (b *Bridge) conversationGet(ctx context.Context, a *args) (*mcp.CallToolResult, error) {
	key, _ := a.str("session_key")
	c, err := b.resolveConversation(ctx, key)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("conversation not found: %s", key)
	}
	o := jsonw.NewObject(nil)
	o.Key("conversation")
	o.Buf = c.appendJSON(o.Buf)
	return okResult("conversation "+c.SessionKey, o.Close()), nil
}

// sessionMessages calls sessions.get and returns the messages array.
func (b *Bridge) sessionMessages(ctx context.Context, key string, limit int64) ([]json.RawMessage, error) {
	p := jsonw.NewObject(nil)
	p.Str("key", key)
	p.Int("limit", limit)
	payload, err := b.request(ctx, "sessions.get", p.Close())
	if err != nil {
		return nil, err
	}
	var res struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(payload, &res); err != nil {
		return nil, fmt.Errorf("sessions.get: decoding result: %w", err)
	}
	var msgs []json.RawMessage
	if kindOf(res.Messages) == kindArray {
		if err := json.Unmarshal(res.Messages, &msgs); err != nil {
			return nil, fmt.Errorf("sessions.get: decoding messages: %w", err)
		}
	}
	return msgs, nil
}

func appendArray(buf []byte, items []json.RawMessage) []byte {
	buf = append(buf, '[')
	for i, it := range items {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, jsonw.Compact(it)...)
	}
	return append(buf, ']')
}

func (b *Bridge) messagesRead(ctx context.Context, a *args) (*mcp.CallToolResult, error) {
	key, _ := a.str("session_key")
	msgs, err := b.sessionMessages(ctx, key, a.integer("limit", DefaultMessagesLimit))
	if err != nil {
		return nil, err
	}
	o := jsonw.NewObject(nil)
	o.Key("messages")
	o.Buf = appendArray(o.Buf, msgs)
	buf := o.Close()
	return okResult(fmt.Sprintf("messages: %d\n\n%s", len(msgs), pretty(buf)), buf), nil
}

// messageID returns a transcript entry's id: entry.id, else
// entry.__openclaw.id.
func messageID(entry json.RawMessage) string {
	var m struct {
		ID       json.RawMessage `json:"id"`
		OpenClaw struct {
			ID json.RawMessage `json:"id"`
		} `json:"__openclaw"`
	}
	if kindOf(entry) != kindObject || json.Unmarshal(entry, &m) != nil {
		return ""
	}
	if id, ok := rawString(m.ID); ok {
		return id
	}
	id, _ := rawString(m.OpenClaw.ID)
	return id
}

// findMessage looks one message up: chat.message.get when the Gateway has
// it, else a scan of sessions.get (docs/protocol-facts.md, Gateway RPCs, lookup fallback). nil means not
// found.
func (b *Bridge) findMessage(ctx context.Context, key, id string, limit int64) (json.RawMessage, error) {
	if b.gw.HasMethod("chat.message.get") {
		p := jsonw.NewObject(nil)
		p.Str("sessionKey", key)
		p.Str("messageId", id)
		payload, err := b.request(ctx, "chat.message.get", p.Close())
		if err != nil {
			return nil, err
		}
		var res struct {
			OK      bool            `json:"ok"`
			Message json.RawMessage `json:"message"`
		}
		if err := json.Unmarshal(payload, &res); err != nil {
			return nil, fmt.Errorf("chat.message.get: decoding result: %w", err)
		}
		if !res.OK || kindOf(res.Message) != kindObject {
			return nil, nil
		}
		return jsonw.Compact(res.Message), nil
	}
	msgs, err := b.sessionMessages(ctx, key, limit)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if messageID(m) == id {
			return jsonw.Compact(m), nil
		}
	}
	return nil, nil
}

// mediaFact is one entry of message.__openclaw.media.
type mediaFact struct {
	Path                json.RawMessage `json:"path"`
	URL                 json.RawMessage `json:"url"`
	ContentType         json.RawMessage `json:"contentType"`
	Kind                json.RawMessage `json:"kind"`
	FileName            json.RawMessage `json:"fileName"`
	Origin              json.RawMessage `json:"origin"`
	SizeBytes           json.RawMessage `json:"sizeBytes"`
	DurationMs          json.RawMessage `json:"durationMs"`
	Width               json.RawMessage `json:"width"`
	Height              json.RawMessage `json:"height"`
	Transcribed         json.RawMessage `json:"transcribed"`
	MessageID           json.RawMessage `json:"messageId"`
	WorkspaceDir        json.RawMessage `json:"workspaceDir"`
	Staged              json.RawMessage `json:"staged"`
	HydrationSuppressed json.RawMessage `json:"hydrationSuppressed"`
}

// appendMedia writes an openclaw_media attachment for a meaningful media
// fact (one with a path, a url, a contentType or a kind other than
// "unknown") and reports whether it did.
func appendMedia(buf []byte, raw json.RawMessage) ([]byte, bool) {
	var f mediaFact
	if kindOf(raw) != kindObject || json.Unmarshal(raw, &f) != nil {
		return buf, false
	}
	kind, hasKind := nonEmptyString(f.Kind)
	_, hasPath := nonEmptyString(f.Path)
	_, hasURL := nonEmptyString(f.URL)
	_, hasType := nonEmptyString(f.ContentType)
	if !hasPath && !hasURL && !hasType && (!hasKind || kind == "unknown") {
		return buf, false
	}
	o := jsonw.NewObject(buf)
	o.Str("type", "openclaw_media")
	o.Key("media")
	m := jsonw.NewObject(o.Buf)
	field := func(k string, v json.RawMessage, want jsonKind) {
		if kindOf(v) == want {
			m.Raw(k, jsonw.Compact(v))
		}
	}
	field("path", f.Path, kindString)
	field("url", f.URL, kindString)
	field("contentType", f.ContentType, kindString)
	field("kind", f.Kind, kindString)
	field("fileName", f.FileName, kindString)
	field("origin", f.Origin, kindString)
	field("sizeBytes", f.SizeBytes, kindNumber)
	field("durationMs", f.DurationMs, kindNumber)
	field("width", f.Width, kindNumber)
	field("height", f.Height, kindNumber)
	m.Bool("transcribed", string(f.Transcribed) == "true")
	field("messageId", f.MessageID, kindString)
	field("workspaceDir", f.WorkspaceDir, kindString)
	field("staged", f.Staged, kindBool)
	field("hydrationSuppressed", f.HydrationSuppressed, kindBool)
	o.Buf = m.Close()
	return o.Close(), true
}

func (b *Bridge) attachmentsFetch(ctx context.Context, a *args) (*mcp.CallToolResult, error) {
	key, _ := a.str("session_key")
	id, _ := a.str("message_id")
	msg, err := b.findMessage(ctx, key, id, a.integer("limit", DefaultAttachmentsLimit))
	if err != nil {
		return nil, err
	}
	if msg == nil {
		return nil, fmt.Errorf("message not found: %s", id)
	}
	var m struct {
		Content  json.RawMessage `json:"content"`
		OpenClaw struct {
			Media json.RawMessage `json:"media"`
		} `json:"__openclaw"`
	}
	_ = json.Unmarshal(msg, &m)
	buf := []byte(`{"attachments":[`)
	n := 0
	sep := func() {
		if n > 0 {
			buf = append(buf, ',')
		}
	}
	if kindOf(m.Content) == kindArray {
		var blocks []json.RawMessage
		_ = json.Unmarshal(m.Content, &blocks)
		for _, blk := range blocks {
			var t struct {
				Type json.RawMessage `json:"type"`
			}
			_ = json.Unmarshal(blk, &t)
			if s, _ := rawString(t.Type); s == "text" {
				continue
			}
			sep()
			buf = append(buf, jsonw.Compact(blk)...)
			n++
		}
	}
	if kindOf(m.OpenClaw.Media) == kindArray {
		var media []json.RawMessage
		_ = json.Unmarshal(m.OpenClaw.Media, &media)
		for _, f := range media {
			if item, ok := appendMedia(nil, f); ok {
				sep()
				buf = append(buf, item...)
				n++
			}
		}
	}
	buf = append(buf, `],"message":`...)
	buf = append(buf, msg...)
	buf = append(buf, '}')
	return okResult(fmt.Sprintf("attachments: %d", n), buf), nil
}

func (b *Bridge) eventsPoll(_ context.Context, a *args) (*mcp.CallToolResult, error) {
	session, _ := a.str("session_key")
	events, next, gap := b.queue.poll(a.integer("after_cursor", 0), session, int(a.integer("limit", DefaultEventsLimit)))
	size := 128
	for i := range events {
		size += len(events[i].body) + 32
	}
	buf := append(make([]byte, 0, size), `{"events":[`...)
	for i := range events {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = events[i].appendJSON(buf)
	}
	buf = append(buf, `],"next_cursor":`...)
	buf = strconv.AppendInt(buf, next, 10)
	if gap != nil {
		buf = append(buf, `,"gap":`...)
		buf = gap.appendJSON(buf)
	}
	buf = append(buf, '}')
	return okResult(fmt.Sprintf("events: %d", len(events)), buf), nil
}

func (b *Bridge) eventsWait(ctx context.Context, a *args) (*mcp.CallToolResult, error) {
	session, _ := a.str("session_key")
	timeout := time.Duration(a.integer("timeout_ms", DefaultWaitTimeout.Milliseconds())) * time.Millisecond
	r := b.queue.wait(ctx, a.integer("after_cursor", 0), session, timeout)
	buf := []byte(`{"event":`)
	var text string
	switch {
	case r.event != nil:
		buf = r.event.appendJSON(buf)
		text = "event " + strconv.FormatInt(r.event.cursor, 10)
	case r.gap != nil:
		buf = append(buf, "null"...)
		text = "event gap before " + strconv.FormatInt(r.gap.oldestAvailable, 10)
	default:
		buf = append(buf, "null"...)
		text = "timeout"
	}
	if r.gap != nil {
		buf = append(buf, `,"gap":`...)
		buf = r.gap.appendJSON(buf)
	}
	buf = append(buf, '}')
	return okResult(text, buf), nil
}

func (b *Bridge) messagesSend(ctx context.Context, a *args) (*mcp.CallToolResult, error) {
	key, _ := a.str("session_key")
	text, _ := a.str("text")
	c, err := b.resolveConversation(ctx, key)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("Conversation not found for session %s", key)
	}
	idem, err := newID()
	if err != nil {
		return nil, fmt.Errorf("generating idempotency key: %w", err)
	}
	p := jsonw.NewObject(nil)
	p.Str("to", c.To)
	p.Str("channel", c.Channel)
	if c.AccountID != "" {
		p.Str("accountId", c.AccountID)
	}
	if len(c.ThreadID) > 0 {
		p.Str("threadId", threadIDString(c.ThreadID))
	}
	p.Str("message", text)
	p.Str("sessionKey", c.SessionKey)
	p.Str("idempotencyKey", idem)
	payload, err := b.request(ctx, "send", p.Close())
	if err != nil {
		return nil, err
	}
	return okResult("sent", resultEnvelope(payload)), nil
}

// resultEnvelope wraps a Gateway payload as {"result":payload}.
func resultEnvelope(payload json.RawMessage) []byte {
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	o := jsonw.NewObject(nil)
	o.Raw("result", jsonw.Compact(payload))
	return o.Close()
}

func (b *Bridge) permissionsListOpen(context.Context, *args) (*mcp.CallToolResult, error) {
	open := b.approvals.open()
	buf := []byte(`{"approvals":[`)
	for i, ap := range open {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = ap.appendJSON(buf)
	}
	buf = append(buf, ']', '}')
	return okResult(fmt.Sprintf("approvals: %d", len(open)), buf), nil
}

func (b *Bridge) permissionsRespond(ctx context.Context, a *args) (*mcp.CallToolResult, error) {
	kind, _ := a.str("kind")
	id, _ := a.str("id")
	decision, _ := a.str("decision")
	method := "exec.approval.resolve"
	if kind == "plugin" {
		method = "plugin.approval.resolve"
	}
	p := jsonw.NewObject(nil)
	p.Str("id", id)
	p.Str("decision", decision)
	payload, err := b.request(ctx, method, p.Close())
	if err != nil {
		return nil, err
	}
	return okResult("approval resolved", resultEnvelope(payload)), nil
}

// newID returns a random (version 4) UUID in canonical form, or the error
// of the system's random source.
func newID() (string, error) {
	u, err := uuid.NewRandom()
	if err != nil {
		return "", err
	}
	return u.String(), nil
}
