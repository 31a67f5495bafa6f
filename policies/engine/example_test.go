package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/engine"
)

// A policy file with the built-in rules module, loaded by the engine, and
// one decision.
func ExampleLoad() {
	dir, _ := os.MkdirTemp("", "engine-example-")
	defer os.RemoveAll(dir)
	pf := filepath.Join(dir, "policy.json")
	_ = os.WriteFile(pf, []byte(`{"audit_log":"`+filepath.Join(dir, "audit.jsonl")+`","modules":[
		{"source":"builtin:rules","config":{"default":"allow","rules":[{"tool":"messages_send","decision":"block","reason":"read-only"}]}}]}`), 0o600)

	ctx := context.Background()
	eng, err := engine.Load(ctx, &engine.Options{ConfigFile: pf})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(ctx)
	for _, m := range eng.Modules() {
		fmt.Println(m.Name, m.Mode, m.Hooks)
	}
	d := eng.BeforeToolCall(ctx, &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "messages_send"}})
	fmt.Println(d.Message())
	// Output:
	// rules enforce [before_tool_call]
	// blocked by policy "rules": read-only
}
