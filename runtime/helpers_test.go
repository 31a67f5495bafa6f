package runtime

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// echoTool adds a raw-schema tool that answers "<name>: <arguments>".
func echoTool(s *mcp.Server, name string) {
	s.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult(name + ": " + string(req.Params.Arguments)), nil
		})
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// resultText returns the text of a single-text-content result.
func resultText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res == nil || len(res.Content) != 1 {
		t.Fatalf("result %+v: want one content", res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T: want text", res.Content[0])
	}
	return tc.Text
}

// inProcess starts srv on an in-memory transport for the test's lifetime
// and returns a Server whose Transport is the client end. Its requests,
// tools/list included, may take 30 s (OpenClaw's 1500 ms list bound lost
// in-process servers on a loaded machine); tests of a timeout set their own.
func inProcess(t testing.TB, name string, srv *mcp.Server) Server {
	t.Helper()
	sv := Server{Name: name, Transport: testkit.InMemory(t, srv)}
	sv.Entry.RequestTimeoutMs = 30000
	return sv
}

func newServer(name string, opts *mcp.ServerOptions) *mcp.Server {
	return mcp.NewServer(&mcp.Implementation{Name: name, Version: "test"}, opts)
}

// events collects session events on a channel.
type events struct {
	ch chan Event
}

func newEvents() *events { return &events{ch: make(chan Event, 256)} }

func (e *events) on(ev Event) {
	select {
	case e.ch <- ev:
	default:
	}
}

// wait returns the next event of kind for server, failing the test after a
// generous deadline (a hang, not a timing assertion).
func (e *events) wait(t *testing.T, kind EventKind, server string) Event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-e.ch:
			if ev.Kind == kind && ev.Server == server {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s event for %q", kind, server)
		}
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// open builds and connects a session, closing it at the end of the test.
func open(t testing.TB, servers []Server, opts *Options) *Session {
	t.Helper()
	if opts.Enforcer == nil {
		opts.Enforcer = &policiestest.Enforcer{}
	}
	if opts.Sanitizer == nil {
		opts.Sanitizer = &policiestest.Sanitizer{}
	}
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	s, err := New(servers, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func toolNames(t testing.TB, s *Session) []string {
	t.Helper()
	tools, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range tools {
		out = append(out, tl.Name)
	}
	return out
}
