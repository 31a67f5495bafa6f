package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Per-requester OAuth identity (oauth.identity "per-requester",
// docs/protocol-facts.md, mcp.servers entry schema): the tokens of such a server belong to whoever calls it, one set
// per (server, principal), each logged in separately. OpenClaw names its
// requesters by (channel, bot account, sender) and connects them from the
// chat; openclaw-go takes the principal from the caller's context
// ([WithPrincipal]) and logs principals in with
// `openclaw mcp login <name> --principal <id>`.

type principalKey struct{}

// WithPrincipal returns a context naming principal id as the requester of
// the MCP requests made with it: a connection to a per-requester OAuth
// server ([OAuthOptions.PerRequester]) sends that principal's access token.
// An empty id leaves ctx without a principal.
func WithPrincipal(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, principalKey{}, id)
}

// PrincipalFrom returns the principal ctx names ([WithPrincipal]), or "".
func PrincipalFrom(ctx context.Context) string {
	id, _ := ctx.Value(principalKey{}).(string)
	return id
}

// forRequest returns the state whose tokens a request with ctx uses: s
// itself for the shared identity or a connection bound to one principal,
// else (per-requester) the state of ctx's principal, made on first use.
func (s *oauthState) forRequest(ctx context.Context) (*oauthState, error) {
	p := PrincipalFrom(ctx)
	if s.principal != "" {
		if p != "" && p != s.principal {
			return nil, &AuthRequiredError{Server: s.server, Principal: s.principal, Reason: "principal"}
		}
		return s, nil
	}
	if !s.perRequester {
		return s, nil
	}
	if p == "" {
		return nil, &AuthRequiredError{Server: s.server, Reason: "principal"}
	}
	s.childMu.Lock()
	defer s.childMu.Unlock()
	if c, ok := s.children[p]; ok {
		return c, nil
	}
	if s.children == nil {
		s.children = map[string]*oauthState{}
	}
	c := &oauthState{
		server: s.server, serverURL: s.serverURL, principal: p,
		store: s.store, flow: s.flow, client: s.client,
		log: s.log.With("principal", p), now: s.now,
	}
	// Only principals with stored tokens (or a flow to get them) are kept:
	// requests naming unknown principals do not grow the map.
	if creds, err := c.current(ctx); err == nil && (creds != nil || s.flow != nil) {
		s.children[p] = c
	}
	return c, nil
}

// PrincipalPath is the file holding the credentials of principal at
// server (serverURL): [TokenStore.Path] for principal "", else that name
// with "-r-" and 16 hex digits of the principal's SHA-256 before ".json"
// (the principal itself is inside the file, mode 0600).
func (s *TokenStore) PrincipalPath(server, serverURL, principal string) string {
	p := s.Path(server, serverURL)
	if principal == "" {
		return p
	}
	_, id := CredentialsID(server, serverURL, principal)
	return strings.TrimSuffix(p, ".json") + "-r-" + id + ".json"
}

// Principals returns the credentials stored for the principals of server
// at serverURL (per-requester identity) that hold a token, sorted by
// principal. A file that does not parse is an error naming it.
func (s *TokenStore) Principals(server, serverURL string) ([]*Credentials, error) {
	paths, err := s.principalFiles(server, serverURL)
	if err != nil {
		return nil, err
	}
	var out []*Credentials
	for _, p := range paths {
		c, err := loadFile(server, p)
		if err != nil {
			return nil, err
		}
		if c != nil && c.Principal != "" && (c.AccessToken != "" || c.RefreshToken != "") {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *Credentials) int { return strings.Compare(a.Principal, b.Principal) })
	return out, nil
}

// DeleteAll removes the shared credentials of server at serverURL and those
// of all its principals, and returns how many sets it removed.
func (s *TokenStore) DeleteAll(server, serverURL string) (int, error) {
	paths, err := s.principalFiles(server, serverURL)
	if err != nil {
		return 0, err
	}
	paths = append(paths, s.Path(server, serverURL))
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range paths {
		err := os.Remove(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("transport: deleting OAuth credentials of %q: %w", server, err)
		}
		n++
	}
	return n, nil
}

// principalFiles lists the per-principal credential files of server.
func (s *TokenStore) principalFiles(server, serverURL string) ([]string, error) {
	base := strings.TrimSuffix(s.Path(server, serverURL), ".json")
	// The base name holds no glob metacharacters: Path keeps [-_.0-9A-Za-z].
	paths, err := filepath.Glob(base + "-r-*.json")
	if err != nil {
		return nil, fmt.Errorf("transport: listing OAuth principals of %q: %w", server, err)
	}
	return paths, nil
}

// loadFile reads one credentials file; nil and no error when it is gone.
func loadFile(server, p string) (*Credentials, error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("transport: reading OAuth credentials of %q: %w", server, err)
	}
	return parseCredentials(server, p, data)
}

// AuthState is the OAuth state of one server (or one of its principals)
// as `openclaw mcp status` reports it.
type AuthState string

// The OAuth states. OpenClaw's status has "authorized" and
// "unauthenticated" too (plus states of its challenge bookkeeping, which
// openclaw-go does not persist); "expired" is ours: the access token's
// lifetime is over, and [AuthStatus.Refreshable] says whether the runtime
// can renew it without a login.
const (
	AuthAuthorized      AuthState = "authorized"
	AuthExpired         AuthState = "expired"
	AuthUnauthenticated AuthState = "unauthenticated"
)

// AuthStatus describes stored credentials without showing them.
type AuthStatus struct {
	// State is authorized, expired or unauthenticated (none stored).
	State AuthState
	// ExpiresAt is when the access token expires; zero when the server
	// gave no lifetime or nothing is stored.
	ExpiresAt time.Time
	// Refreshable is true when a refresh token is stored.
	Refreshable bool
	// HasClient is true when a client registration is stored.
	HasClient bool
}

// NeedsLogin reports whether the server cannot be used until
// `openclaw mcp login`: nothing stored, or expired without a refresh token.
func (a AuthStatus) NeedsLogin() bool {
	return a.State == AuthUnauthenticated || (a.State == AuthExpired && !a.Refreshable)
}

// StatusOf is the status of c (nil: nothing stored) at now. A token within
// [TokenExpirySkew] of its expiry counts as expired, as the runtime would
// refresh it before use.
func StatusOf(c *Credentials, now time.Time) AuthStatus {
	if c == nil || (c.AccessToken == "" && c.RefreshToken == "") {
		return AuthStatus{State: AuthUnauthenticated, HasClient: c != nil && c.ClientID != ""}
	}
	st := AuthStatus{State: AuthAuthorized, ExpiresAt: c.Expiry, Refreshable: c.RefreshToken != "", HasClient: c.ClientID != ""}
	if !fresh(c, now) {
		st.State = AuthExpired
	}
	return st
}
