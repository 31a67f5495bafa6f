package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/engine"
)

// TestSanitizeThroughEngine loads the built-in sanitizer from a policy
// file and names a small catalog through the engine.
func TestSanitizeThroughEngine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pf := writeFile(t, dir, "policy.json", []byte(`{"modules":[{"source":"builtin:rules"},{"source":"builtin:sanitizer"}]}`))
	e, _ := load(t, engine.Options{ConfigFile: pf})
	res, err := e.SanitizeToolNames(context.Background(), &policies.SanitizeRequest{
		Servers: []policies.SanitizeServer{{Name: "files", Tools: []string{"read_file", "write file"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Servers) != 1 || len(res.Servers[0].Tools) != 2 {
		t.Fatalf("result = %+v", res)
	}
	for _, tn := range res.Servers[0].Tools {
		if !policies.ValidToolName(tn.Name) {
			t.Errorf("exposed name %q is not valid", tn.Name)
		}
	}
	if got := res.Servers[0].Tools[0].Name; got != "files__read_file" {
		t.Errorf("read_file exposed as %q, want files__read_file", got)
	}
	// The rules module does not serve sanitize_tool_names and the
	// sanitizer does not serve before_tool_call: each chain holds its own.
	if d := e.BeforeToolCall(context.Background(), call("")); d.Decision != policies.Allow {
		t.Fatalf("before_tool_call: %+v", d)
	}
}

func TestDefaultModulesAndMissingHooks(t *testing.T) {
	t.Parallel()
	e, _ := load(t, engine.Options{DefaultModules: []string{"builtin:rules", "builtin:sanitizer"}})
	if mods := e.Modules(); len(mods) != 2 || !mods[0].Default || !mods[1].Default || mods[1].Name != "sanitizer" {
		t.Fatalf("modules = %+v", mods)
	}

	only, _ := load(t, engine.Options{})
	_, err := only.SanitizeToolNames(context.Background(), &policies.SanitizeRequest{Servers: []policies.SanitizeServer{{Name: "a", Tools: []string{"b"}}}})
	if !errors.Is(err, policies.ErrNoSanitizer) {
		t.Fatalf("no sanitizer loaded: err = %v", err)
	}
	// No decide_approval module: the request goes to a human.
	out := only.DecideApproval(context.Background(), &policies.ApprovalRequest{Kind: policies.ApprovalKind("exec"), Command: "ls"})
	if out.Decision != policies.Ask {
		t.Fatalf("no approval module: %+v, want ask", out)
	}
}

// TestDecideApprovalThroughEngine: the built-in approval policy decides
// through the engine, and a reload that changes the decide_approval
// module drops the remembered allow-always grants.
func TestDecideApprovalThroughEngine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	grant := `{"modules":[{"source":"builtin:approvals","config":{"default":"ask","rules":[
		{"kind":"exec","command":"ls *","decision":"allow-always"},
		{"kind":"exec","command":"rm *","decision":"deny","reason":"no deletes"}]}}]}`
	pf := writeFile(t, dir, "policy.json", []byte(grant))
	e, _ := load(t, engine.Options{ConfigFile: pf})
	ctx := context.Background()
	req := func(cmd string) *policies.ApprovalRequest {
		return &policies.ApprovalRequest{Kind: policies.ApprovalKind("exec"), SessionKey: "agent:main:main", Command: cmd,
			Requester: policies.Caller{Name: "agent:main"}}
	}
	if out := e.DecideApproval(ctx, req("rm -rf /")); out.Decision != policies.Deny || out.Reason != "no deletes" || out.Module != "approvals" {
		t.Fatalf("rm: %+v", out)
	}
	if out := e.DecideApproval(ctx, req("ls -la")); out.Decision != policies.AllowAlways {
		t.Fatalf("ls: %+v", out)
	}
	if out := e.DecideApproval(ctx, req("cat x")); out.Decision != policies.Ask {
		t.Fatalf("cat: %+v", out)
	}

	replaceFile(t, pf, []byte(`{"modules":[{"source":"builtin:approvals","config":{"default":"ask","rules":[]}}]}`))
	if res, err := e.Reload(ctx); err != nil || len(res.Swapped) != 1 {
		t.Fatalf("reload: %+v, %v", res, err)
	}
	if out := e.DecideApproval(ctx, req("ls -la")); out.Decision != policies.Ask || out.Module == policies.MemoryModule {
		t.Fatalf("ls after the policy changed: %+v, want ask (no grant from the old policy)", out)
	}
}

// TestRegoModuleThroughEngine loads the OPA-compiled example policy
// (guests/rego, `opa build -t wasm`) from a policy file: the engine
// recognizes the format, hands it to the OPA adapter, and the Rego rules
// decide every hook; a reload swaps it like any module.
func TestRegoModuleThroughEngine(t *testing.T) {
	t.Parallel()
	wasm, err := os.ReadFile(filepath.Join("..", "..", "guests", "rego", "policy.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, dir, "policy.wasm", wasm)
	pf := writeFile(t, dir, "policy.json", []byte(`{"modules":[{"name":"rego","source":"policy.wasm","config":{"blocked_tools":["events_poll"]}}]}`))
	e, _ := load(t, engine.Options{ConfigFile: pf})
	mods := e.Modules()
	if len(mods) != 1 || len(mods[0].Hooks) != 3 {
		t.Fatalf("modules = %+v, want rego serving three hooks", mods)
	}
	d := e.BeforeToolCall(context.Background(), call(""))
	if d.Decision != policies.Block || d.Module != "rego" || !strings.Contains(d.Reason, "events_poll is blocked by configuration") {
		t.Fatalf("decision = %+v", d)
	}
	res, err := e.SanitizeToolNames(context.Background(), &policies.SanitizeRequest{
		Servers: []policies.SanitizeServer{{Name: "files", Tools: []string{"read_file"}}}})
	if err != nil || len(res.Servers) != 1 || !policies.ValidToolName(res.Servers[0].Tools[0].Name) {
		t.Fatalf("sanitize = %+v, %v", res, err)
	}
	replaceFile(t, pf, []byte(`{"modules":[{"name":"rego","source":"policy.wasm","config":{}}]}`))
	if r, err := e.Reload(context.Background()); err != nil || len(r.Swapped) != 1 {
		t.Fatalf("reload = %+v, %v", r, err)
	}
	if d := e.BeforeToolCall(context.Background(), call("")); d.Decision != policies.Allow {
		t.Fatalf("after the reload: %+v", d)
	}
}
