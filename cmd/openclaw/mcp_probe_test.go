package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/openclaw-go/openclaw/config"
)

// httpMCPServer serves a go-sdk MCP server with one tool, "lookup", over
// streamable HTTP on 127.0.0.1. A request without the header
// "Authorization: Bearer <token>" is refused with 401. It returns the URL.
func httpMCPServer(t *testing.T, token string) string {
	t.Helper()
	return serveMCPHTTP(t, token, func(srv *mcp.Server) http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	})
}

// sseMCPServer is httpMCPServer over the legacy SSE transport.
func sseMCPServer(t *testing.T, token string) string {
	t.Helper()
	return serveMCPHTTP(t, token, func(srv *mcp.Server) http.Handler {
		return mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	})
}

func serveMCPHTTP(t *testing.T, token string, handler func(*mcp.Server) http.Handler) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "http-peer", Version: "7.1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Look a word up."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil, nil
		})
	h := handler(srv)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

func TestMCPProbe(t *testing.T) {
	t.Parallel()
	c := newRuntimeCLI(t)
	url := httpMCPServer(t, "probe-sekret-42")
	sseURL := sseMCPServer(t, "sse-sekret-8")
	tiny := map[string]any{"command": c.tiny, "args": []string{"--api-key", "argsekret-99"}}
	broken := map[string]any{"command": "/nonexistent/mcp-server", "args": []string{"--token", "argsekret-99"}}
	off := map[string]any{"command": c.tiny, "enabled": false}
	web := map[string]any{"url": url, "transport": "streamable-http", "headers": map[string]any{"Authorization": "Bearer probe-sekret-42"}}
	webBad := map[string]any{"url": url, "transport": "streamable-http", "headers": map[string]any{"Authorization": "Bearer wrong-sekret-7"}}
	filtered := map[string]any{"command": c.tiny, "toolFilter": map[string]any{"exclude": []string{"fail", "point"}}}

	cases := []runtimeCase{
		{
			name:    "every enabled server, one failing",
			servers: map[string]any{"tiny": tiny, "broken": broken, "off": off},
			args:    []string{"mcp", "probe"},
			code:    1,
			stdout: []string{"MCP probe ($OPENCLAW_HOME/.openclaw/openclaw.json):\n",
				"- tiny: 3 tools (stdio, tiny 1, protocol 20", " ms)\n",
				"! broken: connect: ", "/nonexistent/mcp-server"},
			stderr: []string{"MCP probe found failures.\n"},
			noOut:  []string{"argsekret-99", "- off", "off:"},
			noErr:  []string{"argsekret-99"},
		},
		{
			name:    "named server over streamable HTTP, header secret kept out",
			servers: map[string]any{"web": web, "broken": broken},
			args:    []string{"mcp", "probe", "web"},
			stdout:  []string{"- web: 1 tools (streamable-http, http-peer 7.1, protocol 20"},
			noOut:   []string{"probe-sekret-42", "broken"},
		},
		{
			name:    "URL without transport is SSE",
			servers: map[string]any{"legacy": map[string]any{"url": sseURL, "headers": map[string]any{"Authorization": "Bearer sse-sekret-8"}}},
			args:    []string{"mcp", "probe", "--json"},
			stdout:  []string{`"transport": "sse"`, `"name": "http-peer"`, `"tools": 1,`, `"ok": true`},
			noOut:   []string{"sse-sekret-8"},
		},
		{
			name:    "refused HTTP server",
			servers: map[string]any{"web": webBad},
			args:    []string{"mcp", "probe", "web"},
			code:    1,
			stdout:  []string{"! web: connect: "},
			noOut:   []string{"wrong-sekret-7"},
			noErr:   []string{"wrong-sekret-7"},
		},
		{
			name:    "tool filter",
			servers: map[string]any{"tiny": filtered},
			args:    []string{"mcp", "probe", "tiny"},
			stdout:  []string{"- tiny: 1 tools (stdio, tiny 1, protocol ", "2 hidden by toolFilter"},
		},
		{
			name:    "tool filter on an exposed name",
			servers: map[string]any{"tiny": map[string]any{"command": c.tiny, "toolFilter": map[string]any{"exclude": []string{"tiny__fail"}}}},
			args:    []string{"mcp", "probe"},
			stdout:  []string{"- tiny: 2 tools (stdio, tiny 1, protocol ", "1 hidden by toolFilter"},
		},
		{
			name:    "unknown name",
			servers: map[string]any{"tiny": tiny},
			args:    []string{"mcp", "probe", "nope"},
			code:    1,
			stderr:  []string{`No MCP server named "nope" in $OPENCLAW_HOME/.openclaw/openclaw.json. [hint omitted]`},
		},
		{
			name:    "disabled name",
			servers: map[string]any{"off": off},
			args:    []string{"mcp", "probe", "off"},
			code:    1,
			stderr:  []string{`MCP server "off" is disabled in $OPENCLAW_HOME/.openclaw/openclaw.json. Run openclaw mcp configure off --enable before probing it.`},
		},
		{
			name:    "bad timeout",
			servers: map[string]any{"tiny": tiny},
			args:    []string{"mcp", "probe", "--timeout", "0"},
			code:    1,
			stderr:  []string{"--timeout must be a positive number.\n"},
		},
		{
			name:    "no enabled server",
			servers: map[string]any{"off": off},
			args:    []string{"mcp", "probe"},
			stdout:  []string{"No enabled MCP servers configured in $OPENCLAW_HOME/.openclaw/openclaw.json.\n"},
		},
		{
			name:    "no usable transport",
			servers: map[string]any{"odd": map[string]any{"transport": "sse"}},
			args:    []string{"mcp", "probe"},
			code:    1,
			stdout:  []string{"! odd: resolve: "},
		},
	}
	if ev := everythingEntry(t); ev != nil {
		cases = append(cases, runtimeCase{
			name:    "server-everything over stdio",
			servers: map[string]any{"everything": ev},
			args:    []string{"mcp", "probe"},
			stdout:  []string{"- everything: 13 tools, resources, prompts (stdio, mcp-servers/everything "},
		})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := c.newHome(t, tc.servers, tc.files)
			stdout, stderr, code := r.run(t, tc.args...)
			stdout, stderr = r.normalize(stdout), r.normalize(stderr)
			checkRun(t, tc, stdout, stderr, code)
		})
	}
}

// checkRun asserts what the user sees of one run.
func checkRun(t *testing.T, tc runtimeCase, stdout, stderr string, code int) {
	t.Helper()
	if code != tc.code {
		t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
	}
	for _, s := range tc.stdout {
		if !strings.Contains(stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, stdout)
		}
	}
	for _, s := range tc.stderr {
		if !strings.Contains(stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, stderr)
		}
	}
	for _, s := range tc.noOut {
		if strings.Contains(stdout, s) {
			t.Errorf("stdout holds %q:\n%s", s, stdout)
		}
	}
	for _, s := range tc.noErr {
		if strings.Contains(stderr, s) {
			t.Errorf("stderr holds %q:\n%s", s, stderr)
		}
	}
}

func TestMCPProbeJSON(t *testing.T) {
	t.Parallel()
	c := newRuntimeCLI(t)
	r := c.newHome(t, map[string]any{
		"tiny":   map[string]any{"command": c.tiny, "requestTimeoutMs": 5000, "supportsParallelToolCalls": true},
		"broken": map[string]any{"command": "/nonexistent/mcp-server"},
	}, nil)
	stdout, stderr, code := r.run(t, "mcp", "probe", "--json")
	if code != 1 {
		t.Errorf("exit %d, want 1 (broken failed); stderr:\n%s", code, stderr)
	}
	var got struct {
		Path        string `json:"path"`
		OK          *bool  `json:"ok"`
		GeneratedAt string `json:"generatedAt"`
		Servers     map[string]struct {
			Launch           string  `json:"launch"`
			Tools            int     `json:"tools"`
			RequestTimeoutMs float64 `json:"requestTimeoutMs"`
			Parallel         bool    `json:"supportsParallelToolCalls"`
			OK               bool    `json:"ok"`
			Transport        string  `json:"transport"`
			ServerInfo       struct{ Name, Version string }
			ProtocolVersion  string   `json:"protocolVersion"`
			ElapsedMs        int      `json:"elapsedMs"`
			ToolNames        []string `json:"toolNames"`
		} `json:"servers"`
		Tools       []string `json:"tools"`
		Diagnostics []struct {
			ServerName string `json:"serverName"`
			Message    string `json:"message"`
		} `json:"diagnostics"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if got.Path != r.configPath() || got.OK == nil || *got.OK || got.GeneratedAt == "" {
		t.Errorf("path %q ok %v generatedAt %q", got.Path, got.OK, got.GeneratedAt)
	}
	s, ok := got.Servers["tiny"]
	switch {
	case !ok || len(got.Servers) != 1:
		t.Fatalf("servers = %+v, want only tiny", got.Servers)
	case s.Tools != 3 || !s.OK || s.Transport != "stdio" || s.ServerInfo.Name != "tiny" || s.ServerInfo.Version != "1":
		t.Errorf("tiny = %+v", s)
	case s.ProtocolVersion == "" || s.ElapsedMs < 1 || s.RequestTimeoutMs != 5000 || !s.Parallel:
		t.Errorf("tiny = %+v", s)
	case strings.Join(s.ToolNames, ",") != "echo,fail,point":
		t.Errorf("toolNames = %v", s.ToolNames)
	}
	if strings.Join(got.Tools, ",") != "tiny__echo,tiny__fail,tiny__point" {
		t.Errorf("tools = %v", got.Tools)
	}
	if len(got.Diagnostics) != 1 || got.Diagnostics[0].ServerName != "broken" || !strings.HasPrefix(got.Diagnostics[0].Message, "connect: ") {
		t.Errorf("diagnostics = %+v", got.Diagnostics)
	}
}

func TestDoctorProbeIssues(t *testing.T) {
	t.Parallel()
	c := newRuntimeCLI(t)
	obj := func(t *testing.T, v string) *config.Object {
		t.Helper()
		o, err := config.ParseOrdered([]byte(v))
		if err != nil {
			t.Fatal(err)
		}
		return o.(*config.Object)
	}
	tests := []struct {
		name, entry string
		static      []regDoctorIssue
		level, msg  string // "" level: no issue added
	}{
		{name: "answers", entry: `{"command":"` + c.tiny + `"}`, level: "info", msg: "probe: 3 tools (stdio, tiny 1, protocol "},
		{name: "fails to start", entry: `{"command":"/nonexistent/mcp-server"}`, level: "error", msg: "probe failed: connect: "},
		{name: "no usable transport", entry: `{"transport":"sse"}`, level: "error", msg: "probe failed: resolve: "},
		{name: "disabled", entry: `{"command":"/nonexistent/mcp-server","enabled":false}`},
		{name: "static error first", entry: `{"command":"/nonexistent/mcp-server"}`, static: []regDoctorIssue{{"error", "stdio command missing"}}},
		{name: "static warning only", entry: `{"command":"` + c.tiny + `"}`, static: []regDoctorIssue{{"warning", "w"}}, level: "info", msg: "probe: 3 tools"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := &cobra.Command{}
			var stderr strings.Builder
			cmd.SetErr(&stderr)
			cmd.SetContext(context.Background())
			got := doctorProbeIssues(cmd, "srv", obj(t, tc.entry), tc.static, probeOptions{})
			switch {
			case tc.level == "" && len(got) != 0:
				t.Fatalf("issues %+v, want none", got)
			case tc.level == "":
				return
			case len(got) != 1 || got[0].level != tc.level || !strings.HasPrefix(got[0].message, tc.msg):
				t.Fatalf("issues %+v, want one %s starting %q", got, tc.level, tc.msg)
			}
		})
	}
}
