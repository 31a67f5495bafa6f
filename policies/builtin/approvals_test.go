package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

func loadApprovals(t *testing.T, config string) *wasmpolicy.Module {
	t.Helper()
	m, err := wasmpolicy.Load(context.Background(), "approvals", builtin.Approvals(), json.RawMessage(config), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

const approvalsConfig = `{"default":"ask","ask_ttl_ms":300000,"rules":[
 {"kind":"exec","command":"ls *","decision":"allow-once","reason":"read-only"},
 {"kind":"exec","command":"rm *","decision":"deny","reason":"no deletes"},
 {"kind":"plugin","tool":"fs_read*","session":"agent:main:*","decision":"allow-always","ttl_ms":3600000},
 {"kind":"tool","tool":"messages_send","requester":"claude-*","decision":"ask","ttl_ms":60000},
 {"server":"files","decision":"deny"}]}`

// TestApprovalsRules checks the built-in approval policy against requests
// of each kind, built as the host builds them.
func TestApprovalsRules(t *testing.T) {
	t.Parallel()
	m := loadApprovals(t, approvalsConfig)
	exec := func(cmd string) *policies.ApprovalRequest {
		req, err := policies.GatewayApprovalRequest(policies.ApprovalExec, "a1",
			json.RawMessage(`{"command":`+strings.TrimSpace(mustJSON(cmd))+`,"cwd":"/tmp","agentId":"main","sessionKey":"agent:main:main","allowedDecisions":["allow-once","allow-always","deny"]}`))
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	plugin := func(tool, session string) *policies.ApprovalRequest {
		req, err := policies.GatewayApprovalRequest(policies.ApprovalPlugin, "p1",
			json.RawMessage(`{"pluginId":"fs","toolName":`+mustJSON(tool)+`,"sessionKey":`+mustJSON(session)+`,"title":"Read?"}`))
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	for _, tc := range []struct {
		name string
		req  *policies.ApprovalRequest
		want policies.ApprovalVerdict
	}{
		{"exec ls", exec("ls -la /tmp"), policies.ApprovalVerdict{Decision: policies.AllowOnce, Reason: "read-only"}},
		{"exec rm", exec("rm -rf /"), policies.ApprovalVerdict{Decision: policies.Deny, Reason: "no deletes"}},
		{"exec other asks with the default ttl", exec("make"), policies.ApprovalVerdict{Decision: policies.Ask, Reason: "no approval rule matched", TTLMs: 300000}},
		{"plugin read in a main session", plugin("fs_read_file", "agent:main:main"),
			policies.ApprovalVerdict{Decision: policies.AllowAlways, Reason: "rules[2] matched", TTLMs: 3600000}},
		{"plugin read elsewhere", plugin("fs_read_file", "agent:other:main"),
			policies.ApprovalVerdict{Decision: policies.Ask, Reason: "no approval rule matched", TTLMs: 300000}},
		{"tool approval", &policies.ApprovalRequest{Kind: policies.ApprovalTool, Surface: policies.SurfaceServe,
			Requester: policies.Caller{Name: "claude-code"}, Tool: policies.ToolRef{Name: "messages_send"}},
			policies.ApprovalVerdict{Decision: policies.Ask, Reason: "rules[3] matched", TTLMs: 60000}},
		{"tool approval from another client", &policies.ApprovalRequest{Kind: policies.ApprovalTool,
			Requester: policies.Caller{Name: "cursor"}, Tool: policies.ToolRef{Name: "messages_send"}},
			policies.ApprovalVerdict{Decision: policies.Ask, Reason: "no approval rule matched", TTLMs: 300000}},
		{"server glob", &policies.ApprovalRequest{Kind: policies.ApprovalTool,
			Tool: policies.ToolRef{Name: "files__write", Server: "files", RawName: "write"}},
			policies.ApprovalVerdict{Decision: policies.Deny, Reason: "rules[4] matched"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := m.DecideApproval(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestApprovalsDefault: with its default config the module asks.
func TestApprovalsDefault(t *testing.T) {
	t.Parallel()
	b, ok := builtin.Lookup("builtin:approvals")
	if !ok {
		t.Fatal("builtin:approvals not listed")
	}
	m := loadApprovals(t, string(b.DefaultConfig))
	got, err := m.DecideApproval(context.Background(), &policies.ApprovalRequest{Kind: policies.ApprovalExec, Command: "ls"})
	if err != nil || got.Decision != policies.Ask {
		t.Fatalf("got %+v, %v; want ask", got, err)
	}
}

// TestApprovalsConfigRefused: a config mistake refuses the module at load
// with the guest's message naming the culprit.
func TestApprovalsConfigRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ config, want string }{
		{`{"default":"maybe"}`, `default: unknown decision "maybe"`},
		{`{"rules":[{"tool":"x"}]}`, `rules[0]: missing "decision"`},
		{`{"rules":[{"tool":"x","decison":"deny"}]}`, `rules[0]: unknown key "decison"`},
		{`{"rules":[{"kind":"shell","decision":"deny"}]}`, `rules[0].kind: unknown kind "shell"`},
		{`{"rules":[{"decision":"deny","ttl_ms":5}]}`, `rules[0]: ttl_ms applies only to ask and allow-always`},
		{`{"ask_ttl_ms":-1}`, `ask_ttl_ms: want a whole number`},
		{`{"rules":{}}`, `rules: want an array`},
	} {
		t.Run(tc.config, func(t *testing.T) {
			t.Parallel()
			_, err := wasmpolicy.Load(context.Background(), "approvals", builtin.Approvals(), json.RawMessage(tc.config), nil)
			if !errors.Is(err, wasmhost.ErrLoad) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a load error containing %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), `wasm module "approvals"`) {
				t.Errorf("error does not name the module: %v", err)
			}
		})
	}
}

// TestApprovalsThroughChain: the module in a chain with the host's memory:
// an allow-always is remembered for the session and tool and answers a
// later request the policy would ask about; a deny is never overridden.
func TestApprovalsThroughChain(t *testing.T) {
	t.Parallel()
	m := loadApprovals(t, `{"rules":[
		{"kind":"tool","tool":"fs_write","requester":"trusted","decision":"allow-always"},
		{"kind":"tool","tool":"fs_delete","decision":"deny"}]}`)
	mem := policies.NewApprovalMemory(nil)
	chain := policies.NewApprovalChain([]policies.ApprovalEntry{{Hook: m}}, &policies.ApprovalChainOptions{Memory: mem})
	ctx := context.Background()
	req := func(requester, tool, session string) *policies.ApprovalRequest {
		return &policies.ApprovalRequest{Kind: policies.ApprovalTool, SessionKey: session,
			Requester: policies.Caller{Name: requester}, Tool: policies.ToolRef{Name: tool}}
	}
	if got := chain.DecideApproval(ctx, req("other", "fs_write", "s1")); got.Decision != policies.Ask {
		t.Fatalf("before any grant: %+v, want ask", got)
	}
	if got := chain.DecideApproval(ctx, req("trusted", "fs_write", "s1")); got.Decision != policies.AllowAlways || got.Module != "approvals" {
		t.Fatalf("trusted: %+v, want allow-always by approvals", got)
	}
	if got := chain.DecideApproval(ctx, req("other", "fs_write", "s1")); got.Decision != policies.AllowAlways || got.Module != policies.MemoryModule {
		t.Fatalf("after the grant: %+v, want allow-always from memory", got)
	}
	if got := chain.DecideApproval(ctx, req("other", "fs_write", "s2")); got.Decision != policies.Ask {
		t.Fatalf("another session: %+v, want ask", got)
	}
	mem.Remember(req("x", "fs_delete", "s1"), 0)
	if got := chain.DecideApproval(ctx, req("x", "fs_delete", "s1")); got.Decision != policies.Deny {
		t.Fatalf("remembered but denied by policy: %+v, want deny", got)
	}
}

// FuzzApprovals: any request the host can build gets a valid verdict.
func FuzzApprovals(f *testing.F) {
	f.Add("exec", "ls -la", "", "agent:main:main", "claude-code", `{"command":"ls"}`)
	f.Add("plugin", "", "fs_read", "", "", `{}`)
	m, err := wasmpolicy.Load(context.Background(), "approvals", builtin.Approvals(), json.RawMessage(approvalsConfig), nil)
	if err != nil {
		f.Fatal(err)
	}
	defer m.Close(context.Background())
	f.Fuzz(func(t *testing.T, kind, command, tool, session, requester, request string) {
		k := policies.ApprovalKind(kind)
		if !k.Valid() {
			k = policies.ApprovalTool
		}
		req := &policies.ApprovalRequest{Kind: k, Command: command, SessionKey: session,
			Requester: policies.Caller{Name: requester}, Tool: policies.ToolRef{Name: tool}}
		if json.Valid([]byte(request)) {
			req.Request = json.RawMessage(request)
		}
		v, err := m.DecideApproval(context.Background(), req)
		// The guest reads RFC 8259 JSON, which is UTF-8; encoding/json
		// passes a RawMessage through unchecked, so a request with invalid
		// UTF-8 reaches the guest, which refuses it: the host fails closed.
		if req.Request != nil && !utf8.ValidString(request) {
			if err == nil || v.Decision != policies.Deny {
				t.Fatalf("%+v: %+v, %v; want a refusal and deny", req, v, err)
			}
			return
		}
		if err != nil || !v.Decision.Valid() {
			t.Fatalf("%+v: %+v, %v", req, v, err)
		}
	})
}
