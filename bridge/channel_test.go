package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func eventsOf(t testing.TB, res map[string]any) []any {
	t.Helper()
	sc, _ := res["structuredContent"].(map[string]any)
	evs, _ := sc["events"].([]any)
	return evs
}

// TestClaudePermissionRoundTrip: Claude asks for a permission, the owner
// answers "yes <id>" in the conversation, the bridge tells Claude and keeps
// the answer out of the event queue.
func TestClaudePermissionRoundTrip(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	b := New(nil, &Options{Enforcer: allowAll(), Verbose: true, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	c := startBridge(t, b)
	c.initialize("auto")

	c.send([]byte(`{"jsonrpc":"2.0","method":"notifications/claude/channel/permission_request",` +
		`"params":{"request_id":"abcde","tool_name":"Bash","description":"run ls","input_preview":"ls -la"}}`))
	c.send([]byte(`{"jsonrpc":"2.0","method":"notifications/claude/channel/permission_request","params":{"request_id":"fghij"}}`))
	evs := eventsOf(t, c.call(2, "tools/call", map[string]any{"name": "events_poll", "arguments": map[string]any{}}))
	want := []any{map[string]any{"cursor": 1.0, "type": "claude_permission_request", "requestId": "abcde",
		"toolName": "Bash", "description": "run ls", "inputPreview": "ls -la"}}
	if !reflect.DeepEqual(evs, want) {
		t.Fatalf("events = %v, want %v (an incomplete request is ignored)", evs, want)
	}
	if !strings.Contains(logs.String(), "openclaw mcp: pending Claude permission abcde") {
		t.Errorf("verbose log lacks the pending line:\n%s", logs)
	}

	owner := func(text string) json.RawMessage {
		return sessionMessagePayload(t, text, func(m map[string]any) {
			m["message"].(map[string]any)["role"] = "user"
			m["senderIsOwner"] = true
		})
	}
	b.HandleGatewayEvent("session.message", owner("YES abcde"))
	got := canonical(t, c.notification(0))
	wantNote := canonical(t, []byte(`{"jsonrpc":"2.0","method":"notifications/claude/channel/permission",`+
		`"params":{"request_id":"abcde","behavior":"allow"}}`))
	if !reflect.DeepEqual(got, wantNote) {
		t.Errorf("notification = %v, want %v", got, wantNote)
	}
	if evs := eventsOf(t, c.call(3, "tools/call", map[string]any{"name": "events_poll", "arguments": map[string]any{}})); len(evs) != 1 {
		t.Errorf("the permission reply was queued: %v", evs)
	}
	// Once delivered, the id is no longer pending: the same text is an
	// ordinary message now, queued and forwarded as a channel message.
	deadline := time.Now().Add(20 * time.Second)
	for b.claude.isPending("abcde") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	b.HandleGatewayEvent("session.message", owner("no abcde"))
	note := canonical(t, c.notification(1)).(map[string]any)
	if note["method"] != MethodClaudeChannel {
		t.Fatalf("second notification = %v", note)
	}
	meta := note["params"].(map[string]any)["meta"].(map[string]any)
	if note["params"].(map[string]any)["content"] != "no abcde" || meta["session_key"] != "agent:main:main" ||
		meta["thread_id"] != "thread-42" || meta["channel"] != "imessage" {
		t.Errorf("channel notification = %v", note)
	}
	if evs := eventsOf(t, c.call(4, "tools/call", map[string]any{"name": "events_poll", "arguments": map[string]any{}})); len(evs) != 2 {
		t.Errorf("events = %d, want the ordinary message queued", len(evs))
	}
}

// TestChannelNotificationRules covers which messages become
// notifications/claude/channel and how meta is filled.
func TestChannelNotificationRules(t *testing.T) {
	t.Parallel()
	b := New(nil, &Options{Enforcer: allowAll()})
	c := startBridge(t, b)
	c.initialize("auto")
	user := func(m map[string]any) { m["message"].(map[string]any)["role"] = "user" }
	// An assistant message: no notification.
	b.HandleGatewayEvent("session.message", sessionMessagePayload(t, "assistant says", nil))
	// A user message without a route: no notification.
	b.HandleGatewayEvent("session.message", sessionMessagePayload(t, "unrouted", func(m map[string]any) {
		user(m)
		delete(m, "lastChannel")
	}))
	// A user image message with a numeric thread id and no account.
	b.HandleGatewayEvent("session.message", sessionMessagePayload(t, "", func(m map[string]any) {
		user(m)
		m["message"].(map[string]any)["content"] = []any{map[string]any{"type": "image"}}
		m["lastThreadId"] = 42
		delete(m, "lastAccountId")
	}))
	// No sessionKey: ignored entirely.
	b.HandleGatewayEvent("session.message", sessionMessagePayload(t, "x", func(m map[string]any) { m["sessionKey"] = "" }))
	// Events the bridge does not consume.
	b.HandleGatewayEvent("tick", json.RawMessage(`{"ts":1}`))
	b.HandleGatewayEvent("session.message", json.RawMessage(`not json`))

	got := canonical(t, c.notification(0))
	want := canonical(t, []byte(`{"jsonrpc":"2.0","method":"notifications/claude/channel","params":{"content":"[non-text message]",`+
		`"meta":{"session_key":"agent:main:main","channel":"imessage","to":"+15551234567","account_id":"","thread_id":"42",`+
		`"message_id":"ad825100-b508-41ec-8152-770bfb09881d"}}}`))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("notification = %v\nwant %v", got, want)
	}
	evs := eventsOf(t, c.call(2, "tools/call", map[string]any{"name": "events_poll", "arguments": map[string]any{}}))
	if len(evs) != 3 {
		t.Fatalf("queued %d events, want 3", len(evs))
	}
	third := evs[2].(map[string]any)
	conv := third["conversation"].(map[string]any)
	if _, hasText := third["text"]; hasText || conv["threadId"] != 42.0 || conv["updatedAt"] != nil {
		t.Errorf("image event = %v", third)
	}
	if _, has := evs[1].(map[string]any)["conversation"]; has {
		t.Errorf("unrouted event has a conversation: %v", evs[1])
	}
	if len(c.notifications) != 1 {
		t.Errorf("%d notifications, want 1", len(c.notifications))
	}
}

func TestApprovalTracking(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	b := New(nil, &Options{Enforcer: allowAll(), Now: clock})
	defer b.Close()
	if b.approvals.sweeperActive() {
		t.Fatal("sweeper armed with no approvals")
	}
	b.HandleGatewayEvent("plugin.approval.requested", json.RawMessage(`{"approvalKind":"plugin","id":"p1","request":{"title":"t"},"createdAtMs":20}`))
	b.HandleGatewayEvent("exec.approval.requested", json.RawMessage(fmt.Sprintf(
		`{"approvalKind":"exec","id":" e1 ","request":{"command":"ls"},"createdAtMs":10,"expiresAtMs":%d}`, now.Add(time.Minute).UnixMilli())))
	b.HandleGatewayEvent("exec.approval.requested", json.RawMessage(`{"approvalKind":"exec","id":"e2"}`))
	if !b.approvals.sweeperActive() {
		t.Error("sweeper not armed while approvals are open")
	}
	ids := func() []string {
		var out []string
		for _, a := range b.approvals.open() {
			out = append(out, a.id)
		}
		return out
	}
	if got := ids(); !reflect.DeepEqual(got, []string{"e2", "e1", "p1"}) {
		t.Errorf("open = %v, want ordered by createdAtMs (missing = 0)", got)
	}
	advance(2 * time.Minute) // past e1's expiresAtMs
	if got := ids(); !reflect.DeepEqual(got, []string{"e2", "p1"}) {
		t.Errorf("open after e1 expired = %v", got)
	}
	b.HandleGatewayEvent("plugin.approval.resolved", json.RawMessage(`{"id":"p1","decision":"deny"}`))
	advance(DefaultApprovalTTL) // e2 had no expiresAtMs: 30 minutes
	if got := ids(); len(got) != 0 {
		t.Errorf("open = %v, want none", got)
	}
	if b.approvals.sweeperActive() {
		t.Error("sweeper still armed with no approvals")
	}
	b.HandleGatewayEvent("exec.approval.requested", json.RawMessage(`{"id":"e3"}`))
	b.Close()
	if b.approvals.sweeperActive() {
		t.Error("sweeper armed after Close")
	}
	evs, _, _ := b.queue.poll(0, "", 100)
	var types []string
	for _, e := range evs {
		var v struct{ Type string }
		_ = json.Unmarshal(e.body, &v)
		types = append(types, v.Type)
	}
	want := []string{"plugin_approval_requested", "exec_approval_requested", "exec_approval_requested",
		"plugin_approval_resolved", "exec_approval_requested"}
	if !reflect.DeepEqual(types, want) {
		t.Errorf("queued %v, want %v", types, want)
	}
}

// TestServeEndsOnDisconnect: Serve returns ErrServing while another Serve
// runs; startBridge's cleanup checks it returns nil on disconnect.
func TestServeEndsOnDisconnect(t *testing.T) {
	t.Parallel()
	b := New(nil, &Options{Enforcer: allowAll()})
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startBridge(t, b)
	c.initialize("auto")
	if err := b.Serve(ctx, nil); err != ErrServing {
		t.Errorf("second Serve = %v, want ErrServing", err)
	}
}
