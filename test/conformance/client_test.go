package conformance

// Client mode (this file): the suite acts as the MCP server (and OAuth
// authorization server) for openclaw-go's client, the program in ./client,
// built on the embedded runtime and the transport package (streamable HTTP
// and OAuth). The tests skip when the suite or node is missing; results are
// recorded in docs/conformance.md.

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/internal/testkit"
)

// scenarioResult is one `✓ name: N passed, M failed[, W warnings]` line of
// the summary.
type scenarioResult struct {
	ok                       bool
	passed, failed, warnings int
}

var summaryLine = regexp.MustCompile(`^([✓✗])\s+(\S+):\s+(\d+) passed, (\d+) failed(?:, (\d+) warnings?)?`)

// parseSummary reads the per-scenario lines after "=== SUITE SUMMARY ===".
func parseSummary(out string) map[string]scenarioResult {
	res := map[string]scenarioResult{}
	in := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.Contains(line, "SUMMARY ===") {
			in = true
			continue
		}
		if !in {
			continue
		}
		if m := summaryLine.FindStringSubmatch(line); m != nil {
			p, _ := strconv.Atoi(m[3])
			f, _ := strconv.Atoi(m[4])
			w, _ := strconv.Atoi(m[5])
			res[m[2]] = scenarioResult{ok: m[1] == "✓", passed: p, failed: f, warnings: w}
		}
	}
	return res
}

// buildClient builds ./client into a temporary folder.
func buildClient(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "conformance-client")
	cmd := exec.Command("go", "build", "-o", bin, "./client")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./client: %v\n%s", err, out)
	}
	return bin
}

// runSuite runs the suite in client mode and returns its output and the
// folder holding each scenario's checks.json.
func runSuite(t *testing.T, node []string, bin string, extra ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	args := append(append([]string(nil), node...), "client", "--command", bin, "-o", dir)
	args = append(args, extra...)
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	out, err := cmd.CombinedOutput()
	// The exit status is not the verdict: the suite also exits 1 for a
	// warning, and its only client warning is a timing one (sse-retry
	// reconnecting more than 200 ms late), which a loaded machine
	// produces. The per-scenario failure counts are the verdict.
	if err != nil && ctx.Err() != nil {
		t.Fatalf("conformance suite: %v\n%s", ctx.Err(), out)
	}
	return string(out), dir
}

// lateReconnects returns the failed checks of scenario, saved under dir by
// the suite, that only say the client reconnected late: sse-retry fails
// its timing check when the reconnection comes over twice the server's
// retry delay, which a loaded machine causes. Reconnecting early (not
// waiting for the retry delay) is a real failure and is not returned.
func lateReconnects(t *testing.T, dir, scenario string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, scenario+"-*", "checks.json"))
	if len(files) != 1 {
		t.Logf("%s: %d checks.json files under %s, want 1", scenario, len(files), dir)
		return nil
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Logf("%s: %v", scenario, err)
		return nil
	}
	var checks []struct {
		ID, Status, ErrorMessage string
		Details                  struct{ TooEarly, VeryLate bool }
	}
	if err := json.Unmarshal(raw, &checks); err != nil {
		t.Logf("%s: checks.json: %v", scenario, err)
		return nil
	}
	var late []string
	for _, c := range checks {
		if c.Status == "FAILURE" && c.ID == "client-sse-retry-timing" && c.Details.VeryLate && !c.Details.TooEarly {
			late = append(late, c.ErrorMessage)
		}
	}
	return late
}

// coreScenarios are the scenarios of `--suite core` in conformance 0.1.16
// besides the auth ones.
var coreScenarios = []string{"initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"}

// authScenarios are the scenarios of `--suite auth` in conformance 0.1.16.
var authScenarios = []string{
	"auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
	"auth/basic-cimd", "auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported",
	"auth/scope-omitted-when-undefined", "auth/scope-step-up", "auth/scope-retry-limit",
	"auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
	"auth/pre-registration",
}

// moreScenarios are the other scenarios of `--suite all` that pass.
var moreScenarios = []string{
	"auth/2025-03-26-oauth-endpoint-fallback", "auth/resource-mismatch",
	"auth/offline-access-scope", "auth/offline-access-not-supported",
}

// knownClientFailures are the scenarios of `--suite all` the client does
// not pass, with the reason (docs/conformance.md). The test fails when one
// of them starts passing, so that the list shrinks with the fix.
var knownClientFailures = map[string]string{
	"auth/2025-03-26-oauth-metadata-backcompat": "go-sdk v1.8.0 rejects the metadata's issuer (…/oauth) against the server root; go-sdk's everything-client fails it too",
	"auth/client-credentials-jwt":               "client credentials grant (extension): not in go-sdk's auth package",
	"auth/client-credentials-basic":             "client credentials grant (extension): not in go-sdk's auth package",
	"auth/cross-app-access-complete-flow":       "cross-app access (extension): not in go-sdk's auth package",
}

// TestClientConformance runs `--suite core`, `--suite auth` and `--suite
// all` one after the other (in parallel they load the machine enough to
// make sse-retry's timing check warn) and requires every scenario to run
// with no failed check, except the known failures, which must still fail.
func TestClientConformance(t *testing.T) {
	t.Parallel()
	node := testkit.ConformanceArgs(t)
	bin := buildClient(t)
	core := append(slices.Clone(coreScenarios), authScenarios...)
	for _, tc := range []struct {
		suite string
		want  []string // every scenario that must run and pass
		known bool     // the known failures run too
	}{
		{suite: "core", want: core},
		{suite: "auth", want: authScenarios},
		{suite: "all", want: append(slices.Clone(core), moreScenarios...), known: true},
	} {
		t.Run(tc.suite, func(t *testing.T) {
			out, dir := runSuite(t, node, bin, "--suite", tc.suite)
			res := parseSummary(out)
			for _, s := range tc.want {
				r, ok := res[s]
				var late []string
				if ok && r.failed > 0 {
					late = lateReconnects(t, dir, s)
				}
				switch {
				case !ok:
					t.Errorf("scenario %s did not run", s)
				case r.failed > 0 && r.failed == len(late) && r.passed > 0:
					t.Logf("scenario %s: %d passed, %d failed on timing only (a loaded machine): %s", s, r.passed, r.failed, strings.Join(late, "; "))
				case r.failed > 0 || r.passed == 0:
					t.Errorf("scenario %s: %d passed, %d failed", s, r.passed, r.failed)
				case r.warnings > 0:
					t.Logf("scenario %s: %d passed, %d warnings (timing on a loaded machine)", s, r.passed, r.warnings)
				}
			}
			for s, r := range res {
				why, known := knownClientFailures[s]
				switch {
				case known && r.failed == 0:
					t.Errorf("scenario %s passes now (%d checks): remove it from knownClientFailures (%s) and docs/conformance.md", s, r.passed, why)
				case !known && !slices.Contains(tc.want, s):
					t.Errorf("unexpected scenario %s (%d passed, %d failed): the suite changed; update this test", s, r.passed, r.failed)
				}
			}
			if tc.known {
				for s := range knownClientFailures {
					if _, ok := res[s]; !ok {
						t.Errorf("known failure %s did not run", s)
					}
				}
			}
			passed, failed := 0, 0
			for _, r := range res {
				passed += r.passed
				failed += r.failed
			}
			t.Logf("--suite %s: %d scenarios, %d checks passed, %d failed", tc.suite, len(res), passed, failed)
			if t.Failed() {
				t.Logf("suite output:\n%s", out)
			}
		})
	}
}

func TestParseSummary(t *testing.T) {
	t.Parallel()
	out := "noise\n✓ tools_call: 9 passed, 0 failed\n=== SUITE SUMMARY ===\n\n✓ initialize: 1 passed, 0 failed\n✗ auth/x: 2 passed, 3 failed\n✗ sse-retry: 2 passed, 0 failed, 1 warnings\n\nTotal: 3 passed, 3 failed\n"
	got := parseSummary(out)
	want := map[string]scenarioResult{"initialize": {true, 1, 0, 0}, "auth/x": {false, 2, 3, 0}, "sse-retry": {false, 2, 0, 1}}
	if len(got) != len(want) {
		t.Fatalf("parseSummary = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("parseSummary[%s] = %+v, want %+v", k, got[k], v)
		}
	}
}

// TestLateReconnects: only a late reconnection is excused as timing; an
// early one, or any other failed check, is not.
func TestLateReconnects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, checks string
		want         int
	}{
		{"very late", `[{"id":"client-sse-retry-timing","status":"FAILURE","errorMessage":"Client reconnected very late (1200ms instead of 500ms).","details":{"tooEarly":false,"veryLate":true}}]`, 1},
		{"too early", `[{"id":"client-sse-retry-timing","status":"FAILURE","errorMessage":"Client reconnected too early (10ms instead of 500ms).","details":{"tooEarly":true,"veryLate":false}}]`, 0},
		{"no reconnection", `[{"id":"client-sse-graceful-reconnect","status":"FAILURE","details":{}}]`, 0},
		{"passed", `[{"id":"client-sse-retry-timing","status":"SUCCESS","details":{"veryLate":false}}]`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			run := filepath.Join(dir, "sse-retry-2026-11-30T01-34-47-997Z")
			if err := os.Mkdir(run, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(run, "checks.json"), []byte(tc.checks), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := lateReconnects(t, dir, "sse-retry"); len(got) != tc.want {
				t.Errorf("lateReconnects = %q, want %d", got, tc.want)
			}
		})
	}
}
