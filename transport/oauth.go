package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/oauthcred"
	"github.com/openclaw-go/openclaw/internal/redact"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// OAuth of HTTP MCP servers (auth: "oauth", docs/protocol-facts.md, mcp.servers entry schema and Transport resolution).
//
// `openclaw mcp login <name>` runs [Login]: discovery of the protected
// resource and authorization server metadata, client registration (client ID
// metadata document, pre-registered client or dynamic registration) and the
// authorization code flow with PKCE, all done by go-sdk's auth and oauthex
// packages; the result is saved in a [TokenStore]. Connections to servers
// with auth "oauth" then send the stored access token, refresh it when it
// expires or the server answers 401, and save the refreshed token. Without a
// usable token a connection fails with an *[AuthRequiredError] that tells the
// operator to run `openclaw mcp login <name>`, unless [OAuthOptions.Flow] lets
// the connection run the flow itself (embedders with a user at hand, the
// conformance client).

// TokenExpirySkew is how long before its expiry an access token is refreshed
// (OpenClaw's TOKEN_EXPIRY_SKEW_MS, 30 s).
const TokenExpirySkew = 30 * time.Second

// OAuthOptions configure OAuth for the entries with auth "oauth"
// ([Options.OAuth]). The zero value and nil are valid.
type OAuthOptions struct {
	// Store keeps the tokens. nil means a store in [DefaultTokenDir].
	Store *TokenStore
	// Backend, when non-nil, keeps the tokens instead of Store (e.g. in
	// the Redis that `openclaw mcp proxy --state` names).
	Backend TokenBackend
	// Flow, when non-nil, lets a connection run the authorization code flow
	// itself when the server asks for authorization and no stored token
	// answers (none stored, refresh refused, scope step-up). nil makes such
	// a connection fail with an *AuthRequiredError.
	Flow *OAuthFlow
	// Principal, when non-empty, makes the connection use the tokens of
	// that principal (oauth.identity "per-requester", docs/protocol-facts.md, mcp.servers entry schema) for
	// every request, and [Login] store its tokens under that principal. A
	// request whose context names another principal ([WithPrincipal]) is
	// refused with an *AuthRequiredError of Reason "principal".
	Principal string
	// PerRequester, with Principal empty, makes each request use the tokens
	// of the principal its context names ([WithPrincipal]); a request
	// naming none fails with an *AuthRequiredError of Reason "principal",
	// never falling back to the shared tokens. Set it (or Principal) only
	// in the Options of servers with oauth.identity "per-requester".
	PerRequester bool
}

// OAuthFlow configures the authorization code flow of [Login] (and of
// connections given [OAuthOptions.Flow]). The zero value is valid: dynamic
// client registration with a loopback redirect on a free port of 127.0.0.1.
type OAuthFlow struct {
	// Scope is the entry's oauth.scope: space-separated scopes requested
	// instead of those the server advertises. Empty means the scopes of the
	// server's WWW-Authenticate challenge, else its scopes_supported.
	Scope string
	// RedirectURL is the entry's oauth.redirectUrl. Empty means
	// http://127.0.0.1:<free port>/oauth/callback. With the default Fetch,
	// the callback is served on its host and port.
	RedirectURL string
	// ClientMetadataURL is the entry's oauth.clientMetadataUrl: an https URL
	// with a non-root path used as the client ID when the authorization
	// server supports client ID metadata documents (SEP-991).
	ClientMetadataURL string
	// ClientID and ClientSecret are a pre-registered client, used when the
	// server does not take ClientMetadataURL; an empty ClientSecret means a
	// public client. Empty ClientID means dynamic client registration
	// (RFC 7591), which is always tried last.
	ClientID, ClientSecret string
	// Fetch obtains the authorization code for an authorization URL. nil
	// means: report the URL to OnAuthURL, serve RedirectURL on the loopback
	// interface and wait for the browser's redirect (bounded by ctx).
	Fetch auth.AuthorizationCodeFetcher
	// OnAuthURL is told the authorization URL the user must open (default
	// Fetch only). nil drops it.
	OnAuthURL func(authURL string)
	// HTTPClient makes the discovery, registration and token requests. nil
	// means a client with the server entry's TLS settings and timeouts.
	HTTPClient *http.Client
}

// ErrAuthRequired is wrapped by *AuthRequiredError.
var ErrAuthRequired = errors.New("transport: MCP server requires OAuth authorization")

// AuthRequiredError says that an OAuth server cannot be used until the
// operator runs `openclaw mcp login <server>`. It never quotes a token.
type AuthRequiredError struct {
	// Server is the mcp.servers name.
	Server string
	// Principal is the requester whose tokens were wanted (per-requester
	// identity); empty for the shared tokens.
	Principal string
	// Reason is one of "missing" (no token stored), "expired" (expired
	// without a refresh token), "refresh" (the refresh failed), "rejected"
	// (the server refused a fresh token), "scope" (the server asks for
	// more scopes) and "principal" (a per-requester server called without
	// a principal, or with another one than the connection's).
	Reason string
	// Err is the cause, if any (never holding a token).
	Err error
}

// Error reads like OpenClaw's messages, e.g.
// `MCP server "docs" requires OAuth authorization. Run openclaw mcp login docs.`
func (e *AuthRequiredError) Error() string {
	if e.Reason == "principal" {
		msg := fmt.Sprintf("MCP server %q uses per-requester OAuth and the request names no principal", e.Server)
		if e.Principal != "" {
			msg = fmt.Sprintf("MCP server %q: this connection carries the OAuth tokens of principal %q, not of the request's", e.Server, e.Principal)
		}
		if e.Err != nil {
			msg += " (" + e.Err.Error() + ")"
		}
		return msg + "."
	}
	var what string
	switch e.Reason {
	case "expired":
		what = "has expired OAuth credentials"
	case "refresh":
		what = "could not refresh OAuth credentials"
	case "rejected":
		what = "rejected its OAuth credentials"
	case "scope":
		what = "requires additional OAuth authorization"
	default:
		what = "requires OAuth authorization"
	}
	login := e.Server
	if e.Principal != "" {
		what += fmt.Sprintf(" for principal %q", e.Principal)
		login += " --principal " + e.Principal
	}
	msg := fmt.Sprintf("MCP server %q %s. Run openclaw mcp login %s.", e.Server, what, login)
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	return msg
}

// Unwrap returns ErrAuthRequired and the cause.
func (e *AuthRequiredError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrAuthRequired, e.Err}
	}
	return []error{ErrAuthRequired}
}

// Credentials are what a [TokenBackend] keeps for one server and
// principal (internal/oauthcred, the model the token files and the
// replicas' Redis share).
type Credentials = oauthcred.Credentials

// oauthConfig is the oauth2 client configuration of c.
func oauthConfig(c *Credentials) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     c.ClientID,
		ClientSecret: c.ClientSecret,
		Endpoint:     oauth2.Endpoint{AuthURL: c.AuthURL, TokenURL: c.TokenURL, AuthStyle: oauth2.AuthStyle(c.AuthStyle)},
		Scopes:       c.Scopes,
	}
}

// fresh reports whether c's access token is usable at now.
func fresh(c *Credentials, now time.Time) bool {
	return c.AccessToken != "" && (c.Expiry.IsZero() || c.Expiry.After(now.Add(TokenExpirySkew)))
}

// DefaultTokenDir is where tokens live unless [OAuthOptions.Store] says
// otherwise: <state dir>/mcp-oauth, the state dir being $OPENCLAW_STATE_DIR,
// else $OPENCLAW_HOME/.openclaw/state, else ~/.openclaw/state (the rule of
// config.StateDir). lookup reads the environment; nil means os.LookupEnv.
func DefaultTokenDir(lookup func(string) (string, bool)) (string, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if d, ok := lookup("OPENCLAW_STATE_DIR"); ok && d != "" {
		return filepath.Join(d, "mcp-oauth"), nil
	}
	home, ok := lookup("OPENCLAW_HOME")
	if !ok || home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("transport: no folder for OAuth tokens: %w", err)
		}
		home = h
	}
	return filepath.Join(home, ".openclaw", "state", "mcp-oauth"), nil
}

// TokenStore keeps OAuth credentials, one JSON file per server in Dir,
// named after the server and keyed by its name and URL origin, so a server
// renamed or pointed at another origin needs a new login. Files are mode
// 0600 in a 0700 folder and replaced atomically. A TokenStore is safe for
// concurrent use; processes sharing Dir see each other's writes.
type TokenStore struct {
	dir string
	mu  sync.Mutex
}

// NewTokenStore returns a store in dir; nothing is created until Save.
func NewTokenStore(dir string) *TokenStore { return &TokenStore{dir: dir} }

// Dir is the store's folder.
func (s *TokenStore) Dir() string { return s.dir }

// Path is the file holding the credentials of server at serverURL.
func (s *TokenStore) Path(server, serverURL string) string {
	id, _ := CredentialsID(server, serverURL, "")
	var b strings.Builder
	for _, r := range server {
		if r < 0x80 && (r == '-' || r == '_' || r == '.' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return filepath.Join(s.dir, b.String()+"-"+id+".json")
}

// Load returns the stored credentials of server at serverURL, or nil and no
// error when there are none.
func (s *TokenStore) Load(server, serverURL string) (*Credentials, error) {
	return s.LoadPrincipal(server, serverURL, "")
}

// LoadPrincipal returns the stored credentials of principal at server
// (serverURL), or nil and no error when there are none; principal "" means
// the shared credentials, as [TokenStore.Load].
func (s *TokenStore) LoadPrincipal(server, serverURL, principal string) (*Credentials, error) {
	return loadFile(server, s.PrincipalPath(server, serverURL, principal))
}

// parseCredentials decodes the credentials file p of server.
func parseCredentials(server, p string, data []byte) (*Credentials, error) {
	var c Credentials
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("transport: OAuth credentials of %q in %s do not parse: %w", server, p, err)
	}
	return &c, nil
}

// Save writes c as the credentials of c.Server at c.ServerURL (of
// c.Principal when set, see [TokenStore.PrincipalPath]): to a
// temporary file of mode 0600 in the same folder, synced, then renamed over
// the old one, so a reader sees the old or the new credentials, never a
// mix.
func (s *TokenStore) Save(c *Credentials) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("transport: creating the OAuth token folder: %w", err)
	}
	cc := *c
	cc.Saved = time.Now().UTC()
	data, err := json.MarshalIndent(&cc, "", "  ")
	if err != nil {
		return err
	}
	p := s.PrincipalPath(c.Server, c.ServerURL, c.Principal)
	f, err := os.CreateTemp(s.dir, ".tmp-*.json")
	if err != nil {
		return fmt.Errorf("transport: saving OAuth credentials of %q: %w", c.Server, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	err = f.Chmod(0o600) // CreateTemp makes 0600 already; be explicit
	if err == nil {
		_, err = f.Write(append(data, '\n'))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		return fmt.Errorf("transport: saving OAuth credentials of %q: %w", c.Server, err)
	}
	return nil
}

// Delete removes the credentials of server at serverURL and reports whether
// there were any.
func (s *TokenStore) Delete(server, serverURL string) (bool, error) {
	return s.DeletePrincipal(server, serverURL, "")
}

// DeletePrincipal removes the credentials of principal at server
// (serverURL; "" means the shared ones) and reports whether there were any.
func (s *TokenStore) DeletePrincipal(server, serverURL, principal string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := os.Remove(s.PrincipalPath(server, serverURL, principal))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("transport: deleting OAuth credentials of %q: %w", server, err)
	}
	return true, nil
}

// oauthState is the OAuth side of one server's HTTP client: the current
// credentials, their refresh, and the authorization flow when allowed.
type oauthState struct {
	server, serverURL string
	principal         string // "" for the shared tokens
	perRequester      bool   // pick a child per request principal
	store             TokenBackend
	flow              *OAuthFlow
	client            *http.Client // discovery, registration, token requests
	log               *slog.Logger
	now               func() time.Time

	mu      sync.Mutex // guards creds and loaded
	creds   *Credentials
	loaded  bool
	flowMu  sync.Mutex // one refresh or authorization at a time
	handler *auth.AuthorizationCodeHandler

	childMu  sync.Mutex             // guards children
	children map[string]*oauthState // per-requester: one state per principal
}

// current returns the credentials, loading them from the store once they
// exist (until then each call looks again, so a login made while the
// connection is open is seen).
func (s *oauthState) current(ctx context.Context) (*Credentials, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded || s.creds == nil {
		c, err := s.store.LoadToken(ctx, s.server, s.serverURL, s.principal)
		if err != nil {
			return nil, err
		}
		s.creds, s.loaded = c, true
	}
	return s.creds, nil
}

func (s *oauthState) set(c *Credentials) {
	s.mu.Lock()
	s.creds, s.loaded = c, true
	s.mu.Unlock()
}

// accessToken returns a token to send: the stored one while fresh, else a
// refreshed one. "" with no error means: send without a token (no
// credentials, and the flow may run on the 401).
func (s *oauthState) accessToken(ctx context.Context) (string, error) {
	c, err := s.current(ctx)
	if err != nil {
		return "", err
	}
	if c != nil && fresh(c, s.now()) {
		return c.AccessToken, nil
	}
	if c == nil {
		if s.flow != nil {
			return "", nil
		}
		return "", &AuthRequiredError{Server: s.server, Principal: s.principal, Reason: "missing"}
	}
	tok, err := s.refresh(ctx, c.AccessToken)
	if err != nil && s.flow != nil {
		return "", nil // the server's 401 starts the flow
	}
	return tok, err
}

// refresh replaces the access token `stale` with a new one: one another
// process or request already obtained if there is one, else one from the
// token endpoint, and saves it.
func (s *oauthState) refresh(ctx context.Context, stale string) (string, error) {
	s.flowMu.Lock()
	defer s.flowMu.Unlock()
	c, err := s.current(ctx)
	if err != nil {
		return "", err
	}
	if c == nil {
		return "", &AuthRequiredError{Server: s.server, Principal: s.principal, Reason: "missing"}
	}
	if c.AccessToken != stale && fresh(c, s.now()) {
		return c.AccessToken, nil // refreshed meanwhile in this process
	}
	unlock, err := s.store.LockToken(ctx, s.server, s.serverURL, s.principal)
	if err != nil {
		return "", fmt.Errorf("transport: server %q: waiting for another process's OAuth refresh: %w", s.server, err)
	}
	defer unlock()
	// The store is the truth other processes share: a logout removed the
	// credentials, a refresh or login elsewhere replaced them (with a
	// rotated refresh token).
	onDisk, err := s.store.LoadToken(ctx, s.server, s.serverURL, s.principal)
	switch {
	case err != nil:
		return "", err
	case onDisk == nil:
		s.set(nil)
		return "", &AuthRequiredError{Server: s.server, Principal: s.principal, Reason: "missing"}
	case onDisk.AccessToken != stale && fresh(onDisk, s.now()):
		s.set(onDisk)
		return onDisk.AccessToken, nil
	}
	c = onDisk
	if c.RefreshToken == "" {
		return "", &AuthRequiredError{Server: s.server, Principal: s.principal, Reason: "expired"}
	}
	rctx := context.WithValue(ctx, oauth2.HTTPClient, s.client)
	tok, err := oauthConfig(c).TokenSource(rctx, &oauth2.Token{RefreshToken: c.RefreshToken}).Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			// The body may echo what we sent: keep only the error code.
			status := 0
			if re.Response != nil {
				status = re.Response.StatusCode
			}
			err = fmt.Errorf("token endpoint answered HTTP %d %s", status, re.ErrorCode)
		}
		return "", &AuthRequiredError{Server: s.server, Principal: s.principal, Reason: "refresh", Err: err}
	}
	next := *c
	next.AccessToken, next.TokenType, next.Expiry = tok.AccessToken, tok.TokenType, tok.Expiry
	if tok.RefreshToken != "" {
		next.RefreshToken = tok.RefreshToken
	}
	if err := s.store.SaveToken(ctx, &next); err != nil {
		s.log.Warn("transport: refreshed OAuth token not saved; it lives until this process ends", "error", err)
	}
	s.set(&next)
	s.log.Info("transport: OAuth access token refreshed")
	return next.AccessToken, nil
}

// authorize runs the authorization code flow for the failed request req
// (answered by resp, whose body it closes) and saves the credentials. It
// does nothing when another request got a token other than used meanwhile,
// unless force is set (Login always runs the flow).
func (s *oauthState) authorize(ctx context.Context, req *http.Request, resp *http.Response, used string, force bool) error {
	s.flowMu.Lock()
	defer s.flowMu.Unlock()
	if c, _ := s.current(ctx); !force && c != nil && c.AccessToken != used && fresh(c, s.now()) {
		drain(resp)
		return nil // another request authorized meanwhile
	}
	if s.handler == nil {
		h, err := s.newHandler()
		if err != nil {
			drain(resp)
			return fmt.Errorf("transport: server %q: setting up the OAuth flow: %w", s.server, err)
		}
		s.handler = h
	}
	if err := s.handler.Authorize(ctx, req, resp); err != nil {
		return fmt.Errorf("transport: server %q: running the OAuth flow: %w", s.server, err)
	}
	return nil
}

// newHandler builds go-sdk's authorization code handler from the flow; its
// NewTokenSource hook saves each token it obtains.
func (s *oauthState) newHandler() (*auth.AuthorizationCodeHandler, error) {
	f := s.flow
	redirect := f.RedirectURL
	fetch := f.Fetch
	if fetch == nil {
		lf, err := newLoopbackFetcher(redirect, f.OnAuthURL)
		if err != nil {
			return nil, err
		}
		redirect, fetch = lf.redirectURL, lf.fetch
	}
	if redirect == "" {
		return nil, errors.New("a redirect URL is required with a custom Fetch")
	}
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              redirect,
		AuthorizationCodeFetcher: fetch,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{
				RedirectURIs:  []string{redirect},
				ClientName:    "openclaw-go",
				GrantTypes:    []string{"authorization_code", "refresh_token"},
				ResponseTypes: []string{"code"},
			},
		},
		RequestRefreshToken: true,
		Client:              s.client,
		NewTokenSource: func(ctx context.Context, oc *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
			c := &Credentials{
				Server: s.server, ServerURL: s.serverURL, Principal: s.principal,
				ClientID: oc.ClientID, ClientSecret: oc.ClientSecret,
				AuthURL: oc.Endpoint.AuthURL, TokenURL: oc.Endpoint.TokenURL, AuthStyle: int(oc.Endpoint.AuthStyle),
				Scopes:      append([]string(nil), oc.Scopes...),
				AccessToken: tok.AccessToken, TokenType: tok.TokenType, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry,
			}
			if err := s.store.SaveToken(ctx, c); err != nil {
				return nil, err
			}
			s.set(c)
			return oauth2.StaticTokenSource(tok), nil
		},
	}
	if f.ClientMetadataURL != "" {
		cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: f.ClientMetadataURL}
	}
	if f.ClientID != "" {
		cfg.PreregisteredClient = &oauthex.ClientCredentials{ClientID: f.ClientID}
		if f.ClientSecret != "" {
			cfg.PreregisteredClient.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: f.ClientSecret}
		}
	}
	if scopes := strings.Fields(f.Scope); len(scopes) > 0 {
		cfg.ScopeFilter = func([]string) []string { return append([]string(nil), scopes...) }
	}
	return auth.NewAuthorizationCodeHandler(cfg)
}

// oauthRoundTripper sends the server's OAuth access token with every
// request and handles the server's 401 (refresh, or the flow) and 403
// insufficient_scope (the flow), retrying the request once.
type oauthRoundTripper struct {
	base  http.RoundTripper
	state *oauthState
}

// RoundTrip implements http.RoundTripper.
func (t *oauthRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	st, err := t.state.forRequest(ctx)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	tok, err := st.accessToken(ctx)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := t.base.RoundTrip(withBearer(req, tok))
	if err != nil || !needsAuth(resp) {
		return resp, err
	}
	scope := resp.StatusCode == http.StatusForbidden
	if st.flow == nil {
		drain(resp)
		if scope {
			return nil, &AuthRequiredError{Server: st.server, Reason: "scope"}
		}
		if tok == "" {
			return nil, &AuthRequiredError{Server: st.server, Reason: "missing"}
		}
		if tok, err = st.refresh(ctx, tok); err != nil {
			return nil, err
		}
		retry, err := rewind(req)
		if err != nil {
			return nil, err
		}
		resp, err = t.base.RoundTrip(withBearer(retry, tok))
		if err == nil && needsAuth(resp) {
			drain(resp)
			return nil, &AuthRequiredError{Server: st.server, Reason: "rejected"}
		}
		return resp, err
	}
	// With a flow: refresh first if we can, else run it.
	if !scope && tok != "" {
		if ntok, rerr := st.refresh(ctx, tok); rerr == nil {
			retry, err := rewind(req)
			if err != nil {
				drain(resp)
				return nil, err
			}
			nresp, err := t.base.RoundTrip(withBearer(retry, ntok))
			if err != nil || !needsAuth(nresp) {
				drain(resp)
				return nresp, err
			}
			drain(resp)
			resp, tok = nresp, ntok
		}
	}
	if err := st.authorize(ctx, req, resp, tok, false); err != nil {
		return nil, err
	}
	if tok, err = st.accessToken(ctx); err != nil {
		return nil, err
	}
	retry, err := rewind(req)
	if err != nil {
		return nil, err
	}
	return t.base.RoundTrip(withBearer(retry, tok))
}

func needsAuth(resp *http.Response) bool {
	if resp.StatusCode == http.StatusUnauthorized {
		return true
	}
	if resp.StatusCode != http.StatusForbidden {
		return false
	}
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return false
	}
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params["error"] == "insufficient_scope" {
			return true
		}
	}
	return false
}

// withBearer returns a copy of req carrying tok (none when tok is "").
func withBearer(req *http.Request, tok string) *http.Request {
	r := req.Clone(req.Context())
	r.Body = req.Body
	if tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	} else {
		r.Header.Del("Authorization")
	}
	return r
}

// rewind returns req with a fresh body for a retry.
func rewind(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.Body == nil || req.Body == http.NoBody {
		return r, nil
	}
	if req.GetBody == nil {
		return nil, errors.New("transport: cannot resend a request whose body cannot be replayed after OAuth authorization")
	}
	b, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	r.Body = b
	return r, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// loopbackFetcher serves the redirect URL on the loopback interface while
// it waits for the browser's redirect, and returns the code it carries.
type loopbackFetcher struct {
	redirectURL string
	host, path  string
	onURL       func(string)
}

// newLoopbackFetcher prepares a listener for redirect (an http:// URL; empty
// means http://127.0.0.1:<free port>/oauth/callback, the port found now).
func newLoopbackFetcher(redirect string, onURL func(string)) (*loopbackFetcher, error) {
	if redirect == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port for the OAuth redirect: %w", err)
		}
		redirect = "http://" + ln.Addr().String() + "/oauth/callback"
		ln.Close() // listened on again while fetch waits
	}
	u, err := url.Parse(redirect)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("redirect URL %s: the built-in callback listener needs an http:// URL", redact.URL(redirect))
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	path := u.Path
	if path == "" {
		path = "/"
	}
	return &loopbackFetcher{redirectURL: redirect, host: host, path: path, onURL: onURL}, nil
}

// fetch implements auth.AuthorizationCodeFetcher.
func (f *loopbackFetcher) fetch(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	ln, err := net.Listen("tcp", f.host)
	if err != nil {
		return nil, fmt.Errorf("listening for the OAuth redirect on %s: %w", f.host, err)
	}
	got := make(chan *auth.AuthorizationResult, 1)
	failed := make(chan error, 1)
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != f.path {
				http.NotFound(w, r)
				return
			}
			q := r.URL.Query()
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if e := q.Get("error"); e != "" {
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, "Authorization failed: "+e+". You can close this tab.\n")
				select {
				case failed <- fmt.Errorf("the authorization server answered %s: %s", e, q.Get("error_description")):
				default:
				}
				return
			}
			if q.Get("code") == "" {
				http.Error(w, "missing code", http.StatusBadRequest)
				return
			}
			io.WriteString(w, "Logged in. You can close this tab and return to the terminal.\n")
			select {
			case got <- &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}:
			default:
			}
		}),
	}
	served := make(chan struct{})
	go func() { // ends when srv shuts down below
		defer close(served)
		_ = srv.Serve(ln)
	}()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
	}()
	if f.onURL != nil {
		f.onURL(args.URL)
	}
	select {
	case r := <-got:
		return r, nil
	case err := <-failed:
		return nil, err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the OAuth redirect to %s: %w", f.redirectURL, ctx.Err())
	}
}

// newOAuthState builds the OAuth side of server name's HTTP client; base
// carries the entry's TLS settings. The discovery, registration and token
// requests go through base too, with the entry's headers (Authorization
// already removed) on those to the server's own origin, as in OpenClaw.
func newOAuthState(name, serverURL string, base http.RoundTripper, headers map[string]string, o *OAuthOptions, lookup func(string) (string, bool), log *slog.Logger) (*oauthState, error) {
	var oo OAuthOptions
	if o != nil {
		oo = *o
	}
	var store TokenBackend = oo.Store
	switch {
	case oo.Backend != nil:
		store = oo.Backend
	case oo.Store == nil:
		dir, err := DefaultTokenDir(lookup)
		if err != nil {
			return nil, err
		}
		store = NewTokenStore(dir)
	}
	client := &http.Client{Transport: &sameOriginHeaders{base: base, origin: oauthcred.Origin(serverURL), headers: headers}}
	if oo.Flow != nil && oo.Flow.HTTPClient != nil {
		client = oo.Flow.HTTPClient
	}
	if oo.Principal != "" {
		log = log.With("principal", oo.Principal)
	}
	return &oauthState{
		server: name, serverURL: serverURL, store: store, flow: oo.Flow,
		principal: oo.Principal, perRequester: oo.PerRequester && oo.Principal == "",
		client: client, log: log, now: time.Now,
	}, nil
}

// sameOriginHeaders adds the server entry's headers to requests for the
// server's origin (OAuth metadata and endpoints it hosts itself), never to
// another origin's authorization server.
type sameOriginHeaders struct {
	base    http.RoundTripper
	origin  string
	headers map[string]string
}

// RoundTrip implements http.RoundTripper.
func (t *sameOriginHeaders) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) == 0 || oauthcred.Origin(req.URL.String()) != t.origin {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	for k, v := range t.headers {
		if r.Header.Get(k) == "" {
			r.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(r)
}

// Login runs the OAuth authorization code flow for the mcp.servers entry
// name (which must have a url) and saves the credentials in opts.OAuth's
// store (default: [DefaultTokenDir]) under opts.OAuth.Principal when set
// (per-requester identity), replacing any stored before. It first
// asks the server unauthenticated (an initialize POST for streamable HTTP, a
// GET for SSE) to read its WWW-Authenticate challenge, then discovers the
// protected resource and authorization server metadata, registers the
// client and gets the code per flow (nil: defaults of [OAuthFlow]), all
// bounded by ctx. Errors name the server and never quote a token.
func Login(ctx context.Context, name string, e config.ServerEntry, flow *OAuthFlow, opts *Options) (*Credentials, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if flow == nil {
		flow = &OAuthFlow{}
	}
	if o.OAuth != nil && o.OAuth.PerRequester && o.OAuth.Principal == "" {
		return nil, fmt.Errorf("server %q uses per-requester OAuth: Login needs OAuthOptions.Principal, the principal whose tokens to store", name)
	}
	e.Auth = "oauth"
	r, err := Resolve(name, e, &Options{Logger: o.Logger, LookupEnv: o.LookupEnv, OAuth: oauthStoreOf(o.OAuth)})
	if err != nil {
		return nil, err
	}
	if r.Kind == KindStdio {
		return nil, fmt.Errorf("server %q is a stdio server: OAuth applies to HTTP servers only", name)
	}
	base, err := newBaseTransport(name, e, r)
	if err != nil {
		return nil, err
	}
	var oo OAuthOptions
	if o.OAuth != nil {
		oo = *o.OAuth
	}
	oo.Flow = flow
	headers, err := resolveHeaders(r.Server, lookupOr(o.LookupEnv), func(string, ...any) {})
	if err != nil {
		return nil, err
	}
	st, err := newOAuthState(name, e.URL, base, headers, &oo, o.LookupEnv, o.Logger.With("server", name))
	if err != nil {
		return nil, err
	}
	req, err := probeRequest(ctx, r.Kind, e.URL, headers)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", name, err)
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("server %q: asking %s for its authorization challenge: %w", name, redact.URL(e.URL), err)
	}
	if !needsAuth(resp) {
		// The server lets anonymous requests through; discovery proceeds
		// from its well-known metadata.
		drain(resp)
		resp = &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{}, Body: http.NoBody, Request: req}
	}
	if err := st.authorize(ctx, req, resp, "", true); err != nil {
		return nil, err
	}
	c, err := st.current(ctx)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("server %q: the authorization flow ended without a token", name)
	}
	return c, nil
}

// oauthStoreOf is the store part of o (Store and Backend), nil for none.
func oauthStoreOf(o *OAuthOptions) *OAuthOptions {
	if o == nil {
		return nil
	}
	return &OAuthOptions{Store: o.Store, Backend: o.Backend}
}

func lookupOr(l func(string) (string, bool)) func(string) (string, bool) {
	if l == nil {
		return os.LookupEnv
	}
	return l
}

// probeRequest is the unauthenticated request whose answer carries the
// server's WWW-Authenticate challenge.
func probeRequest(ctx context.Context, kind Kind, serverURL string, headers map[string]string) (*http.Request, error) {
	var req *http.Request
	var err error
	if kind == KindSSE {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, serverURL, nil)
		if err == nil {
			req.Header.Set("Accept", "text/event-stream")
		}
	} else {
		body := []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"openclaw-go","version":"dev"}}}`)
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, serverURL, bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
		}
	}
	if err != nil {
		return nil, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return req, nil
}

// Logout deletes the stored credentials of server name at serverURL from
// store (nil: the store in [DefaultTokenDir] of lookup) and reports whether
// there were any.
func Logout(name, serverURL string, store *TokenStore, lookup func(string) (string, bool)) (bool, error) {
	if store == nil {
		dir, err := DefaultTokenDir(lookup)
		if err != nil {
			return false, err
		}
		store = NewTokenStore(dir)
	}
	return store.Delete(name, serverURL)
}
