package policiestest

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/openclaw-go/openclaw/policies"
)

// Enforcer is a policies.Enforcer (a before_tool_call chain as a surface
// holds it) that records every call and answers Decide's outcome, or
// Outcome when Decide is nil. An answer with no Decision allows; one with
// nil Arguments passes the call's arguments on. Set the fields before the
// first call; it is safe for concurrent use. The zero value allows every
// call.
type Enforcer struct {
	// Outcome is the answer to every call when Decide is nil.
	Outcome policies.Outcome
	// Decide, when set, answers each call.
	Decide func(ctx context.Context, call *policies.ToolCall) policies.Outcome

	mu    sync.Mutex
	calls []policies.ToolCall
}

// BeforeToolCall records call and answers it (see [Enforcer]).
func (e *Enforcer) BeforeToolCall(ctx context.Context, call *policies.ToolCall) policies.Outcome {
	e.mu.Lock()
	e.calls = append(e.calls, *call)
	e.mu.Unlock()
	out := e.Outcome
	if e.Decide != nil {
		out = e.Decide(ctx, call)
	}
	if out.Decision == "" {
		out.Decision = policies.Allow
	}
	if out.Arguments == nil {
		out.Arguments = call.Arguments
	}
	return out
}

// Calls returns a copy of the calls seen so far, in order.
func (e *Enforcer) Calls() []policies.ToolCall {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]policies.ToolCall(nil), e.calls...)
}

// AllowAll is a policies.Enforcer that allows every call with its own
// arguments and records nothing: the cheapest before_tool_call, for
// benchmarks that measure what surrounds the policy.
type AllowAll struct{}

// BeforeToolCall allows call.
func (AllowAll) BeforeToolCall(_ context.Context, call *policies.ToolCall) policies.Outcome {
	return policies.Outcome{Decision: policies.Allow, Arguments: call.Arguments}
}

// ApprovalDecider is a policies.ApprovalDecider (a decide_approval chain
// as a surface holds it) that records every request and answers Decide's
// outcome, or Outcome when Decide is nil. An answer with no Decision asks,
// as an empty chain does. Set the fields before the first request; it is
// safe for concurrent use. The zero value leaves every request to a human.
type ApprovalDecider struct {
	// Outcome is the answer to every request when Decide is nil.
	Outcome policies.ApprovalOutcome
	// Decide, when set, answers each request.
	Decide func(ctx context.Context, req *policies.ApprovalRequest) policies.ApprovalOutcome

	mu   sync.Mutex
	reqs []policies.ApprovalRequest
}

// DecideApproval records req and answers it (see [ApprovalDecider]).
func (d *ApprovalDecider) DecideApproval(ctx context.Context, req *policies.ApprovalRequest) policies.ApprovalOutcome {
	d.mu.Lock()
	d.reqs = append(d.reqs, *req)
	d.mu.Unlock()
	out := d.Outcome
	if d.Decide != nil {
		out = d.Decide(ctx, req)
	}
	if out.Decision == "" {
		out.Decision = policies.Ask
	}
	return out
}

// Requests returns a copy of the requests seen so far, in order.
func (d *ApprovalDecider) Requests() []policies.ApprovalRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]policies.ApprovalRequest(nil), d.reqs...)
}

// BeforeToolCallHook is a before_tool_call module
// (policies.BeforeToolCallHook) named Module that records every call and
// answers Decide's verdict and error, or Verdict and Err when Decide is
// nil. A verdict with no Decision (and no error) allows. Set the fields before the
// first call; it is safe for concurrent use.
type BeforeToolCallHook struct {
	// Module is the module's configured name (Name).
	Module string
	// Verdict and Err are the answer to every call when Decide is nil.
	Verdict policies.Verdict
	Err     error
	// Decide, when set, answers each call.
	Decide func(ctx context.Context, call *policies.ToolCall) (policies.Verdict, error)

	mu    sync.Mutex
	calls []policies.ToolCall
}

// Name returns h.Module.
func (h *BeforeToolCallHook) Name() string { return h.Module }

// BeforeToolCall records call and answers it (see [BeforeToolCallHook]).
func (h *BeforeToolCallHook) BeforeToolCall(ctx context.Context, call *policies.ToolCall) (policies.Verdict, error) {
	h.mu.Lock()
	h.calls = append(h.calls, *call)
	h.mu.Unlock()
	v, err := h.Verdict, h.Err
	if h.Decide != nil {
		v, err = h.Decide(ctx, call)
	}
	if v.Decision == "" && err == nil {
		v.Decision = policies.Allow
	}
	return v, err
}

// Calls returns a copy of the calls seen so far, in order.
func (h *BeforeToolCallHook) Calls() []policies.ToolCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]policies.ToolCall(nil), h.calls...)
}

// DecideApprovalHook is a decide_approval module
// (policies.DecideApprovalHook) named Module that records every request
// and answers Decide's verdict and error, or Verdict and Err when Decide is
// nil. A verdict with no Decision (and no error) asks. Set the fields before the
// first request; it is safe for concurrent use.
type DecideApprovalHook struct {
	// Module is the module's configured name (Name).
	Module string
	// Verdict and Err are the answer to every request when Decide is nil.
	Verdict policies.ApprovalVerdict
	Err     error
	// Decide, when set, answers each request.
	Decide func(ctx context.Context, req *policies.ApprovalRequest) (policies.ApprovalVerdict, error)

	mu   sync.Mutex
	reqs []policies.ApprovalRequest
}

// Name returns h.Module.
func (h *DecideApprovalHook) Name() string { return h.Module }

// DecideApproval records req and answers it (see [DecideApprovalHook]).
func (h *DecideApprovalHook) DecideApproval(ctx context.Context, req *policies.ApprovalRequest) (policies.ApprovalVerdict, error) {
	h.mu.Lock()
	h.reqs = append(h.reqs, *req)
	h.mu.Unlock()
	v, err := h.Verdict, h.Err
	if h.Decide != nil {
		v, err = h.Decide(ctx, req)
	}
	if v.Decision == "" && err == nil {
		v.Decision = policies.Ask
	}
	return v, err
}

// Requests returns a copy of the requests seen so far, in order.
func (h *DecideApprovalHook) Requests() []policies.ApprovalRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]policies.ApprovalRequest(nil), h.reqs...)
}

// Sanitizer is a native sanitize_tool_names, usable as a
// policies.Sanitizer (a chain as a surface holds it) and, named Module, as
// a policies.SanitizeToolNamesHook. It answers Err when set, else Result
// when set (as is, unchecked: for tests of what the host does with a
// wrong answer), else names the catalog with a simplified form of
// OpenClaw's rules (docs/tool-names.md §2: characters outside
// [A-Za-z0-9_-] become "-", a part not starting with a letter is prefixed
// "mcp-" or "tool-", the server part is cut to 30, `-2`, `-3`, … on a
// collision ignoring case; a tool whose trimmed name is empty is
// rejected; no stable hashes, no localeCompare order). The real module,
// builtin:sanitizer, is tested against OpenClaw's names in
// policies/builtin. It records every request. It is safe for concurrent
// use; the zero value names.
type Sanitizer struct {
	// Module is the module's configured name (Name).
	Module string
	// Result, when set, is answered to every request.
	Result *policies.SanitizeResult
	// Err, when set, is returned to every request.
	Err error

	mu   sync.Mutex
	reqs []policies.SanitizeRequest
}

// Name returns s.Module.
func (s *Sanitizer) Name() string { return s.Module }

// Requests returns a copy of the requests seen so far, in order (each a
// shallow copy of the request as it was passed).
func (s *Sanitizer) Requests() []policies.SanitizeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]policies.SanitizeRequest(nil), s.reqs...)
}

// SanitizeToolNames names req (see [Sanitizer]).
func (s *Sanitizer) SanitizeToolNames(_ context.Context, req *policies.SanitizeRequest) (*policies.SanitizeResult, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, *req)
	s.mu.Unlock()
	switch {
	case s.Err != nil:
		return nil, s.Err
	case s.Result != nil:
		return s.Result, nil
	}
	taken := map[string]bool{}
	for _, r := range req.Reserved {
		taken[strings.ToLower(r)] = true
	}
	safeTaken := map[string]bool{}
	res := &policies.SanitizeResult{Servers: make([]policies.SanitizedServer, len(req.Servers))}
	for i, sv := range req.Servers {
		base := cleanPart(sv.Name, "mcp", "mcp-")
		if len(base) > 30 {
			base = base[:30]
		}
		safe := base
		for n := 2; safeTaken[strings.ToLower(safe)]; n++ {
			sfx := "-" + strconv.Itoa(n)
			safe = base[:min(len(base), 30-len(sfx))] + sfx
		}
		safeTaken[strings.ToLower(safe)] = true
		out := policies.SanitizedServer{Safe: safe, Tools: make([]policies.ToolName, len(sv.Tools))}
		for j, t := range sv.Tools {
			if strings.TrimSpace(t) == "" {
				out.Tools[j] = policies.ToolName{Reject: "empty tool name"}
				continue
			}
			part := cleanPart(t, "tool", "tool-")
			if limit := policies.MaxToolNameLen - len(safe) - 2; len(part) > limit {
				part = part[:limit]
			}
			name := safe + "__" + part
			for n := 2; taken[strings.ToLower(name)]; n++ {
				sfx := "-" + strconv.Itoa(n)
				name = safe + "__" + part[:min(len(part), policies.MaxToolNameLen-2-len(safe)-len(sfx))] + sfx
			}
			taken[strings.ToLower(name)] = true
			out.Tools[j] = policies.ToolName{Name: name}
		}
		res.Servers[i] = out
	}
	return res, nil
}

// cleanPart trims s, replaces every byte outside [A-Za-z0-9_-] with "-",
// gives fallback for an empty result and prefixes one not starting with a
// letter.
func cleanPart(s, fallback, prefix string) string {
	b := []byte(strings.TrimSpace(s))
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	s = string(b)
	if s == "" {
		s = fallback
	}
	if c := s[0]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
		s = prefix + s
	}
	return s
}

var (
	_ policies.Enforcer              = (*Enforcer)(nil)
	_ policies.Enforcer              = AllowAll{}
	_ policies.ApprovalDecider       = (*ApprovalDecider)(nil)
	_ policies.BeforeToolCallHook    = (*BeforeToolCallHook)(nil)
	_ policies.DecideApprovalHook    = (*DecideApprovalHook)(nil)
	_ policies.Sanitizer             = (*Sanitizer)(nil)
	_ policies.SanitizeToolNamesHook = (*Sanitizer)(nil)
)
