package glob

import "testing"

// One glob for tools.deny/allow entries and a server's toolFilter:
// OpenClaw's `*`-only semantics, the parts matched in order without
// overlapping.
func TestGlob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"abc", "abc", true}, {"abc", "abcd", false}, {"*", "", true}, {"*", "anything", true},
		{"a*", "a", true}, {"*c", "abc", true}, {"a*c", "ac", true}, {"a*b*c", "a-b-c", true},
		{"a*b*c", "a-c", false}, {"*a*a", "a", false}, {"*a*a", "aa", true}, {"x**y", "xy", true},
		{"a*a", "a", false}, {"a*a", "aa", true}, {"**", "q", true},
		{"docs__*", "docs__", true}, {"docs__*", "doc__x", false},
		{"*__fetch", "web__fetch", true}, {"*__fetch", "web__fetcher", false},
		{"out*graph*", "outlook-graph__send", true}, {"*x*y*", "yx", false}, {"*x*y*", "axby", true},
		{"a?c", "abc", false}, {"a[b]c", "abc", false}, {`a\*c`, `a\xc`, true},
	} {
		if got := Compile(tc.pattern).Match(tc.s); got != tc.want {
			t.Errorf("%q matches %q = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}
