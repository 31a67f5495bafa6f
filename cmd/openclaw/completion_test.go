package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// complete runs cobra's hidden completion command and returns the
// candidates (description cut) and the directive line (":4").
func (c *registryCLI) complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	out, errOut, code := c.run(t, append([]string{"__complete"}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %v: exit %d: %s", args, code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var cands []string
	for _, l := range lines[:len(lines)-1] {
		name, _, _ := strings.Cut(l, "\t")
		cands = append(cands, name)
	}
	return cands, lines[len(lines)-1]
}

func TestCompletion(t *testing.T) {
	c := newRegistryCLI(t)
	for _, name := range []string{"beta", "alpha"} {
		if _, errOut, code := c.run(t, "mcp", "set", name, `{"command":"true"}`); code != 0 {
			t.Fatalf("mcp set %s: %s", name, errOut)
		}
	}
	for _, f := range []string{"deny.wasm", "notes.txt", "sub/inner.wasm"} {
		p := filepath.Join(c.work, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args      []string
		want      string
		directive string
	}{
		{[]string{"mcp", "show", ""}, "alpha beta", ":4"},
		{[]string{"mcp", "doctor", "b"}, "beta", ":4"},
		{[]string{"mcp", "unset", "alpha", ""}, "", ":4"},
		{[]string{"mcp", "configure", ""}, "alpha beta", ":4"},
		{[]string{"mcp", "login", "al"}, "alpha", ":4"},
		{[]string{"mcp", "logout", ""}, "alpha beta", ":4"},
		{[]string{"mcp", "probe", "alpha", ""}, "beta", ":4"},
		{[]string{"mcp", "set", "b"}, "beta", ":4"},
		{[]string{"mcp", "set", "beta", ""}, "", ":4"},
		{[]string{"mcp", "tools", "--server", ""}, "alpha beta", ":4"},
		{[]string{"mcp", "call", "a"}, "alpha__", ":6"},
		{[]string{"mcp", "proxy", "--policy", "builtin:"}, "builtin:approvals builtin:rules builtin:sanitizer", ":4"},
		{[]string{"mcp", "serve", "--policy", ""}, "builtin:approvals builtin:rules builtin:sanitizer deny.wasm sub/", ":6"},
		{[]string{"mcp", "call", "--policy", "sub/"}, "sub/inner.wasm", ":4"},
	} {
		cands, directive := c.complete(t, tc.args...)
		if got := strings.Join(cands, " "); got != tc.want || directive != tc.directive {
			t.Errorf("complete %q: %q %s, want %q %s", tc.args, got, directive, tc.want, tc.directive)
		}
	}
}

// Installed as openclaw-go (beside OpenClaw's own openclaw, as the README
// suggests), the completion script completes openclaw-go.
func TestCompletionUnderInstalledName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "openclaw-go")
	if err := os.Rename(buildOpenclaw(t, dir), bin); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "completion", "bash").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "complete -o default -F __start_openclaw-go openclaw-go") {
		t.Errorf("the bash completion of openclaw-go does not complete openclaw-go:\n%.2000s", out)
	}
}
