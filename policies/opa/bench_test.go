package opa

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// The benchmarks use the committed example (guests/rego/policy.wasm) and
// the input of the Policy host benchmarks (policies/wasmpolicy), so the
// rows compare. Run with a small -benchtime on shared machines:
//
//	go test -run '^$' -bench . -benchtime 5000x ./policies/opa

const benchExample = "../../guests/rego/policy.wasm"

// benchConfig makes the example ask for approval of fs_write_file, the
// tool of benchCall, as the rules benchmark's ruleset does.
const benchConfig = `{"approval_tools":["fs_write_file","messages_send"],"blocked_tools":["exec"]}`

var benchCall = &policies.ToolCall{
	Surface: policies.SurfaceServe, SessionKey: "agent:main:main", Caller: policies.Caller{Name: "claude-code", Version: "2.1"},
	Tool:      policies.ToolRef{Name: "fs_write_file", Server: "files", RawName: "write_file"},
	Arguments: json.RawMessage(`{"path":"/srv/a.txt","content":"hello world"}`),
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

func benchWasm(b *testing.B) []byte {
	b.Helper()
	wasm, err := os.ReadFile(benchExample)
	if err != nil {
		b.Fatal(err)
	}
	return wasm
}

func loadBench(b *testing.B, config string, host wasmhost.Options) *Module {
	b.Helper()
	return loadBenchOpts(b, config, &Options{Host: host})
}

func loadBenchOpts(b *testing.B, config string, opts *Options) *Module {
	b.Helper()
	m, err := Load(context.Background(), "rego", benchWasm(b), json.RawMessage(config), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// BenchmarkBeforeToolCall is one before_tool_call decision of the example
// Rego policy, interruption on, next to the built-in rules module deciding
// the same call (same run, so the ratio holds on a noisy machine).
func BenchmarkBeforeToolCall(b *testing.B) {
	ctx := context.Background()
	m := loadBench(b, benchConfig, wasmhost.Options{})
	for _, bc := range []struct {
		name string
		call *policies.ToolCall
		want policies.Decision
	}{
		{"rego/require_approval", benchCall, policies.RequireApproval},
		{"rego/allow", &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "conversations_list"},
			Arguments: json.RawMessage(`{"limit":20}`)}, policies.Allow},
		{"rego/block", &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "fs_read_file"},
			Arguments: json.RawMessage(`{"path":"/etc/shadow"}`)}, policies.Block},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if v, err := m.BeforeToolCall(ctx, bc.call); err != nil || v.Decision != bc.want {
				b.Fatalf("verdict %+v, %v; want %s", v, err, bc.want)
			}
			measure(b, func() {
				if _, err := m.BeforeToolCall(ctx, bc.call); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
	// The floor: a one-rule policy (testdata/decision.rego) on the same
	// input; what remains is parsing the input JSON and dumping the result
	// inside the guest, and the host's call.
	b.Run("rego-one-rule/allow", func(b *testing.B) {
		wasm, err := os.ReadFile("testdata/decision.wasm")
		if err != nil {
			b.Fatal(err)
		}
		m, err := Load(ctx, "decision", wasm, nil, &Options{Host: wasmhost.Options{}})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close(ctx)
		measure(b, func() {
			if _, err := m.BeforeToolCall(ctx, benchCall); err != nil {
				b.Fatal(err)
			}
		})
	})
	// The cost of interruption: the same decision with it off (never in
	// production: the deadline is then not enforced).
	b.Run("rego/require_approval/no-interruption", func(b *testing.B) {
		m := loadBenchOpts(b, benchConfig, &Options{Host: wasmhost.Options{}, noInterrupt: true})
		measure(b, func() {
			if _, err := m.BeforeToolCall(ctx, benchCall); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("rules/require_approval", func(b *testing.B) {
		r, err := wasmpolicy.Load(ctx, "rules", builtin.Rules(), json.RawMessage(
			`{"default":"allow","rules":[{"tool":"fs_write*","server":"files","decision":"require_approval","reason":"writes need approval"}]}`),
			&wasmpolicy.Options{Host: wasmhost.Options{}})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close(ctx)
		measure(b, func() {
			if _, err := r.BeforeToolCall(ctx, benchCall); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkHooks covers the other two hooks of the example.
func BenchmarkHooks(b *testing.B) {
	ctx := context.Background()
	m := loadBench(b, "", wasmhost.Options{})
	for _, bc := range []struct {
		name  string
		hook  policies.Hook
		input string
	}{
		{"decide_approval", policies.HookDecideApproval, `{"abi":1,"kind":"exec","id":"appr-exec-1","session_key":"agent:main:main","requester":{"name":"agent:main"},"tool":{"name":""},"command":"ls -la /tmp","request":{"command":"ls -la /tmp","cwd":"/tmp","host":"gateway"}}`},
		{"sanitize_tool_names/5", policies.HookSanitizeToolNames, `{"abi":1,"reserved":["conversations_list"],"servers":[{"name":"files","tools":["read_file","write_file"]},{"name":"web","tools":["fetch url"]},{"name":"memory","tools":["create_entities"]},{"name":"git","tools":["git.status"]}]}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := []byte(bc.input)
			measure(b, func() {
				if _, err := m.CallHook(ctx, bc.hook, in); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkLoad is Load + Close of the example: check the load limits,
// compile, link, instantiate, parse data, inspect.
func BenchmarkLoad(b *testing.B) {
	ctx := context.Background()
	wasm := benchWasm(b)
	for b.Loop() {
		m, err := Load(ctx, "rego", wasm, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		_ = m.Close(ctx)
	}
}

// BenchmarkInstantiate is one new instance of a loaded module (what the
// pool pays after a failure or to grow): the env shim, the policy, the
// data document. It also reports the instance's linear memory after one
// evaluation.
func BenchmarkInstantiate(b *testing.B) {
	ctx := context.Background()
	m := loadBench(b, benchConfig, wasmhost.Options{})
	var memBytes uint32
	for b.Loop() {
		inst, err := m.newInstance(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if memBytes == 0 {
			b.StopTimer()
			in, _ := json.Marshal(hookInput{ABI: 1, ToolCall: benchCall})
			cctx := inst.ctx(ctx)
			if _, err := inst.evaluate(cctx, ctx, "before_tool_call", m.hooks[policies.HookBeforeToolCall], in); err != nil {
				b.Fatal(err)
			}
			memBytes = inst.mem.Size()
			b.StartTimer()
		}
		m.discard(inst)
	}
	b.ReportMetric(float64(memBytes), "mem-bytes/instance")
}
