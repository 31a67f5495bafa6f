package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/e2e"
	"github.com/openclaw-go/openclaw/internal/testkit"
)

// TestMCPProxySlowServerJoinsLater runs the built binary with two stdio
// servers, one of which does not start until the test lets it: the proxy
// serves the ready server's tools (its initialize answered, its tools
// callable) while the slow one is still starting, and the slow one's tools
// arrive with notifications/tools/list_changed once it answers.
func TestMCPProxySlowServerJoinsLater(t *testing.T) {
	t.Parallel()
	server := testkit.Peer(t, testkit.GoEverythingServer)
	dir := t.TempDir()
	bin := buildOpenclaw(t, dir)
	home := filepath.Join(dir, "home")
	gate := filepath.Join(dir, "start-slow")
	slow := "while [ ! -e '" + gate + "' ]; do sleep 0.05; done; exec '" + server + "'"
	writeJSON(t, filepath.Join(home, ".openclaw", "openclaw.json"), map[string]any{"mcp": map[string]any{"servers": map[string]any{
		"fast": map[string]any{"command": server},
		"slow": map[string]any{"command": "sh", "args": []string{"-c", slow}, "connectionTimeoutMs": 300000},
	}}})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.Command(bin, "mcp", "proxy", "--connect-wait", "200ms", "--audit-log", filepath.Join(dir, "audit.jsonl"))
	cmd.Env = append(os.Environ(), "OPENCLAW_HOME="+home, "OPENCLAW_STATE_DIR="+filepath.Join(dir, "state"))
	stderr := &e2e.LockedBuffer{}
	cmd.Stderr = stderr
	pc := startStdioProxy(ctx, t, cmd, "slow-test")
	cs, changed, tools := pc.cs, pc.changed, pc.tools
	// The fast server is served while the slow one is held: at once, or,
	// on a machine too loaded for it to list within --connect-wait, with
	// list_changed when it does.
	names := tools()
	for !slices.Contains(names, "fast__test_simple_text") {
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("tools while the slow server starts = %v, want the fast server's\nstderr:\n%s", names, stderr.String())
		}
		names = tools()
	}
	if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "slow__") }) {
		t.Fatalf("tools while the slow server starts = %v, want the fast server's only", names)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fast__test_simple_text"}); err != nil || res.IsError {
		t.Fatalf("fast__test_simple_text while the slow server starts = %+v, %v", res, err)
	}
	for len(changed) > 0 {
		<-changed
	}
	// A call of the slow server's tool, sent before it starts, waits for
	// it (not "unknown tool").
	early := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow__test_simple_text"})
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %+v", res.Content)
		}
		early <- err
	}()
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-early; err != nil {
		t.Errorf("call of the slow server's tool sent while it started: %v", err)
	}
	for {
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("no notifications/tools/list_changed after the slow server started\nstderr:\n%s", stderr.String())
		}
		if names := tools(); slices.Contains(names, "slow__test_simple_text") {
			break
		}
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow__test_simple_text"}); err != nil || res.IsError {
		t.Fatalf("slow__test_simple_text = %+v, %v", res, err)
	}
}
