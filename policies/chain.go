package policies

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Mode says whether a module's verdicts are enforced.
type Mode string

// Module modes.
const (
	// Enforce applies the module's verdict (the default).
	Enforce Mode = "enforce"
	// AuditOnly records what the module would decide and never blocks: how a
	// team rolls out a new policy safely.
	AuditOnly Mode = "audit"
)

// ChainEntry is one module of a chain with its mode ("" means Enforce).
type ChainEntry struct {
	Hook BeforeToolCallHook
	Mode Mode
}

// ChainOptions configure a [Chain]. The zero value is usable: no audit log,
// the wall clock.
type ChainOptions struct {
	// Audit receives one record per module verdict; nil discards them.
	Audit AuditSink
	// Now is the clock for audit timestamps; nil means time.Now.
	Now func() time.Time
}

// Chain runs before_tool_call modules in order and combines their verdicts
// (package doc). It is safe for concurrent use; an empty chain allows.
type Chain struct {
	entries []ChainEntry
	audit   AuditSink
	now     func() time.Time
}

// NewChain returns a chain over entries, which are copied.
func NewChain(entries []ChainEntry, opts *ChainOptions) *Chain {
	c := &Chain{entries: append([]ChainEntry(nil), entries...), now: time.Now}
	if opts != nil {
		c.audit = opts.Audit
		if opts.Now != nil {
			c.now = opts.Now
		}
	}
	return c
}

// Modules returns the names and modes of the chain's modules, in order.
func (c *Chain) Modules() []ChainEntry { return append([]ChainEntry(nil), c.entries...) }

// ErrInvalidVerdict is wrapped when a module answers with an outcome that
// is not allow, block or require_approval.
var ErrInvalidVerdict = errors.New("policies: invalid verdict")

// BeforeToolCall runs the chain for one call. It never returns an error: a
// failing module is a block whose reason names the module and the failure.
func (c *Chain) BeforeToolCall(ctx context.Context, call *ToolCall) Outcome {
	d := Outcome{Decision: Allow, Arguments: call.Arguments}
	cur := *call
	for _, e := range c.entries {
		name := e.Hook.Name()
		start := c.now()
		v, err := e.Hook.BeforeToolCall(ctx, &cur)
		if err != nil && errors.Is(ctx.Err(), context.Canceled) {
			// The caller gave up (MCP cancellation): the call will not
			// run, and the module did not fail. Audit it as a
			// cancellation, not as a module failure. (A caller's deadline
			// that expires while the module runs stays a timeout of the
			// module.)
			v = Verdict{Decision: Block, Reason: "the call was cancelled before the policy decided"}
			c.recordDecision(ctx, &cur, name, e.Mode, DecisionCancelled, v.Reason, ctx.Err(), start)
			return Outcome{Decision: Block, Reason: v.Reason, Module: name, Arguments: d.Arguments}
		}
		if err == nil && !v.Decision.Valid() {
			err = fmt.Errorf("%w: unknown decision %q", ErrInvalidVerdict, v.Decision)
		}
		if err != nil {
			v = Verdict{Decision: Block, Reason: fmt.Sprintf("policy module failed: %v", err)}
		}
		mode := e.Mode
		if mode == "" {
			mode = Enforce
		}
		c.record(ctx, &cur, name, mode, v, err, start)
		if mode == AuditOnly {
			continue
		}
		if len(v.Arguments) > 0 && v.Decision != Block {
			cur.Arguments = v.Arguments
			d.Arguments = v.Arguments
			d.RewrittenBy = name
		}
		if v.Decision.rank() > d.Decision.rank() {
			d = Outcome{Decision: v.Decision, Reason: v.Reason, Module: name, Title: v.Title,
				Description: v.Description, TimeoutMs: v.TimeoutMs, Arguments: d.Arguments, RewrittenBy: d.RewrittenBy}
		}
		if d.Decision == Block {
			break
		}
	}
	return d
}

// DecisionCancelled is the audit decision of a call whose caller gave up
// while a module was deciding.
const DecisionCancelled = "cancelled"

func (c *Chain) record(ctx context.Context, call *ToolCall, module string, mode Mode, v Verdict, err error, start time.Time) {
	c.recordDecision(ctx, call, module, mode, string(v.Decision), v.Reason, err, start)
}

// recordDecision audits one module run and tells the context's
// RunObserver of it.
func (c *Chain) recordDecision(ctx context.Context, call *ToolCall, module string, mode Mode, decision, reason string, err error, start time.Time) {
	obs := runObserver(ctx)
	if c.audit == nil && obs == nil {
		return
	}
	if mode == "" {
		mode = Enforce
	}
	r := AuditRecord{Time: start.UTC(), Hook: HookBeforeToolCall, Surface: call.Surface,
		SessionKey: call.SessionKey, Caller: call.Caller.Name, Tool: call.Tool.Name, Server: call.Tool.Server,
		Module: module, Mode: mode, Decision: decision, Reason: reason,
		DurationUs: c.now().Sub(start).Microseconds()}
	r.SetIdentity(call.Identity)
	if err != nil {
		r.Error = err.Error()
	}
	if c.audit != nil {
		c.audit.Record(r)
	}
	if obs != nil {
		obs.ObserveRun(ctx, &r)
	}
}
