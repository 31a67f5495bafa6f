package wasmpolicy_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// Load the built-in rules module with a ruleset and enforce it through a
// chain.
func ExampleLoad() {
	ctx := context.Background()
	config := json.RawMessage(`{"rules":[{"tool":"messages_send","decision":"block","reason":"sending is disabled"}]}`)
	rules, err := wasmpolicy.Load(ctx, "rules", builtin.Rules(), config,
		&wasmpolicy.Options{Host: wasmhost.Options{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rules.Close(ctx)

	chain := policies.NewChain([]policies.ChainEntry{{Hook: rules}}, nil)
	for _, tool := range []string{"conversations_list", "messages_send"} {
		d := chain.BeforeToolCall(ctx, &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: tool}})
		if d.Decision == policies.Allow {
			fmt.Println(tool, "allowed")
		} else {
			fmt.Println(tool, d.Message())
		}
	}
	// Output:
	// conversations_list allowed
	// messages_send blocked by policy "rules": sending is disabled
}

// A config with a typo is refused at load, naming the culprit.
func ExampleLoad_configError() {
	ctx := context.Background()
	_, err := wasmpolicy.Load(ctx, "rules", builtin.Rules(), json.RawMessage(`{"default":"deny"}`),
		&wasmpolicy.Options{Host: wasmhost.Options{}})
	fmt.Println(err)
	// Output:
	// wasm module "rules": configure: configuration refused: default: unknown decision "deny" (want allow, block or require_approval)
}
