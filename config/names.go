package config

import (
	"fmt"
	"strings"
)

// maxServerPart is OpenClaw's cap on the server part of an exposed tool
// name (docs/tool-names.md §2).
const maxServerPart = 30

// jsSpace reports whether r is white space to JavaScript's String.prototype
// .trim (WhiteSpace and LineTerminator; not U+0085).
func jsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', '\u00a0', '\u1680', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff':
		return true
	}
	return r >= '\u2000' && r <= '\u200a'
}

// ServerPartBase returns the server part OpenClaw gives a server name before
// any collision suffix or hash (docs/tool-names.md §2, rules 1–3): trimmed,
// every character outside [A-Za-z0-9_-] replaced by "-" (two for a
// character outside the BMP, as JavaScript counts UTF-16 units), "mcp" when
// empty, "mcp-" before a non-letter start, cut to 30. It is for config-time
// checks; the names a catalog exposes are the sanitize_tool_names hook's.
func ServerPartBase(name string) string {
	var b strings.Builder
	for _, r := range strings.TrimFunc(name, jsSpace) {
		switch {
		case r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'):
			b.WriteRune(r)
		case r > 0xffff:
			b.WriteString("--")
		default:
			b.WriteByte('-')
		}
	}
	s := b.String()
	if s == "" {
		s = "mcp"
	}
	if c := s[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
		s = "mcp-" + s
	}
	return s[:min(len(s), maxServerPart)]
}

// AmbiguousServerNames returns a warning for each server whose exposed tool
// names (`<server part>__<tool part>`) a reader, or a `server__*` entry of
// tools.allow / tools.deny, cannot tell from another server's: a server part
// that holds "__" or ends in "_" (server "a__b": `a__b__c` reads as server
// "a", tool "b__c"), naming the declared servers whose `<part>__*` glob
// also matches its tools. Routing is unaffected (calls go by the catalog's
// name map); the warning points policy authors at the hook input's
// tool.server and tool.original. names are the raw server names in
// declaration order; the result follows that order, keyed by raw name.
func AmbiguousServerNames(names []string) []NameWarning {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = strings.ToLower(ServerPartBase(n))
	}
	var out []NameWarning
	for i, p := range parts {
		if !strings.Contains(p, "__") && !strings.HasSuffix(p, "_") {
			continue
		}
		var shadow []string
		var glob string
		for j, q := range parts {
			if j != i && strings.HasPrefix(p+"__", q+"__") {
				shadow = append(shadow, fmt.Sprintf("%q", names[j]))
				if glob == "" {
					glob = ServerPartBase(names[j]) + "__*"
				}
			}
		}
		part := ServerPartBase(names[i])
		msg := fmt.Sprintf("the server part %q holds \"__\" or ends in \"_\": its exposed names (%s__<tool>) do not say where the server name ends", part, part)
		if len(shadow) > 0 {
			msg += fmt.Sprintf("; they start like the names of server %s, whose glob %q in tools.allow or tools.deny also matches this server's tools", strings.Join(shadow, ", "), glob)
		}
		msg += "; rename the server, and let policies match tool.server and tool.original rather than the exposed name (docs/tool-names.md §9)"
		out = append(out, NameWarning{Server: names[i], Message: msg})
	}
	return out
}

// NameWarning is a config-time warning about one server's exposed names.
type NameWarning struct {
	// Server is the raw server name; Message says what is ambiguous.
	Server, Message string
}
