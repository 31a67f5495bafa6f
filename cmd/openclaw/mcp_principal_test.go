//go:build linux

package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPCallPrincipal runs `mcp tools` and `mcp call` against a server
// with the per-requester OAuth identity: the principal named by
// --principal lists and calls with its own tokens; without one, or with one
// that never logged in, the output says what to do.
func TestMCPCallPrincipal(t *testing.T) {
	t.Parallel()
	c := newRegistryCLI(t)
	f := newLoginFixture(t)
	writePerRequesterConfig(t, c, f)
	if stdout, stderr, code := login(t, c, "team", "--principal", "alice", "--timeout", "30s"); code != 0 {
		t.Fatalf("login team --principal alice: exit %d, %q\n%s", code, stdout, stderr)
	}

	stdout, stderr, code := c.run(t, "mcp", "call", "team__echo", "--principal", "alice")
	if code != 0 || strings.TrimSpace(stdout) != "protected ok" {
		t.Errorf("call --principal alice: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = c.run(t, "mcp", "tools", "--principal", "alice")
	if code != 0 || !strings.Contains(stdout, "team__echo") {
		t.Errorf("tools --principal alice: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// The auth profile is refused up front, naming the server.
	if !strings.Contains(stderr, `MCP server "prof" takes its OAuth credentials from OpenClaw auth profile "work"`) {
		t.Errorf("tools: no auth-profile refusal for prof in stderr:\n%s", stderr)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no principal", []string{"mcp", "call", "team__echo"}, `MCP server "team" uses per-requester OAuth ("oauth": {"identity": "per-requester"}) and no principal was named to list its tools`},
		{"never logged in", []string{"mcp", "call", "team__echo", "--principal", "carol"}, `requires OAuth authorization for principal "carol". Run openclaw mcp login team --principal carol.`},
	} {
		stdout, stderr, code := c.run(t, tc.args...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr:\n%s\nwant exit 1 and %q", tc.name, code, stdout, stderr, tc.want)
		}
		if strings.Contains(stderr, "cli-access-") {
			t.Errorf("%s: a token reached stderr:\n%s", tc.name, stderr)
		}
	}
}

// TestMCPProxyPerRequesterBySubject runs the built proxy with a tokens file
// naming alice, bob and carol in front of an OAuth-protected server with
// the per-requester identity: each caller's tools/call reaches the server
// with the access token logged in for that caller's principal
// (tokens-file#alice, tokens-file#bob), never another's; carol, who never
// logged in, is told to, and nothing is sent upstream for her.
func TestMCPProxyPerRequesterBySubject(t *testing.T) {
	t.Parallel()
	c := newRegistryCLI(t)
	f := newLoginFixture(t)
	writeJSON(t, c.configPath(), map[string]any{"mcp": map[string]any{"servers": map[string]any{
		"team": map[string]any{"url": f.srv.URL + "/mcp", "transport": "streamable-http", "auth": "oauth", "oauth": map[string]any{"identity": "per-requester"}},
	}}})
	upstream := map[string]string{}
	for _, who := range []string{"alice", "bob"} {
		if stdout, stderr, code := login(t, c, "team", "--principal", "tokens-file#"+who, "--timeout", "30s"); code != 0 {
			t.Fatalf("login team --principal tokens-file#%s: exit %d, %q\n%s", who, code, stdout, stderr)
		}
		upstream[who] = f.lastIssued(t)
	}
	if upstream["alice"] == upstream["bob"] {
		t.Fatalf("alice and bob got one upstream token %q", upstream["alice"])
	}
	proxyTokens := map[string]string{"alice": "proxy-token-alice", "bob": "proxy-token-bob", "carol": "proxy-token-carol"}
	var entries []any
	for who, tok := range proxyTokens {
		entries = append(entries, map[string]any{"name": who, "token": tok})
	}
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	writeJSON(t, tokens, map[string]any{"tokens": entries})

	cmd := exec.Command(c.bin, "mcp", "proxy", "--listen", "127.0.0.1:0", "--connect-wait", "0", "--tokens-file", tokens,
		"--audit-log", filepath.Join(t.TempDir(), "audit.jsonl"))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENCLAW_") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+c.home, "OPENCLAW_HOME="+c.home)
	hp := runHTTPProxyCmd(t, cmd)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	session := map[string]*mcp.ClientSession{}
	for who, tok := range proxyTokens {
		hc := &http.Client{Transport: bearerTransport{token: tok}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: who + "-client", Version: "1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hp.base + "/mcp", HTTPClient: hc}, nil)
		if err != nil {
			t.Fatalf("%s connects: %v", who, err)
		}
		defer cs.Close()
		session[who] = cs
	}
	// The server is listed over the connection of the first principal
	// that uses the catalog (its failed first listing, without one, is
	// retried on a use at least 5 s later).
	for listed := false; !listed; {
		res, err := session["alice"].ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list as alice: %v", err)
		}
		for _, tl := range res.Tools {
			listed = listed || tl.Name == "team__echo"
		}
		if !listed {
			select {
			case <-ctx.Done():
				t.Fatalf("team__echo never listed for alice; proxy stderr:\n%s", hp.stderr.String())
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	order := []string{"alice", "bob", "alice", "bob"}
	for _, who := range order {
		res, err := session[who].CallTool(ctx, &mcp.CallToolParams{Name: "team__echo"})
		if err != nil || res.IsError {
			t.Fatalf("team__echo as %s: %v %+v", who, err, res)
		}
	}
	res, err := session["carol"].CallTool(ctx, &mcp.CallToolParams{Name: "team__echo"})
	if err != nil {
		t.Fatalf("team__echo as carol: %v", err)
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if !res.IsError || !strings.Contains(text, "openclaw mcp login team --principal tokens-file#carol") {
		t.Errorf("team__echo as carol = %q (isError %v), want a tool error telling her to log in", text, res.IsError)
	}
	got := f.callTokens()
	var want []string
	for _, who := range order {
		want = append(want, upstream[who])
	}
	if !slices.Equal(got, want) {
		t.Errorf("upstream tools/call tokens %v, want %v (alice %s, bob %s)", got, want, upstream["alice"], upstream["bob"])
	}
}
