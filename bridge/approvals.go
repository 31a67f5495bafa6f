package bridge

import (
	"encoding/json"
	"github.com/openclaw-go/openclaw/internal/jsonw"
	"slices"
	"strings"
	"sync"
	"time"
)

// Approval tracking constants (docs/protocol-facts.md, Event queue).
const (
	// DefaultApprovalTTL is how long an approval without expiresAtMs stays
	// open after the bridge saw it.
	DefaultApprovalTTL = 30 * time.Minute
	// ApprovalSweepInterval is the period of the expiry sweeper, which runs
	// only while approvals are tracked.
	ApprovalSweepInterval = 300 * time.Second
	// ClaudePermissionTTL is how long a Claude permission request stays
	// pending without a reply.
	ClaudePermissionTTL = time.Hour
)

// trackedApproval is one open exec or plugin approval the bridge saw.
type trackedApproval struct {
	kind      string // "exec" or "plugin"
	id        string
	request   json.RawMessage // an object, or nil
	createdAt json.RawMessage // a number, or nil
	expiresAt json.RawMessage // a number, or nil
	deadline  time.Time       // when the entry expires

	// From request, when it carries them as strings: who raised a plugin
	// approval and for which call ("" when absent).
	pluginID, toolName, toolCallID string
}

func (a *trackedApproval) appendJSON(buf []byte) []byte {
	o := jsonw.NewObject(buf)
	o.Str("kind", a.kind)
	o.Str("id", a.id)
	if a.request != nil {
		o.Raw("request", a.request)
	}
	if a.createdAt != nil {
		o.Raw("createdAtMs", a.createdAt)
	}
	if a.expiresAt != nil {
		o.Raw("expiresAtMs", a.expiresAt)
	}
	return o.Close()
}

func (a *trackedApproval) createdAtMs() float64 {
	var f float64
	if a.createdAt != nil {
		_ = json.Unmarshal(a.createdAt, &f)
	}
	return f
}

// approvalTracker holds the open approvals, keyed by normalized id, and runs
// the expiry sweeper while it holds any. The sweeper is a timer, not a
// goroutine: nothing runs, and nothing keeps the process alive, between
// sweeps or when the tracker is empty or closed.
type approvalTracker struct {
	now func() time.Time

	mu      sync.Mutex
	entries map[string]*trackedApproval
	sweeper *time.Timer
	closed  bool
	// orphans are the bridge's own plugin approvals whose call ended
	// before the bridge learnt their id, keyed by the toolCallId it sent:
	// when one shows up, withdraw is called with its id (see claimOwn).
	orphans map[string]orphanApproval
}

// orphanApproval is a raised approval still to be withdrawn once seen.
type orphanApproval struct {
	until    time.Time
	withdraw func(id string)
}

func newApprovalTracker(now func() time.Time) *approvalTracker {
	return &approvalTracker{now: now, entries: map[string]*trackedApproval{}, orphans: map[string]orphanApproval{}}
}

// claimOwn finds the open plugin approval the bridge raised with
// toolCallID (pluginId [ApprovalPluginID]) and returns its id. When none
// is open yet, withdraw is remembered until the time until and called,
// on a goroutine of its own, with the id of such an approval as soon as it
// is tracked: a call cancelled after the Gateway registered its approval
// but before the bridge read the "accepted" answer naming it would
// otherwise leave it open for a human until it expires.
func (t *approvalTracker) claimOwn(toolCallID string, until time.Time, withdraw func(id string)) string {
	if toolCallID == "" {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for id, a := range t.entries {
		if a.toolCallID == toolCallID && a.pluginID == ApprovalPluginID && now.Before(a.deadline) {
			return id
		}
	}
	if !t.closed {
		t.orphans[toolCallID] = orphanApproval{until: until, withdraw: withdraw}
	}
	return ""
}

// normalizeApprovalID trims an approval id as OpenClaw does
// (normalizeApprovalId: JavaScript's trim).
func normalizeApprovalID(id string) string { return jsTrim(id) }

// approvalPayload is the part of an *.approval.* event the tracker reads.
type approvalPayload struct {
	ApprovalKind json.RawMessage `json:"approvalKind"`
	ID           json.RawMessage `json:"id"`
	Request      json.RawMessage `json:"request"`
	CreatedAtMs  json.RawMessage `json:"createdAtMs"`
	ExpiresAtMs  json.RawMessage `json:"expiresAtMs"`
}

// track records a requested approval of the given kind from its event
// payload. A payload without an id is ignored.
func (t *approvalTracker) track(kind string, payload json.RawMessage) {
	var p approvalPayload
	if json.Unmarshal(payload, &p) != nil {
		return
	}
	id, ok := rawString(p.ID)
	if id = normalizeApprovalID(id); !ok || id == "" {
		return
	}
	if k, ok := nonEmptyString(p.ApprovalKind); ok && (k == "exec" || k == "plugin") {
		kind = k
	}
	now := t.now()
	a := &trackedApproval{kind: kind, id: id, deadline: now.Add(DefaultApprovalTTL)}
	if kindOf(p.Request) == kindObject {
		a.request = jsonw.Compact(p.Request)
		var r struct {
			PluginID   json.RawMessage `json:"pluginId"`
			ToolName   json.RawMessage `json:"toolName"`
			ToolCallID json.RawMessage `json:"toolCallId"`
		}
		if json.Unmarshal(a.request, &r) == nil {
			a.pluginID, _ = rawString(r.PluginID)
			a.toolName, _ = rawString(r.ToolName)
			a.toolCallID, _ = rawString(r.ToolCallID)
		}
	}
	if kindOf(p.CreatedAtMs) == kindNumber {
		a.createdAt = jsonw.Compact(p.CreatedAtMs)
	}
	if kindOf(p.ExpiresAtMs) == kindNumber {
		a.expiresAt = jsonw.Compact(p.ExpiresAtMs)
		var ms float64
		if json.Unmarshal(p.ExpiresAtMs, &ms) == nil {
			a.deadline = time.UnixMilli(int64(ms))
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.entries[id] = a
	t.scheduleLocked()
	for key, o := range t.orphans {
		if !now.Before(o.until) {
			delete(t.orphans, key)
		}
	}
	if o, ok := t.orphans[a.toolCallID]; ok && a.toolCallID != "" && a.pluginID == ApprovalPluginID {
		delete(t.orphans, a.toolCallID)
		go o.withdraw(id) // a Gateway request, bounded by withdrawTimeout
	}
}

// resolve drops the approval named by a *.resolved payload.
func (t *approvalTracker) resolve(payload json.RawMessage) {
	var p approvalPayload
	if json.Unmarshal(payload, &p) != nil {
		return
	}
	id, _ := rawString(p.ID)
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.entries, normalizeApprovalID(id))
	t.stopIfEmptyLocked()
}

// open sweeps expired entries and returns the rest ordered by createdAtMs
// (a missing value counts as 0), ties by id for a stable order.
func (t *approvalTracker) open() []*trackedApproval {
	t.mu.Lock()
	t.sweepLocked()
	out := make([]*trackedApproval, 0, len(t.entries))
	for _, a := range t.entries {
		out = append(out, a)
	}
	t.mu.Unlock()
	slices.SortStableFunc(out, func(a, b *trackedApproval) int {
		ca, cb := a.createdAtMs(), b.createdAtMs()
		switch {
		case ca < cb:
			return -1
		case ca > cb:
			return 1
		}
		return strings.Compare(a.id, b.id)
	})
	return out
}

func (t *approvalTracker) sweepLocked() {
	now := t.now()
	for id, a := range t.entries {
		if !now.Before(a.deadline) {
			delete(t.entries, id)
		}
	}
	t.stopIfEmptyLocked()
}

// scheduleLocked starts the sweeper timer if entries exist and none runs.
func (t *approvalTracker) scheduleLocked() {
	if t.sweeper != nil || len(t.entries) == 0 || t.closed {
		return
	}
	t.sweeper = time.AfterFunc(ApprovalSweepInterval, t.tick)
}

func (t *approvalTracker) stopIfEmptyLocked() {
	if len(t.entries) == 0 && t.sweeper != nil {
		t.sweeper.Stop()
		t.sweeper = nil
	}
}

func (t *approvalTracker) tick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweeper = nil
	if t.closed {
		return
	}
	t.sweepLocked()
	t.scheduleLocked()
}

// deadline returns when the open approval id expires; open is false when
// it is not open (never seen, resolved or expired).
func (t *approvalTracker) deadline(id string) (deadline time.Time, open bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.entries[normalizeApprovalID(id)]
	if a == nil || !t.now().Before(a.deadline) {
		return time.Time{}, false
	}
	return a.deadline, true
}

// get returns a copy of the approval open under exactly the normalized
// id, or nil when none is (never seen, resolved or expired).
func (t *approvalTracker) get(id string) *trackedApproval {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.entries[normalizeApprovalID(id)]
	if a == nil || !t.now().Before(a.deadline) {
		return nil
	}
	c := *a
	return &c
}

// sweeperActive reports whether the sweeper timer is armed (for tests).
func (t *approvalTracker) sweeperActive() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sweeper != nil
}

func (t *approvalTracker) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	clear(t.entries)
	clear(t.orphans)
	if t.sweeper != nil {
		t.sweeper.Stop()
		t.sweeper = nil
	}
}

// claudePermissions holds the pending Claude permission request ids (docs/protocol-facts.md, Claude channel mode),
// each until its reply is delivered or ClaudePermissionTTL has passed.
// Expiry is checked lazily on lookup, so no timer is needed.
type claudePermissions struct {
	now func() time.Time

	mu      sync.Mutex
	pending map[string]time.Time // id → when it was received
}

func newClaudePermissions(now func() time.Time) *claudePermissions {
	return &claudePermissions{now: now, pending: map[string]time.Time{}}
}

func (c *claudePermissions) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for k, at := range c.pending {
		if now.Sub(at) >= ClaudePermissionTTL {
			delete(c.pending, k)
		}
	}
	c.pending[id] = now
}

// isPending reports whether id awaits a reply and has not expired.
func (c *claudePermissions) isPending(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.pending[id]
	if ok && c.now().Sub(at) >= ClaudePermissionTTL {
		delete(c.pending, id)
		return false
	}
	return ok
}

func (c *claudePermissions) done(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, id)
}
