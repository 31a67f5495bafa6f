package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/internal/testkit/oidcop"
)

// nodeOAuthClient is a Node SDK client that logs in by itself: its
// ClientCredentialsProvider follows the proxy's 401 to the protected
// resource metadata, discovers the issuer, obtains a token and calls
// everything__echo; it prints {echo, isError}.
const nodeOAuthClient = `
import path from "node:path";
import { createRequire } from "node:module";
const require = createRequire(path.join(process.env.PEERS_DIR, "npm", "package.json"));
const sdk = (p) => import(require.resolve("@modelcontextprotocol/sdk/" + p));
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { ClientCredentialsProvider } = await sdk("client/auth-extensions.js");
const authProvider = new ClientCredentialsProvider({ clientId: process.env.CLIENT, clientSecret: process.env.SECRET, scope: "mcp" });
const transport = new StreamableHTTPClientTransport(new URL(process.env.URL), { authProvider });
const client = new Client({ name: "node-oauth-client", version: "1.0.0" });
await client.connect(transport);
const r = await client.callTool({ name: "everything__echo", arguments: { message: "from " + process.env.CLIENT } });
console.log(JSON.stringify({ echo: r.content?.[0]?.text ?? "", isError: !!r.isError }));
await client.close();
`

// TestMCPProxyOAuthNodeSDK runs the built binary as an OAuth resource
// server of a real OpenID provider (zitadel's) in front of
// server-everything, with a builtin:rules group rule on everything__echo.
// The Node SDK client logs in by itself as alice (group oncall), who is
// allowed, and as bob, who is blocked; the audit log names both subjects.
func TestMCPProxyOAuthNodeSDK(t *testing.T) {
	t.Parallel()
	node, _, peers := proxyPeers(t)
	testkit.Peer(t, testkit.NodeSDK)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	addr, resource, op := startOncallProvider(t)

	dir := t.TempDir()
	policy, audit := filepath.Join(dir, "oncall.json"), filepath.Join(dir, "audit.jsonl")
	writeJSON(t, policy, map[string]any{"modules": []any{map[string]any{
		"name": "rules", "source": "builtin:rules",
		"config": map[string]any{"default": "allow", "rules": []any{
			map[string]any{"id": "oncall-echoes", "tool": "everything__echo", "caller": map[string]any{"groups": []string{"oncall"}}, "decision": "allow"},
			map[string]any{"tool": "everything__echo", "decision": "block", "reason": "echo is for the on-call group"},
		}},
	}, map[string]any{"name": "sanitizer", "source": "builtin:sanitizer"}}})
	hp := startHTTPProxy(t, ctx, nil, "--listen", addr, "--policy-config", policy, "--audit-log", audit,
		"--auth-issuer", op.Issuer, "--auth-audience", resource, "--auth-scope", "mcp", "--auth-claim", "groups")
	if hp.token != "" {
		t.Errorf("a token was generated beside the issuer:\n%s", hp.stderr.String())
	}

	for _, tc := range []struct {
		client, secret string
		isError        bool
		echo           string
	}{
		{"alice", "alice-secret", false, "Echo: from alice"},
		{"bob", "bob-secret", true, `blocked by policy "rules": echo is for the on-call group`},
	} {
		cmd := exec.CommandContext(ctx, node, "--input-type=module", "-e", nodeOAuthClient)
		cmd.Env = append(os.Environ(), "PEERS_DIR="+peers, "URL="+resource, "CLIENT="+tc.client, "SECRET="+tc.secret)
		out, err := cmd.Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("node client %s: %v\n%s\nproxy:\n%s", tc.client, err, ee.Stderr, hp.stderr.String())
			}
			t.Fatal(err)
		}
		var got struct {
			Echo    string `json:"echo"`
			IsError bool   `json:"isError"`
		}
		if err := json.Unmarshal(out, &got); err != nil || got.IsError != tc.isError || got.Echo != tc.echo {
			t.Errorf("%s: %s (%v), want isError %v, %q", tc.client, out, err, tc.isError, tc.echo)
		}
	}

	if decided, raw := auditDecisions(t, audit, op.Issuer, "everything__echo", "rules"); decided["alice"] != "allow" || decided["bob"] != "block" {
		t.Errorf("audit decisions by subject = %v, want alice allow, bob block:\n%s", decided, raw)
	}
}

// startOncallProvider starts a real OpenID provider (oidcop) whose tokens
// are for the URL of a proxy about to listen on addr (resource, its /mcp),
// with the clients alice (secret alice-secret, groups [oncall]) and bob
// (bob-secret, groups [dev]).
func startOncallProvider(t *testing.T) (addr, resource string, op *oidcop.Provider) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	resource = "http://" + addr + "/mcp"
	op = oidcop.Start(t, resource,
		oidcop.Client{ID: "alice", Secret: "alice-secret", Groups: []string{"oncall"}},
		oidcop.Client{ID: "bob", Secret: "bob-secret", Groups: []string{"dev"}})
	return addr, resource, op
}

// auditDecisions reads the audit log at path and returns the decision of
// module's before_tool_call on tool by subject, for the subjects of
// issuer, and the log itself.
func auditDecisions(t *testing.T, path, issuer, tool, module string) (map[string]string, []byte) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	decided := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var rec struct {
			Hook, Tool, Module, Decision, Subject, Issuer string
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Hook == "before_tool_call" && rec.Tool == tool && rec.Module == module && rec.Issuer == issuer {
			decided[rec.Subject] = rec.Decision
		}
	}
	return decided, raw
}
