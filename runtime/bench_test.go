package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/transport"
)

// allowFast is the cheapest native before_tool_call: it allows without
// recording. The Wasm built-in modules cannot be loaded here (runtime must not
// import the engine); their own cost is measured in policies/builtin.
type allowFast struct{}

func (allowFast) BeforeToolCall(_ context.Context, call *policies.ToolCall) policies.Decision {
	return policies.Decision{Outcome: policies.Allow, Arguments: call.Arguments}
}

// BenchmarkCallTool compares tools/call through the runtime (native allow
// policy, sequential server) with a direct go-sdk client to the same
// in-process server, interleaved in one run; it reports both medians and
// their ratio (DESIGN.md §6 target: ≤ 1.10× with the built-in hooks).
func BenchmarkCallTool(b *testing.B) {
	ctx := context.Background()
	srv := newServer("bench", nil)
	echoTool(srv, "echo")

	// Direct: a go-sdk client on its own in-memory connection.
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "direct"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()

	s := open(b, []Server{inProcess(b, "bench", srv)}, &Options{Enforcer: allowFast{}})
	args := []byte(`{"message":"hi"}`)
	direct := &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(args)}

	dd := make([]time.Duration, 0, b.N)
	rd := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := cs.CallTool(ctx, direct); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := s.CallTool(ctx, "bench__echo", args); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		dd = append(dd, t1.Sub(t0))
		rd = append(rd, t2.Sub(t1))
	}
	b.StopTimer()
	dm, rm := median(dd), median(rd)
	b.ReportMetric(float64(dm.Nanoseconds()), "direct-median-ns")
	b.ReportMetric(float64(rm.Nanoseconds()), "runtime-median-ns")
	b.ReportMetric(float64(rm)/float64(dm), "ratio")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkCatalog50x100 connects 50 in-process servers of 100 tools each,
// lists them and names the catalog with a native sanitizer double (DESIGN.md
// §6 target: ≤ 50 ms).
func BenchmarkCatalog50x100(b *testing.B) {
	const nServers, nTools = 50, 100
	ctx := context.Background()
	var cpu time.Duration
	defer func() { b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op") }()
	for range b.N {
		b.StopTimer()
		servers := make([]Server, nServers)
		var stops []func()
		for i := range servers {
			srv := newServer("s", nil)
			for j := range nTools {
				srv.AddTool(&mcp.Tool{
					Name:        fmt.Sprintf("tool_%03d", j),
					Description: "A tool of the benchmark catalog.",
					InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
				}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return textResult("ok"), nil })
			}
			ct, st := mcp.NewInMemoryTransports()
			sctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = srv.Run(sctx, st) }()
			stops = append(stops, func() { cancel(); <-done })
			servers[i] = Server{Name: fmt.Sprintf("server-%02d", i), Transport: ct}
		}
		goruntime.GC() // the setup's garbage (server-side AddTool) is not ours to collect
		b.StartTimer()
		cpu0 := cpuTime()
		s, err := New(servers, &Options{Enforcer: allowFast{}, Sanitizer: nativeNamer{}, Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Connect(ctx); err != nil {
			b.Fatal(err)
		}
		tools, err := s.Tools(ctx)
		b.StopTimer()
		cpu += cpuTime() - cpu0
		if err != nil || len(tools) != nServers*nTools {
			b.Fatalf("catalog of %d tools (%v), want %d", len(tools), err, nServers*nTools)
		}
		_ = s.Close(ctx)
		for _, stop := range stops {
			stop()
		}
		b.StartTimer()
	}
}

// BenchmarkListTools100Direct is the floor of the catalog figure: one go-sdk
// ListTools of 100 tools from an in-process server, without the runtime.
func BenchmarkListTools100Direct(b *testing.B) {
	ctx := context.Background()
	srv := newServer("s", nil)
	for j := range 100 {
		srv.AddTool(&mcp.Tool{
			Name:        fmt.Sprintf("tool_%03d", j),
			Description: "A tool of the benchmark catalog.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return textResult("ok"), nil })
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "direct"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	b.ReportAllocs()
	for b.Loop() {
		res, err := cs.ListTools(ctx, nil)
		if err != nil || len(res.Tools) != 100 {
			b.Fatal(len(res.Tools), err)
		}
	}
}

// BenchmarkCallToolStdio is BenchmarkCallTool over a real transport:
// server-everything's echo over stdio (two children under the transport's
// supervisor), the runtime's calls interleaved with a direct go-sdk
// client's, medians and ratio reported.
func BenchmarkCallToolStdio(b *testing.B) {
	script := everythingScript(b)
	ctx := context.Background()
	entry := transport.ServerEntry{Command: "node", Args: []string{script, "stdio"}, RequestTimeoutMs: 30000}
	r, err := transport.Resolve("direct", entry, &transport.Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "direct"}, nil).Connect(ctx, r.Transport, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	s := open(b, []Server{{Name: "everything", Entry: entry}}, &Options{Enforcer: allowFast{}})
	args := []byte(`{"message":"hi"}`)
	direct := &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(args)}
	for range 20 { // warm both paths (JIT of the node server)
		if _, err := cs.CallTool(ctx, direct); err != nil {
			b.Fatal(err)
		}
		if _, err := s.CallTool(ctx, "everything__echo", args); err != nil {
			b.Fatal(err)
		}
	}
	dd := make([]time.Duration, 0, b.N)
	rd := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := cs.CallTool(ctx, direct); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := s.CallTool(ctx, "everything__echo", args); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		dd = append(dd, t1.Sub(t0))
		rd = append(rd, t2.Sub(t1))
	}
	b.StopTimer()
	dm, rm := median(dd), median(rd)
	b.ReportMetric(float64(dm.Nanoseconds()), "direct-median-ns")
	b.ReportMetric(float64(rm.Nanoseconds()), "runtime-median-ns")
	b.ReportMetric(float64(rm)/float64(dm), "ratio")
}

// BenchmarkCatalogListFast measures the catalog fast path (list_fast.go)
// against go-sdk's ListTools on the work of BenchmarkCatalog50x100 without
// the Session: 50 in-process servers × 100 tools connected concurrently,
// every page listed, the 5,000 names handed to the sanitizer double. The
// difference between the two is what wiring withFastList and
// listToolsPage into conn.go saves on the 50 × 100 figure.
func BenchmarkCatalogListFast(b *testing.B) {
	for _, fast := range []bool{false, true} {
		name := "sdk"
		if fast {
			name = "fast"
		}
		b.Run(name, func(b *testing.B) {
			const nServers, nTools = 50, 100
			ctx := context.Background()
			b.ReportAllocs()
			var cpu time.Duration
			defer func() { b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op") }()
			for range b.N {
				b.StopTimer()
				transports := make([]mcp.Transport, nServers)
				var stops []func()
				for i := range transports {
					srv := newServer("s", nil)
					for j := range nTools {
						srv.AddTool(&mcp.Tool{
							Name:        fmt.Sprintf("tool_%03d", j),
							Description: "A tool of the benchmark catalog.",
							InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
						}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return textResult("ok"), nil })
					}
					ct, st := mcp.NewInMemoryTransports()
					sctx, cancel := context.WithCancel(ctx)
					done := make(chan struct{})
					go func() { defer close(done); _ = srv.Run(sctx, st) }()
					stops = append(stops, func() { cancel(); <-done })
					transports[i] = ct
				}
				goruntime.GC()
				b.StartTimer()
				cpu0 := cpuTime()
				lists := make([][]*mcp.Tool, nServers)
				sessions := make([]*mcp.ClientSession, nServers)
				errs := make([]error, nServers)
				var wg sync.WaitGroup
				for i, tr := range transports {
					wg.Go(func() {
						if fast {
							tr = withFastList(tr)
						}
						cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, tr, nil)
						if err != nil {
							errs[i] = err
							return
						}
						sessions[i] = cs
						cursor := ""
						for {
							var res *mcp.ListToolsResult
							if fast {
								res, err = listToolsPage(ctx, cs, &mcp.ListToolsParams{Cursor: cursor})
							} else {
								res, err = cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
							}
							if err != nil {
								errs[i] = err
								return
							}
							lists[i] = append(lists[i], res.Tools...)
							if cursor = res.NextCursor; cursor == "" {
								return
							}
						}
					})
				}
				wg.Wait()
				req := &policies.SanitizeRequest{Servers: make([]policies.SanitizeServer, nServers)}
				for i, tools := range lists {
					req.Servers[i].Name = fmt.Sprintf("server-%02d", i)
					for _, t := range tools {
						req.Servers[i].Tools = append(req.Servers[i].Tools, t.Name)
					}
				}
				res, err := nativeNamer{}.SanitizeToolNames(ctx, req)
				b.StopTimer()
				cpu += cpuTime() - cpu0
				n := 0
				for i := range lists {
					if errs[i] != nil {
						b.Fatal(errs[i])
					}
					n += len(lists[i])
				}
				if err != nil || n != nServers*nTools || len(res.Servers) != nServers {
					b.Fatalf("%d tools named (%v), want %d", n, err, nServers*nTools)
				}
				for _, cs := range sessions {
					_ = cs.Close()
				}
				for _, stop := range stops {
					stop()
				}
				b.StartTimer()
			}
		})
	}
}

// cpuTime is the CPU time (user + system) this process has used: a
// benchmark figure that a loaded, shared machine distorts less than wall
// time (the catalog's servers run in process, so their share is counted).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
