package proxy

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/policies/ratelimit"
	"github.com/openclaw-go/openclaw/runtime"
)

// A call through the proxy over its rate limit is a tool error that names
// the limit and the retry, and never reaches the upstream; a second client
// (another requester) has counters of its own.
func TestProxyRateLimitedCall(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	var upCalls int
	up.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		upCalls++
		return text("echo"), nil
	})
	lim, err := ratelimit.New([]config.PolicyRateLimit{{Name: "per-client", Requests: 1, IntervalS: 30}}, ratelimit.NewMemoryStore(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := runtime.New([]runtime.Server{{Name: "up", Transport: testkit.InMemory(t, up)}}, &runtime.Options{
		Enforcer: policies.NewChain(nil, nil), Limiter: lim, Surface: policies.SurfaceProxy, Sanitizer: &policiestest.Sanitizer{}, Logger: discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sess.Close(context.Background()) }()
	if err := sess.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := New(ctx, sess, nil)
	if err != nil {
		t.Fatal(err)
	}
	connect := func(name string) *mcp.ClientSession {
		cEnd, sEnd := mcp.NewInMemoryTransports()
		ss, err := p.Server().Connect(ctx, sEnd, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ss.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil).Connect(ctx, cEnd, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	call := func(cs *mcp.ClientSession) (string, bool) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("tools/call: %v (a limited call is a tool error, not a protocol error)", err)
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	a, b := connect("agent-a"), connect("agent-b")
	if got, isErr := call(a); isErr || got != "echo" {
		t.Fatalf("first call: %q %v", got, isErr)
	}
	// The retry is the window's rest in whole seconds: 30 unless the
	// machine took over a second between the two calls.
	want := regexp.MustCompile(`^rate limit "per-client" reached: at most 1 call per 30 s; retry after ([1-9]|[12][0-9]|30) s$`)
	if got, isErr := call(a); !isErr || !want.MatchString(got) {
		t.Errorf("second call: %q (isError %v), want the tool error %s", got, isErr, want)
	}
	if got, isErr := call(b); isErr {
		t.Errorf("another client: %q, want admitted", got)
	}
	if upCalls != 2 {
		t.Errorf("upstream ran %d calls, want 2 (the limited one never reaches it)", upCalls)
	}
}
