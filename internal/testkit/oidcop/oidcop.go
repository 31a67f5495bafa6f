// Package oidcop runs a real OpenID provider for tests: the one of
// github.com/zitadel/oidc/v3 (its op package, with its example storage),
// which no one on this project wrote, on an httptest server. Its clients
// use the client_credentials grant and receive JWT access tokens for a
// configured audience, with the granted scopes and a "groups" claim.
//
//	op := oidcop.Start(t, "http://127.0.0.1:8765/mcp", oidcop.Client{ID: "alice", Secret: "a", Groups: []string{"oncall"}})
//	tok := op.Token(t, "alice", "a", "mcp")
package oidcop

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Client is a client_credentials client of the provider; its tokens'
// subject is its ID.
type Client struct {
	ID, Secret string
	// Groups is the tokens' "groups" claim (left out when empty).
	Groups []string
	// Audience overrides the provider's audience for this client's tokens.
	Audience string
	// Expired makes this client's tokens expire an hour before issue.
	Expired bool
}

// Provider is a running OpenID provider.
type Provider struct {
	// Issuer is its issuer URL (http://127.0.0.1:PORT).
	Issuer string
	srv    *httptest.Server
}

// Start runs a provider whose tokens are for audience, with clients; it
// stops at the end of the test.
func Start(t testing.TB, audience string, clients ...Client) *Provider {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + srv.Listener.Addr().String()
	st := &store{Storage: storage.NewStorage(storage.NewUserStore(issuer)), audience: audience, clients: map[string]Client{}}
	for _, c := range clients {
		st.clients[c.ID] = c
	}
	provider, err := op.NewProvider(&op.Config{CryptoKey: sha256.Sum256([]byte("oidcop")), CodeMethodS256: true, AuthMethodPost: true}, st, op.StaticIssuer(issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatalf("oidcop: %v", err)
	}
	srv.Config.Handler = provider
	srv.Start()
	t.Cleanup(srv.Close)
	return &Provider{Issuer: issuer, srv: srv}
}

// Token obtains an access token for client with the client_credentials
// grant, asking for scope (space separated, may be empty).
func (p *Provider) Token(t testing.TB, client, secret, scope string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}}
	if scope != "" {
		form.Set("scope", scope)
	}
	req, _ := http.NewRequest(http.MethodPost, p.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(client, secret)
	resp, err := p.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("oidcop: token: %v", err)
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.AccessToken == "" {
		t.Fatalf("oidcop: token for %s: %s %v %s: %s", client, resp.Status, err, body.Error, body.Description)
	}
	return body.AccessToken
}

// store is the example storage with this package's clients: JWT access
// tokens for the audience, a groups claim, expired tokens on request.
type store struct {
	*storage.Storage
	audience string
	clients  map[string]Client
}

// jwtClient is a service client whose access tokens are JWTs.
type jwtClient struct {
	op.Client
	id string
}

func (c jwtClient) GetID() string                       { return c.id }
func (c jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c jwtClient) ClockSkew() time.Duration            { return 0 }
func (c jwtClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// ClientCredentials authenticates one of the clients; the op.Client is the
// example storage's service client, made to issue JWTs.
func (s *store) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	c, ok := s.clients[id]
	if !ok || c.Secret != secret {
		return nil, errors.New("wrong client id or secret")
	}
	base, err := s.Storage.ClientCredentials(ctx, "sid1", "verysecret")
	if err != nil {
		return nil, err
	}
	return jwtClient{Client: base, id: id}, nil
}

// ClientCredentialsTokenRequest names the client as the subject and the
// audience.
func (s *store) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	aud := s.audience
	if c := s.clients[id]; c.Audience != "" {
		aud = c.Audience
	}
	return &oidc.JWTTokenRequest{Subject: id, Audience: []string{aud}, Scopes: scopes}, nil
}

// CreateAccessToken backdates the expiry of an Expired client's token.
func (s *store) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	id, exp, err := s.Storage.CreateAccessToken(ctx, req)
	if c := s.clients[req.GetSubject()]; err == nil && c.Expired {
		exp = time.Now().Add(-time.Hour)
	}
	return id, exp, err
}

// GetPrivateClaimsFromScopes adds the granted scopes as the "scope" claim
// (RFC 9068; zitadel's op leaves scopes to introspection) and the client's
// groups.
func (s *store) GetPrivateClaimsFromScopes(_ context.Context, subject, _ string, scopes []string) (map[string]any, error) {
	claims := map[string]any{}
	if len(scopes) > 0 {
		claims["scope"] = strings.Join(scopes, " ")
	}
	if c := s.clients[subject]; len(c.Groups) > 0 {
		claims["groups"] = c.Groups
	}
	return claims, nil
}
