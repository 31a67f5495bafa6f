package runtime

import (
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/glob"
	"github.com/openclaw-go/openclaw/transport"
)

// DefaultListTimeout bounds the tools/list requests of a catalog build for a
// server that sets no requestTimeoutMs (docs/protocol-facts.md, Defaults and limits: 1500 ms).
const DefaultListTimeout = 1500 * time.Millisecond

// Pagination caps of one server's tools/list (docs/protocol-facts.md, Defaults and limits). A listing
// that exceeds one fails with a *[ListError] naming the cap, and the server
// contributes no tools.
const (
	MaxListPages = 128
	MaxListTools = 16384
	MaxListBytes = 10 << 20
)

// Server is one MCP server of a session: an `mcp.servers` entry of
// openclaw.json, or a transport the embedder built.
type Server struct {
	// Name is the mcp.servers key: the raw server name handed to the
	// sanitize_tool_names hook and shown in diagnostics. Names are unique
	// within a session.
	Name string
	// Entry is resolved by transport.Resolve when the session connects
	// (stdio under the transport's supervisor, SSE or streamable HTTP). Its
	// ConnectionTimeoutMs and RequestTimeoutMs (0 = OpenClaw's defaults,
	// 30 s and 60 s) apply to Transport too.
	Entry config.ServerEntry
	// Transport, when set, is used instead of resolving Entry: an in-process
	// server (mcp.NewInMemoryTransports) or a transport of the embedder's
	// own. It is connected by Connect, and again after idle reaping or
	// after repeated timeouts recycled the connection; a transport that
	// connects only once (mcp.InMemoryTransport) then fails with a
	// diagnostic.
	Transport mcp.Transport
	// Disabled servers are declared (they take part in naming, as in
	// OpenClaw, docs/tool-names.md §2) but never connected: `enabled: false`.
	Disabled bool
	// BlockedEnv lists env keys of OpenClaw's stdio blocklist that the
	// config's filter already dropped (config.ResolvedServer.BlockedEnv).
	// A server with any is not started: its diagnostic is a
	// *transport.BlockedEnvError naming the keys.
	BlockedEnv []string
	// ToolFilter hides tools: a tool is exposed when Include is empty or one
	// of its patterns matches, and no Exclude pattern matches; a pattern
	// matches the raw tool name or the exposed (namespaced) name, and `*`
	// matches any run of characters (docs/protocol-facts.md, Tool filter). nil exposes every tool.
	ToolFilter *config.ToolFilter
	// SupportsParallelToolCalls lets calls to this server overlap; by default
	// (false, as in OpenClaw) they run one at a time.
	SupportsParallelToolCalls bool
	// OAuthIdentity is oauth.identity (docs/protocol-facts.md, mcp.servers entry schema): "" or
	// [IdentityShared] for the server's one set of tokens, or
	// [IdentityPerRequester]: each call runs over a connection of the
	// principal its context names ([WithPrincipal]) with that principal's
	// tokens, made on the principal's first call; a call naming none fails
	// with a [*PrincipalError]. It needs Entry.Auth "oauth".
	OAuthIdentity string
	// ListPrincipal is the principal whose connection lists the tools of a
	// per-requester server (and serves that principal's calls). Empty
	// means the principal named by the context of the Connect, or of the
	// catalog use, that first connects the server (replaced by the next
	// one named if it could not connect, e.g. never logged in); until one
	// names a principal the server's diagnostic is a [*PrincipalError] and
	// it contributes no tools, and the connection is retried like a failed
	// one (ListRetryDelay). openclaw.json has no such key: it is the
	// embedder's choice.
	ListPrincipal string
	// AuthProfileID is oauth.authProfileId: credentials from an OpenClaw
	// auth profile, which openclaw-go does not have. A server with one is
	// never connected: its diagnostic is an [*AuthProfileError].
	AuthProfileID string
}

// connectTimeout returns the entry's connection timeout or the default.
func (s *Server) connectTimeout() time.Duration {
	return msOr(s.Entry.ConnectionTimeoutMs, transport.DefaultConnectionTimeout)
}

// requestTimeout returns the entry's request timeout or the default.
func (s *Server) requestTimeout() time.Duration {
	return msOr(s.Entry.RequestTimeoutMs, transport.DefaultRequestTimeout)
}

// listTimeout is the tools/list bound of OpenClaw (docs/protocol-facts.md, Defaults and limits): 1500 ms unless the server
// sets requestTimeoutMs.
func (s *Server) listTimeout() time.Duration {
	return msOr(s.Entry.RequestTimeoutMs, DefaultListTimeout)
}

func msOr(ms float64, def time.Duration) time.Duration {
	if ms <= 0 {
		return def
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// ServerFromConfig maps a resolved mcp.servers entry (config.ResolvedServer,
// docs/protocol-facts.md, Transport resolution) to a Server: its Entry, which transport.Resolve connects with the
// same rules; enabled, toolFilter, supportsParallelToolCalls, the env keys
// the stdio filter dropped, and the oauth block's identity and
// authProfileId.
func ServerFromConfig(r *config.ResolvedServer) Server {
	s := Server{
		Name:                      r.Name,
		Entry:                     r.Entry,
		Disabled:                  !r.Enabled,
		BlockedEnv:                slices.Clone(r.BlockedEnv),
		SupportsParallelToolCalls: r.SupportsParallelToolCalls,
	}
	if r.ToolFilter != nil {
		s.ToolFilter = &config.ToolFilter{
			Include: slices.Clone(r.ToolFilter.Include),
			Exclude: slices.Clone(r.ToolFilter.Exclude),
		}
	}
	if o := r.Entry.OAuth; o != nil {
		s.OAuthIdentity = o.Identity
		s.AuthProfileID = o.AuthProfileID
	}
	return s
}

// ServersFromConfig maps every resolved entry with [ServerFromConfig],
// keeping their order (the declaration order naming depends on).
func ServersFromConfig(rs []*config.ResolvedServer) []Server {
	out := make([]Server, 0, len(rs))
	for _, r := range rs {
		out = append(out, ServerFromConfig(r))
	}
	return out
}

// allowed applies f to a tool known by its raw and exposed names (docs/protocol-facts.md, Tool filter).
func allowed(f *config.ToolFilter, raw, exposed string) bool {
	if f == nil {
		return true
	}
	matches := func(patterns []string) bool {
		for _, p := range patterns {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			if g := glob.Compile(p); g.Match(raw) || g.Match(exposed) {
				return true
			}
		}
		return false
	}
	if len(f.Include) > 0 && !matches(f.Include) {
		return false
	}
	return !matches(f.Exclude)
}
