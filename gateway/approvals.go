package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// Approval kinds.
const (
	kindExec   = "exec"
	kindPlugin = "plugin"
)

// Decisions an approval can be resolved with.
var decisions = []string{"allow-once", "allow-always", "deny"}

type approvalKey struct{ kind, id string }

// approval is one pending exec or plugin approval request. Approvals live in
// memory only.
type approval struct {
	kind      string
	id        string
	request   object
	createdAt int64
	expiresAt int64

	requester         *conn  // the requesting connection, nil for the admin API
	requesterDeviceID string // requestedByDeviceId, when known
	requesterConnID   string // requestedByConnId, for a requester without device

	done     chan struct{} // closed once decision is final
	decision *string       // nil: expired
	timer    *time.Timer
}

func (a *approval) final() object {
	var d any
	if a.decision != nil {
		d = *a.decision
	}
	return object{{"id", a.id}, {"decision", d}, {"createdAtMs", a.createdAt}, {"expiresAtMs", a.expiresAt}}
}

func (a *approval) accepted() object {
	return object{{"status", "accepted"}, {"id", a.id}, {"deliveryRoute", "approval-client"},
		{"createdAtMs", a.createdAt}, {"expiresAtMs", a.expiresAt}}
}

// canSee applies OpenClaw's delivery rules for approval events
// (docs/protocol-facts.md, Approval delivery): approvals scope, an approval client, the
// record's visibility, and never the requesting connection itself.
func (c *conn) canSee(a *approval) bool {
	if !c.isReady() || !c.hasScope(protocol.ScopeOperatorApproval) || (a.requester != nil && a.requester == c) {
		return false
	}
	id := c.params.Client.ID
	client := c.caps["approvals"] || id == "openclaw-control-ui" ||
		(a.kind == kindExec && (c.caps["exec-approvals"] || id == "openclaw-macos" || id == "openclaw-ios" || id == "openclaw-android")) ||
		(a.kind == kindPlugin && (c.caps["plugin-approvals"] || id == "openclaw-tui"))
	if !client {
		return false
	}
	switch {
	case c.scopes[protocol.ScopeOperatorAdmin]:
		return true
	case a.requesterDeviceID != "":
		return c.deviceID == a.requesterDeviceID
	case a.requesterConnID != "":
		return c.id == a.requesterConnID
	default:
		return true
	}
}

// approvalParams are the params of exec.approval.request and
// plugin.approval.request, kept raw so that every request field can be
// echoed as given (or null).
type approvalParams map[string]json.RawMessage

func (p approvalParams) str(key string) (string, error) {
	raw, ok := p[key]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s must be a string", key)
	}
	return s, nil
}

func (p approvalParams) value(key string) any {
	if raw, ok := p[key]; ok {
		return raw
	}
	return nil
}

var (
	execRequestFields = []string{"command", "systemRunBinding", "systemRunPlan", "cwd", "nodeId", "host", "security", "ask",
		"warningText", "scope", "commandAnalysis", "allowedDecisions", "agentId", "resolvedPath", "sessionKey", "sessionId",
		"runId", "toolCallId", "turnSourceChannel", "turnSourceTo", "turnSourceAccountId", "turnSourceThreadId",
		"cronExecutionSource", "cronOperationBinding"}
	pluginRequestFields = []string{"pluginId", "title", "description", "scope", "detail", "severity", "toolName",
		"toolCallId", "agentId", "sessionKey", "runId", "turnSourceChannel", "turnSourceTo", "turnSourceAccountId",
		"turnSourceThreadId"}
)

// openApproval validates a request, and either registers it and sends the
// requested events (routed) or, when no connection may see it, returns it
// already expired with decision null, as OpenClaw does.
func (s *Server) openApproval(kind string, p approvalParams, requester *conn, requesterDevice string) (*approval, bool, *protocol.ErrorShape) {
	method := kind + ".approval.request"
	bad := func(msg string) (*approval, bool, *protocol.ErrorShape) {
		return nil, false, invalid(fmt.Sprintf("invalid %s params: %s", method, msg))
	}
	var timeoutMs int64
	if raw, ok := p["timeoutMs"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &timeoutMs); err != nil || timeoutMs <= 0 {
			return bad("timeoutMs must be a positive integer")
		}
	}
	a := &approval{kind: kind, request: object{}, done: make(chan struct{}), requester: requester}
	switch kind {
	case kindExec:
		cmd, err := p.str("command")
		if err != nil {
			return bad(err.Error())
		}
		if strings.TrimSpace(cmd) == "" {
			return bad("command is required")
		}
		if a.id, err = p.str("id"); err != nil {
			return bad(err.Error())
		}
		if a.id == "" {
			a.id = uuid.NewString()
		}
		for _, f := range execRequestFields {
			switch f {
			case "commandAnalysis":
				a.request = a.request.set(f, analyzeCommand(cmd))
			case "allowedDecisions":
				a.request = a.request.set(f, decisions)
			default:
				a.request = a.request.set(f, p.value(f))
			}
		}
		if timeoutMs == 0 {
			timeoutMs = s.opts.ExecApprovalTimeout.Milliseconds()
		}
	case kindPlugin:
		for _, f := range []string{"pluginId", "title", "description"} {
			v, err := p.str(f)
			if err != nil {
				return bad(err.Error())
			}
			if strings.TrimSpace(v) == "" {
				return bad(f + " is required")
			}
		}
		a.id = "plugin:" + uuid.NewString()
		for _, f := range pluginRequestFields {
			a.request = a.request.set(f, p.value(f))
		}
		if timeoutMs == 0 {
			timeoutMs = s.opts.PluginApprovalTimeout.Milliseconds()
		}
	}
	if requester != nil {
		a.requesterDeviceID = requester.deviceID
		if a.requesterDeviceID == "" {
			a.requesterConnID = requester.id
		}
	} else {
		a.requesterDeviceID = requesterDevice
	}
	a.createdAt = s.nowMs()
	a.expiresAt = a.createdAt + timeoutMs

	s.events.Lock()
	defer s.events.Unlock()
	var recipients []*conn
	for _, c := range s.readyConns() {
		if c.canSee(a) {
			recipients = append(recipients, c)
		}
	}
	if len(recipients) == 0 {
		close(a.done) // no route: expires at once with decision null
		return a, false, nil
	}
	key := approvalKey{kind, a.id}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, false, &protocol.ErrorShape{Code: protocol.CodeUnavailable, Message: "gateway is shutting down"}
	}
	if _, dup := s.approvals[key]; dup {
		s.mu.Unlock()
		return nil, false, invalid("approval id already pending: " + a.id)
	}
	s.approvals[key] = a
	a.timer = time.AfterFunc(time.Duration(timeoutMs)*time.Millisecond, func() { s.expireApproval(key, a) })
	s.mu.Unlock()
	raw, err := json.Marshal(object{{"approvalKind", kind}, {"id", a.id}, {"request", a.request},
		{"createdAtMs", a.createdAt}, {"expiresAtMs", a.expiresAt}})
	if err != nil {
		return nil, false, errInternal(err)
	}
	for _, c := range recipients {
		c.sendEventRaw(kind+".approval.requested", raw)
	}
	return a, true, nil
}

func (s *Server) expireApproval(key approvalKey, a *approval) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.approvals[key] == a {
		delete(s.approvals, key)
		close(a.done)
	}
}

// expireAllApprovals ends every pending approval with decision null; Close
// calls it.
func (s *Server) expireAllApprovals() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, a := range s.approvals {
		a.timer.Stop()
		delete(s.approvals, key)
		close(a.done)
	}
}

// approvalRequest serves exec.approval.request and plugin.approval.request,
// including twoPhase (an "accepted" response, then the final one with the
// same id).
func approvalRequest(kind string) func(*conn, context.Context, string, json.RawMessage) (any, *protocol.ErrorShape) {
	return func(c *conn, ctx context.Context, id string, raw json.RawMessage) (any, *protocol.ErrorShape) {
		var p approvalParams
		if e := decodeParams(kind+".approval.request", raw, &p); e != nil {
			return nil, e
		}
		var twoPhase bool
		if v, ok := p["twoPhase"]; ok && json.Unmarshal(v, &twoPhase) != nil {
			return nil, invalid(fmt.Sprintf("invalid %s.approval.request params: twoPhase must be a boolean", kind))
		}
		a, routed, e := c.srv.openApproval(kind, p, c, "")
		if e != nil {
			return nil, e
		}
		if !routed {
			return a.final(), nil
		}
		if twoPhase {
			c.respond(id, a.accepted())
		}
		select {
		case <-a.done:
			return a.final(), nil
		case <-ctx.Done():
			return nil, nil
		}
	}
}

// approvalResolve serves exec.approval.resolve and plugin.approval.resolve.
func approvalResolve(kind string) func(*conn, context.Context, string, json.RawMessage) (any, *protocol.ErrorShape) {
	return func(c *conn, _ context.Context, _ string, raw json.RawMessage) (any, *protocol.ErrorShape) {
		var p struct {
			ID       string `json:"id"`
			Decision string `json:"decision"`
		}
		if e := decodeParams(kind+".approval.resolve", raw, &p); e != nil {
			return nil, e
		}
		if strings.TrimSpace(p.ID) == "" {
			return nil, invalid(fmt.Sprintf("invalid %s.approval.resolve params: id is required", kind))
		}
		if !slices.Contains(decisions, p.Decision) {
			return nil, invalid(fmt.Sprintf("invalid decision %q: must be one of %s", p.Decision, strings.Join(decisions, ", ")))
		}
		by := c.params.Client.DisplayName
		if by == "" {
			by = c.params.Client.ID
		}
		if e := c.srv.resolveApproval(kind, strings.TrimSpace(p.ID), p.Decision, by); e != nil {
			return nil, e
		}
		return object{{"ok", true}}, nil
	}
}

func (s *Server) resolveApproval(kind, id, decision, resolvedBy string) *protocol.ErrorShape {
	s.events.Lock()
	defer s.events.Unlock()
	key := approvalKey{kind, id}
	s.mu.Lock()
	a, ok := s.approvals[key]
	if ok {
		delete(s.approvals, key)
		a.timer.Stop()
		a.decision = &decision
		close(a.done)
	}
	s.mu.Unlock()
	if !ok {
		return invalidDetails("unknown or expired approval id", object{{"reason", "APPROVAL_NOT_FOUND"},
			{"remediation", "list open approvals and resolve one of those ids before it expires"}})
	}
	raw, err := json.Marshal(object{{"id", a.id}, {"decision", decision}, {"resolvedBy", resolvedBy},
		{"ts", s.nowMs()}, {"request", a.request}})
	if err != nil {
		return errInternal(err)
	}
	for _, c := range s.readyConns() {
		if c.canSee(a) {
			c.sendEventRaw(kind+".approval.resolved", raw)
		}
	}
	return nil
}

// analyzeCommand is a small stand-in for OpenClaw's commandAnalysis: it
// counts the commands of a shell line split at unquoted ;, &&, || and |, and
// the nested command substitutions ($( … ) and `…` outside single quotes).
// It reports no risk kinds and no warnings.
func analyzeCommand(cmd string) object {
	count, subst, ticks := 1, 0, 0
	var quote byte
	for i := 0; i < len(cmd); i++ {
		ch := cmd[i]
		switch {
		case quote == '\'':
			if ch == '\'' {
				quote = 0
			}
		case ch == '\\':
			i++
		case ch == '$' && i+1 < len(cmd) && cmd[i+1] == '(':
			subst++
		case ch == '`':
			ticks++
		case quote == '"':
			if ch == '"' {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == ';' || ch == '|':
			count++
			if i+1 < len(cmd) && cmd[i+1] == '|' {
				i++
			}
		case ch == '&' && i+1 < len(cmd) && cmd[i+1] == '&':
			count++
			i++
		}
	}
	if strings.TrimSpace(cmd) == "" {
		count = 0
	}
	return object{{"commandCount", count}, {"nestedCommandCount", subst + ticks/2},
		{"riskKinds", []string{}}, {"warningLines", []string{}}}
}
