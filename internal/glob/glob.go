// Package glob is the one name pattern of openclaw-go, with OpenClaw's
// `*`-only semantics: `*` matches any run of characters (none included)
// and every other character matches itself; there is no escape and no
// other wildcard. tools.allow/deny entries, a server's toolFilter and the
// policy file's rate_limits use it. It imports only the standard library.
package glob

import "strings"

// Pattern is a compiled pattern: the pattern split at its stars.
type Pattern []string

// Compile splits pattern at its stars. Every string is a valid pattern.
func Compile(pattern string) Pattern { return strings.Split(pattern, "*") }

// Match reports whether s matches the pattern: the first part is a prefix,
// the last a suffix, and the others appear in order between them without
// overlapping.
func (g Pattern) Match(s string) bool {
	if len(g) == 1 {
		return s == g[0]
	}
	first, last := g[0], g[len(g)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	mid := s[len(first) : len(s)-len(last)]
	for _, part := range g[1 : len(g)-1] {
		i := strings.Index(mid, part)
		if i < 0 {
			return false
		}
		mid = mid[i+len(part):]
	}
	return true
}
