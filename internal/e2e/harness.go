// Package e2e drives an `openclaw mcp serve` process (ours, or the real
// OpenClaw 2026.9.6 one) the way users do: it starts a local Gateway
// (`openclaw gateway run`) and injects traffic through its CLI, spawns a
// server under the go-sdk MCP client ([Serve]) or a raw JSON-RPC client
// ([RawClient]), records every line exchanged, and reports how the server
// ends. The end-to-end tests (test/e2e, cmd/openclaw), the demo
// (examples/demo) and the interop tool against the real OpenClaw
// (internal/e2e/ocinterop, run by bench/interop.sh) share it; nothing in the
// product imports it.
//
// A [Serve] is one child process in its own process group, spoken to over
// stdio (protocol 2025-06-18 by default, what the real OpenClaw answers;
// [Gateway.StartServe] negotiates the newest). Every line is also kept raw
// in [Serve.Raw], so that results can be compared byte for byte and
// notifications the go-sdk client ignores (notifications/claude/channel)
// can be seen:
//
//	s, err := e2e.StartServe(ctx, e2e.ServeOptions{
//		Command: []string{"bin/openclaw", "mcp", "serve", "--url", url, "--token-file", f},
//	})
//	if err != nil { … }
//	defer s.Kill()
//	res, err := s.Call(ctx, "conversations_list", nil)
//	exit, err := s.CloseStdin(ctx) // exit latency after stdin EOF, exit code
package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Gateway is a running local Gateway child process.
type Gateway struct {
	Bin      string // the openclaw binary
	URL      string // ws://127.0.0.1:PORT
	Token    string
	StateDir string

	port   int
	cmd    *exec.Cmd
	done   chan struct{}
	mu     sync.Mutex
	stderr strings.Builder
}

var readyLine = regexp.MustCompile(`ready on (wss?://[^\s]+)`)

// StartGateway runs `bin gateway run` with a fresh token on a free loopback
// port, seeded with the built-in demo conversations, state under dir. It
// returns once the Gateway prints its ready line, or an error with its
// stderr when it exits or does not get ready within 20 s.
func StartGateway(ctx context.Context, bin, dir string) (*Gateway, error) {
	g := &Gateway{Bin: bin, Token: "demo-" + randHex(8), StateDir: filepath.Join(dir, "gateway-state")}
	return g, g.start(ctx, 0) // the Gateway binds a free port itself and names it in its ready line
}

// Restart stops the Gateway and starts it again on the same port, token
// and state folder: what a user sees when their Gateway restarts.
func (g *Gateway) Restart(ctx context.Context) error {
	g.Stop()
	return g.start(ctx, g.port)
}

func (g *Gateway) start(ctx context.Context, port int) error {
	g.port = port
	g.done = make(chan struct{})
	g.cmd = exec.Command(g.Bin, "gateway", "run", "--port", fmt.Sprint(port), "--token", g.Token,
		"--state-dir", g.StateDir, "--seed", "demo")
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := g.cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := g.cmd.Start(); err != nil {
		return fmt.Errorf("starting gateway: %w", err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			g.mu.Lock()
			g.stderr.WriteString(line + "\n")
			g.mu.Unlock()
			if m := readyLine.FindStringSubmatch(line); m != nil {
				select {
				case ready <- m[1]:
				default:
				}
			}
		}
	}()
	cmd, done := g.cmd, g.done
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case u := <-ready:
		g.URL = u
		if g.port == 0 {
			pu, err := url.Parse(u)
			if err != nil {
				g.Stop()
				return fmt.Errorf("gateway ready line %q: %w", u, err)
			}
			if g.port, err = strconv.Atoi(pu.Port()); err != nil {
				g.Stop()
				return fmt.Errorf("gateway ready line %q names no port", u)
			}
		}
		return nil
	case <-done:
		return fmt.Errorf("gateway exited before it was ready:\n%s", g.Stderr())
	case <-time.After(20 * time.Second):
		g.Stop()
		return fmt.Errorf("gateway not ready after 20s:\n%s", g.Stderr())
	case <-ctx.Done():
		g.Stop()
		return ctx.Err()
	}
}

// Stderr returns what the Gateway printed so far.
func (g *Gateway) Stderr() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stderr.String()
}

// Stop sends SIGTERM, then SIGKILL after 5 s, and waits for the exit.
func (g *Gateway) Stop() {
	if g.cmd == nil || g.cmd.Process == nil {
		return
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
		<-g.done
	}
}

// CLI runs `bin gateway <args…> --url URL --token TOKEN` against this
// Gateway and returns its stdout; an exit status ≠ 0 is an error carrying
// stderr.
func (g *Gateway) CLI(ctx context.Context, args ...string) (string, error) {
	full := append([]string{"gateway"}, args...)
	full = append(full, "--url", g.URL, "--token", g.Token)
	cmd := exec.CommandContext(ctx, g.Bin, full...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("openclaw %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// Inject delivers an inbound message to a session as the Gateway's CLI does.
func (g *Gateway) Inject(ctx context.Context, sessionKey, role, text string, owner bool) error {
	args := []string{"inject", "--session", sessionKey, "--role", role, "--text", text}
	if owner {
		args = append(args, "--owner")
	}
	_, err := g.CLI(ctx, args...)
	return err
}

// RaiseExecApproval asks the Gateway for an exec approval and returns the
// CLI's output (the request as JSON).
func (g *Gateway) RaiseExecApproval(ctx context.Context, command string) (string, error) {
	return g.CLI(ctx, "approval", "exec", "--command", command)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
