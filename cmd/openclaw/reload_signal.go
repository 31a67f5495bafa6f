package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// reloadTarget is a process registered for reloads, as its run file
// (policy or mcp-run) tells it.
type reloadTarget struct {
	PID        int
	Command    string
	StartTicks string
	Started    time.Time
	Reloads    int // reloads attempted before the signal
}

// reloadAnswer is what a process recorded in its run file after a reload:
// Reloads attempted so far and, when it has one, its last outcome.
type reloadAnswer struct {
	Reloads       int
	HasLast       bool
	Error, Result string
}

// signalReloads sends SIGHUP to every live target in dir (removing the run
// file of a process that is gone), waits until each records a newer reload
// (read, polled until wait has passed) and prints one line per process:
// reloaded with its result, refused (kept says what stays in use), or no
// answer. It returns the live processes and how many did not reload, or
// ctx's error when it ends first.
func signalReloads(ctx context.Context, out io.Writer, dir string, targets []reloadTarget, wait time.Duration,
	read func(path string) (reloadAnswer, error), kept string) (live, failed int, err error) {
	var sent []reloadTarget
	for _, t := range targets {
		if !processState(runInfo{PID: t.PID, StartTicks: t.StartTicks}) {
			_ = os.Remove(filepath.Join(dir, strconv.Itoa(t.PID)+".json"))
			fmt.Fprintf(out, "pid %d: not running any more; removed its run file\n", t.PID)
			continue
		}
		live++
		if err := signalReload(t.PID); err != nil {
			fmt.Fprintf(out, "pid %d (%s): cannot signal: %v\n", t.PID, t.Command, err)
			continue
		}
		sent = append(sent, t)
	}
	failed = live - len(sent)
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for _, t := range sent {
		var cur reloadAnswer
		var rerr error
		for {
			cur, rerr = read(filepath.Join(dir, strconv.Itoa(t.PID)+".json"))
			if rerr == nil && cur.Reloads > t.Reloads || time.Now().After(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				return live, failed, ctx.Err()
			case <-tick.C:
			}
		}
		label := fmt.Sprintf("pid %d (%s, started %s)", t.PID, t.Command, t.Started.Local().Format(time.DateTime))
		switch {
		case rerr != nil || cur.Reloads <= t.Reloads || !cur.HasLast:
			failed++
			fmt.Fprintf(out, "%s: no answer within %v\n", label, wait)
		case cur.Error != "":
			failed++
			fmt.Fprintf(out, "%s: reload refused, %s: %s\n", label, kept, cur.Error)
		default:
			fmt.Fprintf(out, "%s: reloaded: %s\n", label, cur.Result)
		}
	}
	return live, failed, nil
}

// writeRunFileAtomic writes v as indented JSON to path through a rename,
// so a reader never sees half a file; what names the file in errors.
func writeRunFileAtomic(path string, v any, what string) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// readRunFileAs reads one run file of type T; pidOf gives its pid, which
// must be positive.
func readRunFileAs[T any](path string, pidOf func(*T) int) (T, error) {
	var info T
	data, err := os.ReadFile(path)
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return info, fmt.Errorf("%s: %w", path, err)
	}
	if pidOf(&info) <= 0 {
		return info, fmt.Errorf("%s: no pid", path)
	}
	return info, nil
}

// readRunDir reads every *.json run file of dir with read, skipping those
// that do not parse, sorted by pid; a missing dir holds none.
func readRunDir[T any](dir string, read func(path string) (T, error), pidOf func(*T) int) ([]T, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var infos []T
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if info, err := read(filepath.Join(dir, e.Name())); err == nil {
			infos = append(infos, info)
		}
	}
	slices.SortFunc(infos, func(a, b T) int { return pidOf(&a) - pidOf(&b) })
	return infos, nil
}
