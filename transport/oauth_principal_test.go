//go:build linux

package transport

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openclaw-go/openclaw/config"
)

// loginAs logs principal in to the fixture's streamable server "docs".
func loginAs(t *testing.T, f *oauthFixture, store *TokenStore, principal string) *Credentials {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := quiet()
	o.OAuth = &OAuthOptions{Store: store, Principal: principal}
	c, err := Login(ctx, "docs", oauthEntry(f, KindStreamableHTTP), &OAuthFlow{OnAuthURL: browser(t)}, o)
	if err != nil {
		t.Fatalf("Login(%q): %v", principal, err)
	}
	if c.Principal != principal {
		t.Fatalf("Login(%q) returned the credentials of principal %q", principal, c.Principal)
	}
	return c
}

// authsSince returns the Authorization headers /mcp received after the
// first n.
func authsSince(f *oauthFixture, n int) []string {
	_, _, _, a := f.snapshot()
	return a[n:]
}

func TestPerRequesterOAuth(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t)
	store := NewTokenStore(filepath.Join(t.TempDir(), "mcp-oauth"))
	e := oauthEntry(f, KindStreamableHTTP)
	alice := loginAs(t, f, store, "alice")
	bob := loginAs(t, f, store, "bob")
	if alice.AccessToken == bob.AccessToken {
		t.Fatal("alice and bob got the same access token")
	}

	// Stored per (server, principal), never as the shared tokens.
	if shared, err := store.Load("docs", e.URL); err != nil || shared != nil {
		t.Errorf("shared credentials after principal logins = %v, %v; want none", shared, err)
	}
	pa, pb := store.PrincipalPath("docs", e.URL, "alice"), store.PrincipalPath("docs", e.URL, "bob")
	if pa == pb || pa == store.Path("docs", e.URL) {
		t.Errorf("principal paths not distinct: alice %s, bob %s, shared %s", pa, pb, store.Path("docs", e.URL))
	}
	if fi, err := os.Stat(pa); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("alice's token file: %v, %v; want mode 0600", fi, err)
	}
	ps, err := store.Principals("docs", e.URL)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range ps {
		names = append(names, c.Principal)
	}
	if !slices.Equal(names, []string{"alice", "bob"}) {
		t.Errorf("Principals = %q, want [alice bob]", names)
	}
	if other, _ := store.Principals("other", e.URL); len(other) != 0 {
		t.Errorf("Principals of another server = %d, want 0", len(other))
	}

	// One connection; each request carries the token of its context's
	// principal.
	o := quiet()
	o.OAuth = &OAuthOptions{Store: store, PerRequester: true}
	r := resolve(t, "docs", e, o)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "per-requester-test", Version: "1"}, nil).
		Connect(WithPrincipal(ctx, "alice"), r.Transport, nil)
	if err != nil {
		t.Fatalf("Connect as alice: %v", err)
	}
	defer cs.Close()
	for _, who := range []*Credentials{bob, alice, bob} {
		_, _, _, before := f.snapshot()
		res, err := cs.CallTool(WithPrincipal(ctx, who.Principal), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("CallTool as %s: %v %+v", who.Principal, err, res)
		}
		seen := authsSince(f, len(before))
		if !slices.Contains(seen, "Bearer "+who.AccessToken) {
			t.Errorf("call as %s: Authorization headers %q, want %s's token", who.Principal, seen, who.Principal)
		}
	}

	// A principal that never logged in, and a request naming none, fail
	// closed with a message saying what to do.
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"unknown principal", WithPrincipal(ctx, "carol"), `MCP server "docs" requires OAuth authorization for principal "carol". Run openclaw mcp login docs --principal carol.`},
		{"no principal", ctx, `MCP server "docs" uses per-requester OAuth and the request names no principal`},
	} {
		_, _, _, before := f.snapshot()
		_, err := cs.CallTool(tc.ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: CallTool error = %v, want one containing %q", tc.name, err, tc.want)
		}
		if !errors.Is(err, ErrAuthRequired) {
			t.Errorf("%s: error %v does not wrap ErrAuthRequired", tc.name, err)
		}
		// Nothing is sent for such a request: no anonymous request, no
		// fallback to the shared or another principal's token.
		for _, a := range authsSince(f, len(before)) {
			if a == "" {
				t.Errorf("%s: an anonymous request reached the server", tc.name)
			}
		}
	}
}

// A principal who logs in while the connection is open can use it at once.
func TestPerRequesterLoginWhileConnected(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t)
	store := NewTokenStore(filepath.Join(t.TempDir(), "mcp-oauth"))
	e := oauthEntry(f, KindStreamableHTTP)
	loginAs(t, f, store, "alice")
	o := quiet()
	o.OAuth = &OAuthOptions{Store: store, PerRequester: true}
	r := resolve(t, "docs", e, o)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "late-login-test", Version: "1"}, nil).
		Connect(WithPrincipal(ctx, "alice"), r.Transport, nil)
	if err != nil {
		t.Fatalf("Connect as alice: %v", err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}
	if _, err := cs.CallTool(WithPrincipal(ctx, "carol"), params); !errors.Is(err, ErrAuthRequired) {
		t.Fatalf("carol before her login: %v, want ErrAuthRequired", err)
	}
	carol := loginAs(t, f, store, "carol")
	_, _, _, before := f.snapshot()
	if res, err := cs.CallTool(WithPrincipal(ctx, "carol"), params); err != nil || res.IsError {
		t.Fatalf("carol after her login: %v %+v", err, res)
	}
	if seen := authsSince(f, len(before)); !slices.Contains(seen, "Bearer "+carol.AccessToken) {
		t.Errorf("carol's call after login: Authorization %q, want her token", seen)
	}
}

func TestPrincipalBoundConnection(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t)
	store := NewTokenStore(filepath.Join(t.TempDir(), "mcp-oauth"))
	e := oauthEntry(f, KindStreamableHTTP)
	alice := loginAs(t, f, store, "alice")
	o := quiet()
	o.OAuth = &OAuthOptions{Store: store, Principal: "alice"}
	cs := connect(t, resolve(t, "docs", e, o).Transport, "")
	_, _, _, before := f.snapshot()
	if got := callText(t, cs, "echo", nil); got != "ok" {
		t.Errorf("echo = %q", got)
	}
	if seen := authsSince(f, len(before)); !slices.Contains(seen, "Bearer "+alice.AccessToken) {
		t.Errorf("call without a principal on alice's connection: Authorization %q, want alice's token", seen)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := cs.CallTool(WithPrincipal(ctx, "bob"), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
	want := `this connection carries the OAuth tokens of principal "alice", not of the request's`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("bob's call on alice's connection: %v, want an error containing %q", err, want)
	}
}

func TestLoginPerRequesterNeedsPrincipal(t *testing.T) {
	t.Parallel()
	o := quiet()
	o.OAuth = &OAuthOptions{Store: NewTokenStore(t.TempDir()), PerRequester: true}
	_, err := Login(context.Background(), "docs", config.ServerEntry{URL: "http://127.0.0.1:1/mcp"}, nil, o)
	want := `server "docs" uses per-requester OAuth: Login needs OAuthOptions.Principal`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Login = %v, want an error containing %q", err, want)
	}
}

func TestTokenStoreDeleteAll(t *testing.T) {
	t.Parallel()
	store := NewTokenStore(t.TempDir())
	const u = "https://mcp.example.com/mcp"
	for _, p := range []string{"", "alice", "bob"} {
		if err := store.Save(&Credentials{Server: "docs", ServerURL: u, Principal: p, AccessToken: "a-" + p}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Save(&Credentials{Server: "docs-2", ServerURL: u, Principal: "alice", AccessToken: "x"}); err != nil {
		t.Fatal(err)
	}
	if had, err := store.DeletePrincipal("docs", u, "alice"); err != nil || !had {
		t.Errorf("DeletePrincipal(alice) = %t, %v; want true", had, err)
	}
	if c, _ := store.LoadPrincipal("docs", u, "bob"); c == nil || c.AccessToken != "a-bob" {
		t.Errorf("bob's credentials after deleting alice's = %v", c)
	}
	if n, err := store.DeleteAll("docs", u); err != nil || n != 2 {
		t.Errorf("DeleteAll = %d, %v; want 2 (shared and bob)", n, err)
	}
	if ps, _ := store.Principals("docs", u); len(ps) != 0 {
		t.Errorf("principals after DeleteAll: %d", len(ps))
	}
	if ps, _ := store.Principals("docs-2", u); len(ps) != 1 {
		t.Errorf("DeleteAll of docs touched docs-2: %d principals left, want 1", len(ps))
	}
}

func TestStatusOf(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		c         *Credentials
		want      AuthState
		refresh   bool
		needLogin bool
	}{
		{"nothing stored", nil, AuthUnauthenticated, false, true},
		{"no expiry", &Credentials{AccessToken: "a"}, AuthAuthorized, false, false},
		{"fresh", &Credentials{AccessToken: "a", RefreshToken: "r", Expiry: now.Add(time.Hour)}, AuthAuthorized, true, false},
		{"within the skew", &Credentials{AccessToken: "a", RefreshToken: "r", Expiry: now.Add(10 * time.Second)}, AuthExpired, true, false},
		{"expired, refreshable", &Credentials{AccessToken: "a", RefreshToken: "r", Expiry: now.Add(-time.Hour)}, AuthExpired, true, false},
		{"expired, no refresh token", &Credentials{AccessToken: "a", Expiry: now.Add(-time.Hour)}, AuthExpired, false, true},
		{"registration only", &Credentials{ClientID: "c"}, AuthUnauthenticated, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := StatusOf(tc.c, now)
			if st.State != tc.want || st.Refreshable != tc.refresh || st.NeedsLogin() != tc.needLogin {
				t.Errorf("StatusOf = %+v (needs login %t), want state %s refreshable %t needs login %t", st, st.NeedsLogin(), tc.want, tc.refresh, tc.needLogin)
			}
		})
	}
}

// BenchmarkPerRequesterCall measures a tool call over one connection when
// the token is chosen per request from the context's principal (alternating
// between two principals), against the shared identity.
func BenchmarkPerRequesterCall(b *testing.B) {
	f := newOAuthFixture(b)
	store := NewTokenStore(b.TempDir())
	e := oauthEntry(f, KindStreamableHTTP)
	ctx := context.Background()
	open := &OAuthFlow{OnAuthURL: func(u string) {
		if resp, err := http.Get(u); err == nil {
			resp.Body.Close()
		}
	}}
	for _, p := range []string{"", "alice", "bob"} {
		o := quiet()
		o.OAuth = &OAuthOptions{Store: store, Principal: p}
		if _, err := Login(ctx, "docs", e, open, o); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name         string
		perRequester bool
	}{{"shared", false}, {"per-requester", true}} {
		b.Run(bc.name, func(b *testing.B) {
			o := quiet()
			o.OAuth = &OAuthOptions{Store: store, PerRequester: bc.perRequester}
			r, err := Resolve("docs", e, o)
			if err != nil {
				b.Fatal(err)
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(WithPrincipal(ctx, "alice"), r.Transport, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			ctxs := []context.Context{WithPrincipal(ctx, "alice"), WithPrincipal(ctx, "bob")}
			params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}
			i := 0
			for b.Loop() {
				if _, err := cs.CallTool(ctxs[i%2], params); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
