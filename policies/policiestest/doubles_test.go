package policiestest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// The native Sanitizer's names pass the host's contract check, also for
// names that must be cut and then collide, and it records each batch.
func TestSanitizerNamesAreValid(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 70)
	req := &policies.SanitizeRequest{Reserved: []string{"web__fetch"}, Servers: []policies.SanitizeServer{
		{Name: "web", Tools: []string{"fetch", "Fetch", "a b", "a-b", "", "123"}},
		{Name: strings.Repeat("s", 40), Tools: []string{long + "a", long + "b", long + "c"}},
		{Name: "my server", Tools: []string{"t"}}, {Name: "my.server", Tools: []string{"t"}},
	}}
	s := &policiestest.Sanitizer{Module: "native"}
	res, err := s.SanitizeToolNames(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := policies.ValidateSanitized(s.Name(), req, res); err != nil {
		t.Fatal(err)
	}
	web := res.Servers[0].Tools
	if web[0].Name != "web__fetch-2" || web[2].Name != "web__a-b" || web[3].Name != "web__a-b-2" || web[4].Reject == "" || web[5].Name != "web__tool-123" {
		t.Errorf("web tools = %+v", web)
	}
	if got := res.Servers[3].Safe; got != "my-server-2" {
		t.Errorf("second my-server = %q", got)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("Requests() = %d batches, want 1", n)
	}
}

// The zero Enforcer allows with the call's arguments; the zero
// ApprovalDecider and DecideApprovalHook ask; the zero BeforeToolCallHook
// allows.
func TestZeroDoubles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	call := &policies.ToolCall{Tool: policies.ToolRef{Name: "a"}, Arguments: []byte(`{"n":1}`)}
	var e policiestest.Enforcer
	if out := e.BeforeToolCall(ctx, call); out.Decision != policies.Allow || string(out.Arguments) != `{"n":1}` || len(e.Calls()) != 1 {
		t.Errorf("Enforcer: %+v, %d calls", out, len(e.Calls()))
	}
	var d policiestest.ApprovalDecider
	if out := d.DecideApproval(ctx, &policies.ApprovalRequest{}); out.Decision != policies.Ask || len(d.Requests()) != 1 {
		t.Errorf("ApprovalDecider: %+v", out)
	}
	var h policiestest.BeforeToolCallHook
	if v, err := h.BeforeToolCall(ctx, call); err != nil || v.Decision != policies.Allow {
		t.Errorf("BeforeToolCallHook: %+v, %v", v, err)
	}
	var a policiestest.DecideApprovalHook
	if v, err := a.DecideApproval(ctx, &policies.ApprovalRequest{}); err != nil || v.Decision != policies.Ask {
		t.Errorf("DecideApprovalHook: %+v, %v", v, err)
	}
}
