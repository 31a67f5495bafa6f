package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/openclaw-go/openclaw/internal/jsonw"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/policies"
)

// ApprovalRaiser raises a two-phase Gateway approval request on a Gateway
// connection other than the bridge's own (the Gateway never shows a request
// to the connection that raised it, docs/protocol-facts.md, Approval delivery) and returns
// the final payload {"id","decision":<string|null>,…}. accepted receives
// the interim {"status":"accepted","id",…} payload, if one comes. When ctx
// ends, RaiseApproval returns ctx's error and the request may still be open
// on the Gateway. *gwclient.ApprovalRaiser implements it.
type ApprovalRaiser interface {
	RaiseApproval(ctx context.Context, method string, params any, accepted func(payload json.RawMessage)) (json.RawMessage, error)
}

// Approval routing constants.
const (
	// DefaultToolApprovalTTL is how long a human has to answer a tool
	// approval when neither decide_approval (ttl_ms) nor the
	// before_tool_call verdict (timeout_ms) says: the Gateway's own default
	// for plugin approvals (docs/protocol-facts.md, Gateway RPCs).
	DefaultToolApprovalTTL = 2 * time.Minute
	// ApprovalPluginID is the pluginId of the plugin approvals the bridge
	// raises on the Gateway.
	ApprovalPluginID = "openclaw-go"
	// ElicitationInputID is the key of the approval form in the
	// inputRequests of an input-required tools/call result.
	ElicitationInputID = "approval"
	// maxPendingElicitations bounds the approval forms awaiting an answer.
	maxPendingElicitations = 256
	// withdrawTimeout bounds the deny sent to withdraw an approval.
	withdrawTimeout = 10 * time.Second
	// raiseGrace is how long past the TTL the bridge waits for the
	// Gateway's own expiry before it gives up and withdraws the request.
	raiseGrace = 5 * time.Second
)

// Module names of the audit records the routing writes (hook
// decide_approval): which route decided a tool approval.
const (
	AuditRouteElicitation = "bridge:elicitation"
	AuditRouteGateway     = "bridge:gateway"
	AuditRouteNone        = "bridge:no-route"
	AuditRouteSelf        = "bridge:self-approval"
	AuditRouteAgent       = "bridge:agent-approval"
)

// routing is the bridge's approval routing state.
type routing struct {
	decider policies.ApprovalDecider
	raiser  ApprovalRaiser
	memory  *policies.ApprovalMemory
	audit   policies.AuditSink
	now     func() time.Time

	mu      sync.Mutex
	elicits map[string]*pendingElicit // requestState → form awaiting its answer
	raised  map[string]raisedApproval // Gateway approval id → the call waiting on it
	raising map[string]raisedApproval // toolCallId we sent → the call waiting on it
}

// raisedApproval is a Gateway approval the bridge raised and waits on.
type raisedApproval struct {
	session    *mcp.ServerSession
	sessionKey string
	tool       string
}

// pendingElicit is an approval form sent to the MCP client in an
// input-required result, awaiting the retried call that answers it.
type pendingElicit struct {
	session  *mcp.ServerSession
	tool     string
	args     string // the arguments the policy saw, compact JSON
	req      *policies.ApprovalRequest
	deadline time.Time
}

func newRouting(o *Options) *routing {
	r := &routing{decider: o.ApprovalDecider, raiser: o.ApprovalRaiser, memory: o.ApprovalMemory, audit: o.Audit,
		now: o.Now, elicits: map[string]*pendingElicit{}, raised: map[string]raisedApproval{},
		raising: map[string]raisedApproval{}}
	if r.memory == nil {
		r.memory = policies.NewApprovalMemory(&policies.ApprovalMemoryOptions{Now: o.Now})
	}
	return r
}

// record writes one routing decision to the audit sink.
func (r *routing) record(req *policies.ApprovalRequest, module string, decision policies.ApprovalDecision, reason string, start time.Time) {
	if r.audit == nil {
		return
	}
	tool := req.Tool.Name
	if tool == "" {
		tool = string(req.Kind) // an exec approval, as policies.ApprovalChain records it
	}
	r.audit.Record(policies.AuditRecord{Time: start.UTC(), Hook: policies.HookDecideApproval, Surface: req.Surface,
		SessionKey: req.SessionKey, Caller: req.Requester.Name, Tool: tool, Server: req.Tool.Server,
		Module: module, Mode: policies.Enforce, Decision: string(decision), Reason: reason,
		DurationUs: r.now().Sub(start).Microseconds()})
}

// summarize shortens a compact JSON value for a human: at most 200 bytes,
// cut on a rune boundary with "…".
func summarize(raw json.RawMessage) string {
	s := string(jsonw.Compact(raw))
	if len(s) <= 200 {
		return s
	}
	cut := 200
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// toolApprovalRequest builds the decide_approval input for a
// require_approval verdict on call.
func toolApprovalRequest(call *policies.ToolCall, d *policies.Outcome, id string) *policies.ApprovalRequest {
	o := jsonw.NewObject(nil)
	for _, kv := range [][2]string{{"reason", d.Reason}, {"title", d.Title}, {"description", d.Description}, {"module", d.Module}} {
		if kv[1] != "" {
			o.Str(kv[0], kv[1])
		}
	}
	o.Str("arguments_summary", summarize(call.Arguments))
	return &policies.ApprovalRequest{Kind: policies.ApprovalTool, ID: id, Surface: call.Surface,
		SessionKey: call.SessionKey, Requester: call.Caller, Tool: call.Tool, Request: o.Close()}
}

// approve routes a require_approval verdict. It returns nil when the call
// may run, or the result to answer instead: an isError result, or an
// input-required result carrying the approval form.
func (b *Bridge) approve(ctx context.Context, req *mcp.CallToolRequest, call *policies.ToolCall, d *policies.Outcome) *mcp.CallToolResult {
	r := b.routing
	// A retried call answering our approval form.
	if st := req.Params.RequestState; st != "" {
		return b.elicitAnswer(req, call, d, st)
	}
	id, err := newID()
	if err != nil {
		return errorResult(d.Message() + "; generating the approval id failed: " + err.Error())
	}
	areq := toolApprovalRequest(call, d, "tool:"+id)
	out := policies.ApprovalOutcome{Decision: policies.Ask}
	if r.decider != nil {
		out = r.decider.DecideApproval(ctx, areq)
	}
	if out.Decision == policies.Ask {
		start := r.now()
		if r.memory.Recall(areq) {
			out = policies.ApprovalOutcome{Decision: policies.AllowAlways, Module: policies.MemoryModule,
				Reason: "a human allowed it always earlier in this session"}
			r.record(areq, policies.MemoryModule, out.Decision, out.Reason, start)
		}
	}
	switch out.Decision {
	case policies.AllowOnce, policies.AllowAlways:
		return nil
	case policies.Deny:
		return errorResult(fmt.Sprintf("%s; denied by approval policy %q%s", d.Message(), out.Module, colon(out.Reason)))
	case policies.Ask:
	default:
		return errorResult(fmt.Sprintf("%s; approval policy returned the unknown decision %q", d.Message(), out.Decision))
	}
	ttl := out.TTL
	if ttl <= 0 {
		ttl = time.Duration(d.TimeoutMs) * time.Millisecond
	}
	if ttl <= 0 {
		ttl = DefaultToolApprovalTTL
	}
	if caps := req.ClientCapabilities(); caps != nil && caps.Elicitation != nil {
		return b.elicit(req, call, d, areq, ttl)
	}
	if r.raiser != nil {
		return b.raiseOnGateway(ctx, req, call, d, areq, ttl)
	}
	r.record(areq, AuditRouteNone, policies.Deny, "no approval route is configured", r.now())
	return errorResult(d.Message() + "; no approval route is configured")
}

func colon(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}

// approvalTitle is the one-line question shown to a human.
func approvalTitle(call *policies.ApprovalRequest, d *policies.Outcome) string {
	if d.Title != "" {
		return d.Title
	}
	return fmt.Sprintf("Allow the MCP tool call %s?", call.Tool.Name)
}

// approvalDescription says who asks for what, and why.
func approvalDescription(areq *policies.ApprovalRequest, d *policies.Outcome, args json.RawMessage) string {
	var sb strings.Builder
	if d.Description != "" {
		sb.WriteString(d.Description)
		sb.WriteString("\n")
	}
	who := areq.Requester.Name
	if who == "" {
		who = "an MCP client"
	}
	fmt.Fprintf(&sb, "%s calls %s on openclaw mcp serve", who, areq.Tool.Name)
	if areq.SessionKey != "" {
		fmt.Fprintf(&sb, " (session %s)", areq.SessionKey)
	}
	fmt.Fprintf(&sb, " with %s.\n%s", summarize(args), d.Message())
	return sb.String()
}

// elicitSchema is the approval form: a decision and an optional reason.
var elicitSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"decision":{"type":"string","title":"Decision","enum":["approve","deny"]},` +
	`"reason":{"type":"string","title":"Reason (optional)"}},"required":["decision"]}`)

// elicit answers with an input-required result carrying the approval form
// (MCP elicitation, SEP-2322 multi round trip): go-sdk shows it to a
// client on protocol 2026-07-28 as inputRequests and retries the call with
// the answer, and for older clients sends elicitation/create itself and
// reinvokes the handler. The form is bound to this session, tool and
// arguments by an unguessable requestState kept here until the TTL.
func (b *Bridge) elicit(req *mcp.CallToolRequest, call *policies.ToolCall, d *policies.Outcome, areq *policies.ApprovalRequest, ttl time.Duration) *mcp.CallToolResult {
	r := b.routing
	state, err := newID()
	if err != nil {
		return errorResult(d.Message() + "; generating the approval form id failed: " + err.Error())
	}
	now := r.now()
	r.mu.Lock()
	for k, p := range r.elicits {
		if !now.Before(p.deadline) {
			delete(r.elicits, k)
		}
	}
	full := len(r.elicits) >= maxPendingElicitations
	if !full {
		r.elicits[state] = &pendingElicit{session: req.Session, tool: call.Tool.Name, args: string(jsonw.Compact(call.Arguments)),
			req: areq, deadline: now.Add(ttl)}
	}
	r.mu.Unlock()
	if full {
		r.record(areq, AuditRouteElicitation, policies.Deny, "too many approval forms are open", now)
		return errorResult(d.Message() + "; too many approval forms are open, try again later")
	}
	msg := approvalTitle(areq, d) + "\n" + approvalDescription(areq, d, call.Arguments) +
		fmt.Sprintf("\nAnswer within %s.", roundTTL(ttl))
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{ElicitationInputID: &mcp.ElicitParams{Mode: "form", Message: msg, RequestedSchema: elicitSchema}},
		RequestState:  state,
	}
}

// elicitAnswer reads the answer to an approval form from a retried call.
func (b *Bridge) elicitAnswer(req *mcp.CallToolRequest, call *policies.ToolCall, d *policies.Outcome, state string) *mcp.CallToolResult {
	r := b.routing
	now := r.now()
	r.mu.Lock()
	p := r.elicits[state]
	delete(r.elicits, state)
	r.mu.Unlock()
	deny := func(areq *policies.ApprovalRequest, reason string) *mcp.CallToolResult {
		if areq == nil {
			areq = toolApprovalRequest(call, d, "")
		}
		r.record(areq, AuditRouteElicitation, policies.Deny, reason, now)
		return errorResult(d.Message() + "; " + reason)
	}
	switch {
	case p == nil:
		return deny(nil, "the approval form is unknown or was already answered")
	case p.session != req.Session || p.tool != call.Tool.Name || p.args != string(jsonw.Compact(call.Arguments)):
		return deny(p.req, "the approval form was answered for another call")
	case !now.Before(p.deadline):
		return deny(p.req, "the approval expired before it was answered")
	}
	res, _ := req.Params.InputResponses[ElicitationInputID].(*mcp.ElicitResult)
	switch {
	case res == nil:
		return deny(p.req, "the approval form came back without an answer")
	case res.Action == "decline":
		return deny(p.req, "the user declined the approval")
	case res.Action == "cancel":
		return deny(p.req, "the user dismissed the approval")
	case res.Action != "accept":
		return deny(p.req, fmt.Sprintf("the approval form came back with the unknown action %q", res.Action))
	}
	decision, _ := res.Content["decision"].(string)
	reason, _ := res.Content["reason"].(string)
	if decision != "approve" {
		if reason == "" {
			return deny(p.req, "denied by the user")
		}
		return deny(p.req, "denied by the user: "+reason)
	}
	r.record(p.req, AuditRouteElicitation, policies.AllowOnce, reason, now)
	return nil
}

// pluginApprovalParams are the plugin.approval.request params for a tool
// approval, in OpenClaw's key order.
func pluginApprovalParams(areq *policies.ApprovalRequest, d *policies.Outcome, args json.RawMessage, ttl time.Duration) json.RawMessage {
	o := jsonw.NewObject(nil)
	o.Str("pluginId", ApprovalPluginID)
	o.Str("title", approvalTitle(areq, d))
	o.Str("description", approvalDescription(areq, d, args))
	o.Str("toolName", areq.Tool.Name)
	o.Str("toolCallId", areq.ID)
	o.Bool("twoPhase", true)
	o.Int("timeoutMs", max(ttl.Milliseconds(), 1))
	return o.Close()
}

// raiseOnGateway raises a plugin approval on the Gateway and waits for its
// decision, bounded by ttl (plus a grace for the Gateway's own expiry) and
// by ctx (MCP cancellation): either withdraws the approval with a deny.
func (b *Bridge) raiseOnGateway(ctx context.Context, req *mcp.CallToolRequest, call *policies.ToolCall, d *policies.Outcome, areq *policies.ApprovalRequest, ttl time.Duration) *mcp.CallToolResult {
	r := b.routing
	start := r.now()
	params := pluginApprovalParams(areq, d, call.Arguments, ttl)

	// The Gateway may deliver plugin.approval.requested to the bridge's
	// connection before the accepted response reaches the raiser: the call
	// is known by its toolCallId from the start, so that a self-approval
	// in that window is recognised too.
	mine := raisedApproval{session: req.Session, sessionKey: areq.SessionKey, tool: areq.Tool.Name}
	r.mu.Lock()
	r.raising[areq.ID] = mine
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.raising, areq.ID)
		r.mu.Unlock()
	}()
	var (
		idMu sync.Mutex
		id   string
	)
	accepted := func(payload json.RawMessage) {
		var acc struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(payload, &acc) != nil || normalizeApprovalID(acc.ID) == "" {
			return
		}
		aid := normalizeApprovalID(acc.ID)
		idMu.Lock()
		id = aid
		idMu.Unlock()
		r.mu.Lock()
		r.raised[aid] = mine
		r.mu.Unlock()
	}
	wctx, cancel := context.WithTimeout(ctx, ttl+raiseGrace)
	payload, err := r.raiser.RaiseApproval(wctx, "plugin.approval.request", params, accepted)
	cancel()
	idMu.Lock()
	aid := id
	idMu.Unlock()
	if aid != "" {
		r.mu.Lock()
		delete(r.raised, aid)
		r.mu.Unlock()
	}
	deny := func(reason string) *mcp.CallToolResult {
		r.record(areq, AuditRouteGateway, policies.Deny, reason, start)
		return errorResult(d.Message() + "; " + reason)
	}
	if err != nil {
		switch {
		case aid != "" && ctx.Err() != nil:
			b.withdraw(ctx, aid)
			return deny(fmt.Sprintf("the call was cancelled; approval %s withdrawn", aid))
		case aid != "" && wctx.Err() != nil:
			b.withdraw(ctx, aid)
			return deny(fmt.Sprintf("approval %s expired after %s without a decision", aid, roundTTL(ttl)))
		case ctx.Err() != nil:
			// The Gateway may have registered it without the bridge
			// having read its id: find it by the toolCallId sent, now or
			// when its plugin.approval.requested event arrives.
			bg := context.WithoutCancel(ctx)
			if id := b.approvals.claimOwn(areq.ID, r.now().Add(ttl+raiseGrace), func(id string) { b.withdraw(bg, id) }); id != "" {
				b.withdraw(ctx, id)
				return deny(fmt.Sprintf("the call was cancelled; approval %s withdrawn", id))
			}
			return deny("the call was cancelled before the gateway named the approval (withdrawn if it registered one)")
		}
		return deny("the approval could not be raised on the gateway: " + err.Error())
	}
	var final struct {
		ID       string  `json:"id"`
		Decision *string `json:"decision"`
	}
	if err := json.Unmarshal(payload, &final); err != nil {
		return deny("the gateway's approval answer is not readable: " + err.Error())
	}
	wasAccepted := aid != ""
	if !wasAccepted {
		aid = normalizeApprovalID(final.ID)
	}
	switch {
	case final.Decision == nil && !wasAccepted:
		return deny(fmt.Sprintf("no approver can see approval %s, so the gateway expired it at once "+
			"(connect an approval client of this device, or the control UI)", aid))
	case final.Decision == nil:
		return deny(fmt.Sprintf("approval %s expired after %s without a decision", aid, roundTTL(ttl)))
	}
	switch policies.ApprovalDecision(*final.Decision) {
	case policies.AllowOnce:
		r.record(areq, AuditRouteGateway, policies.AllowOnce, "approval "+aid, start)
		return nil
	case policies.AllowAlways:
		r.memory.Remember(areq, 0)
		r.record(areq, AuditRouteGateway, policies.AllowAlways, "approval "+aid, start)
		return nil
	case policies.Deny:
		return deny(fmt.Sprintf("approval %s was denied on the gateway", aid))
	}
	return deny(fmt.Sprintf("approval %s came back with the unknown decision %q", aid, *final.Decision))
}

// withdraw resolves an approval the bridge raised with deny, so that the
// Gateway's approval surfaces stop showing it. Best effort: a failure is
// logged.
func (b *Bridge) withdraw(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), withdrawTimeout)
	defer cancel()
	p := jsonw.NewObject(nil)
	p.Str("id", id)
	p.Str("decision", string(policies.Deny))
	if _, err := b.request(ctx, "plugin.approval.resolve", p.Close()); err != nil {
		b.log.Warn("openclaw mcp: withdrawing approval "+id+" failed", "error", err)
	}
}

// ErrSelfApproval is the reason a permissions_respond is refused when it
// answers an approval raised by a call of the same MCP session.
var ErrSelfApproval = errors.New("an agent cannot approve its own call")

// ErrAgentApproval is the reason a permissions_respond is refused when it
// answers a plugin approval an openclaw-go policy raised (pluginId
// [ApprovalPluginID]) for another call, of this bridge or of another one,
// or one the bridge cannot tell apart from such an approval.
var ErrAgentApproval = errors.New("an agent cannot answer an approval an openclaw-go policy raised")

// checkAgentApproval decides whether permissions_respond may answer
// approval id (canonical: trimmed) of kind. A require_approval verdict of
// an openclaw-go policy asks a human; an agent answering it through
// permissions_respond, from any `mcp serve`, would turn the approval into
// a formality. So the bridge refuses a plugin approval (exec approvals are
// OpenClaw's own, never raised by openclaw-go) when it is:
//   - raised by a call of this MCP session (self-approval, audited as
//     [AuditRouteSelf]);
//   - raised by this bridge for another MCP session, or seen in a
//     plugin.approval.requested event with pluginId "openclaw-go" (another
//     bridge's), audited as [AuditRouteAgent];
//   - not open in the bridge's tracker under exactly that id (audited as
//     [AuditRouteAgent]): the Gateway also resolves an id by a
//     case-insensitive unique prefix among all its pending approvals
//     (OpenClaw ExecApprovalLifecycle.lookupLocalApprovalId), so an id the
//     bridge cannot name may be an openclaw-go approval it never saw.
//
// Unless decide_approval allows it: the bridge asks with kind "tool",
// tool "permissions_respond", the responding client as requester, the
// raising call's session key when known and request
// {"self_approval","agent_approval":true,"approval_id","decision","tool"?};
// only allow-once or allow-always lets it through (an empty chain asks,
// which refuses). Humans answer in OpenClaw (the control UI, approval
// clients, chat channels) or through the MCP client's own approval form.
func (b *Bridge) checkAgentApproval(ctx context.Context, session *mcp.ServerSession, call *policies.ToolCall, a *args) *mcp.CallToolResult {
	kind, _ := a.str("kind")
	if kind != "plugin" {
		return nil
	}
	r := b.routing
	id, _ := a.str("id")
	id = normalizeApprovalID(id)
	tracked := b.approvals.get(id)
	toolCallID := ""
	if tracked != nil {
		toolCallID = tracked.toolCallID
	}
	r.mu.Lock()
	raised, ours := r.raised[id]
	if !ours && toolCallID != "" {
		raised, ours = r.raising[toolCallID]
	}
	r.mu.Unlock()
	self := ours && raised.session == session
	var why string
	switch {
	case self:
		why = fmt.Sprintf("approval %s was raised by a call of this MCP session and %s", id, ErrSelfApproval)
	case ours:
		why = fmt.Sprintf("approval %s was raised by an openclaw-go policy for a call of another MCP session, and %s", id, ErrAgentApproval)
	case tracked != nil && tracked.pluginID == ApprovalPluginID:
		raised.tool = tracked.toolName
		why = fmt.Sprintf("approval %s was raised by an openclaw-go policy (pluginId %q), and %s", id, ApprovalPluginID, ErrAgentApproval)
	case tracked != nil:
		return nil // another plugin's approval, open under exactly this id
	default:
		why = fmt.Sprintf("plugin approval %s is not open under that exact id in this bridge, so it may be one an "+
			"openclaw-go policy raised (the Gateway also matches an id prefix), and %s", id, ErrAgentApproval)
	}
	decision, _ := a.str("decision")
	o := jsonw.NewObject(nil)
	o.Bool("self_approval", self)
	o.Bool("agent_approval", true)
	o.Str("approval_id", id)
	o.Str("decision", decision)
	if raised.tool != "" {
		o.Str("tool", raised.tool)
	}
	areq := &policies.ApprovalRequest{Kind: policies.ApprovalTool, ID: id, Surface: policies.SurfaceServe,
		SessionKey: raised.sessionKey, Requester: call.Caller, Tool: policies.ToolRef{Name: ToolPermissionsRespond},
		Request: o.Close()}
	route := AuditRouteAgent
	if self {
		route = AuditRouteSelf
	}
	start := r.now()
	if r.decider != nil {
		out := r.decider.DecideApproval(ctx, areq)
		if out.Decision == policies.AllowOnce || out.Decision == policies.AllowAlways {
			what := "agent approval"
			if self {
				what = "self-approval"
			}
			r.record(areq, route, out.Decision, fmt.Sprintf("%s allowed by %q", what, out.Module), start)
			return nil
		}
	}
	r.record(areq, route, policies.Deny, why, start)
	return errorResult("refused: " + why + "; a human must answer it in OpenClaw, or a decide_approval " +
		"policy must allow permissions_respond for this requester")
}

// roundTTL shortens a TTL for messages: whole seconds from 10 s up,
// tenths of a second below.
func roundTTL(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}
