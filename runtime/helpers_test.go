package runtime

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/policies"
)

// allowAll is a native before_tool_call policy that allows every call and
// records what it saw.
type allowAll struct {
	mu    sync.Mutex
	calls []policies.ToolCall
}

func (a *allowAll) BeforeToolCall(_ context.Context, call *policies.ToolCall) policies.Outcome {
	a.mu.Lock()
	a.calls = append(a.calls, *call)
	a.mu.Unlock()
	return policies.Outcome{Decision: policies.Allow, Arguments: call.Arguments}
}

func (a *allowAll) seen() []policies.ToolCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]policies.ToolCall(nil), a.calls...)
}

// fixedPolicy answers every call with one decision.
type fixedPolicy policies.Outcome

func (f fixedPolicy) BeforeToolCall(_ context.Context, call *policies.ToolCall) policies.Outcome {
	d := policies.Outcome(f)
	if d.Arguments == nil {
		d.Arguments = call.Arguments
	}
	return d
}

// fixedApproval answers every decide_approval with one outcome and counts.
type fixedApproval struct {
	out policies.ApprovalOutcome
	mu  sync.Mutex
	req []*policies.ApprovalRequest
}

func (f *fixedApproval) DecideApproval(_ context.Context, req *policies.ApprovalRequest) policies.ApprovalOutcome {
	f.mu.Lock()
	f.req = append(f.req, req)
	f.mu.Unlock()
	return f.out
}

// nativeNamer is a native double of the sanitize_tool_names hook: a
// simplified form of OpenClaw's rules (§11.6), enough for the runtime's
// tests and benchmarks (the real module is tested against OpenClaw's names in
// policies/builtin).
type nativeNamer struct{}

func clean(s, fallback, prefix string) string {
	s = strings.TrimSpace(s)
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	s = string(b)
	if s == "" {
		s = fallback
	}
	if c := s[0]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
		s = prefix + s
	}
	return s
}

func (nativeNamer) SanitizeToolNames(_ context.Context, req *policies.SanitizeRequest) (*policies.SanitizeResult, error) {
	taken := map[string]bool{}
	for _, r := range req.Reserved {
		taken[strings.ToLower(r)] = true
	}
	safeTaken := map[string]bool{}
	res := &policies.SanitizeResult{Servers: make([]policies.SanitizedServer, len(req.Servers))}
	for i, sv := range req.Servers {
		base := clean(sv.Name, "mcp", "mcp-")
		if len(base) > 30 {
			base = base[:30]
		}
		safe := base
		for n := 2; safeTaken[strings.ToLower(safe)]; n++ {
			sfx := "-" + strconv.Itoa(n)
			safe = base[:min(len(base), 30-len(sfx))] + sfx
		}
		safeTaken[strings.ToLower(safe)] = true
		out := policies.SanitizedServer{Safe: safe, Tools: make([]policies.ToolName, len(sv.Tools))}
		for j, t := range sv.Tools {
			if strings.TrimSpace(t) == "" {
				out.Tools[j] = policies.ToolName{Reject: "empty tool name"}
				continue
			}
			part := clean(t, "tool", "tool-")
			if max := 64 - len(safe) - 2; len(part) > max {
				part = part[:max]
			}
			name := safe + "__" + part
			for n := 2; taken[strings.ToLower(name)]; n++ {
				name = safe + "__" + part[:min(len(part), 62-len(safe)-len(strconv.Itoa(n)))] + "-" + strconv.Itoa(n)
			}
			taken[strings.ToLower(name)] = true
			out.Tools[j] = policies.ToolName{Name: name}
		}
		res.Servers[i] = out
	}
	return res, nil
}

// failingNamer is a sanitizer that always fails.
type failingNamer struct{}

func (failingNamer) SanitizeToolNames(context.Context, *policies.SanitizeRequest) (*policies.SanitizeResult, error) {
	return nil, &policies.SanitizeError{Module: "broken", Err: io.ErrUnexpectedEOF}
}

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
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Run(ctx, st)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	sv := Server{Name: name, Transport: ct}
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
		opts.Enforcer = &allowAll{}
	}
	if opts.Sanitizer == nil {
		opts.Sanitizer = nativeNamer{}
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
