package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/runtime"
)

// TestMCPReloadSignal registers this test process for `mcp reload` and
// reloads it with a real SIGHUP. It is the only test of the package that
// catches SIGHUP, and its steps run in order: each signal reaches the one
// registration.
func TestMCPReloadSignal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	const cfg = "/cfg/openclaw.json"
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reload := func(out *bytes.Buffer) error {
		t.Helper()
		out.Reset()
		return runMCPReload(ctx, out, dir, cfg, 30*time.Second)
	}
	var out bytes.Buffer

	if err := reload(&out); err != nil || out.String() != "No running MCP runtime to reload. openclaw mcp tools, call and probe read /cfg/openclaw.json on every run.\n" {
		t.Fatalf("nothing registered: err %v, output %q", err, out.String())
	}

	var calls atomic.Int32
	var refuse atomic.Bool
	rl, err := serveMCPReload(ctx, dir, "mcp proxy", cfg, logger, func(context.Context) (string, error) {
		calls.Add(1)
		if refuse.Load() {
			return "", errors.New("openclaw.json: mcp.servers.web.url: must be an http: or https: URL")
		}
		return "1 added (web), 0 removed, 0 changed, 1 unchanged", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rl.Close() })
	pid := os.Getpid()
	info, err := readMCPRunFile(filepath.Join(dir, strconv.Itoa(pid)+".json"))
	if err != nil || info.PID != pid || info.Command != "mcp proxy" || info.Config != cfg || info.Reloads != 0 {
		t.Fatalf("run file %+v, %v", info, err)
	}
	label := fmt.Sprintf("pid %d (mcp proxy, started ", pid)

	if err := reload(&out); err != nil {
		t.Fatalf("reload: %v\n%s", err, out.String())
	}
	for _, want := range []string{label, "): reloaded: 1 added (web), 0 removed, 0 changed, 1 unchanged\n", "Reloaded 1 MCP runtime. New tool calls use the new MCP config.\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("reload ran %d times, want 1", n)
	}

	refuse.Store(true)
	err = reload(&out)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(err.Error(), "1 of 1 processes did not reload") {
		t.Errorf("refused reload: err %v, want exit 1", err)
	}
	if want := "): reload refused, the previous servers stay in use: openclaw.json: mcp.servers.web.url: must be an http: or https: URL\n"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	if info, _ := readMCPRunFile(filepath.Join(dir, strconv.Itoa(pid)+".json")); info.Reloads != 2 || info.LastReload == nil || info.LastReload.Error == "" {
		t.Errorf("run file after the refusal: %+v", info)
	}

	// A file left by a process that is gone is removed, not signalled.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	stale := filepath.Join(dir, strconv.Itoa(dead.Process.Pid)+".json")
	if err := os.WriteFile(stale, []byte(fmt.Sprintf(`{"pid": %d, "command": "mcp proxy", "start_ticks": "0"}`, dead.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	refuse.Store(false)
	if err := reload(&out); err != nil {
		t.Errorf("reload with a stale file: %v\n%s", err, out.String())
	}
	if want := fmt.Sprintf("pid %d: not running any more; removed its run file\n", dead.Process.Pid); !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale run file still there: %v", err)
	}

	if err := rl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rl.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := reload(&out); err != nil || !strings.HasPrefix(out.String(), "No running MCP runtime to reload.") {
		t.Errorf("after Close: err %v, output %q", err, out.String())
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("reload ran %d times, want 3", n)
	}
}

// TestMCPReloadCommand runs the binary: it checks openclaw.json first.
func TestMCPReloadCommand(t *testing.T) {
	t.Parallel()
	r := newRegistryCLI(t)
	if err := os.MkdirAll(filepath.Dir(r.configPath()), 0o700); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		config string
		code   int
		stdout string
		stderr string
	}{
		{config: `{"mcp": {"servers": {"a": {"command": "x"}}}}`,
			stdout: "No running MCP runtime to reload. openclaw mcp tools, call and probe read $OPENCLAW_HOME/.openclaw/openclaw.json on every run.\n"},
		{config: `{"mcp": {"servers": {"a": {"command": "x", "timeout": 5}}}}`, code: 1,
			stderr: "Config file is invalid; fix it before using MCP config commands.\n"},
	}
	for _, st := range steps {
		if err := os.WriteFile(r.configPath(), []byte(st.config), 0o600); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := r.run(t, "mcp", "reload")
		stdout, stderr = r.normalize(stdout), r.normalize(stderr)
		if code != st.code || stdout != st.stdout || !strings.Contains(stderr, st.stderr) {
			t.Errorf("config %s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr with %q", st.config, code, stdout, stderr, st.code, st.stdout, st.stderr)
		}
	}
}

// recordingReloader stands in for the runtime: it records what it is
// handed and answers with the real diff against the previous declaration.
type recordingReloader struct {
	current []runtime.Server
	calls   int
}

func (r *recordingReloader) Reload(_ context.Context, servers []runtime.Server) (runtime.ServerChanges, error) {
	r.calls++
	ch := runtime.DiffServers(r.current, servers)
	r.current = servers
	return ch, nil
}

func TestReloadFromConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "openclaw.json")
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	rec := &recordingReloader{}
	fn := reloadFromConfig(path, logger, rec)
	steps := []struct {
		file, summary, err string
		calls              int
	}{
		{
			file:    `{"mcp": {"servers": {"keep": {"command": "k"}, "gone": {"command": "g"}, "edit": {"command": "e"}}}}`,
			summary: "3 added (keep, gone, edit), 0 removed, 0 changed, 0 unchanged", calls: 1,
		},
		{
			file:    `{"mcp": {"servers": {"keep": {"command": "k"}, "edit": {"command": "e", "args": ["-v"]}, "new": {"url": "https://h/mcp"}, "odd": {"transport": "sse"}}}}`,
			summary: "1 added (new), 1 removed (gone), 1 changed (edit), 1 unchanged", calls: 2,
		},
		{file: `{"mcp": {"servers": {"keep": {"command": "k", "timeout": 3}}}}`, err: path + " is invalid: ", calls: 2},
		{file: `{"mcp": `, err: path + " is invalid: ", calls: 2},
		{file: "", err: path + " is empty: refusing to reload", calls: 2},
		{file: " \n\t", err: path + " is empty: refusing to reload", calls: 2},
		{file: `{"mcp": {"servers": {"keep": {"command": "k"}}}}`, summary: "0 added, 2 removed (edit, new), 0 changed, 1 unchanged", calls: 3},
	}
	for i, st := range steps {
		if err := os.WriteFile(path, []byte(st.file), 0o600); err != nil {
			t.Fatal(err)
		}
		summary, err := fn(context.Background())
		switch {
		case st.err != "" && (err == nil || !strings.HasPrefix(err.Error(), st.err)):
			t.Errorf("step %d: err %v, want %q…", i, err, st.err)
		case st.err == "" && err != nil:
			t.Errorf("step %d: %v", i, err)
		case st.err == "" && summary != st.summary:
			t.Errorf("step %d: summary %q, want %q", i, summary, st.summary)
		}
		if rec.calls != st.calls {
			t.Errorf("step %d: runtime reloaded %d times, want %d", i, rec.calls, st.calls)
		}
	}
	if !strings.Contains(logs.String(), "MCP server skipped") || !strings.Contains(logs.String(), "odd") {
		t.Errorf("the unusable entry was not logged:\n%s", logs.String())
	}
}
