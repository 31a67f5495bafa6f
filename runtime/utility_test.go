package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// kbServer is an in-process server with a tool, two resources and a prompt
// with an argument.
func kbServer() *mcp.Server {
	srv := newServer("kb", nil)
	echoTool(srv, "lookup")
	for _, r := range []struct{ uri, name, text string }{
		{"kb://notes/a", "a", "alpha notes"},
		{"kb://notes/b", "b", "beta notes"},
	} {
		srv.AddResource(&mcp.Resource{URI: r.uri, Name: r.name, MIMEType: "text/plain"},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: r.text}}}, nil
			})
	}
	srv.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Greets someone", Arguments: []*mcp.PromptArgument{{Name: "who", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{
				Description: "A greeting",
				Messages: []*mcp.PromptMessage{
					{Role: "user", Content: &mcp.TextContent{Text: "Say hello to " + req.Params.Arguments["who"]}},
					{Role: "assistant", Content: &mcp.TextContent{Text: "Hello!"}},
				},
			}, nil
		})
	return srv
}

// texts returns the text of every content block.
func texts(t *testing.T, res *mcp.CallToolResult) []string {
	t.Helper()
	var out []string
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("content %T: want text", c)
		}
		out = append(out, tc.Text)
	}
	return out
}

func TestUtilityToolsCatalog(t *testing.T) {
	t.Parallel()
	plain := newServer("plain", nil)
	echoTool(plain, "ping")
	s := open(t, []Server{inProcess(t, "kb", kbServer()), inProcess(t, "plain", plain)}, &Options{})
	tools, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byName := map[string]Tool{}
	for _, tl := range tools {
		names = append(names, tl.Name)
		byName[tl.Name] = tl
	}
	want := []string{"kb__lookup", "kb__prompts_get", "kb__prompts_list", "kb__resources_list", "kb__resources_read", "plain__ping"}
	if !slices.Equal(names, want) {
		t.Fatalf("catalog = %v, want %v (utility tools only for the server with resources and prompts)", names, want)
	}
	for name, op := range map[string]string{
		"kb__resources_list": UtilityResourcesList, "kb__resources_read": UtilityResourcesRead,
		"kb__prompts_list": UtilityPromptsList, "kb__prompts_get": UtilityPromptsGet,
	} {
		tl := byName[name]
		if tl.Utility != op || tl.RawName() != op || tl.Server != "kb" || !strings.Contains(tl.Upstream.Description, `MCP server "kb"`) {
			t.Errorf("%s = %+v / %+v", name, tl, tl.Upstream)
		}
		var schema map[string]any
		if err := json.Unmarshal(tl.Upstream.InputSchema.(json.RawMessage), &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s schema %s: %v", name, tl.Upstream.InputSchema, err)
		}
	}
	if byName["kb__lookup"].Utility != "" {
		t.Errorf("a server tool has Utility %q", byName["kb__lookup"].Utility)
	}
	var rs struct{ Required []string }
	_ = json.Unmarshal(byName["kb__resources_read"].Upstream.InputSchema.(json.RawMessage), &rs)
	if !slices.Equal(rs.Required, []string{"uri"}) {
		t.Errorf("resources_read requires %v, want [uri]", rs.Required)
	}
}

func TestUtilityToolsCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, tool, args string
		want             []string // text blocks; for JSON, substrings of the one block
		json             bool
		isError          bool
		err              error // refused before the policy, with this error
	}{
		{name: "resources_list", tool: "kb__resources_list", json: true,
			want: []string{`"resources": [`, `"uri": "kb://notes/a"`, `"uri": "kb://notes/b"`, `"mimeType": "text/plain"`}},
		{name: "resources_read", tool: "kb__resources_read", args: `{"uri":"kb://notes/b"}`, json: true,
			want: []string{`"contents": [`, `"text": "beta notes"`, `"uri": "kb://notes/b"`}},
		{name: "prompts_list", tool: "kb__prompts_list", args: `{}`, json: true,
			want: []string{`"prompts": [`, `"name": "greet"`, `"name": "who"`}},
		{name: "prompts_get", tool: "kb__prompts_get", args: `{"name":"greet","arguments":{"who":"Ada"}}`,
			want: []string{"A greeting", "user:", "Say hello to Ada", "assistant:", "Hello!"}},
		{name: "read without uri", tool: "kb__resources_read", args: `{}`, want: []string{"uri is required"}, isError: true},
		{name: "read, uri not a string", tool: "kb__resources_read", args: `{"uri":3}`, want: []string{"uri is required"}, isError: true},
		{name: "prompt argument not a string", tool: "kb__prompts_get", args: `{"name":"greet","arguments":{"who":1}}`,
			want: []string{"arguments.who must be a string"}, isError: true},
		{name: "arguments not an object", tool: "kb__prompts_get", args: `[1]`, err: ErrInvalidArguments},
		{name: "unknown resource", tool: "kb__resources_read", args: `{"uri":"kb://notes/zzz"}`, json: true,
			want: []string{`MCP server "kb": resources_read:`}, isError: true},
		{name: "unknown prompt", tool: "kb__prompts_get", args: `{"name":"nope"}`, json: true,
			want: []string{`MCP server "kb": prompts_get:`}, isError: true},
	}
	pol := &policiestest.Enforcer{}
	s := open(t, []Server{inProcess(t, "kb", kbServer())}, &Options{Enforcer: pol})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := s.CallTool(context.Background(), tt.tool, []byte(tt.args))
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("CallTool = %v, %v; want %v", res, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError != tt.isError {
				t.Fatalf("IsError = %v, want %v: %v", res.IsError, tt.isError, texts(t, res))
			}
			got := texts(t, res)
			if tt.json {
				if len(got) != 1 {
					t.Fatalf("content %v: want one block", got)
				}
				for _, w := range tt.want {
					if !strings.Contains(got[0], w) {
						t.Errorf("%s lacks %s", got[0], w)
					}
				}
				if !tt.isError && (!json.Valid([]byte(got[0])) || strings.Contains(got[0], "_meta")) {
					t.Errorf("not OpenClaw's JSON projection: %s", got[0])
				}
				return
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("content = %q, want %q", got, tt.want)
			}
		})
	}
	t.Cleanup(func() {
		// Every call passed before_tool_call with the operation as the
		// original tool name.
		seen := pol.Calls()
		want := 0
		for _, tt := range tests {
			if tt.err == nil {
				want++
			}
		}
		if len(seen) != want {
			t.Errorf("policy saw %d calls, want %d", len(seen), want)
		}
		for _, c := range seen {
			if c.Tool.Server != "kb" || "kb__"+c.Tool.RawName != c.Tool.Name || c.Surface != policies.SurfaceEmbedded {
				t.Errorf("policy input %+v", c)
			}
		}
	})
}

// A block stops a utility call before it reaches the server; a rewrite of
// the arguments is what the server gets.
func TestUtilityToolsPolicy(t *testing.T) {
	t.Parallel()
	block := open(t, []Server{inProcess(t, "kb", kbServer())}, &Options{
		Enforcer: &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.Block, Module: "rules", Reason: "no reading"}},
	})
	_, err := block.CallTool(context.Background(), "kb__resources_read", []byte(`{"uri":"kb://notes/a"}`))
	var pe *PolicyError
	if !errors.As(err, &pe) || pe.Tool != "kb__resources_read" || pe.Reason != "no reading" {
		t.Fatalf("err = %v, want the policy's block", err)
	}
	rewrite := open(t, []Server{inProcess(t, "kb", kbServer())}, &Options{
		Enforcer: &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.Allow, Arguments: []byte(`{"uri":"kb://notes/a"}`)}},
	})
	res, err := rewrite.CallTool(context.Background(), "kb__resources_read", []byte(`{"uri":"kb://notes/b"}`))
	if err != nil || !strings.Contains(texts(t, res)[0], "alpha notes") {
		t.Fatalf("rewritten read: %v %v", res, err)
	}
}

// Utility tools follow the server's toolFilter (by operation or exposed
// name) and the tool policy, and a server tool keeps a name they share.
func TestUtilityToolsFilterAndNames(t *testing.T) {
	t.Parallel()
	clash := kbServer()
	echoTool(clash, "resources_list")
	tests := []struct {
		name   string
		server func(t *testing.T) Server
		policy *ToolPolicy
		want   []string
	}{
		{name: "toolFilter exclude by operation", server: func(t *testing.T) Server {
			sv := inProcess(t, "kb", kbServer())
			sv.ToolFilter = &config.ToolFilter{Exclude: []string{"resources_read", "kb__prompts_*"}}
			return sv
		}, want: []string{"kb__lookup", "kb__resources_list"}},
		{name: "toolFilter include", server: func(t *testing.T) Server {
			sv := inProcess(t, "kb", kbServer())
			sv.ToolFilter = &config.ToolFilter{Include: []string{"prompts_*"}}
			return sv
		}, want: []string{"kb__prompts_get", "kb__prompts_list"}},
		{name: "tools.deny", server: func(t *testing.T) Server { return inProcess(t, "kb", kbServer()) },
			policy: &ToolPolicy{Deny: []string{"*__resources_*"}},
			want:   []string{"kb__lookup", "kb__prompts_get", "kb__prompts_list"}},
		{name: "a server tool named like a utility", server: func(t *testing.T) Server { return inProcess(t, "kb", clash) },
			want: []string{"kb__lookup", "kb__prompts_get", "kb__prompts_list", "kb__resources_list", "kb__resources_list-2", "kb__resources_read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := open(t, []Server{tt.server(t)}, &Options{ToolPolicy: tt.policy})
			if got := toolNames(t, s); !slices.Equal(got, tt.want) {
				t.Fatalf("catalog = %v, want %v", got, tt.want)
			}
		})
	}
	s := open(t, []Server{inProcess(t, "kb", clash)}, &Options{})
	res, err := s.CallTool(context.Background(), "kb__resources_list", []byte(`{"x":1}`))
	if err != nil || resultText(t, res) != `resources_list: {"x":1}` {
		t.Fatalf("the server's own resources_list: %v %v", res, err)
	}
	res, err = s.CallTool(context.Background(), "kb__resources_list-2", nil)
	if err != nil || !strings.Contains(resultText(t, res), `"resources": [`) {
		t.Fatalf("the utility: %v %v", res, err)
	}
}

// server-everything over stdio advertises resources and prompts: the
// utility tools list, read and render them.
func TestUtilityToolsServerEverything(t *testing.T) {
	t.Parallel()
	script := everythingScript(t)
	s := open(t, []Server{{
		Name:  "everything",
		Entry: config.ServerEntry{Command: "node", Args: []string{script, "stdio"}, RequestTimeoutMs: 30000, ConnectionTimeoutMs: 30000},
	}}, &Options{})
	if d := s.Diagnostics(); len(d) > 0 {
		t.Fatalf("diagnostics: %v", d)
	}
	names := toolNames(t, s)
	for _, want := range []string{"everything__resources_list", "everything__resources_read", "everything__prompts_list", "everything__prompts_get"} {
		if !slices.Contains(names, want) {
			t.Fatalf("catalog %v lacks %s", names, want)
		}
	}
	ctx := context.Background()
	res, err := s.CallTool(ctx, "everything__resources_list", nil)
	if err != nil || res.IsError {
		t.Fatalf("resources_list: %v %v", res, err)
	}
	var list struct {
		Resources []struct{ URI, Name string }
	}
	if err := json.Unmarshal([]byte(resultText(t, res)), &list); err != nil || len(list.Resources) == 0 {
		t.Fatalf("resources_list %s: %v", resultText(t, res), err)
	}
	uri := list.Resources[0].URI
	res, err = s.CallTool(ctx, "everything__resources_read", []byte(`{"uri":`+strconvQuote(uri)+`}`))
	if err != nil || res.IsError {
		t.Fatalf("resources_read %s: %v %v", uri, res, err)
	}
	var read struct {
		Contents []struct{ URI, Text, Blob string }
	}
	if err := json.Unmarshal([]byte(resultText(t, res)), &read); err != nil || len(read.Contents) == 0 || read.Contents[0].URI != uri {
		t.Fatalf("resources_read %s: %s %v", uri, resultText(t, res), err)
	}
	res, err = s.CallTool(ctx, "everything__prompts_list", nil)
	if err != nil || !strings.Contains(resultText(t, res), `"name": "args-prompt"`) {
		t.Fatalf("prompts_list: %v %v", res, err)
	}
	res, err = s.CallTool(ctx, "everything__prompts_get", []byte(`{"name":"args-prompt","arguments":{"city":"Paris"}}`))
	if err != nil || res.IsError {
		t.Fatalf("prompts_get: %v %v", res, err)
	}
	if got := texts(t, res); !slices.Contains(got, "user:") || !slices.Contains(got, "What's weather in Paris?") {
		t.Fatalf("prompts_get content = %q", got)
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
