// Package oauthcred is the model of the upstream OAuth credentials that
// openclaw-go keeps for an MCP server and principal: [Credentials], the
// [Backend] interface of where they are kept (transport's token files, the
// replicas' Redis in proxy/sharedstate), and the [ID] that names them in a
// backend. It imports only the standard library.
package oauthcred

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// Credentials are what a [Backend] keeps for one server and principal:
// the client registration and token endpoint needed to refresh, and the
// tokens. String and LogValue never show the secrets.
type Credentials struct {
	// Server and ServerURL are the mcp.servers name and url they belong to.
	Server    string `json:"server"`
	ServerURL string `json:"serverUrl"`
	// Principal is the requester these tokens belong to (oauth.identity
	// "per-requester"); empty for the server's shared tokens.
	Principal string `json:"principal,omitempty"`
	// ClientID and ClientSecret are the registered client (ClientSecret is
	// empty for a public client).
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret,omitempty"`
	// AuthURL and TokenURL are the authorization server's endpoints;
	// AuthStyle how the client authenticates at TokenURL (oauth2.AuthStyle:
	// 0 auto-detect, 1 in the form, 2 HTTP Basic).
	AuthURL   string `json:"authorizationEndpoint,omitempty"`
	TokenURL  string `json:"tokenEndpoint"`
	AuthStyle int    `json:"authStyle,omitempty"`
	// Scopes are the scopes requested.
	Scopes []string `json:"scopes,omitempty"`
	// AccessToken, TokenType, RefreshToken and Expiry are the token
	// response; a zero Expiry means the server gave no lifetime.
	AccessToken  string    `json:"accessToken"`
	TokenType    string    `json:"tokenType,omitempty"`
	RefreshToken string    `json:"refreshToken,omitempty"`
	Expiry       time.Time `json:"expiresAt,omitzero"`
	// Saved is when the credentials were written.
	Saved time.Time `json:"savedAt,omitzero"`
}

// String describes the credentials without their secrets.
func (c *Credentials) String() string {
	if c == nil {
		return "<no credentials>"
	}
	exp := "no expiry"
	if !c.Expiry.IsZero() {
		exp = "expires " + c.Expiry.UTC().Format(time.RFC3339)
	}
	who := ""
	if c.Principal != "" {
		who = fmt.Sprintf(" for principal %q", c.Principal)
	}
	return fmt.Sprintf("OAuth credentials of %q%s (client %s, %s, refresh token: %t)", c.Server, who, c.ClientID, exp, c.RefreshToken != "")
}

// LogValue implements slog.LogValuer without the secrets.
func (c *Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Backend keeps OAuth credentials, one set per (server, URL origin,
// principal); principal "" is a server's shared set. transport.TokenStore (files
// under transport.DefaultTokenDir) is the default; `openclaw mcp proxy --state
// redis://…` keeps the per-requester tokens of its replicas in Redis
// (proxy/sharedstate). A backend is safe for concurrent use, and its
// errors name where the tokens are kept and never quote a token.
type Backend interface {
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

// ID names the credentials of principal at server (serverURL)
// in a backend: the SHA-256, in hex, of the server's name and URL origin
// (first 16 digits) and of the principal (next 16 digits, none for ""),
// so that a server renamed or pointed at another origin needs a new
// login, as with transport.TokenStore.Path, and the id shows no principal.
func ID(server, serverURL, principal string) (serverID, principalID string) {
	sum := sha256.Sum256([]byte(server + "\x00" + Origin(serverURL)))
	serverID = hex.EncodeToString(sum[:8])
	if principal != "" {
		psum := sha256.Sum256([]byte(principal))
		principalID = hex.EncodeToString(psum[:8])
	}
	return serverID, principalID
}

// Origin is scheme://host[:port] of raw, lower-cased; raw itself when it
// does not parse as a URL with a host.
func Origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}
