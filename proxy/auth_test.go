package proxy

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/testkit/oidcop"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/runtime"
)

// testAudience is the resource the proxy under test calls itself.
const testAudience = "https://mcp.test/mcp"

// oauthFixture is a proxy that is a resource server of a real OpenID
// provider (zitadel's), with clients alice (group oncall), bob, an
// expired one and one whose tokens are for another audience.
type oauthFixture struct {
	*httpFixture
	op *oidcop.Provider
}

func newOAuthFixture(t *testing.T, opts HTTPOptions) *oauthFixture {
	t.Helper()
	op := oidcop.Start(t, testAudience,
		oidcop.Client{ID: "alice", Secret: "a-secret", Groups: []string{"oncall", "dev"}},
		oidcop.Client{ID: "bob", Secret: "b-secret", Groups: []string{"dev"}},
		oidcop.Client{ID: "late", Secret: "l-secret", Expired: true},
		oidcop.Client{ID: "elsewhere", Secret: "e-secret", Audience: "https://other.test/mcp"},
	)
	v, err := NewOAuthVerifier(context.Background(), &OAuthOptions{Issuer: op.Issuer, Audience: testAudience, Claims: []string{"groups"}})
	if err != nil {
		t.Fatal(err)
	}
	opts.OAuth = v
	if opts.Scopes == nil {
		opts.Scopes = []string{"mcp"}
	}
	return &oauthFixture{httpFixture: newHTTPFixture(t, opts), op: op}
}

// session connects a go-sdk client with token.
func (f *oauthFixture) session(t *testing.T, ctx context.Context, token string) *mcp.ClientSession {
	t.Helper()
	return f.connect(t, ctx, &mcp.StreamableClientTransport{Endpoint: f.url + PathMCP,
		HTTPClient: &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}}}, "2025-11-25")
}

// TestOAuthIdentityReachesPolicy: tokens the provider issued open a
// session; each call's before_tool_call input carries the identity (iss,
// sub, client id, scopes, the named groups claim), distinct from the
// self-declared clientInfo.
func TestOAuthIdentityReachesPolicy(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t, HTTPOptions{})
	ctx := t.Context()
	cs := f.session(t, ctx, f.op.Token(t, "alice", "a-secret", "mcp"))
	if got, isErr := callText(t, ctx, cs, "up__echo", map[string]any{"message": "from-alice"}); isErr || got != "echo: from-alice" {
		t.Fatalf("call: %q %v", got, isErr)
	}
	f.mu.Lock()
	id, caller := f.idents["from-alice"], f.callers["from-alice"]
	f.mu.Unlock()
	if id == nil {
		t.Fatal("before_tool_call saw no identity")
	}
	if id.Issuer != f.op.Issuer || id.Subject != "alice" || id.ClientID != "alice" || !slices.Contains(id.Scopes, "mcp") || string(id.Claims["groups"]) != `["oncall","dev"]` {
		t.Errorf("identity = %+v (groups %s)", id, id.Claims["groups"])
	}
	if caller != "http-client" {
		t.Errorf("caller (clientInfo) = %q", caller)
	}
}

// TestOAuthRefusals: each bad token is refused before the body is read,
// with 401 and a WWW-Authenticate naming error, the cause and the
// resource metadata; a token without the required scope gets 403
// insufficient_scope with the scope.
func TestOAuthRefusals(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t, HTTPOptions{CallScopes: []string{"tools:call"}})
	meta := "https://mcp.test" + PathProtectedResource + "/mcp"
	hdr := func(tok string) map[string]string {
		h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
		if tok != "" {
			h["Authorization"] = "Bearer " + tok
		}
		return h
	}
	good := f.op.Token(t, "alice", "a-secret", "mcp")
	rogue, _ := rsa.GenerateKey(rand.Reader, 2048)
	// The good token's claims, signed by a key the issuer never had.
	var claims map[string]any
	parts := strings.Split(good, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	_ = json.Unmarshal(payload, &claims)
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: rogue}, (&jose.SignerOptions{}).WithHeader("kid", "rogue"))
	forged, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."

	for _, tc := range []struct {
		name, token string
		status      int
		auth        []string // in WWW-Authenticate
	}{
		{"no token", "", 401, []string{`Bearer scope="mcp"`, `resource_metadata="` + meta + `"`}},
		{"expired", f.op.Token(t, "late", "l-secret", "mcp"), 401, []string{`error="invalid_token"`, "the token expired at", `resource_metadata="` + meta + `"`}},
		{"other audience", f.op.Token(t, "elsewhere", "e-secret", "mcp"), 401, []string{`error="invalid_token"`, `is for audience [?https://other.test/mcp?], not ?https://mcp.test/mcp?`}},
		{"other key", forged, 401, []string{`error="invalid_token"`, `no key of the issuer's JWKS is ?rogue?`}},
		{"alg none", none, 401, []string{`error="invalid_token"`, `unexpected signature algorithm ?none?`}},
		{"garbage", "not-a-jwt", 401, []string{`error="invalid_token"`, "malformed jwt"}},
		{"no scope", f.op.Token(t, "alice", "a-secret", ""), 403, []string{`error="insufficient_scope"`, `scope="mcp"`, `resource_metadata="` + meta + `"`}},
	} {
		status, auth, body := do(t, "POST", f.url+PathMCP, hdr(tc.token), initBody)
		if status != tc.status {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, status, tc.status, body)
		}
		for _, want := range tc.auth {
			if !strings.Contains(auth, want) {
				t.Errorf("%s: WWW-Authenticate %q lacks %q", tc.name, auth, want)
			}
		}
	}

	// The protected resource metadata names the issuer and the scopes.
	status, _, body := do(t, "GET", f.url+PathProtectedResource+"/mcp", nil, "")
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		Scopes               []string `json:"scopes_supported"`
	}
	if err := json.Unmarshal([]byte(body), &prm); status != 200 || err != nil || prm.Resource != testAudience ||
		!slices.Equal(prm.AuthorizationServers, []string{f.op.Issuer}) || !slices.Equal(prm.Scopes, []string{"mcp", "tools:call"}) {
		t.Errorf("metadata: %d %s", status, body)
	}

	// A token with "mcp" but not "tools:call" lists, and is refused the call
	// with 403 insufficient_scope naming both.
	ctx := t.Context()
	cs := f.session(t, ctx, good)
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("tools/list with scope mcp: %v", err)
	}
	h := hdr(good)
	h["Mcp-Session-Id"] = cs.ID()
	h["Mcp-Protocol-Version"] = "2025-11-25"
	status, auth, body := do(t, "POST", f.url+PathMCP, h, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo","arguments":{"message":"x"}}}`)
	if status != 403 || !strings.Contains(auth, `error="insufficient_scope"`) || !strings.Contains(auth, `scope="mcp tools:call"`) || !strings.Contains(body, `tools/call needs scope \"tools:call\"`) {
		t.Errorf("tools/call without tools:call: %d %q %s", status, auth, body)
	}
	full := f.session(t, ctx, f.op.Token(t, "alice", "a-secret", "mcp tools:call"))
	if got, isErr := callText(t, ctx, full, "up__echo", map[string]any{"message": "ok"}); isErr || got != "echo: ok" {
		t.Errorf("call with tools:call: %q %v", got, isErr)
	}
}

// TestSessionBoundToIdentity: a session alice opened is refused to bob's
// token (403), and to a tokens-file identity; alice's next token (a new
// one, same subject) continues it.
func TestSessionBoundToIdentity(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte("ci-token"))
	toks, err := parseTokensFile("tokens.json", []byte(`{"tokens":[{"name":"ci","sha256":"`+hex.EncodeToString(sum[:])+`","scopes":["mcp"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	f := newOAuthFixture(t, HTTPOptions{Tokens: toks, Token: "anon-token"})
	ctx := t.Context()
	cs := f.session(t, ctx, f.op.Token(t, "alice", "a-secret", "mcp"))
	list := `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
	for _, tc := range []struct {
		who, token string
		want       int
	}{
		{"bob", f.op.Token(t, "bob", "b-secret", "mcp"), 403},
		{"ci", "ci-token", 403},
		{"the anonymous token", "anon-token", 403},
		{"alice again", f.op.Token(t, "alice", "a-secret", "mcp"), 200},
	} {
		status, _, body := do(t, "POST", f.url+PathMCP, map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Authorization": "Bearer " + tc.token, "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25"}, list)
		if status != tc.want {
			t.Errorf("%s on alice's session: %d, want %d (%s)", tc.who, status, tc.want, body)
		}
	}
	// The tokens-file identity opens its own session and is named.
	ci := f.session(t, ctx, "ci-token")
	if _, isErr := callText(t, ctx, ci, "up__echo", map[string]any{"message": "from-ci"}); isErr {
		t.Fatal("ci call failed")
	}
	f.mu.Lock()
	id := f.idents["from-ci"]
	f.mu.Unlock()
	if id == nil || id.Subject != "ci" || id.Issuer != IssuerTokensFile {
		t.Errorf("ci identity = %+v", id)
	}
	// A session of the anonymous token (--token-file beside the tokens
	// file) belongs to it: no identity uses or deletes it.
	anon := f.session(t, ctx, "anon-token")
	for method, body := range map[string]string{"POST": list, "DELETE": ""} {
		status, _, body := do(t, method, f.url+PathMCP, map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Authorization": "Bearer ci-token", "Mcp-Session-Id": anon.ID(), "Mcp-Protocol-Version": "2025-11-25"}, body)
		if status != 403 {
			t.Errorf("%s by ci on the anonymous token's session: %d, want 403 (%s)", method, status, body)
		}
	}
	if _, isErr := callText(t, ctx, anon, "up__echo", map[string]any{"message": "from-anon"}); isErr {
		t.Error("the anonymous token's call failed on its own session")
	}
	// Legacy SSE cannot bind its sessions: refused, saying why.
	if status, _, body := do(t, "GET", f.url+PathSSE, map[string]string{"Authorization": "Bearer ci-token"}, ""); status != 404 || !strings.Contains(body, "use streamable HTTP") {
		t.Errorf("GET /sse: %d %s", status, body)
	}
}

// TestInboundTokenNotForwarded: a call through the proxy reaches an HTTP
// upstream without the client's Authorization header.
func TestInboundTokenNotForwarded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	up.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("up answered"), nil
	})
	var mu sync.Mutex
	var seen []string
	upHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)
	upHTTP := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		upHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(upHTTP.Close)
	sess, err := runtime.New([]runtime.Server{{Name: "web", Transport: &mcp.StreamableClientTransport{Endpoint: upHTTP.URL}}},
		&runtime.Options{Surface: policies.SurfaceProxy, Sanitizer: &policiestest.Sanitizer{}, Enforcer: policies.NewChain(nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	if err := sess.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := New(ctx, sess, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	const inbound = "the-clients-token"
	h, err := NewHTTPHandler(p, &HTTPOptions{Token: inbound})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(h)
	t.Cleanup(front.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: front.URL + PathMCP,
		HTTPClient: &http.Client{Transport: bearer{token: inbound, base: http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got, isErr := callText(t, ctx, cs, "web__echo", nil); isErr || got != "up answered" {
		t.Fatalf("call: %q %v", got, isErr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the upstream saw no request")
	}
	for _, a := range seen {
		if a != "" {
			t.Errorf("the upstream saw Authorization %q", a)
		}
	}
}

// TestTokensFileErrors: a bad tokens file is refused naming the entry.
func TestTokensFileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, want string }{
		{`{"tokens":[]}`, "no tokens"},
		{" \n", "the file is empty"},
		{`{"tokens":[{"sha256":"00"}]}`, "tokens[0]: no name"},
		{`{"tokens":[{"name":"a","sha256":"xyz"}]}`, `tokens[0] ("a"): "sha256" "xyz" is not 64 hex digits`},
		{`{"tokens":[{"name":"a","token":"t","sha256":"` + strings.Repeat("0", 64) + `"}]}`, "give one of"},
		{`{"tokens":[{"name":"a","token":"t"},{"name":"b","token":"t"}]}`, `tokens[1] ("b"): the same token as "a"`},
		{`{"tokens":[{"name":"a","token":"t"},{"name":"a","token":"u"}]}`, "the name is used twice"},
		{`{"tokens":[{"name":"a","token":"t","group":"x"}]}`, `unknown field "group"`},
		{`{"tokens":[{"name":"a","token":"t"}],"tokens":[{"name":"b","token":"u"}]}`, `$.tokens is given twice`},
		{`{"tokens":[{"name":"a","token":"t","scopes":["x"],"scopes":[]}]}`, `$.tokens[0].scopes is given twice`},
	} {
		if _, err := parseTokensFile("f.json", []byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.body, err, tc.want)
		}
	}
}

// FuzzIdentityFromClaims: any claims document maps to an identity with a
// subject, or to an error; never a panic, and the identity encodes.
func FuzzIdentityFromClaims(f *testing.F) {
	f.Add([]byte(`{"iss":"https://i","sub":"alice","azp":"cli","scope":"a b","groups":["oncall"]}`))
	f.Add([]byte(`{"sub":"x","scp":["a","b"],"client_id":"c"}`))
	f.Add([]byte(`{"sub":"x","scp":"a b","groups":null}`))
	f.Add([]byte(`{"sub":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := identityFromClaims(b, []string{"groups", "roles"})
		if err != nil {
			return
		}
		if id.Subject == "" {
			t.Fatalf("identity without subject from %s", b)
		}
		if _, err := json.Marshal(id); err != nil {
			t.Fatalf("identity from %s does not encode: %v", b, err)
		}
	})
}

// BenchmarkVerifyJWT is the resource server's per-request cost: one
// access token of the provider verified with the JWKS cached.
func BenchmarkVerifyJWT(b *testing.B) {
	op := oidcop.Start(b, testAudience, oidcop.Client{ID: "alice", Secret: "s", Groups: []string{"oncall"}})
	v, err := NewOAuthVerifier(context.Background(), &OAuthOptions{Issuer: op.Issuer, Audience: testAudience, Claims: []string{"groups"}})
	if err != nil {
		b.Fatal(err)
	}
	tok := op.Token(b, "alice", "s", "mcp")
	ctx := context.Background()
	// The process CPU time per verification beside the wall time: on a
	// shared machine the wall time counts the waits for a core.
	// "first": a token not seen before (signature, claims); "again": one
	// verified before (hash, lookup, exp, nbf, key still published).
	for _, first := range []bool{true, false} {
		name := map[bool]string{true: "first", false: "again"}[first]
		b.Run(name, func(b *testing.B) {
			var before, after syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			for b.Loop() {
				if first {
					v.mu.Lock()
					clear(v.verified)
					v.mu.Unlock()
				}
				if _, err := v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkBearerAuth is the per-request cost of the HTTP handler's bearer
// check (HTTPHandler.authorized, up to the handler it guards, which does
// nothing here), for each kind of token in one run: the single static
// token, a token of the tokens file, and an OAuth access token of the
// provider (JWKS cached) the first time it is seen and on each later
// request.
func BenchmarkBearerAuth(b *testing.B) {
	op := oidcop.Start(b, testAudience, oidcop.Client{ID: "alice", Secret: "s", Groups: []string{"oncall"}})
	v, err := NewOAuthVerifier(context.Background(), &OAuthOptions{Issuer: op.Issuer, Audience: testAudience, Claims: []string{"groups"}})
	if err != nil {
		b.Fatal(err)
	}
	jwtTok := op.Token(b, "alice", "s", "mcp")
	const static, ci = "the-single-static-token", "a-token-of-the-tokens-file"
	a, err := newAuthState(&HTTPOptions{Token: static, OAuth: v,
		Tokens: []StaticToken{{SHA256: sha256.Sum256([]byte(ci)), Identity: policies.Identity{Issuer: IssuerTokensFile, Subject: "ci"}}}})
	if err != nil {
		b.Fatal(err)
	}
	h := (&HTTPHandler{auth: a}).authorized(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, tc := range []struct {
		name, token string
		forget      bool // forget the verified tokens before each request
	}{
		{"static token", static, false},
		{"tokens file", ci, false},
		{"JWT first", jwtTok, true},
		{"JWT again", jwtTok, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			req.Header.Set("Authorization", "Bearer "+tc.token)
			w := httptest.NewRecorder()
			var before, after syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			for b.Loop() {
				if tc.forget {
					v.mu.Lock()
					clear(v.verified)
					v.mu.Unlock()
				}
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%s: status %d: %s", tc.name, w.Code, w.Body)
				}
			}
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// TestJWKSRotationBounded: a token signed by a key the cached JWKS does not
// hold makes the verifier fetch the JWKS again, at most once per
// MinRefresh (clock driven by the test): a rotated-in key is accepted once
// the interval passed, and a flood of unknown key ids costs no fetch.
func TestJWKSRotationBounded(t *testing.T) {
	t.Parallel()
	k1, _ := rsa.GenerateKey(rand.Reader, 2048)
	k2, _ := rsa.GenerateKey(rand.Reader, 2048)
	var mu sync.Mutex
	published := []jose.JSONWebKey{{Key: &k1.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}
	fetches, down := 0, false
	var issuer string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/.well-known/openid-configuration" {
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": issuer, "jwks_uri": issuer + "/jwks", "id_token_signing_alg_values_supported": []string{"RS256", "none"}})
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fetches++
		if down {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: published})
	}))
	t.Cleanup(srv.Close)
	issuer = srv.URL
	now := time.Unix(1_800_000_000, 0)
	var clock sync.Mutex
	v, err := NewOAuthVerifier(t.Context(), &OAuthOptions{Issuer: issuer, Audience: testAudience, MinRefresh: time.Minute,
		Now: func() time.Time { clock.Lock(); defer clock.Unlock(); return now }})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(key *rsa.PrivateKey, kid string) string {
		s, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", kid))
		tok, _ := jwt.Signed(s).Claims(jwt.Claims{Issuer: issuer, Subject: "alice", Audience: jwt.Audience{testAudience},
			Expiry: jwt.NewNumericDate(now.Add(time.Hour))}).Serialize()
		return tok
	}
	if _, err := v.Verify(t.Context(), sign(k1, "k1")); err != nil {
		t.Fatalf("k1: %v", err)
	}
	// k2 is not published yet; within the interval, nothing is fetched.
	for range 50 {
		if _, err := v.Verify(t.Context(), sign(k2, "k2")); err == nil {
			t.Fatal("an unpublished key verified")
		}
	}
	mu.Lock()
	published = append(published, jose.JSONWebKey{Key: &k2.PublicKey, KeyID: "k2", Algorithm: "RS256", Use: "sig"})
	got := fetches
	mu.Unlock()
	if got != 1 {
		t.Errorf("fetches after a flood of unknown key ids = %d, want 1 (the one at start)", got)
	}
	clock.Lock()
	now = now.Add(61 * time.Second)
	clock.Unlock()
	if _, err := v.Verify(t.Context(), sign(k2, "k2")); err != nil {
		t.Fatalf("k2 after rotation: %v", err)
	}
	// A key published for encryption, or for another algorithm, never
	// verifies; k2 under k1's id does not either.
	if _, err := v.Verify(t.Context(), sign(k2, "k1")); err == nil || !strings.Contains(err.Error(), `does not verify with key "k1"`) {
		t.Errorf("k2 signing as k1: %v", err)
	}
	mu.Lock()
	got = fetches
	mu.Unlock()
	if got != 2 {
		t.Errorf("fetches = %d, want 2", got)
	}

	// The issuer withdraws k1: a k1 token verified before is refused once
	// the JWKS was fetched again (here for an unknown key id).
	old := sign(k1, "k1")
	if _, err := v.Verify(t.Context(), old); err != nil {
		t.Fatalf("k1 before withdrawal: %v", err)
	}
	mu.Lock()
	published = published[1:]
	mu.Unlock()
	clock.Lock()
	now = now.Add(61 * time.Second)
	clock.Unlock()
	if _, err := v.Verify(t.Context(), sign(k2, "k3")); err == nil {
		t.Fatal("unknown key id k3 verified")
	}
	if _, err := v.Verify(t.Context(), old); err == nil {
		t.Error("a token of the withdrawn key k1 is still accepted")
	}

	// The fetches are counted, and so is a failing one; /metrics shows both.
	mu.Lock()
	down = true
	mu.Unlock()
	clock.Lock()
	now = now.Add(61 * time.Second)
	clock.Unlock()
	if _, err := v.Verify(t.Context(), sign(k2, "k4")); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("a token while the JWKS fails: %v, want the fetch's error", err)
	}
	if ok, failed := v.JWKSFetches(); ok != 3 || failed != 1 {
		t.Errorf("JWKSFetches = %d ok, %d failed; want 3, 1", ok, failed)
	}
	m := NewMetrics()
	if err := m.observeJWKS(v); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PathMetrics, nil))
	for _, want := range []string{`openclaw_oauth_jwks_fetches_total{result="ok"} 3`, `openclaw_oauth_jwks_fetches_total{result="error"} 1`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
