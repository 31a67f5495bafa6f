package wasmpolicy_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// loadParrot loads guests/testdata/parrot.wasm, whose hooks all answer
// answer byte for byte.
func loadParrot(t *testing.T, answer string) *wasmpolicy.Module {
	return loadFile(t, "parrot", "../../guests/testdata/parrot.wasm", answer, wasmhost.Options{PoolSize: 1})
}

// TestAmbiguousOutputFailsClosed: a module answer that JSON readers could
// take two ways (a key given twice, a key in another case, which
// encoding/json matches to the field anyway) or with a key the ABI does
// not define blocks the call, denies the approval or fails the catalog,
// with an ABI error naming the module and the key; it never counts as the
// permissive reading.
func TestAmbiguousOutputFailsClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	call := &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "fs_write", Server: "fs", RawName: "write"}}
	t.Run("before_tool_call", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ answer, want string }{
			{`{"decision":"block","decision":"allow"}`, `repeated field "decision"`},
			{`{"decision":"block","d\u0065cision":"allow"}`, `repeated field "decision"`},
			{`{"Decision":"allow"}`, `unknown field "Decision" (field names are case-sensitive: want "decision")`},
			{`{"decision":"block","DECISION":"allow"}`, `unknown field "DECISION"`},
			{`{"deciſion":"allow"}`, `unknown field "deciſion"`},
			{`{"decision":"require_approval","timeout_ms":1000,"Timeout_Ms":1}`, `unknown field "Timeout_Ms"`},
			{`{"decision":"allow","arguments":{"path":"/tmp/a"},"arguments":{"path":"/etc/passwd"}}`, `repeated field "arguments"`},
			{`{"decision":"allow","Arguments":{"path":"/etc/passwd"}}`, `unknown field "Arguments"`},
			{`{"decision":"allow","rule":"r1"}`, `unknown field "rule"`},
		} {
			v, err := loadParrot(t, tc.answer).BeforeToolCall(ctx, call)
			var we *wasmhost.Error
			if v.Decision != policies.Block || !errors.As(err, &we) || we.Module != "parrot" || we.Kind != wasmhost.KindABI ||
				!strings.HasPrefix(err.Error(), `wasm module "parrot": before_tool_call: invalid verdict `) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got %+v, %v; want a block with an ABI error naming the module and %q", tc.answer, v, err, tc.want)
			}
		}
		if v, err := loadParrot(t, `{"decision":"allow","reason":"fine"}`).BeforeToolCall(ctx, call); err != nil || v.Decision != policies.Allow {
			t.Errorf("an exact answer: %+v, %v", v, err)
		}
	})
	t.Run("decide_approval", func(t *testing.T) {
		t.Parallel()
		req := &policies.ApprovalRequest{Kind: policies.ApprovalExec, Command: "rm -rf /", SessionKey: "agent:main:main"}
		for _, tc := range []struct{ answer, want string }{
			{`{"decision":"deny","decision":"allow-always"}`, `repeated field "decision"`},
			{`{"Decision":"allow-always"}`, `unknown field "Decision" (field names are case-sensitive: want "decision")`},
			{`{"decision":"deny","DECISION":"allow-once"}`, `unknown field "DECISION"`},
			{`{"decision":"allow-always","ttl_ms":1,"ttl_ms":0}`, `repeated field "ttl_ms"`},
			{`{"decision":"allow-always","TTL_ms":0}`, `unknown field "TTL_ms"`},
			{`{"decision":"ask","timeout_ms":1}`, `unknown field "timeout_ms"`},
		} {
			m := loadParrot(t, tc.answer)
			v, err := m.DecideApproval(ctx, req)
			var we *wasmhost.Error
			if v.Decision != policies.Deny || !errors.As(err, &we) || we.Module != "parrot" || we.Kind != wasmhost.KindABI ||
				!strings.HasPrefix(err.Error(), `wasm module "parrot": decide_approval: invalid approval verdict `) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got %+v, %v; want a deny with an ABI error naming the module and %q", tc.answer, v, err, tc.want)
			}
			// Through the chain no human is skipped: the answer is deny,
			// and nothing is remembered as an allow-always grant.
			mem := policies.NewApprovalMemory(nil)
			out := policies.NewApprovalChain([]policies.ApprovalEntry{{Hook: m}}, &policies.ApprovalChainOptions{Memory: mem}).DecideApproval(ctx, req)
			if out.Decision != policies.Deny || out.Module != "parrot" || !strings.Contains(out.Reason, tc.want) {
				t.Errorf("%s: the chain answered %+v, want a deny by parrot", tc.answer, out)
			}
			if out := policies.NewApprovalChain(nil, &policies.ApprovalChainOptions{Memory: mem}).DecideApproval(ctx, req); out.Decision != policies.Ask {
				t.Errorf("%s: afterwards an empty chain answered %+v from memory, want ask", tc.answer, out)
			}
		}
		if v, err := loadParrot(t, `{"decision":"allow-once"}`).DecideApproval(ctx, req); err != nil || v.Decision != policies.AllowOnce {
			t.Errorf("an exact answer: %+v, %v", v, err)
		}
	})
	t.Run("sanitize_tool_names", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ answer, want string }{
			{`{"servers":[{"safe":"web","tools":[{"name":"web__fetch"}]}],"servers":[]}`, `repeated field "servers"`},
			{`{"Servers":[{"safe":"web","tools":[{"name":"web__fetch"}]}]}`, `unknown field "Servers"`},
			{`{"servers":[{"safe":"web","Safe":"x","tools":[{"name":"web__fetch"}]}]}`, `unknown field "Safe"`},
			{`{"servers":[{"safe":"web","tools":[{"name":"web__fetch","Name":"web__other"}]}]}`, `unknown field "Name"`},
			{`{"servers":[{"safe":"web","tools":[{"name":"web__fetch","name":"web__other"}]}]}`, `repeated field "name"`},
		} {
			res, err := loadParrot(t, tc.answer).SanitizeToolNames(ctx, webReq)
			var we *wasmhost.Error
			if res != nil || !errors.As(err, &we) || we.Module != "parrot" || we.Kind != wasmhost.KindABI ||
				!strings.HasPrefix(err.Error(), `wasm module "parrot": sanitize_tool_names: invalid names `) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got %v, %v; want the catalog refused with an ABI error naming the module and %q", tc.answer, res, err, tc.want)
			}
		}
		if res, err := loadParrot(t, `{"servers":[{"safe":"web","tools":[{"name":"web__fetch"}]}]}`).SanitizeToolNames(ctx, webReq); err != nil || res.Servers[0].Tools[0].Name != "web__fetch" {
			t.Errorf("an exact answer: %+v, %v", res, err)
		}
	})
}
