package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/bridge/gwclient"
	"github.com/openclaw-go/openclaw/gateway/gatewaytest"
	"github.com/openclaw-go/openclaw/gateway/protocol"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// approvalPolicy requires approval (module "rules") for one tool, with
// timeoutMs, and allows the others.
func approvalPolicy(tool string, timeoutMs int64) *policiestest.Enforcer {
	return &policiestest.Enforcer{Decide: func(_ context.Context, call *policies.ToolCall) policies.Outcome {
		if call.Tool.Name != tool {
			return policies.Outcome{Decision: policies.Allow}
		}
		return policies.Outcome{Decision: policies.RequireApproval, Module: "rules", Reason: "a human must confirm", TimeoutMs: timeoutMs}
	}}
}

// decider is a decide_approval module "approvals" answering decide(req).
func decider(decide func(*policies.ApprovalRequest) policies.ApprovalVerdict) *policiestest.DecideApprovalHook {
	return &policiestest.DecideApprovalHook{Module: "approvals",
		Decide: func(_ context.Context, req *policies.ApprovalRequest) (policies.ApprovalVerdict, error) {
			return decide(req), nil
		}}
}

func tctx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// gwBridge is a bridge on a real gwclient connection to a local Gateway.
type gwBridge struct {
	b     *Bridge
	cs    *mcp.ClientSession
	audit *policiestest.AuditRecorder
}

// startGatewayBridge connects a bridge to gw as `mcp serve` does, with
// the device identity id, and an MCP client (with an elicitation handler
// when elicit is set). raiseAs, when set, is the identity the approval
// raiser signs with (nil: id).
func startGatewayBridge(t *testing.T, gw *gatewaytest.Gateway, id, raiseAs *protocol.DeviceIdentity, opts Options,
	elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) *gwBridge {
	t.Helper()
	var b *Bridge
	o := &gwclient.Options{URL: gw.URL, Token: gw.Token, Identity: id,
		OnEvent: func(name string, payload json.RawMessage) { b.HandleGatewayEvent(name, payload) }}
	client := gwclient.New(o)
	if raiseAs == nil {
		raiseAs = id
	}
	ro := *o
	ro.Identity = raiseAs
	audit := &policiestest.AuditRecorder{}
	opts.ApprovalRaiser = gwclient.NewApprovalRaiser(&ro)
	opts.Audit = audit
	b = New(client, &opts)
	runGatewayClient(t, client)
	return &gwBridge{b: b, cs: connectElicit(t, b, elicit, ""), audit: audit}
}

// runGatewayClient runs client until the test ends and returns once it is
// ready.
func runGatewayClient(t *testing.T, client *gwclient.Client) {
	t.Helper()
	runErr := make(chan error, 1)
	go func() { runErr <- client.Run(context.Background()) }()
	t.Cleanup(func() {
		client.Close()
		if err := <-runErr; err != nil {
			t.Errorf("gwclient Run: %v", err)
		}
	})
	if err := client.WaitReady(tctx(t)); err != nil {
		t.Fatal(err)
	}
}

// connectElicit is connectClient with an optional elicitation handler.
func connectElicit(t *testing.T, b *Bridge, elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error), version string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, st) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: elicit})
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
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

func newIdentity(t *testing.T) *protocol.DeviceIdentity {
	t.Helper()
	id, err := protocol.NewDeviceIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func call(t *testing.T, cs *mcp.ClientSession, ctx context.Context, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, toolParams(tool, args))
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// openApprovalID polls permissions_list_open of cs until one approval for
// tool is open, and returns its id.
func openApprovalID(t *testing.T, cs *mcp.ClientSession, tool string) string {
	t.Helper()
	ctx := tctx(t)
	for ctx.Err() == nil {
		res := call(t, cs, ctx, ToolPermissionsListOpen, nil)
		var list struct {
			Approvals []struct {
				Kind, ID string
				Request  struct{ PluginID, ToolName string }
			}
		}
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &list)
		for _, a := range list.Approvals {
			if a.Kind == "plugin" && a.Request.ToolName == tool && a.Request.PluginID == ApprovalPluginID {
				return a.ID
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no open approval for %s", tool)
	return ""
}

// knowsRaised reports whether the bridge has read the Gateway's accepted
// answer for approval id, that is, whether it can withdraw it.
func (g *gwBridge) knowsRaised(id string) bool {
	r := g.b.routing
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.raised[normalizeApprovalID(id)]
	return ok
}

type callResult struct {
	res *mcp.CallToolResult
	err error
}

func callAsync(ctx context.Context, cs *mcp.ClientSession, tool string) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, toolParams(tool, map[string]any{}))
		ch <- callResult{res, err}
	}()
	return ch
}

// resolveAsOperator answers approval id on the Gateway as a human does:
// from an operator connection of its own (the control UI, an approval
// client), not through an agent's permissions_respond.
func resolveAsOperator(t *testing.T, gw *gatewaytest.Gateway, id, decision string) {
	t.Helper()
	c, err := gatewaytest.Dial(tctx(t), gw.URL, &gatewaytest.DialOptions{Token: gw.Token, DisplayName: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Request(tctx(t), "plugin.approval.resolve", map[string]any{"id": id, "decision": decision}); err != nil {
		t.Fatalf("operator's plugin.approval.resolve: %v", err)
	}
}

// The Gateway route end to end: the waiting call's approval shows up in
// the bridge's own permissions_list_open, the agent cannot approve it
// itself, nor can an agent of another bridge that sees it, a human
// resolves it on the Gateway, and the call then runs (allow-once,
// allow-always) or fails with the reason (deny).
func TestGatewayApprovalRoute(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.StartSeeded(t)
	tests := []struct {
		decision string
		wantErr  string // "" means the call runs
	}{
		{"allow-once", ""},
		{"allow-always", ""},
		{"deny", "was denied on the gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.decision, func(t *testing.T) {
			t.Parallel()
			device := newIdentity(t)
			agent := startGatewayBridge(t, gw, device, nil,
				Options{Enforcer: approvalPolicy(ToolConversationsList, 0)}, nil)
			// Another serve of the same device sees the approval (it is an
			// approval client of that device); one of another device does
			// not, and can only guess the id.
			approver := startGatewayBridge(t, gw, device, nil, Options{Enforcer: allowAll()}, nil)
			stranger := startGatewayBridge(t, gw, newIdentity(t), nil, Options{Enforcer: allowAll()}, nil)

			waiting := callAsync(tctx(t), agent.cs, ToolConversationsList)
			id := openApprovalID(t, agent.cs, ToolConversationsList)

			self := call(t, agent.cs, tctx(t), ToolPermissionsRespond, map[string]any{"kind": "plugin", "id": id, "decision": "allow-once"})
			if !self.IsError || !strings.Contains(resultText(self), "cannot approve its own call") {
				t.Errorf("self-approval = %q (isError %v), want a refusal", resultText(self), self.IsError)
			}
			if r := agent.audit.Find(AuditRouteSelf); r == nil || r.Decision != "deny" {
				t.Errorf("self-approval audit = %+v", r)
			}

			// Another agent sees the approval and may not answer it either
			// (the new-user trial's cross-session approval).
			if seen := openApprovalID(t, approver.cs, ToolConversationsList); seen != id {
				t.Fatalf("the other bridge lists approval %s, want %s", seen, id)
			}
			other := call(t, approver.cs, tctx(t), ToolPermissionsRespond, map[string]any{"kind": "plugin", "id": id, "decision": tt.decision})
			if !other.IsError || !strings.Contains(resultText(other), ErrAgentApproval.Error()) {
				t.Errorf("another agent's permissions_respond = %q (isError %v), want a refusal", resultText(other), other.IsError)
			}
			if r := approver.audit.Find(AuditRouteAgent); r == nil || r.Decision != "deny" || r.Tool != ToolPermissionsRespond {
				t.Errorf("agent-approval audit = %+v", r)
			}
			for _, guess := range []string{id, strings.ToUpper(id[:len("plugin:")+4])} {
				res := call(t, stranger.cs, tctx(t), ToolPermissionsRespond, map[string]any{"kind": "plugin", "id": guess, "decision": tt.decision})
				if !res.IsError || !strings.Contains(resultText(res), ErrAgentApproval.Error()) {
					t.Errorf("another device's agent answering %s = %q (isError %v), want a refusal", guess, resultText(res), res.IsError)
				}
			}
			if open := openApprovalID(t, agent.cs, ToolConversationsList); open != id {
				t.Fatalf("approval %s is no longer open after the refusals (open: %s)", id, open)
			}

			resolveAsOperator(t, gw, id, tt.decision)
			got := <-waiting
			if got.err != nil {
				t.Fatal(got.err)
			}
			text := resultText(got.res)
			if tt.wantErr == "" {
				if got.res.IsError || !strings.HasPrefix(text, "conversations: ") {
					t.Fatalf("approved call = %q, want it to run", text)
				}
			} else if !got.res.IsError || !strings.Contains(text, tt.wantErr) || !strings.Contains(text, id) {
				t.Fatalf("denied call = %q, want isError containing %q and the id", text, tt.wantErr)
			}
			if r := agent.audit.Find(AuditRouteGateway); r == nil || r.Decision != tt.decision || r.Tool != ToolConversationsList || r.Caller != "agent" {
				t.Errorf("routing audit = %+v, want %s", r, tt.decision)
			}
			if tt.decision != "allow-always" {
				return
			}
			// conversations_list carries no session key, and a grant never
			// leaks across sessions: nothing is remembered.
			req := toolApprovalRequest(&policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: ToolConversationsList},
				Caller: policies.Caller{Name: "agent", Version: "1"}}, &policies.Outcome{}, "x")
			if agent.b.routing.memory.Recall(req) {
				t.Error("an allow-always without a session key was remembered")
			}
		})
	}
}

// A human's allow-always on the Gateway is remembered per session key and
// tool: the next call of the same session runs without a new approval.
func TestGatewayAllowAlwaysRemembered(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.StartSeeded(t)
	agent := startGatewayBridge(t, gw, newIdentity(t), nil, Options{Enforcer: approvalPolicy(ToolMessagesRead, 0)}, nil)
	args := map[string]any{"session_key": "agent:main:main"}
	ch := make(chan callResult, 1)
	go func() {
		res, err := agent.cs.CallTool(tctx(t), toolParams(ToolMessagesRead, args))
		ch <- callResult{res, err}
	}()
	id := openApprovalID(t, agent.cs, ToolMessagesRead)
	c, err := gatewaytest.Dial(tctx(t), gw.URL, &gatewaytest.DialOptions{Token: gw.Token, DisplayName: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Request(tctx(t), "plugin.approval.resolve", map[string]any{"id": id, "decision": "allow-always"}); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.err != nil || r.res.IsError {
		t.Fatalf("approved call: %v %q", r.err, resultText(r.res))
	}
	again := call(t, agent.cs, tctx(t), ToolMessagesRead, args)
	if again.IsError {
		t.Fatalf("second call = %q, want it to run from memory", resultText(again))
	}
	if r := agent.audit.Find(policies.MemoryModule); r == nil || r.SessionKey != "agent:main:main" {
		t.Errorf("memory audit = %+v", r)
	}
	other := call(t, agent.cs, tctx(t), ToolPermissionsListOpen, nil)
	if strings.Contains(resultText(other), "approvals: 1") {
		t.Errorf("a remembered call raised a new approval: %s", resultText(other))
	}
}

// Expiry, cancellation and a request nobody may see all fail the call with
// the reason, and withdraw what is still open.
func TestGatewayApprovalFailures(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.StartSeeded(t)

	t.Run("expiry", func(t *testing.T) {
		t.Parallel()
		agent := startGatewayBridge(t, gw, newIdentity(t), nil,
			Options{Enforcer: approvalPolicy(ToolEventsPoll, 300)}, nil)
		res := call(t, agent.cs, tctx(t), ToolEventsPoll, nil)
		if !res.IsError || !strings.Contains(resultText(res), "expired after") {
			t.Errorf("expired call = %q", resultText(res))
		}
		if r := agent.audit.Find(AuditRouteGateway); r == nil || r.Decision != "deny" {
			t.Errorf("audit = %+v", r)
		}
	})

	t.Run("nobody can see it", func(t *testing.T) {
		t.Parallel()
		// The raiser signs as another device: the bridge's connection
		// may not see the record, nobody else may, so it dies at once.
		agent := startGatewayBridge(t, gw, newIdentity(t), newIdentity(t),
			Options{Enforcer: approvalPolicy(ToolEventsPoll, 0)}, nil)
		res := call(t, agent.cs, tctx(t), ToolEventsPoll, nil)
		if !res.IsError || !strings.Contains(resultText(res), "no approver can see approval plugin:") {
			t.Errorf("unseen approval = %q", resultText(res))
		}
	})

	t.Run("cancellation", func(t *testing.T) {
		t.Parallel()
		agent := startGatewayBridge(t, gw, newIdentity(t), nil,
			Options{Enforcer: approvalPolicy(ToolEventsPoll, 0)}, nil)
		cctx, cancel := context.WithCancel(tctx(t))
		waiting := callAsync(cctx, agent.cs, ToolEventsPoll)
		id := openApprovalID(t, agent.cs, ToolEventsPoll)
		// Listed open on the Gateway does not mean the bridge has read the
		// Gateway's "accepted" answer naming it: cancel once it has, so the
		// audit names the id. (A cancellation in between is withdrawn by
		// toolCallId: TestCancelledBeforeAcceptedWithdraws.)
		for ctx := tctx(t); !agent.knowsRaised(id); time.Sleep(5 * time.Millisecond) {
			if ctx.Err() != nil {
				t.Fatalf("the bridge never read the accepted answer for %s", id)
			}
		}
		cancel()
		if r := <-waiting; r.err == nil {
			t.Errorf("cancelled call returned %q, want the client's cancellation error", resultText(r.res))
		}
		ctx := tctx(t)
		for ctx.Err() == nil {
			if r := agent.audit.Find(AuditRouteGateway); r != nil {
				if !strings.Contains(r.Reason, "cancelled; approval "+id+" withdrawn") {
					t.Errorf("audit reason %q", r.Reason)
				}
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		// The withdrawal (a deny) resolved it: the list empties.
		for ctx.Err() == nil {
			res := call(t, agent.cs, ctx, ToolPermissionsListOpen, nil)
			if resultText(res) == "approvals: 0" {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Error("the cancelled call's approval stayed open")
	})
}

// Self-approval is refused unless decide_approval allows it for
// permissions_respond; then the agent's own answer goes through.
func TestSelfApprovalAllowedByPolicy(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.StartSeeded(t)
	dec := decider(func(r *policies.ApprovalRequest) policies.ApprovalVerdict {
		if r.Tool.Name == ToolPermissionsRespond && strings.Contains(string(r.Request), `"self_approval":true`) {
			return policies.ApprovalVerdict{Decision: policies.AllowOnce, Reason: "trusted agent"}
		}
		return policies.ApprovalVerdict{Decision: policies.Ask}
	})
	chain := policies.NewApprovalChain([]policies.ApprovalEntry{{Hook: dec}}, nil)
	agent := startGatewayBridge(t, gw, newIdentity(t), nil,
		Options{Enforcer: approvalPolicy(ToolEventsPoll, 0), ApprovalDecider: chain}, nil)
	waiting := callAsync(tctx(t), agent.cs, ToolEventsPoll)
	id := openApprovalID(t, agent.cs, ToolEventsPoll)
	res := call(t, agent.cs, tctx(t), ToolPermissionsRespond, map[string]any{"kind": "plugin", "id": id, "decision": "allow-once"})
	if res.IsError {
		t.Fatalf("policy-allowed self-approval = %q", resultText(res))
	}
	if r := <-waiting; r.err != nil || r.res.IsError {
		t.Fatalf("self-approved call: %v %q", r.err, resultText(r.res))
	}
	if r := agent.audit.Find(AuditRouteSelf); r == nil || r.Decision != "allow-once" || !strings.Contains(r.Reason, `"approvals"`) {
		t.Errorf("self-approval audit = %+v", r)
	}
}

// decide_approval answers before any human is asked: allow-once runs,
// deny fails with the policy's reason, allow-always is remembered by the
// chain, and the request carries what the policy needs.
func TestDecideApprovalFirst(t *testing.T) {
	t.Parallel()
	tests := []struct {
		decision policies.ApprovalDecision
		wantErr  string
	}{
		{policies.AllowOnce, ""},
		{policies.AllowAlways, ""},
		{policies.Deny, `approval required by policy "rules": a human must confirm; denied by approval policy "approvals": not on weekends`},
		{policies.Ask, "no approval route is configured"},
	}
	for _, tt := range tests {
		t.Run(string(tt.decision), func(t *testing.T) {
			t.Parallel()
			dec := decider(func(*policies.ApprovalRequest) policies.ApprovalVerdict {
				return policies.ApprovalVerdict{Decision: tt.decision, Reason: "not on weekends"}
			})
			audit := &policiestest.AuditRecorder{}
			b := New(&fixtureGateway{t: t}, &Options{Enforcer: approvalPolicy(ToolMessagesRead, 0),
				ApprovalDecider: policies.NewApprovalChain([]policies.ApprovalEntry{{Hook: dec}}, nil), Audit: audit})
			cs := connectClient(t, b, "")
			res := call(t, cs, tctx(t), ToolMessagesRead, map[string]any{"session_key": "agent:main:main", "limit": 2})
			if tt.wantErr == "" {
				if res.IsError {
					t.Fatalf("call = %q, want it to run", resultText(res))
				}
			} else if !res.IsError || !strings.Contains(resultText(res), tt.wantErr) {
				t.Fatalf("call = %q, want %q", resultText(res), tt.wantErr)
			}
			req := dec.Requests()[0]
			if req.Kind != policies.ApprovalTool || req.Tool.Name != ToolMessagesRead || req.SessionKey != "agent:main:main" ||
				req.Requester.Name != "hook-test" || req.Surface != policies.SurfaceServe || !strings.HasPrefix(req.ID, "tool:") ||
				!strings.Contains(string(req.Request), `"arguments_summary":"{\"limit\":2,\"session_key\":\"agent:main:main\"}"`) {
				t.Errorf("decide_approval saw %+v (request %s)", req, req.Request)
			}
			if tt.decision == policies.Ask {
				if r := audit.Find(AuditRouteNone); r == nil || r.Decision != "deny" {
					t.Errorf("no-route audit = %+v", r)
				}
			}
		})
	}
}

// MCP elicitation, on both the 2026-07-28 multi round trip and the
// elicitation/create of older protocol versions, with a real go-sdk
// client: approve runs the call; anything else fails with the reason.
func TestElicitationRoute(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		answer  *mcp.ElicitResult
		wantErr string
	}{
		{"approve", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, ""},
		{"deny with reason", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "deny", "reason": "not now"}}, "denied by the user: not now"},
		{"decline", &mcp.ElicitResult{Action: "decline"}, "the user declined the approval"},
		{"cancel", &mcp.ElicitResult{Action: "cancel"}, "the user dismissed the approval"},
	}
	for _, version := range []string{"", "2025-06-18"} {
		for _, tt := range tests {
			t.Run(version+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				var asked []string
				var mu sync.Mutex
				elicit := func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, req.Params.Message)
					mu.Unlock()
					// A fresh answer per call: go-sdk writes the requested
					// schema's defaults into the result's Content map, and the
					// two protocol versions' subtests run in parallel.
					answer := *tt.answer
					answer.Content = maps.Clone(tt.answer.Content)
					return &answer, nil
				}
				audit := &policiestest.AuditRecorder{}
				b := New(&fixtureGateway{t: t}, &Options{Enforcer: approvalPolicy(ToolEventsPoll, 0), Audit: audit,
					ApprovalRaiser: refusingRaiser{t}})
				cs := connectElicit(t, b, elicit, version)
				res := call(t, cs, tctx(t), ToolEventsPoll, map[string]any{"limit": 3})
				if tt.wantErr == "" {
					if res.IsError || resultText(res) != "events: 0" {
						t.Fatalf("approved call = %q", resultText(res))
					}
				} else if !res.IsError || !strings.Contains(resultText(res), tt.wantErr) {
					t.Fatalf("call = %q, want %q", resultText(res), tt.wantErr)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(asked) != 1 || !strings.Contains(asked[0], "agent calls events_poll") || !strings.Contains(asked[0], `{"limit":3}`) {
					t.Errorf("elicitation messages %q", asked)
				}
				want := "deny"
				if tt.wantErr == "" {
					want = "allow-once"
				}
				if r := audit.Find(AuditRouteElicitation); r == nil || r.Decision != want {
					t.Errorf("audit = %+v, want %s", r, want)
				}
			})
		}
	}
}

// refusingRaiser fails the test if the Gateway route is used.
type refusingRaiser struct{ t *testing.T }

func (r refusingRaiser) RaiseApproval(context.Context, string, any, func(json.RawMessage)) (json.RawMessage, error) {
	r.t.Error("the Gateway route was used although the client supports elicitation")
	return nil, context.Canceled
}

// A forged or replayed requestState never approves: the answer must come
// back for a form this session was shown, once.
func TestElicitationStateIsBound(t *testing.T) {
	t.Parallel()
	b := New(&fixtureGateway{t: t}, &Options{Enforcer: approvalPolicy(ToolEventsPoll, 0)})
	cs := connectElicit(t, b, func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
	}, "")
	res, err := cs.CallTool(tctx(t), &mcp.CallToolParams{Name: ToolEventsPoll, Arguments: map[string]any{},
		RequestState:   "forged",
		InputResponses: mcp.InputResponseMap{ElicitationInputID: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(resultText(res), "unknown or was already answered") {
		t.Errorf("forged state = %q, want a refusal", resultText(res))
	}
}

// earlyEventRaiser plays the real Gateway's order (testdata/approvals-real
// conn 3 and 4): the bridge's connection gets plugin.approval.requested
// before the raiser's accepted response, which here never comes; the
// decision arrives on release.
type earlyEventRaiser struct {
	b       **Bridge
	release chan string
}

func (r earlyEventRaiser) RaiseApproval(ctx context.Context, _ string, params any, _ func(json.RawMessage)) (json.RawMessage, error) {
	tool, toolCallID := raisedTool(params)
	(*r.b).HandleGatewayEvent("plugin.approval.requested", approvalEvent("plugin:early", tool, toolCallID))
	select {
	case d := <-r.release:
		return json.RawMessage(`{"id":"plugin:early","decision":"` + d + `"}`), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A self-approval sent before the accepted response reached the raiser is
// refused too: the bridge knows its request by the toolCallId it sent.
func TestSelfApprovalBeforeAccepted(t *testing.T) {
	t.Parallel()
	var b *Bridge
	raiser := earlyEventRaiser{b: &b, release: make(chan string, 1)}
	gw := &fixtureGateway{t: t}
	b = New(gw, &Options{Enforcer: approvalPolicy(ToolEventsPoll, 0), ApprovalRaiser: raiser})
	cs := connectClient(t, b, "")
	waiting := callAsync(tctx(t), cs, ToolEventsPoll)
	id := openApprovalID(t, cs, ToolEventsPoll)
	res := call(t, cs, tctx(t), ToolPermissionsRespond, map[string]any{"kind": "plugin", "id": id, "decision": "allow-once"})
	if !res.IsError || !strings.Contains(resultText(res), "cannot approve its own call") {
		t.Errorf("early self-approval = %q, want a refusal", resultText(res))
	}
	if calls := gw.recorded(); len(calls) != 0 {
		t.Errorf("the refused self-approval reached the gateway: %v", calls)
	}
	raiser.release <- "deny"
	if r := <-waiting; r.err != nil || !r.res.IsError || !strings.Contains(resultText(r.res), "denied on the gateway") {
		t.Errorf("denied call: %v %q", r.err, resultText(r.res))
	}
}

// silentRaiser is a Gateway that registers the approval but whose
// "accepted" answer (and, unless early, its plugin.approval.requested
// event) has not reached the bridge when the call is cancelled. raised
// gets the toolCallId the bridge sent.
type silentRaiser struct {
	b      **Bridge
	early  bool
	raised chan string
}

func (r silentRaiser) RaiseApproval(ctx context.Context, _ string, params any, _ func(json.RawMessage)) (json.RawMessage, error) {
	tool, toolCallID := raisedTool(params)
	if r.early {
		(*r.b).HandleGatewayEvent("plugin.approval.requested", approvalEvent("plugin:silent-early", tool, toolCallID))
	}
	r.raised <- toolCallID
	<-ctx.Done()
	return nil, ctx.Err()
}

// raisedTool returns the toolName and toolCallId of plugin.approval.request
// params as the bridge sent them.
func raisedTool(params any) (tool, toolCallID string) {
	var p struct {
		ToolName   string `json:"toolName"`
		ToolCallID string `json:"toolCallId"`
	}
	raw, _ := json.Marshal(params)
	_ = json.Unmarshal(raw, &p)
	return p.ToolName, p.ToolCallID
}

// approvalEvent is the payload of plugin.approval.requested for an
// approval the bridge raised.
func approvalEvent(id, tool, toolCallID string) json.RawMessage {
	ev, _ := json.Marshal(map[string]any{"approvalKind": "plugin", "id": id,
		"request": map[string]any{"pluginId": ApprovalPluginID, "toolName": tool, "toolCallId": toolCallID}})
	return ev
}

// A call cancelled before the bridge read the Gateway's answer naming its
// approval still withdraws it: found by the toolCallId the bridge sent,
// whether its plugin.approval.requested event came before the
// cancellation or comes after it. Another plugin's approval with the same
// toolCallId is left alone.
func TestCancelledBeforeAcceptedWithdraws(t *testing.T) {
	t.Parallel()
	for _, early := range []bool{true, false} {
		t.Run(fmt.Sprintf("event before the cancellation %t", early), func(t *testing.T) {
			t.Parallel()
			var b *Bridge
			raiser := silentRaiser{b: &b, early: early, raised: make(chan string, 1)}
			gw := &fixtureGateway{t: t}
			b = New(gw, &Options{Enforcer: approvalPolicy(ToolEventsPoll, 0), ApprovalRaiser: raiser})
			cs := connectClient(t, b, "")
			cctx, cancel := context.WithCancel(tctx(t))
			waiting := callAsync(cctx, cs, ToolEventsPoll)
			var toolCallID string
			select {
			case toolCallID = <-raiser.raised:
			case <-tctx(t).Done():
				t.Fatal("the approval was never raised")
			}
			cancel()
			if r := <-waiting; r.err == nil {
				t.Fatalf("cancelled call returned %q", resultText(r.res))
			}
			want := "plugin:silent-early"
			if !early {
				want = "plugin:silent-late"
				// The Gateway's event for someone else's plugin first, then ours.
				other, _ := json.Marshal(map[string]any{"approvalKind": "plugin", "id": "plugin:other",
					"request": map[string]any{"pluginId": "another-plugin", "toolName": ToolEventsPoll, "toolCallId": toolCallID}})
				// The raise may still be unwinding: wait until it gave up
				// on the approval before the events arrive.
				for ctx := tctx(t); ; time.Sleep(5 * time.Millisecond) {
					b.approvals.mu.Lock()
					_, waitingForIt := b.approvals.orphans[toolCallID]
					b.approvals.mu.Unlock()
					if waitingForIt {
						break
					}
					if ctx.Err() != nil {
						t.Fatal("the bridge never started waiting for the approval's event")
					}
				}
				b.HandleGatewayEvent("plugin.approval.requested", other)
				b.HandleGatewayEvent("plugin.approval.requested", approvalEvent(want, ToolEventsPoll, toolCallID))
			}
			var resolved []string
			for ctx := tctx(t); ctx.Err() == nil; time.Sleep(5 * time.Millisecond) {
				resolved = resolved[:0]
				for _, c := range gw.recorded() {
					if c.Method == "plugin.approval.resolve" {
						resolved = append(resolved, string(c.Params))
					}
				}
				if len(resolved) > 0 {
					break
				}
			}
			if len(resolved) != 1 || !strings.Contains(resolved[0], `"id":"`+want+`"`) || !strings.Contains(resolved[0], `"decision":"deny"`) {
				t.Errorf("resolves sent = %v, want one deny of %s", resolved, want)
			}
		})
	}
}
