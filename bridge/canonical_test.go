package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
)

// TestCanonicalSessionKey holds canonicalSessionKey to OpenClaw's
// normalizeSessionKeyPreservingOpaquePeerIds (2026.9.6), case by case.
func TestCanonicalSessionKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"agent:main:main", "agent:main:main"},
		{" agent:main:tg-dm", "agent:main:tg-dm"},
		{"agent:main:tg-dm ", "agent:main:tg-dm"},
		{"AGENT:MAIN:TG-DM", "agent:main:tg-dm"},
		{"\t\n agent:main:tg-dm\r\n", "agent:main:tg-dm"},
		{"\u00a0agent:main:tg-dm\u3000", "agent:main:tg-dm"}, // NBSP, ideographic space (Zs)
		{"\ufeffagent:main:tg-dm", "agent:main:tg-dm"},       // JavaScript trims U+FEFF, Go's TrimSpace does not
		{"\u2028agent:main:tg-dm\u2029", "agent:main:tg-dm"},
		{"\u0085agent:main:x", "\u0085agent:main:x"},  // JavaScript keeps NEL, Go's TrimSpace removes it
		{"agent:main:\u0130x", "agent:main:i\u0307x"}, // İ lowercases to i + combining dot above
		{"   ", ""},
		{"", ""},
		// Signal group ids are case-sensitive: the segment keeps its case and is trimmed.
		{"Agent:Main:Signal:Group:AbC=", "agent:main:signal:group:AbC="},
		{"SIGNAL:GROUP:AbC:Thread:X", "signal:group:AbC:thread:x"},
		{"agent:main:signal:direct:+AB", "agent:main:signal:direct:+ab"},
		// Matrix rooms keep the whole tail, with a :thread: marker folded.
		{"AGENT:MAIN:MATRIX:CHANNEL:!RoomId:Example.org", "agent:main:matrix:channel:!RoomId:Example.org"},
		{"agent:main:matrix:group:!R:S:THREAD:$Ev", "agent:main:matrix:group:!R:S:thread:$Ev"},
		{"Matrix:Channel:!R", "matrix:channel:!R"},
		{"agent:main:matrix:direct:@U:S", "agent:main:matrix:direct:@u:s"},
		// JavaScript's /i without u folds ASCII only: ſ is not s.
		{"agent:main:\u017figNAL:group:AB", "agent:main:\u017fignal:group:ab"},
	}
	for _, tt := range tests {
		if got := canonicalSessionKey(tt.in); got != tt.want {
			t.Errorf("canonicalSessionKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := canonicalSessionKey(canonicalSessionKey(tt.in)); got != canonicalSessionKey(tt.in) {
			t.Errorf("canonicalSessionKey is not idempotent on %q: %q", tt.in, got)
		}
	}
}

// rulesChain loads the built-in rules module with config into a chain
// whose audit log is returned.
func rulesChain(t *testing.T, config string) (*policies.Chain, *syncBuffer) {
	t.Helper()
	ctx := context.Background()
	rules, err := wasmpolicy.Load(ctx, "rules", builtin.Rules(), []byte(config), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rules.Close(ctx) })
	audit := &syncBuffer{}
	return policies.NewChain([]policies.ChainEntry{{Hook: rules}},
		&policies.ChainOptions{Audit: policies.NewAuditLog(audit)}), audit
}

// TestRoutingArgumentsCanonicalBeforePolicy: a session key or channel in
// another letter case or with blanks around it is the same conversation
// for the Gateway, so the built-in rules module must block it as it blocks
// the canonical form, and the audit log and the Gateway see the canonical
// value (the new-user trial's bypass on the real Gateway).
func TestRoutingArgumentsCanonicalBeforePolicy(t *testing.T) {
	t.Parallel()
	const config = `{"default":"allow","rules":[
		{"tool":"messages_send","args":{"session_key":"agent:main:tg-dm"},"decision":"block","reason":"no telegram"},
		{"tool":"*","args":{"session_key":{"glob":"agent:main:tg-*"}},"decision":"block","reason":"telegram is off-limits"},
		{"tool":"conversations_list","args":{"channel":"telegram"},"decision":"block","reason":"no telegram list"}]}`
	blocked := []struct {
		tool string
		args map[string]any
	}{
		{ToolMessagesSend, map[string]any{"session_key": " agent:main:tg-dm", "text": "x"}},
		{ToolMessagesSend, map[string]any{"session_key": "agent:main:tg-dm ", "text": "x"}},
		{ToolMessagesSend, map[string]any{"session_key": "AGENT:MAIN:TG-DM", "text": "x"}},
		{ToolMessagesSend, map[string]any{"session_key": "\ufeffAgent:Main:Tg-Dm\u00a0", "text": "x"}},
		{ToolMessagesRead, map[string]any{"session_key": "Agent:Main:TG-DM"}},
		{ToolConversationGet, map[string]any{"session_key": " AGENT:main:tg-dm "}},
		{ToolAttachmentsFetch, map[string]any{"session_key": "AGENT:MAIN:TG-DM", "message_id": "m1"}},
		{ToolConversationsList, map[string]any{"channel": " Telegram "}},
		{ToolConversationsList, map[string]any{"channel": "TELEGRAM"}},
	}
	for _, tt := range blocked {
		t.Run(tt.tool+"/"+strings.TrimSpace(string(mustJSON(t, tt.args))), func(t *testing.T) {
			t.Parallel()
			chain, audit := rulesChain(t, config)
			gw := &fixtureGateway{t: t}
			cs := connectClient(t, New(gw, &Options{Enforcer: chain}), "2025-11-25")
			res := call(t, cs, context.Background(), tt.tool, tt.args)
			if !res.IsError || !strings.HasPrefix(resultText(res), `blocked by policy "rules"`) {
				t.Errorf("result = %q (isError %v), want a block by the rules", resultText(res), res.IsError)
			}
			if calls := gw.recorded(); len(calls) != 0 {
				t.Errorf("a blocked call reached the Gateway: %v", calls)
			}
			if _, ok := tt.args["session_key"]; ok && !strings.Contains(audit.String(), `"session_key":"agent:main:tg-dm"`) {
				t.Errorf("audit = %s, want the canonical session key", audit.String())
			}
		})
	}

	// An allowed key goes to the Gateway in its canonical form.
	chain, audit := rulesChain(t, config)
	gw := &fixtureGateway{t: t}
	cs := connectClient(t, New(gw, &Options{Enforcer: chain}), "2025-11-25")
	res := call(t, cs, context.Background(), ToolMessagesRead, map[string]any{"session_key": " Agent:Main:Main\n", "limit": 1})
	if res.IsError {
		t.Fatalf("messages_read: %s", resultText(res))
	}
	calls := gw.recorded()
	if len(calls) != 1 || calls[0].Method != "sessions.get" || string(calls[0].Params) != `{"key":"agent:main:main","limit":1}` {
		t.Errorf("Gateway calls = %v, want sessions.get with the canonical key", calls)
	}
	if !strings.Contains(audit.String(), `"session_key":"agent:main:main"`) {
		t.Errorf("audit = %s, want the canonical session key", audit.String())
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDuplicateArgumentLastWins: serve reads the arguments before the
// policy, a repeated key keeping its last value (JSON.parse in OpenClaw),
// so the policy judges the value the tool then uses; docs/rules.md says
// why the rules module's duplicate block does not apply here.
func TestDuplicateArgumentLastWins(t *testing.T) {
	t.Parallel()
	const config = `{"default":"allow","rules":[
		{"args":{"session_key":{"glob":"agent:main:tg-*"}},"decision":"block","reason":"telegram is off-limits"}]}`
	tests := []struct {
		args      string
		wantBlock bool
		wantKey   string // the key sent to the Gateway when allowed
	}{
		{`{"session_key":"agent:main:main","session_key":"agent:main:tg-dm"}`, true, ""},
		{`{"session_key":"agent:main:tg-dm","session_key":"agent:main:main"}`, false, "agent:main:main"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			t.Parallel()
			chain, audit := rulesChain(t, config)
			gw := &fixtureGateway{t: t}
			cs := connectClient(t, New(gw, &Options{Enforcer: chain}), "2025-11-25")
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolMessagesRead, Arguments: json.RawMessage(tt.args)})
			if err != nil {
				t.Fatal(err)
			}
			calls := gw.recorded()
			if tt.wantBlock {
				if !res.IsError || !strings.Contains(resultText(res), "telegram is off-limits") || len(calls) != 0 {
					t.Errorf("result %q (isError %v), Gateway calls %v; want a block and none", resultText(res), res.IsError, calls)
				}
				return
			}
			if res.IsError || len(calls) != 1 || !strings.Contains(string(calls[0].Params), `"key":"`+tt.wantKey+`"`) {
				t.Errorf("result %q (isError %v), Gateway calls %v; want sessions.get of %s", resultText(res), res.IsError, calls, tt.wantKey)
			}
			if !strings.Contains(audit.String(), `"session_key":"`+tt.wantKey+`"`) {
				t.Errorf("audit = %s, want the key used", audit.String())
			}
		})
	}
}

// aliasGateway resolves session keys as the real Gateway does for a
// single-agent configuration: "main" and unscoped keys belong to agent
// "main", empty segments are dropped. It records every call.
type aliasGateway struct {
	mu    sync.Mutex
	calls []gatewayCall
}

func (g *aliasGateway) HasMethod(string) bool { return false }

func (g *aliasGateway) Request(_ context.Context, method string, params any) (json.RawMessage, error) {
	raw, _ := json.Marshal(params)
	g.mu.Lock()
	g.calls = append(g.calls, gatewayCall{method, raw})
	g.mu.Unlock()
	var p struct{ Key string }
	_ = json.Unmarshal(raw, &p)
	var parts []string
	for _, s := range strings.Split(p.Key, ":") {
		if s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) < 3 || parts[0] != "agent" {
		parts = append([]string{"agent", "main"}, parts...)
	}
	key := strings.Join(parts, ":")
	switch method {
	case "sessions.describe":
		if key == "agent:main:nobody" {
			return json.RawMessage(`{"session":null}`), nil
		}
		return json.RawMessage(`{"session":{"key":"` + key + `","deliveryContext":{"channel":"telegram","to":"42"}}}`), nil
	case "sessions.get":
		return json.RawMessage(`{"messages":[]}`), nil
	}
	return nil, errors.New("unexpected " + method)
}

func (g *aliasGateway) recorded() []gatewayCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gatewayCall(nil), g.calls...)
}

// TestSessionAliasResolvedBeforePolicy: a key the Gateway resolves with
// its configuration ("main", an unscoped "tg-dm", "agent::main::tg-dm")
// is put to the policy as the key of the session it reaches, found with
// sessions.describe; a canonical key costs no extra request.
func TestSessionAliasResolvedBeforePolicy(t *testing.T) {
	t.Parallel()
	const config = `{"default":"allow","rules":[
		{"args":{"session_key":{"glob":"agent:main:tg-*"}},"decision":"block","reason":"telegram is off-limits"}]}`
	tests := []struct {
		key       string
		wantBlock bool
		wantCalls string // methods and keys, in order
	}{
		{"tg-dm", true, "sessions.describe tg-dm"},
		{" TG-DM ", true, "sessions.describe tg-dm"},
		{"agent::main::tg-dm", true, "sessions.describe agent::main::tg-dm"},
		{"main", false, "sessions.describe main, sessions.get agent:main:main"},
		{"nobody", false, "sessions.describe nobody, sessions.get nobody"},
		{"agent:main:main", false, "sessions.get agent:main:main"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			chain, _ := rulesChain(t, config)
			gw := &aliasGateway{}
			cs := connectClient(t, New(gw, &Options{Enforcer: chain}), "2025-11-25")
			res := call(t, cs, context.Background(), ToolMessagesRead, map[string]any{"session_key": tt.key})
			if blocked := res.IsError && strings.Contains(resultText(res), "telegram is off-limits"); blocked != tt.wantBlock {
				t.Errorf("result = %q (isError %v), want blocked %v", resultText(res), res.IsError, tt.wantBlock)
			}
			var got []string
			for _, c := range gw.recorded() {
				var p struct{ Key string }
				_ = json.Unmarshal(c.Params, &p)
				got = append(got, c.Method+" "+p.Key)
			}
			if strings.Join(got, ", ") != tt.wantCalls {
				t.Errorf("Gateway calls = %q, want %q", strings.Join(got, ", "), tt.wantCalls)
			}
		})
	}
}

// BenchmarkCanonicalSessionKey measures the per-call cost of the
// canonicalization: the common already-canonical key, one to fold, and a
// Matrix key that takes the span path.
func BenchmarkCanonicalSessionKey(b *testing.B) {
	for _, key := range []string{"agent:main:main", " AGENT:Main:TG-DM ", "agent:main:matrix:channel:!RoomId:Example.org:thread:$Ev"} {
		b.Run(strings.TrimSpace(key), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				_ = canonicalSessionKey(key)
			}
		})
	}
}
