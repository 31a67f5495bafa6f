package proxy

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/runtime"
)

// recorder is a before_tool_call module "recorder" that blocks tools whose
// raw name is "reset" (its Calls are what it was asked).
func recorder() *policiestest.BeforeToolCallHook {
	return &policiestest.BeforeToolCallHook{Module: "recorder",
		Decide: func(_ context.Context, call *policies.ToolCall) (policies.Verdict, error) {
			if call.Tool.RawName == "reset" {
				return policies.Verdict{Decision: policies.Block, Reason: "resets are disabled"}, nil
			}
			return policies.Verdict{Decision: policies.Allow}, nil
		}}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func TestProxyEndToEnd(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Upstream: an in-process MCP server behind the runtime.
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}}}`)
	up.AddTool(&mcp.Tool{Name: "echo", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Message string }
		_ = json.Unmarshal(req.Params.Arguments, &a)
		return text("echo: " + a.Message), nil
	})
	up.AddTool(&mcp.Tool{Name: "reset", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("reset done"), nil
	})
	upClient := testkit.InMemory(t, up)

	rec := recorder()
	changed := make(chan struct{}, 8)
	sess, err := runtime.New([]runtime.Server{{Name: "up", Transport: upClient}}, &runtime.Options{
		Enforcer:  policies.NewChain([]policies.ChainEntry{{Hook: rec}}, nil),
		Surface:   policies.SurfaceProxy,
		Sanitizer: &policiestest.Sanitizer{},
		Caller:    policies.Caller{Name: "session-caller"},
		OnEvent: func(ev runtime.Event) {
			if ev.Kind == runtime.EventToolsChanged {
				changed <- struct{}{}
			}
		},
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

	// Downstream: a client of the proxy.
	relayed := make(chan struct{}, 8)
	client := mcp.NewClient(&mcp.Implementation{Name: "unit-client", Version: "1.2"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { relayed <- struct{}{} },
	})
	cEnd, sEnd := mcp.NewInMemoryTransports()
	ss, err := p.Server().Connect(ctx, sEnd, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := client.Connect(ctx, cEnd, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	listNames := func() []string {
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		return names
	}
	if got, want := listNames(), []string{"up__echo", "up__reset"}; !slices.Equal(got, want) {
		t.Fatalf("tools/list = %v, want %v", got, want)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"message": "hi"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "echo: hi" {
		t.Fatalf("up__echo = %+v, %v; want echo: hi", res, err)
	}
	calls := rec.Calls()
	if got := calls[len(calls)-1]; got.Surface != policies.SurfaceProxy || got.Caller != (policies.Caller{Name: "unit-client", Version: "1.2"}) || got.Tool.RawName != "echo" {
		t.Fatalf("before_tool_call saw surface %q caller %+v tool %+v; want proxy, unit-client 1.2, echo", got.Surface, got.Caller, got.Tool)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__reset"})
	if err != nil {
		t.Fatalf("up__reset: %v", err)
	}
	if msg := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.Contains(msg, "resets are disabled") || !strings.Contains(msg, "recorder") {
		t.Fatalf("blocked up__reset = isError %v %q; want isError with the reason and module", res.IsError, msg)
	}

	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__missing"}); err == nil {
		t.Fatal("calling an unknown tool succeeded; want a protocol error")
	}

	// The upstream catalog changes: the next call relays it.
	wait := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("no %s", what)
		}
	}
	drain := func(ch chan struct{}) {
		for len(ch) > 0 {
			<-ch
		}
	}
	drain(relayed)
	up.AddTool(&mcp.Tool{Name: "added", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("added"), nil
	})
	wait(changed, "tools_changed event from the runtime")
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"message": "x"}}); err != nil {
		t.Fatal(err)
	}
	wait(relayed, "notifications/tools/list_changed after an added tool")
	if got, want := listNames(), []string{"up__added", "up__echo", "up__reset"}; !slices.Equal(got, want) {
		t.Fatalf("tools/list after add = %v, want %v", got, want)
	}

	drain(relayed)
	drain(changed)
	up.RemoveTools("reset")
	wait(changed, "tools_changed event after a removal")
	// tools/list itself brings the catalog up to date.
	if got, want := listNames(), []string{"up__added", "up__echo"}; !slices.Equal(got, want) {
		t.Fatalf("tools/list after removal = %v, want %v", got, want)
	}
	wait(relayed, "notifications/tools/list_changed after a removed tool")
	if got, want := p.Tools(), []string{"up__added", "up__echo"}; !slices.Equal(got, want) {
		t.Fatalf("Tools() = %v, want %v", got, want)
	}
}

func TestDefinitionSchemas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema any
		want   string
	}{
		{"object kept", map[string]any{"type": "object", "required": []any{"a"}}, `{"required":["a"],"type":"object"}`},
		{"raw object kept", json.RawMessage(`{"type":"object"}`), `{"type":"object"}`},
		{"missing patched", nil, `{"type":"object"}`},
		{"string patched", map[string]any{"type": "string"}, `{"type":"object"}`},
		{"type list patched", map[string]any{"type": []any{"object", "null"}}, `{"type":"object"}`},
		{"not an object patched", json.RawMessage(`[1,2]`), `{"type":"object"}`},
	}
	p := &Proxy{logger: discard()}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := &mcp.Tool{Name: "raw", Description: "d", InputSchema: tc.schema}
			def, err := p.definition(runtime.Tool{Name: "srv__raw", Server: "srv", Upstream: up})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(def.InputSchema)
			if string(got) != tc.want || def.Name != "srv__raw" || def.Description != "d" || up.Name != "raw" {
				t.Fatalf("definition = name %q schema %s (upstream name %q); want srv__raw %s, upstream untouched", def.Name, got, up.Name, tc.want)
			}
		})
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
