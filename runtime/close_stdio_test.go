package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written.
func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stderrLines returns the "server stderr" lines of a JSON log.
func (b *syncBuffer) stderrLines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, line := range strings.Split(b.buf.String(), "\n") {
		var r struct{ Msg, Line string }
		if json.Unmarshal([]byte(line), &r) == nil && r.Msg == "server stderr" {
			out = append(out, r.Line)
		}
	}
	return out
}

// TestCloseWhileServerEverythingWaitsOnUs closes a session while
// server-everything (stdio) waits on a sampling or elicitation request of
// a call in flight, after such a call was cancelled, and while it waits on
// roots/list with no call in flight (the handler, which never answers by
// itself, must be cancelled, or go-sdk's Close waits for it forever). The
// Close context is only a guard against a hang. The server runs
// under `sh -c 'node …; echo "server exit status $?" >&2'`: the line
// appears only when node exited by itself after its stdin closed (our
// SIGTERM, sent after the 5 s grace to a server still waiting on us, ends
// sh as well). Close durations are logged, not asserted.
func TestCloseWhileServerEverythingWaitsOnUs(t *testing.T) {
	t.Parallel()
	script := everythingScript(t)
	if runtime.GOOS != "linux" {
		t.Skip("stdio servers are supervised on Linux only")
	}
	for _, tc := range []struct {
		name, tool, args string
		cancelFirst      bool // cancel the call before Close
		roots            bool // no call: the server's roots/list is open
	}{
		{name: "sampling open", tool: "trigger-sampling-request", args: `{"prompt":"hi"}`},
		{name: "elicitation open", tool: "trigger-elicitation-request", args: `{}`},
		{name: "sampling call cancelled", tool: "trigger-sampling-request", args: `{"prompt":"hi"}`, cancelFirst: true},
		{name: "roots open, no call", roots: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs syncBuffer
			asked := make(chan string, 1)
			wait := func(ctx context.Context, what string) error {
				asked <- what
				<-ctx.Done() // the client that would answer never does
				return ctx.Err()
			}
			opts := &Options{
				Enforcer: &policiestest.Enforcer{}, Sanitizer: &policiestest.Sanitizer{},
				Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
				//lint:ignore SA1019 the test drives the roots and sampling passthrough (deprecated by SEP-2577, still served during its deprecation window)
				CreateMessage: func(ctx context.Context, _ string, _ *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
					return nil, wait(ctx, "sampling")
				},
				Elicit: func(ctx context.Context, _ string, _ *mcp.ElicitParams) (*mcp.ElicitResult, error) {
					return nil, wait(ctx, "elicitation")
				},
			}
			if tc.roots {
				//lint:ignore SA1019 the test drives the roots and sampling passthrough (deprecated by SEP-2577, still served during its deprecation window)
				opts.ListRoots = func(ctx context.Context, _ string) (*mcp.ListRootsResult, error) {
					return nil, wait(ctx, "roots")
				}
			}
			s, err := New([]Server{{
				Name: "everything",
				Entry: config.ServerEntry{
					Command: "sh",
					Args:    []string{"-c", `node "$0" stdio; echo "server exit status $?" >&2`, script},
					// The call must outlive Close: only Close may end it.
					RequestTimeoutMs: 10 * 60 * 1000, ConnectionTimeoutMs: 60 * 1000,
				},
			}}, opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := s.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			callCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			callErr := make(chan error, 1)
			if tc.roots {
				<-asked
			} else {
				go func() {
					_, err := s.CallTool(callCtx, "everything__"+tc.tool, []byte(tc.args))
					callErr <- err
				}()
				select {
				case <-asked:
				case err := <-callErr:
					t.Fatalf("%s ended before the server asked us anything: %v", tc.tool, err)
				}
			}
			if tc.cancelFirst {
				cancel()
				if err := <-callErr; !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled call: %v, want context.Canceled", err)
				}
			}
			start := time.Now()
			closeCtx, cancelClose := context.WithTimeout(ctx, time.Minute)
			defer cancelClose()
			if err := s.Close(closeCtx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			t.Logf("Close took %v", time.Since(start))
			if !tc.cancelFirst && !tc.roots {
				if err := <-callErr; !errors.Is(err, ErrClosed) {
					t.Errorf("call in flight at Close: %v, want ErrClosed", err)
				}
			}
			if lines := logs.stderrLines(); !slices.Contains(lines, "server exit status 0") {
				t.Errorf("server-everything did not exit by itself after its stdin closed; its stderr: %q", lines)
			}
		})
	}
}
