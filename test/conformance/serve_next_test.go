// Server mode on MCP 2026-07-28 against `openclaw mcp serve` (a stdio
// server bridging to an OpenClaw Gateway, here gatewaytest's seeded one):
// the suite's HTTP client reaches serve's stdin and stdout through
// stdioOverHTTP, which adds no MCP of its own.

package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/gateway/gatewaytest"
	"github.com/openclaw-go/openclaw/internal/testkit"
)

// stdioOverHTTP serves a stdio MCP server's JSON-RPC over HTTP POSTs, as
// the suite sends them on 2026-07-28: a request's line goes to stdin (its
// id replaced by one of the adapter's own, as several clients of the suite
// may use the same), and the line that answers it comes back as the
// response body, application/json; a notification is answered 202. It
// checks no header: what a stdio server answers is what the suite sees.
type stdioOverHTTP struct {
	stdin io.Writer

	mu      sync.Mutex
	next    int64
	pending map[string]chan json.RawMessage // by the adapter's id
}

// newStdioOverHTTP reads stdout, the server's, until it ends.
func newStdioOverHTTP(stdin io.Writer, stdout io.Reader) *stdioOverHTTP {
	a := &stdioOverHTTP{stdin: stdin, pending: map[string]chan json.RawMessage{}}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var msg struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(sc.Bytes(), &msg) != nil || len(msg.ID) == 0 {
				continue // a notification: the suite's HTTP client has no stream for it here
			}
			a.mu.Lock()
			ch := a.pending[string(msg.ID)]
			delete(a.pending, string(msg.ID))
			a.mu.Unlock()
			if ch != nil {
				ch <- append(json.RawMessage(nil), sc.Bytes()...)
			}
		}
	}()
	return a
}

func (a *stdioOverHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	var msg map[string]json.RawMessage
	if err == nil {
		err = json.Unmarshal(body, &msg)
	}
	if err != nil {
		http.Error(w, "not one JSON-RPC message: "+fmt.Sprint(err), http.StatusBadRequest)
		return
	}
	clientID, isRequest := msg["id"]
	var answer chan json.RawMessage
	if isRequest {
		answer = make(chan json.RawMessage, 1)
		a.mu.Lock()
		a.next++
		id := fmt.Sprintf("%d", a.next)
		a.pending[id] = answer
		a.mu.Unlock()
		msg["id"] = json.RawMessage(id)
	}
	line, _ := json.Marshal(msg)
	a.mu.Lock()
	_, err = a.stdin.Write(append(line, '\n'))
	a.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if !isRequest {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	select {
	case raw := <-answer:
		var resp map[string]json.RawMessage
		_ = json.Unmarshal(raw, &resp)
		resp["id"] = clientID
		out, _ := json.Marshal(resp)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	case <-r.Context().Done():
	}
}

// serveNextScenarios are the 2026-07-28 scenarios that apply to `mcp
// serve`: a stdio server (no HTTP headers, sessions or streams of its own)
// with OpenClaw's conversation tools and no resources, prompts,
// completions or tasks, and no tool that asks the client for input. The
// others call the go-sdk fixture's tools (test_simple_text, ...), or test
// the streamable HTTP transport; serveNotApplicable lists the checks of
// these that do.
var serveNextScenarios = []string{"server-stateless", "tools-list", "caching", "input-required-result-unsupported-methods"}

// serveNotApplicable are the checks of serveNextScenarios that test what
// `mcp serve` does not have, and why: the streamable HTTP transport (HTTP
// status codes, headers, the subscriptions/listen stream; over stdio a
// request's revision is in its _meta or the session's, so a request with
// neither is one before initialize, -32601), the go-sdk fixture's
// diagnostic tool, and prompts and resources.
var serveNotApplicable = map[string]string{
	"caching/sep-2549-prompts-list-caching-hints":                                      "no prompts",
	"caching/sep-2549-resources-list-caching-hints":                                    "no resources",
	"caching/sep-2549-resources-templates-list-caching-hints":                          "no resources",
	"server-stateless/sep-2575-http-server-header-mismatch-400":                        "HTTP headers",
	"server-stateless/sep-2575-http-server-meta-invalid-400":                           "HTTP status",
	"server-stateless/sep-2575-http-server-meta-invalid-400#2":                         "HTTP status",
	"server-stateless/sep-2575-http-server-meta-invalid-400#3":                         "HTTP status",
	"server-stateless/sep-2575-http-server-method-not-found-404":                       "HTTP status",
	"server-stateless/sep-2575-http-server-method-not-found-404-initialize":            "HTTP status",
	"server-stateless/sep-2575-http-server-method-not-found-404-logging-setlevel":      "HTTP status",
	"server-stateless/sep-2575-http-server-method-not-found-404-ping":                  "HTTP status",
	"server-stateless/sep-2575-http-server-method-not-found-404-resources-subscribe":   "HTTP status",
	"server-stateless/sep-2575-http-server-method-not-found-404-resources-unsubscribe": "HTTP status",
	"server-stateless/sep-2575-http-server-unsupported-version-400":                    "HTTP status",
	"server-stateless/sep-2575-missing-capability-http-400":                            "the fixture's test_missing_capability tool",
	"server-stateless/sep-2575-server-rejects-undeclared-capability":                   "the fixture's test_missing_capability tool",
	"server-stateless/sep-2575-request-meta-invalid-missing-meta":                      "the MCP-Protocol-Version header (stdio: a request before initialize)",
	"server-stateless/sep-2575-request-meta-invalid-missing-protocol-version":          "the MCP-Protocol-Version header (stdio: a request before initialize)",
	"server-stateless/sep-2575-server-sends-subscription-ack":                          "the subscriptions/listen stream",
	"server-stateless/sep-2575-server-sends-tools-list-changed-on-subscription":        "the subscriptions/listen stream",
	"server-stateless/sep-2575-server-tags-subscription-id":                            "the subscriptions/listen stream",
}

// startServeOverHTTP starts `openclaw mcp serve` (bin) against gw and
// serves its stdio over HTTP (stdioOverHTTP); both end with the test.
func startServeOverHTTP(ctx context.Context, t *testing.T, bin string, gw *gatewaytest.Gateway) (url string, logs *serverLog) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, "mcp", "serve", "--url", gw.URL, "--token", gw.Token, "--audit-log", "-")
	cmd.Env = append(os.Environ(), "HOME="+dir, "OPENCLAW_HOME="+dir, "OPENCLAW_STATE_DIR="+filepath.Join(dir, "state"),
		"OPENCLAW_CONFIG_PATH="+filepath.Join(dir, "openclaw.json"))
	logs = &serverLog{}
	cmd.Stderr = logs
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newStdioOverHTTP(stdin, stdout))
	t.Cleanup(func() {
		srv.Close()
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return srv.URL + "/mcp", logs
}

// TestServeConformanceNext runs serveNextScenarios (suite 0.2.0-alpha.12,
// 2026-07-28) against `openclaw mcp serve` with a seeded Gateway, one
// serve process per scenario (a stdio server is one client's), and
// requires every check to pass but those of serveNotApplicable.
func TestServeConformanceNext(t *testing.T) {
	peers := findServerPeers(t)
	peers.suite = testkit.ConformanceNextArgs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, _ := buildServerProxy(ctx, t)
	gw := gatewaytest.StartSeeded(t)
	all := serverResults{}
	var logs strings.Builder
	for _, scenario := range serveNextScenarios {
		url, log := startServeOverHTTP(ctx, t, bin, gw)
		peers.selection = []string{"--scenario", scenario, "--spec-version", "2026-07-28"}
		res, out := runServerSuite(ctx, t, peers, url)
		if len(res) == 0 {
			t.Errorf("%s: no checks reported:\n%s", scenario, out)
		}
		for k, v := range res {
			all[k] = v
		}
		fmt.Fprintf(&logs, "== %s\n%s", scenario, log.String())
	}
	for k := range serveNotApplicable {
		if _, ok := all[k]; !ok {
			t.Errorf("serveNotApplicable names %s, which the suite did not report: remove it", k)
		}
	}
	var failed []string
	passed := 0
	for _, k := range all.keys() {
		st := all[k].Status
		switch {
		case serveNotApplicable[k] != "":
		case st == "SUCCESS":
			passed++
		case st != "INFO" && st != "SKIPPED":
			failed = append(failed, k+": "+st+": "+all[k].ErrorMessage)
		}
	}
	// 21 checks apply and pass (docs/conformance.md); fewer means the suite
	// changed under us.
	if passed < 21 {
		t.Errorf("%d checks pass against mcp serve, want at least 21", passed)
	}
	if len(failed) > 0 {
		t.Errorf("%d checks fail against mcp serve:\n  %s\nserve's logs:\n%s", len(failed), strings.Join(failed, "\n  "), logs.String())
	}
	t.Logf("conformance suite %s, server mode, 2026-07-28 scenarios %v against openclaw mcp serve:\n%s",
		testkit.ConformanceNext, serveNextScenarios, serverTable(all.keys(), []string{"serve"}, all))
}
