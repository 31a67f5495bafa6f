package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ApprovalKind says what asks for approval.
type ApprovalKind string

// Approval kinds: the Gateway's two (docs/protocol-facts.md, Gateway events and Approval delivery) and the
// require_approval outcome of before_tool_call.
const (
	ApprovalExec   ApprovalKind = "exec"   // a Gateway exec.approval.requested
	ApprovalPlugin ApprovalKind = "plugin" // a Gateway plugin.approval.requested
	ApprovalTool   ApprovalKind = "tool"   // a before_tool_call require_approval
)

// Valid reports whether k is one of the three kinds.
func (k ApprovalKind) Valid() bool {
	return k == ApprovalExec || k == ApprovalPlugin || k == ApprovalTool
}

// ApprovalRequest is the input of decide_approval (docs/policy-abi.md
// §6.2).
type ApprovalRequest struct {
	Kind ApprovalKind `json:"kind"`
	// ID is the approval's id (the Gateway's, or the surface's own for a
	// tool approval).
	ID string `json:"id,omitempty"`
	// Surface is where a tool approval's call entered; empty for Gateway
	// approvals.
	Surface Surface `json:"surface,omitempty"`
	// SessionKey is the Gateway session the request belongs to
	// (request.sessionKey of a Gateway approval).
	SessionKey string `json:"session_key,omitempty"`
	// Requester is the MCP client whose call raised a tool approval, or
	// the Gateway's agent (name "agent:<agentId>") for exec approvals.
	Requester Caller `json:"requester"`
	// Identity is the authenticated caller whose call raised a tool
	// approval, nil when the surface has none.
	Identity *Identity `json:"identity,omitempty"`
	// Tool is the tool concerned: the called tool for kind tool,
	// request.toolName for plugin approvals; empty for exec approvals.
	Tool ToolRef `json:"tool"`
	// Command is request.command of an exec approval.
	Command string `json:"command,omitempty"`
	// Request is the full payload: the Gateway's `request` object for
	// exec and plugin approvals; for a tool approval the before_tool_call
	// verdict that asked ({"reason","title","description","module"}).
	Request json.RawMessage `json:"request,omitempty"`
}

// ApprovalDecision is a decide_approval answer.
type ApprovalDecision string

// The decide_approval answers. The first three are the Gateway's decision
// values (docs/protocol-facts.md, Approval delivery); Ask leaves the request to a human.
const (
	AllowOnce   ApprovalDecision = "allow-once"
	AllowAlways ApprovalDecision = "allow-always"
	Deny        ApprovalDecision = "deny"
	Ask         ApprovalDecision = "ask"
)

// Valid reports whether d is one of the four answers.
func (d ApprovalDecision) Valid() bool {
	return d == AllowOnce || d == AllowAlways || d == Deny || d == Ask
}

// rank orders answers for combination: deny > ask > allow-once >
// allow-always (the most cautious wins).
func (d ApprovalDecision) rank() int {
	switch d {
	case AllowAlways:
		return 0
	case AllowOnce:
		return 1
	case Ask:
		return 2
	default:
		return 3
	}
}

// ApprovalVerdict is one module's answer to decide_approval. TTLMs is in
// milliseconds: for Ask, how long a human has to answer before the
// request is denied (0 = the request's own expiry, or the surface's
// default); for AllowAlways, how long the grant is remembered (0 = for the
// life of the process); ignored for the others.
type ApprovalVerdict struct {
	Decision ApprovalDecision `json:"decision"`
	Reason   string           `json:"reason,omitempty"`
	TTLMs    int64            `json:"ttl_ms,omitempty"`
}

// DecideApprovalHook is a policy module serving decide_approval. Name is the
// module's configured name. DecideApproval returns an error when the module
// failed; the chain then denies (fail closed). Implementations are safe for
// concurrent use.
type DecideApprovalHook interface {
	Name() string
	DecideApproval(ctx context.Context, req *ApprovalRequest) (ApprovalVerdict, error)
}

// ApprovalEntry is one module of an [ApprovalChain] with its mode (""
// means Enforce).
type ApprovalEntry struct {
	Hook DecideApprovalHook
	Mode Mode
}

// ApprovalOutcome is the combined answer of an [ApprovalChain]. Module
// names the module whose verdict decided ("" for the default ask of an
// empty chain, [MemoryModule] for a remembered grant); TTL is that
// verdict's TTL.
type ApprovalOutcome struct {
	Decision ApprovalDecision
	Reason   string
	Module   string
	TTL      time.Duration
}

// MemoryModule is the Module of an [ApprovalOutcome] answered from the
// [ApprovalMemory] of earlier allow-always decisions.
const MemoryModule = "approval-memory"

// ErrInvalidApprovalVerdict is wrapped when a module answers a decision that is
// not allow-once, allow-always, deny or ask, or a negative TTL.
var ErrInvalidApprovalVerdict = errors.New("policies: invalid approval verdict")

// ApprovalChainOptions configure an [ApprovalChain]. The zero value is
// usable: no audit log, the wall clock, no memory.
type ApprovalChainOptions struct {
	// Audit receives one record per module verdict; nil discards them.
	Audit AuditSink
	// Now is the clock for audit timestamps; nil means time.Now.
	Now func() time.Time
	// Memory remembers allow-always decisions per session and tool; nil
	// remembers nothing.
	Memory *ApprovalMemory
}

// ApprovalChain runs decide_approval modules in order and combines their
// answers: the most cautious wins (deny > ask > allow-once >
// allow-always), the first deny stops the chain, a failing module is a deny
// naming it (fail closed), an empty chain asks (leaves it to a human).
// When the combined answer is ask and the [ApprovalMemory] holds an
// unexpired allow-always for the request's key, the answer is that
// allow-always instead: memory stands in for the human, never for a
// module's deny. A combined allow-always is remembered. It is safe for
// concurrent use.
type ApprovalChain struct {
	entries []ApprovalEntry
	audit   AuditSink
	now     func() time.Time
	memory  *ApprovalMemory
}

// NewApprovalChain returns a chain over entries, which are copied.
func NewApprovalChain(entries []ApprovalEntry, opts *ApprovalChainOptions) *ApprovalChain {
	c := &ApprovalChain{entries: append([]ApprovalEntry(nil), entries...), now: time.Now}
	if opts != nil {
		c.audit = opts.Audit
		c.memory = opts.Memory
		if opts.Now != nil {
			c.now = opts.Now
		}
	}
	return c
}

// DecideApproval runs the chain for one request. It never returns an
// error: a failing module is a deny whose reason names it.
func (c *ApprovalChain) DecideApproval(ctx context.Context, req *ApprovalRequest) ApprovalOutcome {
	out := ApprovalOutcome{Decision: Ask}
	decided := false
	for _, e := range c.entries {
		name := e.Hook.Name()
		start := c.now()
		v, err := e.Hook.DecideApproval(ctx, req)
		if err == nil {
			switch {
			case !v.Decision.Valid():
				err = fmt.Errorf("%w: unknown decision %q", ErrInvalidApprovalVerdict, v.Decision)
			case v.TTLMs < 0:
				err = fmt.Errorf("%w: negative ttl_ms %d", ErrInvalidApprovalVerdict, v.TTLMs)
			}
		}
		if err != nil {
			v = ApprovalVerdict{Decision: Deny, Reason: fmt.Sprintf("policy module failed: %v", err)}
		}
		mode := e.Mode
		if mode == "" {
			mode = Enforce
		}
		c.record(ctx, req, name, mode, v, err, start)
		if mode == AuditOnly {
			continue
		}
		if !decided || v.Decision.rank() > out.Decision.rank() {
			out = ApprovalOutcome{Decision: v.Decision, Reason: v.Reason, Module: name,
				TTL: time.Duration(v.TTLMs) * time.Millisecond}
			decided = true
		}
		if out.Decision == Deny {
			return out
		}
	}
	if c.memory == nil {
		return out
	}
	switch out.Decision {
	case Ask:
		start := c.now()
		if c.memory.Recall(req) {
			out = ApprovalOutcome{Decision: AllowAlways, Module: MemoryModule,
				Reason: "allowed always earlier in this session"}
			c.record(ctx, req, MemoryModule, Enforce, ApprovalVerdict{Decision: AllowAlways, Reason: out.Reason}, nil, start)
		}
	case AllowAlways:
		c.memory.Remember(req, out.TTL)
	}
	return out
}

// record audits one module run and tells the context's RunObserver of it.
func (c *ApprovalChain) record(ctx context.Context, req *ApprovalRequest, module string, mode Mode, v ApprovalVerdict, err error, start time.Time) {
	obs := runObserver(ctx)
	if c.audit == nil && obs == nil {
		return
	}
	tool := req.Tool.Name
	if tool == "" {
		tool = string(req.Kind)
	}
	r := AuditRecord{Time: start.UTC(), Hook: HookDecideApproval, Surface: req.Surface,
		SessionKey: req.SessionKey, Caller: req.Requester.Name, Tool: tool, Server: req.Tool.Server,
		Module: module, Mode: mode, Decision: string(v.Decision), Reason: v.Reason,
		DurationUs: c.now().Sub(start).Microseconds()}
	r.SetIdentity(req.Identity)
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

// ApprovalMemory remembers allow-always decisions in the host process, per
// Gateway session key, kind and tool (and, for exec approvals, the exact
// command): [ApprovalMemoryKey]. It lives as long as the [ApprovalChain]
// that holds it (one per `mcp serve` or runtime process); nothing is
// written to disk, so a restart forgets every grant. It keeps at most
// MaxEntries grants, dropping expired ones first, then the oldest. It is
// safe for concurrent use.
type ApprovalMemory struct {
	mu      sync.Mutex
	now     func() time.Time
	max     int
	grants  map[string]grant
	counter uint64
}

type grant struct {
	expires time.Time // zero: never
	seq     uint64
}

// ApprovalMemoryOptions configure [NewApprovalMemory]; nil means the
// defaults.
type ApprovalMemoryOptions struct {
	// MaxEntries caps the grants kept; 0 means 4096.
	MaxEntries int
	// Now is the clock for TTLs; nil means time.Now.
	Now func() time.Time
}

// NewApprovalMemory returns an empty memory.
func NewApprovalMemory(opts *ApprovalMemoryOptions) *ApprovalMemory {
	m := &ApprovalMemory{now: time.Now, max: 4096, grants: make(map[string]grant)}
	if opts != nil {
		if opts.MaxEntries > 0 {
			m.max = opts.MaxEntries
		}
		if opts.Now != nil {
			m.now = opts.Now
		}
	}
	return m
}

// ApprovalMemoryKey is the key a grant is remembered under: session key,
// kind, server, tool name and, for exec approvals, the command. A request
// without a session key is never remembered (ok is false): a grant must
// not leak across sessions.
func ApprovalMemoryKey(req *ApprovalRequest) (key string, ok bool) {
	if req.SessionKey == "" {
		return "", false
	}
	k, _ := json.Marshal([]string{req.SessionKey, string(req.Kind), req.Tool.Server, req.Tool.Name, req.Command})
	return string(k), true
}

// Remember records an allow-always for req's key, for ttl (0 = until the
// process ends).
func (m *ApprovalMemory) Remember(req *ApprovalRequest, ttl time.Duration) {
	key, ok := ApprovalMemoryKey(req)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var exp time.Time
	if ttl > 0 {
		exp = now.Add(ttl)
	}
	if _, exists := m.grants[key]; !exists && len(m.grants) >= m.max {
		m.evict(now)
	}
	m.counter++
	m.grants[key] = grant{expires: exp, seq: m.counter}
}

// evict drops expired grants, or the oldest one when none has expired.
func (m *ApprovalMemory) evict(now time.Time) {
	oldest, oldSeq := "", uint64(0)
	for k, g := range m.grants {
		if !g.expires.IsZero() && !now.Before(g.expires) {
			delete(m.grants, k)
			continue
		}
		if oldest == "" || g.seq < oldSeq {
			oldest, oldSeq = k, g.seq
		}
	}
	if len(m.grants) >= m.max && oldest != "" {
		delete(m.grants, oldest)
	}
}

// Recall reports whether an unexpired allow-always is remembered for req.
func (m *ApprovalMemory) Recall(req *ApprovalRequest) bool {
	key, ok := ApprovalMemoryKey(req)
	if !ok {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.grants[key]
	if !ok {
		return false
	}
	if !g.expires.IsZero() && !m.now().Before(g.expires) {
		delete(m.grants, key)
		return false
	}
	return true
}

// Forget drops every grant of a session (when the session ends or is
// reset).
func (m *ApprovalMemory) Forget(sessionKey string) {
	prefix, _ := json.Marshal([]string{sessionKey})
	p := string(prefix[:len(prefix)-1]) + ","
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.grants {
		if len(k) >= len(p) && k[:len(p)] == p {
			delete(m.grants, k)
		}
	}
}

// Len returns the number of grants held (expired ones included until they
// are looked up or evicted).
func (m *ApprovalMemory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.grants)
}

// gatewayApproval is the part of a Gateway approval request the host
// reads (docs/protocol-facts.md, Gateway events).
type gatewayApproval struct {
	SessionKey string `json:"sessionKey"`
	AgentID    string `json:"agentId"`
	Command    string `json:"command"`
	ToolName   string `json:"toolName"`
	PluginID   string `json:"pluginId"`
}

// GatewayApprovalRequest builds the decide_approval input for a Gateway
// approval: kind exec or plugin, the approval's id and its `request`
// object (the payload of exec.approval.requested /
// plugin.approval.requested, docs/protocol-facts.md, Gateway events). It fills SessionKey from
// request.sessionKey, Requester from request.agentId ("agent:<id>"),
// Command from request.command (exec) and Tool from request.toolName and
// request.pluginId (plugin, as the tool's name and server).
func GatewayApprovalRequest(kind ApprovalKind, id string, request json.RawMessage) (*ApprovalRequest, error) {
	if kind != ApprovalExec && kind != ApprovalPlugin {
		return nil, fmt.Errorf("policies: gateway approval kind %q: want exec or plugin", kind)
	}
	var g gatewayApproval
	if err := json.Unmarshal(request, &g); err != nil {
		return nil, fmt.Errorf("policies: gateway %s approval %q: reading request: %w", kind, id, err)
	}
	req := &ApprovalRequest{Kind: kind, ID: id, SessionKey: g.SessionKey, Request: append(json.RawMessage(nil), request...)}
	if g.AgentID != "" {
		req.Requester.Name = "agent:" + g.AgentID
	}
	if kind == ApprovalExec {
		req.Command = g.Command
	} else {
		req.Tool = ToolRef{Name: g.ToolName, Server: g.PluginID}
	}
	return req, nil
}
