package guesttest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/guesttest"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// benchExamples are the committed examples plus any module named in
// GUESTTEST_EXTRA ("name=path,name=path"), e.g. the Go example built with
// -tags policy_stdjson, to compare with the same benchmarks.
func benchExamples(b *testing.B) []guesttest.Example {
	exs := slices.Clone(guesttest.Examples)
	for _, kv := range strings.Split(os.Getenv("GUESTTEST_EXTRA"), ",") {
		if name, path, ok := strings.Cut(kv, "="); ok {
			exs = append(exs, guesttest.Example{Lang: name, Path: path})
		}
	}
	return exs
}

func readBench(b *testing.B, ex guesttest.Example) []byte {
	b.Helper()
	p := ex.Path
	if !strings.HasPrefix(p, "/") {
		p = "../../" + p
	}
	w, err := os.ReadFile(p)
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// loadBench loads a module as `mcp serve` would, except for a call
// deadline of 1 s instead of 100 ms, so that a GC pause of the Go guest on
// a loaded machine does not end the run. Interruption is on either way:
// its cost does not depend on the deadline.
func loadBench(b *testing.B, ex guesttest.Example) *wasmpolicy.Module {
	b.Helper()
	m, err := wasmpolicy.Load(context.Background(), ex.Lang, readBench(b, ex), nil,
		&wasmpolicy.Options{Host: wasmhost.Options{PoolSize: 1, CallTimeout: time.Second}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// measure runs fn b.N times, timing each call, and reports the median and
// p99 next to the mean.
func measure(b *testing.B, fn func() error) {
	b.Helper()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "median-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	}
}

// benchCall is the input of the Policy host benchmarks in
// docs/benchmarks.md (250 bytes encoded); the examples allow it after
// reading the path argument.
var benchCall = &policies.ToolCall{
	Surface: policies.SurfaceServe, SessionKey: "agent:main:main", Caller: policies.Caller{Name: "claude-code", Version: "2.1"},
	Tool:      policies.ToolRef{Name: "fs_write_file", Server: "files", RawName: "write_file"},
	Arguments: json.RawMessage(`{"path":"/srv/a.txt","content":"hello world"}`),
}

func BenchmarkBeforeToolCall(b *testing.B) {
	for _, ex := range benchExamples(b) {
		b.Run(ex.Lang, func(b *testing.B) {
			m := loadBench(b, ex)
			measure(b, func() error {
				v, err := m.BeforeToolCall(context.Background(), benchCall)
				if err == nil && v.Decision != policies.Allow {
					err = fmt.Errorf("decision %q, want allow", v.Decision)
				}
				return err
			})
		})
	}
}

// benchCatalog is 5 servers × 10 tools, a few of them needing cleaning.
func benchCatalog() *policies.SanitizeRequest {
	req := &policies.SanitizeRequest{Reserved: []string{"conversations_list", "messages_send"}}
	for s := range 5 {
		srv := policies.SanitizeServer{Name: fmt.Sprintf("server-%d", s)}
		for t := range 10 {
			srv.Tools = append(srv.Tools, fmt.Sprintf("tool.%d name", t))
		}
		req.Servers = append(req.Servers, srv)
	}
	return req
}

func BenchmarkSanitizeToolNames50(b *testing.B) {
	req := benchCatalog()
	for _, ex := range benchExamples(b) {
		b.Run(ex.Lang, func(b *testing.B) {
			m := loadBench(b, ex)
			measure(b, func() error {
				_, err := m.SanitizeToolNames(context.Background(), req)
				return err
			})
		})
	}
}

func BenchmarkDecideApproval(b *testing.B) {
	req := &policies.ApprovalRequest{Kind: policies.ApprovalExec, ID: "a1", SessionKey: "agent:main:main",
		Requester: policies.Caller{Name: "agent:main"}, Command: "ls -la /srv",
		Request: json.RawMessage(`{"command":"ls -la /srv","cwd":"/srv","host":"node","agentId":"main","sessionKey":"agent:main:main"}`)}
	for _, ex := range benchExamples(b) {
		b.Run(ex.Lang, func(b *testing.B) {
			m := loadBench(b, ex)
			measure(b, func() error {
				v, err := m.DecideApproval(context.Background(), req)
				if err == nil && v.Decision != policies.AllowOnce {
					err = fmt.Errorf("decision %q, want allow-once", v.Decision)
				}
				return err
			})
		})
	}
}

// BenchmarkLoad is wasmpolicy.Load + Close: check the load limits,
// compile ("cold"; "live" finds the module in the process's in-memory
// compilation cache, held by another open Runtime), instantiate,
// _initialize, configure.
func BenchmarkLoad(b *testing.B) {
	for _, ex := range benchExamples(b) {
		wasm := readBench(b, ex)
		for _, mode := range []string{"cold", "live"} {
			b.Run(ex.Lang+"/"+mode, func(b *testing.B) {
				opts := wasmhost.Options{InitTimeout: time.Minute}
				if mode == "live" {
					m, err := wasmpolicy.Load(context.Background(), ex.Lang, wasm, nil, &wasmpolicy.Options{Host: opts})
					if err != nil {
						b.Fatal(err)
					}
					defer m.Close(context.Background())
				}
				measure(b, func() error {
					m, err := wasmpolicy.Load(context.Background(), ex.Lang, wasm, nil, &wasmpolicy.Options{Host: opts})
					if err != nil {
						return err
					}
					return m.Close(context.Background())
				})
			})
		}
	}
}

// BenchmarkInstantiate measures a new instance of a compiled module: each
// iteration sends an input the guest refuses, so the host discards that
// instance (fail closed), and then a valid call, which creates a fresh one
// (instantiate, _initialize, ABI check, configure). Subtract the
// BeforeToolCall median for the instance alone.
func BenchmarkInstantiate(b *testing.B) {
	for _, ex := range benchExamples(b) {
		b.Run(ex.Lang, func(b *testing.B) {
			m := loadBench(b, ex)
			measure(b, func() error {
				if _, err := m.CallHook(context.Background(), policies.HookBeforeToolCall, []byte("not json")); err == nil {
					return fmt.Errorf("bad input accepted")
				}
				_, err := m.BeforeToolCall(context.Background(), benchCall)
				return err
			})
		})
	}
}

// BenchmarkInstanceMemory reports an instance's linear memory right after
// _initialize, and after 1 and 2,000 before_tool_call decisions. Run it
// with -benchtime 1x.
func BenchmarkInstanceMemory(b *testing.B) {
	in := []byte(`{"abi":1,"surface":"serve","session_key":"agent:main:main","caller":{"name":"claude-code","version":"2.1"},"tool":{"name":"fs_write_file","server":"files","original":"write_file"},"arguments":{"path":"/srv/a.txt","content":"hello world"}}`)
	for _, ex := range benchExamples(b) {
		b.Run(ex.Lang, func(b *testing.B) {
			var sizes [3]uint32
			for b.Loop() {
				m, err := wasmhost.Load(context.Background(), ex.Lang, readBench(b, ex), &wasmhost.Options{
					InitTimeout: time.Minute,
					Init: func(ctx context.Context, inst *wasmhost.Instance) error {
						sizes[0] = inst.MemorySize()
						for i := range 2000 {
							if _, err := inst.CallBytes(ctx, "before_tool_call", in); err != nil {
								return err
							}
							if i == 0 {
								sizes[1] = inst.MemorySize()
							}
						}
						sizes[2] = inst.MemorySize()
						return nil
					}})
				if err != nil {
					b.Fatal(err)
				}
				m.Close(context.Background())
			}
			b.ReportMetric(float64(sizes[0])/1024, "KiB-init")
			b.ReportMetric(float64(sizes[1])/1024, "KiB-1call")
			b.ReportMetric(float64(sizes[2])/1024, "KiB-2000calls")
		})
	}
}
