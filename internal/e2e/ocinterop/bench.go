package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/e2e"
)

// measurement is one spawn-to-exit run of an `mcp serve` server, the figures
// of docs/protocol-facts.md, Measured baselines.
type measurement struct {
	// Label names the server ("openclaw" or "ours").
	Label string
	// Initialize is spawn → initialize response.
	Initialize time.Duration
	// FirstToolsList is the first tools/list round trip.
	FirstToolsList time.Duration
	// Procs and RSSKiB are the process tree and its summed VmRSS, read right
	// after the first tools/list.
	Procs  []e2e.Proc
	RSSKiB int64
	// FirstConversationsList is the first conversations_list round trip,
	// which waits for the Gateway connect and sessions.subscribe.
	FirstConversationsList time.Duration
	// SpawnToFirstList is spawn → first conversations_list result.
	SpawnToFirstList time.Duration
	// ConversationsList and EventsPoll are N sequential round trips each,
	// through the go-sdk client.
	ConversationsList, EventsPoll sample
	// RawConversationsList and RawEventsPoll are the same through a
	// [RawClient], in a second process (MeasureOptions.Raw); empty otherwise.
	RawConversationsList, RawEventsPoll sample
	// Exit is how the server ended after stdin EOF.
	Exit e2e.Exit
}

// measureOptions tune [Measure].
type measureOptions struct {
	// N is the number of sequential calls per operation. Zero means 50.
	N int
	// Raw also measures the per-call latencies with a [RawClient] in a
	// second spawn of the server, to tell the server's cost from the go-sdk
	// client's.
	Raw bool
}

// measure spawns the server of opts, measures one run with mo.N sequential
// calls of conversations_list and of events_poll, and ends it by closing
// stdin. Every result must be a success (a conversations_list error result
// is a failed measurement, not a fast one).
func measure(ctx context.Context, label string, opts e2e.ServeOptions, mo measureOptions) (*measurement, error) {
	n := mo.N
	if n == 0 {
		n = 50
	}
	s, err := e2e.StartServe(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer s.Kill()
	m := &measurement{Label: label, Initialize: s.Initialized}
	t0 := time.Now()
	if _, err := s.Session.ListTools(ctx, nil); err != nil {
		return nil, fmt.Errorf("interop: %s: tools/list: %w", label, err)
	}
	m.FirstToolsList = time.Since(t0)
	if m.Procs, m.RSSKiB, err = s.RSSKiB(); err != nil {
		return nil, err
	}
	call := func(name string) (time.Duration, error) {
		t0 := time.Now()
		r, err := s.Session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		d := time.Since(t0)
		if err != nil {
			return d, fmt.Errorf("interop: %s: %s: %w", label, name, err)
		}
		if r.IsError {
			return d, fmt.Errorf("interop: %s: %s: error result %q", label, name, resultText(r))
		}
		return d, nil
	}
	if m.FirstConversationsList, err = call("conversations_list"); err != nil {
		return nil, err
	}
	m.SpawnToFirstList = time.Since(s.Spawned)
	for _, op := range []struct {
		name string
		out  *sample
	}{{"conversations_list", &m.ConversationsList}, {"events_poll", &m.EventsPoll}} {
		for range n {
			d, err := call(op.name)
			if err != nil {
				return nil, err
			}
			*op.out = append(*op.out, d)
		}
	}
	if m.Exit, err = s.CloseStdin(ctx); err != nil {
		return nil, fmt.Errorf("interop: %s: %w", label, err)
	}
	if mo.Raw {
		if m.RawConversationsList, m.RawEventsPoll, err = measureRaw(ctx, label, opts, n); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func measureRaw(ctx context.Context, label string, opts e2e.ServeOptions, n int) (cl, ep sample, err error) {
	s, c, err := e2e.StartRaw(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	defer s.Kill()
	// The first call waits for the Gateway connection; not timed.
	if err := c.CallTool(ctx, "conversations_list", map[string]any{}); err != nil {
		return nil, nil, fmt.Errorf("interop: %s (raw client): %w", label, err)
	}
	for _, op := range []struct {
		name string
		out  *sample
	}{{"conversations_list", &cl}, {"events_poll", &ep}} {
		for range n {
			t0 := time.Now()
			if err := c.CallTool(ctx, op.name, map[string]any{}); err != nil {
				return nil, nil, fmt.Errorf("interop: %s (raw client): %w", label, err)
			}
			*op.out = append(*op.out, time.Since(t0))
		}
	}
	if _, err := s.CloseStdin(ctx); err != nil {
		return nil, nil, fmt.Errorf("interop: %s (raw client): %w", label, err)
	}
	return cl, ep, nil
}

// summary aggregates the runs of one server: the median over runs of each
// one-shot figure, and per-call quantiles over the calls of all runs pooled.
type summary struct {
	Label                                              string
	Runs                                               int
	Initialize, FirstToolsList, FirstConversationsList time.Duration
	SpawnToFirstList, Exit                             time.Duration
	RSSKiB                                             int64
	// ExitCodes lists each run's exit code.
	ExitCodes []int
	// Procs is the process tree of the first run (names and RSS).
	Procs                               []e2e.Proc
	ConversationsList, EventsPoll       sample
	RawConversationsList, RawEventsPoll sample
}

// summarize aggregates runs of one server. It panics on an empty slice.
func summarize(runs []*measurement) summary {
	med := func(f func(*measurement) time.Duration) time.Duration {
		var s sample
		for _, m := range runs {
			s = append(s, f(m))
		}
		return s.Median()
	}
	sum := summary{Label: runs[0].Label, Runs: len(runs), Procs: runs[0].Procs}
	sum.Initialize = med(func(m *measurement) time.Duration { return m.Initialize })
	sum.FirstToolsList = med(func(m *measurement) time.Duration { return m.FirstToolsList })
	sum.FirstConversationsList = med(func(m *measurement) time.Duration { return m.FirstConversationsList })
	sum.SpawnToFirstList = med(func(m *measurement) time.Duration { return m.SpawnToFirstList })
	sum.Exit = med(func(m *measurement) time.Duration { return m.Exit.After })
	var rss []int64
	for _, m := range runs {
		rss = append(rss, m.RSSKiB)
		sum.ExitCodes = append(sum.ExitCodes, m.Exit.Code)
		sum.ConversationsList = append(sum.ConversationsList, m.ConversationsList...)
		sum.EventsPoll = append(sum.EventsPoll, m.EventsPoll...)
		sum.RawConversationsList = append(sum.RawConversationsList, m.RawConversationsList...)
		sum.RawEventsPoll = append(sum.RawEventsPoll, m.RawEventsPoll...)
	}
	slices.Sort(rss)
	sum.RSSKiB = rss[(len(rss)-1)/2]
	return sum
}

// mb converts KiB to decimal megabytes (10^6 bytes), the unit of the RSS
// target.
func mb(kib int64) float64 { return float64(kib) * 1024 / 1e6 }

// table renders the side-by-side Markdown table of real (OpenClaw) and ours,
// with the ratio ours/OpenClaw and the targets. floor, when not
// empty, is the Gateway's own sessions.list round trip ([GatewayFloor]),
// shown as the lower bound of any bridge's conversations_list.
func table(real, ours summary, floor sample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| figure | %s | %s | ours / OpenClaw | target | met |\n", real.Label, ours.Label)
	b.WriteString("|---|---:|---:|---:|---|---|\n")
	ratio := func(o, r float64) float64 {
		if r == 0 {
			return math.NaN()
		}
		return o / r
	}
	met := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	row := func(name string, r, o float64, unit, target string, ok *bool) {
		q := ratio(o, r)
		m := ""
		if ok != nil {
			m = met(*ok)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", name, fmtNum(r, unit), fmtNum(o, unit), fmtRatio(q), target, m)
	}
	ptr := func(v bool) *bool { return &v }
	ri, oi := ms(real.Initialize), ms(ours.Initialize)
	row("spawn → initialize result", ri, oi, "ms", "≤ 1/100", ptr(ratio(oi, ri) <= 0.01))
	row("first tools/list", ms(real.FirstToolsList), ms(ours.FirstToolsList), "ms", "", nil)
	rr, or := mb(real.RSSKiB), mb(ours.RSSKiB)
	row("RSS after tools/list (process tree)", rr, or, "MB", "≤ 30 MB", ptr(or <= 30))
	row("first conversations_list (Gateway connect + subscribe)", ms(real.FirstConversationsList), ms(ours.FirstConversationsList), "ms", "", nil)
	row("spawn → first conversations_list done", ms(real.SpawnToFirstList), ms(ours.SpawnToFirstList), "ms", "", nil)
	rc, oc := ms(real.ConversationsList.Median()), ms(ours.ConversationsList.Median())
	row(fmt.Sprintf("conversations_list median (n=%d)", len(ours.ConversationsList)), rc, oc, "ms", "≤ 1/3", ptr(ratio(oc, rc) <= 1.0/3))
	row("conversations_list p99", ms(real.ConversationsList.P99()), ms(ours.ConversationsList.P99()), "ms", "", nil)
	re, oe := ms(real.EventsPoll.Median()), ms(ours.EventsPoll.Median())
	row(fmt.Sprintf("events_poll median (n=%d)", len(ours.EventsPoll)), re, oe, "ms", "≤ 1/3", ptr(ratio(oe, re) <= 1.0/3))
	row("events_poll p99", ms(real.EventsPoll.P99()), ms(ours.EventsPoll.P99()), "ms", "", nil)
	if len(ours.RawConversationsList) > 0 && len(real.RawConversationsList) > 0 {
		rc, oc := ms(real.RawConversationsList.Median()), ms(ours.RawConversationsList.Median())
		row(fmt.Sprintf("conversations_list median, raw JSON-RPC client (n=%d)", len(ours.RawConversationsList)), rc, oc, "ms", "≤ 1/3", ptr(ratio(oc, rc) <= 1.0/3))
		row("conversations_list p99, raw client", ms(real.RawConversationsList.P99()), ms(ours.RawConversationsList.P99()), "ms", "", nil)
		re, oe := ms(real.RawEventsPoll.Median()), ms(ours.RawEventsPoll.Median())
		row(fmt.Sprintf("events_poll median, raw JSON-RPC client (n=%d)", len(ours.RawEventsPoll)), re, oe, "ms", "≤ 1/3", ptr(ratio(oe, re) <= 1.0/3))
		row("events_poll p99, raw client", ms(real.RawEventsPoll.P99()), ms(ours.RawEventsPoll.P99()), "ms", "", nil)
	}
	if len(floor) > 0 {
		fmt.Fprintf(&b, "| Gateway sessions.list round trip alone, median / p99 (n=%d): the floor of conversations_list | %s / %s | | | | |\n",
			len(floor), fmtNum(ms(floor.Median()), "ms"), fmtNum(ms(floor.P99()), "ms"))
	}
	row("exit after stdin EOF", ms(real.Exit), ms(ours.Exit), "ms", "", nil)
	fmt.Fprintf(&b, "| exit codes | %v | %v | | 0 | %s |\n", real.ExitCodes, ours.ExitCodes, met(allZero(ours.ExitCodes)))
	return b.String()
}

func allZero(codes []int) bool {
	for _, c := range codes {
		if c != 0 {
			return false
		}
	}
	return true
}

func fmtNum(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, unit)
	default:
		return fmt.Sprintf("%.2f %s", v, unit)
	}
}

func fmtRatio(q float64) string {
	switch {
	case math.IsNaN(q) || math.IsInf(q, 0):
		return "–"
	case q >= 0.1:
		return fmt.Sprintf("%.2f", q)
	case q > 0:
		return fmt.Sprintf("1/%.0f", 1/q)
	default:
		return "0"
	}
}

// procsString renders a process tree as "name pid RSS MB" items.
func procsString(ps []e2e.Proc) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%s (pid %d) %.1f MB", p.Name, p.Pid, mb(p.RSSKiB)))
	}
	return strings.Join(parts, " + ")
}
