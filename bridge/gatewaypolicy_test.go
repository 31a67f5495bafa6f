package bridge

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/gateway/gatewaytest"
	"github.com/openclaw-go/openclaw/gateway/protocol"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
)

// requester raises Gateway approvals as another connection of a device,
// as `openclaw gateway approval … --wait` does.
type requester struct {
	t *testing.T
	c *gatewaytest.Client
}

func dialRequester(t *testing.T, gw *gatewaytest.Gateway, device *protocol.DeviceIdentity) *requester {
	t.Helper()
	c, err := gatewaytest.Dial(tctx(t), gw.URL, &gatewaytest.DialOptions{Token: gw.Token, Device: device, DisplayName: "requester"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &requester{t: t, c: c}
}

// raise sends a two-phase kind.approval.request and returns the id of the
// accepted response and a channel that receives the final decision
// ("" for null, i.e. expired).
func (r *requester) raise(kind string, params map[string]any) (string, <-chan string) {
	r.t.Helper()
	params["twoPhase"] = true
	params["timeoutMs"] = 60000
	method := kind + ".approval.request"
	_, ch, err := r.c.Requests(tctx(r.t), method, params)
	if err != nil {
		r.t.Fatal(err)
	}
	raw, err := r.c.Await(tctx(r.t), method, ch)
	if err != nil {
		r.t.Fatal(err)
	}
	var acc struct{ Status, ID string }
	if err := json.Unmarshal(raw, &acc); err != nil || acc.Status != "accepted" {
		r.t.Fatalf("%s: first response %s, want accepted (%v)", method, raw, err)
	}
	final := make(chan string, 1)
	go func() {
		raw, err := r.c.Await(tctx(r.t), method, ch)
		if err != nil {
			return // the test ended first
		}
		var f struct {
			Decision *string `json:"decision"`
		}
		_ = json.Unmarshal(raw, &f)
		d := ""
		if f.Decision != nil {
			d = *f.Decision
		}
		final <- d
	}()
	return acc.ID, final
}

func execParams(command string) map[string]any {
	return map[string]any{"command": command, "cwd": "/tmp", "agentId": "main", "sessionKey": "agent:main:main"}
}

func pluginParams(pluginID, tool string) map[string]any {
	return map[string]any{"pluginId": pluginID, "title": "Read a file?", "description": "fs wants to read /etc/hosts",
		"toolName": tool, "agentId": "main", "sessionKey": "agent:main:main"}
}

// waitAudit waits for a record of module whose reason mentions id.
func waitAudit(t *testing.T, a *policiestest.AuditRecorder, module, id string) policies.AuditRecord {
	t.Helper()
	ctx := tctx(t)
	for ctx.Err() == nil {
		for _, r := range a.Records() {
			if r.Module == module && strings.Contains(r.Reason, id) {
				return r
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %s audit record for %s", module, id)
	return policies.AuditRecord{}
}

// waitAuditDecision waits for a bridge:gateway-policy record of decision
// whose reason mentions id.
func waitAuditDecision(t *testing.T, a *policiestest.AuditRecorder, id, decision string) policies.AuditRecord {
	t.Helper()
	ctx := tctx(t)
	for ctx.Err() == nil {
		for _, r := range a.Records() {
			if r.Module == AuditGatewayPolicy && r.Decision == decision && strings.Contains(r.Reason, id) {
				return r
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %s audit record for %s", decision, id)
	return policies.AuditRecord{}
}

func awaitDecision(t *testing.T, final <-chan string) string {
	t.Helper()
	select {
	case d := <-final:
		return d
	case <-tctx(t).Done():
		t.Fatal("the approval was never decided")
		return ""
	}
}

// listedIDs returns the ids permissions_list_open shows.
func listedIDs(t *testing.T, b *gwBridge) []string {
	t.Helper()
	res := call(t, b.cs, tctx(t), ToolPermissionsListOpen, nil)
	var list struct{ Approvals []struct{ ID string } }
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &list)
	var ids []string
	for _, a := range list.Approvals {
		ids = append(ids, a.ID)
	}
	return ids
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// approvalsConfigRm is the built-in approval policy the tests configure:
// deny rm, allow ls once, allow fs reads always in main sessions, ask the
// rest.
const approvalsConfigRm = `{"default":"ask","rules":[
 {"kind":"exec","command":"rm *","decision":"deny","reason":"no deletes"},
 {"kind":"exec","command":"ls *","decision":"allow-once","reason":"read-only"},
 {"kind":"plugin","tool":"fs_read*","session":"agent:main:*","decision":"allow-always"}]}`

// decide_approval decides the Gateway's own exec and plugin approvals
// under `mcp serve`: allow-once, allow-always and deny are resolved on the
// Gateway, and the requester's two-phase result carries the decision; an
// ask stays open and listed for a human; allow-always is remembered per
// session key and tool; the plugin approval the bridge raised for its own
// require_approval call is not put to the policy.
func TestGatewayApprovalsDecidedByPolicy(t *testing.T) {
	t.Parallel()
	double := func(*testing.T) policies.DecideApprovalHook {
		return decider(func(r *policies.ApprovalRequest) policies.ApprovalVerdict {
			switch {
			case r.Kind == policies.ApprovalTool:
				return policies.ApprovalVerdict{Decision: policies.Ask}
			case r.Kind == policies.ApprovalExec && strings.HasPrefix(r.Command, "rm "):
				return policies.ApprovalVerdict{Decision: policies.Deny, Reason: "no deletes"}
			case r.Kind == policies.ApprovalExec && strings.HasPrefix(r.Command, "ls "):
				return policies.ApprovalVerdict{Decision: policies.AllowOnce, Reason: "read-only"}
			case r.Kind == policies.ApprovalPlugin && strings.HasPrefix(r.Tool.Name, "fs_read") && r.SessionKey == "agent:main:main":
				return policies.ApprovalVerdict{Decision: policies.AllowAlways}
			case r.Kind == policies.ApprovalPlugin:
				return policies.ApprovalVerdict{Decision: policies.Deny, Reason: "unknown plugin"}
			}
			return policies.ApprovalVerdict{Decision: policies.Ask}
		})
	}
	wasm := func(t *testing.T) policies.DecideApprovalHook {
		m, err := wasmpolicy.Load(context.Background(), builtin.ApprovalsName, builtin.Approvals(), json.RawMessage(approvalsConfigRm), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(context.Background()) })
		return m
	}
	for _, tc := range []struct {
		name    string
		decider func(*testing.T) policies.DecideApprovalHook
	}{{"double", double}, {"builtin approvals", wasm}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gw := gatewaytest.StartSeeded(t)
			id := newIdentity(t)
			memory := policies.NewApprovalMemory(nil)
			chain := policies.NewApprovalChain([]policies.ApprovalEntry{{Hook: tc.decider(t)}},
				&policies.ApprovalChainOptions{Memory: memory})
			agent := startGatewayBridge(t, gw, id, nil,
				Options{Enforcer: approvalPolicy(ToolEventsPoll, 0), ApprovalDecider: chain}, nil)
			req := dialRequester(t, gw, id)

			// The bridge's own require_approval call raises a plugin
			// approval first; it must stay with a human.
			waiting := callAsync(tctx(t), agent.cs, ToolEventsPoll)
			own := openApprovalID(t, agent.cs, ToolEventsPoll)

			rmID, rm := req.raise("exec", execParams("rm -rf /"))
			if d := awaitDecision(t, rm); d != "deny" {
				t.Errorf("exec rm -rf / decided %q, want deny", d)
			}
			r := waitAudit(t, agent.audit, AuditGatewayPolicy, rmID)
			if r.Decision != "deny" || r.Tool != "exec" || r.SessionKey != "agent:main:main" || r.Caller != "agent:main" ||
				!strings.Contains(r.Reason, "no deletes") || r.Hook != policies.HookDecideApproval {
				t.Errorf("rm audit = %+v", r)
			}
			// The worker is FIFO and the own approval's event came first:
			// had it been put to the policy, it would be resolved by now.
			if agent.audit.Find(AuditGatewayPolicy).Reason != r.Reason {
				t.Errorf("an earlier approval was decided: %+v", agent.audit.Find(AuditGatewayPolicy))
			}
			if ids := listedIDs(t, agent); !contains(ids, own) {
				t.Errorf("the bridge's own approval %s left the list %v", own, ids)
			}

			lsID, ls := req.raise("exec", execParams("ls -la /tmp"))
			if d := awaitDecision(t, ls); d != "allow-once" {
				t.Errorf("exec ls decided %q, want allow-once", d)
			}
			if r := waitAudit(t, agent.audit, AuditGatewayPolicy, lsID); r.Decision != "allow-once" {
				t.Errorf("ls audit = %+v", r)
			}

			fsID, fs := req.raise("plugin", pluginParams("fs", "fs_read_file"))
			if d := awaitDecision(t, fs); d != "allow-always" {
				t.Errorf("plugin fs_read_file decided %q, want allow-always", d)
			}
			if r := waitAudit(t, agent.audit, AuditGatewayPolicy, fsID); r.Decision != "allow-always" || r.Tool != "fs_read_file" || r.Server != "fs" {
				t.Errorf("fs audit = %+v", r)
			}
			grant, err := policies.GatewayApprovalRequest(policies.ApprovalPlugin, "later",
				json.RawMessage(`{"pluginId":"fs","toolName":"fs_read_file","sessionKey":"agent:main:main"}`))
			if err != nil {
				t.Fatal(err)
			}
			if !memory.Recall(grant) {
				t.Error("the allow-always for fs_read_file in agent:main:main was not remembered")
			}

			askID, ask := req.raise("exec", execParams("make install"))
			if r := waitAudit(t, agent.audit, AuditGatewayPolicy, askID); r.Decision != "ask" {
				t.Errorf("make audit = %+v, want ask", r)
			}
			if ids := listedIDs(t, agent); !contains(ids, askID) || !contains(ids, own) {
				t.Errorf("open approvals %v, want %s (ask) and %s (own)", ids, askID, own)
			}
			select {
			case d := <-ask:
				t.Errorf("the ask was resolved %q without a human", d)
			default:
			}

			// A human answers both: the own call runs.
			human := dialRequester(t, gw, id)
			if _, err := human.c.Request(tctx(t), "plugin.approval.resolve", map[string]any{"id": own, "decision": "allow-once"}); err != nil {
				t.Fatal(err)
			}
			if _, err := human.c.Request(tctx(t), "exec.approval.resolve", map[string]any{"id": askID, "decision": "deny"}); err != nil {
				t.Fatal(err)
			}
			if d := awaitDecision(t, ask); d != "deny" {
				t.Errorf("human's answer to the ask = %q", d)
			}
			if got := <-waiting; got.err != nil || got.res.IsError {
				t.Errorf("own approved call: %v %q", got.err, resultText(got.res))
			}
		})
	}
}

// Without an approval policy the bridge decides nothing: a Gateway exec
// approval stays open for a human.
func TestGatewayApprovalsWithoutPolicy(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.StartSeeded(t)
	id := newIdentity(t)
	agent := startGatewayBridge(t, gw, id, nil, Options{Enforcer: allowAll()}, nil)
	req := dialRequester(t, gw, id)
	rmID, rm := req.raise("exec", execParams("rm -rf /"))
	ctx := tctx(t)
	for ctx.Err() == nil && !contains(listedIDs(t, agent), rmID) {
		time.Sleep(5 * time.Millisecond)
	}
	// A second request after the first, through the same read loop: once
	// it is listed, the first had its chance to be decided.
	lsID, _ := req.raise("exec", execParams("ls"))
	for ctx.Err() == nil && !contains(listedIDs(t, agent), lsID) {
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case d := <-rm:
		t.Errorf("decided %q without a policy", d)
	default:
	}
	if r := agent.audit.Find(AuditGatewayPolicy); r != nil {
		t.Errorf("audit without a policy: %+v", r)
	}
}

// An ask with a ttl_ms shorter than the request's own expiry is denied on
// the Gateway when no human answered within it; one a human answers in
// time keeps the human's decision.
func TestGatewayApprovalAskTTL(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.StartSeeded(t)
	id := newIdentity(t)
	dec := decider(func(r *policies.ApprovalRequest) policies.ApprovalVerdict {
		if strings.HasPrefix(r.Command, "deploy") {
			return policies.ApprovalVerdict{Decision: policies.Ask, Reason: "deploys need a human", TTLMs: 200}
		}
		return policies.ApprovalVerdict{Decision: policies.Ask, Reason: "a human decides", TTLMs: 3_600_000}
	})
	chain := policies.NewApprovalChain([]policies.ApprovalEntry{{Hook: dec}}, nil)
	agent := startGatewayBridge(t, gw, id, nil, Options{Enforcer: allowAll(), ApprovalDecider: chain}, nil)
	req := dialRequester(t, gw, id)

	deployID, deploy := req.raise("exec", execParams("deploy prod"))
	if d := awaitDecision(t, deploy); d != "deny" {
		t.Errorf("unanswered deploy decided %q, want deny", d)
	}
	ask := waitAudit(t, agent.audit, AuditGatewayPolicy, deployID)
	if ask.Decision != "ask" || !strings.Contains(ask.Reason, "denied unless answered within 200ms") {
		t.Errorf("ask audit = %+v", ask)
	}
	if r := waitAuditDecision(t, agent.audit, deployID, "deny"); !strings.Contains(r.Reason, "ask ttl of 200ms passing without a human's answer") {
		t.Errorf("deny audit = %+v", r)
	}

	// A TTL longer than the request's own expiry (60 s) is not applied:
	// the Gateway's expiry comes first. A human answers.
	longID, long := req.raise("exec", execParams("make"))
	if r := waitAudit(t, agent.audit, AuditGatewayPolicy, longID); r.Decision != "ask" || strings.Contains(r.Reason, "denied unless") {
		t.Errorf("long ask audit = %+v", r)
	}
	if _, err := req.c.Request(tctx(t), "exec.approval.resolve", map[string]any{"id": longID, "decision": "allow-once"}); err != nil {
		t.Fatal(err)
	}
	if d := awaitDecision(t, long); d != "allow-once" {
		t.Errorf("human's answer = %q", d)
	}
}
