package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/transport"
)

// userFixture is an OAuth-protected streamable HTTP MCP server on
// 127.0.0.1 that binds each MCP session to the user of the token that
// opened it, as real servers do: protected-resource metadata, a token
// endpoint refreshing (and rotating) refresh tokens, and /mcp, which
// answers 401 to unknown tokens and 403 to a request whose token belongs to
// another user than its session's. Its tool "whoami" answers
// "<session user>/<request user>".
type userFixture struct {
	srv *httptest.Server

	mu       sync.Mutex
	n        int
	access   map[string]string // access token → user
	refresh  map[string]string // refresh token → user
	sessions map[string]string // live MCP session id → user
	opened   []string          // user of each session opened, in order
	mixed    int               // requests refused for carrying another user's token
	broken   map[string]bool   // users whose in-session POSTs answer 500
	requests int               // requests to /mcp
}

func newUserFixture(t testing.TB) *userFixture { t.Helper(); return newUserFixtureWith(t, false) }

// aliceAndBob returns a fresh token store in which alice (user Alice) and
// bob (user Bob) are logged in to f, neither token expired.
func (f *userFixture) aliceAndBob(t testing.TB) *transport.TokenStore {
	t.Helper()
	store := transport.NewTokenStore(filepath.Join(t.TempDir(), "mcp-oauth"))
	f.login(t, store, "alice", "Alice", false)
	f.login(t, store, "bob", "Bob", false)
	return store
}

// newUserFixtureWith is newUserFixture; with resource, the server also
// serves the resource docs://me, whose text is the session's user.
func newUserFixtureWith(t testing.TB, resource bool) *userFixture {
	t.Helper()
	f := &userFixture{access: map[string]string{}, refresh: map[string]string{}, sessions: map[string]string{}, broken: map[string]bool{}}
	userOf := func(h http.Header) string {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.access[strings.TrimPrefix(h.Get("Authorization"), "Bearer ")]
	}
	handler := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		owner := userOf(r.Header)
		s := newServer("users", nil)
		s.AddTool(&mcp.Tool{Name: "whoami", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return textResult(owner + "/" + userOf(req.Extra.Header)), nil
			})
		if resource {
			s.AddResource(&mcp.Resource{URI: "docs://me", Name: "me"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: owner}}}, nil
			})
		}
		return s
	}, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/", func(w http.ResponseWriter, r *http.Request) {
		writeJSONTest(w, http.StatusOK, map[string]any{"resource": f.srv.URL + "/mcp", "authorization_servers": []string{f.srv.URL}})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		f.mu.Lock()
		defer f.mu.Unlock()
		user, ok := f.refresh[r.PostForm.Get("refresh_token")]
		if r.PostForm.Get("grant_type") != "refresh_token" || !ok {
			writeJSONTest(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant"})
			return
		}
		delete(f.refresh, r.PostForm.Get("refresh_token"))
		at, rt := f.issueLocked(user)
		writeJSONTest(w, http.StatusOK, map[string]any{"access_token": at, "token_type": "Bearer", "refresh_token": rt, "expires_in": 3600})
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		user := userOf(r.Header)
		sid := r.Header.Get("Mcp-Session-Id")
		f.mu.Lock()
		f.requests++
		owner, known := f.sessions[sid]
		if user != "" && known && owner != user {
			f.mixed++
		}
		broken := f.broken[user] && known && r.Method == http.MethodPost
		f.mu.Unlock()
		switch {
		case broken:
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		case user == "":
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata="%s/.well-known/oauth-protected-resource/mcp"`, f.srv.URL))
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		case known && owner != user:
			http.Error(w, "this session belongs to another user", http.StatusForbidden)
			return
		}
		handler.ServeHTTP(w, r)
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case sid == "" && w.Header().Get("Mcp-Session-Id") != "":
			f.sessions[w.Header().Get("Mcp-Session-Id")] = user
			f.opened = append(f.opened, user)
		case sid != "" && r.Method == http.MethodDelete:
			delete(f.sessions, sid)
		}
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func writeJSONTest(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *userFixture) issueLocked(user string) (access, refresh string) {
	f.n++
	access, refresh = fmt.Sprintf("access-%s-%d", user, f.n), fmt.Sprintf("refresh-%s-%d", user, f.n)
	f.access[access], f.refresh[refresh] = user, user
	return access, refresh
}

// login stores user's tokens for principal in store, as `openclaw mcp
// login docs --principal <principal>` would; expired tokens make the
// runtime refresh them first.
func (f *userFixture) login(t testing.TB, store *transport.TokenStore, principal, user string, expired bool) {
	t.Helper()
	f.mu.Lock()
	at, rt := f.issueLocked(user)
	f.mu.Unlock()
	c := &transport.Credentials{
		Server: "docs", ServerURL: f.srv.URL + "/mcp", Principal: principal, ClientID: "client-1",
		TokenURL: f.srv.URL + "/token", AccessToken: at, TokenType: "Bearer", RefreshToken: rt,
		Expiry: time.Now().Add(time.Hour),
	}
	if expired {
		c.Expiry = time.Now().Add(-time.Hour)
	}
	if err := store.Save(c); err != nil {
		t.Fatal(err)
	}
}

// live returns the users of the sessions the server holds open, sorted.
func (f *userFixture) live() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, u := range f.sessions {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

func (f *userFixture) counts() (opened []string, mixed, requests int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.opened), f.mixed, f.requests
}

// perRequester is the fixture's server declared with the per-requester
// identity.
func (f *userFixture) perRequester() Server {
	return Server{Name: "docs", OAuthIdentity: IdentityPerRequester, Entry: config.ServerEntry{
		URL: f.srv.URL + "/mcp", Transport: "streamable-http", Auth: "oauth", RequestTimeoutMs: 30000,
	}}
}

// startSession makes a session over servers whose tokens live in store
// and connects it with ctx.
func startSession(t testing.TB, ctx context.Context, servers []Server, store *transport.TokenStore, opts *Options) *Session {
	t.Helper()
	if opts.Enforcer == nil {
		opts.Enforcer = &policiestest.Enforcer{}
	}
	opts.Sanitizer, opts.Logger = &policiestest.Sanitizer{}, quietLogger()
	opts.Transport = &transport.Options{Logger: quietLogger(), OAuth: &transport.OAuthOptions{Store: store}}
	s, err := New(servers, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := s.Connect(cctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func whoami(ctx context.Context, s *Session, principal string) (string, error) {
	res, err := s.CallTool(WithPrincipal(ctx, principal), "docs__whoami", []byte(`{}`))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), nil
}

func TestPerRequesterCalls(t *testing.T) {
	t.Parallel()
	f := newUserFixture(t)
	store := transport.NewTokenStore(filepath.Join(t.TempDir(), "mcp-oauth"))
	f.login(t, store, "alice", "Alice", false)
	f.login(t, store, "bob", "Bob", true) // expired: refreshed on bob's first call
	ctx := context.Background()
	s := startSession(t, WithPrincipal(ctx, "alice"), []Server{f.perRequester()}, store, &Options{})

	if got := toolNames(t, s); !slices.Equal(got, []string{"docs__whoami"}) {
		t.Fatalf("catalog = %v, want [docs__whoami] (listed with alice's connection); diagnostics %v", got, s.Diagnostics())
	}
	for _, tc := range []struct{ principal, want string }{
		{"alice", "Alice/Alice"}, {"bob", "Bob/Bob"}, {"alice", "Alice/Alice"}, {"bob", "Bob/Bob"},
	} {
		got, err := whoami(ctx, s, tc.principal)
		if err != nil || got != tc.want {
			t.Errorf("whoami as %s = %q, %v; want %q", tc.principal, got, err, tc.want)
		}
	}
	opened, mixed, _ := f.counts()
	if !slices.Equal(opened, []string{"Alice", "Bob"}) || mixed != 0 {
		t.Errorf("server opened sessions for %v with %d mixed-token requests; want one for Alice, one for Bob, none mixed", opened, mixed)
	}

	// No principal: a typed error naming the server and the fix.
	_, err := whoami(ctx, s, "")
	var pe *PrincipalError
	if !errors.As(err, &pe) || pe.Server != "docs" || pe.Listing || !errors.Is(err, ErrNoPrincipal) ||
		!strings.Contains(err.Error(), "WithPrincipal") || !strings.Contains(err.Error(), `"docs"`) {
		t.Errorf("call without a principal: %v; want a *PrincipalError for docs", err)
	}
	// A principal that never logged in: told to log in, and not kept.
	_, err = whoami(ctx, s, "carol")
	var ae *transport.AuthRequiredError
	if !errors.As(err, &ae) || ae.Principal != "carol" || !strings.Contains(err.Error(), "openclaw mcp login docs --principal carol") {
		t.Errorf("call as carol = %v; want an AuthRequiredError telling carol to log in", err)
	}
	c := s.set.Load().conns[0]
	if bound, others := c.principals(); bound != "alice" || !slices.Equal(others, []string{"bob"}) {
		t.Errorf("connections: listing %q, others %v; want alice and [bob]", bound, others)
	}
	if live := f.live(); !slices.Equal(live, []string{"Alice", "Bob"}) {
		t.Errorf("live sessions %v, want [Alice Bob]", live)
	}
	// Close ends every principal's session; later calls fail.
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if live := f.live(); len(live) != 0 {
		t.Errorf("sessions of %v still open on the server after Close", live)
	}
	if _, err := whoami(ctx, s, "bob"); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close = %v, want ErrClosed", err)
	}
	if _, others := c.principals(); len(others) != 0 {
		t.Errorf("principal connections %v kept after Close", others)
	}
}

func TestPerRequesterConcurrentPrincipals(t *testing.T) {
	t.Parallel()
	f := newUserFixture(t)
	store := transport.NewTokenStore(filepath.Join(t.TempDir(), "mcp-oauth"))
	users := map[string]string{"p0": "U0", "p1": "U1", "p2": "U2", "p3": "U3"}
	for p, u := range users {
		f.login(t, store, p, u, false)
	}
	sv := f.perRequester()
	sv.ListPrincipal = "p0"
	sv.SupportsParallelToolCalls = true
	ctx := context.Background()
	s := startSession(t, ctx, []Server{sv}, store, &Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 32 {
		p := fmt.Sprintf("p%d", i%4)
		wg.Go(func() {
			got, err := whoami(ctx, s, p)
			if want := users[p] + "/" + users[p]; err != nil || got != want {
				errs <- fmt.Errorf("whoami as %s = %q, %v; want %q", p, got, err, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	opened, mixed, _ := f.counts()
	slices.Sort(opened)
	if !slices.Equal(opened, []string{"U0", "U1", "U2", "U3"}) || mixed != 0 {
		t.Errorf("sessions opened for %v, %d mixed; want one per user, none mixed", opened, mixed)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if live := f.live(); len(live) != 0 {
		t.Errorf("sessions of %v still open after Close", live)
	}
}

func TestPerRequesterIdleReap(t *testing.T) {
	t.Parallel()
	f := newUserFixture(t)
	store := f.aliceAndBob(t)
	evs := newEvents()
	sv := f.perRequester()
	sv.ListPrincipal = "alice"
	ctx := context.Background()
	s := startSession(t, ctx, []Server{sv}, store, &Options{IdleTTL: 50 * time.Millisecond, OnEvent: evs.on})
	if got, err := whoami(ctx, s, "bob"); err != nil || got != "Bob/Bob" {
		t.Fatalf("whoami as bob = %q, %v", got, err)
	}
	// The reaper may already have run before bob's call (it ticks every
	// 50 ms): that EventIdle predates bob's session, which the next reap
	// closes. Wait for the server to see no session, not for one event.
	evs.wait(t, EventIdle, "docs")
	deadline := time.Now().Add(30 * time.Second) // a hang guard, not a timing assertion
	for live := f.live(); len(live) != 0; live = f.live() {
		if time.Now().After(deadline) {
			t.Fatalf("sessions of %v still open after the idle reap", live)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got, err := whoami(ctx, s, "bob"); err != nil || got != "Bob/Bob" {
		t.Errorf("whoami as bob after the reap = %q, %v; diagnostics %v", got, err, s.Diagnostics())
	}
}

func TestPerRequesterRefusals(t *testing.T) {
	t.Parallel()
	f := newUserFixture(t)
	store := transport.NewTokenStore(filepath.Join(t.TempDir(), "mcp-oauth"))
	f.login(t, store, "alice", "Alice", false)
	profile := f.perRequester()
	profile.Name, profile.OAuthIdentity, profile.AuthProfileID = "prof", "", "work-google"
	noAuth := f.perRequester()
	noAuth.Name, noAuth.Entry.Auth = "plain", ""
	s := startSession(t, context.Background(), []Server{f.perRequester(), profile, noAuth}, store, &Options{})

	diags := map[string]error{}
	for _, err := range s.Diagnostics() {
		var se *ServerError
		if errors.As(err, &se) {
			diags[se.Server] = err
		}
	}
	var pe *PrincipalError
	if err := diags["docs"]; !errors.As(err, &pe) || !pe.Listing || !strings.Contains(err.Error(), "ListPrincipal") {
		t.Errorf("docs connected without a principal: diagnostic %v, want a listing *PrincipalError", err)
	}
	var ape *AuthProfileError
	if err := diags["prof"]; !errors.As(err, &ape) || ape.Profile != "work-google" || !errors.Is(err, ErrAuthProfile) ||
		!strings.Contains(err.Error(), `"prof"`) || !strings.Contains(err.Error(), "openclaw mcp login prof") {
		t.Errorf("prof with an auth profile: diagnostic %v, want an *AuthProfileError", err)
	}
	if err := diags["plain"]; err == nil || !strings.Contains(err.Error(), `needs "auth": "oauth"`) {
		t.Errorf("plain per-requester without auth oauth: diagnostic %v", err)
	}
	if _, _, requests := f.counts(); requests != 0 {
		t.Errorf("the server got %d requests; none of the refused servers should connect", requests)
	}
	if got := toolNames(t, s); len(got) != 0 {
		t.Errorf("tools %v from refused servers", got)
	}
}

func TestServersFromConfigOAuthBlock(t *testing.T) {
	t.Parallel()
	doc, err := config.ParseDocument("openclaw.json", []byte(`{"mcp":{"servers":{
		"shared":{"url":"https://a.example/mcp","auth":"oauth"},
		"mine":{"url":"https://b.example/mcp","auth":"oauth","oauth":{"identity":"per-requester"}},
		"prof":{"url":"https://c.example/mcp","auth":"oauth","oauth":{"authProfileId":"work"}},
		"local":{"command":"srv"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	resolved, diags := doc.ResolveServers()
	if len(diags) != 0 {
		t.Fatal(diags)
	}
	got := map[string][2]string{}
	for _, sv := range ServersFromConfig(resolved) {
		got[sv.Name] = [2]string{sv.OAuthIdentity, sv.AuthProfileID}
	}
	want := map[string][2]string{"shared": {}, "mine": {IdentityPerRequester, ""}, "prof": {"", "work"}, "local": {}}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: identity, authProfileId = %q, want %q", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("servers %v, want %d", got, len(want))
	}
}

func TestPerRequesterFirstPrincipalLists(t *testing.T) {
	t.Parallel()
	f := newUserFixture(t)
	store := f.aliceAndBob(t)
	ctx := context.Background()
	s := startSession(t, ctx, []Server{f.perRequester()}, store, &Options{})
	if got := toolNames(t, s); len(got) != 0 {
		t.Fatalf("tools %v listed without any principal", got)
	}
	// carol names herself first but never logged in: no tools, and the
	// diagnostic tells her to log in.
	backdate(s, "docs")
	if tools, err := s.Tools(WithPrincipal(ctx, "carol")); err != nil || len(tools) != 0 {
		t.Fatalf("tools as carol = %v, %v; want none", tools, err)
	}
	awaitRetries(s) // the retry runs in the background
	if d := s.Diagnostics(); len(d) != 1 || !strings.Contains(d[0].Error(), "openclaw mcp login docs --principal carol") {
		t.Errorf("diagnostics after carol = %v, want carol told to log in", d)
	}
	// A later catalog use naming bob connects the server as bob (once the
	// failed connection may be retried) and lists its tools.
	backdate(s, "docs")
	if _, err := s.Tools(WithPrincipal(ctx, "bob")); err != nil {
		t.Fatal(err)
	}
	awaitRetries(s)
	tools, err := s.Tools(WithPrincipal(ctx, "bob"))
	if err != nil || len(tools) != 1 || tools[0].Name != "docs__whoami" {
		t.Fatalf("tools as bob = %v, %v; want [docs__whoami]; diagnostics %v", tools, err, s.Diagnostics())
	}
	if len(s.Diagnostics()) != 0 {
		t.Errorf("diagnostics after bob listed: %v", s.Diagnostics())
	}
	for _, tc := range []struct{ principal, want string }{{"bob", "Bob/Bob"}, {"alice", "Alice/Alice"}} {
		if got, err := whoami(ctx, s, tc.principal); err != nil || got != tc.want {
			t.Errorf("whoami as %s = %q, %v; want %q", tc.principal, got, err, tc.want)
		}
	}
	if bound, others := s.set.Load().conns[0].principals(); bound != "bob" || !slices.Equal(others, []string{"alice"}) {
		t.Errorf("listing connection of %q, others %v; want bob, [alice]", bound, others)
	}
}

func TestPerRequesterPauseIsPerPrincipal(t *testing.T) {
	t.Parallel()
	f := newUserFixture(t)
	store := f.aliceAndBob(t)
	sv := f.perRequester()
	sv.ListPrincipal = "alice"
	ctx := context.Background()
	evs := newEvents()
	s := startSession(t, ctx, []Server{sv}, store, &Options{OnEvent: evs.on})
	if got, err := whoami(ctx, s, "bob"); err != nil || got != "Bob/Bob" {
		t.Fatalf("whoami as bob = %q, %v", got, err)
	}
	f.mu.Lock()
	f.broken["Bob"] = true
	f.mu.Unlock()
	for i := range DefaultPauseAfter {
		_, err := whoami(ctx, s, "bob")
		var se *ServerError
		if !errors.As(err, &se) || se.Op != "tools/call" {
			t.Fatalf("failing call %d as bob = %v, want a tools/call *ServerError", i+1, err)
		}
	}
	evs.wait(t, EventPaused, "docs")
	var pe *PausedError
	if _, err := whoami(ctx, s, "bob"); !errors.As(err, &pe) {
		t.Errorf("call as bob after %d failures = %v, want a *PausedError", DefaultPauseAfter, err)
	}
	// Bob's failures paused bob's connection only.
	if got, err := whoami(ctx, s, "alice"); err != nil || got != "Alice/Alice" {
		t.Errorf("whoami as alice while bob is paused = %q, %v", got, err)
	}
	st := s.Status()[0]
	if !slices.Equal(st.Principals, []string{"alice", "bob"}) || !st.PausedUntil.IsZero() || !st.Connected {
		t.Errorf("status = %+v, want principals [alice bob], connected, the listing connection not paused", st)
	}
}

// BenchmarkPerRequesterCall measures a tool call over streamable HTTP with
// the server's shared tokens, and with the per-requester identity (each
// call picks its principal's connection), for 1 and 8 principals taking
// turns.
func BenchmarkPerRequesterCall(b *testing.B) {
	for _, bc := range []struct {
		name       string
		principals int
	}{{"shared", 0}, {"per-requester-1", 1}, {"per-requester-8", 8}} {
		b.Run(bc.name, func(b *testing.B) {
			f := newUserFixture(b)
			store := transport.NewTokenStore(filepath.Join(b.TempDir(), "mcp-oauth"))
			sv := f.perRequester()
			var ps []string
			if bc.principals == 0 {
				sv.OAuthIdentity = ""
				f.login(b, store, "", "Shared", false)
			}
			for i := range bc.principals {
				p := fmt.Sprintf("p%d", i)
				ps = append(ps, p)
				f.login(b, store, p, "U"+p, false)
			}
			if len(ps) > 0 {
				sv.ListPrincipal = ps[0]
			}
			ctx := context.Background()
			s := startSession(b, ctx, []Server{sv}, store, &Options{})
			ctxs := []context.Context{ctx}
			if len(ps) > 0 {
				ctxs = nil
				for _, p := range ps {
					ctxs = append(ctxs, WithPrincipal(ctx, p))
				}
			}
			for _, c := range ctxs { // connect every principal before timing
				if _, err := s.CallTool(c, "docs__whoami", []byte(`{}`)); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := s.CallTool(ctxs[i%len(ctxs)], "docs__whoami", []byte(`{}`)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestPerRequesterPolicyBeforeConnection(t *testing.T) {
	t.Parallel()
	f := newUserFixture(t)
	store := f.aliceAndBob(t)
	sv := f.perRequester()
	sv.ListPrincipal = "alice"
	ctx := context.Background()
	s := startSession(t, ctx, []Server{sv}, store, &Options{
		Enforcer: &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.Block, Module: "rules", Reason: "not today"}},
	})
	var pe *PolicyError
	if _, err := whoami(ctx, s, "bob"); !errors.As(err, &pe) {
		t.Fatalf("blocked call as bob = %v, want a *PolicyError", err)
	}
	// The block came first: no session was opened with bob's token, and
	// bob's unused connection was not kept.
	if opened, _, _ := f.counts(); !slices.Equal(opened, []string{"Alice"}) {
		t.Errorf("sessions opened for %v, want only the listing principal's [Alice]", opened)
	}
	if st := s.Status()[0]; !slices.Equal(st.Principals, []string{"alice"}) {
		t.Errorf("principals %v after a blocked call, want [alice]", st.Principals)
	}
}

// TestPerRequesterPassthroughIsTheListingPrincipals: resources of a
// per-requester server are read on the listing connection, so only its
// principal may read them; anyone else, or nobody, is refused without a
// request under another user's token.
func TestPerRequesterPassthroughIsTheListingPrincipals(t *testing.T) {
	t.Parallel()
	f := newUserFixtureWith(t, true)
	store := f.aliceAndBob(t)
	ctx := context.Background()
	srv := f.perRequester()
	srv.ListPrincipal = "alice"
	s := startSession(t, ctx, []Server{srv}, store, &Options{})
	res, err := s.ReadResource(WithPrincipal(ctx, "alice"), "docs://me")
	if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != "Alice" {
		t.Fatalf("read as alice = %+v, %v; want Alice", res, err)
	}
	_, _, before := f.counts()
	for _, tc := range []struct{ principal, want string }{
		{"bob", `resources/read is served only for the principal that lists it, not for "bob"`},
		{"", "names no principal"},
	} {
		rctx := ctx
		if tc.principal != "" {
			rctx = WithPrincipal(ctx, tc.principal)
		}
		_, err := s.ReadResource(rctx, "docs://me")
		var pe *PrincipalError
		if !errors.As(err, &pe) || !errors.Is(err, ErrNoPrincipal) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("read as %q: %v, want a *PrincipalError saying %q", tc.principal, err, tc.want)
		}
	}
	if _, _, after := f.counts(); after != before {
		t.Errorf("refused reads reached the server: %d requests, want %d", after, before)
	}
}
