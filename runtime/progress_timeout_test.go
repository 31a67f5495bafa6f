package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Progress on a call resets its request timeout (2 s here): a call that
// reports progress every 0.8 s for 4 s gets its answer; one that reports
// progress forever ends at the maximum total timeout (10 × 2 s); one
// without progress ends at the request timeout.
func TestProgressResetsTheRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer("p", nil)
		streaming := func(steps int) mcp.ToolHandler {
			return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				for i := 0; steps < 0 || i < steps; i++ {
					select {
					case <-ctx.Done():
						return nil, ctx.Err()
					case <-time.After(800 * time.Millisecond):
					}
					if tok := req.Params.GetProgressToken(); tok != nil {
						_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i + 1)})
					}
				}
				return textResult("done"), nil
			}
		}
		obj := json.RawMessage(`{"type":"object"}`)
		srv.AddTool(&mcp.Tool{Name: "five", InputSchema: obj}, streaming(5))
		srv.AddTool(&mcp.Tool{Name: "forever", InputSchema: obj}, streaming(-1))
		sv := inProcess(t, "p", srv)
		sv.Entry.RequestTimeoutMs = 2000
		sv.Entry.SupportsParallelToolCalls = true
		s := open(t, []Server{sv}, &Options{PauseAfter: 100})
		var mu sync.Mutex
		var got []float64
		ctx := WithProgress(context.Background(), func(p Progress) {
			mu.Lock()
			got = append(got, p.Progress)
			mu.Unlock()
		})

		res, err := s.CallTool(ctx, "p__five", nil)
		if err != nil || resultText(t, res) != "done" {
			t.Fatalf("call streaming progress past its timeout = %v, %v; want its answer", res, err)
		}
		mu.Lock()
		if len(got) == 0 { // go-sdk may hand the last ones over after the result
			t.Errorf("no progress reached the handler")
		}
		mu.Unlock()

		start := time.Now()
		_, err = s.CallTool(ctx, "p__forever", nil)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within the maximum total timeout (20s: progress resets the 2s request timeout up to 10 times it)") {
			t.Errorf("endless progress = %v, want the maximum total timeout", err)
		}
		if d := time.Since(start); d != 20*time.Second { // bubble time: exact
			t.Errorf("endless progress ended after %v, want 20s", d)
		}

		_, err = s.CallTool(context.Background(), "p__five", nil) // no progress asked: none sent
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within the request timeout (2s)") {
			t.Errorf("call without progress = %v, want the request timeout", err)
		}
	})
}
