package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/internal/e2e"
)

// serveUntilExit runs `openclaw mcp serve args…`, sends initialize and an
// conversations_list call, keeps stdin open, and returns stdout, stderr and the exit
// code once the process exits by itself. It also sends a conversations_list
// call, which waits for the Gateway.
func serveUntilExit(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"mcp", "serve"}, args...)...)
	in, _ := cmd.StdinPipe()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_, _ = in.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"conversations_list","arguments":{}}}` + "\n"))
	err := cmd.Wait() // stdin stays open: the process must exit on its own
	in.Close()
	if ctx.Err() != nil {
		t.Fatalf("serve did not exit by itself; stderr:\n%s", errb.String())
	}
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return out.String(), errb.String(), code
}

// A Gateway that refuses the token: initialize is answered, then the
// process exits 1 with OpenClaw's message (fixtures failcases/badtoken.json).
func TestBadTokenExits1(t *testing.T) {
	t.Parallel()
	_, gw, _ := setup(t)
	stdout, stderr, code := serveUntilExit(t, "--url", gw.URL, "--token", "wrong-token")
	if code != 1 {
		t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, `"protocolVersion":"2025-06-18"`) {
		t.Errorf("initialize was not answered before the exit: %q", stdout)
	}
	for _, want := range []string{
		"Warning: --token",
		"gateway connect failed: GatewayClientRequestError: unauthorized: gateway token mismatch",
		"MCP server failed to start: unauthorized: gateway token mismatch",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// No listener: exit 1 naming the address (fixtures failcases/refused.json).
// A call that waits for the Gateway gets no answer before the exit, as in
// OpenClaw, and no false decision reaches the audit log.
func TestUnreachableGatewayExits1(t *testing.T) {
	t.Parallel()
	for i := 0; i < 5; i++ {
		stdout, stderr, code := serveUntilExit(t, "--url", "ws://127.0.0.1:1", "--password", "x", "--audit-log", "-")
		if code != 1 || !strings.Contains(stderr, "MCP server failed to start: connecting to ws://127.0.0.1:1") || !strings.Contains(stderr, "connection refused") {
			t.Fatalf("exit %d, stderr:\n%s", code, stderr)
		}
		if strings.Contains(stdout, `"id":2`) {
			t.Fatalf("conversations_list was answered before the fatal exit:\n%s", stdout)
		}
		if !strings.Contains(stdout, `"protocolVersion":"2025-06-18"`) {
			t.Fatalf("initialize was not answered before the fatal exit (OpenClaw answers it):\n%s", stdout)
		}
		if strings.Contains(stderr, `"decision":"block"`) {
			t.Fatalf("a false block was audited:\n%s", stderr)
		}
	}
}

// Invalid startup input fails with a message naming it.
func TestBadStartupInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--claude-channel-mode", "sometimes"}, `invalid Claude channel mode "sometimes"`},
		{[]string{"--policy", "/nonexistent/p.wasm"}, `policy module "p"`},
		{[]string{"--policy-config", "testdata/typo-policy.json"}, `unknown field "mdoe"`},
	} {
		_, stderr, code := serveUntilExit(t, append([]string{"--url", "ws://127.0.0.1:1"}, tc.args...)...)
		if code != 1 || !strings.Contains(stderr, "MCP server failed to start: ") || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr:\n%s", tc.args, code, stderr)
		}
	}
}

// The Gateway restarts under a running bridge: the bridge keeps serving,
// reconnects, and its event cursors keep counting.
func TestGatewayRestartKeepsServing(t *testing.T) {
	t.Parallel()
	ctx, gw, tokenFile := setup(t)
	s := serve(t, ctx, gw, tokenFile)
	key := "agent:main:tg-dm"
	if err := gw.Inject(ctx, key, "user", "before the restart", false); err != nil {
		t.Fatal(err)
	}
	cursor := waitEvent(t, ctx, s, 0, key, "before the restart")

	if err := gw.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// Local tools answer while the Gateway connection is being re-established.
	if r := mustCall(t, ctx, s, "events_poll", map[string]any{"after_cursor": cursor}); r.IsError {
		t.Fatalf("events_poll during reconnect: %+v", r)
	}
	// Gateway tools fail at once with "gateway not connected" until the
	// bridge has reconnected (as OpenClaw's do), then succeed.
	for strings.Count(s.Stderr(), `msg="gateway connected"`) < 2 {
		if r := mustCall(t, ctx, s, "conversations_list", nil); r.IsError && !strings.HasPrefix(r.Text, "gateway not connected") {
			t.Fatalf("conversations_list during the reconnect: %+v\n%s", r, s.Stderr())
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no reconnect:\n%s", s.Stderr())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if r := mustCall(t, ctx, s, "conversations_list", nil); r.IsError || !strings.HasPrefix(r.Text, "conversations: 2") {
		t.Fatalf("conversations_list after the restart: %+v\n%s", r, s.Stderr())
	}
	if err := gw.Inject(ctx, key, "user", "after the restart", false); err != nil {
		t.Fatal(err)
	}
	if next := waitEvent(t, ctx, s, cursor, key, "after the restart"); next != cursor+1 {
		t.Fatalf("cursor after the restart = %d, want %d", next, cursor+1)
	}
}

func waitEvent(t *testing.T, ctx context.Context, s *e2e.Serve, after int64, key, text string) int64 {
	t.Helper()
	r := mustCall(t, ctx, s, "events_wait", map[string]any{"after_cursor": after, "session_key": key, "timeout_ms": 20000})
	var ev struct {
		Event *struct {
			Cursor int64  `json:"cursor"`
			Text   string `json:"text"`
		} `json:"event"`
	}
	if err := json.Unmarshal(r.Structured, &ev); err != nil || ev.Event == nil || ev.Event.Text != text {
		t.Fatalf("events_wait after %d: %q %s", after, r.Text, r.Structured)
	}
	return ev.Event.Cursor
}

// SIGINT and SIGTERM end the server cleanly (exit 0), as stdin EOF does.
func TestSignalsExitCleanly(t *testing.T) {
	t.Parallel()
	ctx, gw, tokenFile := setup(t)
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.CommandContext(ctx, bin, "mcp", "serve", "--url", gw.URL, "--token-file", tokenFile)
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_, _ = in.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"))
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Process.Signal(sig)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%v: exit %v, want 0", sig, err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("%v: still running after 10s", sig)
		}
		in.Close()
	}
}

// An audit log that cannot be written is reported on stderr, loudly.
func TestAuditLogWriteFailureIsReported(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	ctx, gw, tokenFile := setup(t)
	s := serve(t, ctx, gw, tokenFile, "--audit-log", "/dev/full")
	if r := mustCall(t, ctx, s, "events_poll", nil); r.IsError {
		t.Fatalf("events_poll: %+v", r)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(s.Stderr(), "decisions are NOT being recorded") {
		if time.Now().After(deadline) {
			t.Fatalf("no audit failure on stderr:\n%s", s.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Secrets in the Gateway URL never reach stderr.
func TestGatewayURLSecretsRedacted(t *testing.T) {
	t.Parallel()
	_, stderr, code := serveUntilExit(t, "-v", "--url", "ws://user:SECRETP@127.0.0.1:1/?token=SECRETQ", "--password", "x", "--audit-log", "-")
	if code != 1 || strings.Contains(stderr, "SECRETP") || strings.Contains(stderr, "SECRETQ") || !strings.Contains(stderr, "***") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
}

// The initialize result keeps OpenClaw's key order (empty-gateway/
// initialize.json): protocolVersion, capabilities, serverInfo.
func TestInitializeKeyOrder(t *testing.T) {
	t.Parallel()
	ctx, gw, tokenFile := setup(t)
	cmd := exec.CommandContext(ctx, bin, "mcp", "serve", "--url", gw.URL, "--token-file", tokenFile)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); _ = cmd.Wait() }()
	_, _ = in.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"))
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(line, `"result":{"protocolVersion":"2025-06-18","capabilities":{"experimental":`) ||
		!strings.Contains(line, `},"serverInfo":{"name":"openclaw"`) {
		t.Fatalf("initialize result order:\n%s", line)
	}
}
