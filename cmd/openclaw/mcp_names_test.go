package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRegistryAmbiguousServerNames: servers "a", "a__b" and "a_" expose
// names that a reader (or a "a__*" glob) cannot tell apart: doctor lists a
// warning for a__b and a_ (not for a) and stays ok; status warns on stderr
// and keeps its stdout as OpenClaw prints it.
func TestRegistryAmbiguousServerNames(t *testing.T) {
	t.Parallel()
	c := newRegistryCLI(t)
	if err := os.MkdirAll(filepath.Dir(c.configPath()), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `{"mcp":{"servers":{"a":{"command":"sh"},"a__b":{"command":"sh"},"a_":{"command":"sh"}}}}`
	if err := os.WriteFile(c.configPath(), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	want := `they start like the names of server "a", whose glob "a__*" in tools.allow or tools.deny also matches this server's tools`
	stdout, stderr, rc := c.run(t, "mcp", "doctor")
	if rc != 0 {
		t.Fatalf("doctor exit %d: %s %s", rc, stdout, stderr)
	}
	for _, server := range []string{"a__b", "a_"} {
		block := stdout[strings.Index(stdout, "- "+server+": ok\n"):]
		if first := strings.SplitN(block, "\n", 3); len(first) < 2 || !strings.HasPrefix(first[1], "  - warning: the server part \""+server+"\"") || !strings.Contains(first[1], want) {
			t.Errorf("doctor for %s:\n%s", server, stdout)
		}
	}
	if strings.Contains(stdout, "- a: ok\n  -") {
		t.Errorf("doctor warns about server a:\n%s", stdout)
	}
	stdout, stderr, rc = c.run(t, "mcp", "status")
	if rc != 0 || strings.Contains(stdout, "warning") {
		t.Fatalf("status exit %d, stdout %q", rc, stdout)
	}
	for _, server := range []string{"a__b", "a_"} {
		if !strings.Contains(stderr, `warning: server "`+server+`": the server part`) || !strings.Contains(stderr, want) {
			t.Errorf("status stderr does not warn about %s:\n%s", server, stderr)
		}
	}
}
