package opa

import (
	"strings"
	"testing"
)

func TestCanonicalRego(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"b": 1, "a": [2, "x"]}`, `{"a": [2, "x"], "b": 1}`},
		{`{3, 1, "a", null, true, [1]}`, `{null, true, 1, 3, "a", [1]}`},
		{`set()`, `set()`},
		{`{}`, `{}`},
		{`[{"z": {"y": 1, "x": 2}}, set()]`, `[{"z": {"x": 2, "y": 1}}, set()]`},
		{`{"k\"ey": "v, }"}`, `{"k\"ey": "v, }"}`},
		{`{10, 9.5, -1}`, `{-1, 9.5, 10}`},
	} {
		got, err := canonicalRego(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("canonicalRego(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{``, `[`, `{"a" 1}`, `[1 2]`, `{"a": }`, `"open`, `[1,]x`, `nope`} {
		if got, err := canonicalRego(bad); err == nil {
			t.Errorf("canonicalRego(%q) = %q, want an error", bad, got)
		}
	}
}

func TestSplitArray(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`[1, "a,b", {"x": [1, 2]}, set()]`, `1|"a,b"|{"x": [1, 2]}|set()`},
		{`[]`, ``},
		{`["\"]", 2]`, `"\"]"|2`},
	} {
		got, err := splitArray(tc.in)
		if err != nil || strings.Join(got, "|") != tc.want {
			t.Errorf("splitArray(%s) = %q, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`1`, `[1, ]`, `[[1]`, `["x]`, `[1]]`} {
		if got, err := splitArray(bad); err == nil {
			t.Errorf("splitArray(%q) = %q, want an error", bad, got)
		}
	}
}

// FuzzSprintfArgs feeds guest-controlled value texts to the sprintf
// helpers: they must not panic.
func FuzzSprintfArgs(f *testing.F) {
	f.Add(`{"b": 1, "a": [2, "x"]}`)
	f.Add(`[1, "a,b", {"x": [1, 2]}, set()]`)
	f.Add(`{1, {2: 3}}`)
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = canonicalRego(s)
		if elems, err := splitArray(s); err == nil {
			for _, e := range elems {
				_ = sprintfValue(e)
			}
		}
		_, _ = builtinSprintf([]string{`"%v %v"`, s})
	})
}
