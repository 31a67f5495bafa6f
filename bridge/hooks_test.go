package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/gateway/protocol"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// fixtureGateway answers each method with the captured real exchange of
// gateway-frames/rpc-<method>.json and records every call.
type fixtureGateway struct {
	t testing.TB

	mu    sync.Mutex
	calls []gatewayCall
}

func (g *fixtureGateway) HasMethod(m string) bool { return m == "chat.message.get" }

func (g *fixtureGateway) Request(_ context.Context, method string, params any) (json.RawMessage, error) {
	sent, _ := json.Marshal(params)
	g.mu.Lock()
	g.calls = append(g.calls, gatewayCall{method, sent})
	g.mu.Unlock()
	var rec struct {
		Res protocol.Frame `json:"res"`
	}
	readJSON(g.t, filepath.Join(fixtures, "gateway-frames", "rpc-"+method+".json"), &rec)
	if rec.Res.OK != nil && *rec.Res.OK {
		return rec.Res.Payload, nil
	}
	return nil, &protocol.RequestError{Method: method, ErrorShape: *rec.Res.Error}
}

func (g *fixtureGateway) recorded() []gatewayCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gatewayCall(nil), g.calls...)
}

// connectClient serves b to a real go-sdk client over in-memory transports;
// protocolVersion "" lets the client negotiate (2026-07-28 discovery).
func connectClient(t testing.TB, b *Bridge, protocolVersion string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, st) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "hook-test", Version: "9.9"}, nil)
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		b.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return cs
}

func toolParams(name string, args map[string]any) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: name, Arguments: args}
}

func resultText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

func TestHookBoundary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		decision  policies.Outcome
		tool      string
		args      map[string]any
		wantText  string
		wantError bool
		wantCalls []gatewayCall // Gateway calls the tool made
		wantArgs  string        // the arguments the policy saw
	}{
		{
			name:     "allow runs the tool",
			decision: policies.Outcome{Decision: policies.Allow},
			tool:     ToolConversationGet, args: map[string]any{"session_key": "agent:main:main", "junk": 1},
			wantText: "conversation agent:main:main",
			wantCalls: []gatewayCall{{"sessions.describe",
				json.RawMessage(`{"key":"agent:main:main","includeDerivedTitles":true,"includeLastMessage":true}`)}},
			wantArgs: `{"session_key":"agent:main:main"}`,
		},
		{
			name:     "block never reaches the Gateway",
			decision: policies.Outcome{Decision: policies.Block, Module: "rules", Reason: "sending is disabled"},
			tool:     ToolMessagesSend, args: map[string]any{"session_key": "agent:main:main", "text": "hi"},
			wantText: `blocked by policy "rules": sending is disabled`, wantError: true,
			wantArgs: `{"session_key":"agent:main:main","text":"hi"}`,
		},
		{
			name:     "require_approval fails closed",
			decision: policies.Outcome{Decision: policies.RequireApproval, Module: "rules", Reason: "a human must confirm"},
			tool:     ToolPermissionsRespond, args: map[string]any{"kind": "exec", "id": "x", "decision": "deny"},
			wantText:  `approval required by policy "rules": a human must confirm; no approval route is configured`,
			wantError: true,
			wantArgs:  `{"decision":"deny","id":"x","kind":"exec"}`, // the client's key order (go-sdk sorts a map)
		},
		{
			name: "rewritten arguments are the ones used",
			decision: policies.Outcome{Decision: policies.Allow, Module: "redact",
				Arguments: json.RawMessage(`{"session_key":"agent:main:main","text":"[redacted]"}`)},
			tool: ToolMessagesSend, args: map[string]any{"session_key": "agent:main:main", "text": "secret"},
			wantText: "unsupported channel: imessage", wantError: true,
			wantCalls: []gatewayCall{
				{"sessions.describe", json.RawMessage(`{"key":"agent:main:main","includeDerivedTitles":true,"includeLastMessage":true}`)},
				{"send", nil}, // checked below: message is the rewritten text
			},
			wantArgs: `{"session_key":"agent:main:main","text":"secret"}`,
		},
		{
			name: "invalid rewritten arguments block",
			decision: policies.Outcome{Decision: policies.Allow, Module: "broken",
				Arguments: json.RawMessage(`{"session_key":""}`)},
			tool: ToolMessagesRead, args: map[string]any{"session_key": "agent:main:main"},
			wantText: `blocked: policy "broken" rewrote the arguments of messages_read into invalid ones: ` +
				`Too small: expected string to have >=1 characters at session_key`,
			wantError: true,
			wantArgs:  `{"session_key":"agent:main:main"}`,
		},
		{
			name:     "invalid arguments never reach the policy",
			decision: policies.Outcome{Decision: policies.Allow},
			tool:     ToolEventsPoll, args: map[string]any{"limit": 0},
			wantText: "MCP error -32602: Input validation error: Invalid arguments for tool events_poll: " +
				"Too small: expected number to be >=1 at limit",
			wantError: true,
		},
		{
			name:     "unknown tools never reach the policy",
			decision: policies.Outcome{Decision: policies.Allow},
			tool:     "nope_tool", args: map[string]any{},
			wantText: "MCP error -32602: Tool nope_tool not found", wantError: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := &fixtureGateway{t: t}
			pol := &policiestest.Enforcer{Outcome: tt.decision}
			b := New(gw, &Options{Enforcer: pol})
			cs := connectClient(t, b, "2025-11-25")
			res, err := cs.CallTool(context.Background(), toolParams(tt.tool, tt.args))
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(res); got != tt.wantText || res.IsError != tt.wantError {
				t.Errorf("result = %q (isError %v), want %q (isError %v)", got, res.IsError, tt.wantText, tt.wantError)
			}
			if tt.wantError && res.StructuredContent != nil {
				t.Errorf("an error result carries structuredContent %v", res.StructuredContent)
			}
			calls := gw.recorded()
			if len(calls) != len(tt.wantCalls) {
				t.Fatalf("Gateway calls = %v, want %v", calls, tt.wantCalls)
			}
			for i, c := range calls {
				w := tt.wantCalls[i]
				if c.Method != w.Method || (w.Params != nil && string(c.Params) != string(w.Params)) {
					t.Errorf("Gateway call %d = %s %s, want %s %s", i, c.Method, c.Params, w.Method, w.Params)
				}
				if c.Method == "send" && !strings.Contains(string(c.Params), `"message":"[redacted]"`) {
					t.Errorf("send used %s, not the rewritten text", c.Params)
				}
			}
			seen := pol.Calls()
			if tt.wantArgs == "" {
				if len(seen) != 0 {
					t.Errorf("the policy was asked %v", seen)
				}
				return
			}
			if len(seen) != 1 {
				t.Fatalf("the policy was asked %d times", len(seen))
			}
			want := policies.ToolCall{Surface: policies.SurfaceServe, Caller: policies.Caller{Name: "hook-test", Version: "9.9"},
				Tool: policies.ToolRef{Name: tt.tool}, Arguments: json.RawMessage(tt.wantArgs)}
			if sk, ok := tt.args["session_key"].(string); ok {
				want.SessionKey = sk
			}
			if !reflect.DeepEqual(seen[0], want) {
				t.Errorf("policy input = %+v (args %s), want %+v (args %s)", seen[0], seen[0].Arguments, want, want.Arguments)
			}
		})
	}
}

// TestNoPolicyFailsClosed: a bridge without a policy runs no tool.
func TestNoPolicyFailsClosed(t *testing.T) {
	t.Parallel()
	gw := &fixtureGateway{t: t}
	cs := connectClient(t, New(gw, nil), "2025-11-25")
	res, err := cs.CallTool(context.Background(), toolParams(ToolConversationsList, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(resultText(res), "no policy") || len(gw.recorded()) != 0 {
		t.Errorf("result %q isError %v, %d Gateway calls; want a refusal and none", resultText(res), res.IsError, len(gw.recorded()))
	}
}

// TestCallerOnBothHandshakes checks that the policy learns the client's
// identity with the initialize handshake and with 2026-07-28 discovery.
func TestCallerOnBothHandshakes(t *testing.T) {
	t.Parallel()
	for _, pv := range []string{"2025-06-18", "2025-11-25", ""} {
		t.Run("protocol "+pv, func(t *testing.T) {
			t.Parallel()
			pol := &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.Allow}}
			cs := connectClient(t, New(nil, &Options{Enforcer: pol}), pv)
			if _, err := cs.CallTool(context.Background(), toolParams(ToolEventsPoll, nil)); err != nil {
				t.Fatal(err)
			}
			tools, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(tools.Tools); got != 9 {
				t.Errorf("%d tools listed", got)
			}
			if s := pol.Calls(); len(s) != 1 || s[0].Caller != (policies.Caller{Name: "hook-test", Version: "9.9"}) {
				t.Errorf("policy saw %+v", s)
			}
		})
	}
}

// TestValidationMessages checks the zod-compatible messages a client sees.
func TestValidationMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tool string
		args string
		want string // "" means valid
	}{
		{ToolEventsPoll, `{"limit":999}`, "Too big: expected number to be <=200 at limit"},
		{ToolEventsWait, `{"timeout_ms":300001}`, "Too big: expected number to be <=300000 at timeout_ms"},
		{ToolEventsPoll, `{"after_cursor":-1}`, "Too small: expected number to be >=0 at after_cursor"},
		{ToolEventsPoll, `{"limit":1.5}`, "Invalid input: expected int, received number at limit"},
		{ToolEventsPoll, `{"limit":"5"}`, "Invalid input: expected number, received string at limit"},
		{ToolEventsPoll, `{"session_key":5}`, "Invalid input: expected string, received number at session_key"},
		{ToolConversationGet, `{}`, "Invalid input: expected string, received undefined at session_key"},
		{ToolConversationGet, `{"session_key":null}`, "Invalid input: expected string, received null at session_key"},
		{ToolMessagesSend, `{"session_key":"","text":""}`,
			"Too small: expected string to have >=1 characters at session_key; Too small: expected string to have >=1 characters at text"},
		{ToolConversationsList, `{"includeLastMessage":"yes"}`, "Invalid input: expected boolean, received string at includeLastMessage"},
		{ToolPermissionsRespond, `{"kind":"shell","id":"x","decision":"deny"}`, `Invalid option: expected one of "exec"|"plugin" at kind`},
		{ToolPermissionsRespond, `{"kind":"exec","id":"x","decision":"maybe"}`,
			`Invalid option: expected one of "allow-once"|"allow-always"|"deny" at decision`},
		{ToolEventsPoll, `[]`, "Invalid input: expected object, received array"},
		{ToolEventsPoll, `{"limit":200,"unknown":{"x":1}}`, ""},
		{ToolEventsPoll, `{"after_cursor":9007199254740991}`, ""},
		{ToolEventsPoll, `{"limit":1e2}`, ""},
		{ToolPermissionsListOpen, `{"anything":true}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			t.Parallel()
			spec := toolByName(tt.tool)
			_, got := validateArgs(json.RawMessage(tt.args), spec.props, spec.required)
			if got != tt.want {
				t.Errorf("validate(%s) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}

func TestParseChannelMode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want ChannelMode
		err  bool
	}{
		{"", ChannelAuto, false}, {"auto", ChannelAuto, false}, {"ON", ChannelOn, false},
		{" Off ", ChannelOff, false}, {"yes", "", true}, {"of", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseChannelMode(tt.in)
			if got != tt.want || (err != nil) != tt.err {
				t.Errorf("ParseChannelMode(%q) = %q, %v", tt.in, got, err)
			}
			if err != nil && (!errors.Is(err, ErrInvalidChannelMode) || !strings.Contains(err.Error(), `"`+tt.in+`"`)) {
				t.Errorf("error %q does not wrap ErrInvalidChannelMode and quote the value", err)
			}
		})
	}
}
