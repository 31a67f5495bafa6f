package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/procfs"
)

// envStdioServer makes the test binary an MCP server on stdio (see TestMain),
// so that stdio targets are measured against a real child process.
const envStdioServer = "MCPBENCH_TEST_STDIO_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(envStdioServer) == "1" {
		if err := newEchoServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test stdio server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// newEchoServer is a server with server-everything's echo ("Echo: <message>")
// and a tool that always fails.
func newEchoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo-test", Version: "1"}, nil)
	schema := map[string]any{"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}}}
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct{ Message string }
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: " + in.Message}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "broken", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it broke"}}}, nil
	})
	return s
}

// serveHTTP serves newEchoServer on 127.0.0.1 (streamable HTTP at /mcp,
// legacy SSE at /sse) and returns the base URL. Requests without the bearer
// token want, when want is set, get 401.
func serveHTTP(t *testing.T, want string) string {
	t.Helper()
	srv := newEchoServer()
	get := func(*http.Request) *mcp.Server { return srv }
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(get, nil))
	mux.Handle("/sse", mcp.NewSSEHandler(get, nil))
	h := http.Handler(mux)
	if want != "" {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+want {
				http.Error(w, "no token", http.StatusUnauthorized)
				return
			}
			mux.ServeHTTP(w, r)
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		_ = hs.Close()
	})
	return "http://" + ln.Addr().String()
}

// runLines runs mcpbench with args and returns its result lines and error.
func runLines(t *testing.T, args ...string) ([]result, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	getenv := func(k string) string { return map[string]string{"MCPBENCH_TEST_TOKEN": "s3cret"}[k] }
	err := run(ctx, args, getenv, strings.NewReader(""), &out, &errOut)
	var rs []result
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if line == "" {
			continue
		}
		var r result
		if jerr := json.Unmarshal([]byte(line), &r); jerr != nil {
			t.Fatalf("output line %q: %v", line, jerr)
		}
		rs = append(rs, r)
	}
	return rs, errOut.String(), err
}

func TestMeasureTargets(t *testing.T) {
	t.Parallel()
	base := serveHTTP(t, "")
	authed := serveHTTP(t, "s3cret")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	stdioCmd := "stdio:env " + envStdioServer + "=1 " + self

	tests := []struct {
		name       string
		args       []string
		wantErr    string // substring of run's error; "" for none
		wantLabels []string
		wantCalls  int
		wantErrors int64
		wantFirst  string
		wantPhase  string
	}{
		{
			name:       "three transports interleaved",
			args:       []string{"-target", "http=" + base + "/mcp", "-target", "old=sse:" + base + "/sse", "-target", "kid=" + stdioCmd, "-n", "7", "-warmup", "2", "-rounds", "3"},
			wantLabels: []string{"http", "old", "kid"},
			wantCalls:  7,
			wantPhase:  "latency",
		},
		{
			name:       "concurrent sessions",
			args:       []string{"-url", base + "/mcp", "-label", "many", "-c", "6", "-n", "5", "-warmup", "1"},
			wantLabels: []string{"many"},
			wantCalls:  30,
			wantPhase:  "load",
		},
		{
			name:       "bearer token from the environment",
			args:       []string{"-url", authed + "/mcp", "-bearer-env", "MCPBENCH_TEST_TOKEN", "-n", "3", "-warmup", "0"},
			wantLabels: []string{authed + "/mcp"},
			wantCalls:  3,
			wantPhase:  "latency",
		},
		{
			name:       "tool errors are counted",
			args:       []string{"-url", base + "/mcp", "-tool", "broken", "-n", "4", "-warmup", "1"},
			wantErr:    "5 call errors",
			wantLabels: []string{base + "/mcp"},
			wantErrors: 5,
			wantFirst:  "tool error: it broke",
			wantPhase:  "latency",
		},
		{
			name:       "a result without the expected text is an error",
			args:       []string{"-url", base + "/mcp", "-expect", "Echo: other", "-n", "2", "-warmup", "0"},
			wantErr:    "2 call errors",
			wantLabels: []string{base + "/mcp"},
			wantErrors: 2,
			wantFirst:  `lacks "Echo: other"`,
			wantPhase:  "latency",
		},
		{
			name:       "per-target tool",
			args:       []string{"-target", "a=" + base + "/mcp", "-target", "b=" + base + "/mcp", "-target-tool", "b=broken", "-n", "2", "-warmup", "0"},
			wantErr:    "b: 2 call errors",
			wantLabels: []string{"a", "b"},
			wantPhase:  "latency",
		},
		{
			name:      "refused connection",
			args:      []string{"-url", "http://127.0.0.1:1/mcp", "-n", "1", "-connect-timeout", "5s"},
			wantErr:   "1 connect errors",
			wantFirst: "connecting to",
			wantPhase: "latency",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rs, stderr, err := runLines(t, tt.args...)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("run: %v\nstderr: %s", err, stderr)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("run error = %v, want it to contain %q", err, tt.wantErr)
			}
			if tt.wantLabels != nil {
				var got []string
				for _, r := range rs {
					got = append(got, r.Label)
				}
				if strings.Join(got, ",") != strings.Join(tt.wantLabels, ",") {
					t.Fatalf("labels = %v, want %v", got, tt.wantLabels)
				}
			}
			for _, r := range rs {
				if r.Phase != tt.wantPhase {
					t.Errorf("%s: phase = %q, want %q", r.Label, r.Phase, tt.wantPhase)
				}
				if tt.wantCalls > 0 {
					if r.Calls != tt.wantCalls || r.Errors != 0 {
						t.Errorf("%s: calls = %d, errors = %d (%s), want %d and 0", r.Label, r.Calls, r.Errors, r.FirstError, tt.wantCalls)
					}
					if !(r.MedianMs > 0 && r.MedianMs <= r.P90Ms && r.P90Ms <= r.P99Ms && r.P99Ms <= r.MaxMs && r.CallsPerSec > 0) {
						t.Errorf("%s: inconsistent figures %+v", r.Label, r)
					}
				}
			}
			if tt.wantErrors > 0 && (len(rs) != 1 || rs[0].Errors != tt.wantErrors || rs[0].Calls != 0) {
				t.Fatalf("results = %+v, want %d errors and no measured call", rs, tt.wantErrors)
			}
			if tt.wantFirst != "" && (len(rs) == 0 || !strings.Contains(rs[0].FirstError, tt.wantFirst)) {
				t.Fatalf("first error = %+v, want it to contain %q", rs, tt.wantFirst)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{nil, "no target"},
		{[]string{"-target", "x=ftp://h"}, "want stdio:CMD"},
		{[]string{"-target", "x=sse:localhost"}, "not an http(s) URL"},
		{[]string{"-target", "x=stdio:"}, "without a command"},
		{[]string{"-url", "http://h/mcp", "-transport", "ws"}, `-transport "ws"`},
		{[]string{"-url", "http://h/mcp", "-rounds", "5", "-n", "2"}, "-rounds ≤ -n"},
		{[]string{"-url", "http://h/mcp", "-args", "[1]"}, "not a JSON object"},
		{[]string{"-url", "http://h/mcp", "-header", "nocolon"}, `want "Key: value"`},
		{[]string{"-url", "http://h/mcp", "-bearer-env", "MCPBENCH_UNSET_VARIABLE"}, "empty or unset"},
		{[]string{"-url", "http://h/mcp", "-rss", "abc"}, "not a PID"},
		{[]string{"-target", "a=http://h/mcp", "-target", "b=http://h/mcp", "-rss", "12"}, "name the target"},
		{[]string{"-url", "http://h/mcp", "-rss", "zz=12"}, "zz: no target"},
		{[]string{"-url", "http://h/mcp", "-target-tool", "zz=echo"}, "LABEL=TOOL"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			err := run(context.Background(), tt.args, func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
			if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run(%q) = %v, want a usage error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestParseTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want target
	}{
		{"http://127.0.0.1:9/mcp", target{Label: "http://127.0.0.1:9/mcp", Kind: kindStreamable, URL: "http://127.0.0.1:9/mcp"}},
		{"ours=http://h/mcp?a=b", target{Label: "ours", Kind: kindStreamable, URL: "http://h/mcp?a=b"}},
		{"old=sse:https://h/sse", target{Label: "old", Kind: kindSSE, URL: "https://h/sse"}},
		{"x=streamable:http://h/mcp", target{Label: "x", Kind: kindStreamable, URL: "http://h/mcp"}},
		{"direct=stdio:node  index.js stdio", target{Label: "direct", Kind: kindStdio, Command: []string{"node", "index.js", "stdio"}}},
		{"stdio:srv", target{Label: "stdio:srv", Kind: kindStdio, Command: []string{"srv"}}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseTarget(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) || got.Label != tt.want.Label || strings.Join(got.Command, "|") != strings.Join(tt.want.Command, "|") {
				t.Fatalf("parseTarget(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	msd := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 … 1, unsorted
	}
	tests := []struct {
		name string
		in   []time.Duration
		want summary
	}{
		{"none", nil, summary{}},
		{"one", msd(7), summary{7, 7, 7, 7, 7}},
		{"even count takes the lower middle", msd(4, 1, 3, 2), summary{2, 4, 4, 4, 2.5}},
		{"1..100", msd(hundred...), summary{50, 90, 99, 100, 50.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := summarize(tt.in); got != tt.want {
				t.Fatalf("summarize = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSampleRSS(t *testing.T) {
	t.Parallel()
	// A tree of its own: sh, a child sh and a sleep under it, so that
	// descendants are found past the first level. Sampling the test process
	// instead counted the children that parallel tests start and stop
	// meanwhile, so the per-sample peaks no longer added up.
	cmd := exec.Command("sh", "-c", "sh -c 'sleep 30 & wait' & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Wait until the inner sh has started sleep.
	root := cmd.Process.Pid
	deadline := time.Now().Add(30 * time.Second) // a hang guard, not a timing assertion
	for len(procfs.Descendants(root)) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("sh never started sh and sleep")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan rssReport, 1)
	go func() { done <- sampleRSS(ctx, root, 10*time.Millisecond) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	rep := <-done
	if rep.Err != "" || rep.Samples < 1 || rep.PID != root {
		t.Fatalf("report %+v", rep)
	}
	if rep.MaxChildren < 2 || rep.ChildrenPeakMiB <= 0 || rep.PeakMiB <= 0 || rep.HWMMiB < rep.PeakMiB-1 || // the kernel updates VmHWM lazily
		rep.TotalPeakMiB < rep.PeakMiB+rep.ChildrenPeakMiB-0.2 {
		t.Fatalf("want sh and its sh and sleep: %+v", rep)
	}

	// A process that is gone ends the sampling with an error.
	gone := sampleRSS(context.Background(), 1<<30, time.Millisecond)
	if gone.Err == "" || gone.Samples != 0 {
		t.Fatalf("sampling a missing PID: %+v", gone)
	}
}

func TestTable(t *testing.T) {
	t.Parallel()
	line := func(r result) string {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	lat := func(label string, median float64) string {
		return line(result{Label: label, Phase: "latency", Transport: kindStreamable, Calls: 10, MedianMs: median, P90Ms: median, P99Ms: median, MaxMs: median})
	}
	loadLine := func(label string, errs int64, hwm float64) string {
		return line(result{Label: label, Phase: "load", Sessions: 200, CallsPerSession: 100, Errors: errs,
			RSS: &rssReport{IdleMiB: 10, PeakMiB: hwm, HWMMiB: hwm, ChildrenPeakMiB: 70, MaxChildren: 1, TotalPeakMiB: hwm + 70}})
	}
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{
			name:  "targets met",
			lines: []string{lat("direct", 1), lat("ours", 1.2), lat("sg", 4), lat("mp", 5), loadLine("ours", 0, 40)},
			want: []string{
				"| ours | streamable | 10 | 0 | 1.200 |", "+0.200 | 1.20 |",
				"added median latency: ours +0.200 ms; sg +3.000 ms, mp +4.000 ms: lowest yes",
				"ours median / direct median = 1.20 (target ≤ 1.25): yes",
				"load 200 × 100 on ours: 0 errors (target 0): yes",
				"| ours | 200 × 100 | 0 |", "| 10.0 → 40.0 | 40.0 | 70.0 (1) | 110.0 |",
				"VmHWM 40.0 MiB (target < 100 MB): yes",
			},
		},
		{
			name:  "targets missed",
			lines: []string{lat("direct", 1), lat("ours", 2), lat("sg", 1.5), loadLine("ours", 3, 120)},
			want: []string{
				"ours +1.000 ms; sg +0.500 ms: lowest **no**",
				"= 2.00 (target ≤ 1.25): **no**",
				"3 errors (target 0): **no**",
				"VmHWM 120.0 MiB (target < 100 MB): **no**",
			},
		},
		{
			name:  "ours alone",
			lines: []string{lat("direct", 1), lat("ours", 1.5)},
			want:  []string{"added median latency: ours +0.500 ms (no other bridge measured)", "= 1.50 (target ≤ 1.25): **no**"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			if err := printTables(strings.NewReader(strings.Join(tt.lines, "\n")+"\nnot json\n"), &out, nil, "direct", "ours"); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("table lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
