package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/e2e"
)

// start starts the binary with c's home and work folder and args, ended
// when ctx ends; its stdout and stderr go to the returned buffers.
func (c *registryCLI) start(t *testing.T, ctx context.Context, args ...string) (*exec.Cmd, *bytes.Buffer, *e2e.LockedBuffer) {
	t.Helper()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.WaitDelay = 10 * time.Second // a killed binary's children may hold its output open
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENCLAW_") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+c.home, "OPENCLAW_HOME="+c.home)
	cmd.Dir = c.work
	stdout, stderr := &bytes.Buffer{}, &e2e.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdout, stderr
}

// `mcp call` of a ready server's tool does not wait for a server that
// has not answered initialize (one that never does while the test runs,
// within a 10-minute connection timeout): with --server the slow server
// is not even started, without it the call goes ahead with the servers
// ready within --connect-wait.
func TestMCPCallDoesNotWaitForASlowServer(t *testing.T) {
	t.Parallel()
	cli := newRuntimeCLI(t)
	for _, tc := range []struct {
		name       string
		args       []string
		slowStarts bool
	}{
		{"--server names the tool's server", []string{"--server", "tiny"}, false},
		{"the ready servers", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			started := filepath.Join(t.TempDir(), "slow-started")
			r := cli.newHome(t, map[string]any{
				"tiny": map[string]any{"command": cli.tiny},
				"slow": map[string]any{"command": "sh", "args": []string{"-c", "touch '" + started + "'; exec sleep 600"}, "connectionTimeoutMs": 600000},
			}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			args := append([]string{"mcp", "call", "tiny__echo", "--args", `{"message":"hi"}`, "--audit-log", os.DevNull}, tc.args...)
			cmd, stdout, stderr := r.start(t, ctx, args...)
			err := cmd.Wait()
			if ctx.Err() != nil {
				t.Fatalf("mcp call %v was still waiting for the slow server after 2 minutes\nstderr:\n%s", tc.args, stderr.String())
			}
			if err != nil || !strings.Contains(stdout.String(), "tiny says hi") {
				t.Fatalf("mcp call %v = %v\nstdout:\n%s\nstderr:\n%s", tc.args, err, stdout, stderr.String())
			}
			if _, err := os.Stat(started); (err == nil) != tc.slowStarts {
				t.Errorf("slow server started: %v, want %v", err == nil, tc.slowStarts)
			}
		})
	}
}

// SIGINT during `mcp call` sends the call's notifications/cancelled to the
// server before the process exits, over stdio and over streamable HTTP.
func TestMCPCallInterruptCancelsUpstream(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	peer := filepath.Join(dir, "cancelpeer")
	if out, err := exec.Command("go", "build", "-o", peer, "./testdata/cancelpeer").CombinedOutput(); err != nil {
		t.Fatalf("go build cancelpeer: %v\n%s", err, out)
	}
	cli := &runtimeCLI{bin: testBinary(t)}

	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		state := t.TempDir()
		r := cli.newHome(t, map[string]any{"peer": map[string]any{"command": peer, "args": []string{state}}}, nil)
		interruptCall(t, r, func(ctx context.Context) {
			for {
				if _, err := os.Stat(filepath.Join(state, "started")); err == nil {
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
		got, _ := os.ReadFile(filepath.Join(state, "cancelled"))
		if len(bytes.TrimSpace(got)) == 0 {
			t.Fatal("the server read no notifications/cancelled")
		}
	})

	t.Run("streamable HTTP", func(t *testing.T) {
		t.Parallel()
		started := make(chan struct{}, 1)
		up := mcp.NewServer(&mcp.Implementation{Name: "peer", Version: "1"}, nil)
		up.AddTool(&mcp.Tool{Name: "hang", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		})
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)
		var mu sync.Mutex
		var cancels []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Method == http.MethodPost {
				body, _ := io.ReadAll(req.Body)
				req.Body = io.NopCloser(bytes.NewReader(body))
				if bytes.Contains(body, []byte(`"notifications/cancelled"`)) {
					mu.Lock()
					cancels = append(cancels, string(body))
					mu.Unlock()
				}
			}
			h.ServeHTTP(w, req)
		}))
		defer srv.Close()
		r := cli.newHome(t, map[string]any{"peer": map[string]any{"url": srv.URL, "transport": "streamable-http"}}, nil)
		interruptCall(t, r, func(ctx context.Context) {
			select {
			case <-started:
			case <-ctx.Done():
			}
		})
		mu.Lock()
		defer mu.Unlock()
		if len(cancels) == 0 {
			t.Fatal("the server got no notifications/cancelled")
		}
	})
}

// interruptCall runs `mcp call peer__hang`, waits for started to return
// (the tool runs upstream), sends SIGINT and waits for the process to end.
func interruptCall(t *testing.T, r *registryCLI, started func(context.Context)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, _, stderr := r.start(t, ctx, "mcp", "call", "peer__hang", "--audit-log", os.DevNull)
	started(ctx)
	if ctx.Err() != nil {
		t.Fatalf("the tool never started\nstderr:\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // interrupted: exits non-zero
	if ctx.Err() != nil {
		t.Fatalf("mcp call did not exit after SIGINT\nstderr:\n%s", stderr.String())
	}
}
