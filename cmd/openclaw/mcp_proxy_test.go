package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPProxyStdio spawns the built binary as `openclaw mcp proxy` in front
// of server-everything and talks to it with the go-sdk client.
func TestMCPProxyStdio(t *testing.T) {
	peers := os.Getenv("PEERS_DIR")
	if peers == "" {
		t.Skip("PEERS_DIR not set (server-everything needed)")
	}
	script := filepath.Join(peers, "npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node missing")
	}
	if _, err := os.Stat(script); err != nil {
		t.Skipf("server-everything missing: %v", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "openclaw")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	home := filepath.Join(dir, "home")
	cfg := map[string]any{"mcp": map[string]any{"servers": map[string]any{
		"everything": map[string]any{"command": node, "args": []string{script, "stdio"}},
	}}}
	writeJSON(t, filepath.Join(home, ".openclaw", "openclaw.json"), cfg)
	policy := filepath.Join(dir, "policy.json")
	writeJSON(t, policy, map[string]any{"modules": []any{map[string]any{
		"name": "rules", "source": "builtin:rules",
		"config": map[string]any{"default": "allow", "rules": []any{
			map[string]any{"tool": "everything__get-sum", "decision": "block", "reason": "sums are off limits"},
		}},
	}, map[string]any{"name": "sanitizer", "source": "builtin:sanitizer"}}})
	audit := filepath.Join(dir, "audit.jsonl")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.Command(bin, "mcp", "proxy", "--policy-config", policy, "--audit-log", audit)
	cmd.Env = append(os.Environ(), "OPENCLAW_HOME="+home, "OPENCLAW_STATE_DIR="+filepath.Join(dir, "state"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	var progMu sync.Mutex
	var progress []float64
	gotProgress := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "proxy-test-client", Version: "9.9"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if req.Params.ProgressToken == "tok-1" {
				progMu.Lock()
				progress = append(progress, req.Params.Progress)
				progMu.Unlock()
				select {
				case gotProgress <- struct{}{}:
				default:
				}
			}
		},
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr.String())
	}

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	names := map[string]bool{}
	for _, tl := range list.Tools {
		names[tl.Name] = true
	}
	if !names["everything__echo"] || !names["everything__get-sum"] {
		t.Fatalf("tools/list = %v, want everything__echo and everything__get-sum", names)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "hi proxy"}})
	if err != nil {
		t.Fatalf("echo: %v", err)
	}
	if res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "hi proxy") {
		t.Fatalf("echo result = %+v, want the echoed text", res)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__get-sum", Arguments: map[string]any{"a": 1, "b": 2}})
	if err != nil {
		t.Fatalf("get-sum: %v", err)
	}
	if !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "sums are off limits") {
		t.Fatalf("blocked get-sum = %+v, want isError with the module's reason", res)
	}

	// Progress of the upstream call reaches the client under its token.
	params := &mcp.CallToolParams{Name: "everything__trigger-long-running-operation", Arguments: map[string]any{"duration": 0.2, "steps": 2}}
	params.SetProgressToken("tok-1")
	res, err = cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("long-running operation = %+v, %v", res, err)
	}
	// The client may handle notifications after the result: wait for one.
	select {
	case <-gotProgress:
	case <-ctx.Done():
		t.Fatal("no progress notification relayed for token tok-1")
	}
	progMu.Lock()
	got := slices.Clone(progress)
	progMu.Unlock()
	if got[0] != 1 {
		t.Fatalf("progress relayed = %v, want it to start at 1", got)
	}

	// The server children of the proxy, found before it exits.
	out, _ := exec.Command("pgrep", "-P", strconv.Itoa(cmd.Process.Pid)).Output()
	children := strings.Fields(string(out))
	if len(children) == 0 {
		t.Fatalf("pgrep -P %d found no server child of the proxy", cmd.Process.Pid)
	}

	// stdin EOF: the proxy exits 0 and its server child is gone.
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v\nstderr:\n%s", err, stderr.String())
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Fatalf("proxy exit = %v, want 0\nstderr:\n%s", cmd.ProcessState, stderr.String())
	}
	for _, pid := range children {
		if alive(pid) {
			t.Errorf("server child %s survives the proxy", pid)
		}
	}

	// The audit log shows surface proxy and the client's identity.
	raw, err := os.ReadFile(audit)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var rec struct {
			Surface string `json:"surface"`
			Tool    any    `json:"tool"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Surface == "proxy" && strings.Contains(line, "proxy-test-client") && strings.Contains(line, "get-sum") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no audit record with surface proxy and caller proxy-test-client for get-sum:\n%s", raw)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesized command name.
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}
