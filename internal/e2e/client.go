package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Serve is an `openclaw mcp serve` child driven by a go-sdk MCP client.
type Serve struct {
	Session *mcp.ClientSession
	cmd     *exec.Cmd
	stderr  *lockedBuffer
}

// StartServe spawns `bin mcp serve --url <gw> --token-file <file> args…`
// under a go-sdk client named clientName and completes the MCP handshake.
// The token goes through a file so it never shows in a process listing.
func StartServe(ctx context.Context, bin string, gw *Gateway, tokenFile string, clientName string, args ...string) (*Serve, error) {
	full := append([]string{"mcp", "serve", "--url", gw.URL, "--token-file", tokenFile}, args...)
	cmd := exec.Command(bin, full...)
	s := &Serve{cmd: cmd, stderr: &lockedBuffer{}}
	cmd.Stderr = s.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: clientName, Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to openclaw mcp serve: %w\nstderr:\n%s", err, s.stderr.String())
	}
	s.Session = cs
	return s, nil
}

// Stderr returns what the server printed on stderr so far.
func (s *Serve) Stderr() string { return s.stderr.String() }

// Close ends the session (stdin EOF) and waits for the child to exit.
func (s *Serve) Close() error { return s.Session.Close() }

// ExitCode is the child's exit status after Close (-1 if unknown).
func (s *Serve) ExitCode() int {
	if s.cmd.ProcessState == nil {
		return -1
	}
	return s.cmd.ProcessState.ExitCode()
}

// Result is a tools/call result reduced to what a user reads: the text of
// the first content block, the error flag and the structured content.
type Result struct {
	Text       string
	IsError    bool
	Structured json.RawMessage
}

// Call calls a tool and reduces the result; a JSON-RPC error is an error.
func (s *Serve) Call(ctx context.Context, tool string, args map[string]any) (*Result, error) {
	res, err := s.Session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("tools/call %s: %w", tool, err)
	}
	r := &Result{IsError: res.IsError}
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			r.Text = tc.Text
		}
	}
	if res.StructuredContent != nil {
		r.Structured, _ = json.Marshal(res.StructuredContent)
	}
	return r, nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
