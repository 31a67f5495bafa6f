package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestApprovalThroughGateway: the rules module requires approval for
// messages_send; the MCP client has no elicitation, so the bridge raises a
// Gateway plugin approval and the call waits. The agent may not approve its
// own call; a second MCP session (a human's, same device) sees the request
// in permissions_list_open and allows it, and the waiting call is sent.
func TestApprovalThroughGateway(t *testing.T) {
	t.Parallel()
	ctx, gw, tokenFile := setup(t)
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	audit := filepath.Join(dir, "audit.jsonl")
	if err := os.WriteFile(policy, []byte(`{"modules":[{"source":"builtin:rules","config":{"default":"allow","rules":[
		{"tool":"messages_send","decision":"require_approval","reason":"outbound messages need a human"}]}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := serve(t, ctx, gw, tokenFile, "--policy-config", policy, "--audit-log", audit)
	// The human's serve is trusted to answer approvals: an agent's
	// permissions_respond may not answer an approval an openclaw-go policy
	// raised unless decide_approval allows it for that requester.
	humanPolicy := filepath.Join(dir, "human.json")
	if err := os.WriteFile(humanPolicy, []byte(`{"modules":[{"source":"builtin:rules"},{"source":"builtin:approvals","config":{"default":"ask","rules":[
		{"kind":"tool","tool":"permissions_respond","requester":"go-sdk-e2e","decision":"allow-once","reason":"the operator's console"}]}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	human := serve(t, ctx, gw, tokenFile, "--policy-config", humanPolicy)
	// Approval events are delivered to the connections subscribed when the
	// request is raised, never replayed: wait until the human's bridge is
	// connected (a Gateway-backed call waits for readiness).
	if r := mustCall(t, ctx, human, "conversations_list", nil); r.IsError {
		t.Fatalf("human bridge: %+v", r)
	}

	sent := make(chan error, 1)
	var result string
	go func() {
		r, err := agent.Call(ctx, "messages_send", map[string]any{"session_key": "agent:main:main", "text": "approved text"})
		if err == nil {
			result = r.Text
			if r.IsError {
				err = &callError{r.Text}
			}
		}
		sent <- err
	}()

	var open struct {
		Approvals []struct {
			Kind, ID string
			Request  struct{ Title, ToolName string }
		}
	}
	for deadline := time.Now().Add(15 * time.Second); len(open.Approvals) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the approval never reached permissions_list_open\nagent stderr:\n%s", agent.Stderr())
		}
		decode(t, mustCall(t, ctx, human, "permissions_list_open", nil).Structured, &open)
		time.Sleep(50 * time.Millisecond)
	}
	a := open.Approvals[0]
	if a.Kind != "plugin" {
		t.Fatalf("approval kind %q, want plugin: %+v", a.Kind, a)
	}
	// The agent's own session may not answer it.
	if r := mustCall(t, ctx, agent, "permissions_respond", map[string]any{"kind": a.Kind, "id": a.ID, "decision": "allow-once"}); !r.IsError || !strings.Contains(r.Text, "cannot approve its own call") {
		t.Fatalf("self-approval: %+v", r)
	}
	if r := mustCall(t, ctx, human, "permissions_respond", map[string]any{"kind": a.Kind, "id": a.ID, "decision": "allow-once"}); r.IsError {
		t.Fatalf("human approval: %+v", r)
	}
	select {
	case err := <-sent:
		if err != nil || result != "sent" {
			t.Fatalf("the approved call: %q %v", result, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the approved call did not complete")
	}
	data, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	var routed bool
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec struct{ Hook, Module, Decision string }
		_ = json.Unmarshal([]byte(line), &rec)
		if rec.Hook == "decide_approval" && strings.HasPrefix(rec.Module, "bridge:") {
			routed = true
		}
	}
	if !routed {
		t.Errorf("no routing decision in the audit log:\n%s", data)
	}
}

type callError struct{ text string }

func (e *callError) Error() string { return e.text }
