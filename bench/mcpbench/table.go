package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// rssTargetMiB is the proxy's memory target under load.
const rssTargetMiB = 100

// addedRatioTarget is the proxy's latency target: our median at most this
// many times the direct median.
const addedRatioTarget = 1.25

// printTables reads result lines from files (stdin when there are none) and
// writes a latency table, a load table and the verdicts on the proxy's
// targets for the target labelled ours against the one labelled direct.
func printTables(stdin io.Reader, w io.Writer, files []string, direct, ours string) error {
	var results []result
	read := func(name string, r io.Reader) error {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for line := 1; sc.Scan(); line++ {
			text := strings.TrimSpace(sc.Text())
			if text == "" || !strings.HasPrefix(text, "{") {
				continue
			}
			var r result
			if err := json.Unmarshal([]byte(text), &r); err != nil {
				return fmt.Errorf("%s:%d: %w", name, line, err)
			}
			results = append(results, r)
		}
		return sc.Err()
	}
	if len(files) == 0 {
		if err := read("stdin", stdin); err != nil {
			return err
		}
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		err = read(f, fh)
		fh.Close()
		if err != nil {
			return err
		}
	}
	var lat, load []result
	last := map[string]result{} // latency phase, by label
	lastLoad := map[string]result{}
	for _, r := range results {
		if r.Phase == "load" {
			load = append(load, r)
			lastLoad[r.Label] = r
		} else {
			lat = append(lat, r)
			last[r.Label] = r
		}
	}
	base, haveBase := last[direct]

	if len(lat) > 0 {
		fmt.Fprintln(w, "| path | transport | calls | errors | median ms | p90 ms | p99 ms | max ms | added median ms | median / direct |")
		fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, r := range lat {
			added, ratio := "", ""
			if haveBase && base.MedianMs > 0 {
				added = fmt.Sprintf("%+.3f", r.MedianMs-base.MedianMs)
				ratio = fmt.Sprintf("%.2f", r.MedianMs/base.MedianMs)
			}
			fmt.Fprintf(w, "| %s | %s | %d | %d | %.3f | %.3f | %.3f | %.3f | %s | %s |\n",
				r.Label, r.Transport, r.Calls, r.Errors+int64(r.ConnectErrors), r.MedianMs, r.P90Ms, r.P99Ms, r.MaxMs, added, ratio)
		}
		fmt.Fprintln(w)
	}
	if len(load) > 0 {
		fmt.Fprintln(w, "| bridge under load | sessions × calls | errors | calls/s | median ms | p99 ms | max ms | bridge RSS idle → peak MiB | bridge VmHWM MiB | children peak MiB (processes) | total peak MiB |")
		fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, r := range load {
			rss := [4]string{"", "", "", ""}
			if r.RSS != nil {
				rss = [4]string{
					fmt.Sprintf("%.1f → %.1f", r.RSS.IdleMiB, r.RSS.PeakMiB),
					fmt.Sprintf("%.1f", r.RSS.HWMMiB),
					fmt.Sprintf("%.1f (%d)", r.RSS.ChildrenPeakMiB, r.RSS.MaxChildren),
					fmt.Sprintf("%.1f", r.RSS.TotalPeakMiB),
				}
			}
			fmt.Fprintf(w, "| %s | %d × %d | %d | %.1f | %.3f | %.3f | %.3f | %s | %s | %s | %s |\n",
				r.Label, r.Sessions, r.CallsPerSession, r.Errors+int64(r.ConnectErrors), r.CallsPerSec, r.MedianMs, r.P99Ms, r.MaxMs,
				rss[0], rss[1], rss[2], rss[3])
		}
		fmt.Fprintln(w)
	}

	// Verdicts.
	if o, ok := last[ours]; ok && haveBase && base.MedianMs > 0 {
		added := o.MedianMs - base.MedianMs
		lowest := true
		var others []string
		for _, r := range lat {
			if r.Label == ours || r.Label == direct || last[r.Label] != r {
				continue
			}
			a := r.MedianMs - base.MedianMs
			others = append(others, fmt.Sprintf("%s %+.3f ms", r.Label, a))
			if a <= added {
				lowest = false
			}
		}
		if len(others) == 0 {
			fmt.Fprintf(w, "- added median latency: %s %+.3f ms (no other bridge measured)\n", ours, added)
		} else {
			fmt.Fprintf(w, "- added median latency: %s %+.3f ms; %s: lowest %s\n", ours, added, strings.Join(others, ", "), yesNo(lowest))
		}
		ratio := o.MedianMs / base.MedianMs
		fmt.Fprintf(w, "- %s median / %s median = %.2f (target ≤ %.2f): %s\n", ours, direct, ratio, addedRatioTarget, yesNo(ratio <= addedRatioTarget))
	}
	if o, ok := lastLoad[ours]; ok {
		errs := o.Errors + int64(o.ConnectErrors)
		fmt.Fprintf(w, "- load %d × %d on %s: %d errors (target 0): %s\n", o.Sessions, o.CallsPerSession, ours, errs, yesNo(errs == 0))
		if o.RSS != nil {
			fmt.Fprintf(w, "- %s RSS under load: sampled peak %.1f MiB, VmHWM %.1f MiB (target < %d MB): %s\n",
				ours, o.RSS.PeakMiB, o.RSS.HWMMiB, rssTargetMiB, yesNo(o.RSS.HWMMiB*1.048576 < rssTargetMiB))
		}
	}
	return nil
}

// yesNo renders a verdict; a miss is bold.
func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}
