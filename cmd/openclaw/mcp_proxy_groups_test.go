package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPProxyGroupRule runs the built binary as an OAuth resource server
// of a real OpenID provider (zitadel's) in front of a go-sdk server "prod"
// with a tool deploy, once per example policy: the Go, Rust and
// AssemblyScript examples (guests/examples), the Rego example
// (guests/rego) and builtin:rules with a caller rule. Each says that
// prod__ tools are for the on-call group: alice (groups [oncall]) is
// allowed and the upstream runs her call; bob (groups [dev]) gets a tool
// error with the reason and the upstream never sees his call; the audit
// log names both subjects with their decisions. The examples are the
// committed .wasm files, so no guest toolchain is needed.
func TestMCPProxyGroupRule(t *testing.T) {
	t.Parallel()
	const reason = "prod tools are for the on-call group"
	root := filepath.Join("..", "..")
	for _, tc := range []struct {
		name   string
		module map[string]any
	}{
		{"go", map[string]any{"source": filepath.Join(root, "guests", "examples", "go", "policy.wasm")}},
		{"rust", map[string]any{"source": filepath.Join(root, "guests", "examples", "rust", "policy.wasm")}},
		{"assemblyscript", map[string]any{"source": filepath.Join(root, "guests", "examples", "assemblyscript", "policy.wasm")}},
		{"rego", map[string]any{"source": filepath.Join(root, "guests", "rego", "policy.wasm")}},
		{"rules", map[string]any{"source": "builtin:rules", "config": map[string]any{"default": "allow", "rules": []any{
			map[string]any{"id": "oncall-deploys", "tool": "prod__*", "caller": map[string]any{"groups": []string{"oncall"}}, "decision": "allow"},
			map[string]any{"tool": "prod__*", "decision": "block", "reason": reason},
		}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src, _ := tc.module["source"].(string)
			if !strings.HasPrefix(src, "builtin:") {
				abs, err := filepath.Abs(src)
				if err != nil {
					t.Fatal(err)
				}
				tc.module["source"] = abs
			}
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()

			// The upstream: a real MCP server over streamable HTTP that
			// records who reached its tool.
			var mu sync.Mutex
			var deployed []string
			up := mcp.NewServer(&mcp.Implementation{Name: "prod", Version: "1"}, nil)
			up.AddTool(&mcp.Tool{Name: "deploy", InputSchema: json.RawMessage(`{"type":"object","properties":{"by":{"type":"string"}}}`)},
				func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					var args struct{ By string }
					_ = json.Unmarshal(req.Params.Arguments, &args)
					mu.Lock()
					deployed = append(deployed, args.By)
					mu.Unlock()
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deployed by " + args.By}}}, nil
				})
			upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
			t.Cleanup(upstream.Close) // after the proxy (a later cleanup) stops

			addr, resource, op := startOncallProvider(t)

			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			writeJSON(t, filepath.Join(home, ".openclaw", "openclaw.json"), map[string]any{"mcp": map[string]any{"servers": map[string]any{
				"prod": map[string]any{"url": upstream.URL, "transport": "streamable-http"},
			}}})
			policy, audit := filepath.Join(dir, "policy.json"), filepath.Join(dir, "audit.jsonl")
			tc.module["name"] = tc.name
			tc.module["hooks"] = []string{"before_tool_call"}
			writeJSON(t, policy, map[string]any{"modules": []any{tc.module, map[string]any{"name": "sanitizer", "source": "builtin:sanitizer"}}})
			hp := startHTTPProxyHome(t, dir, home, nil, "--listen", addr, "--policy-config", policy, "--audit-log", audit,
				"--auth-issuer", op.Issuer, "--auth-audience", resource, "--auth-scope", "mcp", "--auth-claim", "groups")

			call := func(who string) *mcp.CallToolResult {
				t.Helper()
				token := op.Token(t, who, who+"-secret", "mcp")
				client := mcp.NewClient(&mcp.Implementation{Name: "groups-client", Version: "1"}, nil)
				cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: resource, HTTPClient: &http.Client{Transport: bearerTransport{token}}}, nil)
				if err != nil {
					t.Fatalf("%s: connect: %v\nproxy:\n%s", who, err, hp.stderr.String())
				}
				defer cs.Close()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "prod__deploy", Arguments: map[string]any{"by": who}})
				if err != nil {
					t.Fatalf("%s: prod__deploy: %v\nproxy:\n%s", who, err, hp.stderr.String())
				}
				return res
			}
			text := func(res *mcp.CallToolResult) string {
				if len(res.Content) == 1 {
					if tc, ok := res.Content[0].(*mcp.TextContent); ok {
						return tc.Text
					}
				}
				b, _ := json.Marshal(res.Content)
				return string(b)
			}

			if res := call("alice"); res.IsError || text(res) != "deployed by alice" {
				t.Errorf("alice: isError %v, %q; want the upstream's answer", res.IsError, text(res))
			}
			want := `blocked by policy "` + tc.name + `": ` + reason
			if res := call("bob"); !res.IsError || text(res) != want {
				t.Errorf("bob: isError %v, %q; want a tool error %q", res.IsError, text(res), want)
			}
			mu.Lock()
			if strings.Join(deployed, ",") != "alice" {
				t.Errorf("the upstream ran deploy for %q, want alice only", deployed)
			}
			mu.Unlock()

			decided, raw := auditDecisions(t, audit, op.Issuer, "prod__deploy", tc.name)
			if len(decided) != 2 || decided["alice"] != "allow" || decided["bob"] != "block" {
				t.Errorf("audit decisions of module %s by subject = %v, want alice allow, bob block:\n%s", tc.name, decided, raw)
			}
		})
	}
}
