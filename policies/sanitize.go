package policies

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MaxToolNameLen is the longest exposed tool name: LLM APIs (Anthropic,
// OpenAI) accept tool names matching ^[a-zA-Z0-9_-]{1,64}$, and OpenClaw
// cuts names to 64 (docs/tool-names.md §2).
const MaxToolNameLen = 64

// SanitizeServer is one declared MCP server of a catalog with the raw names
// of its tools, in the order its tools/list gave them. A declared server
// with no tools (or whose listing failed) is still sent: OpenClaw assigns
// safe server names over all declared servers, in declaration order.
type SanitizeServer struct {
	Name  string   `json:"name"`
	Tools []string `json:"tools"`
}

// SanitizeRequest is the input of sanitize_tool_names: a whole catalog in
// one batch (docs/policy-abi.md §6.1).
type SanitizeRequest struct {
	// Reserved are names already taken by the surface's own tools (the
	// bridge's nine tools, built-ins); no imported tool may be exposed
	// under one of them, compared ignoring ASCII case.
	Reserved []string `json:"reserved,omitempty"`
	// Servers lists the declared servers in declaration order.
	Servers []SanitizeServer `json:"servers"`
	// Proposed is the previous sanitizer's answer when several run in a
	// chain (nil for the first): a later module may keep or change it.
	Proposed []SanitizedServer `json:"proposed,omitempty"`
	// Exposed holds the names the host already exposed in this running
	// session or proxy (nil on a fresh start), also those of tools and
	// servers no longer listed: a sanitizer keeps a tool's exposed name
	// where its rules allow and gives no exposed name to another tool
	// (docs/tool-names.md §8). The host enforces the second part itself.
	Exposed []ExposedServer `json:"exposed,omitempty"`
}

// ExposedServer is what a host already exposed for one server: its raw
// Server name, the Safe server part it was answered (empty when unknown),
// and pairs of a raw tool name (Tools[i]) and the name it was exposed
// under (Names[i]); the two have the same length. A raw name listed twice
// (a server tool and a utility tool of the same name) applies its pairs to
// the tool's occurrences in request order.
type ExposedServer struct {
	Server string   `json:"server"`
	Safe   string   `json:"safe,omitempty"`
	Tools  []string `json:"tools,omitempty"`
	Names  []string `json:"names,omitempty"`
}

// ToolCount returns the number of (server, tool) pairs in r.
func (r *SanitizeRequest) ToolCount() int {
	n := 0
	for _, s := range r.Servers {
		n += len(s.Tools)
	}
	return n
}

// ToolName is a sanitizer's answer for one tool: the exposed Name, or a
// Reject saying why the tool is not exposed (OpenClaw skips a tool whose
// trimmed name is empty). Exactly one of the two is set.
type ToolName struct {
	Name   string `json:"name,omitempty"`
	Reject string `json:"reject,omitempty"`
}

// SanitizedServer is the answer for one server: its safe name (the
// `server` part of `server__tool`) and one [ToolName] per tool of the
// request, in the same order.
type SanitizedServer struct {
	Safe  string     `json:"safe"`
	Tools []ToolName `json:"tools"`
}

// SanitizeResult is the output of sanitize_tool_names: one
// [SanitizedServer] per server of the request, in the same order.
type SanitizeResult struct {
	Servers []SanitizedServer `json:"servers"`
}

// SanitizeToolNamesHook is a policy module serving sanitize_tool_names. Name is the
// module's configured name. SanitizeToolNames returns an error when the
// module failed; the catalog build then fails (never exposing an
// unsanitized name). Implementations are safe for concurrent use.
type SanitizeToolNamesHook interface {
	Name() string
	SanitizeToolNames(ctx context.Context, req *SanitizeRequest) (*SanitizeResult, error)
}

// ErrInvalidNames is wrapped by a [*SanitizeError] whose module answered
// names that break the contract (wrong shape, an invalid, duplicate or
// reserved name).
var ErrInvalidNames = errors.New("policies: invalid sanitized names")

// ErrNoSanitizer is returned by a [SanitizeChain] with no module in enforce
// mode: without a sanitizer there are no names to expose.
var ErrNoSanitizer = errors.New("policies: no sanitize_tool_names module in enforce mode (load builtin:sanitizer, or a module exporting sanitize_tool_names)")

// SanitizeError is the diagnostic of a failed catalog build: the module
// that failed and, where the failure concerns one server or tool, which.
type SanitizeError struct {
	Module string // the module's configured name
	Server string // the raw server name, when one server is concerned
	// Tool is the raw tool name when one tool is concerned (HasTool), which
	// may itself be empty.
	Tool    string
	HasTool bool
	Err     error
}

// Error reads `sanitize_tool_names: module "m": server "web" tool "fetch": invalid name "web fetch" (…)`.
func (e *SanitizeError) Error() string {
	if c := e.Culprit(); c != "" {
		return fmt.Sprintf("sanitize_tool_names: module %q: %s: %v", e.Module, c, e.Err)
	}
	return fmt.Sprintf("sanitize_tool_names: module %q: %v", e.Module, e.Err)
}

// Culprit names the server and tool concerned (`server "web" tool
// "fetch"`), or is empty.
func (e *SanitizeError) Culprit() string {
	var b strings.Builder
	if e.Server != "" || e.HasTool {
		fmt.Fprintf(&b, "server %q", e.Server)
	}
	if e.HasTool {
		fmt.Fprintf(&b, " tool %q", e.Tool)
	}
	return b.String()
}

// Unwrap returns Err.
func (e *SanitizeError) Unwrap() error { return e.Err }

// invalidNames is the Err of a contract violation; it matches
// ErrInvalidNames.
type invalidNames string

func (e invalidNames) Error() string        { return string(e) }
func (e invalidNames) Is(target error) bool { return target == ErrInvalidNames }

// ValidToolName reports whether name matches ^[a-zA-Z0-9_-]{1,64}$.
func ValidToolName(name string) bool {
	if len(name) == 0 || len(name) > MaxToolNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidateSanitized checks res against req and the contract: the same
// servers and tools in the same order, a valid safe name per server,
// exactly one of name or reject per tool, every name valid
// ([ValidToolName]) and unique ignoring ASCII case, none equal to a
// reserved name. module names the culprit in the returned
// [*SanitizeError], which wraps [ErrInvalidNames].
func ValidateSanitized(module string, req *SanitizeRequest, res *SanitizeResult) error {
	failAt := func(server, tool string, hasTool bool, format string, args ...any) error {
		return &SanitizeError{Module: module, Server: server, Tool: tool, HasTool: hasTool,
			Err: invalidNames(fmt.Sprintf(format, args...))}
	}
	fail := func(server, tool, format string, args ...any) error {
		return failAt(server, tool, true, format, args...)
	}
	if res == nil {
		return failAt("", "", false, "no result")
	}
	if len(res.Servers) != len(req.Servers) {
		return failAt("", "", false, "%d servers answered for %d asked", len(res.Servers), len(req.Servers))
	}
	// taken maps a lowered name to who holds it: -1 for a reserved name,
	// else server<<32 | tool.
	taken := make(map[string]int64, len(req.Reserved)+req.ToolCount())
	for _, r := range req.Reserved {
		taken[strings.ToLower(r)] = -1
	}
	holder := func(h int64) string {
		if h < 0 {
			return "a reserved name"
		}
		s := req.Servers[h>>32]
		return fmt.Sprintf("tool %q of server %q", s.Tools[h&0xffffffff], s.Name)
	}
	for i, s := range req.Servers {
		got := res.Servers[i]
		if !ValidToolName(got.Safe) {
			return failAt(s.Name, "", false, "invalid safe server name %q", got.Safe)
		}
		if len(got.Tools) != len(s.Tools) {
			return failAt(s.Name, "", false, "%d tools answered for %d asked", len(got.Tools), len(s.Tools))
		}
		for j, raw := range s.Tools {
			t := got.Tools[j]
			switch {
			case t.Name == "" && t.Reject == "":
				return fail(s.Name, raw, "neither a name nor a rejection")
			case t.Name != "" && t.Reject != "":
				return fail(s.Name, raw, "both a name and a rejection")
			case t.Reject != "":
				continue
			case !ValidToolName(t.Name):
				return fail(s.Name, raw, "invalid name %q (want ^[a-zA-Z0-9_-]{1,64}$)", t.Name)
			}
			key := strings.ToLower(t.Name)
			if prev, dup := taken[key]; dup {
				return fail(s.Name, raw, "name %q collides with %s", t.Name, holder(prev))
			}
			taken[key] = int64(i)<<32 | int64(j)
		}
	}
	return nil
}

// SanitizerEntry is one module of a [SanitizeChain] with its mode (""
// means Enforce).
type SanitizeEntry struct {
	Hook SanitizeToolNamesHook
	Mode Mode
}

// SanitizeChain runs sanitize_tool_names modules in order. Each module in
// enforce mode receives the request with Proposed set to the previous
// enforce module's answer and may keep or change it; the last answer is
// the catalog's names. Every answer is validated ([ValidateSanitized]). A
// module in audit mode is run, validated and recorded, and its answer is
// discarded; its failure is recorded, not fatal. A failing enforce module
// fails the whole build with a [*SanitizeError]: no name is exposed that a
// sanitizer did not answer and the host did not validate. It is safe for
// concurrent use.
type SanitizeChain struct {
	entries []SanitizeEntry
	audit   AuditSink
	now     func() time.Time
}

// NewSanitizeChain returns a chain over entries, which are copied. opts
// may be nil (no audit log, the wall clock).
func NewSanitizeChain(entries []SanitizeEntry, opts *ChainOptions) *SanitizeChain {
	c := &SanitizeChain{entries: append([]SanitizeEntry(nil), entries...), now: time.Now}
	if opts != nil {
		c.audit = opts.Audit
		if opts.Now != nil {
			c.now = opts.Now
		}
	}
	return c
}

// SanitizeToolNames names a catalog (see [SanitizeChain]). The returned
// result has been validated against req.
func (c *SanitizeChain) SanitizeToolNames(ctx context.Context, req *SanitizeRequest) (*SanitizeResult, error) {
	var final *SanitizeResult
	for _, e := range c.entries {
		name := e.Hook.Name()
		mode := e.Mode
		if mode == "" {
			mode = Enforce
		}
		in := *req
		in.Proposed = nil
		if final != nil {
			in.Proposed = final.Servers
		}
		start := c.now()
		res, err := e.Hook.SanitizeToolNames(ctx, &in)
		if err != nil {
			var se *SanitizeError
			if !errors.As(err, &se) {
				err = &SanitizeError{Module: name, Err: err}
			}
		} else {
			err = ValidateSanitized(name, req, res)
		}
		c.record(req, name, mode, res, err, start)
		if mode == AuditOnly {
			continue
		}
		if err != nil {
			return nil, err
		}
		final = res
	}
	if final == nil {
		return nil, ErrNoSanitizer
	}
	return final, nil
}

func (c *SanitizeChain) record(req *SanitizeRequest, module string, mode Mode, res *SanitizeResult, err error, start time.Time) {
	if c.audit == nil {
		return
	}
	r := AuditRecord{Time: start.UTC(), Hook: HookSanitizeToolNames, Module: module, Mode: mode,
		DurationUs: c.now().Sub(start).Microseconds()}
	if err != nil {
		r.Decision = "fail"
		r.Error = err.Error()
	} else {
		r.Decision = "ok"
		r.Reason = summarize(req, res)
	}
	c.audit.Record(r)
}

// summarize says how many tools were named, renamed (exposed under a name
// other than `<safe>__<raw>`) and rejected: the audit record's reason.
func summarize(req *SanitizeRequest, res *SanitizeResult) string {
	named, renamed, rejected := 0, 0, 0
	for i, s := range res.Servers {
		for j, t := range s.Tools {
			if t.Reject != "" {
				rejected++
				continue
			}
			named++
			if t.Name != s.Safe+"__"+req.Servers[i].Tools[j] {
				renamed++
			}
		}
	}
	return fmt.Sprintf("%d servers, %d tools named, %d renamed, %d rejected", len(req.Servers), named, renamed, rejected)
}
