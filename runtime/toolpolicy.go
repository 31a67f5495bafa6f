package runtime

import (
	"fmt"
	"strings"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/glob"
)

// MCPPluginID is the plugin id OpenClaw gives every tool imported from
// mcp.servers: a tools.allow, tools.deny or alsoAllow entry "bundle-mcp"
// names them all, as does "group:plugins".
const MCPPluginID = "bundle-mcp"

// HiddenToolError is returned by CallTool for a tool that the session's tool
// policy (Options.ToolPolicy) hides: it is named in the catalog but neither
// listed nor callable. It wraps ErrUnknownTool, as OpenClaw's agent never
// sees a tool its policy filtered out.
type HiddenToolError struct {
	// Tool is the exposed name called; Server the raw server name.
	Tool, Server string
	// Rule says which rule hid it, e.g. `tools.deny entry "bundle-mcp"`.
	Rule string
}

// Error reads `runtime: unknown tool "docs__search": hidden by tools.deny
// entry "bundle-mcp"`.
func (e *HiddenToolError) Error() string {
	return fmt.Sprintf("%v %q: hidden by %s", ErrUnknownTool, e.Tool, e.Rule)
}

// Unwrap returns ErrUnknownTool.
func (e *HiddenToolError) Unwrap() error { return ErrUnknownTool }

// toolPolicy is a compiled config.ToolPolicy: OpenClaw's pipeline steps
// that can touch an MCP tool, in order. A tool hidden by one step is hidden.
type toolPolicy struct {
	steps []policyStep
}

// policyStep is one allow/deny layer. Deny wins; a non-nil allow list
// restricts the tool to its matches.
type policyStep struct {
	deny     []toolPattern
	denyKey  string // config key of deny, for reasons
	allow    []toolPattern
	hasAllow bool
	// notAllowed is the reason given when hasAllow and nothing matches.
	notAllowed string
}

// toolPattern is one entry: a plugin-wide entry (bundle-mcp,
// group:plugins) or a case-insensitive glob on the exposed name (compiled
// from the lowercased entry).
type toolPattern struct {
	raw    string
	plugin bool
	glob   glob.Pattern
}

func compilePatterns(entries []string) []toolPattern {
	out := make([]toolPattern, 0, len(entries))
	for _, e := range entries {
		n := strings.ToLower(strings.TrimSpace(e))
		if n == "" {
			continue
		}
		out = append(out, toolPattern{raw: e, plugin: n == MCPPluginID || n == "group:plugins", glob: glob.Compile(n)})
	}
	return out
}

// match returns the first pattern that matches the lowercased exposed name.
func match(ps []toolPattern, lower string) (toolPattern, bool) {
	for i := range ps {
		if ps[i].plugin || ps[i].glob.Match(lower) {
			return ps[i], true
		}
	}
	return toolPattern{}, false
}

// compileToolPolicy turns the config into steps; nil restricts nothing.
//
// The profile step mirrors OpenClaw's profile allow lists: "minimal" holds
// built-in tools only (so an MCP tool passes only through tools.alsoAllow),
// "coding" and "messaging" hold bundle-mcp, "full" or none restricts
// nothing. The sandbox step replaces OpenClaw's default sandbox allow list,
// which holds built-in tools only, by "nothing but tools.sandbox.tools
// alsoAllow" for MCP tools.
func compileToolPolicy(p *config.ToolPolicy) *toolPolicy {
	if p == nil {
		return nil
	}
	tp := &toolPolicy{}
	if p.Profile == config.ProfileMinimal {
		tp.steps = append(tp.steps, policyStep{
			allow: compilePatterns(p.AlsoAllow), hasAllow: true,
			notAllowed: fmt.Sprintf("tools.profile %q (it holds no MCP tools; add %q or a server glob to tools.alsoAllow)", p.Profile, MCPPluginID),
		})
	}
	if len(p.Allow) > 0 || len(p.Deny) > 0 {
		tp.steps = append(tp.steps, policyStep{
			deny: compilePatterns(p.Deny), denyKey: "tools.deny",
			allow: compilePatterns(p.Allow), hasAllow: len(p.Allow) > 0,
			notAllowed: "tools.allow (no entry matches)",
		})
	}
	if p.Sandboxed {
		s := p.Sandbox
		allow := compilePatterns(append(append([]string(nil), s.Allow...), s.AlsoAllow...))
		reason := fmt.Sprintf("the sandbox tool policy: no tools.sandbox.tools.alsoAllow entry matches (add %q or a server glob such as \"server__*\")", MCPPluginID)
		if s.HasAllow {
			reason = "the sandbox tool policy: no tools.sandbox.tools.allow entry matches"
		}
		tp.steps = append(tp.steps, policyStep{
			deny: compilePatterns(s.Deny), denyKey: "tools.sandbox.tools.deny",
			allow: allow, hasAllow: true, notAllowed: reason,
		})
	}
	if len(tp.steps) == 0 {
		return nil
	}
	return tp
}

// hides returns the rule that hides the tool exposed as name, or "" when
// it is visible. server and raw are the raw server and tool names: an
// entry matches the exposed name or `<server>__<raw>`, so that an entry
// written for a tool keeps naming it when the sanitizer renamed it (a
// reserved or colliding name gets a "-2" suffix, `T` after `t` becomes
// `server__T-2`). For a tool whose names need no change both are the
// same, as in OpenClaw, which matches the exposed name.
func (tp *toolPolicy) hides(name, server, raw string) string {
	if tp == nil {
		return ""
	}
	lower := strings.ToLower(name)
	alias := ""
	if !isJoined(name, server, raw) {
		alias = strings.ToLower(server + "__" + raw)
	}
	for _, st := range tp.steps {
		if p, ok := match(st.deny, lower); ok {
			return fmt.Sprintf("%s entry %q", st.denyKey, p.raw)
		}
		if alias != "" {
			if p, ok := match(st.deny, alias); ok {
				return fmt.Sprintf("%s entry %q (it names %q, the tool's server and upstream name)", st.denyKey, p.raw, server+"__"+raw)
			}
		}
		if st.hasAllow {
			_, ok := match(st.allow, lower)
			if !ok && alias != "" {
				_, ok = match(st.allow, alias)
			}
			if !ok {
				return st.notAllowed
			}
		}
	}
	return ""
}

// isJoined reports whether name is exactly `<server>__<raw>`.
func isJoined(name, server, raw string) bool {
	return len(name) == len(server)+2+len(raw) && strings.HasPrefix(name, server) &&
		name[len(server):len(server)+2] == "__" && strings.HasSuffix(name, raw)
}

// ToolPolicy is the tool policy of openclaw.json that Options.ToolPolicy
// applies to the catalog; read it with config.Document.ToolPolicy.
type ToolPolicy = config.ToolPolicy
