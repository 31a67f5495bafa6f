// Server mode (the package doc is client_test.go's): the suite acts as the
// MCP client of the go-sdk conformance fixture everything-server, once
// directly over streamable HTTP and once through `openclaw mcp proxy
// --listen`, which fronts the same fixture over stdio; every check that
// passes directly must pass through the proxy.

package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serverKnownFailures lists the checks ("scenario/check-id") that pass
// against the fixture directly but not yet through the proxy, each with
// the reason. The test fails when one of them starts passing, so that a
// fix also shrinks this list.
var serverKnownFailures = map[string]string{
	// Server-to-client requests and notifications sent by the fixture while
	// it runs a tool call (elicitation/create, sampling/createMessage,
	// notifications/message) are not yet relayed by the proxy to the
	// client whose call is in flight (issue 5, passthrough).
	"tools-call-elicitation/tools-call-elicitation":   "elicitation during a tool call not relayed",
	"tools-call-sampling/tools-call-sampling":         "sampling during a tool call not relayed",
	"tools-call-with-logging/tools-call-with-logging": "log notifications during a tool call not relayed",
	// Through the proxy these two scenarios end at their first step with
	// one check "elicitation-sep1034-general" / "elicitation-sep1330-general"
	// ("Server did not request elicitation from client"), so the
	// per-field checks of the direct run are not reported.
	"elicitation-sep1034-defaults/elicitation-sep1034-boolean-default": "elicitation not relayed",
	"elicitation-sep1034-defaults/elicitation-sep1034-enum-default":    "elicitation not relayed",
	"elicitation-sep1034-defaults/elicitation-sep1034-integer-default": "elicitation not relayed",
	"elicitation-sep1034-defaults/elicitation-sep1034-number-default":  "elicitation not relayed",
	"elicitation-sep1034-defaults/elicitation-sep1034-string-default":  "elicitation not relayed",
	"elicitation-sep1330-enums/elicitation-sep1330-legacy-enumnames":   "elicitation not relayed",
	"elicitation-sep1330-enums/elicitation-sep1330-titled-multi":       "elicitation not relayed",
	"elicitation-sep1330-enums/elicitation-sep1330-titled-single":      "elicitation not relayed",
	"elicitation-sep1330-enums/elicitation-sep1330-untitled-multi":     "elicitation not relayed",
	"elicitation-sep1330-enums/elicitation-sep1330-untitled-single":    "elicitation not relayed",
}

// TestServerConformance runs the suite's active server scenarios against
// the go-sdk everything-server directly and through `openclaw mcp proxy`
// (stdio to the fixture, streamable HTTP to the suite, tool names in the
// sanitizer's raw-name mode), prints both results side by side, and
// requires every check that passes directly to pass through the proxy.
func TestServerConformance(t *testing.T) {
	peers := findServerPeers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	direct := runDirect(ctx, t, peers)
	passed := 0
	for _, c := range direct {
		if c.Status == "SUCCESS" {
			passed++
		}
	}
	// The suite's active server scenarios are 30 with 40 checks, all of
	// which the fixture passes (mcp-peers.md §3); fewer means the suite or
	// the fixture changed under us.
	if n := len(direct.scenarios()); n < 30 || passed < 40 {
		t.Errorf("direct: %d scenarios, %d checks passed; want at least 30 and 40", n, passed)
	}

	proxied, ok := runProxied(ctx, t, peers)
	if !ok {
		t.Logf("direct run only:\n%s", serverTable(direct.keys(), []string{"direct"}, direct))
		return
	}
	t.Logf("conformance suite, server mode:\n%s", serverTable(direct.union(proxied), []string{"direct", "proxy"}, direct, proxied))
	var regressions, fixed []string
	for _, k := range direct.keys() {
		if direct[k].Status != "SUCCESS" {
			continue
		}
		got, ok := proxied[k]
		pass := ok && got.Status == "SUCCESS"
		why, known := serverKnownFailures[k]
		switch {
		case !pass && !known:
			msg := "not reported (" + proxied.scenarioFailure(k) + ")"
			if ok {
				msg = got.Status + ": " + got.ErrorMessage
			}
			regressions = append(regressions, fmt.Sprintf("%s: %s", k, msg))
		case pass && known:
			fixed = append(fixed, fmt.Sprintf("%s (was: %s)", k, why))
		}
	}
	for k := range serverKnownFailures {
		if c, ok := direct[k]; !ok || c.Status != "SUCCESS" {
			t.Errorf("known failure %s does not pass directly: remove it from serverKnownFailures", k)
		}
	}
	if len(regressions) > 0 {
		t.Errorf("%d checks pass directly but fail through the proxy:\n  %s", len(regressions), strings.Join(regressions, "\n  "))
	}
	if len(fixed) > 0 {
		t.Errorf("%d known failures now pass through the proxy: remove them from serverKnownFailures:\n  %s", len(fixed), strings.Join(fixed, "\n  "))
	}
}

// runDirect runs the suite against everything-server on streamable HTTP
// (stateful sessions, as the suite's SSE scenarios need).
func runDirect(ctx context.Context, t *testing.T, p serverPeers) serverResults {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freeServerPort(t))
	cmd := exec.CommandContext(ctx, p.everything, "-http", addr, "-stateless=false")
	logs := startServerProcess(t, cmd, addr)
	res, out := runServerSuite(ctx, t, p, "http://"+addr+"/mcp")
	if t.Failed() {
		t.Logf("suite output:\n%s\nfixture output:\n%s", out, logs.String())
	}
	return res
}

// runProxied builds openclaw, starts `openclaw mcp proxy --listen` in
// front of everything-server over stdio, and runs the suite against it.
// ok is false (and the reason logged) when this build has no --listen.
func runProxied(ctx context.Context, t *testing.T, p serverPeers) (res serverResults, ok bool) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "openclaw")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/openclaw-go/openclaw/cmd/openclaw").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	help, err := exec.CommandContext(ctx, bin, "mcp", "proxy", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("openclaw mcp proxy --help: %v\n%s", err, help)
	}
	if !strings.Contains(string(help), "--listen") {
		t.Log("openclaw mcp proxy has no --listen yet: the proxy half is not run")
		return nil, false
	}

	home := filepath.Join(dir, "home")
	writeServerJSON(t, filepath.Join(home, ".openclaw", "openclaw.json"), map[string]any{
		"mcp": map[string]any{"servers": map[string]any{
			"everything": map[string]any{"command": p.everything},
		}},
	})
	// Raw tool names: the suite calls test_simple_text, not
	// everything__test_simple_text (docs/tool-names.md §6).
	policy := filepath.Join(dir, "policy.json")
	writeServerJSON(t, policy, map[string]any{"modules": []any{
		map[string]any{"source": "builtin:sanitizer", "config": map[string]any{"prefix": "auto"}},
		map[string]any{"source": "builtin:rules"},
	}})
	addr := fmt.Sprintf("127.0.0.1:%d", freeServerPort(t))
	// The suite sends no Authorization header: on loopback, --no-auth is
	// the documented way to serve it.
	cmd := exec.CommandContext(ctx, bin, "mcp", "proxy", "--listen", addr, "--no-auth",
		"--policy-config", policy, "--audit-log", filepath.Join(dir, "audit.jsonl"))
	cmd.Env = append(os.Environ(), "OPENCLAW_HOME="+home, "OPENCLAW_CONFIG_PATH=",
		"OPENCLAW_STATE_DIR="+filepath.Join(dir, "state"))
	logs := startServerProcess(t, cmd, addr)
	res, out := runServerSuite(ctx, t, p, "http://"+addr+"/mcp")
	if t.Failed() || testing.Verbose() {
		t.Logf("suite output (proxy):\n%s\nproxy output:\n%s", out, logs.String())
	}
	return res, true
}

func writeServerJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}
