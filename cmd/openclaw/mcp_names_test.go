package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/e2e"
	"github.com/openclaw-go/openclaw/internal/testkit"
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

// TestMCPProxyNamesStayOnReload: on the real binary, a reload that declares
// a second server whose name cuts to the same 30 characters leaves the
// first server's exposed names as they were (fresh naming would give both
// the hash form); the newcomer takes the hash, and the old names still call
// the first server.
func TestMCPProxyNamesStayOnReload(t *testing.T) {
	server := testkit.Peer(t, testkit.GoEverythingServer)
	dir := t.TempDir()
	bin := buildOpenclaw(t, dir)
	home := filepath.Join(dir, "home")
	cfgPath := filepath.Join(home, ".openclaw", "openclaw.json")
	const platform = "Acme_Enterprise_Data_Management_Platform_"
	entry := map[string]any{"command": server}
	writeJSON(t, cfgPath, map[string]any{"mcp": map[string]any{"servers": map[string]any{platform + "2": entry}}})
	env := append(os.Environ(), "OPENCLAW_HOME="+home, "OPENCLAW_STATE_DIR="+filepath.Join(dir, "state"))

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.Command(bin, "mcp", "proxy")
	cmd.Env = env
	stderr := &e2e.LockedBuffer{}
	cmd.Stderr = stderr
	pc := startStdioProxy(ctx, t, cmd, "names-test")
	cs, changed, tools := pc.cs, pc.changed, pc.tools
	old := "Acme_Enterprise_Data_Managemen__test_simple_text"
	before := tools()
	if !slices.Contains(before, old) {
		t.Fatalf("tools before the reload = %v", before)
	}
	writeJSON(t, cfgPath, map[string]any{"mcp": map[string]any{"servers": map[string]any{platform + "2": entry, platform + "3": entry}}})
	rc := exec.CommandContext(ctx, bin, "mcp", "reload")
	rc.Env = env
	if out, err := rc.CombinedOutput(); err != nil || !strings.Contains(string(out), "1 added") {
		t.Fatalf("openclaw mcp reload: %v\n%s\nproxy stderr:\n%s", err, out, stderr.String())
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatalf("no notifications/tools/list_changed after the reload\nstderr:\n%s", stderr.String())
	}
	after := tools()
	for _, n := range before {
		if !slices.Contains(after, n) {
			t.Errorf("%q left the catalog after the reload: %v", n, after)
		}
	}
	if !slices.ContainsFunc(after, func(n string) bool {
		return strings.HasPrefix(n, "Acme_Enterprise_Data_-") && strings.HasSuffix(n, "__test_simple_text")
	}) {
		t.Errorf("the newcomer has no hash-form name: %v", after)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: old})
	if err != nil || res.IsError {
		t.Fatalf("%s after the reload = %+v, %v", old, res, err)
	}
}
