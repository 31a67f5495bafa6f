package proxy

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/runtime"
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

func TestApprovalsCountDecisions(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	if m.Enforcer(nil) != nil || m.ApprovalDecider(nil) != nil || m.AskHuman(nil) != nil {
		t.Fatal("wrapping nil gave a non-nil hook")
	}
	for _, d := range []policies.ApprovalDecision{policies.Deny, policies.Ask, policies.AllowOnce, policies.Deny} {
		m.ApprovalDecider(&policiestest.ApprovalDecider{Outcome: policies.ApprovalOutcome{Decision: d}}).DecideApproval(context.Background(), &policies.ApprovalRequest{})
	}
	got := counters(t, m, "openclaw_policy_decisions_total")
	if got["deny/decide_approval"] != 2 || got["ask/decide_approval"] != 1 || got["allow-once/decide_approval"] != 1 {
		t.Fatalf("decide_approval decisions = %v", got)
	}
}

// A stdio server that writes 2,000 junk lines before its answer: the
// runtime's status and /metrics count each of them, by server.
func TestMetricsCountSkippedLines(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "misbehave")
	if out, err := exec.Command("go", "build", "-o", bin, "../transport/testdata/misbehave").CombinedOutput(); err != nil {
		t.Fatalf("building the misbehave server: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sess, err := runtime.New([]runtime.Server{{Name: "junky", Entry: config.ServerEntry{Command: bin, Args: []string{"-raw"}}}},
		&runtime.Options{Enforcer: policies.NewChain(nil, nil), Sanitizer: &policiestest.Sanitizer{}, Surface: policies.SurfaceProxy, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	if err := sess.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	m.ObserveServers(sess.Status)
	if res, err := sess.CallTool(ctx, "junky__junk", []byte(`{"lines":2000}`)); err != nil || res.IsError {
		t.Fatalf("junk: %v %v", res, err)
	}
	if got := counters(t, m, "openclaw_upstream_skipped_lines_total"); got["junky"] != 2000 || len(got) != 1 {
		t.Errorf("openclaw_upstream_skipped_lines_total = %v, want junky 2000", got)
	}
	for _, st := range sess.Status() {
		if st.Name == "junky" && st.SkippedLines != 2000 {
			t.Errorf("status SkippedLines = %d, want 2000", st.SkippedLines)
		}
	}
}
