package proxyperf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/engine"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/proxy"
	"github.com/openclaw-go/openclaw/runtime"
)

// defaultModules are `openclaw mcp proxy`'s default policy modules.
var defaultModules = []string{"builtin:rules", "builtin:sanitizer", "builtin:approvals"}

// echoArgs are the arguments of every call; the answer is "Echo: bench".
var echoArgs = json.RawMessage(`{"message":"bench"}`)

// everything returns node and server-everything's script, or skips.
func everything(tb testing.TB) (node, script string) {
	tb.Helper()
	return testkit.Node(tb), testkit.Peer(tb, testkit.ServerEverything)
}

// quiet is a logger that drops everything.
var quiet = slog.New(slog.DiscardHandler)

// client is the one go-sdk client of every path, asking for MCP 2025-11-25
// (no discovery probe), as bench/mcpbench does.
var client = mcp.NewClient(&mcp.Implementation{Name: "proxyperf", Version: "1"}, nil)

// connect opens a session on tr, closed with tb.
func connect(tb testing.TB, tr mcp.Transport) *mcp.ClientSession {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { _ = cs.Close() })
	return cs
}

// stdio is a transport to a fresh server-everything child.
func stdio(tb testing.TB) mcp.Transport {
	node, script := everything(tb)
	cmd := exec.Command(node, script, "stdio")
	cmd.Stderr = io.Discard
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
}

// serve serves h on 127.0.0.1 until tb ends and returns the listener's address.
func serve(tb testing.TB, h http.Handler) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	tb.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return ln.Addr().String()
}

// streamable is a client transport to url with its own connection pool
// sending header.
func streamable(url string, header http.Header) mcp.Transport {
	base := http.DefaultTransport.(*http.Transport).Clone()
	return &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: withHeader{base, header}},
		MaxRetries: -1,
	}
}

// withHeader adds header to every request.
type withHeader struct {
	base   http.RoundTripper
	header http.Header
}

// RoundTrip sends a copy of req with the header added.
func (w withHeader) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(w.header) > 0 {
		req = req.Clone(req.Context())
		for k, v := range w.header {
			req.Header[k] = v
		}
	}
	return w.base.RoundTrip(req)
}

// goHop is the path through a bare go-sdk streamable HTTP server whose echo
// forwards to server-everything through a go-sdk client: what any Go bridge
// pays at least.
func goHop(tb testing.TB, jsonResponse bool) (*mcp.ClientSession, string) {
	up := connect(tb, stdio(tb))
	srv := mcp.NewServer(&mcp.Implementation{Name: "gohop", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return up.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: req.Params.Arguments})
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{JSONResponse: jsonResponse, Logger: quiet})
	addr := serve(tb, h)
	return connect(tb, streamable("http://"+addr+"/mcp", nil)), "echo"
}

// proxied builds what `openclaw mcp proxy` builds from an openclaw.json
// listing server-everything over stdio: the policy engine with the default
// modules (the audit log in a temporary folder), the runtime session with
// surface proxy, and the proxy. With native, before_tool_call is
// policiestest.AllowAll (the proxy-http-native path, to tell the Wasm
// modules' share).
func proxied(tb testing.TB, native bool) *proxy.Proxy {
	tb.Helper()
	node, script := everything(tb)
	dir := tb.TempDir()
	ctx := context.Background()
	path := filepath.Join(dir, "openclaw.json")
	raw, err := json.Marshal(map[string]any{"mcp": map[string]any{"servers": map[string]any{
		"everything": map[string]any{"command": node, "args": []string{script, "stdio"}},
	}}})
	if err != nil {
		tb.Fatal(err)
	}
	doc, err := config.ParseDocument(path, raw)
	if err != nil {
		tb.Fatal(err)
	}
	resolved, diags := doc.ResolveServers()
	if len(diags) > 0 {
		tb.Fatalf("resolving the servers: %v", errors.Join(diags...))
	}
	eng, err := engine.Load(ctx, &engine.Options{
		DefaultModules: defaultModules,
		AuditLog:       filepath.Join(dir, "audit.jsonl"),
		Logger:         quiet,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = eng.Close(context.Background()) })
	var enf policies.Enforcer = eng
	if native {
		enf = policiestest.AllowAll{}
	}
	sess, err := runtime.New(runtime.ServersFromConfig(resolved), &runtime.Options{
		Enforcer:        enf,
		Sanitizer:       eng,
		ApprovalDecider: eng,
		Surface:         policies.SurfaceProxy,
		Caller:          policies.Caller{Name: "openclaw-mcp-proxy", Version: "bench"},
		Logger:          quiet,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sess.Close(context.Background()) })
	if err := sess.Connect(ctx); err != nil {
		tb.Fatal(err)
	}
	p, err := proxy.New(ctx, sess, &proxy.Options{Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// proxyInMem is the path through the proxy's MCP server over an in-memory
// transport: no HTTP.
func proxyInMem(tb testing.TB) (*mcp.ClientSession, string) {
	p := proxied(tb, false)
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	ss, err := p.Server().Connect(ctx, st, nil)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = ss.Close()
		cancel()
	})
	return connect(tb, ct), "everything__echo"
}

// serveProxy serves p like `openclaw mcp proxy --listen`: proxy.HTTPHandler
// with a bearer token on 127.0.0.1, until tb ends; it returns the /mcp URL.
func serveProxy(tb testing.TB, p *proxy.Proxy) string {
	tb.Helper()
	h, err := proxy.NewHTTPHandler(p, &proxy.HTTPOptions{Token: "bench-token", ListenHost: "127.0.0.1", Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- h.Serve(ctx, ln) }()
	// Cleanups run last-in first-out: the client sessions (registered by
	// connect later) close before the server stops.
	tb.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			tb.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String() + proxy.PathMCP
}

// proxyHTTP is the path of `openclaw mcp proxy --listen`.
func proxyHTTP(tb testing.TB, native bool) (*mcp.ClientSession, string) {
	tb.Helper()
	base := serveProxy(tb, proxied(tb, native))
	return connect(tb, streamable(base, http.Header{"Authorization": {"Bearer bench-token"}})), "everything__echo"
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// echo makes one call and checks the answer.
func echo(ctx context.Context, cs *mcp.ClientSession, tool string) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: echoArgs})
	if err != nil {
		return err
	}
	if res.IsError || len(res.Content) != 1 {
		return fmt.Errorf("%s: unexpected result %+v", tool, res)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "Echo: bench" {
		return fmt.Errorf("%s: unexpected content %+v", tool, res.Content[0])
	}
	return nil
}

// paths are the benchmarked paths, from the direct client to the full proxy.
var paths = []struct {
	name  string
	setup func(testing.TB) (*mcp.ClientSession, string)
}{
	{"direct", func(tb testing.TB) (*mcp.ClientSession, string) { return connect(tb, stdio(tb)), "echo" }},
	{"gohop", func(tb testing.TB) (*mcp.ClientSession, string) { return goHop(tb, false) }},
	{"gohop-json", func(tb testing.TB) (*mcp.ClientSession, string) { return goHop(tb, true) }},
	{"proxy-inmem", proxyInMem},
	{"proxy-http", func(tb testing.TB) (*mcp.ClientSession, string) { return proxyHTTP(tb, false) }},
	{"proxy-http-native", func(tb testing.TB) (*mcp.ClientSession, string) { return proxyHTTP(tb, true) }},
}

func BenchmarkEcho(b *testing.B) {
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			cs, tool := p.setup(b)
			ctx := context.Background()
			for range 100 { // warm up: JIT of node, connection pools
				if err := echo(ctx, cs, tool); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			cpu0 := cpuTime(b)
			for b.Loop() {
				start := time.Now()
				if err := echo(ctx, cs, tool); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			cpu := cpuTime(b) - cpu0
			slices.Sort(lat)
			if len(lat) > 0 {
				// The CPU of this process (client, proxy, runtime, GC; not
				// node) per call: steadier than wall time on a loaded machine.
				b.ReportMetric(float64(cpu.Microseconds())/float64(len(lat)), "cpu-µs/op")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "median-µs")
				b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds()), "p99-µs")
			}
		})
	}
}

// loadSessions is the number of concurrent client sessions of
// BenchmarkEchoLoad, as in the proxy's load figure.
const loadSessions = 200

// BenchmarkEchoLoad spreads b.N calls over loadSessions sessions calling at
// the same time through the full proxy over HTTP, so that a CPU profile shows
// where the proxy spends its time under load. Failed calls are counted
// (errors/op), not fatal: under overload a policy deadline may fire.
func BenchmarkEchoLoad(b *testing.B) {
	for _, native := range []bool{false, true} {
		name := "proxy-http"
		if native {
			name = "proxy-http-native"
		}
		b.Run(name, func(b *testing.B) {
			p := proxied(b, native)
			base := serveProxy(b, p)
			sessions := make(chan *mcp.ClientSession, loadSessions)
			for range loadSessions {
				cs := connect(b, streamable(base, http.Header{"Authorization": {"Bearer bench-token"}}))
				if err := echo(context.Background(), cs, "everything__echo"); err != nil {
					b.Fatal(err)
				}
				sessions <- cs
			}
			var failed atomic.Int64
			b.SetParallelism(max(1, loadSessions/goruntime.GOMAXPROCS(0)))
			b.ResetTimer()
			cpu0 := cpuTime(b)
			b.RunParallel(func(pb *testing.PB) {
				cs := <-sessions
				defer func() { sessions <- cs }()
				for pb.Next() {
					if err := echo(context.Background(), cs, "everything__echo"); err != nil {
						failed.Add(1)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(failed.Load())/float64(b.N), "errors/op")
		})
	}
}

// TestPaths checks that every benchmarked path answers the echo, so that
// a benchmark never measures a broken path.
func TestPaths(t *testing.T) {
	t.Parallel()
	everything(t)
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			cs, tool := p.setup(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i := range 3 {
				if err := echo(ctx, cs, tool); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
		})
	}
}
