package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/openclaw-go/openclaw/transport"
)

// OAuth identities of a server (oauth.identity, docs/protocol-facts.md, mcp.servers entry schema).
const (
	// IdentityShared: every requester uses the server's one set of tokens
	// (`openclaw mcp login <name>`). It is the default ("" means it too).
	IdentityShared = "shared"
	// IdentityPerRequester: each requester (principal) uses its own tokens
	// (`openclaw mcp login <name> --principal <id>`) over a connection of
	// its own, since servers bind an MCP session to the token's user.
	IdentityPerRequester = "per-requester"
)

// ErrNoPrincipal is wrapped by the [*PrincipalError] of a call to a
// per-requester server whose context names no principal.
var ErrNoPrincipal = errors.New("runtime: per-requester MCP server called without a principal")

// ErrAuthProfile is wrapped by the [*AuthProfileError] of a server whose
// credentials come from an OpenClaw auth profile.
var ErrAuthProfile = errors.New("runtime: OpenClaw auth profiles are not supported")

// WithPrincipal returns a context naming principal id as the requester of
// the calls made with it; it is [transport.WithPrincipal], re-exported so
// that embedders need not import transport. A server with the
// per-requester identity runs the call over id's own connection, with id's
// tokens. An empty id leaves ctx unchanged.
func WithPrincipal(ctx context.Context, id string) context.Context {
	return transport.WithPrincipal(ctx, id)
}

// PrincipalFrom returns the principal ctx names ([WithPrincipal]), or "".
func PrincipalFrom(ctx context.Context) string { return transport.PrincipalFrom(ctx) }

// PrincipalError refuses a use of a per-requester server that names no
// principal: a tool call whose context has none, or the catalog listing
// when the server has no [Server.ListPrincipal] and the context of the
// Connect (or catalog use) that connects it names none.
type PrincipalError struct {
	// Server is the raw server name.
	Server string
	// Listing is true when the catalog listing lacked a principal.
	Listing bool
	// Op and Principal are set when a passthrough request (Op, e.g.
	// "resources/read") named Principal, who is not the principal the
	// server's resources and prompts are served for.
	Op, Principal string
}

// Error names the server and what to do.
func (e *PrincipalError) Error() string {
	if e.Op != "" {
		return fmt.Sprintf(`runtime: MCP server %q uses per-requester OAuth ("oauth": {"identity": "per-requester"}): %s is served only for the principal that lists it, not for %q (per-principal resources and prompts are not supported yet)`, e.Server, e.Op, e.Principal)
	}
	if e.Listing {
		return fmt.Sprintf(`runtime: MCP server %q uses per-requester OAuth ("oauth": {"identity": "per-requester"}) and no principal was named to list its tools: set Server.ListPrincipal, or connect with runtime.WithPrincipal(ctx, id) (openclaw mcp tools --principal ID)`, e.Server)
	}
	return fmt.Sprintf(`runtime: MCP server %q uses per-requester OAuth ("oauth": {"identity": "per-requester"}) and the call names no principal: pass the requester with runtime.WithPrincipal(ctx, id) (openclaw mcp call --principal ID)`, e.Server)
}

// Unwrap returns [ErrNoPrincipal].
func (e *PrincipalError) Unwrap() error { return ErrNoPrincipal }

// AuthProfileError refuses a server whose OAuth credentials come from an
// OpenClaw auth profile (oauth.authProfileId): openclaw-go has no
// auth-profile store. It is the server's diagnostic; the server is never
// connected.
type AuthProfileError struct {
	// Server is the raw server name; Profile the oauth.authProfileId.
	Server, Profile string
}

// Error names the server, the profile and the fix.
func (e *AuthProfileError) Error() string {
	return fmt.Sprintf(`runtime: MCP server %q takes its OAuth credentials from OpenClaw auth profile %q (oauth.authProfileId); openclaw-go has no auth-profile store: remove oauth.authProfileId and run "openclaw mcp login %s"`, e.Server, e.Profile, e.Server)
}

// Unwrap returns [ErrAuthProfile].
func (e *AuthProfileError) Unwrap() error { return ErrAuthProfile }

// principalState is the per-requester side of a conn. The conn of the
// session's set is the listing connection, bound to one principal; it owns
// one sub-connection per other principal that called, each bound to it.
type principalState struct {
	mu     sync.Mutex
	bound  string           // the principal whose tokens this connection carries
	sub    bool             // a principal's own connection, owned by a listing conn
	closed bool             // the owner was closed: make no more sub-connections
	users  int              // calls using this sub-connection (guarded by the owner's mu)
	conns  map[string]*conn // principal → its connection (listing conn only)
}

// perRequester reports whether the server uses the per-requester identity.
func (c *conn) perRequester() bool { return c.cfg.OAuthIdentity == IdentityPerRequester }

// principalCheck runs before every connection attempt: it refuses
// authProfileId and a per-requester server without auth "oauth", and binds
// the listing connection of a per-requester server to its principal:
// Server.ListPrincipal, else the first principal ctx names, replaced by
// the one ctx names when the previous one could not connect. It returns
// ctx naming the connection's principal (principalCtx).
func (c *conn) principalCheck(ctx context.Context) (context.Context, error) {
	if c.cfg.AuthProfileID != "" {
		return ctx, &AuthProfileError{Server: c.cfg.Name, Profile: c.cfg.AuthProfileID}
	}
	switch c.cfg.OAuthIdentity {
	case "", IdentityShared:
		return ctx, nil
	case IdentityPerRequester:
	default:
		return ctx, fmt.Errorf("runtime: MCP server %q: unknown oauth.identity %q (want %q or %q)", c.cfg.Name, c.cfg.OAuthIdentity, IdentityShared, IdentityPerRequester)
	}
	if c.cfg.Transport == nil && c.cfg.Entry.Auth != "oauth" {
		return ctx, fmt.Errorf(`runtime: MCP server %q: the per-requester OAuth identity needs "auth": "oauth"`, c.cfg.Name)
	}
	c.mu.Lock()
	failed := c.err != nil && c.err.Op == "connect"
	c.mu.Unlock()
	c.pr.mu.Lock()
	if p := c.cfg.ListPrincipal; c.pr.sub {
		// A principal's own connection: bound when made.
	} else if p != "" {
		c.pr.bound = p
	} else if p := transport.PrincipalFrom(ctx); p != "" && (c.pr.bound == "" || failed) {
		// The first principal that names itself, or another one when the
		// previous one could not connect (say, it never logged in).
		c.pr.bound = p
	}
	bound := c.pr.bound
	c.pr.mu.Unlock()
	if bound == "" {
		return ctx, &PrincipalError{Server: c.cfg.Name, Listing: true}
	}
	return c.principalCtx(ctx), nil
}

// principalOp is the diagnostic's operation for a principalCheck error: a
// listing without a principal is retried like a failed connection (a later
// catalog use may name one); the others are resolution errors, which a
// retry cannot mend.
func principalOp(err error) string {
	var pe *PrincipalError
	if errors.As(err, &pe) {
		return "connect"
	}
	return "resolve"
}

// principalCtx returns ctx naming the principal this connection is bound
// to, for the requests the runtime makes on its own (connecting, listing):
// the transport refuses a request naming another principal than the
// connection's, such as the caller's whose catalog use relists the server.
func (c *conn) principalCtx(ctx context.Context) context.Context {
	if !c.perRequester() {
		return ctx
	}
	c.pr.mu.Lock()
	p := c.pr.bound
	c.pr.mu.Unlock()
	if p == "" || transport.PrincipalFrom(ctx) == p {
		return ctx
	}
	return transport.WithPrincipal(ctx, p)
}

// oauthOptions returns the transport's OAuth options for this connection:
// o itself unless the server is per-requester, else a copy bound to the
// connection's principal.
func (c *conn) oauthOptions(o *transport.OAuthOptions) *transport.OAuthOptions {
	if !c.perRequester() {
		return o
	}
	var n transport.OAuthOptions
	if o != nil {
		n = *o
	}
	c.pr.mu.Lock()
	n.Principal = c.pr.bound
	c.pr.mu.Unlock()
	n.PerRequester = true
	return &n
}

// forPrincipal returns the connection a call with ctx runs on, and a
// release to call when the call is over: c itself unless the server is
// per-requester; else the connection of ctx's principal (c when it is the
// listing principal), made on the principal's first call and connected by
// that call's first request (after the policies passed). A principal's
// connection that never connected (no login: the call failed with a
// *transport.AuthRequiredError naming the principal) is dropped when its
// last call is over, so principals that cannot connect are not kept.
func (c *conn) forPrincipal(ctx context.Context) (*conn, func(), error) {
	if !c.perRequester() || c.pr.sub {
		return c, func() {}, nil
	}
	p := transport.PrincipalFrom(ctx)
	if p == "" {
		return nil, nil, &PrincipalError{Server: c.cfg.Name}
	}
	c.pr.mu.Lock()
	defer c.pr.mu.Unlock()
	if p == c.pr.bound {
		return c, func() {}, nil
	}
	if c.pr.closed {
		return nil, nil, ErrClosed
	}
	sub, ok := c.pr.conns[p]
	if !ok {
		sub = c.s.newConn(c.cfg)
		sub.pr.sub, sub.pr.bound = true, p
		sub.recycle = true // session() dials it on first use
		if c.pr.conns == nil {
			c.pr.conns = map[string]*conn{}
		}
		c.pr.conns[p] = sub
	}
	sub.pr.users++
	return sub, func() { c.releasePrincipal(p, sub) }, nil
}

// releasePrincipal ends a call's use of sub, the connection of principal
// p, and drops sub when no call uses it and it holds no session and no
// pause (it never connected).
func (c *conn) releasePrincipal(p string, sub *conn) {
	c.pr.mu.Lock()
	sub.pr.users--
	drop := false
	if sub.pr.users == 0 && c.pr.conns[p] == sub {
		sub.mu.Lock()
		drop = sub.cs == nil && sub.pausedUntil.IsZero()
		sub.mu.Unlock()
		if drop {
			delete(c.pr.conns, p)
		}
	}
	c.pr.mu.Unlock()
	if drop {
		_ = sub.close()
	}
}

// principals returns the principals with a connection of their own, and
// the listing connection's, in no particular order.
func (c *conn) principals() (bound string, others []string) {
	c.pr.mu.Lock()
	defer c.pr.mu.Unlock()
	for p := range c.pr.conns {
		others = append(others, p)
	}
	return c.pr.bound, others
}

// principalList is ServerStatus.Principals: the listing connection's
// principal and those of the principals' connections, sorted; nil unless
// the server is per-requester.
func (c *conn) principalList() []string {
	if !c.perRequester() {
		return nil
	}
	bound, others := c.principals()
	if bound != "" {
		others = append(others, bound)
	}
	slices.Sort(others)
	return slices.Compact(others)
}

// takePrincipals removes every principal's connection from c, closing the
// door to new ones when final.
func (c *conn) takePrincipals(final bool) []*conn {
	c.pr.mu.Lock()
	defer c.pr.mu.Unlock()
	if final {
		c.pr.closed = true
	}
	subs := make([]*conn, 0, len(c.pr.conns))
	for _, s := range c.pr.conns {
		subs = append(subs, s)
	}
	c.pr.conns = nil
	return subs
}

// reapPrincipals closes the principals' connections of an idle server; a
// principal's next call connects it again.
func (c *conn) reapPrincipals() {
	for _, s := range c.takePrincipals(false) {
		if err := s.close(); err != nil {
			c.s.log.Warn("closing an idle MCP server", "server", c.cfg.Name, "err", err.Error())
		}
	}
}

// closePrincipals closes the principals' connections for good.
func (c *conn) closePrincipals() error {
	var errs []error
	for _, s := range c.takePrincipals(true) {
		errs = append(errs, s.close())
	}
	return errors.Join(errs...)
}

// holdFor is hold for a passthrough request (resources/read, subscriptions,
// prompts/get, completion). On a per-requester server these run on the
// listing connection, whose tokens are the listing principal's: a request
// from anyone else, or from nobody, is refused with a *PrincipalError
// rather than served under another user's identity.
func (c *conn) holdFor(ctx context.Context, op string) (release func(), err error) {
	if c.perRequester() {
		p := transport.PrincipalFrom(ctx)
		c.pr.mu.Lock()
		bound := c.pr.bound
		c.pr.mu.Unlock()
		if p == "" {
			return nil, &PrincipalError{Server: c.cfg.Name}
		}
		if p != bound {
			return nil, &PrincipalError{Server: c.cfg.Name, Op: op, Principal: p}
		}
	}
	return c.hold(op)
}
