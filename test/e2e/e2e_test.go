// Package e2e_test drives the built `openclaw` binary with real MCP clients
// (the go-sdk client and the official Node SDK client) against a local
// Gateway child process, and checks the MCP surface against the real
// OpenClaw 2026.9.6 captures in testdata/openclaw.
package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/internal/e2e"
	"github.com/openclaw-go/openclaw/internal/testkit"
)

var bin string // the openclaw binary built for this test run

const fixtures = "../../testdata/openclaw"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "openclaw-e2e-bin-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "openclaw")
	// Keep every child's audit log and device identity inside the test folder.
	os.Setenv("OPENCLAW_STATE_DIR", filepath.Join(dir, "state"))
	build := exec.Command("go", "build", "-o", bin, "../../cmd/openclaw")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building openclaw:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// setup starts a seeded local Gateway and returns it with a token file.
func setup(t *testing.T) (context.Context, *e2e.Gateway, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	dir := t.TempDir()
	gw, err := e2e.StartGateway(ctx, bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Stop)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(gw.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return ctx, gw, tokenFile
}

func serve(t *testing.T, ctx context.Context, gw *e2e.Gateway, tokenFile string, args ...string) *e2e.Serve {
	t.Helper()
	s, err := gw.StartServe(ctx, tokenFile, "go-sdk-e2e", args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustCall(t *testing.T, ctx context.Context, s *e2e.Serve, tool string, args map[string]any) *e2e.Result {
	t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	r, err := s.Call(ctx, tool, args)
	if err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", tool, err, s.Stderr())
	}
	return r
}

func decode(t *testing.T, raw json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
}

// TestGoSDKClientAllTools drives all nine tools with the go-sdk client.
func TestGoSDKClientAllTools(t *testing.T) {
	t.Parallel()
	ctx, gw, tokenFile := setup(t)
	s := serve(t, ctx, gw, tokenFile)
	key := "agent:main:main"

	r := mustCall(t, ctx, s, "conversations_list", nil)
	var convs struct {
		Conversations []struct{ SessionKey, Channel, To string }
	}
	decode(t, r.Structured, &convs)
	if !strings.HasPrefix(r.Text, "conversations: 2\n\n") || len(convs.Conversations) != 2 {
		t.Fatalf("conversations_list: %q", r.Text)
	}
	for _, c := range convs.Conversations {
		if c.SessionKey == "agent:main:noroute" {
			t.Fatal("an unrouted session was listed")
		}
	}
	if r := mustCall(t, ctx, s, "conversations_list", map[string]any{"channel": "TELEGRAM"}); !strings.HasPrefix(r.Text, "conversations: 1\n") {
		t.Fatalf("channel filter: %q", r.Text)
	}
	if r := mustCall(t, ctx, s, "conversation_get", map[string]any{"session_key": key}); r.IsError || r.Text != "conversation "+key {
		t.Fatalf("conversation_get: %+v", r)
	}
	if r := mustCall(t, ctx, s, "conversation_get", map[string]any{"session_key": "agent:main:noroute"}); !r.IsError || r.Text != "conversation not found: agent:main:noroute" {
		t.Fatalf("conversation_get of an unrouted session: %+v", r)
	}
	if r := mustCall(t, ctx, s, "messages_read", map[string]any{"session_key": key}); !strings.HasPrefix(r.Text, "messages: 3\n\n") {
		t.Fatalf("messages_read: %q", r.Text)
	}
	if r := mustCall(t, ctx, s, "messages_read", map[string]any{"session_key": "agent:nobody"}); r.IsError || !strings.HasPrefix(r.Text, "messages: 0") {
		t.Fatalf("messages_read of an unknown key: %+v", r)
	}
	r = mustCall(t, ctx, s, "attachments_fetch", map[string]any{"session_key": key, "message_id": "msg-attachment"})
	if r.Text != "attachments: 1" || !strings.Contains(string(r.Structured), `"openclaw_media"`) {
		t.Fatalf("attachments_fetch: %q %s", r.Text, r.Structured)
	}
	if r := mustCall(t, ctx, s, "attachments_fetch", map[string]any{"session_key": key, "message_id": "nope"}); !r.IsError || r.Text != "message not found: nope" {
		t.Fatalf("attachments_fetch of a missing message: %+v", r)
	}

	// A live user message released by the Gateway during events_wait.
	poll := mustCall(t, ctx, s, "events_poll", nil)
	var pc struct {
		NextCursor int64 `json:"next_cursor"`
	}
	decode(t, poll.Structured, &pc)
	injected := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		injected <- gw.Inject(ctx, key, "user", "live from the gateway", false)
	}()
	r = mustCall(t, ctx, s, "events_wait", map[string]any{"after_cursor": pc.NextCursor, "session_key": key, "timeout_ms": 20000})
	if err := <-injected; err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Event struct {
			Cursor int64  `json:"cursor"`
			Type   string `json:"type"`
		} `json:"event"`
	}
	decode(t, r.Structured, &ev)
	if r.Text != fmt.Sprintf("event %d", ev.Event.Cursor) || ev.Event.Type != "message" || !strings.Contains(string(r.Structured), "live from the gateway") {
		t.Fatalf("events_wait: %q %s", r.Text, r.Structured)
	}
	if r := mustCall(t, ctx, s, "events_wait", map[string]any{"after_cursor": ev.Event.Cursor, "timeout_ms": 50}); r.Text != "timeout" {
		t.Fatalf("events_wait without news: %q", r.Text)
	}

	if r := mustCall(t, ctx, s, "messages_send", map[string]any{"session_key": key, "text": "reply"}); r.IsError || r.Text != "sent" {
		t.Fatalf("messages_send: %+v", r)
	}
	if r := mustCall(t, ctx, s, "messages_send", map[string]any{"session_key": "agent:main:noroute", "text": "x"}); !r.IsError || r.Text != "Conversation not found for session agent:main:noroute" {
		t.Fatalf("messages_send without route: %+v", r)
	}

	if _, err := gw.RaiseExecApproval(ctx, "make deploy"); err != nil {
		t.Fatal(err)
	}
	var open struct {
		Approvals []struct{ Kind, ID string }
	}
	for deadline := time.Now().Add(10 * time.Second); len(open.Approvals) == 0 && time.Now().Before(deadline); {
		decode(t, mustCall(t, ctx, s, "permissions_list_open", nil).Structured, &open)
		if len(open.Approvals) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if len(open.Approvals) != 1 || open.Approvals[0].Kind != "exec" {
		t.Fatalf("permissions_list_open: %+v", open)
	}
	r = mustCall(t, ctx, s, "permissions_respond", map[string]any{"kind": "exec", "id": open.Approvals[0].ID, "decision": "allow-once"})
	if r.IsError || r.Text != "approval resolved" || string(r.Structured) != `{"result":{"ok":true}}` {
		t.Fatalf("permissions_respond: %+v %s", r, r.Structured)
	}
	if r := mustCall(t, ctx, s, "permissions_respond", map[string]any{"kind": "exec", "id": open.Approvals[0].ID, "decision": "deny"}); !r.IsError || r.Text != "unknown or expired approval id" {
		t.Fatalf("permissions_respond twice: %+v", r)
	}

	// Bad input is answered like OpenClaw answers it, and the server keeps serving.
	if r := mustCall(t, ctx, s, "nope_tool", nil); !r.IsError || r.Text != "MCP error -32602: Tool nope_tool not found" {
		t.Fatalf("unknown tool: %+v", r)
	}
	if r := mustCall(t, ctx, s, "events_poll", map[string]any{"limit": 999}); !r.IsError || r.Text != "MCP error -32602: Input validation error: Invalid arguments for tool events_poll: Too big: expected number to be <=200 at limit" {
		t.Fatalf("bad arguments: %+v", r)
	}
	if r := mustCall(t, ctx, s, "conversation_get", map[string]any{"session_key": 42}); !r.IsError || !strings.Contains(r.Text, "Invalid arguments for tool conversation_get") {
		t.Fatalf("wrong argument type: %+v", r)
	}
	if r := mustCall(t, ctx, s, "events_poll", nil); r.IsError {
		t.Fatalf("server did not keep serving: %+v", r)
	}
}

// rawServe runs the binary with raw JSON-RPC lines on stdin and returns the
// responses by id.
func rawServe(t *testing.T, ctx context.Context, args []string, lines ...string) map[float64]map[string]any {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, append([]string{"mcp", "serve"}, args...)...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := map[float64]map[string]any{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for _, l := range lines {
		if _, err := io.WriteString(stdin, l+"\n"); err != nil {
			t.Fatal(err)
		}
		var id float64
		if err := json.Unmarshal([]byte(l), &struct{ ID *float64 }{&id}); err != nil || id == 0 {
			continue // a notification: no answer
		}
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("stdout carries a non-JSON line %q (stdout is for MCP only)", sc.Text())
			}
			if got, ok := m["id"].(float64); ok && got == id {
				out[id] = m
				break
			}
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve exit: %v\nstderr:\n%s", err, stderr.String())
	}
	return out
}

func fixture(t *testing.T, name string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGoldenInitializeAndToolsList compares the binary's initialize and
// tools/list answers with the real OpenClaw 2026.9.6 captures, for every
// field but the server version and the tool descriptions (ours are our own
// words).
func TestGoldenInitializeAndToolsList(t *testing.T) {
	t.Parallel()
	ctx, gw, tokenFile := setup(t)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"golden","version":"1"}}}`
	for _, tc := range []struct{ mode, fixture string }{
		{"auto", "empty-gateway/initialize.json"},
		{"off", "gap/initialize-claude-off.json"},
	} {
		got := rawServe(t, ctx, []string{"--url", gw.URL, "--token-file", tokenFile, "--claude-channel-mode", tc.mode},
			init, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":3,"method":"ping"}`,
			`{"jsonrpc":"2.0","id":4,"method":"resources/list"}`)
		want := fixture(t, tc.fixture)["result"].(map[string]any)
		res := got[1]["result"].(map[string]any)
		res["serverInfo"].(map[string]any)["version"] = want["serverInfo"].(map[string]any)["version"]
		if !reflect.DeepEqual(res, want) {
			t.Errorf("mode %s: initialize result\n got %v\nwant %v", tc.mode, res, want)
		}
		if tc.mode != "auto" {
			continue
		}
		wantTools := fixture(t, "empty-gateway/tools-list.json")["result"].(map[string]any)["tools"].([]any)
		gotTools := got[2]["result"].(map[string]any)["tools"].([]any)
		if len(gotTools) != len(wantTools) {
			t.Fatalf("tools/list has %d tools, want %d", len(gotTools), len(wantTools))
		}
		for i := range wantTools {
			g, w := gotTools[i].(map[string]any), wantTools[i].(map[string]any)
			if d, _ := g["description"].(string); d == "" {
				t.Errorf("tool %v has no description", g["name"])
			}
			g["description"], w["description"] = "", ""
			if !reflect.DeepEqual(g, w) {
				t.Errorf("tool %d\n got %v\nwant %v", i, g, w)
			}
		}
		if !reflect.DeepEqual(got[3]["result"], fixture(t, "empty-gateway/ping.json")["result"]) {
			t.Errorf("ping: %v", got[3])
		}
		if !reflect.DeepEqual(got[4]["error"], fixture(t, "empty-gateway/resources-list.json")["error"]) {
			t.Errorf("resources/list: %v", got[4])
		}
	}
}

// TestNodeSDKClient runs the official TypeScript SDK client through all
// nine tools (test/e2e/node/client.mjs).
func TestNodeSDKClient(t *testing.T) {
	t.Parallel()
	testkit.Node(t)
	testkit.Peer(t, testkit.NodeSDK)
	peers := testkit.PeersDir()
	ctx, gw, tokenFile := setup(t)
	cmd := exec.CommandContext(ctx, "node", "node/client.mjs")
	cmd.Env = append(os.Environ(), "OPENCLAW_BIN="+bin, "GATEWAY_URL="+gw.URL, "GATEWAY_TOKEN="+gw.Token,
		"TOKEN_FILE="+tokenFile, "PEERS_DIR="+peers)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client: %v\n%s", err, stderr.String())
	}
	var got struct {
		Initialize struct {
			ServerInfo   struct{ Name string }
			Capabilities map[string]any
		}
		Tools []string
		Calls map[string]struct {
			Text       string
			IsError    bool
			Structured json.RawMessage
		}
		Notifications []struct {
			Method string
			Params struct {
				Content string
				Meta    map[string]string
			}
		}
	}
	decode(t, out, &got)
	if got.Initialize.ServerInfo.Name != "openclaw" || got.Initialize.Capabilities["experimental"] == nil || len(got.Tools) != 9 {
		t.Fatalf("initialize/tools: %+v", got)
	}
	want := map[string]func(text string, isErr bool) bool{
		"conversations_list":    func(s string, e bool) bool { return !e && strings.HasPrefix(s, "conversations: 2") },
		"conversation_get":      func(s string, e bool) bool { return !e && s == "conversation agent:main:main" },
		"messages_read":         func(s string, e bool) bool { return !e && strings.HasPrefix(s, "messages: 3") },
		"attachments_fetch":     func(s string, e bool) bool { return !e && s == "attachments: 1" },
		"events_poll":           func(s string, e bool) bool { return !e && strings.HasPrefix(s, "events: ") },
		"events_wait":           func(s string, e bool) bool { return !e && strings.HasPrefix(s, "event ") },
		"messages_send":         func(s string, e bool) bool { return !e && s == "sent" },
		"permissions_list_open": func(s string, e bool) bool { return !e && s == "approvals: 1" },
		"permissions_respond":   func(s string, e bool) bool { return !e && s == "approval resolved" },
		"bad_args": func(s string, e bool) bool {
			return e && strings.Contains(s, "Too big: expected number to be <=200 at limit")
		},
		"unknown_tool": func(s string, e bool) bool { return e && s == "MCP error -32602: Tool nope_tool not found" },
	}
	for name, ok := range want {
		c, found := got.Calls[name]
		if !found || !ok(c.Text, c.IsError) {
			t.Errorf("%s: got %+v", name, c)
		}
	}
	var channel int
	for _, n := range got.Notifications {
		if n.Method == "notifications/claude/channel" && n.Params.Content == "hello from node" && n.Params.Meta["session_key"] == "agent:main:main" {
			channel++
		}
	}
	if channel != 1 {
		t.Errorf("want one notifications/claude/channel for the injected user message, got %+v", got.Notifications)
	}
}

// TestDemo runs `make demo`'s program against the built binary: the
// README's first command must keep working.
func TestDemo(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the demo spawns a Gateway and a server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "../../examples/demo", "-bin", bin)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "demo OK") {
		t.Fatalf("demo failed: %v\n%s", err, out)
	}
	for _, want := range []string{"conversations: 2", "woke after", `blocked by policy "rules"`, "exited with code 0"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo transcript lacks %q", want)
		}
	}
}
