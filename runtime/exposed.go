package runtime

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/openclaw-go/openclaw/policies"
)

// toolKey is who a name was exposed for: the raw server and tool names,
// and the utility operation for a utility tool ("" for a server's own).
type toolKey struct {
	server, tool, utility string
}

// exposedNames is every tool name a session exposed since it was created,
// kept across rebuilds, reloads and idle reaping, so that within the
// session a name keeps meaning the same tool or goes away
// (docs/tool-names.md §8). It is the sanitizer's `exposed` input and the
// host's own check of every answer. Guarded by Session.buildMu.
type exposedNames struct {
	owner map[string]*exposedName // lowered name → who it was exposed for
	cur   map[toolKey]string      // tool → its latest name
	safe  map[string]string       // raw server name → its latest safe name
	build uint64                  // counts the checked answers
	sent  uint64                  // counts the requests
}

// exposedName is one name of exposedNames: the tool it was exposed for,
// the build that last answered it, and the request that last sent it as
// its tool's latest name.
type exposedName struct {
	key        toolKey
	seen, sent uint64
}

// maxRetiredNames bounds the names a session remembers beyond its current
// catalog (tools gone, older names): past it the oldest are forgotten, so a
// server that keeps renaming its tools cannot grow the session without
// bound. A forgotten name may be given to another tool again.
const maxRetiredNames = 16384

func newExposedNames() *exposedNames {
	return &exposedNames{owner: map[string]*exposedName{}, cur: map[toolKey]string{}, safe: map[string]string{}}
}

// lowerASCII lowers A-Z in s, without allocating when there is none
// (exposed names are ASCII).
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// request returns the `exposed` input for a batch whose tool j of server i
// is keys[i][j]: per server of the batch, in its order, the latest name of
// each of its tools in their order, then every other name it was exposed
// under (tools gone, older names); then the servers gone. Nil when the
// session exposed nothing yet.
func (x *exposedNames) request(servers []policies.SanitizeServer, keys [][]toolKey) []policies.ExposedServer {
	if len(x.owner) == 0 && len(x.safe) == 0 {
		return nil
	}
	x.sent++
	out := make([]policies.ExposedServer, 0, len(servers))
	for i, s := range servers {
		e := policies.ExposedServer{Server: s.Name, Safe: x.safe[s.Name]}
		for j, raw := range s.Tools {
			if n := x.cur[keys[i][j]]; n != "" {
				e.Tools, e.Names = append(e.Tools, raw), append(e.Names, n)
				x.owner[lowerASCII(n)].sent = x.sent
			}
		}
		out = append(out, e)
	}
	// The names not sent as a present tool's latest (tools gone, older
	// names) stay taken: sent lowered (names compare ignoring case), under
	// their tool's raw name, after their server's or in servers gone.
	type pair struct{ tool, name string }
	var rest map[string][]pair
	for lower, n := range x.owner {
		if n.sent != x.sent {
			if rest == nil {
				rest = map[string][]pair{}
			}
			rest[n.key.server] = append(rest[n.key.server], pair{n.key.tool, lower})
		}
	}
	if rest == nil {
		return out
	}
	for i := range out {
		more := rest[out[i].Server]
		delete(rest, out[i].Server)
		slices.SortFunc(more, func(a, b pair) int { return strings.Compare(a.name, b.name) })
		for _, p := range more {
			out[i].Tools, out[i].Names = append(out[i].Tools, p.tool), append(out[i].Names, p.name)
		}
	}
	gone := make([]string, 0, len(rest))
	for server := range rest {
		gone = append(gone, server)
	}
	slices.Sort(gone)
	for _, server := range gone {
		more := rest[server]
		slices.SortFunc(more, func(a, b pair) int { return strings.Compare(a.name, b.name) })
		e := policies.ExposedServer{Server: server, Safe: x.safe[server]}
		for _, p := range more {
			e.Tools, e.Names = append(e.Tools, p.tool), append(e.Names, p.name)
		}
		out = append(out, e)
	}
	return out
}

// RepointedError says why a tool (or prompt) was left out of a catalog:
// its sanitizer answered it a name the session had already exposed for
// another. Calls to the name keep failing as unknown rather than reach
// the other one.
type RepointedError struct {
	// Kind is "tool" or "prompt".
	Kind string
	// Name is the answered name; Server and Tool the tool (or prompt) it
	// was answered for; HolderServer and HolderTool the one it was exposed
	// for.
	Name, Server, Tool, HolderServer, HolderTool string
}

// Error reads `sanitize_tool_names: server "netapp" tool "Create CIFS
// Share": name "netapp__Create-CIFS-Share" was exposed for tool
// "Create-CIFS-Share" of server "netapp" in this session; the tool is not
// exposed` (with "prompt" for a prompt).
func (e *RepointedError) Error() string {
	return fmt.Sprintf("sanitize_tool_names: server %q %s %q: name %q was exposed for %s %q of server %q in this session; the %s is not exposed",
		e.Server, e.Kind, e.Tool, e.Name, e.Kind, e.HolderTool, e.HolderServer, e.Kind)
}

// check withholds every name of res that the session exposed for another
// tool (clearing it: the tool is left out) and returns why; it records
// the others. keys is as for request; kind ("tool", "prompt") names what
// was named.
func (x *exposedNames) check(req *policies.SanitizeRequest, res *policies.SanitizeResult, keys [][]toolKey, kind string) []*RepointedError {
	var out []*RepointedError
	x.build++
	answered := 0
	for i, s := range req.Servers {
		x.safe[s.Name] = res.Servers[i].Safe
		for j, tn := range res.Servers[i].Tools {
			if tn.Name == "" {
				continue
			}
			k, lower := keys[i][j], lowerASCII(tn.Name)
			switch n := x.owner[lower]; {
			case n == nil:
				x.owner[lower] = &exposedName{key: k, seen: x.build}
			case n.key != k:
				out = append(out, &RepointedError{Kind: kind, Name: tn.Name, Server: k.server, Tool: k.tool, HolderServer: n.key.server, HolderTool: n.key.tool})
				res.Servers[i].Tools[j] = policies.ToolName{Reject: "its name was exposed for another " + kind + " in this session"}
				continue
			default:
				n.seen = x.build
			}
			if x.cur[k] != tn.Name {
				x.cur[k] = tn.Name
			}
			answered++
		}
	}
	if len(x.owner) > answered+maxRetiredNames {
		x.forget(len(x.owner) - answered - maxRetiredNames)
	}
	return out
}

// forget drops the n names answered longest ago (never one of the latest
// build).
func (x *exposedNames) forget(n int) {
	old := make([]string, 0, len(x.owner))
	for lower, e := range x.owner {
		if e.seen < x.build {
			old = append(old, lower)
		}
	}
	slices.SortFunc(old, func(a, b string) int {
		if c := cmp.Compare(x.owner[a].seen, x.owner[b].seen); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for _, lower := range old[:min(n, len(old))] {
		k := x.owner[lower].key
		if lowerASCII(x.cur[k]) == lower {
			delete(x.cur, k)
		}
		delete(x.owner, lower)
	}
}

// serverNames returns the names of servers, in their order.
func serverNames(servers []Server) []string {
	out := make([]string, len(servers))
	for i, sv := range servers {
		out[i] = sv.Name
	}
	return out
}
