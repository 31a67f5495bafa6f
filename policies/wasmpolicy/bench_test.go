package wasmpolicy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// benchConfig is a small realistic ruleset; benchCall matches its fourth
// rule, so three rules are evaluated and rejected first.
const benchConfig = `{"default":"allow","rules":[
 {"tool":"messages_send","decision":"block","reason":"sending is disabled"},
 {"tool":"fs_*","server":"files","args":{"path":{"path_prefix":"/etc"}},"decision":"block","reason":"no /etc"},
 {"tool":"exec","args":{"cmd":{"glob":"rm -r*"}},"decision":"block"},
 {"tool":"fs_write*","server":"files","decision":"require_approval","reason":"writes need approval","title":"Write a file?"}
]}`

var benchCall = &policies.ToolCall{
	Surface: policies.SurfaceServe, SessionKey: "agent:main:main", Caller: policies.Caller{Name: "claude-code", Version: "2.1"},
	Tool:      policies.ToolRef{Name: "fs_write_file", Server: "files", RawName: "write_file"},
	Arguments: json.RawMessage(`{"path":"/srv/a.txt","content":"hello world"}`),
}

// nativeRules is the same ruleset written as a Go function: the limit a
// Wasm policy is compared with.
type nativeRules struct{}

func (nativeRules) Name() string { return "native" }
func (nativeRules) BeforeToolCall(_ context.Context, c *policies.ToolCall) (policies.Verdict, error) {
	var args map[string]any
	if len(c.Arguments) > 0 {
		if err := json.Unmarshal(c.Arguments, &args); err != nil {
			return policies.Verdict{}, err
		}
	}
	p, _ := args["path"].(string)
	cmd, _ := args["cmd"].(string)
	switch {
	case c.Tool.Name == "messages_send":
		return policies.Verdict{Decision: policies.Block, Reason: "sending is disabled"}, nil
	case strings.HasPrefix(c.Tool.Name, "fs_") && c.Tool.Server == "files" && (path.Clean(p) == "/etc" || strings.HasPrefix(path.Clean(p), "/etc/")):
		return policies.Verdict{Decision: policies.Block, Reason: "no /etc"}, nil
	case c.Tool.Name == "exec" && strings.HasPrefix(cmd, "rm -r"):
		return policies.Verdict{Decision: policies.Block, Reason: "rules[2] matched"}, nil
	case strings.HasPrefix(c.Tool.Name, "fs_write") && c.Tool.Server == "files":
		return policies.Verdict{Decision: policies.RequireApproval, Reason: "writes need approval", Title: "Write a file?"}, nil
	}
	return policies.Verdict{Decision: policies.Allow}, nil
}

// measure runs fn b.N times, timing each call, and reports the median and
// p99 alongside the mean that go test prints.
func measure(b *testing.B, fn func()) {
	b.Helper()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		fn()
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "median-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	}
}

func loadBench(b *testing.B, config string) *wasmpolicy.Module {
	b.Helper()
	m, err := wasmpolicy.Load(context.Background(), "rules", builtin.Rules(), json.RawMessage(config),
		&wasmpolicy.Options{Host: wasmhost.Options{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// BenchmarkBeforeToolCallRules is one before_tool_call decision through
// wasmpolicy and the built-in rules module, with interruption on
// (WithCloseOnContextDone and the 100 ms call deadline). Target: a median
// of at most 10 µs.
func BenchmarkBeforeToolCallRules(b *testing.B) {
	for _, bc := range []struct{ name, config string }{
		{"default", builtin.DefaultRulesConfig},
		{"ruleset", benchConfig},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := loadBench(b, bc.config)
			ctx := context.Background()
			if v, err := m.BeforeToolCall(ctx, benchCall); err != nil || (bc.name == "ruleset" && v.Reason != "writes need approval") {
				b.Fatalf("verdict %+v, %v", v, err)
			}
			measure(b, func() {
				if _, err := m.BeforeToolCall(ctx, benchCall); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkChain compares a policies.Chain over the rules module with the
// same chain over the same ruleset written in Go, in one run, so their
// ratio is meaningful on a noisy machine.
func BenchmarkChain(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		hook func(b *testing.B) policies.BeforeToolCallHook
	}{
		{"native", func(*testing.B) policies.BeforeToolCallHook { return nativeRules{} }},
		{"wasm-rules", func(b *testing.B) policies.BeforeToolCallHook { return loadBench(b, benchConfig) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			chain := policies.NewChain([]policies.ChainEntry{{Hook: bc.hook(b)}}, nil)
			if d := chain.BeforeToolCall(ctx, benchCall); d.Decision != policies.RequireApproval || d.Reason != "writes need approval" {
				b.Fatalf("decision %+v", d)
			}
			measure(b, func() { chain.BeforeToolCall(ctx, benchCall) })
		})
	}
}

// BenchmarkBeforeToolCallRulesParallel measures throughput with callers
// on every P sharing the module's instance pool.
func BenchmarkBeforeToolCallRulesParallel(b *testing.B) {
	m := loadBench(b, benchConfig)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := m.BeforeToolCall(ctx, benchCall); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkLoadRules is Load (check the load limits, compile, link,
// instantiate and configure the pre-warmed instance) plus Close: "cold"
// compiles, "live" finds the module compiled in the process's in-memory
// cache because another Runtime holding it is open.
func BenchmarkLoadRules(b *testing.B) {
	wasm := builtin.Rules()
	ctx := context.Background()
	load := func() *wasmpolicy.Module {
		m, err := wasmpolicy.Load(ctx, "rules", wasm, json.RawMessage(benchConfig), nil)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	b.Run("cold", func(b *testing.B) {
		measure(b, func() { _ = load().Close(ctx) })
	})
	b.Run("live", func(b *testing.B) {
		held := load()
		defer held.Close(ctx)
		measure(b, func() { _ = load().Close(ctx) })
	})
}

// hostileCall makes the rules module fail (its input is not UTF-8: the
// guest refuses it with a zero result), so its instance is discarded.
var hostileCall = &policies.ToolCall{
	Surface: policies.SurfaceServe, Caller: policies.Caller{Name: "mallory"},
	Tool: policies.ToolRef{Name: "search", Server: "web", RawName: "search"}, Arguments: json.RawMessage("{\"q\":\"Z\xb0\xa1\x93\"}"),
}

// BenchmarkBenignUnderHostile measures one benign before_tool_call
// decision of the rules module (pool of 2 instances) alone, and while two
// other sessions send, back to back, calls that make the module fail.
// Compare the median and p99 of the two runs.
func BenchmarkBenignUnderHostile(b *testing.B) {
	for _, hostile := range []int{0, 2} {
		b.Run(fmt.Sprintf("hostile-sessions=%d", hostile), func(b *testing.B) {
			m, err := wasmpolicy.Load(context.Background(), "rules", builtin.Rules(), json.RawMessage(benchConfig),
				&wasmpolicy.Options{Host: wasmhost.Options{PoolSize: 2}})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close(context.Background())
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var failures atomic.Int64
			for i := range hostile {
				wg.Go(func() {
					c := *hostileCall
					c.SessionKey = fmt.Sprintf("agent:mallory:%d", i)
					for ctx.Err() == nil {
						if _, err := m.BeforeToolCall(ctx, &c); err != nil {
							failures.Add(1)
						}
					}
				})
			}
			measure(b, func() {
				if v, err := m.BeforeToolCall(context.Background(), benchCall); err != nil || v.Decision != policies.RequireApproval {
					b.Fatalf("benign call: %+v, %v", v, err)
				}
			})
			stop()
			wg.Wait()
			if hostile > 0 && failures.Load() == 0 {
				b.Fatal("the hostile sessions made no call fail")
			}
			b.ReportMetric(float64(failures.Load())/float64(b.N), "hostile-failures/op")
		})
	}
}
