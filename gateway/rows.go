package gateway

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Fixed values of the fields this Gateway reports but has no machinery
// behind: it runs no model and no agent, so every session looks idle, owned
// by the operator, with the defaults below.
const (
	modelProvider = "openclaw"
	modelName     = "local-gateway"
)

func agentRuntime() object {
	return object{{"id", "none"}, {"cloudPlacementSupported", false}, {"devicePlacementSupported", false}, {"source", "implicit"}}
}

// listDefaults is the "defaults" object of sessions.list.
func listDefaults() object {
	return object{{"modelProvider", modelProvider}, {"model", modelName}, {"contextTokens", 0},
		{"agentRuntime", agentRuntime()}, {"thinkingLevels", []any{}}, {"thinkingOptions", []string{}},
		{"thinkingDefault", "off"}, {"modelSelectionTarget", "session"}}
}

type rowKind int

const (
	rowList     rowKind = iota // sessions.list
	rowDescribe                // sessions.describe
	rowEvent                   // session.message's "session"
)

type rowOptions struct {
	derivedTitle bool
	lastMessage  bool
	now          int64
}

func (sess *session) isMain() bool {
	return sess.rec.Key == "agent:"+sess.rec.AgentID+":main"
}

// row builds the session row in OpenClaw's shape and key order
// (fixtures gateway-frames/rpc-sessions.list.json, rpc-sessions.describe.json).
// Route fields are left out for a session without a route, as OpenClaw does.
func (sess *session) row(kind rowKind, o rowOptions) object {
	rec := sess.rec
	classification := "custom"
	if sess.isMain() {
		classification = "main"
	}
	r := object{{"key", rec.Key}, {"visibility", "shared"}, {"permissionModePending", false}, {"kind", "direct"},
		{"classification", classification}, {"agentId", rec.AgentID}, {"isMain", sess.isMain()}, {"isBackground", false}}
	r = r.setIf(rec.Label != "", "label", rec.Label)
	r = r.setIf(rec.DisplayName != "", "displayName", rec.DisplayName)
	if o.derivedTitle {
		t := sess.derivedTitle()
		r = r.setIf(t != "", "derivedTitle", t)
	}
	if o.lastMessage {
		p := sess.lastMessagePreview()
		r = r.setIf(p != "", "lastMessagePreview", p)
	}
	route := rec.Route
	if route.valid() {
		r = r.set("channel", route.Channel).set("origin", originOf(route))
	}
	r = r.set("updatedAt", sess.updatedAt()).set("archived", false).set("pinned", false).set("unread", false).
		set("sessionId", rec.SessionID).set("thinkingLevels", []any{}).set("thinkingOptions", []string{}).
		set("thinkingDefault", "off").set("effectiveFastMode", false).set("effectiveFastModeSource", "default").
		set("fastAutoOnSeconds", 60).set("totalTokensFresh", false)
	r = r.setIf(sess.isMain(), "hasAutomation", false)
	r = r.set("effectiveResponseUsage", "off").set("effectiveQueueMode", "steer").
		set("modelProvider", modelProvider).set("model", modelName).set("modelOverrideSource", nil).
		set("runtimeSelectionLocked", false).set("agentRuntime", agentRuntime())
	if route.valid() {
		r = r.set("deliveryContext", deliveryContextOf(route)).set("lastChannel", route.Channel).set("lastTo", route.To)
		r = r.setIf(route.AccountID != "", "lastAccountId", route.AccountID)
		r = r.setIf(route.ThreadID != "", "lastThreadId", route.ThreadID)
	}
	r = r.set("snapshotAt", o.now)
	if kind != rowList {
		r = r.set("activitySummary", object{{"state", "stale"}, {"canEnsure", true}})
	}
	if kind != rowDescribe {
		r = r.set("hasActiveRun", false).set("activeRunIds", []string{})
	}
	return r.set("sharingRole", "owner")
}

func originOf(r *Route) object {
	o := object{{"provider", r.Channel}, {"to", r.To}}
	o = o.setIf(r.AccountID != "", "accountId", r.AccountID)
	return o.setIf(r.ThreadID != "", "threadId", r.ThreadID)
}

func deliveryContextOf(r *Route) object {
	o := object{{"channel", r.Channel}, {"to", r.To}}
	o = o.setIf(r.AccountID != "", "accountId", r.AccountID)
	return o.setIf(r.ThreadID != "", "threadId", r.ThreadID)
}

// derivedTitle is the label, else the display name, else the start of the
// first user message.
func (sess *session) derivedTitle() string {
	if sess.rec.Label != "" {
		return sess.rec.Label
	}
	if sess.rec.DisplayName != "" {
		return sess.rec.DisplayName
	}
	for _, m := range sess.messages {
		if m.role == "user" {
			return truncateRunes(messageText(m.raw), 60)
		}
	}
	return ""
}

// lastMessagePreview is the start of the last message's text.
func (sess *session) lastMessagePreview() string {
	for i := len(sess.messages) - 1; i >= 0; i-- {
		if t := messageText(sess.messages[i].raw); t != "" {
			return truncateRunes(t, 120)
		}
	}
	return ""
}

// messageText is a message's content when it is a string, else its text
// blocks joined with newlines.
func messageText(raw json.RawMessage) string {
	var m struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return strings.TrimSpace(s)
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" && strings.TrimSpace(b.Text) != "" {
			parts = append(parts, strings.TrimSpace(b.Text))
		}
	}
	return strings.Join(parts, "\n")
}

func truncateRunes(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// eventPayload is the session.message payload (fixture
// event-session.message.json): the message, its id and seq, the session row,
// and the row's fields flattened onto the top level.
func (sess *session) eventPayload(m *storedMessage, senderIsOwner bool, now int64) object {
	rec := sess.rec
	route := rec.Route
	p := object{{"sessionKey", rec.Key}, {"agentId", rec.AgentID}, {"message", m.raw}, {"messageId", m.id},
		{"messageSeq", m.seq}, {"session", sess.row(rowEvent, rowOptions{derivedTitle: true, lastMessage: true, now: now})}}
	p = p.setIf(senderIsOwner, "senderIsOwner", true)
	p = p.set("updatedAt", sess.updatedAt()).set("sessionId", rec.SessionID).set("createdActor", nil).
		set("owner", nil).set("participants", []any{}).set("participantCount", 0).set("kind", "direct").
		set("visibility", "shared")
	if route.valid() {
		p = p.set("channel", route.Channel).set("origin", originOf(route))
	}
	var label any
	if rec.Label != "" {
		label = rec.Label
	}
	p = p.set("archived", false).set("archivedAt", nil).set("archivedBy", nil).set("archiveReason", nil).
		set("pinned", false).set("pinnedAt", nil).set("unread", false).set("markedUnreadAt", nil).
		set("agentStatus", nil).set("observerDigest", nil).
		set("activitySummary", object{{"state", "updating"}, {"canEnsure", true}}).
		set("controlOwnerSessionKey", nil).set("swarm", nil).set("permissionMode", nil).
		set("permissionModePending", false).set("label", label).set("autoLabel", nil).set("icon", nil).
		set("color", nil).set("channelAvatarUrl", nil).set("category", nil).set("boardPresentation", nil)
	p = p.setIf(rec.DisplayName != "", "displayName", rec.DisplayName)
	if route.valid() {
		p = p.set("deliveryContext", deliveryContextOf(route))
	}
	p = p.set("thinkingLevel", nil).set("effectiveFastMode", false).set("effectiveFastModeSource", "default").
		set("fastAutoOnSeconds", 60).set("toolOverrides", nil).set("restartRecoveryStatus", nil)
	if route.valid() {
		p = p.set("lastChannel", route.Channel).set("lastTo", route.To)
		p = p.setIf(route.AccountID != "", "lastAccountId", route.AccountID)
		p = p.setIf(route.ThreadID != "", "lastThreadId", route.ThreadID)
	}
	return p.set("totalTokensFresh", false).set("goal", nil).set("contextBudgetStatus", nil).
		set("effectiveResponseUsage", "off").set("modelProvider", modelProvider).set("model", modelName).
		set("activeModelProvider", nil).set("activeModel", nil).set("modelOverrideSource", nil).
		set("agentRuntime", agentRuntime()).set("runtimeSelectionLocked", false).set("lastRunError", nil).
		set("providerReview", nil).set("lastRunId", nil).set("hasAutomation", false).
		set("hasActiveRun", false).set("activeRunIds", []string{}).set("endedAt", nil).set("runtimeMs", nil).
		set("ancestorSessions", []any{}).set("sharingRole", "owner")
}

// omitInlineImages returns a copy of a message for chat.message.get in which
// every base64 image block has lost source.data and gained artifactId,
// omitted:true and bytes (the decoded size), as OpenClaw serves it.
func omitInlineImages(m *storedMessage, source string) json.RawMessage {
	var msg map[string]json.RawMessage
	if json.Unmarshal(m.raw, &msg) != nil {
		return m.raw
	}
	var blocks []map[string]any
	if json.Unmarshal(msg["content"], &blocks) != nil {
		return m.raw
	}
	changed := false
	for i, b := range blocks {
		src, _ := b["source"].(map[string]any)
		data, isStr := src["data"].(string)
		if b["type"] != "image" || src == nil || !isStr {
			continue
		}
		delete(src, "data")
		ref, _ := json.Marshal(object{{"source", source}, {"rawSeq", m.seq}, {"messageId", m.id},
			{"messageSeq", m.seq}, {"contentIndex", i}})
		b["artifactId"] = "artifact_transcript_image_" + base64.RawURLEncoding.EncodeToString(ref)
		b["omitted"] = true
		b["bytes"] = len(strings.TrimRight(data, "=")) * 3 / 4
		changed = true
	}
	if !changed {
		return m.raw
	}
	// Rebuild in the stored key order, replacing only content.
	var ordered object
	dec := json.NewDecoder(strings.NewReader(string(m.raw)))
	if _, err := dec.Token(); err != nil {
		return m.raw
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return m.raw
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return m.raw
		}
		if key == "content" {
			ordered = ordered.set(key, blocks)
		} else {
			ordered = ordered.set(key, v)
		}
	}
	out, err := json.Marshal(ordered)
	if err != nil {
		return m.raw
	}
	return out
}
