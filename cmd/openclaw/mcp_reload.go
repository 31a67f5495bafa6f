package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/runtime"
)

// `openclaw mcp reload`. OpenClaw's command disposes the MCP runtimes
// cached in the Gateway process so that agents build new ones from the
// current config on their next turn ("Disposed cached MCP runtimes. Active
// agents use new MCP config on their next runtime build."). Our CLI caches
// nothing (mcp tools, call and probe read openclaw.json on every run); the
// long-running holders of MCP servers are `openclaw mcp proxy` processes.
// Each of them that supports it registers <state dir>/openclaw-go/mcp-run/
// <pid>.json and re-reads mcp.servers on SIGHUP (the signal that already
// makes it reload its policies, docs/RATIONALE.md); `mcp reload` signals
// every registered live process and waits for each to report the outcome
// in its file, as `openclaw policy reload` does.

// mcpRunInfo is the content of an mcp-run file.
type mcpRunInfo struct {
	PID     int    `json:"pid"`
	Command string `json:"command"`
	// StartTicks is the process start time from /proc (see runInfo).
	StartTicks string    `json:"start_ticks,omitempty"`
	Started    time.Time `json:"started"`
	// Config is the openclaw.json the process reads mcp.servers from.
	Config string `json:"config"`
	// Reloads counts the reloads attempted since start; LastReload is the
	// outcome of the latest.
	Reloads    int              `json:"reloads"`
	LastReload *mcpReloadReport `json:"last_reload,omitempty"`
	// SkippedLines are, by server name, the stdout lines of its stdio
	// servers that were not one JSON-RPC message
	// (runtime.ServerStatus.SkippedLines), as last published
	// (publishStatus); servers with none are left out. `mcp status` shows
	// them.
	SkippedLines map[string]int64 `json:"skipped_lines,omitempty"`
}

// mcpReloadReport is the outcome of one reload: Result sums the changes up
// (runtime.ServerChanges.String), Error says why the previous servers were
// kept.
type mcpReloadReport struct {
	Time   time.Time `json:"time"`
	Result string    `json:"result,omitempty"`
	Error  string    `json:"error,omitempty"`
}

// mcpReloadFunc re-reads mcp.servers and applies them to the running
// servers, returning a one-line summary of the changes; on an error the
// previous servers must stay in use.
type mcpReloadFunc func(ctx context.Context) (summary string, err error)

// mcpRunDir is <state dir>/openclaw-go/mcp-run.
func mcpRunDir() (string, error) {
	dir, err := config.StateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "openclaw-go", "mcp-run"), nil
}

// mcpReloadServer is a running process's registration for `mcp reload`.
type mcpReloadServer struct {
	path   string
	mu     sync.Mutex
	info   mcpRunInfo
	cancel context.CancelFunc
	done   <-chan struct{} // closed by Close
	wg     sync.WaitGroup
}

// serveMCPReload makes this process reachable by `openclaw mcp reload`:
// it starts catching SIGHUP, then writes its run file in dir (so a
// registered process is never killed by the signal), and calls reload for
// each SIGHUP until Close, recording each outcome in the file. command
// names the process ("mcp proxy"), configPath the openclaw.json it reads.
// A long-running command calls it once after its servers are connected:
//
//	rl, err := serveMCPReload(ctx, dir, "mcp proxy", cfgPath, logger, func(ctx context.Context) (string, error) { … })
//	if err != nil { logger.Warn(…) } else { defer rl.Close() }
func serveMCPReload(ctx context.Context, dir, command, configPath string, logger *slog.Logger, reload mcpReloadFunc) (*mcpReloadServer, error) {
	onSignal := reloadSignals()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		// reloadSignals' loop was not started: stop catching at once.
		sctx, stop := context.WithCancel(context.Background())
		stop()
		onSignal(sctx, func() {})
		return nil, fmt.Errorf("mcp-run folder: %w", err)
	}
	pid := os.Getpid()
	r := &mcpReloadServer{
		path: filepath.Join(dir, strconv.Itoa(pid)+".json"),
		info: mcpRunInfo{PID: pid, Command: command, StartTicks: startTicks(pid), Started: time.Now().UTC(), Config: configPath},
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel, r.done = cancel, wctx.Done()
	if err := r.write(); err != nil {
		cancel()
		onSignal(wctx, func() {})
		return nil, err
	}
	r.wg.Go(func() {
		onSignal(wctx, func() {
			// A reload that lands is logged by the runtime ("MCP servers
			// reloaded"); a refused one only here.
			summary, err := reload(wctx)
			if err != nil {
				logger.Warn("mcp.servers reload refused; the previous servers stay in use", "err", err)
			}
			r.record(summary, err)
		})
	})
	return r, nil
}

// record writes the outcome of one reload into the run file.
func (r *mcpReloadServer) record(summary string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.info.Reloads++
	rep := &mcpReloadReport{Time: time.Now().UTC(), Result: summary}
	if err != nil {
		rep.Result, rep.Error = "", err.Error()
	}
	r.info.LastReload = rep
	_ = r.writeLocked()
}

func (r *mcpReloadServer) write() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writeLocked()
}

// writeLocked replaces the file by a rename, so a reader never sees half.
func (r *mcpReloadServer) writeLocked() error {
	return writeRunFileAtomic(r.path, r.info, "mcp-run file")
}

// statusEvery is how often a running process publishes its servers'
// counters in its run file, when they changed.
const statusEvery = 2 * time.Second

// publishStatus keeps the servers' counters of status (the runtime
// session's Status) in the run file, checked every statusEvery and
// written when they changed, until Close.
func (r *mcpReloadServer) publishStatus(status func() []runtime.ServerStatus) {
	r.wg.Go(func() {
		t := time.NewTicker(statusEvery)
		defer t.Stop()
		for {
			skipped := map[string]int64{}
			for _, st := range status() {
				if st.SkippedLines > 0 {
					skipped[st.Name] = st.SkippedLines
				}
			}
			r.mu.Lock()
			if !maps.Equal(skipped, r.info.SkippedLines) {
				r.info.SkippedLines = skipped
				_ = r.writeLocked() // the next tick tries again
			}
			r.mu.Unlock()
			select {
			case <-r.done:
				return
			case <-t.C:
			}
		}
	})
}

// Close stops reloading (a reload in progress finishes first), stops
// catching SIGHUP for it and removes the run file. It is safe to call more
// than once.
func (r *mcpReloadServer) Close() error {
	r.cancel()
	r.wg.Wait()
	if err := os.Remove(r.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("mcp-run file: %w", err)
	}
	return nil
}

// readMCPRunFiles returns the run files of dir by pid; files that do not
// parse are skipped.
func readMCPRunFiles(dir string) ([]mcpRunInfo, error) {
	return readRunDir(dir, readMCPRunFile, func(i *mcpRunInfo) int { return i.PID })
}

func readMCPRunFile(path string) (mcpRunInfo, error) {
	return readRunFileAs(path, func(i *mcpRunInfo) int { return i.PID })
}

// runMCPReload signals every live process registered in dir and reports
// each outcome on out; configPath is only named in the answer when no
// process is running. It returns an error (exit 1) when a process refused
// the reload or did not report within wait.
func runMCPReload(ctx context.Context, out io.Writer, dir, configPath string, wait time.Duration) error {
	infos, err := readMCPRunFiles(dir)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("openclaw mcp reload: %w", err)}
	}
	targets := make([]reloadTarget, len(infos))
	for i, in := range infos {
		targets[i] = reloadTarget{PID: in.PID, Command: in.Command, StartTicks: in.StartTicks, Started: in.Started, Reloads: in.Reloads}
	}
	read := func(path string) (reloadAnswer, error) {
		cur, err := readMCPRunFile(path)
		a := reloadAnswer{Reloads: cur.Reloads}
		if cur.LastReload != nil {
			a.HasLast, a.Error, a.Result = true, cur.LastReload.Error, cur.LastReload.Result
		}
		return a, err
	}
	live, failed, err := signalReloads(ctx, out, dir, targets, wait, read, "the previous servers stay in use")
	switch {
	case err != nil:
		return &exitError{code: 1, err: fmt.Errorf("openclaw mcp reload: %w", err)}
	case live == 0:
		fmt.Fprintf(out, "No running MCP runtime to reload. openclaw mcp tools, call and probe read %s on every run.\n", configPath)
		return nil
	case failed > 0:
		return &exitError{code: 1, err: fmt.Errorf("openclaw mcp reload: %d of %d processes did not reload", failed, live)}
	}
	fmt.Fprintf(out, "Reloaded %d MCP runtime%s. New tool calls use the new MCP config.\n", live, map[bool]string{true: "", false: "s"}[live == 1])
	return nil
}

func newMCPReloadCmd() *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "reload",
		Short: "Make running MCP runtimes (openclaw mcp proxy) re-read mcp.servers",
		Long: `Reload checks openclaw.json, then finds the running processes that hold MCP servers
and support reloading (each registers itself in <state dir>/openclaw-go/mcp-run/<pid>.json),
sends each SIGHUP and reports what it did: servers added, removed, changed (reconnected) and
unchanged (kept connected), or why it refused (the previous servers then stay in use). SIGHUP
also makes such a process reload its policy modules. openclaw mcp tools, call and probe need no
reload: they read openclaw.json on every run. Exit code 1 when openclaw.json is invalid, or a
process refused the reload or did not answer within --wait.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := loadRegistry(cmd)
			if err != nil {
				return err
			}
			if err := refuseBlankConfig(doc.Path); err != nil {
				return regFail(cmd, "openclaw mcp reload: "+err.Error())
			}
			dir, err := mcpRunDir()
			if err != nil {
				return regFail(cmd, err.Error())
			}
			return runMCPReload(cmd.Context(), cmd.OutOrStdout(), dir, doc.Path, wait)
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 40*time.Second, "how long to wait for each process to report (connecting a server may take its connection timeout, 30 s by default)")
	return cmd
}

// serversReloader applies a new declaration of servers to a running
// runtime and says what changed. *runtime.Session is meant to implement it
// (Session.Reload: connect the added servers, close the removed ones,
// reconnect the changed ones, keep the rest connected).
type serversReloader interface {
	Reload(ctx context.Context, servers []runtime.Server) (runtime.ServerChanges, error)
}

// reloadFromConfig is the mcpReloadFunc of a long-running command holding
// MCP servers: it reads configPath again and refuses a file that does not
// load or validate (the running servers then stay as they are); entries
// without a usable transport are logged and left out, as at start; the
// rest go to r in declaration order.
func reloadFromConfig(configPath string, logger *slog.Logger, r serversReloader) mcpReloadFunc {
	return func(ctx context.Context) (string, error) {
		if err := refuseBlankConfig(configPath); err != nil {
			return "", err
		}
		doc, err := config.LoadDocument(configPath)
		if err == nil {
			err = doc.Check()
		}
		if err != nil {
			return "", fmt.Errorf("%s is invalid: %w", configPath, err)
		}
		resolved, diags := doc.ResolveServers()
		for _, d := range diags {
			logger.Warn("MCP server skipped", "err", d)
		}
		changes, err := r.Reload(ctx, runtime.ServersFromConfig(resolved))
		if err != nil {
			return "", err
		}
		return changes.String(), nil
	}
}

// refuseBlankConfig refuses a reload from an openclaw.json that exists but
// holds nothing but white space: an editor that truncates before it
// writes, or a mistaken `>`, would otherwise stop every running server. A
// missing file, or an explicit {} or empty mcp.servers, is a choice and
// reloads as such.
func refuseBlankConfig(path string) error {
	b, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(b)) > 0 {
		return nil // a missing or unreadable file is LoadDocument's to report
	}
	return fmt.Errorf("%s is empty: refusing to reload (it would stop every MCP server); write {} to remove them all", path)
}
