package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/openclaw-go/openclaw/internal/procfs"
)

// rssReport is the memory of one process and of its descendants while a
// target was measured, from /proc/PID/status, in MiB (2^20 bytes).
type rssReport struct {
	// PID is the sampled process (the bridge).
	PID int `json:"pid"`
	// Samples is how many times /proc was read.
	Samples int `json:"samples"`
	// IdleMiB is the process's VmRSS at the first sample, before any session.
	IdleMiB float64 `json:"idle_mib"`
	// PeakMiB is the largest VmRSS of the process itself among the samples.
	PeakMiB float64 `json:"peak_mib"`
	// HWMMiB is the kernel's VmHWM of the process at the last sample: its
	// true peak since it started, start-up included.
	HWMMiB float64 `json:"hwm_mib"`
	// ChildrenPeakMiB is the largest sum of VmRSS over the descendants
	// (server children, shells) among the samples.
	ChildrenPeakMiB float64 `json:"children_peak_mib"`
	// MaxChildren is the largest number of descendants seen in one sample.
	MaxChildren int `json:"max_children"`
	// TotalPeakMiB is the largest sum of the process and its descendants.
	TotalPeakMiB float64 `json:"total_peak_mib"`
	// Err is why sampling stopped early (the process went away), if it did.
	Err string `json:"err,omitempty"`
}

// sampleRSS reads the memory of pid and its descendants every interval
// until ctx is done, and returns what it saw. It reads once at once, so even
// a short run has a sample. It stops early when pid is gone.
func sampleRSS(ctx context.Context, pid int, interval time.Duration) rssReport {
	rep := rssReport{PID: pid}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		own, hwm, err := procStatusKiB(pid)
		if err != nil {
			rep.Err = fmt.Sprintf("reading /proc/%d/status: %v", pid, err)
			return rep
		}
		var kids int64
		desc := procfs.Descendants(pid)
		for _, c := range desc {
			if rss, _, err := procStatusKiB(c); err == nil {
				kids += rss
			}
		}
		if rep.Samples == 0 {
			rep.IdleMiB = mib(own)
		}
		rep.Samples++
		rep.PeakMiB = math.Max(rep.PeakMiB, mib(own))
		rep.HWMMiB = mib(hwm)
		rep.ChildrenPeakMiB = math.Max(rep.ChildrenPeakMiB, mib(kids))
		rep.MaxChildren = max(rep.MaxChildren, len(desc))
		rep.TotalPeakMiB = math.Max(rep.TotalPeakMiB, mib(own+kids))
		select {
		case <-ctx.Done():
			return rep
		case <-t.C:
		}
	}
}

// procStatusKiB returns VmRSS and VmHWM of pid, in KiB.
func procStatusKiB(pid int) (rss, hwm int64, err error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, err
	}
	var haveRSS bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s %q: %w", key, val, err)
		}
		if key == "VmRSS" {
			rss, haveRSS = n, true
		} else {
			hwm = n
		}
	}
	if !haveRSS {
		// A zombie has a status without Vm lines: it holds no memory.
		return 0, 0, fmt.Errorf("no VmRSS (process exited?)")
	}
	return rss, hwm, nil
}

// mib converts KiB to MiB with one decimal.
func mib(kib int64) float64 {
	return math.Round(float64(kib)/1024*10) / 10
}
