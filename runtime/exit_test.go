package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// childServerEnv makes the test binary a stdio MCP server (TestMain):
// "exiting" serves a tool "ping" and a tool "die" that exits the process
// (status 3) in the middle of its call.
const childServerEnv = "OPENCLAW_RUNTIME_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childServerEnv) == "stubborn" {
		// A server whose tool never answers and which does not exit when
		// its stdin closes: only SIGTERM after the grace ends it.
		srv := newServer("stubborn", nil)
		echoTool(srv, "ping")
		srv.AddTool(&mcp.Tool{Name: "hang", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				fmt.Fprintln(os.Stderr, "hang: started")
				select {}
			})
		srv.AddResource(&mcp.Resource{URI: "hang://forever", Name: "forever"},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				fmt.Fprintln(os.Stderr, "hang: started")
				select {}
			})
		_ = srv.Run(context.Background(), &mcp.StdioTransport{})
		select {}
	}
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
	sv := Server{Name: "child", Entry: config.ServerEntry{
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

// Session.Close fails the calls in flight at once with ErrClosed, also on
// a stdio server that takes its whole grace to stop: the calls do not wait
// for the transport to close. A utility tool's request (resources/read)
// takes the same path as a server tool's tools/call.
func TestCloseFailsStdioCallsAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ tool, args string }{
		{"stubborn__hang", `{}`},
		{"stubborn__resources_read", `{"uri":"hang://forever"}`},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			t.Parallel()
			closeMidCall(t, tc.tool, tc.args)
		})
	}
}

// closeMidCall calls tool on the stubborn stdio server and closes the
// Session once the server has the request.
func closeMidCall(t *testing.T, tool, args string) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	started := make(chan struct{}, 1)
	logger := slog.New(lineHandler(func(msg string, attrs map[string]string) {
		if msg == "server stderr" && attrs["line"] == "hang: started" {
			select {
			case started <- struct{}{}:
			default:
			}
		}
	}))
	sv := Server{Name: "stubborn", Entry: config.ServerEntry{
		Command: exe, Env: map[string]any{childServerEnv: "stubborn"},
		RequestTimeoutMs: 120000, ConnectionTimeoutMs: 30000,
	}}
	s, err := New([]Server{sv}, &Options{Enforcer: &policiestest.Enforcer{}, Sanitizer: &policiestest.Sanitizer{}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	called := make(chan error, 1)
	go func() {
		_, err := s.CallTool(ctx, tool, []byte(args))
		called <- err
	}()
	hang := time.After(60 * time.Second) // a hang guard, not a timing assertion
	select {
	case <-started:
	case <-hang:
		t.Fatal("the call never reached the server")
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close(context.Background()) }()
	select {
	case err := <-called:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("call in flight at Close: %v, want ErrClosed", err)
		}
	case <-closed:
		t.Fatal("Close returned before the call in flight failed: the call waited for the transport")
	case <-hang:
		t.Fatal("the call in flight never failed")
	}
	<-closed
}

// lineHandler is a slog.Handler that hands each record's message and
// string attributes to fn.
type lineHandler func(msg string, attrs map[string]string)

func (h lineHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h lineHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	h(r.Message, attrs)
	return nil
}
func (h lineHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h lineHandler) WithGroup(string) slog.Handler      { return h }
