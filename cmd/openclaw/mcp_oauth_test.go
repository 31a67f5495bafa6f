package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// loginFixture is an OAuth authorization server (discovery, dynamic
// registration, an authorization endpoint that approves at once, a token
// endpoint checking PKCE) and the MCP server it protects, on 127.0.0.1.
type loginFixture struct {
	srv    *httptest.Server
	mu     sync.Mutex
	n      int
	codes  map[string]string // code → PKCE challenge
	tokens map[string]bool
	scopes []string
	issued []string // access tokens, in the order issued
	calls  []string // the access token of each tools/call, in order
	// rotate, when set, makes the token endpoint issue a refresh token
	// with each access token and take grant_type refresh_token: each
	// refresh token works once (rotation), each refresh is counted.
	rotate    bool
	refreshOK map[string]bool
	refreshes int
}

// revoke makes the protected server refuse access token tok (401), as it
// does an expired one.
func (f *loginFixture) revoke(tok string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tokens, tok)
}

// refreshCount returns how many refresh grants the token endpoint served.
func (f *loginFixture) refreshCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refreshes
}

// lastIssued returns the access token issued last.
func (f *loginFixture) lastIssued(t *testing.T) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.issued) == 0 {
		t.Fatal("no access token issued")
	}
	return f.issued[len(f.issued)-1]
}

// callTokens returns the access token of each tools/call received so far.
func (f *loginFixture) callTokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func newLoginFixture(t *testing.T) *loginFixture {
	t.Helper()
	f := &loginFixture{codes: map[string]string{}, tokens: map[string]bool{}, refreshOK: map[string]bool{}}
	mux := http.NewServeMux()
	js := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		js(w, 200, map[string]any{"resource": f.srv.URL + "/mcp", "authorization_servers": []string{f.srv.URL}})
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		js(w, 200, map[string]any{"issuer": f.srv.URL, "authorization_endpoint": f.srv.URL + "/authorize",
			"token_endpoint": f.srv.URL + "/token", "registration_endpoint": f.srv.URL + "/register",
			"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"}})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		js(w, 201, map[string]any{"client_id": "cli-client", "token_endpoint_auth_method": "none"})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		f.mu.Lock()
		f.n++
		code := fmt.Sprintf("code-%d", f.n)
		f.codes[code] = q.Get("code_challenge")
		f.scopes = append(f.scopes, q.Get("scope"))
		f.mu.Unlock()
		to, _ := url.Parse(q.Get("redirect_uri"))
		to.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}}.Encode()
		http.Redirect(w, r, to.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		f.mu.Lock()
		defer f.mu.Unlock()
		if rt := r.PostForm.Get("refresh_token"); f.rotate && r.PostForm.Get("grant_type") == "refresh_token" {
			if !f.refreshOK[rt] {
				js(w, 400, map[string]any{"error": "invalid_grant"})
				return
			}
			delete(f.refreshOK, rt)
			f.refreshes++
		} else {
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			if ch, ok := f.codes[r.PostForm.Get("code")]; !ok || ch != base64.RawURLEncoding.EncodeToString(sum[:]) {
				js(w, 400, map[string]any{"error": "invalid_grant"})
				return
			}
		}
		f.n++
		tok := fmt.Sprintf("cli-access-%d", f.n)
		f.tokens[tok] = true
		f.issued = append(f.issued, tok)
		resp := map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600}
		if f.rotate {
			rt := fmt.Sprintf("cli-refresh-%d", f.n)
			f.refreshOK[rt] = true
			resp["refresh_token"] = rt
		}
		js(w, 200, resp)
	})
	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "protected ok"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		var body []byte
		if r.Method == http.MethodPost {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		f.mu.Lock()
		ok := f.tokens[tok]
		if ok && bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			f.calls = append(f.calls, tok)
		}
		f.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+f.srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// writeOAuthConfig writes openclaw.json with servers "docs" (the fixture,
// auth "oauth", oauth.scope "files:read" and a config Authorization header
// that must never be sent) and "plain" (no OAuth).
func writeOAuthConfig(t *testing.T, c *registryCLI, f *loginFixture) {
	t.Helper()
	cfg := map[string]any{"mcp": map[string]any{"servers": map[string]any{
		"docs": map[string]any{"url": f.srv.URL + "/mcp", "transport": "streamable-http", "auth": "oauth",
			"oauth": map[string]any{"scope": "files:read"}, "headers": map[string]any{"Authorization": "Bearer config-secret"}},
		"plain": map[string]any{"url": f.srv.URL + "/mcp", "transport": "streamable-http"},
	}}}
	b, _ := json.Marshal(cfg)
	if err := os.MkdirAll(filepath.Dir(c.configPath()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.configPath(), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// login runs `openclaw mcp login docs`, opens the URL it prints on stderr
// as a browser would, and returns its stdout, stderr and exit code.
func login(t *testing.T, c *registryCLI, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"mcp", "login"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENCLAW_") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+c.home, "OPENCLAW_HOME="+c.home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		stderr.WriteString(line + "\n")
		if u := strings.TrimSpace(line); strings.HasPrefix(u, "http://") {
			resp, err := http.Get(u) // follows the redirect to the loopback callback
			if err != nil {
				t.Errorf("browser: %v", err)
				continue
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(page), "Logged in") {
				t.Errorf("callback page = %q", page)
			}
		}
	}
	err = cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("mcp login: %v", err)
	}
	return stdout.String(), stderr.String(), code
}

func TestMCPLoginCallLogout(t *testing.T) {
	t.Parallel()
	c := newRegistryCLI(t)
	f := newLoginFixture(t)
	writeOAuthConfig(t, c, f)

	// Before login: the runtime says what to do, and sends nothing secret.
	_, stderr, code := c.run(t, "mcp", "call", "docs__echo")
	if code != 1 || !strings.Contains(stderr, `MCP server "docs" requires OAuth authorization. Run openclaw mcp login docs.`) {
		t.Errorf("call before login: exit %d, stderr:\n%s", code, stderr)
	}

	stdout, stderr, code := login(t, c, "docs", "--timeout", "30s")
	if code != 0 || stdout != "Logged in to MCP server \"docs\".\n" {
		t.Fatalf("mcp login: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, `Open this URL in a browser to authorize MCP server "docs":`) {
		t.Errorf("login stderr does not introduce the URL:\n%s", stderr)
	}
	f.mu.Lock()
	scopes := append([]string(nil), f.scopes...)
	f.mu.Unlock()
	if len(scopes) != 1 || scopes[0] != "files:read" {
		t.Errorf("scopes requested = %q, want oauth.scope [files:read]", scopes)
	}
	files, _ := filepath.Glob(filepath.Join(c.home, ".openclaw", "state", "mcp-oauth", "docs-*.json"))
	if len(files) != 1 {
		t.Fatalf("token files under the state dir: %q, want one for docs", files)
	}
	if fi, _ := os.Stat(files[0]); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}

	// The runtime finds the stored token: the call reaches the server.
	stdout, stderr, code = c.run(t, "mcp", "call", "docs__echo")
	if code != 0 || strings.TrimSpace(stdout) != "protected ok" {
		t.Errorf("call after login: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	for _, out := range []string{stdout, stderr} {
		if strings.Contains(out, "cli-access-") || strings.Contains(out, "config-secret") {
			t.Errorf("a token reached the output:\n%s", out)
		}
	}

	stdout, _, code = c.run(t, "mcp", "logout", "docs")
	if code != 0 || stdout != "Logged out of MCP server \"docs\".\n" {
		t.Errorf("mcp logout: exit %d, stdout %q", code, stdout)
	}
	if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
		t.Errorf("token file after logout: %v", err)
	}
	stdout, _, code = c.run(t, "mcp", "logout", "docs")
	if code != 0 || stdout != "No stored OAuth credentials for MCP server \"docs\".\n" {
		t.Errorf("second mcp logout: exit %d, stdout %q", code, stdout)
	}
}

func TestMCPLoginRefusals(t *testing.T) {
	t.Parallel()
	c := newRegistryCLI(t)
	f := newLoginFixture(t)
	writeOAuthConfig(t, c, f)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp", "login", "nope"}, `No MCP server named "nope" in `},
		{[]string{"mcp", "logout", "nope"}, `No MCP server named "nope" in `},
		{[]string{"mcp", "login", "plain"}, `MCP server "plain" does not use OAuth: set "auth": "oauth"`},
		// Nobody opens the URL: the login gives up when --timeout ends.
		{[]string{"mcp", "login", "docs", "--timeout", "2s"}, `MCP login for "docs" failed: transport: server "docs": running the OAuth flow: waiting for the OAuth redirect to http://127.0.0.1:`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			_, stderr, code := c.run(t, tc.args...)
			if code != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and %q", code, stderr, tc.want)
			}
		})
	}
}

// writePerRequesterConfig writes openclaw.json with "team" (the fixture,
// oauth.identity "per-requester"), "docs" (the fixture, shared identity),
// "prof" (oauth.authProfileId) and "plain" (no OAuth).
func writePerRequesterConfig(t *testing.T, c *registryCLI, f *loginFixture) {
	t.Helper()
	u := f.srv.URL + "/mcp"
	cfg := map[string]any{"mcp": map[string]any{"servers": map[string]any{
		"team":  map[string]any{"url": u, "transport": "streamable-http", "auth": "oauth", "oauth": map[string]any{"identity": "per-requester"}},
		"docs":  map[string]any{"url": u, "transport": "streamable-http", "auth": "oauth"},
		"prof":  map[string]any{"url": u, "transport": "streamable-http", "auth": "oauth", "oauth": map[string]any{"authProfileId": "work"}},
		"plain": map[string]any{"url": u, "transport": "streamable-http"},
	}}}
	b, _ := json.Marshal(cfg)
	if err := os.MkdirAll(filepath.Dir(c.configPath()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.configPath(), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// wantLines fails unless every line of want appears in out.
func wantLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	got := lines(out)
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Errorf("%s: no line %q in:\n%s", what, w, out)
		}
	}
}

func TestMCPPerRequesterOAuthCLI(t *testing.T) {
	t.Parallel()
	c := newRegistryCLI(t)
	f := newLoginFixture(t)
	writePerRequesterConfig(t, c, f)

	stdout, _, code := c.run(t, "mcp", "list")
	if code != 0 {
		t.Fatalf("mcp list: exit %d", code)
	}
	wantLines(t, "list before any login", stdout, "- docs", "- plain", "- prof", "- team (0 connected principals)")

	// Refusals, each naming what to do.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp", "login", "team"}, `MCP server "team" uses the "per-requester" OAuth identity: name the principal whose tokens to store with --principal <id>.`},
		{[]string{"mcp", "login", "docs", "--principal", "alice"}, `MCP server "docs" uses the shared OAuth identity: --principal applies to servers with "oauth": {"identity": "per-requester"}.`},
		{[]string{"mcp", "login", "prof"}, `MCP server "prof" takes its OAuth credentials from OpenClaw auth profile "work" (oauth.authProfileId). openclaw-go has no auth-profile store`},
		{[]string{"mcp", "logout", "team"}, `MCP server "team" uses the "per-requester" OAuth identity: name the principal to log out with --principal <id>, or use --all.`},
		{[]string{"mcp", "logout", "docs", "--principal", "alice"}, `MCP server "docs" uses the shared OAuth identity: --principal applies`},
		{[]string{"mcp", "logout", "team", "--principal", "alice", "--all"}, `if any flags in the group [principal all] are set none of the others can be`},
	} {
		_, stderr, code := c.run(t, tc.args...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit 1 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}

	for _, p := range []string{"alice", "bob"} {
		stdout, stderr, code := login(t, c, "team", "--principal", p, "--timeout", "30s")
		if code != 0 || stdout != fmt.Sprintf("Logged in to MCP server \"team\" as principal %q.\n", p) {
			t.Fatalf("login team --principal %s: exit %d, stdout %q, stderr:\n%s", p, code, stdout, stderr)
		}
	}
	files, _ := filepath.Glob(filepath.Join(c.home, ".openclaw", "state", "mcp-oauth", "team-*-r-*.json"))
	if len(files) != 2 {
		t.Errorf("per-principal token files: %q, want two", files)
	}

	stdout, _, _ = c.run(t, "mcp", "list")
	wantLines(t, "list after two logins", stdout, "- docs", "- team (2 connected principals)")
	stdout, _, _ = c.run(t, "mcp", "status", "-v")
	wantLines(t, "status -v", stdout,
		"- docs: streamable-http oauth",
		"  oauth: unauthenticated (run openclaw mcp login docs)",
		"- plain: streamable-http",
		"- prof: streamable-http oauth",
		`  oauth: auth profile "work" (OpenClaw's auth-profile store; not supported by openclaw-go)`,
		"- team: streamable-http oauth 2-principals-connected",
		"  oauth: per-requester, connected principals: 2")
	if strings.Contains(stdout, "cli-access-") {
		t.Errorf("status shows a token:\n%s", stdout)
	}

	var st struct {
		Servers []map[string]any `json:"servers"`
	}
	stdout, _, _ = c.run(t, "mcp", "status", "--json")
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	byName := map[string]map[string]any{}
	for _, s := range st.Servers {
		byName[s["name"].(string)] = s
	}
	if got := byName["team"]["connectedPrincipals"]; got != 2.0 {
		t.Errorf("team connectedPrincipals = %v, want 2", got)
	}
	if as, _ := byName["docs"]["authStatus"].(map[string]any); as["state"] != "unauthenticated" || as["hasTokens"] != false {
		t.Errorf("docs authStatus = %v, want state unauthenticated, hasTokens false", as)
	}
	if byName["prof"]["authProfileId"] != "work" {
		t.Errorf("prof authProfileId = %v", byName["prof"]["authProfileId"])
	}
	for _, k := range []string{"authStatus", "connectedPrincipals"} {
		if _, ok := byName["plain"][k]; ok {
			t.Errorf("plain (no OAuth) has %s", k)
		}
	}

	// doctor: the shared server needs a login (warning), the auth profile
	// cannot work (error), the per-requester server is fine.
	for _, tc := range []struct {
		name string
		code int
		want []string
	}{
		{"docs", 0, []string{"- docs: ok", "  - warning: OAuth credentials are not authorized; run openclaw mcp login docs"}},
		{"prof", 1, []string{"- prof: issues", `  ! error: oauth.authProfileId "work" names an OpenClaw auth profile; openclaw-go has no auth-profile store and cannot authorize this server`}},
		{"team", 0, []string{"- team: ok"}},
	} {
		stdout, _, code := c.run(t, "mcp", "doctor", tc.name)
		if code != tc.code {
			t.Errorf("doctor %s: exit %d, want %d\n%s", tc.name, code, tc.code, stdout)
		}
		wantLines(t, "doctor "+tc.name, stdout, tc.want...)
	}

	// Logout one principal, then all.
	stdout, _, code = c.run(t, "mcp", "logout", "team", "--principal", "alice")
	if code != 0 || stdout != "Logged out principal \"alice\" of MCP server \"team\".\n" {
		t.Errorf("logout --principal alice: exit %d, %q", code, stdout)
	}
	stdout, _, _ = c.run(t, "mcp", "list")
	wantLines(t, "list after alice's logout", stdout, "- team (1 connected principal)")
	stdout, _, code = c.run(t, "mcp", "logout", "team", "--principal", "alice")
	if code != 0 || stdout != "No stored OAuth credentials for principal \"alice\" of MCP server \"team\".\n" {
		t.Errorf("second logout --principal alice: exit %d, %q", code, stdout)
	}
	stdout, _, code = c.run(t, "mcp", "logout", "team", "--all")
	if code != 0 || stdout != "Logged out of MCP server \"team\": deleted 1 set of OAuth credentials.\n" {
		t.Errorf("logout --all: exit %d, %q", code, stdout)
	}
	stdout, _, _ = c.run(t, "mcp", "list")
	wantLines(t, "list after logout --all", stdout, "- team (0 connected principals)")
}

func TestMCPStatusSharedOAuthStates(t *testing.T) {
	t.Parallel()
	c := newRegistryCLI(t)
	f := newLoginFixture(t)
	writePerRequesterConfig(t, c, f)
	if stdout, stderr, code := login(t, c, "docs", "--timeout", "30s"); code != 0 {
		t.Fatalf("login docs: exit %d, %q\n%s", code, stdout, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(c.home, ".openclaw", "state", "mcp-oauth", "docs-*.json"))
	if len(files) != 1 {
		t.Fatalf("docs token files: %q", files)
	}
	var creds map[string]any
	data, _ := os.ReadFile(files[0])
	if err := json.Unmarshal(data, &creds); err != nil {
		t.Fatal(err)
	}
	exp, err := time.Parse(time.RFC3339Nano, creds["expiresAt"].(string))
	if err != nil {
		t.Fatalf("expiresAt %v: %v", creds["expiresAt"], err)
	}

	// rewrite stores creds with expiresAt at and, when refresh is set, a
	// refresh token.
	rewrite := func(at time.Time, refresh string) {
		t.Helper()
		creds["expiresAt"] = at.UTC().Format(time.RFC3339Nano)
		delete(creds, "refreshToken")
		if refresh != "" {
			creds["refreshToken"] = refresh
		}
		b, _ := json.Marshal(creds)
		if err := os.WriteFile(files[0], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name          string
		prepare       func()
		line, verbose string
		state         string
		doctor        []string
	}{
		{"logged in", func() {}, "- docs: streamable-http oauth authorized",
			"  oauth: authorized (expires " + exp.UTC().Format(time.RFC3339) + ")", "authorized", nil},
		{"expired, refreshable", func() { rewrite(past, "r-1") }, "- docs: streamable-http oauth expired",
			"  oauth: expired (refreshable)", "expired", nil},
		{"expired, not refreshable", func() { rewrite(past, "") }, "- docs: streamable-http oauth expired",
			"  oauth: expired (not refreshable: run openclaw mcp login docs)", "expired",
			[]string{"  - warning: OAuth credentials have expired and cannot be refreshed; run openclaw mcp login docs"}},
	} {
		tc.prepare()
		stdout, _, code := c.run(t, "mcp", "status", "-v")
		if code != 0 {
			t.Fatalf("%s: status exit %d", tc.name, code)
		}
		wantLines(t, tc.name+": status -v", stdout, tc.line, tc.verbose)
		stdout, _, _ = c.run(t, "mcp", "status", "--json")
		if !strings.Contains(stdout, `"state": "`+tc.state+`"`) {
			t.Errorf("%s: status --json lacks state %q:\n%s", tc.name, tc.state, stdout)
		}
		stdout, _, _ = c.run(t, "mcp", "doctor", "docs")
		if tc.doctor == nil && strings.Contains(stdout, "OAuth credentials") {
			t.Errorf("%s: doctor warns about OAuth:\n%s", tc.name, stdout)
		}
		wantLines(t, tc.name+": doctor", stdout, tc.doctor...)
	}
}
