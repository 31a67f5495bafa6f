package transport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
)

// TokenBackend keeps OAuth credentials, one set per (server, URL origin,
// principal); principal "" is a server's shared set. [*TokenStore] (files
// under [DefaultTokenDir]) is the default; `openclaw mcp proxy --state
// redis://…` keeps the per-requester tokens of its replicas in Redis
// (proxy/sharedstate). A backend is safe for concurrent use, and its
// errors name where the tokens are kept and never quote a token.
type TokenBackend interface {
	// LoadToken returns the credentials of principal at server
	// (serverURL), or nil and no error when there are none.
	LoadToken(ctx context.Context, server, serverURL, principal string) (*Credentials, error)
	// SaveToken replaces the credentials of c.Principal at c.Server
	// (c.ServerURL) with c, atomically: a reader sees the old or the new
	// set, never a mix.
	SaveToken(ctx context.Context, c *Credentials) error
	// DeleteToken removes the credentials of principal at server
	// (serverURL) and reports whether there were any.
	DeleteToken(ctx context.Context, server, serverURL, principal string) (bool, error)
	// LockToken waits until this caller alone, among all the processes
	// sharing the backend, may refresh the credentials of principal at
	// server (serverURL), or until ctx is done; unlock ends it. With
	// rotating refresh tokens a second refresh with the same refresh
	// token fails and logs the principal out, so refreshes take turns.
	LockToken(ctx context.Context, server, serverURL, principal string) (unlock func(), err error)
}

// CredentialsID names the credentials of principal at server (serverURL)
// in a backend: the SHA-256, in hex, of the server's name and URL origin
// (first 16 digits) and of the principal (next 16 digits, none for ""),
// so that a server renamed or pointed at another origin needs a new
// login, as with [TokenStore.Path], and the id shows no principal.
func CredentialsID(server, serverURL, principal string) (serverID, principalID string) {
	sum := sha256.Sum256([]byte(server + "\x00" + urlOrigin(serverURL)))
	serverID = hex.EncodeToString(sum[:8])
	if principal != "" {
		psum := sha256.Sum256([]byte(principal))
		principalID = hex.EncodeToString(psum[:8])
	}
	return serverID, principalID
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
