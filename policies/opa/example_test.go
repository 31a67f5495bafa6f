package opa_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/opa"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// Load the example Rego policy (guests/rego/policy.rego, compiled by
// `opa build -t wasm`) with a config, which becomes its data document, and
// enforce it through a chain.
func ExampleLoad() {
	ctx := context.Background()
	wasm, err := os.ReadFile("../../guests/rego/policy.wasm")
	if err != nil || !opa.IsModule(wasm) {
		fmt.Println("not an OPA module:", err)
		return
	}
	config := json.RawMessage(`{"blocked_tools":["exec"]}`)
	rego, err := opa.Load(ctx, "rego", wasm, config, &opa.Options{Host: wasmhost.Options{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rego.Close(ctx)
	fmt.Println("hooks:", rego.Hooks())

	chain := policies.NewChain([]policies.ChainEntry{{Hook: rego}}, nil)
	for _, tool := range []string{"conversations_list", "messages_send", "exec"} {
		d := chain.BeforeToolCall(ctx, &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: tool}})
		if d.Decision == policies.Allow {
			fmt.Println(tool, "allowed")
		} else {
			fmt.Println(tool, d.Message())
		}
	}
	// Output:
	// hooks: [before_tool_call sanitize_tool_names decide_approval]
	// conversations_list allowed
	// messages_send approval required by policy "rego": this tool acts outside the agent
	// exec blocked by policy "rego": tool exec is blocked by configuration
}

// A module that needs an OPA builtin the host does not provide is refused
// at load, naming it.
func ExampleLoad_missingBuiltin() {
	wasm, err := os.ReadFile("testdata/needs_builtins.wasm")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = opa.Load(context.Background(), "clock", wasm, nil, &opa.Options{Host: wasmhost.Options{}})
	fmt.Println(err)
	// Output:
	// wasm module "clock": needs OPA builtins "http.send", "time.now_ns", which this host does not provide (the host provides only "sprintf": no network, clock or randomness)
}
