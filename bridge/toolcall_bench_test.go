package bridge

import (
	"context"
	"testing"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
)

// BenchmarkToolCall measures one tools/call through a real go-sdk client
// over in-memory transports, the hook boundary and the tool, with a native
// allow-all policy and with the built-in rules module (Wasm, interruption
// on). The Gateway is the fixture double, so conversations_list costs no
// network. Compare the two policies' ratio, not absolute times.
func BenchmarkToolCall(b *testing.B) {
	ctx := context.Background()
	rules, err := wasmpolicy.Load(ctx, "rules", builtin.Rules(), []byte(builtin.DefaultRulesConfig), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rules.Close(ctx)
	for _, pol := range []struct {
		name string
		enf  policies.Enforcer
	}{
		{"native-allow", &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.Allow}}},
		{"rules-wasm", policies.NewChain([]policies.ChainEntry{{Hook: rules}}, nil)},
	} {
		for _, tool := range []string{ToolEventsPoll, ToolConversationsList} {
			b.Run(tool+"/"+pol.name, func(b *testing.B) {
				br := New(&fixtureGateway{t: b}, &Options{Enforcer: pol.enf})
				cs := connectClient(b, br, "2025-11-25")
				params := toolParams(tool, map[string]any{})
				b.ResetTimer()
				for range b.N {
					res, err := cs.CallTool(ctx, params)
					if err != nil || res.IsError {
						b.Fatalf("%v %v", err, res)
					}
				}
			})
		}
	}
}
