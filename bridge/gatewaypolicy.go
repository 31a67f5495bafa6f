package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/openclaw-go/openclaw/internal/jsonw"
	"sync"
	"time"

	"github.com/openclaw-go/openclaw/policies"
)

// AuditGatewayPolicy is the module of the audit record (hook
// decide_approval) the bridge writes for each Gateway exec or plugin
// approval that decide_approval answered: the decision it resolved on the
// Gateway (allow-once, allow-always, deny), or ask when it left the
// request to a human.
const AuditGatewayPolicy = "bridge:gateway-policy"

// Gateway approval policy constants.
const (
	// gatewayDecideQueue bounds the Gateway approvals waiting for
	// decide_approval; beyond it a request is left to a human and logged.
	gatewayDecideQueue = 64
	// resolveTimeout bounds one *.approval.resolve request.
	resolveTimeout = 10 * time.Second
)

// gatewayApprovalJob is one *.approval.requested event awaiting
// decide_approval.
type gatewayApprovalJob struct {
	kind    policies.ApprovalKind
	id      string
	request json.RawMessage // the event's request object
	// expired marks the job a timer queues when the ttl_ms of an ask has
	// passed: deny the approval if it is still open.
	expired time.Duration
}

// gatewayDecider runs decide_approval for the Gateway's exec and plugin
// approval requests on one worker goroutine, off the Gateway client's read
// loop (which must not wait on a Gateway request). The worker starts with
// the first request and ends on close, which also stops the timers that
// deny an ask whose ttl_ms has passed.
type gatewayDecider struct {
	mu      sync.Mutex
	jobs    chan gatewayApprovalJob
	cancel  context.CancelFunc
	started bool
	closed  bool
	timers  map[string]*time.Timer // approval id → deny of an expired ask
	wg      sync.WaitGroup
}

// submit hands job to the worker, starting it if needed; it never blocks.
// It reports false when the queue is full or the bridge is closed.
func (d *gatewayDecider) submit(b *Bridge, job gatewayApprovalJob) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	if !d.started {
		d.started = true
		d.jobs = make(chan gatewayApprovalJob, gatewayDecideQueue)
		ctx, cancel := context.WithCancel(context.Background())
		d.cancel = cancel
		d.wg.Go(func() { d.run(ctx, b) })
	}
	select {
	case d.jobs <- job:
		return true
	default:
		return false
	}
}

func (d *gatewayDecider) run(ctx context.Context, b *Bridge) {
	for {
		select {
		case <-ctx.Done():
			return
		case job := <-d.jobs:
			b.decideGatewayApproval(ctx, job)
		}
	}
}

// close stops the worker, abandoning queued requests (they stay open for
// a human), and waits for it to end.
func (d *gatewayDecider) close() {
	d.mu.Lock()
	d.closed = true
	if d.cancel != nil {
		d.cancel()
	}
	for id, t := range d.timers {
		t.Stop()
		delete(d.timers, id)
	}
	d.mu.Unlock()
	d.wg.Wait()
}

// denyAfter queues a deny of job's approval once ttl has passed, unless
// the approval is resolved first ([gatewayDecider.forget]).
func (d *gatewayDecider) denyAfter(b *Bridge, job gatewayApprovalJob, ttl time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	if d.timers == nil {
		d.timers = map[string]*time.Timer{}
	}
	if old := d.timers[job.id]; old != nil {
		old.Stop()
	}
	job.expired = ttl
	var t *time.Timer
	t = time.AfterFunc(ttl, func() {
		d.mu.Lock()
		mine := d.timers[job.id] == t
		if mine {
			delete(d.timers, job.id)
		}
		d.mu.Unlock()
		if mine && !d.submit(b, job) {
			b.log.Warn("openclaw mcp: "+string(job.kind)+" approval "+job.id+" not denied after its ask ttl",
				"error", "the approval policy queue is full or the bridge is closed")
		}
	})
	d.timers[job.id] = t
}

// forget stops the pending deny of approval id, which was resolved.
func (d *gatewayDecider) forget(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t := d.timers[id]; t != nil {
		t.Stop()
		delete(d.timers, id)
	}
}

// onGatewayApprovalRequested queues an exec or plugin approval the Gateway
// announced for decide_approval. Without an approval policy (nil
// Options.ApprovalDecider) every request is left to a human, as is one this
// bridge raised itself for a require_approval call (pluginId
// [ApprovalPluginID] with the id or toolCallId of a call waiting here):
// its policy already answered ask for that call.
func (b *Bridge) onGatewayApprovalRequested(kind policies.ApprovalKind, payload json.RawMessage) {
	r := b.routing
	if r.decider == nil {
		return
	}
	var p struct {
		ApprovalKind string          `json:"approvalKind"`
		ID           json.RawMessage `json:"id"`
		Request      json.RawMessage `json:"request"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return
	}
	id, ok := rawString(p.ID)
	if id = normalizeApprovalID(id); !ok || id == "" {
		return
	}
	if k := policies.ApprovalKind(p.ApprovalKind); k == policies.ApprovalExec || k == policies.ApprovalPlugin {
		kind = k
	}
	if kindOf(p.Request) != kindObject {
		b.log.Warn("openclaw mcp: "+string(kind)+" approval "+id+" left to a human", "error", "the event has no request object")
		return
	}
	if kind == policies.ApprovalPlugin && b.raisedHere(id, p.Request) {
		return
	}
	if !b.gwDecide.submit(b, gatewayApprovalJob{kind: kind, id: id, request: jsonw.Compact(p.Request)}) {
		b.log.Warn("openclaw mcp: "+string(kind)+" approval "+id+" left to a human",
			"error", "the approval policy queue is full or the bridge is closed")
	}
}

// raisedHere reports whether plugin approval id, with its request object,
// is one this bridge raised for a call waiting on it.
func (b *Bridge) raisedHere(id string, request json.RawMessage) bool {
	var req struct {
		PluginID   string `json:"pluginId"`
		ToolCallID string `json:"toolCallId"`
	}
	if json.Unmarshal(request, &req) != nil || req.PluginID != ApprovalPluginID {
		return false
	}
	r := b.routing
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.raised[id]; ok {
		return true
	}
	_, ok := r.raising[req.ToolCallID]
	return ok && req.ToolCallID != ""
}

// decideGatewayApproval asks decide_approval about one Gateway approval
// and resolves it on the Gateway unless the answer is ask. An ask is
// answered from the bridge's memory of a human's allow-always, as for tool
// approvals; an ask with a ttl_ms shorter than the request's own expiry is
// denied when that TTL passes without an answer (docs/policy-abi.md §6.2).
// A resolve error is logged and audited, never fatal.
func (b *Bridge) decideGatewayApproval(ctx context.Context, job gatewayApprovalJob) {
	r := b.routing
	start := r.now()
	areq, err := policies.GatewayApprovalRequest(job.kind, job.id, job.request)
	if err != nil {
		b.log.Warn("openclaw mcp: "+string(job.kind)+" approval "+job.id+" left to a human", "error", err)
		return
	}
	var out policies.ApprovalOutcome
	var by string
	if job.expired > 0 {
		if _, open := b.approvals.deadline(job.id); !open {
			return // answered, or expired on the Gateway, in the meantime
		}
		out.Decision = policies.Deny
		by = fmt.Sprintf("the approval policy's ask ttl of %s passing without a human's answer", roundTTL(job.expired))
	} else {
		out = r.decider.DecideApproval(ctx, areq)
		if ctx.Err() != nil {
			return // closing: the request stays open for a human
		}
		if out.Decision == policies.Ask && r.memory.Recall(areq) {
			out = policies.ApprovalOutcome{Decision: policies.AllowAlways, Module: policies.MemoryModule,
				Reason: "a human allowed it always earlier in this session"}
		}
		by = fmt.Sprintf("approval policy %q%s", out.Module, colon(out.Reason))
	}
	switch out.Decision {
	case policies.Ask:
		if deadline, open := b.approvals.deadline(job.id); open && out.TTL > 0 && r.now().Add(out.TTL).Before(deadline) {
			b.gwDecide.denyAfter(b, job, out.TTL)
			by += fmt.Sprintf(", denied unless answered within %s", roundTTL(out.TTL))
		}
		r.record(areq, AuditGatewayPolicy, policies.Ask, fmt.Sprintf("%s approval %s left to a human by %s", job.kind, job.id, by), start)
		return
	case policies.AllowOnce, policies.AllowAlways, policies.Deny:
	default:
		// Fail closed: an answer that is none of the four denies.
		by = fmt.Sprintf("approval policy %q answered the unknown decision %q", out.Module, out.Decision)
		out.Decision = policies.Deny
	}
	reason := fmt.Sprintf("%s approval %s resolved %s on the gateway by %s", job.kind, job.id, out.Decision, by)
	p := jsonw.NewObject(nil)
	p.Str("id", job.id)
	p.Str("decision", string(out.Decision))
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	_, err = b.request(rctx, string(job.kind)+".approval.resolve", p.Close())
	cancel()
	if err != nil {
		reason = fmt.Sprintf("%s approval %s: resolving %s (decided by %s) on the gateway failed: %v",
			job.kind, job.id, out.Decision, by, err)
		b.log.Warn("openclaw mcp: resolving "+string(job.kind)+" approval "+job.id+" failed", "error", err)
	}
	r.record(areq, AuditGatewayPolicy, out.Decision, reason, start)
}

// forgetGatewayApproval stops the pending ask-TTL deny of the approval a
// *.approval.resolved payload names.
func (b *Bridge) forgetGatewayApproval(payload json.RawMessage) {
	var p struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return
	}
	if id, ok := rawString(p.ID); ok {
		b.gwDecide.forget(normalizeApprovalID(id))
	}
}
