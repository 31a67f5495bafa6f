//go:build linux

package transport

import (
	"strings"
	"testing"
)

func FuzzExpandEnv(f *testing.F) {
	for _, s := range []string{"Bearer ${A}", "$${A}", "${", "${A}${B}", "x${A"} {
		f.Add(s)
	}
	lookup := func(k string) (string, bool) { return "<" + k + ">", k != "UNSET" }
	f.Fuzz(func(t *testing.T, s string) {
		out, err := ExpandEnv(s, lookup)
		if err == nil && !strings.Contains(s, "${") && out != s {
			t.Errorf("ExpandEnv(%q) = %q changed text without ${", s, out)
		}
	})
}
