package config

import (
	"fmt"
	"slices"
	"strings"
)

// Tool profiles of OpenClaw's `tools.profile` (docs/gateway/config-tools,
// "Tool profiles"). Only their effect on MCP tools matters here: `minimal`
// hides them; `coding` and `messaging` allow them implicitly (their allow
// lists hold the `bundle-mcp` plugin id); `full`, like no profile, restricts
// nothing.
const (
	ProfileMinimal   = "minimal"
	ProfileCoding    = "coding"
	ProfileMessaging = "messaging"
	ProfileFull      = "full"
)

// Profiles lists the valid `tools.profile` values.
var Profiles = []string{ProfileMinimal, ProfileCoding, ProfileMessaging, ProfileFull}

// Sandbox modes of `agents.defaults.sandbox.mode`.
const (
	SandboxOff     = "off"
	SandboxNonMain = "non-main"
	SandboxAll     = "all"
)

// ToolPolicy is the part of openclaw.json that decides which tools an agent
// may see and call, as OpenClaw's tool-policy pipeline reads it: the profile
// (with tools.alsoAllow merged into its allow list), then tools.allow and
// tools.deny, then, for a sandboxed session, the sandbox gate
// tools.sandbox.tools. Entries are tool names compared ignoring case, `*`
// globs (`outlook__*`), `group:*` names, and plugin ids: MCP tools belong to
// the plugin `bundle-mcp` and to `group:plugins`.
//
// The zero value restricts nothing. The runtime package applies it to the
// imported catalog (runtime.Options.ToolPolicy).
type ToolPolicy struct {
	// Profile is tools.profile: one of Profiles, or "" (none).
	Profile string
	// Allow, AlsoAllow and Deny are tools.allow, tools.alsoAllow and
	// tools.deny, trimmed, empty entries dropped. AlsoAllow extends the
	// profile's allow list; OpenClaw rejects allow and alsoAllow in one
	// scope, and so does [Document.ToolPolicy].
	Allow, AlsoAllow, Deny []string
	// SandboxMode is agents.defaults.sandbox.mode: "off" (or ""),
	// "non-main" or "all".
	SandboxMode string
	// Sandboxed applies the sandbox gate (Sandbox). [Document.ToolPolicy]
	// sets it for the modes "all" and "non-main"; an embedder that runs the
	// agent's main session under "non-main" clears it.
	Sandboxed bool
	// Sandbox is tools.sandbox.tools.
	Sandbox SandboxToolPolicy
}

// SandboxToolPolicy is tools.sandbox.tools: the extra gate a sandboxed
// session's tools pass. OpenClaw's default sandbox allow list holds built-in
// tools only, so a sandboxed agent sees an MCP tool only when an explicit
// Allow or an AlsoAllow entry matches it (`bundle-mcp`, `group:plugins`, an
// exact name or a server glob such as `outlook__*`).
type SandboxToolPolicy struct {
	// Allow replaces the default sandbox allow list when HasAllow is set.
	Allow    []string
	HasAllow bool
	// AlsoAllow extends the allow list (explicit or default).
	AlsoAllow []string
	// Deny is tools.sandbox.tools.deny.
	Deny []string
}

// ToolPolicy reads the tool policy from the document: tools.profile,
// tools.allow, tools.alsoAllow, tools.deny, tools.sandbox.tools.{allow,
// alsoAllow,deny} and agents.defaults.sandbox.mode. Absent keys restrict
// nothing. It fails with a *ConfigError naming the key when a value has the
// wrong type, the profile or sandbox mode is unknown, or allow and alsoAllow
// are both set in one scope (as OpenClaw's validation does).
func (d *Document) ToolPolicy() (*ToolPolicy, error) {
	p := &ToolPolicy{}
	tools, err := objectAt(d.Root, "tools")
	if err != nil {
		return nil, err
	}
	if tools != nil {
		if p.Profile, err = stringAt(tools, "tools", "profile"); err != nil {
			return nil, err
		}
		if p.Profile != "" && !slices.Contains(Profiles, p.Profile) {
			return nil, &ConfigError{Path: "tools.profile", Issue: fmt.Sprintf("unknown profile %q; expected one of %s", p.Profile, strings.Join(Profiles, ", "))}
		}
		var hasAllow, hasAlso bool
		if p.Allow, hasAllow, err = stringListAt(tools, "tools", "allow"); err != nil {
			return nil, err
		}
		if p.AlsoAllow, hasAlso, err = stringListAt(tools, "tools", "alsoAllow"); err != nil {
			return nil, err
		}
		if hasAllow && hasAlso {
			return nil, &ConfigError{Path: "tools", Issue: "allow and alsoAllow cannot both be set; merge alsoAllow into allow, or use profile + alsoAllow"}
		}
		if p.Deny, _, err = stringListAt(tools, "tools", "deny"); err != nil {
			return nil, err
		}
		sb, err := objectAt(tools, "sandbox")
		if err != nil {
			return nil, prefixed("tools", err)
		}
		if sb != nil {
			st, err := objectAt(sb, "tools")
			if err != nil {
				return nil, prefixed("tools.sandbox", err)
			}
			if st != nil {
				const at = "tools.sandbox.tools"
				s := &p.Sandbox
				if s.Allow, s.HasAllow, err = stringListAt(st, at, "allow"); err != nil {
					return nil, err
				}
				if s.AlsoAllow, hasAlso, err = stringListAt(st, at, "alsoAllow"); err != nil {
					return nil, err
				}
				if s.HasAllow && hasAlso {
					return nil, &ConfigError{Path: at, Issue: "allow and alsoAllow cannot both be set; merge alsoAllow into allow"}
				}
				if s.Deny, _, err = stringListAt(st, at, "deny"); err != nil {
					return nil, err
				}
			}
		}
	}
	agents, err := objectAt(d.Root, "agents")
	if err != nil {
		return nil, err
	}
	if agents != nil {
		defaults, err := objectAt(agents, "defaults")
		if err != nil {
			return nil, prefixed("agents", err)
		}
		if defaults != nil {
			sandbox, err := objectAt(defaults, "sandbox")
			if err != nil {
				return nil, prefixed("agents.defaults", err)
			}
			if sandbox != nil {
				if p.SandboxMode, err = stringAt(sandbox, "agents.defaults.sandbox", "mode"); err != nil {
					return nil, err
				}
			}
		}
	}
	switch p.SandboxMode {
	case "", SandboxOff:
	case SandboxAll, SandboxNonMain:
		p.Sandboxed = true
	default:
		return nil, &ConfigError{Path: "agents.defaults.sandbox.mode", Issue: fmt.Sprintf("unknown sandbox mode %q; expected off, non-main or all", p.SandboxMode)}
	}
	return p, nil
}

// objectAt returns o[key] as an object: nil when absent, an error when it
// is something else.
func objectAt(o *Object, key string) (*Object, error) {
	v, ok := o.Get(key)
	if !ok || v == nil {
		return nil, nil
	}
	obj, ok := v.(*Object)
	if !ok {
		return nil, &ConfigError{Path: key, Issue: fmt.Sprintf("expected an object, got %s", jsonKind(v))}
	}
	return obj, nil
}

// stringAt returns o[key] as a trimmed string ("" when absent).
func stringAt(o *Object, at, key string) (string, error) {
	v, ok := o.Get(key)
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", &ConfigError{Path: at + "." + key, Issue: fmt.Sprintf("expected a string, got %s", jsonKind(v))}
	}
	return strings.TrimSpace(s), nil
}

// stringListAt returns o[key] as a list of trimmed, non-empty strings and
// whether the key is present.
func stringListAt(o *Object, at, key string) ([]string, bool, error) {
	v, ok := o.Get(key)
	if !ok || v == nil {
		return nil, false, nil
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, false, &ConfigError{Path: at + "." + key, Issue: fmt.Sprintf("expected an array of strings, got %s", jsonKind(v))}
	}
	out := make([]string, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, false, &ConfigError{Path: fmt.Sprintf("%s.%s[%d]", at, key, i), Issue: fmt.Sprintf("expected a string, got %s", jsonKind(e))}
		}
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out, true, nil
}

// prefixed puts at in front of a *ConfigError's path.
func prefixed(at string, err error) error {
	if ce, ok := err.(*ConfigError); ok {
		c := *ce
		c.Path = at + "." + c.Path
		return &c
	}
	return err
}

// jsonKind names a decoded JSON value's type for error messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case *Object:
		return "an object"
	default:
		return "a number"
	}
}
