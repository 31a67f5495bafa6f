//go:build linux

package transport

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/oauthcred"
)

// oauthFixture is an OAuth 2.1 authorization server and an MCP server it
// protects, on one origin on 127.0.0.1: discovery metadata (RFC 9728,
// RFC 8414), dynamic client registration, an authorization endpoint that
// approves at once (a user who clicks "allow"), a token endpoint checking
// PKCE and rotating refresh tokens, and /mcp (streamable HTTP) and /sse
// (SSE) accepting only the access tokens it issued and did not revoke.
type oauthFixture struct {
	srv *httptest.Server
	ttl time.Duration // lifetime of issued access tokens; 0: no expires_in

	mu         sync.Mutex
	n          int
	codes      map[string]string // code → PKCE challenge
	access     map[string]bool   // valid access tokens
	refresh    map[string]bool   // valid refresh tokens
	scopes     []string          // scope parameter of each authorization request
	redirects  []string          // redirect_uri of each authorization request
	grants     []string          // grant_type of each token request
	mcpAuth    []string          // Authorization header of each /mcp and /sse request
	registered int
	stepUp     bool     // /mcp and /sse answer 403 insufficient_scope to valid tokens
	asHeaders  []string // "X-Team|Authorization" of each OAuth endpoint request
}

func newOAuthFixture(t testing.TB) *oauthFixture {
	t.Helper()
	f := &oauthFixture{codes: map[string]string{}, access: map[string]bool{}, refresh: map[string]bool{}}
	mux := http.NewServeMux()
	prm := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"resource":              f.srv.URL + "/mcp",
			"authorization_servers": []string{f.srv.URL},
			"scopes_supported":      []string{"mcp:read"},
		})
	}
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/", prm)
	mux.HandleFunc("GET /.well-known/oauth-protected-resource", prm)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer":                                f.srv.URL,
			"authorization_endpoint":                f.srv.URL + "/authorize",
			"token_endpoint":                        f.srv.URL + "/token",
			"registration_endpoint":                 f.srv.URL + "/register",
			"response_types_supported":              []string{"code"},
			"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none"},
		})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		var md map[string]any
		_ = json.NewDecoder(r.Body).Decode(&md)
		f.mu.Lock()
		f.registered++
		f.mu.Unlock()
		md["client_id"] = "client-1"
		md["token_endpoint_auth_method"] = "none"
		writeJSON(w, http.StatusCreated, md)
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
			http.Error(w, "PKCE S256 required", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.n++
		code := fmt.Sprintf("code-%d", f.n)
		f.codes[code] = q.Get("code_challenge")
		f.scopes = append(f.scopes, q.Get("scope"))
		f.redirects = append(f.redirects, q.Get("redirect_uri"))
		f.mu.Unlock()
		to, _ := url.Parse(q.Get("redirect_uri"))
		v := to.Query()
		v.Set("code", code)
		v.Set("state", q.Get("state"))
		to.RawQuery = v.Encode()
		http.Redirect(w, r, to.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		f.mu.Lock()
		defer f.mu.Unlock()
		gt := r.PostForm.Get("grant_type")
		f.grants = append(f.grants, gt)
		switch gt {
		case "authorization_code":
			ch, ok := f.codes[r.PostForm.Get("code")]
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != ch {
				writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant"})
				return
			}
			delete(f.codes, r.PostForm.Get("code"))
		case "refresh_token":
			rt := r.PostForm.Get("refresh_token")
			if !f.refresh[rt] {
				writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant", "error_description": "unknown refresh token " + rt})
				return
			}
			delete(f.refresh, rt) // rotation
		default:
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "unsupported_grant_type"})
			return
		}
		f.n++
		at, rt := fmt.Sprintf("access-%d", f.n), fmt.Sprintf("refresh-%d", f.n)
		f.access[at], f.refresh[rt] = true, true
		resp := map[string]any{"access_token": at, "token_type": "Bearer", "refresh_token": rt}
		if f.ttl > 0 {
			resp["expires_in"] = int(f.ttl.Seconds())
		}
		writeJSON(w, http.StatusOK, resp)
	})
	guard := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got := r.Header.Get("Authorization")
			f.mu.Lock()
			f.mcpAuth = append(f.mcpAuth, got)
			ok := f.access[strings.TrimPrefix(got, "Bearer ")]
			stepUp := f.stepUp
			f.mu.Unlock()
			if ok && stepUp {
				w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="mcp:admin"`)
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			if !ok {
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata="%s/.well-known/oauth-protected-resource/mcp"`, f.srv.URL))
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	server := echoServer()
	mux.Handle("/mcp", guard(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)))
	mux.Handle("/sse", guard(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil)))
	mux.Handle("/open", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/mcp" && r.URL.Path != "/sse" && r.URL.Path != "/open" && r.URL.Path != "/authorize" {
			f.mu.Lock()
			f.asHeaders = append(f.asHeaders, r.Header.Get("X-Team")+"|"+r.Header.Get("Authorization"))
			f.mu.Unlock()
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// revokeAccess makes the resource refuse every access token issued so far.
func (f *oauthFixture) revokeAccess() {
	f.mu.Lock()
	clear(f.access)
	f.mu.Unlock()
}

func (f *oauthFixture) snapshot() (scopes, redirects, grants, mcpAuth []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.scopes...), append([]string(nil), f.redirects...),
		append([]string(nil), f.grants...), append([]string(nil), f.mcpAuth...)
}

// browser plays the user: it opens the authorization URL and follows the
// redirects, the last of which reaches the loopback callback.
func browser(t *testing.T) func(string) {
	return func(authURL string) {
		resp, err := http.Get(authURL)
		if err != nil {
			t.Errorf("browser: %v", err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("browser: callback answered HTTP %d", resp.StatusCode)
		}
	}
}

// oauthEntry is a server entry of the fixture with a config Authorization
// header that auth "oauth" must drop.
func oauthEntry(f *oauthFixture, kind Kind) config.ServerEntry {
	path := "/mcp"
	if kind == KindSSE {
		path = "/sse"
	}
	return config.ServerEntry{URL: f.srv.URL + path, Transport: string(kind), Auth: "oauth",
		Headers: map[string]any{"Authorization": "Bearer config-secret", "X-Team": "blue"}}
}

func oauthOptions(store *TokenStore) *Options {
	o := quiet()
	o.OAuth = &OAuthOptions{Store: store}
	return o
}

func TestLoginThenConnect(t *testing.T) {
	t.Parallel()
	for _, kind := range []Kind{KindStreamableHTTP, KindSSE} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			f := newOAuthFixture(t)
			store := NewTokenStore(filepath.Join(t.TempDir(), "mcp-oauth"))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			e := oauthEntry(f, kind)
			creds, err := Login(ctx, "docs", e, &OAuthFlow{Scope: "mcp:read mcp:write", OnAuthURL: browser(t)}, oauthOptions(store))
			if err != nil {
				t.Fatalf("Login: %v", err)
			}
			scopes, redirects, _, _ := f.snapshot()
			// go-sdk unions scopes through a set: the order is not kept.
			if len(scopes) != 1 || !sameFields(scopes[0], "mcp:read mcp:write") {
				t.Errorf("scopes requested = %q, want the configured oauth.scope %q", scopes, "mcp:read mcp:write")
			}
			if len(redirects) != 1 || !strings.HasPrefix(redirects[0], "http://127.0.0.1:") || !strings.HasSuffix(redirects[0], "/oauth/callback") {
				t.Errorf("redirect_uri = %q, want the loopback callback http://127.0.0.1:<port>/oauth/callback", redirects)
			}
			// The OAuth endpoints on the server's origin got the entry's
			// headers, without its Authorization (OpenClaw's rule).
			f.mu.Lock()
			asHeaders := slices.Clone(f.asHeaders)
			f.mu.Unlock()
			if len(asHeaders) == 0 {
				t.Error("no request reached the OAuth endpoints")
			}
			for _, h := range asHeaders {
				if h != "blue|" {
					t.Errorf("OAuth endpoint request headers X-Team|Authorization = %q, want %q", h, "blue|")
				}
			}
			if s := creds.String(); strings.Contains(s, creds.AccessToken) || strings.Contains(s, creds.RefreshToken) {
				t.Errorf("Credentials.String() shows a token: %s", s)
			}

			// The file: 0600 in a 0700 folder, holding the tokens.
			p := store.Path("docs", e.URL)
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatalf("token file: %v", err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
			}
			if di, _ := os.Stat(store.Dir()); di.Mode().Perm() != 0o700 {
				t.Errorf("token folder mode %v, want 0700", di.Mode().Perm())
			}
			saved, err := store.Load("docs", e.URL)
			if err != nil || saved == nil || saved.AccessToken != creds.AccessToken || saved.RefreshToken == "" || saved.ClientID != "client-1" {
				t.Fatalf("stored credentials = %v, %v; want the login's, with a refresh token and client-1", saved, err)
			}

			// A connection sends the stored token, never the config's
			// Authorization header, and keeps the other headers.
			r := resolve(t, "docs", e, oauthOptions(store))
			cs := connect(t, r.Transport, "")
			if got := callText(t, cs, "echo", nil); got != "ok" {
				t.Errorf("echo = %q", got)
			}
			_, _, _, auths := f.snapshot()
			sawToken := false
			for _, a := range auths {
				if strings.Contains(a, "config-secret") {
					t.Fatalf("the config Authorization header reached the server: %q", a)
				}
				sawToken = sawToken || a == "Bearer "+creds.AccessToken
			}
			if !sawToken {
				t.Errorf("no request carried the stored token; Authorization headers seen: %q", auths)
			}
			for _, w := range r.Warnings {
				if strings.Contains(w, "config-secret") {
					t.Errorf("warning quotes the header value: %s", w)
				}
			}

			// Logout deletes the file; a second logout finds nothing.
			if had, err := Logout("docs", e.URL, store, nil); err != nil || !had {
				t.Errorf("Logout = %t, %v; want true, nil", had, err)
			}
			if had, err := Logout("docs", e.URL, store, nil); err != nil || had {
				t.Errorf("second Logout = %t, %v; want false, nil", had, err)
			}
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("token file still there after logout: %v", err)
			}
		})
	}
}

// seed stores credentials for the fixture as a login would have, issued
// by the fixture itself so that refresh works.
func seed(t *testing.T, f *oauthFixture, store *TokenStore, e config.ServerEntry, expiry time.Time) *Credentials {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Login(ctx, "docs", e, &OAuthFlow{OnAuthURL: browser(t)}, oauthOptions(store))
	if err != nil {
		t.Fatalf("Login: %v", err)
	}
	c.Expiry = expiry
	if err := store.Save(c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestOAuthRefresh(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		expiry time.Time // of the stored token
		revoke bool      // the server no longer accepts the stored token
	}{
		{name: "expired", expiry: time.Now().Add(-time.Minute)},
		{name: "within-skew", expiry: time.Now().Add(TokenExpirySkew / 2)},
		{name: "rejected-with-401", expiry: time.Now().Add(time.Hour), revoke: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newOAuthFixture(t)
			store := NewTokenStore(t.TempDir())
			e := oauthEntry(f, KindStreamableHTTP)
			old := seed(t, f, store, e, tc.expiry)
			if tc.revoke {
				f.revokeAccess()
			}
			r := resolve(t, "docs", e, oauthOptions(store))
			cs := connect(t, r.Transport, "")
			if got := callText(t, cs, "echo", nil); got != "ok" {
				t.Errorf("echo = %q", got)
			}
			_, _, grants, _ := f.snapshot()
			if n := strings.Count(strings.Join(grants, " "), "refresh_token"); n != 1 {
				t.Errorf("token requests %q: want exactly one refresh", grants)
			}
			now, err := store.Load("docs", e.URL)
			if err != nil || now == nil {
				t.Fatalf("Load: %v, %v", now, err)
			}
			if now.AccessToken == old.AccessToken || now.RefreshToken == old.RefreshToken {
				t.Errorf("the refreshed (and rotated) tokens were not saved")
			}
		})
	}
}

func TestOAuthNeedsLogin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, f *oauthFixture, store *TokenStore, e config.ServerEntry)
		want  string
	}{
		{name: "no-token", want: `MCP server "docs" requires OAuth authorization. Run openclaw mcp login docs.`,
			setup: func(*testing.T, *oauthFixture, *TokenStore, config.ServerEntry) {}},
		{name: "expired-no-refresh-token", want: `MCP server "docs" has expired OAuth credentials. Run openclaw mcp login docs.`,
			setup: func(t *testing.T, f *oauthFixture, s *TokenStore, e config.ServerEntry) {
				c := seed(t, f, s, e, time.Now().Add(-time.Hour))
				c.RefreshToken = ""
				if err := s.Save(c); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "refresh-refused", want: `MCP server "docs" could not refresh OAuth credentials. Run openclaw mcp login docs. (token endpoint answered HTTP 400 invalid_grant)`,
			setup: func(t *testing.T, f *oauthFixture, s *TokenStore, e config.ServerEntry) {
				c := seed(t, f, s, e, time.Now().Add(-time.Hour))
				c.RefreshToken = "refresh-stolen-and-revoked"
				if err := s.Save(c); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "step-up", want: `MCP server "docs" requires additional OAuth authorization. Run openclaw mcp login docs.`,
			setup: func(t *testing.T, f *oauthFixture, s *TokenStore, e config.ServerEntry) {
				seed(t, f, s, e, time.Now().Add(time.Hour))
				f.mu.Lock()
				f.stepUp = true
				f.mu.Unlock()
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newOAuthFixture(t)
			store := NewTokenStore(t.TempDir())
			e := oauthEntry(f, KindStreamableHTTP)
			tc.setup(t, f, store, e)
			_, _, _, before := f.snapshot()
			r := resolve(t, "docs", e, oauthOptions(store))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, r.Transport, nil)
			if err == nil {
				t.Fatal("Connect succeeded without usable credentials")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q, want it to contain %q", err, tc.want)
			}
			if !errors.Is(err, ErrAuthRequired) {
				t.Errorf("error does not wrap ErrAuthRequired: %v", err)
			}
			var are *AuthRequiredError
			if !errors.As(err, &are) || are.Server != "docs" {
				t.Errorf("error is not an *AuthRequiredError for docs: %v", err)
			}
			for _, secret := range []string{"access-", "refresh-", "config-secret"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error quotes a secret (%s): %v", secret, err)
				}
			}
			_, _, _, after := f.snapshot()
			// Without a usable token nothing reaches the MCP endpoint; a
			// token refused for its scope did (go-sdk tries server/discover,
			// then initialize).
			if asked := len(after) - len(before); (tc.name == "step-up") != (asked > 0) {
				t.Errorf("the MCP endpoint was asked %d times", asked)
			}
		})
	}
}

func TestTokenStore(t *testing.T) {
	t.Parallel()
	s := NewTokenStore(filepath.Join(t.TempDir(), "nested", "mcp-oauth"))
	a := &Credentials{Server: "docs", ServerURL: "https://mcp.example.com/mcp", ClientID: "c", TokenURL: "https://as/token", AccessToken: "A", RefreshToken: "R"}
	if err := s.Save(a); err != nil {
		t.Fatalf("Save: %v", err)
	}
	t.Run("keyed by name and origin", func(t *testing.T) { // waits for its parallel cases
		keyedByNameAndOrigin(t, s)
	})
	// Saving again replaces the file atomically and leaves no temporary file.
	a.AccessToken = "B"
	if err := s.Save(a); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(s.Dir())
	if len(entries) != 1 {
		t.Errorf("store folder holds %d files, want 1", len(entries))
	}
	if got, _ := s.Load("docs", a.ServerURL); got == nil || got.AccessToken != "B" {
		t.Errorf("after the second Save, Load = %v", got)
	}
	// A file that does not parse is an error naming it.
	if err := os.WriteFile(s.Path("bad", "https://x"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("bad", "https://x"); err == nil || !strings.Contains(err.Error(), s.Path("bad", "https://x")) {
		t.Errorf("Load of a corrupt file: %v, want an error naming the file", err)
	}
}

// keyedByNameAndOrigin checks which (server, URL) pairs find the
// credentials of docs at https://mcp.example.com/mcp.
func keyedByNameAndOrigin(t *testing.T, s *TokenStore) {
	for _, tc := range []struct {
		name, server, url string
		same              bool
	}{
		{"same entry", "docs", "https://mcp.example.com/mcp", true},
		{"same origin, other path", "docs", "https://MCP.example.com/other?x=1", true},
		{"other server name", "docs2", "https://mcp.example.com/mcp", false},
		{"other origin", "docs", "https://evil.example.com/mcp", false},
		{"other port", "docs", "https://mcp.example.com:8443/mcp", false},
		{"other scheme", "docs", "http://mcp.example.com/mcp", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.Load(tc.server, tc.url)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if (got != nil) != tc.same {
				t.Fatalf("Load(%q, %q) found credentials: %t, want %t", tc.server, tc.url, got != nil, tc.same)
			}
			if got != nil && (got.AccessToken != "A" || got.RefreshToken != "R" || got.Saved.IsZero()) {
				t.Errorf("Load = %+v", got)
			}
		})
	}
}

func TestDefaultTokenDir(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"state dir", map[string]string{"OPENCLAW_STATE_DIR": "/s", "OPENCLAW_HOME": "/h"}, "/s/mcp-oauth"},
		{"openclaw home", map[string]string{"OPENCLAW_HOME": "/h"}, "/h/.openclaw/state/mcp-oauth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := DefaultTokenDir(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if err != nil || got != tc.want {
				t.Errorf("DefaultTokenDir = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestLoginRefusesStdio(t *testing.T) {
	t.Parallel()
	_, err := Login(context.Background(), "local", config.ServerEntry{Command: "true"}, nil, quiet())
	if err == nil || !strings.Contains(err.Error(), `"local" is a stdio server`) {
		t.Errorf("Login of a stdio server: %v", err)
	}
}

// TestOAuthFlowOnConnect: with OAuthOptions.Flow, a connection without a
// stored token runs the authorization code flow on the server's 401 and
// saves what it got.
func TestOAuthFlowOnConnect(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t)
	store := NewTokenStore(t.TempDir())
	e := oauthEntry(f, KindStreamableHTTP)
	o := quiet()
	o.OAuth = &OAuthOptions{Store: store, Flow: &OAuthFlow{OnAuthURL: browser(t)}}
	cs := connect(t, resolve(t, "docs", e, o).Transport, "")
	if got := callText(t, cs, "echo", nil); got != "ok" {
		t.Errorf("echo = %q", got)
	}
	if c, err := store.Load("docs", e.URL); err != nil || c == nil || c.AccessToken == "" {
		t.Errorf("credentials after the flow: %v, %v", c, err)
	}
	if scopes, _, _, _ := f.snapshot(); len(scopes) != 1 || scopes[0] != "mcp:read" {
		t.Errorf("scopes requested = %q, want the advertised scopes_supported [mcp:read]", scopes)
	}
}

// TestOAuthConcurrentRefresh: calls racing on an expired token refresh it
// once (the fixture rotates refresh tokens, so a second refresh with the
// old one would fail).
func TestOAuthConcurrentRefresh(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t)
	store := NewTokenStore(t.TempDir())
	e := oauthEntry(f, KindStreamableHTTP)
	seed(t, f, store, e, time.Now().Add(time.Hour))
	cs := connect(t, resolve(t, "docs", e, oauthOptions(store)).Transport, "")
	f.revokeAccess() // every request now gets 401 until one refresh succeeds
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); err != nil {
				t.Errorf("CallTool: %v", err)
			}
		}()
	}
	wg.Wait()
	_, _, grants, _ := f.snapshot()
	if n := strings.Count(strings.Join(grants, " "), "refresh_token"); n != 1 {
		t.Errorf("token requests %q: want exactly one refresh for 8 racing calls", grants)
	}
}

// sameFields reports whether a and b hold the same space-separated words.
func sameFields(a, b string) bool {
	x, y := strings.Fields(a), strings.Fields(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// TestOAuthRefreshAcrossProcesses: two clients with their own store
// objects on one folder (as two processes would be) refresh an expired
// token once, under the file lock, and both use the result.
func TestOAuthRefreshAcrossProcesses(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t)
	dir := t.TempDir()
	e := oauthEntry(f, KindStreamableHTTP)
	old := seed(t, f, NewTokenStore(dir), e, time.Now().Add(-time.Minute))
	log, _ := newLogger()
	got := make([]string, 4)
	var wg sync.WaitGroup
	for i := range got {
		st, err := newOAuthState("docs", e.URL, http.DefaultTransport, nil, &OAuthOptions{Store: NewTokenStore(dir)}, nil, log)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tok, err := st.accessToken(ctx)
			if err != nil {
				t.Errorf("client %d: %v", i, err)
			}
			got[i] = tok
		}()
	}
	wg.Wait()
	_, _, grants, _ := f.snapshot()
	if n := strings.Count(strings.Join(grants, " "), "refresh_token"); n != 1 {
		t.Errorf("token requests %q: want one refresh for 4 clients", grants)
	}
	for i, tok := range got {
		if tok == "" || tok == old.AccessToken || tok != got[0] {
			t.Errorf("client %d got %q; want the one refreshed token (all: %q)", i, tok, got)
		}
	}
}

// TestLoginAgain: a login with valid stored credentials runs the flow again
// (another account, other scopes) and replaces them.
func TestLoginAgain(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t)
	store := NewTokenStore(t.TempDir())
	e := oauthEntry(f, KindStreamableHTTP)
	first := seed(t, f, store, e, time.Now().Add(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	second, err := Login(ctx, "docs", e, &OAuthFlow{OnAuthURL: browser(t)}, oauthOptions(store))
	if err != nil {
		t.Fatalf("second Login: %v", err)
	}
	if scopes, _, _, _ := f.snapshot(); len(scopes) != 2 {
		t.Errorf("authorization requests: %d, want 2 (the second login runs the flow)", len(scopes))
	}
	saved, _ := store.Load("docs", e.URL)
	if second.AccessToken == first.AccessToken || saved == nil || saved.AccessToken != second.AccessToken {
		t.Errorf("the second login's token did not replace the first")
	}
}

// BenchmarkOAuthCall measures tools/call over streamable HTTP on loopback
// with a stored OAuth token (the token attached to every request) against
// the same server without OAuth.
func BenchmarkOAuthCall(b *testing.B) {
	f := newOAuthFixture(b)
	store := NewTokenStore(b.TempDir())
	e := oauthEntry(f, KindStreamableHTTP)
	ctx := context.Background()
	if _, err := Login(ctx, "docs", e, &OAuthFlow{OnAuthURL: func(u string) {
		if resp, err := http.Get(u); err == nil {
			resp.Body.Close()
		}
	}}, oauthOptions(store)); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		entry config.ServerEntry
	}{
		{"oauth", e},
		{"plain", config.ServerEntry{URL: f.srv.URL + "/open", Transport: "streamable-http"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r, err := Resolve("docs", bc.entry, oauthOptions(store))
			if err != nil {
				b.Fatal(err)
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, r.Transport, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}
			b.ResetTimer()
			for b.Loop() {
				if _, err := cs.CallTool(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// recordingRT records the requests it is given and answers 204.
type recordingRT struct {
	mu   sync.Mutex
	seen []*http.Request
}

func (r *recordingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.seen = append(r.seen, req)
	r.mu.Unlock()
	return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
}

func TestSameOriginHeaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want string // X-Api-Key sent
	}{
		{"https://mcp.example.com/.well-known/oauth-authorization-server", "k"},
		{"https://MCP.example.com/token", "k"},
		{"https://auth.example.com/token", ""},
		{"https://mcp.example.com:8443/token", ""},
		{"http://mcp.example.com/token", ""},
	} {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			rec := &recordingRT{}
			rt := &sameOriginHeaders{base: rec, origin: oauthcred.Origin("https://mcp.example.com/mcp"), headers: map[string]string{"X-Api-Key": "k"}}
			req, _ := http.NewRequest(http.MethodGet, tc.url, nil)
			if _, err := rt.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
			if got := rec.seen[0].Header.Get("X-Api-Key"); got != tc.want {
				t.Errorf("X-Api-Key = %q, want %q", got, tc.want)
			}
			if req.Header.Get("X-Api-Key") != "" {
				t.Error("the caller's request was modified")
			}
		})
	}
}

// TestOAuthLogoutElsewhere: a logout by another process is honoured by a
// running connection at its next refresh (the credentials are not saved
// back), and its calls then ask for a login.
func TestOAuthLogoutElsewhere(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t)
	store := NewTokenStore(t.TempDir())
	e := oauthEntry(f, KindStreamableHTTP)
	seed(t, f, store, e, time.Now().Add(time.Hour))
	cs := connect(t, resolve(t, "docs", e, oauthOptions(store)).Transport, "")
	if _, err := Logout("docs", e.URL, NewTokenStore(store.Dir()), nil); err != nil {
		t.Fatal(err)
	}
	f.revokeAccess() // the server no longer takes the token: a refresh is due
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), `MCP server "docs" requires OAuth authorization. Run openclaw mcp login docs.`) {
		t.Errorf("call after a logout elsewhere: %v", err)
	}
	if c, _ := store.Load("docs", e.URL); c != nil {
		t.Error("the credentials were saved back after the logout")
	}
	if _, _, grants, _ := f.snapshot(); strings.Contains(strings.Join(grants, " "), "refresh_token") {
		t.Errorf("token requests %q: a logged-out token was refreshed", grants)
	}
}
