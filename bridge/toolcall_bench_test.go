package bridge

import (
	"context"
	"encoding/json"
	"io"
	"syscall"
	"testing"
	"time"

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

// BenchmarkPolicyStep measures the hook boundary of one events_poll on
// the local path (validation, the policy, the audit record, the tool) with
// the default ruleset (the built-in rules module, Wasm, interruption on)
// and an audit log, against the same without a policy module.
//
//	go test -run '^$' -bench BenchmarkPolicyStep -benchmem ./bridge/
func BenchmarkPolicyStep(b *testing.B) {
	ctx := context.Background()
	rules, err := wasmpolicy.Load(ctx, "rules", builtin.Rules(), []byte(builtin.DefaultRulesConfig), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rules.Close(ctx)
	audit := policies.NewAuditLog(io.Discard)
	spec := toolByName(ToolEventsPoll)
	for _, pol := range []struct {
		name string
		enf  policies.Enforcer
	}{
		{"no-module", policies.NewChain(nil, &policies.ChainOptions{Audit: audit})},
		{"default-rules+audit", policies.NewChain([]policies.ChainEntry{{Hook: rules}}, &policies.ChainOptions{Audit: audit})},
	} {
		b.Run(pol.name, func(b *testing.B) {
			br := New(nil, &Options{Enforcer: pol.enf, ClaudeChannelMode: ChannelOff})
			defer br.Close()
			args := json.RawMessage(`{"after_cursor":0}`)
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				dc, res := br.decideCall(ctx, spec, args, policies.Caller{Name: "bench"}, true)
				if res != nil {
					b.Fatal(resultText(res))
				}
				br.finishCall(ctx, nil, spec, dc)
			}
			// CPU time is what a loaded machine distorts least.
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the user and system CPU time the process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
