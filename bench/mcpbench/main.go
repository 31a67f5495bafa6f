// Command mcpbench measures MCP tools/call latency and drives concurrent load
// with the go-sdk client, against MCP servers and bridges reached over stdio,
// streamable HTTP or legacy SSE (the proxy's latency and load figures). It is a
// benchmark tool, run by bench/proxy.sh, not a test.
//
// Each target gets -c sessions (each its own MCP session, transport and,
// over HTTP, connection pool). Every session first makes -warmup unmeasured calls,
// then -n measured calls one after another; the sessions of a target run at
// the same time. With several targets and -rounds R, the measured calls are cut
// into R rounds and the targets take turns within each round (the first target
// rotates), so a drift of the machine's load falls on all of them alike.
//
// For every target it prints one JSON line: the median, p90, p99 and max
// latency in milliseconds (nearest rank), the errors (a transport error, a
// tool error or a result without -expect count alike), calls per second over
// the measured wall time and, with -rss, the memory of a process and its
// descendants sampled every 100 ms.
//
//	mcpbench -target direct='stdio:node server-everything/dist/index.js stdio' \
//	         -target ours=http://127.0.0.1:4000/mcp -target-tool ours=everything__echo \
//	         -bearer-env OPENCLAW_MCP_TOKEN -n 2000 -warmup 200 -rounds 10
//	mcpbench -load -url http://127.0.0.1:4000/mcp -tool everything__echo -rss 1234
//	mcpbench -table -direct direct -ours ours results.jsonl
//
// -table reads such JSON lines (files or stdin) and prints Markdown tables.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// config is what the flags bind to.
type config struct {
	targets     []target
	header      http.Header
	sessions    int
	calls       int
	warmup      int
	rounds      int
	tool        string
	tools       map[string]string // label → tool, overriding tool
	args        json.RawMessage
	expect      string
	protocol    string
	phase       string
	rss         map[string]int // label → PID to sample
	callTimeout time.Duration
	connTimeout time.Duration
	connPar     int
	verbose     bool
}

// result is the JSON line printed for one target.
type result struct {
	Label           string     `json:"label"`
	Phase           string     `json:"phase"`
	Target          string     `json:"target"`
	Transport       string     `json:"transport"`
	Protocol        string     `json:"protocol"`
	Tool            string     `json:"tool"`
	Sessions        int        `json:"sessions"`
	CallsPerSession int        `json:"calls_per_session"`
	Warmup          int        `json:"warmup"`
	Rounds          int        `json:"rounds"`
	Calls           int        `json:"calls"`
	Errors          int64      `json:"errors"`
	ConnectErrors   int        `json:"connect_errors"`
	FirstError      string     `json:"first_error,omitempty"`
	ConnectMedianMs float64    `json:"connect_median_ms"`
	MedianMs        float64    `json:"median_ms"`
	P90Ms           float64    `json:"p90_ms"`
	P99Ms           float64    `json:"p99_ms"`
	MaxMs           float64    `json:"max_ms"`
	MeanMs          float64    `json:"mean_ms"`
	CallsPerSec     float64    `json:"calls_per_s"`
	WallS           float64    `json:"wall_s"`
	RSS             *rssReport `json:"rss,omitempty"`
	StartedAt       string     `json:"started_at"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mcpbench:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a command-line mistake (exit code 2).
type usageError struct{ error }

// run parses args and either measures the targets or, with -table, formats
// earlier results. A target with any error makes run fail after printing
// every result. getenv reads the environment (-bearer-env).
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcpbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		c                  config
		targetSpecs        multiFlag
		headers            multiFlag
		rssSpecs           multiFlag
		toolSpecs          multiFlag
		url, kind, label   string
		bearerEnv, argsStr string
		load, table        bool
		direct, ours       string
	)
	fs.Var(&targetSpecs, "target", "`[LABEL=]SPEC` to measure (repeatable): stdio:CMD ARGS…, sse:URL, streamable:URL or an http(s) URL")
	fs.StringVar(&url, "url", "", "HTTP endpoint of a single target (see -transport)")
	fs.StringVar(&kind, "transport", kindStreamable, "transport of -url: streamable or sse")
	fs.StringVar(&label, "label", "", "label of the -url or command-line target (default: the target itself)")
	fs.Var(&headers, "header", "`K: V` header sent to every HTTP target (repeatable)")
	fs.StringVar(&bearerEnv, "bearer-env", "", "name of an environment variable holding a bearer token sent to every HTTP target")
	fs.IntVar(&c.sessions, "c", 1, "concurrent sessions per target")
	fs.IntVar(&c.calls, "n", 1000, "measured calls per session")
	fs.IntVar(&c.warmup, "warmup", 100, "unmeasured calls per session before the measured ones")
	fs.IntVar(&c.rounds, "rounds", 1, "rounds the measured calls are cut into; targets take turns within a round")
	fs.BoolVar(&load, "load", false, "load mode: -c 200 -n 100 -warmup 1 unless given")
	fs.StringVar(&c.tool, "tool", "echo", "tool to call")
	fs.Var(&toolSpecs, "target-tool", "`LABEL=TOOL`: the tool to call on that target instead of -tool (repeatable)")
	fs.StringVar(&argsStr, "args", `{"message":"bench"}`, "tool arguments (a JSON object)")
	fs.StringVar(&c.expect, "expect", "Echo: bench", "text the result must contain (empty: only isError counts)")
	fs.StringVar(&c.protocol, "protocol", "2025-11-25", "MCP protocol version the client asks for (empty: the SDK's latest, with its discovery probe)")
	fs.StringVar(&c.phase, "phase", "", "phase name in the output (default: latency with -c 1, else load)")
	fs.Var(&rssSpecs, "rss", "`[LABEL=]PID` whose memory (and its descendants') to sample every 100 ms while LABEL is measured (repeatable)")
	fs.DurationVar(&c.callTimeout, "call-timeout", 30*time.Second, "timeout of one call")
	fs.DurationVar(&c.connTimeout, "connect-timeout", 60*time.Second, "timeout of one session's connect")
	fs.IntVar(&c.connPar, "connect-parallel", 16, "sessions connecting at the same time")
	fs.BoolVar(&c.verbose, "v", false, "progress and the stdio servers' stderr on stderr")
	fs.BoolVar(&table, "table", false, "read result lines from the files given (or stdin) and print Markdown tables")
	fs.StringVar(&direct, "direct", "direct", "with -table: label of the direct (baseline) target")
	fs.StringVar(&ours, "ours", "ours", "with -table: label of our proxy")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if table {
		return printTables(stdin, stdout, fs.Args(), direct, ours)
	}
	if load {
		for name, v := range map[string]*int{"c": &c.sessions, "n": &c.calls, "warmup": &c.warmup} {
			if !set[name] {
				*v = map[string]int{"c": 200, "n": 100, "warmup": 1}[name]
			}
		}
	}
	for _, s := range targetSpecs {
		t, err := parseTarget(s)
		if err != nil {
			return usageError{err}
		}
		c.targets = append(c.targets, t)
	}
	if url != "" {
		if kind != kindStreamable && kind != kindSSE {
			return usageError{fmt.Errorf("-transport %q: want streamable or sse", kind)}
		}
		c.targets = append(c.targets, target{Label: orDefault(label, url), Kind: kind, URL: url})
	}
	if fs.NArg() > 0 {
		c.targets = append(c.targets, target{Label: orDefault(label, strings.Join(fs.Args(), " ")), Kind: kindStdio, Command: fs.Args()})
	}
	if len(c.targets) == 0 {
		return usageError{errors.New("no target: give -target, -url, or a stdio command after the flags")}
	}
	if c.sessions < 1 || c.calls < 1 || c.warmup < 0 || c.rounds < 1 || c.rounds > c.calls || c.connPar < 1 {
		return usageError{fmt.Errorf("want -c ≥ 1, -n ≥ 1, -warmup ≥ 0, 1 ≤ -rounds ≤ -n, -connect-parallel ≥ 1 (got %d, %d, %d, %d, %d)", c.sessions, c.calls, c.warmup, c.rounds, c.connPar)}
	}
	if !json.Valid([]byte(argsStr)) || !strings.HasPrefix(strings.TrimSpace(argsStr), "{") {
		return usageError{fmt.Errorf("-args %q is not a JSON object", argsStr)}
	}
	c.args = json.RawMessage(argsStr)
	c.header = http.Header{}
	for _, h := range headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return usageError{fmt.Errorf("-header %q: want \"Key: value\"", h)}
		}
		c.header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	if bearerEnv != "" {
		tok := getenv(bearerEnv)
		if tok == "" {
			return usageError{fmt.Errorf("-bearer-env %s: the variable is empty or unset", bearerEnv)}
		}
		c.header.Set("Authorization", "Bearer "+tok)
	}
	c.tools = map[string]string{}
	for _, s := range toolSpecs {
		lbl, tool, ok := strings.Cut(s, "=")
		if !ok || tool == "" || !hasLabel(c.targets, lbl) {
			return usageError{fmt.Errorf("-target-tool %q: want LABEL=TOOL for the label of a target", s)}
		}
		c.tools[lbl] = tool
	}
	c.rss = map[string]int{}
	for _, s := range rssSpecs {
		lbl, p, ok := strings.Cut(s, "=")
		if !ok {
			if len(c.targets) != 1 {
				return usageError{fmt.Errorf("-rss %q: name the target (LABEL=PID) when there are several", s)}
			}
			lbl, p = c.targets[0].Label, s
		}
		pid, err := strconv.Atoi(p)
		if err != nil || pid <= 0 {
			return usageError{fmt.Errorf("-rss %q: %q is not a PID", s, p)}
		}
		c.rss[lbl] = pid
	}
	if c.phase == "" {
		c.phase = "latency"
		if c.sessions > 1 {
			c.phase = "load"
		}
	}

	results, err := measure(ctx, &c, stderr)
	enc := json.NewEncoder(stdout)
	var failed []string
	for _, r := range results {
		if encErr := enc.Encode(r); encErr != nil {
			return fmt.Errorf("writing the result of %s: %w", r.Label, encErr)
		}
		if r.Errors > 0 || r.ConnectErrors > 0 {
			failed = append(failed, fmt.Sprintf("%s: %d call errors, %d connect errors (first: %s)", r.Label, r.Errors, r.ConnectErrors, r.FirstError))
		}
	}
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("errors: %s", strings.Join(failed, "; "))
	}
	return nil
}

// orDefault returns a if it is not empty, else b.
func orDefault(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// multiFlag is a repeatable string flag.
type multiFlag []string

// String joins the values.
func (m *multiFlag) String() string { return strings.Join(*m, ",") }

// Set appends v.
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// targetRun is the state of one target during a measurement.
type targetRun struct {
	t        target
	res      result
	sessions []*mcp.ClientSession
	cancels  []context.CancelFunc // end the sessions' contexts, after closing them
	samples  [][]time.Duration    // per session
	errs     atomic.Int64
	firstErr atomic.Pointer[string]
	wall     time.Duration
	rssStop  context.CancelFunc
	rssDone  chan rssReport
}

// fail records a call error.
func (tr *targetRun) fail(err error) {
	tr.errs.Add(1)
	msg := err.Error()
	tr.firstErr.CompareAndSwap(nil, &msg)
}

// measure connects every target, warms up, runs the rounds and closes the
// sessions; it returns one result per target, even after an error.
func measure(ctx context.Context, c *config, stderr io.Writer) ([]result, error) {
	serverStderr := io.Discard
	if c.verbose {
		serverStderr = stderr
	}
	logf := func(format string, a ...any) {
		if c.verbose {
			fmt.Fprintf(stderr, "mcpbench: "+format+"\n", a...)
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpbench", Version: "1"}, nil)
	for l := range c.rss {
		if !hasLabel(c.targets, l) {
			return nil, usageError{fmt.Errorf("-rss %s: no target with that label", l)}
		}
	}
	runs := make([]*targetRun, len(c.targets))
	for i, t := range c.targets {
		tr := &targetRun{t: t, samples: make([][]time.Duration, c.sessions)}
		tr.res = result{
			Label: t.Label, Phase: c.phase, Target: t.String(), Transport: t.Kind, Protocol: c.protocol,
			Tool: orDefault(c.tools[t.Label], c.tool), Sessions: c.sessions, CallsPerSession: c.calls, Warmup: c.warmup, Rounds: c.rounds,
			StartedAt: time.Now().UTC().Format(time.RFC3339),
		}
		if pid, ok := c.rss[t.Label]; ok {
			rctx, cancel := context.WithCancel(ctx)
			tr.rssStop, tr.rssDone = cancel, make(chan rssReport, 1)
			go func() { tr.rssDone <- sampleRSS(rctx, pid, 100*time.Millisecond) }()
		}
		runs[i] = tr
	}
	defer func() {
		stopRSS(runs)
		for _, tr := range runs {
			closeAll(tr.sessions, c.connPar)
			for _, cancel := range tr.cancels {
				cancel()
			}
		}
	}()

	// Connect.
	for _, tr := range runs {
		logf("%s: connecting %d sessions", tr.t.Label, c.sessions)
		var connectTimes []time.Duration
		var mu sync.Mutex
		sem := make(chan struct{}, c.connPar)
		var wg sync.WaitGroup
		tr.sessions = make([]*mcp.ClientSession, c.sessions)
		for i := range c.sessions {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				// The legacy SSE transport reads its event stream under the
				// connect ctx, so that ctx lives as long as the session; a
				// timer cancels it if the connect takes too long.
				sctx, cancel := context.WithCancel(ctx)
				timer := time.AfterFunc(c.connTimeout, cancel)
				start := time.Now()
				cs, err := connect(sctx, client, tr.t, c.header, serverStderr, c.protocol)
				d := time.Since(start)
				if !timer.Stop() && err == nil {
					_ = cs.Close()
					err = fmt.Errorf("connecting to %s: timed out after %v", tr.t.Label, c.connTimeout)
				}
				mu.Lock()
				defer mu.Unlock()
				tr.cancels = append(tr.cancels, cancel)
				if err != nil {
					tr.res.ConnectErrors++
					if tr.res.FirstError == "" {
						tr.res.FirstError = err.Error()
					}
					return
				}
				tr.sessions[i] = cs
				connectTimes = append(connectTimes, d)
			})
		}
		wg.Wait()
		tr.res.ConnectMedianMs = summarize(connectTimes).Median
		if ctx.Err() != nil {
			stopRSS(runs)
			return finish(runs), ctx.Err()
		}
	}

	// Warm up.
	for _, tr := range runs {
		logf("%s: %d warm-up calls per session", tr.t.Label, c.warmup)
		phase(ctx, tr, c, c.warmup, false)
	}
	// Measure, the targets taking turns within each round.
	for r := range c.rounds {
		n := c.calls / c.rounds
		if r < c.calls%c.rounds {
			n++
		}
		for k := range runs {
			tr := runs[(r+k)%len(runs)]
			logf("%s: round %d/%d, %d calls per session", tr.t.Label, r+1, c.rounds, n)
			tr.wall += phase(ctx, tr, c, n, true)
		}
		if ctx.Err() != nil {
			stopRSS(runs)
			return finish(runs), ctx.Err()
		}
	}
	// The memory is read before the sessions close.
	stopRSS(runs)
	return finish(runs), nil
}

// stopRSS ends the memory sampling of every run that has one still going and
// keeps its report.
func stopRSS(runs []*targetRun) {
	for _, tr := range runs {
		if tr.rssStop != nil {
			tr.rssStop()
			rep := <-tr.rssDone
			tr.res.RSS = &rep
			tr.rssStop = nil
		}
	}
}

// hasLabel reports whether a target is labelled l.
func hasLabel(ts []target, l string) bool {
	for _, t := range ts {
		if t.Label == l {
			return true
		}
	}
	return false
}

// phase makes n calls on every connected session of tr at the same time and
// returns the wall time; it records the latencies when keep is set. Errors
// count in both cases.
func phase(ctx context.Context, tr *targetRun, c *config, n int, keep bool) time.Duration {
	params := &mcp.CallToolParams{Name: tr.res.Tool, Arguments: c.args}
	var wg sync.WaitGroup
	start := time.Now()
	for i, cs := range tr.sessions {
		if cs == nil {
			continue
		}
		wg.Go(func() {
			for range n {
				if ctx.Err() != nil {
					return
				}
				d, err := callOnce(ctx, cs, params, c.expect, c.callTimeout)
				if err != nil {
					tr.fail(err)
					continue
				}
				if keep {
					tr.samples[i] = append(tr.samples[i], d)
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// callOnce makes one call and checks its result: a transport error, isError
// or a text without expect is an error.
func callOnce(ctx context.Context, cs *mcp.ClientSession, params *mcp.CallToolParams, expect string, timeout time.Duration) (time.Duration, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	res, err := cs.CallTool(cctx, params)
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("tools/call %s: %w", params.Name, err)
	}
	var text strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return d, fmt.Errorf("tools/call %s: tool error: %.200s", params.Name, text.String())
	}
	if expect != "" && !strings.Contains(text.String(), expect) {
		return d, fmt.Errorf("tools/call %s: result %.200q lacks %q", params.Name, text.String(), expect)
	}
	return d, nil
}

// finish fills every result from its run.
func finish(runs []*targetRun) []result {
	out := make([]result, len(runs))
	for i, tr := range runs {
		var all []time.Duration
		for _, s := range tr.samples {
			all = append(all, s...)
		}
		s := summarize(all)
		r := tr.res
		r.Calls = len(all)
		r.Errors = tr.errs.Load()
		if p := tr.firstErr.Load(); p != nil && r.FirstError == "" {
			r.FirstError = *p
		}
		r.MedianMs, r.P90Ms, r.P99Ms, r.MaxMs, r.MeanMs = s.Median, s.P90, s.P99, s.Max, s.Mean
		r.WallS = tr.wall.Seconds()
		if tr.wall > 0 {
			r.CallsPerSec = float64(int(float64(len(all))/tr.wall.Seconds()*10)) / 10
		}
		out[i] = r
		tr.res = r
	}
	return out
}

// closeAll closes the sessions, par at a time (a stdio close waits for the
// child to exit).
func closeAll(sessions []*mcp.ClientSession, par int) {
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, cs := range sessions {
		if cs == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_ = cs.Close()
		})
		sessions[i] = nil
	}
	wg.Wait()
}
