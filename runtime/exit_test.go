package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/transport"
)

// childServerEnv makes the test binary a stdio MCP server (TestMain):
// "exiting" serves a tool "ping" and a tool "die" that exits the process
// (status 3) in the middle of its call.
const childServerEnv = "OPENCLAW_RUNTIME_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childServerEnv) == "exiting" {
		srv := newServer("exiting", nil)
		echoTool(srv, "ping")
		srv.AddTool(&mcp.Tool{Name: "die", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				os.Exit(3)
				return nil, nil
			})
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// A stdio server that exits in the middle of a call is disconnected as
// soon as the call returns: Status and Diagnostics say so with a "session"
// diagnostic (not "connect"), and its tools leave the catalog.
func TestStdioServerExitMidCallIsStatusAtOnce(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	evs := newEvents()
	sv := Server{Name: "child", Entry: transport.ServerEntry{
		Command: exe, Env: map[string]any{childServerEnv: "exiting"},
		RequestTimeoutMs: 30000, ConnectionTimeoutMs: 30000,
	}}
	s := open(t, []Server{sv}, &Options{OnEvent: evs.on})
	ctx := context.Background()
	if res, err := s.CallTool(ctx, "child__ping", []byte(`{}`)); err != nil || resultText(t, res) != "ping: {}" {
		t.Fatalf("ping: %v %v", res, err)
	}
	_, err = s.CallTool(ctx, "child__die", []byte(`{}`))
	var se *ServerError
	if !errors.As(err, &se) || se.Op != "tools/call" {
		t.Fatalf("die: %v, want a tools/call *ServerError", err)
	}
	st := statusOf(t, s, "child")
	if st.Connected || !errors.As(st.Err, &se) || se.Op != "session" || !strings.Contains(se.Error(), "the connection ended") {
		t.Errorf("status right after the call = %+v, want disconnected with a session diagnostic", st)
	}
	if d := s.Diagnostics(); len(d) != 1 || !errors.As(d[0], &se) || se.Op != "session" {
		t.Errorf("diagnostics %v, want the session's end", d)
	}
	if ev := evs.wait(t, EventFailed, "child"); !errors.As(ev.Err, &se) || se.Op != "session" {
		t.Errorf("EventFailed %v, want the session's end", ev.Err)
	}
	if names := toolNames(t, s); len(names) != 0 {
		t.Errorf("catalog %v, want the exited server's tools gone", names)
	}
}
