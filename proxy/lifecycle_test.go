package proxy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/runtime"
)

func listedNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	return out
}

// When a server goes down its tools leave (notifications/tools/list_changed
// at once, not on the client's next request), and a client that still
// calls one gets a tool error saying the server is unavailable, since when
// and why, not a protocol error "unknown tool".
func TestDownServerLeavesAndSaysUnavailable(t *testing.T) {
	t.Parallel()
	up := mcp.NewServer(&mcp.Implementation{Name: "w", Version: "1"}, nil)
	up.AddTool(&mcp.Tool{Name: "ping", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("pong"), nil
	})
	rt := &testkit.Restartable{T: t, Server: up}
	st := newStack(t, []runtime.Server{{Name: "w", Transport: rt}}, asker(), "")
	d := &downstream{notify: make(chan string, 64)}
	cs := st.connect(t, "client", d.clientOptions(false, false))
	if got := listedNames(t, cs); len(got) != 1 || got[0] != "w__ping" {
		t.Fatalf("tools = %v", got)
	}
	rt.Kill()
	d.wait(t, "tools")
	if got := listedNames(t, cs); len(got) != 0 {
		t.Errorf("tools while the server is down = %v, want none", got)
	}
	msg, isErr := toolText(t, cs, "w__ping", map[string]any{})
	if !isErr || !strings.Contains(msg, `MCP server "w" is unavailable since `) || !strings.Contains(msg, "the connection ended") {
		t.Errorf("call while down = %q (isError %v), want a tool error saying w is unavailable and why", msg, isErr)
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "w__nope"}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("call of a name never served = %v, want unknown tool", err)
	}

	// The server comes back: the runtime's background retry connects it
	// (runtime.ListRetryDelay after it died) and the idle client is told.
	for len(d.notify) > 0 { // only the notification of the return counts
		<-d.notify
	}
	rt.Up()
	d.wait(t, "tools")
	if got := listedNames(t, cs); len(got) != 1 || got[0] != "w__ping" {
		t.Errorf("tools after the server came back = %v", got)
	}
	if msg, isErr := toolText(t, cs, "w__ping", map[string]any{}); isErr || msg != "pong" {
		t.Errorf("call after the server came back = %q (isError %v)", msg, isErr)
	}
}
