package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/openclaw-go/openclaw/gateway/gatewaytest"
	"github.com/openclaw-go/openclaw/internal/e2e"
)

// silentGateway is a Gateway that completes the handshake and confirms
// sessions.subscribe, then never answers anything else: a Gateway process
// that hangs. requests receives the method of every request it swallowed.
func silentGateway(t *testing.T) (url string, requests <-chan string) {
	t.Helper()
	swallowed := make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx := r.Context()
		if ws.Write(ctx, websocket.MessageText, []byte(`{"type":"event","event":"connect.challenge","payload":{"nonce":"silent-nonce","ts":1}}`)) != nil {
			return
		}
		for {
			_, data, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var req struct{ ID, Method string }
			if json.Unmarshal(data, &req) != nil {
				continue
			}
			var payload string
			switch req.Method {
			case "connect":
				payload = `{"type":"hello-ok","protocol":4,"server":{"version":"silent"},"features":{"methods":[]},"policy":{"tickIntervalMs":600000}}`
			case "sessions.subscribe":
				payload = `{"subscribed":true}`
			default:
				swallowed <- req.Method
				continue
			}
			res := fmt.Sprintf(`{"type":"res","id":%q,"ok":true,"payload":%s}`, req.ID, payload)
			if ws.Write(ctx, websocket.MessageText, []byte(res)) != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http"), swallowed
}

// serveChild is `openclaw mcp serve` running as a child process, spoken
// to over its stdin and stdout with raw JSON-RPC lines.
type serveChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan map[string]any // stdout, one decoded line each; closed at EOF
	stderr *e2e.LockedBuffer
	state  string // its OPENCLAW_STATE_DIR
}

func startServeChild(t *testing.T, ctx context.Context, args ...string) *serveChild {
	t.Helper()
	bin, err := builtBin()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, append([]string{"mcp", "serve"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "OPENCLAW_HOME="+dir, "OPENCLAW_STATE_DIR="+filepath.Join(dir, "state"),
		"OPENCLAW_CONFIG_PATH="+filepath.Join(dir, "openclaw.json"))
	c := &serveChild{cmd: cmd, lines: make(chan map[string]any, 64), stderr: &e2e.LockedBuffer{}, state: filepath.Join(dir, "state")}
	cmd.Stderr = c.stderr
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"unparsed": sc.Text()}
			}
			c.lines <- m
		}
	}()
	t.Cleanup(func() {
		_ = c.stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return c
}

func (c *serveChild) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		t.Fatalf("writing %s: %v", line, err)
	}
}

// answer reads stdout until the response to id; it fails when stdout ends
// or ctx (the hang guard) does first.
func (c *serveChild) answer(t *testing.T, ctx context.Context, id float64) map[string]any {
	t.Helper()
	for {
		select {
		case m, ok := <-c.lines:
			if !ok {
				t.Fatalf("stdout ended before the answer to %v; stderr:\n%s", id, c.stderr.String())
			}
			if got, _ := m["id"].(float64); got == id {
				return m
			}
		case <-ctx.Done():
			t.Fatalf("no answer to %v: %v; stderr:\n%s", id, ctx.Err(), c.stderr.String())
		}
	}
}

// rest reads stdout to its end and returns the answers by id.
func (c *serveChild) rest(t *testing.T, ctx context.Context) map[float64]map[string]any {
	t.Helper()
	out := map[float64]map[string]any{}
	for {
		select {
		case m, ok := <-c.lines:
			if !ok {
				return out
			}
			if id, ok := m["id"].(float64); ok {
				out[id] = m
			}
		case <-ctx.Done():
			t.Fatalf("stdout still open: %v; stderr:\n%s", ctx.Err(), c.stderr.String())
		}
	}
}

func (c *serveChild) initialize(t *testing.T, ctx context.Context) {
	t.Helper()
	c.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"serve-test","version":"1"}}}`)
	if m := c.answer(t, ctx, 1); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	c.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// resultText is the text of a tools/call answer and its isError flag.
func resultText(m map[string]any) (string, bool) {
	r, _ := m["result"].(map[string]any)
	if r == nil {
		return fmt.Sprint(m["error"]), true
	}
	isErr, _ := r["isError"].(bool)
	content, _ := r["content"].([]any)
	if len(content) == 0 {
		return "", isErr
	}
	first, _ := content[0].(map[string]any)
	text, _ := first["text"].(string)
	return text, isErr
}

// On stdin EOF or SIGTERM, serve releases what its calls wait on (OpenClaw
// docs/protocol-facts.md, Failure and shutdown): a long events_wait answers event:null and a call waiting for a
// Gateway answer fails, both before the process exits 0. Before, serve
// waited for the events_wait timeout (here 5 minutes) and the Gateway
// request timeout (3 minutes).
func TestServeExitReleasesWaits(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"stdin EOF", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			// A hang guard, far below the waits the bug held the process for.
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			url, swallowed := silentGateway(t)
			c := startServeChild(t, ctx, "--url", url, "--token", "t", "--audit-log", "-")
			c.initialize(t, ctx)
			c.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"events_wait","arguments":{"timeout_ms":300000}}}`)
			c.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"conversations_list","arguments":{}}}`)
			select {
			case m := <-swallowed:
				if m != "sessions.list" {
					t.Fatalf("the Gateway got %s, want sessions.list", m)
				}
			case <-ctx.Done():
				t.Fatalf("conversations_list never reached the Gateway; stderr:\n%s", c.stderr.String())
			}
			if how == "SIGTERM" {
				if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			} else {
				_ = c.stdin.Close()
			}
			got := c.rest(t, ctx)
			if err := c.cmd.Wait(); err != nil {
				t.Fatalf("exit: %v, want 0; stderr:\n%s", err, c.stderr.String())
			}
			if text, isErr := resultText(got[2]); isErr || text != "timeout" {
				t.Errorf("events_wait answered %q (isError %v), want the released wait's \"timeout\": %v", text, isErr, got[2])
			}
			if text, isErr := resultText(got[3]); !isErr || !strings.Contains(text, "closed") {
				t.Errorf("conversations_list answered %q (isError %v), want an error saying the client closed: %v", text, isErr, got[3])
			}
			if log := c.stderr.String(); strings.Contains(log, "level=ERROR") {
				t.Errorf("a clean shutdown logged an error:\n%s", log)
			}
		})
	}
}

// serve refuses plaintext ws:// to a public address before it starts
// anything, with OpenClaw's SECURITY ERROR, exit 1.
func TestServeRefusesPlaintextRemote(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := startServeChild(t, ctx, "--url", "ws://203.0.113.7:18789", "--password", "pw")
	_ = c.stdin.Close()
	c.rest(t, ctx)
	err := c.cmd.Wait()
	log := c.stderr.String()
	if c.cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1; stderr:\n%s", err, log)
	}
	want := `MCP server failed to start: SECURITY ERROR: Gateway URL "ws://203.0.113.7:18789" uses plaintext ws:// to a non-loopback address.`
	if !strings.Contains(log, want) || !strings.Contains(log, "OPENCLAW_ALLOW_INSECURE_PRIVATE_WS=1") {
		t.Fatalf("stderr lacks %q and the break-glass:\n%s", want, log)
	}
	if strings.Contains(log, "policy active") || strings.Contains(log, "gateway connect") {
		t.Errorf("serve started before refusing the URL:\n%s", log)
	}
}

// The gateway admin commands send the token too: the same refusal.
func TestGatewayCommandsRefusePlaintextRemote(t *testing.T) {
	t.Parallel()
	bin, err := builtBin()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "gateway", "seed", "demo", "--url", "ws://203.0.113.7:18789", "--token", "t").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `SECURITY ERROR: Gateway URL "ws://203.0.113.7:18789" uses plaintext ws://`) {
		t.Fatalf("gateway seed to a public ws:// address: %v\n%s", err, out)
	}
}

// A call made while the Gateway is down, after serve had connected, is
// answered at once with OpenClaw's "gateway not connected" (before: it
// waited up to the 3-minute request timeout for the Gateway to return).
func TestServeGatewayOutageFailsFast(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	gw := gatewaytest.StartSeeded(t)
	c := startServeChild(t, ctx, "--url", gw.URL, "--token", gw.Token, "--audit-log", "-")
	c.initialize(t, ctx)
	c.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"conversations_list","arguments":{}}}`)
	if text, isErr := resultText(c.answer(t, ctx, 2)); isErr {
		t.Fatalf("conversations_list with the Gateway up: %s", text)
	}
	if err := gw.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Wait until serve noticed the outage: its log says so.
	for !strings.Contains(c.stderr.String(), "gateway connection lost") {
		select {
		case <-ctx.Done():
			t.Fatalf("serve never noticed the Gateway stop; stderr:\n%s", c.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	c.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"conversations_list","arguments":{}}}`)
	if text, isErr := resultText(c.answer(t, ctx, 3)); !isErr || !strings.HasPrefix(text, "gateway not connected") {
		t.Fatalf("conversations_list with the Gateway down: %q (isError %v), want \"gateway not connected…\"", text, isErr)
	}
	_ = c.stdin.Close()
	c.rest(t, ctx)
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("exit after stdin EOF: %v; stderr:\n%s", err, c.stderr.String())
	}
}

// A Gateway that refuses the connection ends serve with exit 1, a hint
// that names this binary's own means, no ERROR record for the shutdown,
// and no run file left behind for `openclaw policy reload` to trip on. A
// token file other users can read is warned about.
func TestServeFatalGatewayStartup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "ws://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("t\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startServeChild(t, ctx, "--url", url, "--token-file", tokenFile, "--audit-log", "-")
	c.rest(t, ctx) // stdin stays open: the Gateway failure alone ends serve
	_ = c.cmd.Wait()
	log := c.stderr.String()
	if code := c.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, log)
	}
	for _, want := range []string{
		"Warning: --token-file " + tokenFile + " is readable by other users (mode 0644)",
		"MCP server failed to start: connecting to " + url + ": dial tcp",
		"Check that an OpenClaw Gateway is running at " + url,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("stderr lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "gateway status") || strings.Contains(log, "level=ERROR") {
		t.Errorf("stderr names a command this binary lacks or logs an error for the shutdown:\n%s", log)
	}
	if runs, _ := filepath.Glob(filepath.Join(c.state, "openclaw-go", "run", "*.json")); len(runs) != 0 {
		t.Errorf("run files left after exit: %v", runs)
	}
}

// A request whose id is null gets an Invalid Request answer with id null
// (OpenClaw's own answer is not recorded; the Node SDK under it answers
// nothing, docs/RATIONALE.md), a line with trailing data a parse error,
// and serve keeps answering.
func TestServeNullIDAndTrailingData(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	url, _ := silentGateway(t)
	c := startServeChild(t, ctx, "--url", url, "--token", "t", "--audit-log", "-")
	c.initialize(t, ctx)
	c.send(t, `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`)
	c.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"},`)
	c.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	var errs []string
	for {
		m := <-c.lines
		if m == nil {
			t.Fatalf("stdout ended; stderr:\n%s", c.stderr.String())
		}
		if id, ok := m["id"]; ok && id == nil {
			e, _ := m["error"].(map[string]any)
			errs = append(errs, fmt.Sprint(e["code"], " ", e["message"]))
			continue
		}
		if m["id"] == float64(2) {
			t.Fatalf("the line with trailing data was answered: %v", m)
		}
		if m["id"] == float64(3) {
			break
		}
	}
	if len(errs) != 2 || !strings.HasPrefix(errs[0], `-32600 Invalid Request: the id of request "tools/list" is null`) || !strings.HasPrefix(errs[1], "-32700 Parse error") {
		t.Errorf("null-id answers %q, want -32600 for the null id, then -32700 for the trailing comma", errs)
	}
}
