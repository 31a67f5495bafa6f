//go:build linux

package transport

import (
	"net/url"
	"strings"
	"testing"
)

func FuzzRedactURL(f *testing.F) {
	for _, s := range []string{"https://user:pw@h/mcp?token=abc&x=1", "http://h/?%2574oken=x", "https://h/bot1:x/y", "::", "http://[::1]:80/?a=b&&c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out := RedactURL(raw)
		u, err := url.Parse(raw)
		if err != nil || u.User == nil || !userinfoPresent(raw) {
			return
		}
		// A password that appears once in the text, in the userinfo, must go.
		if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Count(raw, pw) == 1 && strings.Contains(out, pw) {
			t.Errorf("RedactURL(%q) = %q keeps the password", raw, out)
		}
	})
}

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
