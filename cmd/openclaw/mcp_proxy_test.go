package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/e2e"
	"github.com/openclaw-go/openclaw/internal/procfs"
	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// TestMCPProxyStdio spawns the built binary as `openclaw mcp proxy` in front
// of server-everything and talks to it with the go-sdk client.
func TestMCPProxyStdio(t *testing.T) {
	node, script, _ := proxyPeers(t)
	dir := t.TempDir()
	bin := buildOpenclaw(t, dir)
	home, policy := writeEverythingFixture(t, dir, node, script)
	audit := filepath.Join(dir, "audit.jsonl")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// --connect-wait 0: the first tools/list below expects every server's tools.
	cmd := exec.Command(bin, "mcp", "proxy", "--connect-wait", "0", "--policy-config", policy, "--audit-log", audit)
	cmd.Env = append(os.Environ(), "OPENCLAW_HOME="+home, "OPENCLAW_STATE_DIR="+filepath.Join(dir, "state"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	var progMu sync.Mutex
	var progress []float64
	gotProgress := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "proxy-test-client", Version: "9.9"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if req.Params.ProgressToken == "tok-1" {
				progMu.Lock()
				progress = append(progress, req.Params.Progress)
				progMu.Unlock()
				select {
				case gotProgress <- struct{}{}:
				default:
				}
			}
		},
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr.String())
	}

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	names := map[string]bool{}
	for _, tl := range list.Tools {
		names[tl.Name] = true
	}
	if !names["everything__echo"] || !names["everything__get-sum"] {
		t.Fatalf("tools/list = %v, want everything__echo and everything__get-sum", names)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "hi proxy"}})
	if err != nil {
		t.Fatalf("echo: %v", err)
	}
	if res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "hi proxy") {
		t.Fatalf("echo result = %+v, want the echoed text", res)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__get-sum", Arguments: map[string]any{"a": 1, "b": 2}})
	if err != nil {
		t.Fatalf("get-sum: %v", err)
	}
	if !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "sums are off limits") {
		t.Fatalf("blocked get-sum = %+v, want isError with the module's reason", res)
	}

	// Progress of the upstream call reaches the client under its token.
	params := &mcp.CallToolParams{Name: "everything__trigger-long-running-operation", Arguments: map[string]any{"duration": 0.2, "steps": 2}}
	params.SetProgressToken("tok-1")
	res, err = cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("long-running operation = %+v, %v", res, err)
	}
	// The client may handle notifications after the result: wait for one.
	select {
	case <-gotProgress:
	case <-ctx.Done():
		t.Fatal("no progress notification relayed for token tok-1")
	}
	progMu.Lock()
	got := slices.Clone(progress)
	progMu.Unlock()
	if got[0] != 1 {
		t.Fatalf("progress relayed = %v, want it to start at 1", got)
	}

	// The server children of the proxy, found before it exits.
	children := procfs.Descendants(cmd.Process.Pid)
	if len(children) == 0 {
		t.Fatalf("no server child of the proxy (pid %d)", cmd.Process.Pid)
	}

	// stdin EOF: the proxy exits 0 and its server child is gone.
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v\nstderr:\n%s", err, stderr.String())
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Fatalf("proxy exit = %v, want 0\nstderr:\n%s", cmd.ProcessState, stderr.String())
	}
	for _, pid := range children {
		if procfs.Alive(pid) {
			t.Errorf("server child %d survives the proxy", pid)
		}
	}

	// The audit log shows surface proxy and the client's identity.
	raw, err := os.ReadFile(audit)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var rec struct {
			Surface string `json:"surface"`
			Tool    any    `json:"tool"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Surface == "proxy" && strings.Contains(line, "proxy-test-client") && strings.Contains(line, "get-sum") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no audit record with surface proxy and caller proxy-test-client for get-sum:\n%s", raw)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// proxyPeers returns node, server-everything's script and PEERS_DIR, or
// skips the test when they are missing.
func proxyPeers(t *testing.T) (node, everything, peers string) {
	t.Helper()
	return testkit.Node(t), testkit.Peer(t, testkit.ServerEverything), testkit.PeersDir()
}

// httpProxy is a running `openclaw mcp proxy --listen`.
type httpProxy struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:PORT
	token  string
	stderr *e2e.LockedBuffer
	exited chan error
}

var (
	servingLine = regexp.MustCompile(`openclaw mcp proxy: serving (http://[^ ]+)/mcp \(legacy SSE: /sse\)`)
	tokenLine   = regexp.MustCompile(`bearer token \(shown once[^)]*\): (\S+)`)
)

// startHTTPProxy builds the binary, writes an OPENCLAW_HOME listing
// server-everything and a policy blocking everything__get-sum, and starts
// `openclaw mcp proxy --listen 127.0.0.1:0 args…`; it waits for the line
// naming the bound URL.
func startHTTPProxy(t *testing.T, ctx context.Context, env []string, args ...string) *httpProxy {
	t.Helper()
	node, script, _ := proxyPeers(t)
	dir := t.TempDir()
	home, policy := writeEverythingFixture(t, dir, node, script)
	return startHTTPProxyHome(t, dir, home, env, append([]string{"--policy-config", policy, "--audit-log", filepath.Join(dir, "audit.jsonl")}, args...)...)
}

// startHTTPProxyHome builds the binary and starts `openclaw mcp proxy
// --listen 127.0.0.1:0 --connect-wait 0 args…` with OPENCLAW_HOME home and
// its state in dir; it waits for the line naming the bound URL.
func startHTTPProxyHome(t *testing.T, dir, home string, env []string, args ...string) *httpProxy {
	t.Helper()
	return runHTTPProxy(t, buildOpenclaw(t, dir), append([]string{"OPENCLAW_HOME=" + home, "OPENCLAW_STATE_DIR=" + filepath.Join(dir, "state")}, env...), args...)
}

// runHTTPProxy starts bin as `openclaw mcp proxy --listen 127.0.0.1:0
// --connect-wait 0 args…` with env added to the test's environment, and
// waits for the line naming the bound URL; the test's cleanup kills it.
func runHTTPProxy(t *testing.T, bin string, env []string, args ...string) *httpProxy {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"mcp", "proxy", "--listen", "127.0.0.1:0", "--connect-wait", "0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return runHTTPProxyCmd(t, cmd)
}

// runHTTPProxyCmd starts cmd, an `openclaw mcp proxy --listen`, and waits for
// the line naming the bound URL.
func runHTTPProxyCmd(t *testing.T, cmd *exec.Cmd) *httpProxy {
	t.Helper()
	hp := &httpProxy{cmd: cmd, stderr: &e2e.LockedBuffer{}, exited: make(chan error, 1)}
	pr, pw := io.Pipe()
	cmd.Stderr = io.MultiWriter(hp.stderr, pw)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		pw.Close()
		hp.exited <- err
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		if m := tokenLine.FindStringSubmatch(line); m != nil {
			hp.token = m[1]
		}
		if m := servingLine.FindStringSubmatch(line); m != nil {
			hp.base = m[1]
			break
		}
		// --log-format json: the same line as a log record.
		var rec struct{ Msg, URL string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "openclaw mcp proxy: serving" {
			hp.base = strings.TrimSuffix(rec.URL, "/mcp")
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }() // keep stderr flowing
	if hp.base == "" {
		t.Fatalf("the proxy never said where it serves:\n%s", hp.stderr.String())
	}
	return hp
}

// bearerTransport adds Authorization: Bearer to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func (hp *httpProxy) get(t *testing.T, path string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, hp.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// nodeRecordProtocol, in a Node SDK client script before client.connect,
// keeps the revision initialize negotiated in protocol: the SDK's Client
// hands it to the transport's setProtocolVersion, which every transport
// gets here (stdio has none of its own).
const nodeRecordProtocol = `let protocol = "";
const setProtocolVersion = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = (v) => { protocol = v; setProtocolVersion?.(v); };`

// nodeClientProtocol is the revision the Node SDK client (1.32.2, the
// pinned peer) negotiates with the proxy: its newest.
const nodeClientProtocol = "2025-11-25"

// nodeHTTPClient is a Node SDK client over streamable HTTP or legacy SSE
// with a bearer token; it prints {server, tools, echo} as JSON.
const nodeHTTPClient = `
import path from "node:path";
import { createRequire } from "node:module";
const require = createRequire(path.join(process.env.PEERS_DIR, "npm", "package.json"));
const sdk = (p) => import(require.resolve("@modelcontextprotocol/sdk/" + p));
const { Client } = await sdk("client/index.js");
const url = new URL(process.env.URL);
const headers = { Authorization: "Bearer " + process.env.TOKEN };
let transport;
if (process.env.KIND === "sse") {
  const { SSEClientTransport } = await sdk("client/sse.js");
  transport = new SSEClientTransport(url, {
    requestInit: { headers },
    eventSourceInit: { fetch: (u, init) => fetch(u, { ...init, headers: { ...(init?.headers ?? {}), ...headers } }) },
  });
} else {
  const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
  transport = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
}
const client = new Client({ name: "node-http-client", version: "1.0.0" });
` + nodeRecordProtocol + `
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
const r = await client.callTool({ name: "everything__echo", arguments: { message: "from node " + process.env.KIND } });
console.log(JSON.stringify({ server: client.getServerVersion(), protocol, tools, echo: r.content?.[0]?.text ?? "" }));
await client.close();
`

// TestMCPProxyHTTP runs the built binary with --listen in front of
// server-everything and drives it with the go-sdk client (both streamable
// revisions and legacy SSE), the Node SDK client and the inspector CLI;
// checks tokens, Origin, /healthz and /metrics; and ends it with SIGTERM
// while a slow call is in flight, which still gets its result.
func TestMCPProxyHTTP(t *testing.T) {
	t.Parallel()
	node, _, peers := proxyPeers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	hp := startHTTPProxy(t, ctx, nil)
	if hp.token == "" {
		t.Fatalf("no generated token printed:\n%s", hp.stderr.String())
	}
	hc := &http.Client{Transport: bearerTransport{token: hp.token}}

	t.Run("go-sdk clients", func(t *testing.T) {
		for _, tc := range []struct {
			name, version string
			tr            mcp.Transport
		}{
			{"streamable 2025-11-25", "2025-11-25", &mcp.StreamableClientTransport{Endpoint: hp.base + "/mcp", HTTPClient: hc}},
			{"streamable 2026-07-28", "2026-07-28", &mcp.StreamableClientTransport{Endpoint: hp.base + "/mcp", HTTPClient: hc}},
			{"legacy SSE", "", &mcp.SSEClientTransport{Endpoint: hp.base + "/sse", HTTPClient: hc}},
		} {
			goSDKProxyClient(t, ctx, tc.name, tc.tr, tc.version)
		}
	})

	t.Run("node SDK client", func(t *testing.T) {
		for _, kind := range []string{"http", "sse"} {
			endpoint := hp.base + "/mcp"
			if kind == "sse" {
				endpoint = hp.base + "/sse"
			}
			cmd := exec.CommandContext(ctx, node, "--input-type=module", "-e", nodeHTTPClient)
			cmd.Env = append(os.Environ(), "PEERS_DIR="+peers, "URL="+endpoint, "TOKEN="+hp.token, "KIND="+kind)
			out, err := cmd.Output()
			if err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					t.Fatalf("node client (%s): %v\n%s", kind, err, ee.Stderr)
				}
				t.Fatalf("node client (%s): %v", kind, err)
			}
			var got struct {
				Server   struct{ Name string }
				Protocol string
				Tools    []string
				Echo     string
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("node client (%s) output %q: %v", kind, out, err)
			}
			if got.Server.Name != "openclaw-go-proxy" || got.Protocol != nodeClientProtocol || !slices.Contains(got.Tools, "everything__echo") || got.Echo != "Echo: from node "+kind {
				t.Fatalf("node client (%s) = %+v", kind, got)
			}
		}
	})

	t.Run("inspector CLI", func(t *testing.T) {
		cli := testkit.Peer(t, testkit.InspectorCLI)
		for _, path := range []string{"/mcp", "/sse"} {
			cmd := exec.CommandContext(ctx, node, cli, hp.base+path, "--method", "tools/call", "--tool-name", "everything__echo",
				"--tool-arg", "message=from inspector", "--header", "Authorization: Bearer "+hp.token)
			// It reads ../package.json from its working directory.
			cmd.Dir = filepath.Join(peers, "npm/node_modules")
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "Echo: from inspector") {
				t.Fatalf("inspector over %s: %v\n%s", path, err, out)
			}
		}
		// Without the token it is refused, and says why.
		cmd := exec.CommandContext(ctx, node, cli, hp.base+"/mcp", "--method", "tools/list")
		cmd.Dir = filepath.Join(peers, "npm/node_modules")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "missing bearer token") {
			t.Fatalf("inspector without a token: %v\n%s", err, out)
		}
	})

	t.Run("auth and origin", func(t *testing.T) {
		for _, tc := range []struct {
			name, path string
			header     map[string]string
			want       int
		}{
			{"no token", "/mcp", nil, http.StatusUnauthorized},
			{"wrong token", "/mcp", map[string]string{"Authorization": "Bearer " + hp.token + "x"}, http.StatusUnauthorized},
			{"sse no token", "/sse", nil, http.StatusUnauthorized},
			{"metrics no token", "/metrics", nil, http.StatusUnauthorized},
			{"foreign origin", "/metrics", map[string]string{"Authorization": "Bearer " + hp.token, "Origin": "https://evil.example.com"}, http.StatusForbidden},
		} {
			if code, body := hp.get(t, tc.path, tc.header); code != tc.want {
				t.Errorf("%s: GET %s = %d %s, want %d", tc.name, tc.path, code, body, tc.want)
			}
		}
	})

	t.Run("healthz and metrics", func(t *testing.T) {
		code, body := hp.get(t, "/healthz", nil)
		var h struct {
			OK      bool
			Tools   int
			Servers struct{ Connected, Total int }
		}
		if err := json.Unmarshal([]byte(body), &h); err != nil || code != 200 || !h.OK || h.Tools < 13 || h.Servers.Connected != 1 || h.Servers.Total != 1 {
			t.Fatalf("healthz = %d %s", code, body)
		}
		if strings.Contains(body, hp.token) {
			t.Fatal("healthz shows the token")
		}
		code, body = hp.get(t, "/metrics", map[string]string{"Authorization": "Bearer " + hp.token})
		if code != 200 {
			t.Fatalf("metrics = %d %s", code, body)
		}
		for _, want := range []string{
			`openclaw_proxy_tool_calls_total{outcome="ok",tool="everything__echo"} 7`, // 3 go + 2 node + 2 inspector
			`openclaw_proxy_tool_calls_total{outcome="blocked",tool="everything__get-sum"} 3`,
			`openclaw_policy_decisions_total{decision="block",hook="before_tool_call"} 3`,
			`openclaw_proxy_tool_call_duration_seconds_bucket{tool="everything__echo",le="+Inf"} 7`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
	})

	t.Run("graceful shutdown", func(t *testing.T) {
		progressed := make(chan struct{}, 1)
		client := mcp.NewClient(&mcp.Implementation{Name: "slow-client", Version: "1"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
				select {
				case progressed <- struct{}{}:
				default:
				}
			},
		})
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hp.base + "/mcp", HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		children := procfs.Descendants(hp.cmd.Process.Pid)
		if len(children) == 0 {
			t.Fatal("no server child of the proxy")
		}
		type result struct {
			res *mcp.CallToolResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			p := &mcp.CallToolParams{Name: "everything__trigger-long-running-operation", Arguments: map[string]any{"duration": 3, "steps": 3}}
			p.SetProgressToken("slow")
			res, err := cs.CallTool(ctx, p)
			done <- result{res, err}
		}()
		<-progressed // the call is running upstream
		if err := hp.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil || r.res.IsError || !strings.Contains(r.res.Content[0].(*mcp.TextContent).Text, "completed") {
			t.Fatalf("slow call across SIGTERM = %+v, %v\n%s", r.res, r.err, hp.stderr.String())
		}
		if err := <-hp.exited; err != nil {
			t.Fatalf("proxy exit = %v, want 0\n%s", err, hp.stderr.String())
		}
		for _, pid := range children {
			if procfs.Alive(pid) {
				t.Errorf("server child %d survives the proxy", pid)
			}
		}
		// The generated token was printed once, and only on its line.
		if n := strings.Count(hp.stderr.String(), hp.token); n != 1 {
			t.Errorf("token appears %d times on stderr, want 1", n)
		}
	})
}

// TestMCPProxyHTTPNoAuthLoopback serves with --no-auth on loopback: no
// token is made or needed.
func TestMCPProxyHTTPNoAuthLoopback(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hp := startHTTPProxy(t, ctx, nil, "--no-auth")
	if hp.token != "" {
		t.Fatalf("--no-auth printed a token")
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "noauth", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hp.base + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect without a token: %v", err)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_ = cs.Close()
	_ = hp.cmd.Process.Signal(syscall.SIGINT)
	if err := <-hp.exited; err != nil {
		t.Fatalf("exit after SIGINT = %v\n%s", err, hp.stderr.String())
	}
}

// TestMCPProxyHTTPTokenSources: --token-file wins over the environment,
// which wins over a generated token; neither is printed.
func TestMCPProxyHTTPTokenSources(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hp := startHTTPProxy(t, ctx, []string{proxyTokenEnv + "=from-env"}, "--token-file", file)
	for tok, want := range map[string]int{"from-file": 200, "from-env": 401} {
		if code, body := hp.get(t, "/metrics", map[string]string{"Authorization": "Bearer " + tok}); code != want {
			t.Errorf("token %s: /metrics = %d %s, want %d", tok, code, body, want)
		}
	}
	_ = hp.cmd.Process.Signal(syscall.SIGTERM)
	<-hp.exited
	if s := hp.stderr.String(); hp.token != "" || strings.Contains(s, "from-file") || strings.Contains(s, "from-env") {
		t.Fatalf("a given token was printed:\n%s", s)
	}
}

// TestResolveHTTP covers the flag rules of --listen, --no-auth and the
// token sources, without starting anything.
func TestResolveHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "tok")
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(tokFile, []byte("  file-token \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokens, []byte(`{"tokens":[{"name":"ci","token":"ci-token"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == proxyTokenEnv {
				return v
			}
			return ""
		}
	}
	tests := []struct {
		name      string
		c         proxyConfig
		env       string
		wantErr   string
		wantToken string
		generated bool
	}{
		{name: "stdio", c: proxyConfig{}},
		{name: "stdio with --no-auth", c: proxyConfig{noAuth: true}, wantErr: "need --listen"},
		{name: "no port", c: proxyConfig{listen: "127.0.0.1"}, wantErr: `--listen "127.0.0.1": want HOST:PORT, e.g. 127.0.0.1:8765`},
		{name: "empty port", c: proxyConfig{listen: "127.0.0.1:"}, wantErr: "want HOST:PORT"},
		{name: "bad port", c: proxyConfig{listen: "127.0.0.1:http"}, wantErr: `port "http" is not a number`},
		{name: "no-auth on 0.0.0.0", c: proxyConfig{listen: "0.0.0.0:8765", noAuth: true}, wantErr: `--no-auth refused: listen address "0.0.0.0:8765" is not loopback`},
		{name: "no-auth on all interfaces", c: proxyConfig{listen: ":8765", noAuth: true}, wantErr: "is not loopback"},
		{name: "no-auth on a LAN address", c: proxyConfig{listen: "192.168.1.5:8765", noAuth: true}, wantErr: "is not loopback"},
		{name: "no-auth on localhost", c: proxyConfig{listen: "localhost:8765", noAuth: true}},
		{name: "no-auth on ::1", c: proxyConfig{listen: "[::1]:8765", noAuth: true}},
		{name: "no-auth and token file", c: proxyConfig{listen: "127.0.0.1:1", noAuth: true, tokenFile: tokFile}, wantErr: "contradict"},
		{name: "token file", c: proxyConfig{listen: "0.0.0.0:8765", tokenFile: tokFile}, env: "env-token", wantToken: "file-token"},
		{name: "empty token file", c: proxyConfig{listen: "127.0.0.1:1", tokenFile: empty}, wantErr: "is empty"},
		{name: "missing token file", c: proxyConfig{listen: "127.0.0.1:1", tokenFile: filepath.Join(dir, "nope")}, wantErr: "no such file"},
		{name: "env token", c: proxyConfig{listen: "127.0.0.1:1"}, env: " env-token ", wantToken: "env-token"},
		{name: "generated", c: proxyConfig{listen: "127.0.0.1:8765"}, generated: true},
		{name: "metrics-listen loopback", c: proxyConfig{metricsListen: "127.0.0.1:0", noAuth: true}},
		{name: "metrics-listen not loopback", c: proxyConfig{metricsListen: "0.0.0.0:9000"}, wantErr: "want a loopback address"},
		{name: "both listens", c: proxyConfig{listen: "127.0.0.1:1", metricsListen: "127.0.0.1:2"}, wantErr: "--metrics-listen is for stdio mode"},
		{name: "issuer without audience", c: proxyConfig{listen: "127.0.0.1:1", authIssuer: "https://idp"}, wantErr: "--auth-issuer and --auth-audience go together"},
		{name: "auth in stdio mode", c: proxyConfig{tokensFile: tokens}, wantErr: "need --listen"},
		{name: "scope without identities", c: proxyConfig{listen: "127.0.0.1:1", authScopes: []string{"mcp"}}, wantErr: "give --auth-issuer or --tokens-file"},
		{name: "claim without issuer", c: proxyConfig{listen: "127.0.0.1:1", tokensFile: tokens, authClaims: []string{"groups"}}, wantErr: "--auth-claim needs --auth-issuer"},
		{name: "tokens file and no-auth", c: proxyConfig{listen: "127.0.0.1:1", tokensFile: tokens, noAuth: true}, wantErr: "contradicts"},
		{name: "bad tokens file", c: proxyConfig{listen: "127.0.0.1:1", tokensFile: empty}, wantErr: "--tokens-file:"},
		// Identities replace the generated (and the environment's) token.
		{name: "tokens file", c: proxyConfig{listen: "127.0.0.1:1", tokensFile: tokens}, env: "env-token"},
		{name: "tokens file and token file", c: proxyConfig{listen: "127.0.0.1:1", tokensFile: tokens, tokenFile: tokFile}, wantToken: "file-token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ph, err := resolveHTTP(&tc.c, env(tc.env))
			if tc.wantErr != "" {
				var ee *exitError
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &ee) || ee.code != 2 {
					t.Fatalf("err = %v, want exit 2 with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.c.listen == "" && tc.c.metricsListen == "" {
				if ph != nil {
					t.Fatalf("stdio mode resolved HTTP %+v", ph)
				}
				return
			}
			switch {
			case tc.generated:
				if !ph.generated || len(ph.token) != 43 { // 32 bytes, base64url without padding
					t.Fatalf("generated token %q (generated %v), want 43 base64url characters", ph.token, ph.generated)
				}
			case ph.token != tc.wantToken || ph.generated:
				t.Fatalf("token = %q (generated %v), want %q", ph.token, ph.generated, tc.wantToken)
			}
		})
	}
}

// TestMCPProxyNoAuthRefusedBinary: the binary refuses --no-auth on
// 0.0.0.0 before starting anything, naming the address.
func TestMCPProxyNoAuthRefusedBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := buildOpenclaw(t, dir)
	cmd := exec.Command(bin, "mcp", "proxy", "--listen", "0.0.0.0:8765", "--no-auth")
	cmd.Env = append(os.Environ(), "OPENCLAW_HOME="+filepath.Join(dir, "home"), "OPENCLAW_STATE_DIR="+filepath.Join(dir, "state"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), `listen address "0.0.0.0:8765" is not loopback`) {
		t.Fatalf("--no-auth on 0.0.0.0: %v\n%s", err, out)
	}
}

// TestMCPProxyStdioMetricsListen: in stdio mode, --metrics-listen serves
// /metrics and /healthz (and nothing of MCP) while the client talks on
// stdin/stdout; the metrics count its calls and blocks.
func TestMCPProxyStdioMetricsListen(t *testing.T) {
	t.Parallel()
	node, script, _ := proxyPeers(t)
	dir := t.TempDir()
	bin := buildOpenclaw(t, dir)
	home, policy := writeEverythingFixture(t, dir, node, script)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.Command(bin, "mcp", "proxy", "--metrics-listen", "127.0.0.1:0", "--no-auth", "--connect-wait", "0",
		"--policy-config", policy, "--audit-log", filepath.Join(dir, "audit.jsonl"))
	cmd.Env = append(os.Environ(), "OPENCLAW_HOME="+home, "OPENCLAW_STATE_DIR="+filepath.Join(dir, "state"))
	stderr := &e2e.LockedBuffer{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-metrics", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	// The metrics line is printed before stdio is served, but os/exec copies
	// the child's stderr through a pipe on its own goroutine, so it may land
	// in the buffer a moment after the handshake answered.
	metricsLine := regexp.MustCompile(`metrics on (http://[^ ]+)/metrics`)
	var m []string
	for deadline := time.Now().Add(10 * time.Second); m == nil && time.Now().Before(deadline); {
		if m = metricsLine.FindStringSubmatch(stderr.String()); m == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if m == nil {
		t.Fatalf("no metrics address on stderr:\n%s", stderr.String())
	}
	base := m[1]
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "x"}}); err != nil {
		t.Fatal(err)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__get-sum", Arguments: map[string]any{"a": 1, "b": 2}}); err != nil || !res.IsError {
		t.Fatalf("get-sum = %+v, %v; want blocked", res, err)
	}
	get := func(path string) (int, string) {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, body := get("/metrics")
	if code != 200 || !strings.Contains(body, `openclaw_proxy_tool_calls_total{outcome="ok",tool="everything__echo"} 1`) ||
		!strings.Contains(body, `openclaw_proxy_tool_calls_total{outcome="blocked",tool="everything__get-sum"} 1`) ||
		// Per module, from the engine's audit records.
		!strings.Contains(body, `openclaw_policy_module_decisions_total{decision="block",hook="before_tool_call",module="rules"} 1`) ||
		!strings.Contains(body, `openclaw_policy_module_decisions_total{decision="allow",hook="before_tool_call",module="rules"} 1`) {
		t.Fatalf("metrics = %d\n%s", code, body)
	}
	if code, body := get("/healthz"); code != 200 || !strings.Contains(body, `"ok":true`) {
		t.Fatalf("healthz = %d %s", code, body)
	}
	if code, _ := get("/mcp"); code != http.StatusNotFound {
		t.Fatalf("/mcp on the metrics address = %d, want 404", code)
	}
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v\n%s", err, stderr.String())
	}
	if !cmd.ProcessState.Success() {
		t.Fatalf("proxy exit = %v\n%s", cmd.ProcessState, stderr.String())
	}
}

// TestMCPProxyReload runs the built binary as `openclaw mcp proxy` (stdio)
// with a go-sdk client, edits openclaw.json and runs `openclaw mcp reload`:
// the client is told the tools changed and sees the added server's tools;
// a removed server's child process stops; the tool policy is read again.
func TestMCPProxyReload(t *testing.T) {
	server := testkit.Peer(t, testkit.GoEverythingServer)
	dir := t.TempDir()
	bin := buildOpenclaw(t, dir)
	home := filepath.Join(dir, "home")
	cfgPath := filepath.Join(home, ".openclaw", "openclaw.json")
	tag := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	entry := func(name string) map[string]any {
		return map[string]any{"command": server, "env": map[string]any{"OPENCLAW_PROXY_RELOAD_TEST": tag + "-" + name}}
	}
	pids := func(name string) []int { return procfs.WithEnv("OPENCLAW_PROXY_RELOAD_TEST=" + tag + "-" + name) }
	writeJSON(t, cfgPath, map[string]any{"mcp": map[string]any{"servers": map[string]any{"one": entry("one")}}})
	env := append(os.Environ(), "OPENCLAW_HOME="+home, "OPENCLAW_STATE_DIR="+filepath.Join(dir, "state"))

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.Command(bin, "mcp", "proxy", "--connect-wait", "0", "--audit-log", filepath.Join(dir, "audit.jsonl"))
	cmd.Env = env
	stderr := &e2e.LockedBuffer{}
	cmd.Stderr = stderr
	pc := startStdioProxy(ctx, t, cmd, "reload-test")
	cs, changed, tools := pc.cs, pc.changed, pc.tools
	if names := tools(); !slices.Contains(names, "one__test_simple_text") {
		t.Fatalf("tools before the reload = %v", names)
	}
	onePIDs := pids("one")
	if len(onePIDs) == 0 {
		t.Fatal("no child process of server one (the marker env did not reach it)")
	}
	reload := func(want string) {
		t.Helper()
		rc := exec.CommandContext(ctx, bin, "mcp", "reload")
		rc.Env = env
		out, err := rc.CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("openclaw mcp reload: %v\n%s\nwant %q; proxy stderr:\n%s", err, out, want, stderr.String())
		}
	}
	waitChanged := func() {
		t.Helper()
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("no notifications/tools/list_changed after the reload\nstderr:\n%s", stderr.String())
		}
	}

	// Added: the client is told, sees the tools and can call them.
	writeJSON(t, cfgPath, map[string]any{"mcp": map[string]any{"servers": map[string]any{"one": entry("one"), "two": entry("two")}}})
	reload("reloaded: 1 added (two), 0 removed, 0 changed, 1 unchanged")
	waitChanged()
	names := tools()
	if !slices.Contains(names, "two__test_simple_text") || !slices.Contains(names, "one__test_simple_text") {
		t.Fatalf("tools after adding two = %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "two__test_simple_text"})
	if err != nil || res.IsError {
		t.Fatalf("two__test_simple_text = %+v, %v", res, err)
	}
	if p := pids("one"); !slices.Equal(p, onePIDs) {
		t.Errorf("unchanged server one: processes %v, were %v", p, onePIDs)
	}

	// Removed, with a tool policy: one's child stops, the denied tool goes.
	writeJSON(t, cfgPath, map[string]any{
		"mcp":   map[string]any{"servers": map[string]any{"two": entry("two")}},
		"tools": map[string]any{"deny": []string{"two__test_error_handling"}},
	})
	reload("reloaded: 0 added, 1 removed (one), 0 changed, 1 unchanged")
	waitChanged()
	names = tools()
	if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "one__") }) ||
		slices.Contains(names, "two__test_error_handling") || !slices.Contains(names, "two__test_simple_text") {
		t.Errorf("tools after removing one and denying two__test_error_handling = %v", names)
	}
	deadline := time.Now().Add(30 * time.Second) // a hang guard, not a timing assertion
	for p := pids("one"); len(p) > 0; p = pids("one") {
		if time.Now().After(deadline) {
			t.Fatalf("server one's processes %v survive its removal", p)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// An invalid file is refused; the servers stay.
	if err := os.WriteFile(cfgPath, []byte(`{"mcp": {"servers": {"two": `+string(mustJSON(t, entry("two")))+`}}, "tools": {"profile": "nope"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	rc := exec.CommandContext(ctx, bin, "mcp", "reload")
	rc.Env = env
	if out, err := rc.CombinedOutput(); err == nil || !strings.Contains(string(out), "tools.profile") {
		t.Errorf("reload of an invalid tools.profile: %v\n%s", err, out)
	}
	if names := tools(); !slices.Contains(names, "two__test_simple_text") {
		t.Errorf("tools after a refused reload = %v", names)
	}
	// The same file refuses a start, naming the key.
	start := exec.CommandContext(ctx, bin, "mcp", "proxy")
	start.Env = env
	if out, err := start.CombinedOutput(); err == nil || !strings.Contains(string(out), "tools.profile") {
		t.Errorf("start with an invalid tools.profile: %v\n%s", err, out)
	}

	twoPIDs := pids("two")
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v\nstderr:\n%s", err, stderr.String())
	}
	for _, pid := range twoPIDs {
		if procfs.Alive(pid) {
			t.Errorf("server two's process %d survives the proxy", pid)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nodeStdioClient spawns the proxy with the Node SDK's stdio transport and
// prints {tools, echo, blocked} as JSON.
const nodeStdioClient = `
import path from "node:path";
import { createRequire } from "node:module";
const require = createRequire(path.join(process.env.PEERS_DIR, "npm", "package.json"));
const sdk = (p) => import(require.resolve("@modelcontextprotocol/sdk/" + p));
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const args = JSON.parse(process.env.PROXY_ARGS);
const transport = new StdioClientTransport({ command: process.env.BIN, args, env: { ...process.env }, stderr: "ignore" });
const client = new Client({ name: "node-stdio-client", version: "1.0.0" });
` + nodeRecordProtocol + `
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
const r = await client.callTool({ name: "everything__echo", arguments: { message: "from node stdio" } });
const b = await client.callTool({ name: "everything__get-sum", arguments: { a: 1, b: 2 } });
console.log(JSON.stringify({ protocol, tools, echo: r.content?.[0]?.text ?? "", blocked: b.isError === true, reason: b.content?.[0]?.text ?? "" }));
await client.close();
`

// goSDKProxyClient drives the proxy in front of server-everything with a
// go-sdk client on tr offering version (the newest when ""): an echo, a
// call the policy blocks, and a call during which the server elicits,
// answered by the client (on 2026-07-28 as an input request and the
// client's retry, on older revisions as a request relayed to it).
func goSDKProxyClient(t *testing.T, ctx context.Context, name string, tr mcp.Transport, version string) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "go-proxy-client", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada " + name}}, nil
		},
	})
	cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("%s: connect: %v", name, err)
	}
	defer cs.Close()
	if version != "" && cs.InitializeResult().ProtocolVersion != version {
		t.Errorf("%s: negotiated %s, want %s", name, cs.InitializeResult().ProtocolVersion, version)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": name}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, name) {
		t.Fatalf("%s: echo = %+v, %v", name, res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__get-sum", Arguments: map[string]any{"a": 1, "b": 2}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "sums are off limits") {
		t.Fatalf("%s: blocked get-sum = %+v, %v", name, res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__trigger-elicitation-request"})
	var texts []string
	if err == nil {
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
	}
	if err != nil || res.IsError || !strings.Contains(strings.Join(texts, "\n"), "Ada "+name) {
		t.Errorf("%s: elicitation during a call = %q, %v; want the client's answer in the result", name, texts, err)
	}
}

// TestMCPProxyStdioNodeAndInspector: the Node SDK client and the inspector
// CLI spawn `openclaw mcp proxy` over stdio, list, call, and see a policy
// block as a tool error with the module's reason.
func TestMCPProxyStdioNodeAndInspector(t *testing.T) {
	t.Parallel()
	node, script, peers := proxyPeers(t)
	dir := t.TempDir()
	bin := buildOpenclaw(t, dir)
	home, policy := writeEverythingFixture(t, dir, node, script)
	proxyArgs := []string{"mcp", "proxy", "--connect-wait", "0", "--policy-config", policy, "--audit-log", filepath.Join(dir, "audit.jsonl")}
	env := []string{"OPENCLAW_HOME=" + home, "OPENCLAW_STATE_DIR=" + filepath.Join(dir, "state")}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	t.Run("Node SDK", func(t *testing.T) {
		src := filepath.Join(dir, "client.mjs")
		if err := os.WriteFile(src, []byte(nodeStdioClient), 0o600); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(proxyArgs)
		cmd := exec.CommandContext(ctx, node, src)
		cmd.Env = append(os.Environ(), append(env, "PEERS_DIR="+peers, "BIN="+bin, "PROXY_ARGS="+string(a))...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node stdio client: %v\n%s", err, out)
		}
		var got struct {
			Protocol string
			Tools    []string
			Echo     string
			Blocked  bool
			Reason   string
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("node output: %v\n%s", err, out)
		}
		if got.Protocol != nodeClientProtocol || !slices.Contains(got.Tools, "everything__echo") || got.Echo != "Echo: from node stdio" || !got.Blocked || !strings.Contains(got.Reason, "sums are off limits") {
			t.Fatalf("node stdio client saw %+v", got)
		}
	})

	t.Run("go-sdk clients", func(t *testing.T) {
		for _, version := range []string{"2025-11-25", "2026-07-28"} {
			cmd := exec.CommandContext(ctx, bin, proxyArgs...)
			cmd.Env = append(os.Environ(), env...)
			goSDKProxyClient(t, ctx, "stdio "+version, &mcp.CommandTransport{Command: cmd}, version)
		}
	})

	t.Run("inspector CLI", func(t *testing.T) {
		cli := testkit.Peer(t, testkit.InspectorCLI)
		args := append(append([]string{cli, bin}, proxyArgs...), "--method", "tools/call", "--tool-name", "everything__echo", "--tool-arg", "message=from inspector stdio")
		cmd := exec.CommandContext(ctx, node, args...)
		cmd.Dir = filepath.Join(peers, "npm/node_modules") // it reads ../package.json
		// The inspector gives its child only HOME, PATH and a few more
		// (the MCP SDK's default environment): the OpenClaw home is HOME's.
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Echo: from inspector stdio") {
			t.Fatalf("inspector over stdio: %v\n%s", err, out)
		}
	})
}

// TestCheckProxyFlagsLimits: HTTP timeouts and caps that are not positive
// are usage errors naming the flag.
func TestCheckProxyFlagsLimits(t *testing.T) {
	t.Parallel()
	ok := proxyConfig{upstreamProto: defaultUpstreamProtocol, shutdownTimeout: time.Second, maxMessage: 1,
		headerTimeout: time.Second, bodyTimeout: time.Second, maxConns: 1, maxSessions: 1}
	for _, tc := range []struct {
		name string
		edit func(*proxyConfig)
		want string
	}{
		{"header timeout", func(c *proxyConfig) { c.headerTimeout = 0 }, "--read-header-timeout 0s: want a positive duration"},
		{"body timeout", func(c *proxyConfig) { c.bodyTimeout = -time.Second }, "--body-timeout -1s: want a positive duration"},
		{"connections", func(c *proxyConfig) { c.maxConns = 0 }, "--max-connections 0: want a positive number"},
		{"sessions", func(c *proxyConfig) { c.maxSessions = -1 }, "--max-sessions -1: want a positive number"},
	} {
		c := ok
		tc.edit(&c)
		if err := checkProxyFlags(&c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := checkProxyFlags(&ok); err != nil {
		t.Fatalf("valid limits refused: %v", err)
	}
}

// TestCheckProxyFlags: an unknown MCP revision, a shutdown timeout that
// is not positive and a message cap that is not a positive size are usage
// errors naming what is wanted.
func TestCheckProxyFlags(t *testing.T) {
	t.Parallel()
	const max = 16 << 20 // proxy.DefaultMaxMessageBytes
	for _, tc := range []struct {
		name, proto string
		timeout     time.Duration
		max         int64
		want        string // "" accepts
	}{
		{"defaults", defaultUpstreamProtocol, 10 * time.Second, max, ""},
		{"newest", "", time.Second, max, ""},
		{"oldest", "2024-11-05", time.Second, max, ""},
		{"bogus revision", "bogus", time.Second, max, `--upstream-protocol "bogus": not an MCP revision this proxy speaks; want one of 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28`},
		{"negative timeout", "2025-11-25", -time.Second, max, "--shutdown-timeout -1s: want a positive duration"},
		{"zero timeout", "2025-11-25", 0, max, "--shutdown-timeout 0s: want a positive duration"},
		{"small cap", "2025-11-25", time.Second, 1, ""},
		{"zero cap", "2025-11-25", time.Second, 0, "--max-message-bytes 0: want a positive size"},
		{"huge cap", "2025-11-25", time.Second, 1 << 40, "--max-message-bytes 1099511627776: want a positive size in bytes up to 2147483647"},
		{"negative connect wait", "2025-11-25", time.Second, max, "--connect-wait -1s: want a duration of 0 (wait for every server) or more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &proxyConfig{upstreamProto: tc.proto, shutdownTimeout: tc.timeout, maxMessage: tc.max,
				headerTimeout: time.Second, bodyTimeout: time.Second, maxConns: 1, maxSessions: 1}
			if tc.name == "negative connect wait" {
				c.connectWait = -time.Second
			}
			err := checkProxyFlags(c)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a usage error (exit 2) containing %q", err, tc.want)
			}
		})
	}
}

// TestMCPProxyStdioDrain runs the built binary over stdio with
// server-everything: SIGTERM during a call still writes the call's
// answer; requests piped before EOF are all answered; and the server
// child is gone when the proxy exits.
func TestMCPProxyStdioDrain(t *testing.T) {
	t.Parallel()
	node, everything, _ := proxyPeers(t)
	dir := t.TempDir()
	bin := buildOpenclaw(t, dir)
	// The server is started through sh so that it can leave its pid.
	pidFile := filepath.Join(dir, "server.pid")
	home := filepath.Join(dir, "home")
	writeJSON(t, filepath.Join(home, ".openclaw", "openclaw.json"), map[string]any{"mcp": map[string]any{"servers": map[string]any{
		"everything": map[string]any{"command": "/bin/sh", "args": []string{"-c", `echo $$ > "$0"; exec "$1" "$2" stdio`, pidFile, node, everything}},
	}}})
	env := append(os.Environ(), "OPENCLAW_HOME="+home, "OPENCLAW_STATE_DIR="+filepath.Join(dir, "state"))
	const (
		initialize  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"drain-test","version":"1"}}}`
		initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	)
	answers := func(t *testing.T, out []byte) map[float64]map[string]any {
		t.Helper()
		got := map[float64]map[string]any{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("stdout line %q: %v", line, err)
			}
			if id, ok := m["id"].(float64); ok && m["method"] == nil {
				got[id] = m
			}
		}
		return got
	}
	serverGone := func(t *testing.T) {
		t.Helper()
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatalf("server pid: %v", err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("server pid %q: %v", b, err)
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("server child %d still exists after the proxy exited (kill 0: %v)", pid, err)
		}
	}

	t.Run("SIGTERM mid-call writes the answer", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "mcp", "proxy")
		cmd.Env = env
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr e2e.LockedBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"everything__trigger-long-running-operation","arguments":{"duration":2,"steps":2},"_meta":{"progressToken":"p"}}}`
		fmt.Fprintf(stdin, "%s\n%s\n%s\n", initialize, initialized, call)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var result map[string]any
		signalled := false
		for result == nil && sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("stdout line %q: %v", sc.Text(), err)
			}
			switch {
			case m["method"] == "notifications/progress" && !signalled:
				// The call is in flight: stop the proxy now.
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				signalled = true
			case m["id"] == float64(2) && m["method"] == nil:
				result = m
			}
		}
		if !signalled || result == nil {
			t.Fatalf("signalled=%v, answer to the call %v; stderr:\n%s", signalled, result, stderr.String())
		}
		if !strings.Contains(fmt.Sprint(result["result"]), "Long running operation completed") {
			t.Errorf("call in flight at SIGTERM answered %v, want its result", result)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("proxy exit after SIGTERM: %v; stderr:\n%s", err, stderr.String())
		}
		serverGone(t)
	})

	t.Run("requests piped before EOF are all answered", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "mcp", "proxy")
		cmd.Env = env
		echo := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"everything__echo","arguments":{"message":"piped"}}}`
		cmd.Stdin = strings.NewReader(initialize + "\n" + initialized + "\n" + echo + "\n")
		var stderr e2e.LockedBuffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("proxy: %v; stderr:\n%s", err, stderr.String())
		}
		got := answers(t, out)
		if got[1]["result"] == nil {
			t.Errorf("initialize answered %v; stdout:\n%s", got[1], out)
		}
		if !strings.Contains(fmt.Sprint(got[2]["result"]), "Echo: piped") {
			t.Errorf("echo answered %v; stdout:\n%s", got[2], out)
		}
		serverGone(t)
	})
}

// writeEverythingFixture writes, under dir, an OpenClaw home whose
// openclaw.json lists server-everything over stdio (node script), and a
// policy file: builtin:rules blocking everything__get-sum ("sums are off
// limits"), then builtin:sanitizer. It returns the home and the policy file.
func writeEverythingFixture(t *testing.T, dir, node, script string) (home, policy string) {
	t.Helper()
	home = filepath.Join(dir, "home")
	writeJSON(t, filepath.Join(home, ".openclaw", "openclaw.json"), map[string]any{"mcp": map[string]any{"servers": map[string]any{
		"everything": map[string]any{"command": node, "args": []string{script, "stdio"}},
	}}})
	policy = filepath.Join(dir, "policy.json")
	writeJSON(t, policy, map[string]any{"modules": []any{map[string]any{
		"name": "rules", "source": "builtin:rules",
		"config": map[string]any{"default": "allow", "rules": []any{
			map[string]any{"tool": "everything__get-sum", "decision": "block", "reason": "sums are off limits"},
		}},
	}, map[string]any{"name": "sanitizer", "source": "builtin:sanitizer"}}})
	return home, policy
}

// TestMCPProxyStdioFrames runs the built binary over stdio: a request
// whose id is null and a line with trailing data are each answered with a
// JSON-RPC error whose id is null, a request over --max-message-bytes with
// "message too large" by its id, and the session serves the request after
// them.
func TestMCPProxyStdioFrames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := buildOpenclaw(t, dir)
	home := filepath.Join(dir, "home")
	writeJSON(t, filepath.Join(home, ".openclaw", "openclaw.json"), map[string]any{"mcp": map[string]any{"servers": map[string]any{}}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "mcp", "proxy", "--max-message-bytes", "4096")
	cmd.Env = append(os.Environ(), "OPENCLAW_HOME="+home, "OPENCLAW_STATE_DIR="+filepath.Join(dir, "state"))
	var stderr e2e.LockedBuffer
	cmd.Stderr = &stderr
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"frames","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"},`,
		`{"jsonrpc":"2.0","id":3,"method":"ping","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
	}, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("proxy: %v; stderr:\n%s", err, stderr.String())
	}
	var errs []string
	answered := map[float64]int{} // id → error code, 0 for a result
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m struct {
			ID    *float64 `json:"id"`
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		switch {
		case m.ID == nil && m.Error != nil:
			errs = append(errs, fmt.Sprintf("%d %s", m.Error.Code, m.Error.Message))
		case m.ID != nil && m.Error != nil:
			answered[*m.ID] = m.Error.Code
		case m.ID != nil:
			answered[*m.ID] = 0
		}
	}
	want := []string{`-32600 Invalid Request: the id of request "tools/list" is null`, "-32700 Parse error: invalid character ','"}
	if len(errs) != len(want) {
		t.Fatalf("null-id errors %q, want %d of them", errs, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i], w) {
			t.Errorf("error %d = %q, want %q…", i, errs[i], w)
		}
	}
	if want := map[float64]int{1: 0, 3: -32010, 4: 0}; !maps.Equal(answered, want) {
		t.Errorf("answers by id %v, want %v (2 refused with id null, 3 too large)", answered, want)
	}
}

// TestMCPStatusShowsSkippedLines: a running `mcp proxy` whose stdio server
// wrote 300 junk lines on stdout publishes the count, and `mcp status`
// shows it for that server.
func TestMCPStatusShowsSkippedLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := buildOpenclaw(t, dir)
	junky := filepath.Join(dir, "misbehave")
	if out, err := exec.Command("go", "build", "-o", junky, "../../transport/testdata/misbehave").CombinedOutput(); err != nil {
		t.Fatalf("building the misbehave server: %v\n%s", err, out)
	}
	home := filepath.Join(dir, "home")
	writeJSON(t, filepath.Join(home, ".openclaw", "openclaw.json"), map[string]any{"mcp": map[string]any{"servers": map[string]any{
		"junky": map[string]any{"command": junky, "args": []string{"-raw"}},
	}}})
	env := append(os.Environ(), "OPENCLAW_HOME="+home, "OPENCLAW_STATE_DIR="+filepath.Join(dir, "state"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "mcp", "proxy")
	cmd.Env = env
	var stderr e2e.LockedBuffer
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "status-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr.String())
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "junky__junk", Arguments: map[string]any{"lines": 300}})
	if err != nil || res.IsError {
		t.Fatalf("junk: %+v %v\nstderr:\n%s", res, err, stderr.String())
	}
	if n := strings.Count(stderr.String(), "not JSON-RPC 2.0"); n > 12 {
		t.Errorf("%d warnings about skipped lines for 300 junk lines, want at most a dozen", n)
	}
	// The proxy publishes every few seconds: ask until it has (a hang
	// guard, not a timing check).
	for {
		st := exec.CommandContext(ctx, bin, "mcp", "status", "--json")
		st.Env = env
		out, err := st.Output()
		if err != nil {
			t.Fatalf("mcp status: %v", err)
		}
		var got struct {
			Servers []struct {
				Name    string  `json:"name"`
				Skipped float64 `json:"skippedStdoutLines"`
			} `json:"servers"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("mcp status --json: %v\n%s", err, out)
		}
		if len(got.Servers) == 1 && got.Servers[0].Skipped == 300 {
			break
		}
		if len(got.Servers) != 1 || got.Servers[0].Skipped > 300 || ctx.Err() != nil {
			t.Fatalf("mcp status --json = %s, want junky with skippedStdoutLines 300", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	st := exec.CommandContext(ctx, bin, "mcp", "status")
	st.Env = env
	if out, err := st.Output(); err != nil || !strings.Contains(string(out), "- junky: stdio stdout-lines-skipped=300") {
		t.Errorf("mcp status = %s (%v), want junky with stdout-lines-skipped=300", out, err)
	}
}

// stdioProxy is a go-sdk client of `openclaw mcp proxy` run over stdio.
type stdioProxy struct {
	cs *mcp.ClientSession
	// changed receives one value per notifications/tools/list_changed
	// (capacity 8; more are dropped while nobody reads).
	changed chan struct{}
	// tools lists the exposed tool names.
	tools func() []string
}

// startStdioProxy starts cmd (an `mcp proxy` over stdio, its stderr
// already captured) and connects a go-sdk client named name; the session
// closes with the test.
func startStdioProxy(ctx context.Context, t *testing.T, cmd *exec.Cmd, name string) *stdioProxy {
	t.Helper()
	p := &stdioProxy{changed: make(chan struct{}, 8)}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case p.changed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		msg := ""
		if b, ok := cmd.Stderr.(*e2e.LockedBuffer); ok {
			msg = b.String()
		}
		t.Fatalf("connect: %v\nstderr:\n%s", err, msg)
	}
	t.Cleanup(func() { cs.Close() })
	p.cs = cs
	p.tools = func() []string {
		t.Helper()
		return toolNames(t, ctx, cs)
	}
	return p
}

// TestReadStateKey: --request-state-key-file gives the proxy the key its
// replicas share; a missing or short file is refused, naming the flag.
func TestReadStateKey(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "key")
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(good, []byte(strings.Repeat("k", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, []byte("0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if key, err := readStateKey(good); err != nil || string(key) != strings.Repeat("k", 40) {
		t.Errorf("good key: %q, %v", key, err)
	}
	if key, err := readStateKey(""); key != nil || err != nil {
		t.Errorf("no flag: %q, %v; want nil (a random key)", key, err)
	}
	for _, f := range []string{short, filepath.Join(dir, "absent")} {
		if _, err := readStateKey(f); err == nil || !strings.Contains(err.Error(), "--request-state-key-file") {
			t.Errorf("%s: %v, want an error naming the flag", f, err)
		}
	}
}

// TestMCPProxyPerIdentityLimitWithoutIdentities: a per-identity rate
// limit on a proxy that authenticates no identities is said at start-up,
// naming the limit; a limit shared by all calls is not.
func TestMCPProxyPerIdentityLimitWithoutIdentities(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	policy := filepath.Join(dir, "limits.json")
	if err := os.WriteFile(policy, []byte(`{"modules":[{"source":"builtin:sanitizer"}],"rate_limits":[
		{"name":"per-agent","requests":60,"interval_s":60},
		{"name":"everyone","per":["all"],"concurrent":8}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	hp := startHTTPProxy(t, ctx, nil, "--no-auth", "--policy-config", policy)
	_ = hp.cmd.Process.Signal(syscall.SIGTERM)
	<-hp.exited
	s := hp.stderr.String()
	want := "WARNING: rate limits (per-agent) count per identity, but this proxy authenticates none (no --auth-issuer, no --tokens-file)"
	if !strings.Contains(s, want) {
		t.Fatalf("stderr lacks %q:\n%s", want, s)
	}
	if strings.Contains(s, "everyone) count per identity") || strings.Contains(s, "everyone, ") {
		t.Errorf("the shared limit is named as per identity:\n%s", s)
	}
}

// TestMCPProxyShipsDecisionLog: `mcp proxy` with a policy file whose
// decision_log names an HTTPS sink (its CA and a token file) ships every
// decision of its calls, allowed and blocked, counts them in /metrics,
// and on SIGTERM sends what it still buffers before it exits: the sink's
// decision IDs are the local audit log's.
func TestMCPProxyShipsDecisionLog(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	sink := policiestest.NewDecisionSink(t)
	dir := t.TempDir()
	writeFileT := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	writeFileT("sink-ca.pem", sink.CAPEM())
	writeFileT("sink-token", []byte(sink.Token+"\n"))
	// A flush interval far longer than the test: past the full batches,
	// only the drain at SIGTERM ships the last calls.
	policy := writeFileT("policy.json", fmt.Appendf(nil, `{"modules":[
		{"source":"builtin:rules","config":{"default":"allow","rules":[{"tool":"everything__get-sum","decision":"block","reason":"sums are off limits"}]}},
		{"source":"builtin:sanitizer"}],
		"decision_log":{"url":%q,"token_file":"sink-token","ca_file":"sink-ca.pem","labels":{"replica":"a"},"flush_interval_ms":600000,"batch_events":10}}`, sink.URL()))
	auditLog := filepath.Join(dir, "audit.jsonl")
	hp := startHTTPProxy(t, ctx, nil, "--policy-config", policy, "--audit-log", auditLog)
	hc := &http.Client{Transport: bearerTransport{token: hp.token}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "shipper-test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hp.base + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__get-sum", Arguments: map[string]any{"a": 1, "b": 2}}); err != nil || !res.IsError {
		t.Fatalf("blocked call: %+v %v", res, err)
	}
	_ = cs.Close()
	code, metrics := hp.get(t, "/metrics", map[string]string{"Authorization": "Bearer " + hp.token})
	if code != http.StatusOK || !strings.Contains(metrics, `openclaw_decision_log_events_total{result="shipped"} `) ||
		!strings.Contains(metrics, `openclaw_decision_log_events_total{result="dropped"} 0`) || !strings.Contains(metrics, "openclaw_decision_log_pending_events ") {
		t.Fatalf("/metrics (%d) lacks the decision log series, none dropped:\n%s", code, metrics)
	}
	_ = hp.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-hp.exited; err != nil {
		t.Fatalf("exit after SIGTERM = %v\n%s", err, hp.stderr.String())
	}
	b, err := os.ReadFile(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	var local, shipped []string
	blocked := 0
	for line := range strings.Lines(string(b)) {
		var r struct {
			DecisionID string `json:"decision_id"`
			Hook       string `json:"hook"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		local = append(local, r.DecisionID)
	}
	for _, ev := range sink.Events() {
		shipped = append(shipped, ev.DecisionID)
		if ev.Result == "block" && ev.Path == "openclaw/before_tool_call" && ev.Labels["replica"] == "a" {
			blocked++
		}
	}
	slices.Sort(local)
	slices.Sort(shipped)
	if len(local) < 13 || !slices.Equal(local, shipped) || blocked != 1 {
		t.Fatalf("audit log %d records, sink %d events (%d blocked, want 1); the IDs must be the same (refused: %v)\n%s",
			len(local), len(shipped), blocked, sink.Refused(), hp.stderr.String())
	}
}
