package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/internal/testkit"
)

// serverPeers locates the peers the server-mode suite needs, skipping the
// test when one is missing (failing in CI): node, the conformance CLI
// (@modelcontextprotocol/conformance) and the go-sdk fixture
// everything-server.
type serverPeers struct {
	node       string   // node executable
	suite      []string // node arguments that run the conformance CLI
	everything string   // go-sdk conformance everything-server
	// selection are the suite's arguments choosing the scenarios (none:
	// the active ones); fixture are everything-server's flags besides
	// -http (nil: -stateless=false).
	selection, fixture []string
	// rules is the proxy's builtin:rules config (nil: none, allow all);
	// auth are its flags in place of --no-auth (nil: --no-auth).
	rules any
	auth  []string
}

func findServerPeers(t *testing.T) serverPeers {
	t.Helper()
	return serverPeers{
		node:       testkit.Node(t),
		suite:      testkit.ConformanceArgs(t),
		everything: testkit.Peer(t, testkit.GoEverythingServer),
	}
}

// serverCheck is one check of a scenario's checks.json, as the suite
// writes it.
type serverCheck struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Status       string `json:"status"` // SUCCESS, FAILURE, WARNING or INFO
	ErrorMessage string `json:"errorMessage"`
}

// serverResults maps "scenario/check-id" to the check.
type serverResults map[string]serverCheck

// scenarios returns the distinct scenario names, sorted.
func (r serverResults) scenarios() []string {
	var out []string
	for k := range r {
		s, _, _ := strings.Cut(k, "/")
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// keys returns every "scenario/check-id", sorted.
func (r serverResults) keys() []string {
	out := make([]string, 0, len(r))
	for k := range r {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// scenarioFailure describes the failed checks r has for the scenario of
// key ("scenario/check-id"), or says there are none.
func (r serverResults) scenarioFailure(key string) string {
	scenario, _, _ := strings.Cut(key, "/")
	var msgs []string
	for _, k := range r.keys() {
		if s, _, _ := strings.Cut(k, "/"); s == scenario && r[k].Status != "SUCCESS" {
			msgs = append(msgs, k+": "+r[k].Status+": "+r[k].ErrorMessage)
		}
	}
	if len(msgs) == 0 {
		return "no failed check in the scenario"
	}
	return strings.Join(msgs, "; ")
}

// serverResultDir matches the suite's per-scenario output folder,
// server-<scenario>-<ISO time with dashes>.
var serverResultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// parseServerResults reads every <dir>/server-<scenario>-<time>/checks.json.
func parseServerResults(dir string) (serverResults, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	res := serverResults{}
	for _, e := range entries {
		m := serverResultDir.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			return nil, err
		}
		var checks []serverCheck
		if err := json.Unmarshal(raw, &checks); err != nil {
			return nil, fmt.Errorf("%s/checks.json: %w", e.Name(), err)
		}
		for _, c := range checks {
			key := m[1] + "/" + c.ID
			// The 0.2 line reports some checks once per case, under one
			// id: the second is "id#2", and so on, in the suite's order.
			for n := 2; ; n++ {
				if _, dup := res[key]; !dup {
					break
				}
				key = fmt.Sprintf("%s/%s#%d", m[1], c.ID, n)
			}
			res[key] = c
		}
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no checks.json under %s", dir)
	}
	return res, nil
}

// runServerSuite runs the suite's active server scenarios against url
// (a streamable HTTP endpoint, path included) and returns its checks and
// its console output. The suite exits 1 when a check fails; only a run
// that leaves no results is an error.
func runServerSuite(ctx context.Context, t *testing.T, p serverPeers, url string) (serverResults, string) {
	t.Helper()
	out := t.TempDir()
	args := append(slices.Clone(p.suite), "server", "--url", url, "-o", out)
	args = append(args, p.selection...)
	cmd := exec.CommandContext(ctx, p.node, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("conformance suite: %v\n%s", err, buf.String())
	}
	res, perr := parseServerResults(out)
	if perr != nil {
		t.Fatalf("conformance suite against %s (%v): %v\n%s", url, err, perr, buf.String())
	}
	return res, buf.String()
}

// freeServerPort returns a loopback port that was free a moment ago (a
// server given it may find it taken: see errAddrInUse).
func freeServerPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// errAddrInUse marks a server that exited because its port was taken.
var errAddrInUse = errors.New("address already in use")

// startServerProcess starts cmd and waits until it listens: until listening,
// called with the process's output so far, returns the address it serves
// on. The process is killed and reaped at the end of the test. It fails the
// test with the process's output if the process exits first (an error
// wrapping errAddrInUse when its port was taken, so that the caller may
// pick another) or does not listen within a minute.
func startServerProcess(t *testing.T, cmd *exec.Cmd, listening func(out string) string) (string, *serverLog, error) {
	t.Helper()
	logs := &serverLog{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(time.Minute)
	for {
		if addr := listening(logs.String()); addr != "" {
			return addr, logs, nil
		}
		select {
		case err := <-exited:
			exited <- err
			if strings.Contains(logs.String(), errAddrInUse.Error()) {
				return "", logs, fmt.Errorf("%s exited before listening: %w\n%s", cmd.Path, errAddrInUse, logs.String())
			}
			t.Fatalf("%s exited before listening: %v\n%s", cmd.Path, err, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not listening after a minute\n%s", cmd.Path, logs.String())
		}
	}
}

// accepting is a listening func for startServerProcess: addr once it
// accepts TCP connections.
func accepting(addr string) func(string) string {
	return func(string) string {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return ""
		}
		c.Close()
		return addr
	}
}

// serverLog collects a process's output; safe for concurrent use.
type serverLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *serverLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *serverLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// serverTable renders checks as an aligned table: scenario, check, and
// one status column per run, with the first failure message of the last
// run that failed.
func serverTable(keys []string, cols []string, runs ...serverResults) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-68s", "scenario/check")
	for _, c := range cols {
		fmt.Fprintf(&b, " %-8s", c)
	}
	b.WriteString("\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%-68s", k)
		msg := ""
		for _, r := range runs {
			c, ok := r[k]
			st := "-"
			if ok {
				st = c.Status
				if c.Status != "SUCCESS" && c.ErrorMessage != "" {
					msg = c.ErrorMessage
				}
			}
			fmt.Fprintf(&b, " %-8s", st)
		}
		if msg != "" {
			if len(msg) > 120 {
				msg = msg[:120] + "…"
			}
			b.WriteString("  " + msg)
		}
		b.WriteString("\n")
	}
	return b.String()
}
