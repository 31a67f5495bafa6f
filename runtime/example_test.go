package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/runtime"
)

// noResets is a native before_tool_call module: it blocks tools whose
// original name starts with "reset". Real deployments hand the runtime the
// policy engine (Wasm modules) instead.
type noResets struct{}

func (noResets) Name() string { return "no-resets" }

func (noResets) BeforeToolCall(_ context.Context, call *policies.ToolCall) (policies.Verdict, error) {
	if strings.HasPrefix(call.Tool.RawName, "reset") {
		return policies.Verdict{Decision: policies.Block, Reason: "resets are disabled"}, nil
	}
	return policies.Verdict{Decision: policies.Allow}, nil
}

// joinNamer names each tool server__tool (names in this example are already
// valid); the built-in module builtin:sanitizer applies OpenClaw's rules.
type joinNamer struct{}

func (joinNamer) SanitizeToolNames(_ context.Context, req *policies.SanitizeRequest) (*policies.SanitizeResult, error) {
	res := &policies.SanitizeResult{}
	for _, s := range req.Servers {
		out := policies.SanitizedServer{Safe: s.Name}
		for _, t := range s.Tools {
			out.Tools = append(out.Tools, policies.ToolName{Name: s.Name + "__" + t})
		}
		res.Servers = append(res.Servers, out)
	}
	return res, nil
}

func Example() {
	ctx := context.Background()

	// An MCP server in this process; servers from openclaw.json come from
	// runtime.ServersFromConfig(doc.ResolveServers()).
	srv := mcp.NewServer(&mcp.Implementation{Name: "clock", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object"}`)
	srv.AddTool(&mcp.Tool{Name: "now", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "12:00"}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "reset", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "reset!"}}}, nil
	})
	clientEnd, serverEnd := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- srv.Run(ctx, serverEnd) }() // ends when the session closes

	s, err := runtime.New([]runtime.Server{{Name: "clock", Transport: clientEnd}}, &runtime.Options{
		Enforcer:  policies.NewChain([]policies.ChainEntry{{Hook: noResets{}}}, nil),
		Sanitizer: joinNamer{},
		Caller:    policies.Caller{Name: "example-harness"},
	})
	if err != nil {
		panic(err)
	}
	if err := s.Connect(ctx); err != nil {
		panic(err)
	}
	tools, _ := s.Tools(ctx)
	for _, t := range tools {
		fmt.Println("tool:", t.Name, "from", t.Server)
	}
	res, err := s.CallTool(ctx, "clock__now", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("now:", res.Content[0].(*mcp.TextContent).Text)

	_, err = s.CallTool(ctx, "clock__reset", nil)
	var pe *runtime.PolicyError
	fmt.Println(errors.As(err, &pe), err)

	_ = s.Close(ctx)
	<-served
	_, err = s.CallTool(ctx, "clock__now", nil)
	fmt.Println(errors.Is(err, runtime.ErrClosed))
	// Output:
	// tool: clock__now from clock
	// tool: clock__reset from clock
	// now: 12:00
	// true runtime: tool "clock__reset": blocked by policy "no-resets": resets are disabled
	// true
}
