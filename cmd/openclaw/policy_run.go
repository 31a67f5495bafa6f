package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies/engine"
)

// How `openclaw policy reload` reaches running processes (docs/RATIONALE.md
// "Why SIGHUP and a run file for policy reload?"): each process that
// enforces policies writes <state dir>/openclaw-go/run/<pid>.json while it
// runs and reloads its policies on SIGHUP; after a reload it rewrites the
// file with the outcome and a higher sequence number. `policy reload` lists
// the files, checks that each process is alive and is the one that wrote the
// file (its start time, from /proc, must match), signals it and waits for
// the sequence number to move.

// runInfo is the content of a run file.
type runInfo struct {
	PID     int    `json:"pid"`
	Command string `json:"command"`
	// StartTicks is the process start time from /proc/<pid>/stat (field
	// 22), "" where /proc is not available; it tells a live process from
	// a later one that reused the pid.
	StartTicks   string              `json:"start_ticks,omitempty"`
	Started      time.Time           `json:"started"`
	PolicyConfig string              `json:"policy_config,omitempty"`
	Modules      []engine.ModuleInfo `json:"modules"`
	// Reloads counts the reloads attempted since start (SIGHUP or a file
	// change); LastReload is the outcome of the latest.
	Reloads    int           `json:"reloads"`
	LastReload *reloadReport `json:"last_reload,omitempty"`
}

// reloadReport is the outcome of one reload.
type reloadReport struct {
	Time   time.Time            `json:"time"`
	Result *engine.ReloadResult `json:"result,omitempty"`
	Error  string               `json:"error,omitempty"`
}

// runRegistration is this process's run file.
type runRegistration struct {
	path string
	mu   sync.Mutex
	info runInfo
}

// runDir is <state dir>/openclaw-go/run.
func runDir() (string, error) {
	dir, err := config.StateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "openclaw-go", "run"), nil
}

// register writes this process's run file.
func register(command, policyConfig string, mods []engine.ModuleInfo) (*runRegistration, error) {
	dir, err := runDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("run folder: %w", err)
	}
	if policyConfig != "" {
		if abs, err := filepath.Abs(policyConfig); err == nil {
			policyConfig = abs
		}
	}
	pid := os.Getpid()
	r := &runRegistration{path: filepath.Join(dir, strconv.Itoa(pid)+".json"), info: runInfo{
		PID: pid, Command: command, StartTicks: startTicks(pid), Started: time.Now().UTC(),
		PolicyConfig: policyConfig, Modules: mods,
	}}
	return r, r.write()
}

// reloaded records the outcome of a reload in the run file.
func (r *runRegistration) reloaded(mods []engine.ModuleInfo, res engine.ReloadResult, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.info.Reloads++
	rep := &reloadReport{Time: time.Now().UTC()}
	if err != nil {
		rep.Error = err.Error()
	} else {
		rep.Result = &res
		r.info.Modules = mods
	}
	r.info.LastReload = rep
	_ = r.writeLocked()
}

func (r *runRegistration) write() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writeLocked()
}

// writeLocked replaces the file by a rename, so a reader never sees half.
func (r *runRegistration) writeLocked() error {
	return writeRunFileAtomic(r.path, r.info, "run file")
}

// remove deletes the run file.
func (r *runRegistration) remove() error {
	if err := os.Remove(r.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("run file: %w", err)
	}
	return nil
}

// startTicks returns field 22 of /proc/<pid>/stat (the start time in clock
// ticks since boot), or "" when it cannot be read.
func startTicks(pid int) string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	// Field 2, the command, is in parentheses and may hold spaces.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state), so field 22 is fields[19].
	if len(fields) < 20 {
		return ""
	}
	return fields[19]
}

// readRunFiles returns the run files in dir, sorted by pid; files that do
// not parse are skipped.
func readRunFiles(dir string) ([]runInfo, error) {
	return readRunDir(dir, readRunFile, func(i *runInfo) int { return i.PID })
}

func readRunFile(path string) (runInfo, error) {
	return readRunFileAs(path, func(i *runInfo) int { return i.PID })
}
