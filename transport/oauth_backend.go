package transport

import (
	"context"
	"fmt"
	"os"

	"github.com/openclaw-go/openclaw/internal/oauthcred"
)

// TokenBackend keeps OAuth credentials, one set per (server, URL origin,
// principal): [oauthcred.Backend]. [*TokenStore] (files under
// [DefaultTokenDir]) is the default; `openclaw mcp proxy --state redis://…`
// keeps the per-requester tokens of its replicas in Redis
// (proxy/sharedstate).
type TokenBackend = oauthcred.Backend

// CredentialsID names the credentials of principal at server (serverURL)
// in a backend: [oauthcred.ID].
func CredentialsID(server, serverURL, principal string) (serverID, principalID string) {
	return oauthcred.ID(server, serverURL, principal)
}

// LoadToken implements [TokenBackend] with [TokenStore.LoadPrincipal].
func (s *TokenStore) LoadToken(_ context.Context, server, serverURL, principal string) (*Credentials, error) {
	return s.LoadPrincipal(server, serverURL, principal)
}

// SaveToken implements [TokenBackend] with [TokenStore.Save].
func (s *TokenStore) SaveToken(_ context.Context, c *Credentials) error { return s.Save(c) }

// DeleteToken implements [TokenBackend] with [TokenStore.DeletePrincipal].
func (s *TokenStore) DeleteToken(_ context.Context, server, serverURL, principal string) (bool, error) {
	return s.DeletePrincipal(server, serverURL, principal)
}

// LockToken implements [TokenBackend] with an exclusive flock on the
// credentials file's name plus ".lock" (no lock where flock is missing).
func (s *TokenStore) LockToken(ctx context.Context, server, serverURL, principal string) (func(), error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("transport: creating the OAuth token folder: %w", err)
	}
	return lockPath(ctx, s.PrincipalPath(server, serverURL, principal)+".lock")
}
