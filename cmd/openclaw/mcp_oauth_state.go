package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/proxy/sharedstate"
	"github.com/openclaw-go/openclaw/transport"
)

// With --state, the upstream OAuth tokens of the per-requester servers
// (oauth.identity "per-requester") live in Redis, sealed under the
// replicas' --request-state-key-file key (sharedstate.OAuthTokens), so
// that a principal logged in once (`openclaw mcp login <name> --principal
// <id> --state redis://…`) is served by every replica, and one replica at a
// time refreshes its tokens. A server's shared tokens stay in the files of
// each replica's <state dir>/mcp-oauth.

// tokenRouting is the transport.TokenBackend of `mcp proxy --state`: the
// tokens of principals in principals (Redis), the shared ones (principal
// "") in files.
type tokenRouting struct {
	files      *transport.TokenStore
	principals transport.TokenBackend
}

// pick is the backend of principal's tokens.
func (r *tokenRouting) pick(principal string) transport.TokenBackend {
	if principal == "" {
		return r.files
	}
	return r.principals
}

// LoadToken implements transport.TokenBackend.
func (r *tokenRouting) LoadToken(ctx context.Context, server, serverURL, principal string) (*transport.Credentials, error) {
	return r.pick(principal).LoadToken(ctx, server, serverURL, principal)
}

// SaveToken implements transport.TokenBackend.
func (r *tokenRouting) SaveToken(ctx context.Context, c *transport.Credentials) error {
	return r.pick(c.Principal).SaveToken(ctx, c)
}

// DeleteToken implements transport.TokenBackend.
func (r *tokenRouting) DeleteToken(ctx context.Context, server, serverURL, principal string) (bool, error) {
	return r.pick(principal).DeleteToken(ctx, server, serverURL, principal)
}

// LockToken implements transport.TokenBackend.
func (r *tokenRouting) LockToken(ctx context.Context, server, serverURL, principal string) (func(), error) {
	return r.pick(principal).LockToken(ctx, server, serverURL, principal)
}

// errNoTokenKey is why per-requester tokens cannot be kept in Redis.
const errNoTokenKey = "--state keeps the OAuth tokens of per-requester MCP servers in Redis, encrypted under the replicas' --request-state-key-file key, and none is given: give every replica the same --request-state-key-file"

// refusedTokens is the principals' backend of `mcp proxy --state` without
// a key: every use fails, naming the missing flag (a per-requester server
// added by a reload fails closed).
type refusedTokens struct{}

// LoadToken refuses: no key.
func (refusedTokens) LoadToken(context.Context, string, string, string) (*transport.Credentials, error) {
	return nil, fmt.Errorf("openclaw mcp proxy: %s", errNoTokenKey)
}

// SaveToken refuses: no key.
func (refusedTokens) SaveToken(context.Context, *transport.Credentials) error {
	return fmt.Errorf("openclaw mcp proxy: %s", errNoTokenKey)
}

// DeleteToken refuses: no key.
func (refusedTokens) DeleteToken(context.Context, string, string, string) (bool, error) {
	return false, fmt.Errorf("openclaw mcp proxy: %s", errNoTokenKey)
}

// LockToken refuses: no key.
func (refusedTokens) LockToken(context.Context, string, string, string) (func(), error) {
	return nil, fmt.Errorf("openclaw mcp proxy: %s", errNoTokenKey)
}

// perRequesterServers names the servers of rs with oauth.identity
// "per-requester", sorted.
func perRequesterServers(rs []*config.ResolvedServer) []string {
	var names []string
	for _, r := range rs {
		if r.Entry.OAuth != nil && r.Entry.OAuth.Identity == "per-requester" {
			names = append(names, r.Name)
		}
	}
	slices.Sort(names)
	return names
}

// proxyOAuth is the transport's OAuth options of `mcp proxy --state`
// (shared non-nil): the per-requester tokens in Redis under key. Without
// a key, a per-requester server among rs refuses the start.
func proxyOAuth(shared *sharedstate.State, key []byte, rs []*config.ResolvedServer) (*transport.OAuthOptions, error) {
	files, err := oauthTokenStore()
	if err != nil {
		return nil, err
	}
	route := &tokenRouting{files: files, principals: refusedTokens{}}
	if key == nil {
		if names := perRequesterServers(rs); len(names) > 0 {
			return nil, usage("%s (per-requester: %s)", errNoTokenKey, strings.Join(names, ", "))
		}
		return &transport.OAuthOptions{Backend: route}, nil
	}
	tokens, err := shared.OAuthTokens(key)
	if err != nil {
		return nil, usage("%v", err)
	}
	route.principals = tokens
	return &transport.OAuthOptions{Backend: route}, nil
}

// stateFlags are the --state and --request-state-key-file flags of `mcp
// login` and `mcp logout`: the Redis of the proxy replicas and their key.
type stateFlags struct {
	state, keyFile string
}

// open returns the per-requester token backend of the replicas, the
// Redis URL (password masked) and a close; nil and no error without
// --state. name is the server, perRequester its identity: the shared
// tokens are not kept in Redis.
func (f stateFlags) open(name string, perRequester bool) (*sharedstate.OAuthTokens, string, func(), error) {
	switch {
	case f.state == "" && f.keyFile != "":
		return nil, "", nil, fmt.Errorf("--request-state-key-file applies with --state (the Redis of the mcp proxy replicas)")
	case f.state == "":
		return nil, "", nil, nil
	case !perRequester:
		return nil, "", nil, fmt.Errorf(`MCP server %q uses the shared OAuth identity: --state keeps the tokens of per-requester servers ("oauth": {"identity": "per-requester"}) only; the shared tokens stay in each replica's <state dir>/mcp-oauth`, name)
	case f.keyFile == "":
		return nil, "", nil, fmt.Errorf("--state needs --request-state-key-file: the tokens are encrypted in Redis under the key of the mcp proxy replicas")
	}
	key, err := readStateKey(f.keyFile)
	if err != nil {
		return nil, "", nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "openclaw mcp proxy: "))
	}
	shared, err := sharedstate.Open(f.state, nil)
	if err != nil {
		return nil, "", nil, err
	}
	tokens, err := shared.OAuthTokens(key)
	if err != nil {
		shared.Close()
		return nil, "", nil, err
	}
	return tokens, shared.URL(), func() { _ = shared.Close() }, nil
}

// importTokens copies the file credentials of server name (entry url u) into
// tokens: principal's, or with principal "" those of every principal.
// It returns the principals copied.
func importTokens(ctx context.Context, tokens transport.TokenBackend, name, u, principal string) ([]string, error) {
	files, err := oauthTokenStore()
	if err != nil {
		return nil, err
	}
	var sets []*transport.Credentials
	if principal != "" {
		c, err := files.LoadPrincipal(name, u, principal)
		if err != nil {
			return nil, err
		}
		if c == nil {
			return nil, fmt.Errorf("no OAuth credentials of principal %q of MCP server %q in %s to import", principal, name, files.Dir())
		}
		sets = append(sets, c)
	} else if sets, err = files.Principals(name, u); err != nil {
		return nil, err
	}
	var done []string
	for _, c := range sets {
		if err := tokens.SaveToken(ctx, c); err != nil {
			return done, err
		}
		done = append(done, c.Principal)
	}
	return done, nil
}

// flags adds --state and --request-state-key-file to cmd.
func (f *stateFlags) flags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.state, "state", "", "the Redis of the mcp proxy replicas (redis://[user:password@]HOST:PORT/DB, rediss://… for TLS): keep a per-requester server's tokens there, for every replica")
	fl.StringVar(&f.keyFile, "request-state-key-file", "", "with --state: the key file of the mcp proxy replicas, under which the tokens are encrypted in Redis")
}
