package bridge

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// TestAgentApprovalRule: permissions_respond may answer OpenClaw's own
// approvals and other plugins' approvals it saw, but not a plugin approval
// an openclaw-go policy raised (pluginId "openclaw-go", of any bridge),
// nor an id it cannot name exactly (the Gateway also resolves a
// case-insensitive prefix), unless decide_approval allows the requester.
func TestAgentApprovalRule(t *testing.T) {
	t.Parallel()
	trustAgent := func(r *policies.ApprovalRequest) policies.ApprovalVerdict {
		if r.Tool.Name == ToolPermissionsRespond && r.Requester.Name == "hook-test" &&
			strings.Contains(string(r.Request), `"agent_approval":true`) {
			return policies.ApprovalVerdict{Decision: policies.AllowOnce, Reason: "the operator's console"}
		}
		return policies.ApprovalVerdict{Decision: policies.Ask}
	}
	tests := []struct {
		name     string
		decide   func(*policies.ApprovalRequest) policies.ApprovalVerdict // nil: no approval policy
		kind, id string
		wantSent string // the plugin/exec .approval.resolve params; "" means refused
	}{
		{"another plugin's approval", nil, "plugin", "plugin:other", `{"id":"plugin:other","decision":"allow-once"}`},
		{"its id is trimmed", nil, "plugin", " plugin:other\u00a0", `{"id":"plugin:other","decision":"allow-once"}`},
		{"an exec approval is OpenClaw's", nil, "exec", "ex-unseen", `{"id":"ex-unseen","decision":"allow-once"}`},
		{"openclaw-go's approval", nil, "plugin", "plugin:ours", ""},
		{"an unseen plugin approval", nil, "plugin", "plugin:unseen", ""},
		{"a prefix", nil, "plugin", "PLUGIN:OTH", ""},
		{"a prefix of openclaw-go's", nil, "plugin", "plugin:ou", ""},
		{"openclaw-go's, policy allows", trustAgent, "plugin", "plugin:ours", `{"id":"plugin:ours","decision":"allow-once"}`},
		{"policy denies", func(r *policies.ApprovalRequest) policies.ApprovalVerdict {
			if r.Kind != policies.ApprovalTool {
				return policies.ApprovalVerdict{Decision: policies.Ask} // leave the Gateway's requests open
			}
			return policies.ApprovalVerdict{Decision: policies.Deny}
		}, "plugin", "plugin:ours", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := &fixtureGateway{t: t}
			audit := &policiestest.AuditRecorder{}
			opts := &Options{Enforcer: allowAll(), Audit: audit}
			var dec *policiestest.DecideApprovalHook
			if tt.decide != nil {
				dec = decider(tt.decide)
				opts.ApprovalDecider = policies.NewApprovalChain([]policies.ApprovalEntry{{Hook: dec}}, nil)
			}
			b := New(gw, opts)
			for _, ev := range []string{
				`{"id":"plugin:other","request":{"pluginId":"p1","title":"Install thing","toolName":"t1"},"createdAtMs":1}`,
				`{"id":"plugin:ours","request":{"pluginId":"openclaw-go","title":"Allow?","toolName":"messages_send","toolCallId":"tool:x"},"createdAtMs":2}`,
			} {
				b.HandleGatewayEvent("plugin.approval.requested", json.RawMessage(ev))
			}
			cs := connectClient(t, b, "2025-11-25")
			res := call(t, cs, context.Background(), ToolPermissionsRespond,
				map[string]any{"kind": tt.kind, "id": tt.id, "decision": "allow-once"})
			var sent []gatewayCall
			for _, c := range gw.recorded() {
				if strings.HasSuffix(c.Method, ".approval.resolve") {
					sent = append(sent, c)
				}
			}
			if tt.wantSent == "" {
				if !res.IsError || !strings.Contains(resultText(res), ErrAgentApproval.Error()) {
					t.Errorf("result = %q (isError %v), want a refusal", resultText(res), res.IsError)
				}
				if len(sent) != 0 {
					t.Errorf("a refused answer reached the Gateway: %v", sent)
				}
				if r := audit.Find(AuditRouteAgent); r == nil || r.Decision != "deny" || r.Caller != "hook-test" {
					t.Errorf("audit = %+v, want a deny of %s", r, AuditRouteAgent)
				}
				return
			}
			if res.IsError || resultText(res) != "approval resolved" {
				t.Errorf("result = %q (isError %v), want it resolved", resultText(res), res.IsError)
			}
			if len(sent) != 1 || string(sent[0].Params) != tt.wantSent {
				t.Errorf("Gateway calls = %v, want one resolve %s", sent, tt.wantSent)
			}
			if tt.decide != nil {
				if r := audit.Find(AuditRouteAgent); r == nil || r.Decision != "allow-once" {
					t.Errorf("audit = %+v, want the policy's allow-once", r)
				}
			}
		})
	}
}
