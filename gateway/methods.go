package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// handler answers one request. It returns the payload or an error shape;
// async handlers answer by themselves and return (nil, nil).
type handler struct {
	scope string
	async bool
	fn    func(c *conn, ctx context.Context, id string, params json.RawMessage) (any, *protocol.ErrorShape)
}

var methods map[string]handler

func init() {
	read, write, appr := protocol.ScopeOperatorRead, protocol.ScopeOperatorWrite, protocol.ScopeOperatorApproval
	methods = map[string]handler{
		"sessions.subscribe":      {scope: read, fn: (*conn).sessionsSubscribe},
		"sessions.unsubscribe":    {scope: read, fn: (*conn).sessionsUnsubscribe},
		"sessions.list":           {scope: read, fn: (*conn).sessionsList},
		"sessions.describe":       {scope: read, fn: (*conn).sessionsDescribe},
		"sessions.get":            {scope: read, fn: (*conn).sessionsGet},
		"chat.message.get":        {scope: read, fn: (*conn).chatMessageGet},
		"send":                    {scope: write, fn: (*conn).send_},
		"chat.send":               {scope: write, fn: (*conn).chatSend},
		"chat.inject":             {scope: write, fn: (*conn).chatInject},
		"exec.approval.request":   {scope: appr, async: true, fn: approvalRequest(kindExec)},
		"plugin.approval.request": {scope: appr, async: true, fn: approvalRequest(kindPlugin)},
		"exec.approval.resolve":   {scope: appr, fn: approvalResolve(kindExec)},
		"plugin.approval.resolve": {scope: appr, fn: approvalResolve(kindPlugin)},
	}
}

// methodNames is hello-ok features.methods: every method this Gateway serves.
func methodNames() []string {
	names := make([]string, 0, len(methods))
	for n := range methods {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// eventNames is hello-ok features.events.
var eventNames = []string{protocol.EventConnectChallenge, protocol.EventTick, "shutdown", protocol.EventSessionMessage,
	protocol.EventExecApprovalRequested, protocol.EventExecApprovalResolved,
	protocol.EventPluginApprovalRequested, protocol.EventPluginApprovalResolved}

// handleFrame handles one post-handshake frame and reports whether the
// connection stays open.
func (c *conn) handleFrame(ctx context.Context, data []byte) bool {
	f, err := protocol.Decode(data)
	if err != nil {
		// Answer when the frame names a request id; otherwise close.
		var probe struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		}
		if json.Unmarshal(data, &probe) == nil && probe.Type == protocol.TypeRequest && probe.ID != "" {
			c.respondErr(probe.ID, invalid("invalid request frame: "+strings.TrimPrefix(err.Error(), protocol.ErrMalformedFrame.Error()+": ")))
			return true
		}
		c.closeWith(protocol.ClosePolicyViolation, "invalid frame: "+strings.TrimPrefix(err.Error(), protocol.ErrMalformedFrame.Error()+": "))
		return false
	}
	if f.Type != protocol.TypeRequest {
		return true // clients have no reason to send res or event frames; ignore them
	}
	if f.Method == "connect" {
		c.respondErr(f.ID, invalid("already connected"))
		return true
	}
	h, ok := methods[f.Method]
	if !ok {
		c.respondErr(f.ID, invalid(fmt.Sprintf("unknown method: %s", f.Method)))
		return true
	}
	if !c.hasScope(h.scope) {
		c.respondErr(f.ID, invalid("missing scope: "+h.scope))
		return true
	}
	params := f.Params
	if len(bytes.TrimSpace(params)) == 0 || bytes.Equal(bytes.TrimSpace(params), []byte("null")) {
		params = json.RawMessage(`{}`)
	}
	if h.async {
		c.work.Add(1)
		go func() {
			defer c.work.Done()
			c.finish(ctx, f.ID, h, params)
		}()
		return true
	}
	c.finish(ctx, f.ID, h, params)
	return true
}

func (c *conn) finish(ctx context.Context, id string, h handler, params json.RawMessage) {
	payload, e := h.fn(c, ctx, id, params)
	switch {
	case e != nil:
		c.respondErr(id, e)
	case payload != nil:
		c.respond(id, payload)
	}
}

// decodeParams unmarshals params into v; a JSON type mismatch becomes an
// INVALID_REQUEST naming the method.
func decodeParams(method string, params json.RawMessage, v any) *protocol.ErrorShape {
	if err := json.Unmarshal(params, v); err != nil {
		return invalid(fmt.Sprintf("invalid %s params: %v", method, err))
	}
	return nil
}

func (c *conn) sessionsSubscribe(_ context.Context, _ string, _ json.RawMessage) (any, *protocol.ErrorShape) {
	c.subscribed.Store(true)
	return object{{"subscribed", true}}, nil
}

func (c *conn) sessionsUnsubscribe(_ context.Context, _ string, _ json.RawMessage) (any, *protocol.ErrorShape) {
	c.subscribed.Store(false)
	return object{{"subscribed", false}}, nil
}

// sessionsListParams are the params of sessions.list.
type sessionsListParams struct {
	Limit                *int   `json:"limit"`
	Offset               int    `json:"offset"`
	Search               string `json:"search"`
	AgentID              string `json:"agentId"`
	IncludeDerivedTitles bool   `json:"includeDerivedTitles"`
	IncludeLastMessage   bool   `json:"includeLastMessage"`
}

// Limits of sessions.list and sessions.get.
const (
	defaultListLimit = 50
	maxListLimit     = 1000
	defaultGetLimit  = 200
	maxGetLimit      = 1000
)

func (c *conn) sessionsList(_ context.Context, _ string, raw json.RawMessage) (any, *protocol.ErrorShape) {
	var p sessionsListParams
	if e := decodeParams("sessions.list", raw, &p); e != nil {
		return nil, e
	}
	limit := defaultListLimit
	if p.Limit != nil {
		if *p.Limit < 1 || *p.Limit > maxListLimit {
			return nil, invalid(fmt.Sprintf("invalid sessions.list params: limit must be between 1 and %d", maxListLimit))
		}
		limit = *p.Limit
	}
	if p.Offset < 0 {
		return nil, invalid("invalid sessions.list params: offset must be >= 0")
	}
	return c.srv.listSessions(p, limit), nil
}

func (s *Server) listSessions(p sessionsListParams, limit int) object {
	now := s.nowMs()
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	type entry struct {
		sess    *session
		updated int64
	}
	var all []entry
	needle := strings.ToLower(strings.TrimSpace(p.Search))
	for _, sess := range s.store.sessions {
		if p.AgentID != "" && sess.rec.AgentID != p.AgentID {
			continue
		}
		if needle != "" && !sess.matches(needle) {
			continue
		}
		all = append(all, entry{sess, sess.updatedAt()})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].updated != all[j].updated {
			return all[i].updated > all[j].updated
		}
		return all[i].sess.rec.Key < all[j].sess.rec.Key
	})
	total := len(all)
	start := min(p.Offset, total)
	end := min(start+limit, total)
	rows := make([]object, 0, end-start)
	opts := rowOptions{derivedTitle: p.IncludeDerivedTitles, lastMessage: p.IncludeLastMessage, now: now}
	for _, e := range all[start:end] {
		rows = append(rows, e.sess.row(rowList, opts))
	}
	var next any
	if end < total {
		next = end
	}
	path := ""
	if s.opts.StateDir != "" {
		path = s.store.dir + "/" + indexFile
	}
	return object{{"ts", now}, {"path", path}, {"count", len(rows)}, {"totalCount", total}, {"limitApplied", limit},
		{"nextOffset", next}, {"hasMore", end < total}, {"owners", []any{}}, {"defaults", listDefaults()}, {"sessions", rows}}
}

// matches is the sessions.list search: a case-insensitive substring of the
// key, label, display name, derived title or session id.
func (sess *session) matches(needle string) bool {
	for _, f := range []string{sess.rec.Key, sess.rec.Label, sess.rec.DisplayName, sess.rec.SessionID, sess.derivedTitle()} {
		if strings.Contains(strings.ToLower(f), needle) {
			return true
		}
	}
	return false
}

func (c *conn) sessionsDescribe(_ context.Context, _ string, raw json.RawMessage) (any, *protocol.ErrorShape) {
	var p struct {
		Key                  string `json:"key"`
		IncludeDerivedTitles bool   `json:"includeDerivedTitles"`
		IncludeLastMessage   bool   `json:"includeLastMessage"`
	}
	if e := decodeParams("sessions.describe", raw, &p); e != nil {
		return nil, e
	}
	if strings.TrimSpace(p.Key) == "" {
		return nil, invalid("invalid sessions.describe params: key is required")
	}
	s := c.srv
	now := s.nowMs()
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	sess, ok := s.store.sessions[p.Key]
	if !ok {
		return object{{"session", nil}}, nil
	}
	return object{{"session", sess.row(rowDescribe, rowOptions{derivedTitle: p.IncludeDerivedTitles, lastMessage: p.IncludeLastMessage, now: now})}}, nil
}

func (c *conn) sessionsGet(_ context.Context, _ string, raw json.RawMessage) (any, *protocol.ErrorShape) {
	var p struct {
		Key        string `json:"key"`
		SessionKey string `json:"sessionKey"`
		Limit      *int   `json:"limit"`
	}
	if e := decodeParams("sessions.get", raw, &p); e != nil {
		return nil, e
	}
	key := p.Key
	if key == "" {
		key = p.SessionKey
	}
	if strings.TrimSpace(key) == "" {
		return nil, invalid("invalid sessions.get params: key is required")
	}
	limit := defaultGetLimit
	if p.Limit != nil {
		if *p.Limit < 1 || *p.Limit > maxGetLimit {
			return nil, invalid(fmt.Sprintf("invalid sessions.get params: limit must be between 1 and %d", maxGetLimit))
		}
		limit = *p.Limit
	}
	s := c.srv
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	msgs := []json.RawMessage{}
	if sess, ok := s.store.sessions[key]; ok {
		tail := sess.messages[max(0, len(sess.messages)-limit):]
		for _, m := range tail {
			msgs = append(msgs, m.raw)
		}
	}
	return object{{"messages", msgs}}, nil
}

func (c *conn) chatMessageGet(_ context.Context, _ string, raw json.RawMessage) (any, *protocol.ErrorShape) {
	var p struct {
		SessionKey string `json:"sessionKey"`
		MessageID  string `json:"messageId"`
	}
	if e := decodeParams("chat.message.get", raw, &p); e != nil {
		return nil, e
	}
	if p.SessionKey == "" || p.MessageID == "" {
		return nil, invalid("invalid chat.message.get params: sessionKey and messageId are required")
	}
	s := c.srv
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	sess, ok := s.store.sessions[p.SessionKey]
	if !ok {
		return object{{"ok", false}, {"unavailableReason", "not_found"}}, nil
	}
	m, ok := sess.byID[p.MessageID]
	if !ok {
		return object{{"ok", false}, {"unavailableReason", "not_found"}}, nil
	}
	return object{{"ok", true}, {"message", omitInlineImages(m, transcriptSource(sess.rec.AgentID, sess.rec.SessionID))}}, nil
}

// send_ is the `send` method (named so to stay clear of conn.send).
func (c *conn) send_(_ context.Context, _ string, raw json.RawMessage) (any, *protocol.ErrorShape) {
	var p struct {
		To             string          `json:"to"`
		Channel        string          `json:"channel"`
		AccountID      string          `json:"accountId"`
		ThreadID       json.RawMessage `json:"threadId"`
		Message        string          `json:"message"`
		SessionKey     string          `json:"sessionKey"`
		IdempotencyKey string          `json:"idempotencyKey"`
	}
	if e := decodeParams("send", raw, &p); e != nil {
		return nil, e
	}
	switch {
	case strings.TrimSpace(p.To) == "":
		return nil, invalid("invalid send params: to is required")
	case strings.TrimSpace(p.Channel) == "":
		return nil, invalid("invalid send params: channel is required")
	case strings.TrimSpace(p.Message) == "":
		return nil, invalid("invalid send params: message is required")
	case strings.TrimSpace(p.IdempotencyKey) == "":
		return nil, invalid("invalid send params: idempotencyKey is required")
	}
	channel := strings.ToLower(strings.TrimSpace(p.Channel))
	s := c.srv
	if slices.Contains(s.opts.UnsupportedChannels, "*") || slices.Contains(s.opts.UnsupportedChannels, channel) {
		return nil, invalid("unsupported channel: " + channel)
	}
	return s.deliver(channel, p.To, p.SessionKey, p.Message, p.IdempotencyKey)
}

// deliver records an outbound `send` in the session transcript and returns
// the send result; a repeated idempotency key returns the first result.
func (s *Server) deliver(channel, to, sessionKey, text, idem string) (any, *protocol.ErrorShape) {
	s.events.Lock()
	defer s.events.Unlock()
	if prev, ok := s.idemGet("send\x00" + idem); ok {
		return prev, nil
	}
	messageID := uuid.NewString()
	result := object{{"runId", idem}, {"messageId", messageID}, {"channel", channel}, {"to", to}}
	if sessionKey != "" {
		result = result.set("sessionKey", sessionKey)
		now := s.nowMs()
		s.store.mu.Lock()
		sess, ok := s.store.sessions[sessionKey]
		if ok {
			m, err := s.store.appendLocked(sess, newMessage{id: messageID, role: "assistant", ts: now, body: object{
				{"role", "assistant"}, {"content", []object{{{"type", "text"}, {"text", text}}}}, {"timestamp", now},
				{"stopReason", "stop"}, {"usage", zeroUsage()}, {"api", "openai-responses"}, {"provider", "openclaw"},
				{"model", "delivery-mirror"}}}, now, true)
			if err != nil {
				s.store.mu.Unlock()
				return nil, errInternal(err)
			}
			s.broadcastMessageLocked(sess, m, false, now)
		}
		s.store.mu.Unlock()
	}
	s.idemPut("send\x00"+idem, result)
	return result, nil
}

func zeroUsage() object {
	return object{{"input", 0}, {"output", 0}, {"totalTokens", 0}, {"cacheRead", 0}, {"cacheWrite", 0},
		{"cost", object{{"input", 0}, {"output", 0}, {"cacheRead", 0}, {"cacheWrite", 0}, {"total", 0}}}}
}

const maxIdempotencyEntries = 10000

func (s *Server) idemGet(key string) (any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.idem[key]
	return v, ok
}

func (s *Server) idemPut(key string, v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.idem) >= maxIdempotencyEntries {
		clear(s.idem)
	}
	s.idem[key] = v
}

func (c *conn) chatSend(_ context.Context, _ string, raw json.RawMessage) (any, *protocol.ErrorShape) {
	var p struct {
		SessionKey     string `json:"sessionKey"`
		Message        string `json:"message"`
		IdempotencyKey string `json:"idempotencyKey"`
		SenderIsOwner  bool   `json:"senderIsOwner"`
	}
	if e := decodeParams("chat.send", raw, &p); e != nil {
		return nil, e
	}
	switch {
	case strings.TrimSpace(p.SessionKey) == "":
		return nil, invalid("invalid chat.send params: sessionKey is required")
	case strings.TrimSpace(p.Message) == "":
		return nil, invalid("invalid chat.send params: message is required")
	case strings.TrimSpace(p.IdempotencyKey) == "":
		return nil, invalid("invalid chat.send params: idempotencyKey is required")
	}
	// Only a full operator may mark a message as coming from the owner,
	// as OpenClaw forces the flag off for everyone else.
	owner := p.SenderIsOwner && c.scopes[protocol.ScopeOperatorAdmin]
	result := object{{"runId", p.IdempotencyKey}, {"status", "started"}}
	s := c.srv
	s.events.Lock()
	defer s.events.Unlock()
	if _, dup := s.idemGet("chat.send\x00" + p.SessionKey + "\x00" + p.IdempotencyKey); dup {
		return result, nil
	}
	transport := object{{"clients", []object{{{"id", c.params.Client.ID}, {"mode", c.params.Client.Mode}}}}}
	if _, _, err := s.appendInbound(p.SessionKey, nil, "", "user", p.Message, owner, p.IdempotencyKey+":user", transport); err != nil {
		return nil, err
	}
	s.idemPut("chat.send\x00"+p.SessionKey+"\x00"+p.IdempotencyKey, true)
	return result, nil
}

func (c *conn) chatInject(_ context.Context, _ string, raw json.RawMessage) (any, *protocol.ErrorShape) {
	var p struct {
		SessionKey string `json:"sessionKey"`
		Message    string `json:"message"`
	}
	if e := decodeParams("chat.inject", raw, &p); e != nil {
		return nil, e
	}
	if strings.TrimSpace(p.SessionKey) == "" || strings.TrimSpace(p.Message) == "" {
		return nil, invalid("invalid chat.inject params: sessionKey and message are required")
	}
	s := c.srv
	s.store.mu.Lock()
	_, known := s.store.sessions[p.SessionKey]
	s.store.mu.Unlock()
	if !known {
		return nil, invalid("unknown session: " + p.SessionKey)
	}
	s.events.Lock()
	defer s.events.Unlock()
	m, _, err := s.appendInbound(p.SessionKey, nil, "", "assistant", p.Message, false, "", nil)
	if err != nil {
		return nil, err
	}
	return object{{"ok", true}, {"messageId", m.id}}, nil
}

// appendInbound appends a user or assistant text message to a session
// (creating the session, with route and displayName when given) and emits its
// session.message. s.events must be held.
func (s *Server) appendInbound(key string, route *Route, displayName, role, text string, owner bool, idem string, transport object) (*storedMessage, *session, *protocol.ErrorShape) {
	now := s.nowMs()
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	sess, err := s.store.upsertLocked(sessionRecord{Key: key, Route: route, DisplayName: displayName}, now)
	if err != nil {
		return nil, nil, errInternal(err)
	}
	nm := newMessage{role: role, ts: now}
	if role == "assistant" {
		nm.body = object{{"role", "assistant"}, {"content", []object{{{"type", "text"}, {"text", text}}}}, {"timestamp", now},
			{"stopReason", "stop"}, {"usage", zeroUsage()}, {"api", "openai-responses"}, {"provider", "openclaw"},
			{"model", "gateway-injected"}}
	} else {
		nm.body = object{{"role", "user"}, {"content", text}, {"timestamp", now}}
		if idem != "" {
			nm.body = nm.body.set("idempotencyKey", idem)
			nm.ocAfter = object{{"idempotencyKey", idem}}
		}
		if transport != nil {
			nm.ocBefore = object{{"transport", transport}}
		}
	}
	m, err := s.store.appendLocked(sess, nm, now, true)
	if err != nil {
		return nil, nil, errInternal(err)
	}
	s.broadcastMessageLocked(sess, m, owner, now)
	return m, sess, nil
}

// broadcastMessageLocked sends session.message to every subscribed
// connection with read access. s.store.mu must be held (the payload reads
// the session); s.events should be held for a global order.
func (s *Server) broadcastMessageLocked(sess *session, m *storedMessage, owner bool, now int64) {
	raw, err := json.Marshal(sess.eventPayload(m, owner, now))
	if err != nil {
		s.opts.Logger.Error("gateway: encoding session.message", "err", err)
		return
	}
	for _, c := range s.readyConns() {
		if c.subscribed.Load() && c.hasScope(protocol.ScopeOperatorRead) {
			c.sendEventRaw(protocol.EventSessionMessage, raw)
		}
	}
}
