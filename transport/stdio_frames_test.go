//go:build linux

package transport

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawSession connects to testdata/misbehave -raw, whose answers break the
// stdio framing on purpose, with stdout lines capped at maxMsg bytes.
func rawSession(t *testing.T, maxMsg int) (*mcp.ClientSession, *StdioTransport, *logBuffer) {
	t.Helper()
	log, lb := newLogger()
	r := resolve(t, "raw", misbehaveEntry("-raw"), &Options{Logger: log, MaxMessageBytes: maxMsg})
	return connect(t, r.Transport, ""), r.Transport.(*StdioTransport), lb
}

// callRaw calls tool with a hang guard: a call that waits for an answer
// that never comes fails the test instead of hanging it.
func callRaw(cs *mcp.ClientSession, tool string, args map[string]any) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", err
	}
	if len(res.Content) == 0 {
		return "", errors.New("no content")
	}
	return res.Content[0].(*mcp.TextContent).Text, nil
}

// A line that holds an answer and then trailing bytes (`{…}},`) is not a
// message: it is skipped, and the call gets the whole answer that follows.
func TestStdioTrailingDataLineSkipped(t *testing.T) {
	t.Parallel()
	cs, tr, lb := rawSession(t, 0)
	if got, err := callRaw(cs, "trailing", nil); err != nil || got != "ok" {
		t.Fatalf("trailing = %q, %v; want the valid answer after the bad line, %q", got, err, "ok")
	}
	if n := tr.SkippedLines(); n != 1 {
		t.Errorf("SkippedLines = %d, want 1", n)
	}
	if !strings.Contains(lb.String(), "after top-level value") {
		t.Errorf("the skipped line is not logged with its reason:\n%s", lb.String())
	}
}

// An answer over the cap fails its call at once with "message too large";
// one whose id comes after its result fails every call in flight; the
// connection keeps serving.
func TestStdioLineOverCapFailsItsCall(t *testing.T) {
	t.Parallel()
	const maxMsg = 1 << 20
	cs, tr, lb := rawSession(t, maxMsg)
	_, err := callRaw(cs, "huge", map[string]any{"size": 2 * maxMsg})
	if err == nil || !strings.Contains(err.Error(), "message too large") || !strings.Contains(err.Error(), `server "raw"`) {
		t.Fatalf("huge answer: %v, want a message too large error naming the server", err)
	}
	if got, err := callRaw(cs, "echo", map[string]any{"text": "after"}); err != nil || got != "echo:after" {
		t.Fatalf("echo after the huge answer = %q, %v", got, err)
	}

	// hold never answers; huge_late_id answers once hold is waiting, with
	// its id out of reach: both calls fail.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, tool := range []string{"hold", "huge_late_id"} {
		wg.Go(func() { _, errs[i] = callRaw(cs, tool, map[string]any{"size": 2 * maxMsg}) })
	}
	wg.Wait()
	for i, tool := range []string{"hold", "huge_late_id"} {
		if errs[i] == nil || !strings.Contains(errs[i].Error(), "message too large") {
			t.Errorf("%s: %v, want a message too large error", tool, errs[i])
		}
	}
	if got, err := callRaw(cs, "echo", map[string]any{"text": "still"}); err != nil || got != "echo:still" {
		t.Fatalf("echo at the end = %q, %v", got, err)
	}
	if n := tr.SkippedLines(); n != 2 {
		t.Errorf("SkippedLines = %d, want 2", n)
	}
	if !strings.Contains(lb.String(), "the 2 calls in flight fail") {
		t.Errorf("the log does not say the calls in flight failed:\n%s", lb.String())
	}
}

// A server that writes half a line and then stops: its call times out, and
// the next answer, which the reader sees glued onto the half line, still
// reaches its call.
func TestStdioCutOffLineDoesNotSwallowTheNextAnswer(t *testing.T) {
	t.Parallel()
	cs, tr, _ := rawSession(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "partial", Arguments: map[string]any{}})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("partial: %v, want the caller's deadline", err)
	}
	if got, err := callRaw(cs, "echo", map[string]any{"text": "next"}); err != nil || got != "echo:next" {
		t.Fatalf("echo after the cut-off line = %q, %v", got, err)
	}
	if n := tr.SkippedLines(); n != 1 {
		t.Errorf("SkippedLines = %d, want 1 (the cut-off part)", n)
	}
}

// 2,000 junk lines are counted one by one, but warned about only a few
// times.
func TestStdioJunkLinesCountedAndRateLimited(t *testing.T) {
	t.Parallel()
	cs, tr, lb := rawSession(t, 0)
	start := time.Now()
	if got, err := callRaw(cs, "junk", map[string]any{"lines": 2000}); err != nil || got != "ok" {
		t.Fatalf("junk = %q, %v", got, err)
	}
	if n := tr.SkippedLines(); n != 2000 {
		t.Errorf("SkippedLines = %d, want 2000", n)
	}
	warns := 0
	for _, rec := range lb.records() {
		if rec["level"] == "WARN" {
			warns++
		}
	}
	// The burst, then one summary per interval at most.
	if max := skipWarnBurst + 1 + int(time.Since(start)/skipWarnInterval); warns > max || warns < skipWarnBurst {
		t.Errorf("%d warnings for 2000 skipped lines, want %d to %d:\n%s", warns, skipWarnBurst, max, truncate(lb.String(), 3000))
	}
}
