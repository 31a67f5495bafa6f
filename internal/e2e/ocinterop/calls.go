package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/openclaw-go/openclaw/internal/e2e"
)

// callOps are the requests [measureCalls] times, in the order of a round.
var callOps = []string{"events_poll", "tools/list", "conversations_list"}

// callsResult is one server's figures from [measureCalls].
type callsResult struct {
	// Label names the server.
	Label string
	// Samples are the round trips of each of callOps.
	Samples map[string]sample
	// MaxRSSKiB is the largest summed VmRSS of the server's process tree,
	// read after every round.
	MaxRSSKiB int64
}

// floorLabel is the label of the Gateway's own sessions.list round trips
// in [measureCalls]'s results.
const floorLabel = "Gateway sessions.list"

// measureCalls spawns every server of servers at once, each with a
// [e2e.RawClient], makes one untimed conversations_list on each (it waits for
// the Gateway connect), then runs rounds: in each, every server in turn
// (the first one rotating, so a drift of the machine's load falls on all
// alike) makes perRound sequential calls of each of callOps. Every answer
// must be a success. labels and servers are parallel. With floor not nil,
// it takes its turn in the rounds too, with perRound sessions.list round
// trips, and its result comes last, labelled [floorLabel], its samples
// under "conversations_list".
func measureCalls(ctx context.Context, labels []string, servers []e2e.ServeOptions, rounds, perRound int, floor *floorConn) ([]*callsResult, error) {
	type live struct {
		s   *e2e.Serve
		c   *e2e.RawClient
		res *callsResult
	}
	var all []*live
	defer func() {
		for _, l := range all {
			l.c.Close()
			l.s.Kill()
		}
	}()
	for i, o := range servers {
		s, c, err := e2e.StartRaw(ctx, o)
		if err != nil {
			return nil, err
		}
		all = append(all, &live{s: s, c: c, res: &callsResult{Label: labels[i], Samples: map[string]sample{}}})
		if err := c.CallTool(ctx, "conversations_list", map[string]any{}); err != nil {
			return nil, fmt.Errorf("ocinterop: %s: %w", labels[i], err)
		}
	}
	call := func(c *e2e.RawClient, op string) error {
		if op != "tools/list" {
			return c.CallTool(ctx, op, map[string]any{})
		}
		line, err := c.Call(ctx, op, map[string]any{})
		if err == nil && !strings.Contains(string(line), `"tools":[`) {
			err = fmt.Errorf("ocinterop: tools/list answered %.200s", line)
		}
		return err
	}
	floorRes := &callsResult{Label: floorLabel, Samples: map[string]sample{}}
	turns := len(all)
	if floor != nil {
		turns++
	}
	for r := range rounds {
		for k := range turns {
			i := (r + k) % turns
			if i == len(all) {
				s, err := floor.time(ctx, perRound)
				if err != nil {
					return nil, err
				}
				floorRes.Samples["conversations_list"] = append(floorRes.Samples["conversations_list"], s...)
				continue
			}
			l := all[i]
			for _, op := range callOps {
				for range perRound {
					t0 := time.Now()
					if err := call(l.c, op); err != nil {
						return nil, fmt.Errorf("ocinterop: %s: %w", l.res.Label, err)
					}
					l.res.Samples[op] = append(l.res.Samples[op], time.Since(t0))
				}
			}
			if _, rss, err := l.s.RSSKiB(); err == nil {
				l.res.MaxRSSKiB = max(l.res.MaxRSSKiB, rss)
			}
		}
	}
	out := make([]*callsResult, len(all))
	for i, l := range all {
		if _, err := l.s.CloseStdin(ctx); err != nil {
			return nil, fmt.Errorf("ocinterop: %s: %w", l.res.Label, err)
		}
		out[i] = l.res
	}
	if floor != nil {
		out = append(out, floorRes)
	}
	return out, nil
}

// floorTable renders the figure of conversations_list against the
// Gateway's own sessions.list timed in the same rounds (the last result,
// [floorLabel]): one row per server, its median and p99, the floor's, and
// the median's excess over the floor's.
func floorTable(res []*callsResult, client string) string {
	floor := res[len(res)-1].Samples["conversations_list"]
	var b strings.Builder
	b.WriteString("| client | request | n | median / p99 ms | Gateway sessions.list median / p99 ms (n) | median above the Gateway's |\n|---|---|---:|---|---|---:|\n")
	for _, r := range res[:len(res)-1] {
		s := r.Samples["conversations_list"]
		fmt.Fprintf(&b, "| %s, %s | conversations_list | %d | %.3f / %.3f | %.3f / %.3f (%d) | %+.3f ms |\n", client, r.Label, len(s),
			ms(s.Median()), ms(s.P99()), ms(floor.Median()), ms(floor.P99()), len(floor), ms(s.Median())-ms(floor.Median()))
	}
	return b.String()
}

// callsTable renders measureCalls's results as a Markdown table, one row
// per operation: median and p99 of each server, and the ratio of each
// later server's median (and p99) to the first's.
func callsTable(res []*callsResult, client string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| client | request | n |")
	for _, r := range res {
		fmt.Fprintf(&b, " %s median / p99 ms |", r.Label)
	}
	for _, r := range res[1:] {
		fmt.Fprintf(&b, " %s / %s median, p99 |", r.Label, res[0].Label)
	}
	b.WriteString("\n|---|---|---|" + strings.Repeat("---|", 2*len(res)-1) + "\n")
	for _, op := range callOps {
		fmt.Fprintf(&b, "| %s | %s | %d |", client, op, len(res[0].Samples[op]))
		for _, r := range res {
			s := r.Samples[op]
			fmt.Fprintf(&b, " %.3f / %.3f |", ms(s.Median()), ms(s.P99()))
		}
		base := res[0].Samples[op]
		for _, r := range res[1:] {
			s := r.Samples[op]
			fmt.Fprintf(&b, " %.2f, %.2f |", ms(s.Median())/ms(base.Median()), ms(s.P99())/ms(base.P99()))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "| %s | RSS max (tree) | |", client)
	for _, r := range res {
		fmt.Fprintf(&b, " %.1f MB |", mb(r.MaxRSSKiB))
	}
	b.WriteString(strings.Repeat(" |", len(res)-1) + "\n")
	return b.String()
}

// marshalCalls renders results as JSON for the record of a run.
func marshalCalls(res []*callsResult) ([]byte, error) {
	type op struct {
		N        int     `json:"n"`
		MedianMs float64 `json:"median_ms"`
		P99Ms    float64 `json:"p99_ms"`
		MaxMs    float64 `json:"max_ms"`
	}
	out := map[string]map[string]any{}
	for _, r := range res {
		m := map[string]any{"max_rss_mb": mb(r.MaxRSSKiB)}
		for k, s := range r.Samples {
			m[k] = op{N: len(s), MedianMs: ms(s.Median()), P99Ms: ms(s.P99()), MaxMs: ms(s.Quantile(1))}
		}
		out[r.Label] = m
	}
	return json.MarshalIndent(out, "", "  ")
}
