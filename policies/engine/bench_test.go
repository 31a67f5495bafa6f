package engine_test

import (
	"context"
	"testing"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/engine"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// BenchmarkBeforeToolCall compares a decision through the engine (policy
// set reference taken and dropped per call, so that a swap never closes a
// module under a call) with the same chain built by hand: the difference
// is the price of hot swap.
func BenchmarkBeforeToolCall(b *testing.B) {
	ctx := context.Background()
	call := &policies.ToolCall{Surface: policies.SurfaceServe, SessionKey: "agent:main:main",
		Tool: policies.ToolRef{Name: "messages_send"}}
	b.Run("engine", func(b *testing.B) {
		e, _ := load(b, engine.Options{Audit: &counter{}})
		b.ReportAllocs()
		for b.Loop() {
			e.BeforeToolCall(ctx, call)
		}
	})
	b.Run("chain", func(b *testing.B) {
		m, err := wasmpolicy.Load(ctx, "rules", builtin.Rules(), []byte(builtin.DefaultRulesConfig),
			&wasmpolicy.Options{Host: wasmhost.Options{}})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close(ctx)
		c := policies.NewChain([]policies.ChainEntry{{Hook: m}}, &policies.ChainOptions{Audit: &counter{}})
		b.ReportAllocs()
		for b.Loop() {
			c.BeforeToolCall(ctx, call)
		}
	})
	b.Run("engine-parallel", func(b *testing.B) {
		e, _ := load(b, engine.Options{Audit: &counter{}})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				e.BeforeToolCall(ctx, call)
			}
		})
	})
}
