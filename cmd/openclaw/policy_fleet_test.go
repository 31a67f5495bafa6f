package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/e2e"
	"github.com/openclaw-go/openclaw/internal/testkit"
)

// TestPolicyBundleFleet: two `mcp serve` (one given the bundle by flags,
// one by its policy file) and one `mcp proxy` follow a tag; after a push
// each is told to poll now (SIGHUP) and decides with the new set; a
// bundle whose case fails is refused by each, which keeps deciding with
// the set it had, and the proxy's /metrics counts the refusal.
func TestPolicyBundleFleet(t *testing.T) {
	server := testkit.Peer(t, testkit.GoEverythingServer)
	reg := testkit.StartRegistry(t)
	priv, pub := writeKeyPair(t, t.TempDir(), nil)
	tag := "oci://" + reg.Host + "/team/fleet:live"
	push := func(reason, expect, seq string) time.Time {
		dir := writeToolBundle(t, t.TempDir(), "*", reason, expect)
		start := time.Now()
		out, code, err := runPolicyCLI(t, "policy", "push", dir, tag)
		if code != 0 {
			t.Fatalf("push: %v\n%s", err, out)
		}
		if out, code, err := runPolicyCLI(t, "policy", "sign", digestRef.FindString(out), "--key", priv, "--sequence", seq); code != 0 {
			t.Fatalf("sign: %v\n%s", err, out)
		}
		return start
	}
	push("v1", "v1", "1")

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	gw, _ := silentGateway(t)
	s1 := startServeChild(t, ctx, "--url", gw, "--policy-bundle", tag, "--policy-key", pub, "--policy-poll", "0")
	pf := filepath.Join(t.TempDir(), "policy.json")
	writeJSON(t, pf, map[string]any{"bundle": map[string]any{"ref": tag, "keys": []string{pub}, "poll_interval_s": -1}})
	s2 := startServeChild(t, ctx, "--url", gw, "--policy-config", pf)
	s1.initialize(t, ctx)
	s2.initialize(t, ctx)

	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	writeJSON(t, filepath.Join(home, ".openclaw", "openclaw.json"), map[string]any{"mcp": map[string]any{"servers": map[string]any{"one": map[string]any{"command": server}}}})
	cmd := exec.Command(testBinary(t), "mcp", "proxy", "--connect-wait", "0", "--metrics-listen", "127.0.0.1:0", "--no-auth",
		"--policy-bundle", tag, "--policy-key", pub, "--policy-poll", "0", "--audit-log", filepath.Join(dir, "audit.jsonl"))
	cmd.Env = append(os.Environ(), "OPENCLAW_HOME="+home, "OPENCLAW_STATE_DIR="+filepath.Join(dir, "state"))
	pstderr := &e2e.LockedBuffer{}
	cmd.Stderr = pstderr
	pc := startStdioProxy(ctx, t, cmd, "fleet")

	id := 10
	serveDecides := func(c *serveChild) string {
		id++
		c.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"events_poll","arguments":{}}}`, id))
		text, _ := resultText(c.answer(t, ctx, float64(id)))
		return text
	}
	proxyDecides := func() string {
		res, err := pc.cs.CallTool(ctx, &mcp.CallToolParams{Name: "one__test_simple_text"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Content) == 0 {
			return ""
		}
		text, _ := res.Content[0].(*mcp.TextContent)
		if text == nil {
			return ""
		}
		return text.Text
	}
	type member struct {
		name    string
		pid     int
		stderr  func() string
		decides func() string
	}
	fleet := []member{
		{"serve (flags)", s1.cmd.Process.Pid, s1.stderr.String, func() string { return serveDecides(s1) }},
		{"serve (policy file)", s2.cmd.Process.Pid, s2.stderr.String, func() string { return serveDecides(s2) }},
		{"proxy", cmd.Process.Pid, pstderr.String, proxyDecides},
	}
	for _, m := range fleet {
		if got := m.decides(); !strings.Contains(got, "v1") {
			t.Fatalf("%s at start decides %q, want v1\n%s", m.name, got, m.stderr())
		}
	}
	// waitFor waits until every member's stderr has n lines matching re.
	waitFor := func(re *regexp.Regexp, n int) {
		for _, m := range fleet {
			for len(re.FindAllString(m.stderr(), -1)) < n {
				select {
				case <-ctx.Done():
					t.Fatalf("%s: no %q on stderr:\n%s", m.name, re, m.stderr())
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
	}
	pollNow := func(skip int) {
		for i, m := range fleet {
			if i == skip {
				continue
			}
			if err := syscall.Kill(m.pid, syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
		}
	}

	start := push("v2", "v2", "2")
	pollNow(-1)
	waitFor(regexp.MustCompile(`policy bundle swapped: `), 1)
	for _, m := range fleet {
		if got := m.decides(); !strings.Contains(got, "v2") {
			t.Errorf("%s after the swap decides %q, want v2\n%s", m.name, got, m.stderr())
		}
	}
	t.Logf("swap latency, push to every member deciding with v2 (SIGHUP instead of the poll interval): %v", time.Since(start))

	push("v3", "not v3", "3")
	// The first member is told by `openclaw policy reload`, which reports
	// its refusal.
	pollNow(0)
	t.Setenv("OPENCLAW_STATE_DIR", s1.state)
	out, code, _ := runPolicyCLI(t, "policy", "reload", "--wait", "60s")
	if code != 1 || !strings.Contains(out, "reload refused") || !strings.Contains(out, "(test_failed)") {
		t.Errorf("policy reload of a member refusing the bundle: exit %d\n%s", code, out)
	}
	waitFor(regexp.MustCompile(`REFUSED \(test_failed\)`), 1)
	for _, m := range fleet {
		if got := m.decides(); !strings.Contains(got, "v2") {
			t.Errorf("%s after the refusal decides %q, want v2 (the old set)", m.name, got)
		}
	}
	metricsLine := regexp.MustCompile(`metrics on (http://[^ ]+)/metrics`)
	m := metricsLine.FindStringSubmatch(pstderr.String())
	if m == nil {
		t.Fatalf("no metrics address:\n%s", pstderr.String())
	}
	body := httpGet(t, m[1]+"/metrics")
	if !strings.Contains(body, `openclaw_policy_bundle_updates_total{outcome="refused",reason="test_failed"} 1`) ||
		!strings.Contains(body, `openclaw_policy_bundle_updates_total{outcome="swapped",reason=""} 1`) {
		t.Errorf("/metrics:\n%s", grepLines(body, "bundle"))
	}
}

func grepLines(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// TestMCPCallPolicyBundle: `mcp call --policy-bundle` decides with the
// bundle the tag names; run again with the registry down, it decides with
// the cached verified bundle, and a cache that fails verification
// refuses the call.
func TestMCPCallPolicyBundle(t *testing.T) {
	reg := testkit.StartRegistry(t)
	priv, pub := writeKeyPair(t, t.TempDir(), nil)
	tag := "oci://" + reg.Host + "/team/call:live"
	dir := writeToolBundle(t, t.TempDir(), "*", "bundle says no", "bundle says no")
	out, code, err := runPolicyCLI(t, "policy", "push", dir, tag)
	if code != 0 {
		t.Fatalf("push: %v\n%s", err, out)
	}
	if out, code, err := runPolicyCLI(t, "policy", "sign", digestRef.FindString(out), "--key", priv); code != 0 {
		t.Fatalf("sign: %v\n%s", err, out)
	}
	cli := newRuntimeCLI(t)
	r := cli.newHome(t, map[string]any{"tiny": map[string]any{"command": cli.tiny}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	call := func(extra ...string) (string, string) {
		cmd, stdout, stderr := r.start(t, ctx, append([]string{"mcp", "call", "tiny__echo", "--args", `{"message":"hi"}`, "--audit-log", os.DevNull,
			"--policy-bundle", tag, "--policy-key", pub}, extra...)...)
		_ = cmd.Wait()
		return stdout.String(), stderr.String()
	}
	// HTTPS asked of the loopback registry, which speaks HTTP: no bundle,
	// none cached, no call.
	if stdout, stderr := call("--policy-plain-http=false"); strings.Contains(stdout, "tiny says hi") || !strings.Contains(stderr, "HTTP response to HTTPS client") {
		t.Fatalf("--policy-plain-http=false: stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	if stdout, stderr := call(); !strings.Contains(stdout+stderr, "bundle says no") || strings.Contains(stdout, "tiny says hi") {
		t.Fatalf("with the registry up: stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	reg.Stop()
	if stdout, stderr := call(); !strings.Contains(stdout+stderr, "bundle says no") || !strings.Contains(stderr, "running the cached verified bundle") {
		t.Fatalf("with the registry down: stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	// Tamper with the cached policy file: the next start refuses.
	pfs, _ := filepath.Glob(filepath.Join(r.home, ".openclaw", "state", "openclaw-go", "policy-bundles", "*", "team", "call", "sha256-*", "files", "policy.json"))
	if len(pfs) != 1 {
		t.Fatalf("cached policy files: %v", pfs)
	}
	data, _ := os.ReadFile(pfs[0])
	if err := os.WriteFile(pfs[0], []byte(strings.Replace(string(data), `"block"`, `"allow"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr := call(); strings.Contains(stdout, "tiny says hi") || !strings.Contains(stderr, "digest mismatch") {
		t.Fatalf("with a tampered cache: stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}
