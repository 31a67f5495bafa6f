package main

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/e2e"
)

// The test binary doubles as a small stdio MCP server (a real child
// process), so that process handling and the checker's verdicts are tested
// without the 1 GB OpenClaw install. INTEROP_TEST_SERVER selects its mode:
// "full" serves the 9 tools with the real OpenClaw's result shapes for the
// seeded Gateway, "missing" leaves permissions_respond out, "exit3" exits
// with code 3 on stdin EOF.
func TestMain(m *testing.M) {
	if mode := os.Getenv("INTEROP_TEST_SERVER"); mode != "" {
		os.Exit(testServer(mode))
	}
	os.Exit(m.Run())
}

func testServer(mode string) int {
	s := mcp.NewServer(&mcp.Implementation{Name: "openclaw", Version: "test"}, nil)
	text := func(isErr bool, t string, sc any) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t}}, IsError: isErr, StructuredContent: sc}
	}
	conv := map[string]any{"sessionKey": seededMainKey, "channel": "imessage", "to": "+15551234567"}
	answers := map[string]*mcp.CallToolResult{
		"conversations_list": text(false, "conversations: 2", map[string]any{"conversations": []any{
			conv, map[string]any{"sessionKey": seededTgKey, "channel": "telegram", "to": "12345"}}}),
		"conversation_get": text(false, "conversation "+seededMainKey, map[string]any{"conversation": conv}),
		"messages_read": text(false, "messages: 3", map[string]any{"messages": []any{
			map[string]any{"__openclaw": map[string]any{"id": "msg-1"}},
			map[string]any{"__openclaw": map[string]any{"id": "msg-attachment"}},
			map[string]any{"__openclaw": map[string]any{"id": "msg-inline-img"}}}}),
		"attachments_fetch": text(false, "attachments: 1", map[string]any{"attachments": []any{
			map[string]any{"type": "openclaw_media", "media": map[string]any{"url": "media://inbound/seeded-image.png"}}}}),
		"events_poll":           text(false, "events: 0", map[string]any{"events": []any{}, "next_cursor": 0}),
		"events_wait":           text(false, "timeout", map[string]any{"event": nil}),
		"messages_send":         text(true, "unsupported channel: imessage", nil),
		"permissions_list_open": text(false, "approvals: 0", map[string]any{"approvals": []any{}}),
		"permissions_respond":   text(true, "unknown or expired approval id", nil),
	}
	if mode == "failstart" {
		// Like OpenClaw with an unusable Gateway: initialize answered,
		// Gateway tools never answered, then exit 1 with a message.
		s.AddTool(&mcp.Tool{Name: "conversations_list", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			})
		go s.Run(context.Background(), &mcp.StdioTransport{})
		time.Sleep(500 * time.Millisecond)
		os.Stderr.WriteString("MCP server failed to start: connect ECONNREFUSED 127.0.0.1:1.\n")
		return 1
	}
	for _, name := range toolNames {
		if mode == "missing" && name == "permissions_respond" {
			continue
		}
		res := answers[name]
		s.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return res, nil })
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil && mode != "exit3" {
		return 1
	}
	if mode == "exit3" {
		return 3
	}
	return 0
}

func startTestServer(t *testing.T, mode string) *e2e.Serve {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := e2e.StartServe(ctx, e2e.ServeOptions{Command: []string{exe}, Env: []string{"INTEROP_TEST_SERVER=" + mode}})
	if err != nil {
		t.Fatalf("StartServe: %v", err)
	}
	t.Cleanup(s.Kill)
	return s
}

func statusOf(rs []checkResult) map[string]status {
	m := map[string]status{}
	for _, r := range rs {
		m[r.Name] = r.Status
	}
	return m
}

func TestRunChecks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode string
		want map[string]status
	}{
		{"full", map[string]status{
			"tools/list has the 9 tools":                                           pass,
			"tool conversations_list answers":                                      pass,
			"tool permissions_respond answers":                                     pass,
			"tool attachments_fetch answers":                                       pass,
			"conversations_list returns the seeded conversations":                  pass,
			"events_wait receives a message injected during the wait":              skip,
			"approvals from our device identity are seen by permissions_list_open": skip,
		}},
		{"missing", map[string]status{
			"tools/list has the 9 tools":       fail,
			"tool permissions_respond answers": fail,
			"tool conversations_list answers":  pass,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			s := startTestServer(t, tc.mode)
			rs := runChecks(context.Background(), s, checkOptions{WaitTimeout: 10 * time.Second})
			got := statusOf(rs)
			for name, want := range tc.want {
				if got[name] != want {
					t.Errorf("%s: %s, want %s (all: %+v)", name, got[name], want, rs)
				}
			}
		})
	}
}

func TestCloseStdinExitCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode string
		code int
	}{{"full", 0}, {"exit3", 3}} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			s := startTestServer(t, tc.mode)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			e, err := s.CloseStdin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if e.Code != tc.code || len(e.Leftover) != 0 {
				t.Errorf("exit %+v, want code %d and no leftovers", e, tc.code)
			}
			if done, _ := s.Exited(); !done {
				t.Error("Exited() = false after CloseStdin")
			}
		})
	}
}

func TestRecorderSeesHandshake(t *testing.T) {
	t.Parallel()
	s := startTestServer(t, "full")
	lines := s.Raw.Lines()
	if len(lines) < 2 || !lines[0].Out || !strings.Contains(lines[0].Text, `"initialize"`) || lines[1].Out {
		t.Fatalf("first lines %+v, want the initialize request then its response", lines)
	}
	if !strings.Contains(lines[1].Text, `"2025-06-18"`) {
		t.Errorf("initialize response %s does not carry the requested 2025-06-18", lines[1].Text)
	}
}

func TestTranscriptPairsResponses(t *testing.T) {
	t.Parallel()
	s := startTestServer(t, "full")
	steps := []step{
		{"ping", func(ctx context.Context, cs *mcp.ClientSession) error { return cs.Ping(ctx, nil) }},
		{"conversation_get", func(ctx context.Context, cs *mcp.ClientSession) error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "conversation_get", Arguments: map[string]any{}})
			return err
		}},
	}
	ex, err := transcript(context.Background(), s, steps, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(ex) != 3 {
		t.Fatalf("%d exchanges, want 3", len(ex))
	}
	for _, e := range ex {
		var req, res struct{ ID json.RawMessage }
		json.Unmarshal([]byte(e.Request), &req)
		json.Unmarshal([]byte(e.Response), &res)
		if len(req.ID) == 0 || string(req.ID) != string(res.ID) {
			t.Errorf("%s: request %s and response %s are not a pair", e.Step, e.Request, e.Response)
		}
	}
	if !strings.Contains(ex[2].Response, "conversation "+seededMainKey) {
		t.Errorf("conversation_get response %s", ex[2].Response)
	}
}

func TestQuantile(t *testing.T) {
	t.Parallel()
	ms := func(v ...int) sample {
		var s sample
		for _, x := range v {
			s = append(s, time.Duration(x)*time.Millisecond)
		}
		return s
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted input
	}
	tests := []struct {
		name   string
		s      sample
		q      float64
		wantMs int
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7},
		{"odd median", ms(5, 1, 3), 0.5, 3},
		{"even median is the lower middle", ms(4, 1, 3, 2), 0.5, 2},
		{"p99 of 100", ms(hundred...), 0.99, 99},
		{"p100", ms(hundred...), 1, 100},
	}
	for _, tc := range tests {
		if got := tc.s.Quantile(tc.q); got != time.Duration(tc.wantMs)*time.Millisecond {
			t.Errorf("%s: Quantile(%v) = %v, want %d ms", tc.name, tc.q, got, tc.wantMs)
		}
	}
	in := ms(3, 1, 2)
	in.Median()
	if !slices.Equal(in, ms(3, 1, 2)) {
		t.Error("Quantile sorted its receiver in place")
	}
}

func TestDiffJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, a, b string
		want       []difference
	}{
		{"equal", `{"a":1,"b":[1,2]}`, `{"a":1,"b":[1,2]}`, nil},
		{"whitespace only", `{"a": 1}`, `{"a":1}`, nil},
		{"value", `{"result":{"isError":true}}`, `{"result":{"isError":false}}`,
			[]difference{{"result.isError", "true", "false"}}},
		{"absent key", `{"a":1,"b":2}`, `{"a":1}`, []difference{{"b", "2", "(absent)"}}},
		{"key order", `{"result":{},"jsonrpc":"2.0"}`, `{"jsonrpc":"2.0","result":{}}`,
			[]difference{{"{order}", "result,jsonrpc", "jsonrpc,result"}}},
		{"array length", `[1,{"x":2}]`, `[1]`, []difference{{"[1]", `{"x":2}`, "(absent)"}}},
		{"type", `{"a":null}`, `{"a":{}}`, []difference{{"a", "null", "{}"}}},
		{"number text kept", `{"a":1.0}`, `{"a":1}`, []difference{{"a", "1.0", "1"}}},
	}
	for _, tc := range tests {
		got, err := diffJSON(tc.a, tc.b)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: DiffJSON = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if _, err := diffJSON(`{"a":`, `{}`); err == nil {
		t.Error("DiffJSON accepted truncated JSON")
	}
	if _, err := diffJSON(`{} {}`, `{}`); err == nil {
		t.Error("DiffJSON accepted trailing data")
	}
}

func TestCosmetic(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    difference
		want bool
	}{
		{difference{"{order}", "result,jsonrpc,id", "jsonrpc,id,result"}, true},
		{difference{"result{order}", "a,b", "b,a"}, false},
		{difference{"result.tools[3].description", `"x"`, `"y"`}, true},
		{difference{"result.tools[3].description", `"x"`, "(absent)"}, false},
		{difference{"result.tools[3].description.x", `"x"`, `"y"`}, false},
		{difference{"result.serverInfo.version", `"2026.9.6"`, `"0.1.0"`}, false},
	}
	for _, tc := range tests {
		if got := cosmetic(tc.d); got != tc.want {
			t.Errorf("Cosmetic(%+v) = %v, want %v", tc.d, got, tc.want)
		}
	}
}

func TestTable(t *testing.T) {
	t.Parallel()
	real := summary{Label: "OpenClaw", Initialize: 10 * time.Second, RSSKiB: 500000,
		ConversationsList: sample{3 * time.Millisecond}, EventsPoll: sample{300 * time.Microsecond}, ExitCodes: []int{0}}
	ours := summary{Label: "ours", Initialize: 20 * time.Millisecond, RSSKiB: 20000,
		ConversationsList: sample{2 * time.Millisecond}, EventsPoll: sample{50 * time.Microsecond}, ExitCodes: []int{0}}
	tab := table(real, ours, nil)
	for _, want := range []string{
		"| spawn → initialize result | 10000 ms | 20.0 ms | 1/500 | ≤ 1/100 | yes |",
		"| RSS after tools/list (process tree) | 512 MB | 20.5 MB | 1/25 | ≤ 30 MB | yes |",
		"| conversations_list median (n=1) | 3.00 ms | 2.00 ms | 0.67 | ≤ 1/3 | **no** |",
		"| events_poll median (n=1) | 0.30 ms | 0.05 ms | 0.17 | ≤ 1/3 | yes |",
	} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
}

func TestMeasureTestServer(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := e2e.ServeOptions{Command: []string{exe}, Env: []string{"INTEROP_TEST_SERVER=full"}}
	m, err := measure(ctx, "test", opts, measureOptions{N: 5, Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.ConversationsList) != 5 || len(m.EventsPoll) != 5 || len(m.RawConversationsList) != 5 || len(m.RawEventsPoll) != 5 {
		t.Errorf("samples %d/%d/%d/%d, want 5 each", len(m.ConversationsList), len(m.EventsPoll), len(m.RawConversationsList), len(m.RawEventsPoll))
	}
	if m.RSSKiB <= 0 || len(m.Procs) != 1 || m.Procs[0].Name == "" {
		t.Errorf("RSS %d KiB of %+v, want one named process with a positive RSS", m.RSSKiB, m.Procs)
	}
	if m.Exit.Code != 0 || m.Initialize <= 0 || m.SpawnToFirstList < m.Initialize {
		t.Errorf("exit %+v, initialize %v, spawn→first list %v", m.Exit, m.Initialize, m.SpawnToFirstList)
	}
}

func TestRawClientErrors(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, c, err := e2e.StartRaw(ctx, e2e.ServeOptions{Command: []string{exe}, Env: []string{"INTEROP_TEST_SERVER=full"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer s.Kill()
	if err := c.CallTool(ctx, "messages_send", map[string]any{}); err == nil || !strings.Contains(err.Error(), "unsupported channel") {
		t.Errorf("isError result: err %v, want the result text", err)
	}
	line, err := c.Call(ctx, "nope/method", nil)
	if err != nil || !strings.Contains(string(line), `"error"`) {
		t.Errorf("nope/method: %s, %v; want a JSON-RPC error line", line, err)
	}
	e, err := s.CloseStdin(ctx)
	if err != nil || e.Code != 0 {
		t.Errorf("exit %+v, %v", e, err)
	}
	if _, err := c.Call(ctx, "ping", nil); err == nil {
		t.Error("Call after the server exited succeeded")
	}
}

func TestRunFailcase(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mode    string
		timeout time.Duration
		want    e2e.Failcase // Stderr: a substring; ExitAfter ignored
	}{
		{"failstart", 30 * time.Second, e2e.Failcase{InitializeAnswered: true, Exited: true, Code: 1, Stderr: "MCP server failed to start"}},
		// A server that keeps running: the timeout is how long it has to
		// answer both requests before it is killed (seconds: loaded CI).
		{"full", 5 * time.Second, e2e.Failcase{InitializeAnswered: true, ListAnswered: true}},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			fc, err := e2e.RunFailcase(ctx, e2e.ServeOptions{Command: []string{exe}, Env: []string{"INTEROP_TEST_SERVER=" + tc.mode}}, tc.timeout)
			if err != nil {
				t.Fatal(err)
			}
			if fc.InitializeAnswered != tc.want.InitializeAnswered || fc.ListAnswered != tc.want.ListAnswered ||
				fc.Exited != tc.want.Exited || (tc.want.Exited && fc.Code != tc.want.Code) || !strings.Contains(fc.Stderr, tc.want.Stderr) {
				t.Errorf("got %+v, want %+v", *fc, tc.want)
			}
		})
	}
}

// BenchmarkRawCallGoSDKServer times one tools/call round trip, through a
// RawClient, to a go-sdk server whose handler returns a canned result at
// once: the floor under events_poll of any go-sdk-based `mcp serve`.
func BenchmarkRawCallGoSDKServer(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	s, c, err := e2e.StartRaw(ctx, e2e.ServeOptions{Command: []string{exe}, Env: []string{"INTEROP_TEST_SERVER=full"}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	defer s.Kill()
	b.ResetTimer()
	for b.Loop() {
		if err := c.CallTool(ctx, "events_poll", map[string]any{}); err != nil {
			b.Fatal(err)
		}
	}
}
