//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/transport"
)

// TestConfineStdio runs a hostile stdio server (testdata/filepeek) that
// appends to the policy file and reads ~/.openclaw/openclaw.json, an OAuth
// token of the state folder, the policy file and a file named by
// --confine-protect. Confined (--confine-stdio on `mcp tools`, or
// OPENCLAW_GO_CONFINE_STDIO=1 on `mcp probe`) it gets permission denied
// for each; unconfined (the control) it reaches them all.
func TestConfineStdio(t *testing.T) {
	if err := transport.ConfinementAvailable(); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	dir := t.TempDir()
	bin := testBinary(t)
	peek := filepath.Join(dir, "filepeek")
	if out, err := exec.Command("go", "build", "-o", peek, "./testdata/filepeek").CombinedOutput(); err != nil {
		t.Fatalf("go build filepeek: %v\n%s", err, out)
	}
	home := filepath.Join(dir, "home")
	cfg := filepath.Join(home, ".openclaw", "openclaw.json")
	oauth := filepath.Join(home, ".openclaw", "state", "mcp-oauth", "github.json")
	policy := filepath.Join(dir, "policies", "policy.json")
	extra := filepath.Join(dir, "secrets", "api.key")
	pinsFile := filepath.Join(dir, "pins", "tool-pins.json")
	if err := os.MkdirAll(filepath.Dir(pinsFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := config.SaveToolPins(pinsFile, &config.ToolPins{Servers: map[string]map[string]config.ToolPin{}}); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.json")
	writeJSON(t, cfg, map[string]any{"mcp": map[string]any{"servers": map[string]any{
		"peek": map[string]any{"command": peek, "args": []string{report, policy, cfg, oauth, policy, extra, pinsFile}},
	}}})
	writeJSON(t, oauth, map[string]any{"access_token": "oauth-secret"})
	writeJSON(t, policy, map[string]any{"modules": []any{map[string]any{"source": "builtin:rules"}}})
	writeJSON(t, extra, "api-secret")

	run := func(env []string, args ...string) map[string]string {
		t.Helper()
		if err := os.WriteFile(report, nil, 0o600); err != nil { // the server may write it, not create it
			t.Fatal(err)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "OPENCLAW_HOME=" + home}, env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("openclaw %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		var got map[string]string
		if err := json.Unmarshal(mustRead(t, report), &got); err != nil {
			t.Fatalf("filepeek report: %v\nopenclaw output:\n%s", err, out)
		}
		return got
	}
	denied := func(name string, got map[string]string, keys ...string) {
		t.Helper()
		for _, k := range keys {
			if !strings.Contains(got[k], "permission denied") {
				t.Errorf("%s: %s: %q, want permission denied", name, k, got[k])
			}
		}
	}
	before := string(mustRead(t, policy))

	got := run(nil, "mcp", "tools", "--confine-stdio", "--policy-config", policy, "--confine-protect", extra, "--tool-pins", pinsFile)
	denied("mcp tools --confine-stdio", got, "write "+policy, "read "+cfg, "read "+oauth, "read "+policy, "read "+extra, "read "+pinsFile)
	if after := string(mustRead(t, policy)); after != before {
		t.Errorf("a confined server rewrote the policy file: %q", after)
	}

	got = run([]string{"OPENCLAW_GO_CONFINE_STDIO=1", "OPENCLAW_GO_CONFINE_PROTECT=" + filepath.Dir(extra)}, "mcp", "probe", "peek")
	denied("OPENCLAW_GO_CONFINE_STDIO=1 mcp probe", got, "read "+cfg, "read "+oauth, "read "+extra)

	for k, v := range run(nil, "mcp", "tools", "--policy-config", policy) {
		if v != "ok" {
			t.Errorf("control, unconfined: %s: %q, want ok", k, v)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A value of OPENCLAW_GO_CONFINE_STDIO that is not a boolean is an error
// naming it, and --confine-protect alone is refused: neither starts a
// server unconfined.
func TestConfineStdioBadInput(t *testing.T) {
	t.Setenv(confineStdioEnv, "maybe")
	var f confineFlags
	if _, err := f.confinement(policyFlags{}); err == nil || !strings.Contains(err.Error(), `OPENCLAW_GO_CONFINE_STDIO="maybe"`) {
		t.Errorf("OPENCLAW_GO_CONFINE_STDIO=maybe: %v, want an error naming it", err)
	}
	t.Setenv(confineStdioEnv, "0")
	f.protect = []string{"/x"}
	if _, err := f.confinement(policyFlags{}); err == nil || !strings.Contains(err.Error(), "--confine-protect needs --confine-stdio") {
		t.Errorf("--confine-protect alone: %v", err)
	}
}
