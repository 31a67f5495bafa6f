package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// counters gathers the counters of one metric family as "label values
// joined by /" → value.
func counters(t *testing.T, m *Metrics, name string) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			var key []string
			for _, l := range mt.GetLabel() {
				key = append(key, l.GetValue())
			}
			got[strings.Join(key, "/")] = mt.GetCounter().GetValue()
		}
	}
	return got
}

func TestAuditSinkCountsModules(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	var next policiestest.AuditRecorder
	sink := m.AuditSink(&next)
	sink.Record(policies.AuditRecord{Hook: policies.HookBeforeToolCall, Module: "rules", Decision: "block"})
	sink.Record(policies.AuditRecord{Hook: policies.HookBeforeToolCall, Module: "rules", Decision: "block"})
	sink.Record(policies.AuditRecord{Hook: policies.HookDecideApproval, Module: "approvals", Error: "trap"})
	if len(next.Records()) != 3 {
		t.Fatalf("passed on %d records, want 3", len(next.Records()))
	}
	got := counters(t, m, "openclaw_policy_module_decisions_total")
	if got["block/before_tool_call/rules"] != 2 || got["error/decide_approval/approvals"] != 1 {
		t.Fatalf("module decisions = %v", got)
	}
}

// fixedDecider answers every approval request with one decision.
type fixedDecider policies.ApprovalDecision

func (d fixedDecider) DecideApproval(context.Context, *policies.ApprovalRequest) policies.ApprovalOutcome {
	return policies.ApprovalOutcome{Decision: policies.ApprovalDecision(d)}
}

func TestApprovalsCountDecisions(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	if m.Enforcer(nil) != nil || m.Approvals(nil) != nil || m.Approve(nil) != nil {
		t.Fatal("wrapping nil gave a non-nil hook")
	}
	for _, d := range []policies.ApprovalDecision{policies.Deny, policies.Ask, policies.AllowOnce, policies.Deny} {
		m.Approvals(fixedDecider(d)).DecideApproval(context.Background(), &policies.ApprovalRequest{})
	}
	got := counters(t, m, "openclaw_policy_decisions_total")
	if got["deny/decide_approval"] != 2 || got["ask/decide_approval"] != 1 || got["allow-once/decide_approval"] != 1 {
		t.Fatalf("decide_approval decisions = %v", got)
	}
}
