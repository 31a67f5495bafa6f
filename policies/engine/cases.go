package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
)

// TestCase is one line of a `openclaw policy test --cases FILE.jsonl`
// file: a hook input and the decision expected from the module.
//
//	{"name":"sends are blocked","input":{"surface":"serve","tool":{"name":"messages_send"}},"expect":{"decision":"block","reason":"read-only"}}
//	{"name":"ls is fine","hook":"decide_approval","input":{"kind":"exec","request":{"command":"ls"}},"expect":{"decision":"allow-once"}}
type TestCase struct {
	// Name labels the case in the report; default "line N".
	Name string `json:"name,omitempty"`
	// Hook is the hook point to call; default before_tool_call.
	Hook policies.Hook `json:"hook,omitempty"`
	// Input is the hook's input, decoded strictly into the host's type
	// and encoded by the host exactly as in production: the fields of
	// policies.ToolCall for before_tool_call (surface, session_key,
	// caller, tool, arguments), of policies.SanitizeRequest for
	// sanitize_tool_names (reserved, servers, proposed), of
	// policies.ApprovalRequest for decide_approval (kind, id, surface,
	// session_key, requester, tool, command, request). An "abi" member is
	// ignored.
	Input json.RawMessage `json:"input"`
	// Expect is what the module must answer.
	Expect Expectation `json:"expect"`
	// Line is the case's line number in its file (set by ParseCases).
	Line int `json:"-"`
}

// Expectation is what a [TestCase] checks; every field given must hold,
// and at least one must be given.
type Expectation struct {
	// Decision is the expected decision: allow, block or
	// require_approval for before_tool_call; the output's "decision" for
	// the other hooks (decide_approval: allow-once, allow-always, deny,
	// ask).
	Decision string `json:"decision,omitempty"`
	// Reason must equal the verdict's reason; ReasonContains must occur
	// in it.
	Reason         string `json:"reason,omitempty"`
	ReasonContains string `json:"reason_contains,omitempty"`
	// Arguments must equal (as JSON) the arguments a before_tool_call
	// verdict rewrote.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Output must be a subset of the module's answer as the host decoded
	// it (a before_tool_call verdict, the sanitized names, an approval
	// verdict), in JSON: every member given must be present with an equal
	// value (arrays compare whole).
	Output json.RawMessage `json:"output,omitempty"`
	// Error, when set, expects the call to fail (trap, timeout, bad
	// output…) with a message containing it. Without it a failing call is
	// a FAIL, even though production would fail closed: a test suite
	// should see a module that breaks.
	Error string `json:"error,omitempty"`
}

// CaseResult is the outcome of one case.
type CaseResult struct {
	// Case is the case that ran.
	Case TestCase `json:"-"`
	// Name and Hook repeat the case's, with defaults applied.
	Name string        `json:"name"`
	Hook policies.Hook `json:"hook"`
	// Expected and Got summarize the expected and actual decision (or
	// "error").
	Expected string `json:"expected"`
	Got      string `json:"got"`
	// Reason is the module's reason ("" when it gave none); Arguments the
	// arguments of a rewrite (before_tool_call), absent otherwise; Error
	// the text of the error when the call failed.
	Reason    string          `json:"reason,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Error     string          `json:"error,omitempty"`
	// Pass reports whether every expectation held; Mismatches says which
	// did not.
	Pass       bool     `json:"pass"`
	Mismatches []string `json:"mismatches,omitempty"`
}

// ParseCases reads JSON Lines test cases. Blank lines and lines starting
// with '#' or "//" are skipped. Unknown fields, an unknown hook, a missing
// input or an empty expectation are errors naming the line.
func ParseCases(r io.Reader) ([]TestCase, error) {
	var cases []TestCase
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' || bytes.HasPrefix(line, []byte("//")) {
			continue
		}
		var c TestCase
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		c.Line = n
		if c.Name == "" {
			c.Name = fmt.Sprintf("line %d", n)
		}
		if c.Hook == "" {
			c.Hook = policies.HookBeforeToolCall
		}
		if !slices.Contains(config.HookNames, string(c.Hook)) {
			return nil, fmt.Errorf("line %d (%s): unknown hook %q (want %s)", n, c.Name, c.Hook, strings.Join(config.HookNames, ", "))
		}
		if len(bytes.TrimSpace(c.Input)) == 0 || c.Input[0] != '{' {
			return nil, fmt.Errorf("line %d (%s): input must be a JSON object", n, c.Name)
		}
		if reflect.DeepEqual(c.Expect, Expectation{}) {
			return nil, fmt.Errorf("line %d (%s): expect is empty: give a decision, reason, output or error", n, c.Name)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return cases, nil
}

// RunCase runs one case against m and compares the answer.
func RunCase(ctx context.Context, m Module, c TestCase) CaseResult {
	r := CaseResult{Case: c, Name: c.Name, Hook: c.Hook, Expected: c.Expect.Decision}
	if c.Expect.Error != "" {
		r.Expected = "error"
	}
	if r.Expected == "" {
		r.Expected = "(output)"
	}
	mismatch := func(format string, args ...any) { r.Mismatches = append(r.Mismatches, fmt.Sprintf(format, args...)) }

	decision, reason, args, out, err := callCase(ctx, m, c)
	if err != nil {
		r.Got, r.Error = "error", err.Error()
		switch {
		case c.Expect.Error == "":
			mismatch("the call failed: %v", err)
		case !strings.Contains(err.Error(), c.Expect.Error):
			mismatch("error %q does not contain %q", err, c.Expect.Error)
		}
		r.Pass = len(r.Mismatches) == 0
		return r
	}
	r.Got, r.Reason = decision, reason
	if len(args) > 0 {
		r.Arguments = args
	}
	if r.Got == "" {
		r.Got = "(output)"
	}
	e := c.Expect
	if e.Error != "" {
		mismatch("want an error containing %q, the call succeeded", e.Error)
	}
	if e.Decision != "" && decision != e.Decision {
		mismatch("decision %q, want %q", decision, e.Decision)
	}
	if e.Reason != "" && reason != e.Reason {
		mismatch("reason %q, want %q", reason, e.Reason)
	}
	if e.ReasonContains != "" && !strings.Contains(reason, e.ReasonContains) {
		mismatch("reason %q does not contain %q", reason, e.ReasonContains)
	}
	if len(e.Arguments) > 0 {
		if ok, err := jsonSubset(e.Arguments, args, true); err != nil || !ok {
			mismatch("arguments %s, want %s", orNone(args), e.Arguments)
		}
	}
	if len(e.Output) > 0 {
		if ok, err := jsonSubset(e.Output, out, false); err != nil || !ok {
			mismatch("output %s does not match %s", orNone(out), e.Output)
		}
	}
	r.Pass = len(r.Mismatches) == 0
	return r
}

func orNone(b []byte) string {
	if len(b) == 0 {
		return "(none)"
	}
	return string(b)
}

// callCase makes the case's call through the module's typed adapter, as
// a surface does, and extracts decision and reason.
func callCase(ctx context.Context, m Module, c TestCase) (decision, reason string, args, out []byte, err error) {
	call, err := hookCall(ctx, m, c.Hook, c.Input)
	if err != nil {
		return "", "", nil, nil, err
	}
	a, err := call()
	if err != nil {
		return "", "", nil, nil, err
	}
	out, err = json.Marshal(a.answer)
	if err != nil {
		return "", "", nil, nil, err
	}
	return a.decision, a.reason, a.args, out, nil
}

// answer is a hook's decoded answer.
type answer struct {
	decision, reason string
	args             json.RawMessage
	answer           any
}

// hookCall decodes input for hook h and returns a function making the
// call through m's adapter for that hook.
func hookCall(ctx context.Context, m Module, h policies.Hook, input json.RawMessage) (func() (answer, error), error) {
	switch h {
	case policies.HookBeforeToolCall:
		var call policies.ToolCall
		if err := decodeInput(input, &call); err != nil {
			return nil, err
		}
		return func() (answer, error) {
			v, err := m.BeforeToolCall(ctx, &call)
			return answer{string(v.Decision), v.Reason, v.Arguments, v}, err
		}, nil
	case policies.HookSanitizeToolNames:
		var req policies.SanitizeRequest
		if err := decodeInput(input, &req); err != nil {
			return nil, err
		}
		return func() (answer, error) {
			res, err := m.SanitizeToolNames(ctx, &req)
			return answer{answer: res}, err
		}, nil
	case policies.HookDecideApproval:
		var req policies.ApprovalRequest
		if err := decodeInput(input, &req); err != nil {
			return nil, err
		}
		return func() (answer, error) {
			v, err := m.DecideApproval(ctx, &req)
			return answer{decision: string(v.Decision), reason: v.Reason, answer: v}, err
		}, nil
	}
	return nil, fmt.Errorf("unknown hook %q", h)
}

// decodeInput decodes a hook input strictly into v, ignoring an "abi"
// member.
func decodeInput(input json.RawMessage, v any) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(input, &obj); err != nil {
		return fmt.Errorf("input: %w", err)
	}
	if _, ok := obj["abi"]; ok {
		delete(obj, "abi")
		input, _ = json.Marshal(obj)
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		// The hook's input shape is docs/policy-abi.md's, not a Go type.
		return fmt.Errorf("input is not a %s input (docs/policy-abi.md §6): %w", hookOfInput(v), err)
	}
	return nil
}

// hookOfInput names the hook whose input type v is.
func hookOfInput(v any) string {
	switch v.(type) {
	case *policies.ToolCall:
		return string(policies.HookBeforeToolCall)
	case *policies.SanitizeRequest:
		return string(policies.HookSanitizeToolNames)
	case *policies.ApprovalRequest:
		return string(policies.HookDecideApproval)
	}
	return "hook"
}

// jsonSubset reports whether want is contained in got: objects by member
// (all of want's, recursively), everything else by equality. With exact,
// objects must have the same members too.
func jsonSubset(want, got []byte, exact bool) (bool, error) {
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		return false, err
	}
	if len(got) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(got, &g); err != nil {
		return false, err
	}
	return subset(w, g, exact), nil
}

func subset(w, g any, exact bool) bool {
	wo, ok := w.(map[string]any)
	if !ok {
		return reflect.DeepEqual(w, g)
	}
	gob, ok := g.(map[string]any)
	if !ok || exact && len(gob) != len(wo) {
		return false
	}
	for k, wv := range wo {
		gv, ok := gob[k]
		if !ok || !subset(wv, gv, exact) {
			return false
		}
	}
	return true
}
