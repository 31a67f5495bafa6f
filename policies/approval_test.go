package policies_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

func dec(name string, d policies.ApprovalDecision, ttl int64) policies.ApprovalEntry {
	return policies.ApprovalEntry{Hook: &policiestest.DecideApprovalHook{Module: name, Verdict: policies.ApprovalVerdict{Decision: d, Reason: name + " says " + string(d), TTLMs: ttl}}}
}

func TestApprovalChainCombination(t *testing.T) {
	t.Parallel()
	req := &policies.ApprovalRequest{Kind: policies.ApprovalExec, SessionKey: "agent:main:main", Command: "ls"}
	for _, tc := range []struct {
		name    string
		entries []policies.ApprovalEntry
		want    policies.ApprovalDecision
		module  string
		ttl     time.Duration
	}{
		{"empty chain asks", nil, policies.Ask, "", 0},
		{"one allow-once", []policies.ApprovalEntry{dec("a", policies.AllowOnce, 0)}, policies.AllowOnce, "a", 0},
		{"ask beats allow", []policies.ApprovalEntry{dec("a", policies.AllowAlways, 0), dec("b", policies.Ask, 5000)}, policies.Ask, "b", 5 * time.Second},
		{"allow-once beats allow-always", []policies.ApprovalEntry{dec("a", policies.AllowAlways, 0), dec("b", policies.AllowOnce, 0)}, policies.AllowOnce, "b", 0},
		{"deny beats all and stops", []policies.ApprovalEntry{dec("a", policies.Ask, 0), dec("b", policies.Deny, 0),
			{Hook: &policiestest.DecideApprovalHook{Module: "c", Err: errors.New("never called")}}}, policies.Deny, "b", 0},
		{"first of equals decides", []policies.ApprovalEntry{dec("a", policies.Ask, 1000), dec("b", policies.Ask, 2000)}, policies.Ask, "a", time.Second},
		{"audit mode does not decide", []policies.ApprovalEntry{dec("a", policies.AllowOnce, 0),
			{Hook: &policiestest.DecideApprovalHook{Module: "trial", Verdict: policies.ApprovalVerdict{Decision: policies.Deny}}, Mode: policies.AuditOnly}}, policies.AllowOnce, "a", 0},
		{"a failing module denies", []policies.ApprovalEntry{dec("a", policies.AllowOnce, 0),
			{Hook: &policiestest.DecideApprovalHook{Module: "broken", Err: errors.New("trap")}}}, policies.Deny, "broken", 0},
		{"an unknown decision denies", []policies.ApprovalEntry{{Hook: &policiestest.DecideApprovalHook{Module: "liar", Verdict: policies.ApprovalVerdict{Decision: "yes"}}}}, policies.Deny, "liar", 0},
		{"a negative ttl denies", []policies.ApprovalEntry{{Hook: &policiestest.DecideApprovalHook{Module: "liar", Verdict: policies.ApprovalVerdict{Decision: policies.Ask, TTLMs: -1}}}}, policies.Deny, "liar", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			got := policies.NewApprovalChain(tc.entries, &policies.ApprovalChainOptions{Audit: rec}).DecideApproval(context.Background(), req)
			if got.Decision != tc.want || got.Module != tc.module || got.TTL != tc.ttl {
				t.Fatalf("got %+v, want %s by %q ttl %v", got, tc.want, tc.module, tc.ttl)
			}
			if tc.want == policies.Deny && tc.module != "b" && !strings.Contains(got.Reason, "policy module failed") {
				t.Errorf("reason %q does not say the module failed", got.Reason)
			}
			for _, r := range rec.recs {
				if r.Hook != policies.HookDecideApproval || r.SessionKey != "agent:main:main" || r.Tool != "exec" {
					t.Errorf("audit record %+v", r)
				}
			}
		})
	}
}

func TestApprovalMemory(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Unix(1700000000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	m := policies.NewApprovalMemory(&policies.ApprovalMemoryOptions{MaxEntries: 3, Now: clock})
	req := func(session, tool, cmd string) *policies.ApprovalRequest {
		return &policies.ApprovalRequest{Kind: policies.ApprovalTool, SessionKey: session, Tool: policies.ToolRef{Name: tool}, Command: cmd}
	}
	m.Remember(req("s1", "fs_write", ""), time.Minute)
	m.Remember(req("", "fs_write", ""), 0) // no session: never remembered
	if !m.Recall(req("s1", "fs_write", "")) || m.Recall(req("s2", "fs_write", "")) || m.Recall(req("s1", "fs_read", "")) || m.Recall(req("", "fs_write", "")) {
		t.Fatal("recall is not per session and tool")
	}
	m.Remember(req("s1", "exec", "ls"), 0)
	if m.Recall(req("s1", "exec", "rm -rf /")) {
		t.Fatal("an exec grant covers another command")
	}
	advance(time.Minute)
	if m.Recall(req("s1", "fs_write", "")) {
		t.Fatal("grant outlived its ttl")
	}
	if !m.Recall(req("s1", "exec", "ls")) {
		t.Fatal("grant without ttl forgotten")
	}
	m.Remember(req("s2", "a", ""), 0)
	m.Remember(req("s2", "b", ""), 0)
	m.Remember(req("s2", "c", ""), 0) // evicts the oldest: s1 exec ls
	if m.Len() != 3 || m.Recall(req("s1", "exec", "ls")) || !m.Recall(req("s2", "c", "")) {
		t.Fatalf("eviction: len %d", m.Len())
	}
	m.Forget("s2")
	if m.Len() != 0 {
		t.Fatalf("Forget left %d grants", m.Len())
	}
}

// TestGatewayApprovalRequest reads the real Gateway's approval events
// (captured from OpenClaw 2026.9.6).
func TestGatewayApprovalRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file    string
		kind    policies.ApprovalKind
		command string
		server  string
	}{
		{"testdata/event-exec.approval.requested.json", policies.ApprovalExec, "ls -la $TMPDIR", ""},
		{"testdata/event-plugin.approval.requested.json", policies.ApprovalPlugin, "", "test-plugin"},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			var frame struct {
				Payload struct {
					ID      string          `json:"id"`
					Request json.RawMessage `json:"request"`
				} `json:"payload"`
			}
			if err := json.Unmarshal(raw, &frame); err != nil {
				t.Fatal(err)
			}
			req, err := policies.GatewayApprovalRequest(tc.kind, frame.Payload.ID, frame.Payload.Request)
			if err != nil {
				t.Fatal(err)
			}
			if req.Kind != tc.kind || req.ID != frame.Payload.ID || req.Command != tc.command || req.Tool.Server != tc.server ||
				string(req.Request) != string(frame.Payload.Request) {
				t.Fatalf("got %+v", req)
			}
		})
	}
	if _, err := policies.GatewayApprovalRequest(policies.ApprovalTool, "x", json.RawMessage(`{}`)); err == nil {
		t.Error("kind tool accepted as a Gateway approval")
	}
	if _, err := policies.GatewayApprovalRequest(policies.ApprovalExec, "x1", json.RawMessage(`[`)); err == nil || !strings.Contains(err.Error(), `"x1"`) {
		t.Errorf("bad request: %v", err)
	}
}
