package runtime

import "strings"

// glob is a compiled name pattern with OpenClaw's `*`-only semantics: `*`
// matches any run of characters (none included) and every other character
// matches itself; there is no escape and no other wildcard. It is the
// pattern split at its stars.
type glob []string

// compileGlob splits pattern at its stars.
func compileGlob(pattern string) glob { return strings.Split(pattern, "*") }

// match reports whether s matches the pattern: the first part is a prefix,
// the last a suffix, and the others appear in order between them without
// overlapping.
func (g glob) match(s string) bool {
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
