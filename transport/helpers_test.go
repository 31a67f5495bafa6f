//go:build linux

package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/procfs"
	"github.com/openclaw-go/openclaw/internal/testkit"
)

// misbehaveBin is the testdata/misbehave server, built once by TestMain.
var misbehaveBin string

const helperEnv = "TRANSPORT_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "sigkill" {
		os.Exit(runSIGKILLHelper())
	}
	dir, err := os.MkdirTemp("", "transport-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	misbehaveBin = filepath.Join(dir, "misbehave")
	build := exec.Command("go", "build", "-o", misbehaveBin, "./testdata/misbehave")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building testdata/misbehave:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// logBuffer collects JSON log records.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) records() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newLogger() (*slog.Logger, *logBuffer) {
	lb := &logBuffer{}
	return slog.New(slog.NewJSONHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

func resolve(t *testing.T, name string, e config.ServerEntry, o *Options) *Resolved {
	t.Helper()
	r, err := Resolve(name, e, o)
	if err != nil {
		t.Fatalf("Resolve(%q): %v", name, err)
	}
	return r
}

func connect(t *testing.T, tr mcp.Transport, version string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "transport-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callText(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang guard: a 9 MiB echo under -race on a loaded machine took over 60 s once
	defer cancel()
	if args == nil {
		args = map[string]any{}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", tool, err)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("CallTool(%s): error result %+v", tool, res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("CallTool(%s): content %T", tool, res.Content[0])
	}
	return tc.Text
}

// waitGone waits until none of pids is alive, or fails naming the survivors.
// The wait is generous: it is a bound for a hung test, not a timing check.
func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var left []int
		for _, p := range pids {
			if procfs.Alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range left {
				_ = syscallKill(p)
			}
			t.Fatalf("processes still alive: %v (of %v)", left, pids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// peers returns the directory of the installed MCP peers, or skips.
func peers(t *testing.T) string {
	t.Helper()
	testkit.Peer(t, testkit.ServerEverything)
	testkit.Node(t)
	return testkit.PeersDir()
}

func peerScript(dir, pkg string) string {
	return filepath.Join(dir, "npm/node_modules/@modelcontextprotocol", pkg, "dist/index.js")
}

func syscallKill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// quiet returns Options whose log goes to a buffer, not the test output.
func quiet() *Options {
	log, _ := newLogger()
	return &Options{Logger: log}
}
