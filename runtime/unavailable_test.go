package runtime

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/internal/testkit"
)

// A call of a tool whose server went down says the server is unavailable,
// since when and why (not "unknown tool"); the tool leaves the catalog and
// comes back when the server connects again.
func TestDownServerToolIsUnavailable(t *testing.T) {
	t.Parallel()
	srv := newServer("w", nil)
	echoTool(srv, "ping")
	rt := &testkit.Restartable{T: t, Server: srv}
	ev := newEvents()
	s := open(t, []Server{{Name: "w", Transport: rt}}, &Options{OnEvent: ev.on})
	ctx := context.Background()
	if got := toolNames(t, s); !slices.Equal(got, []string{"w__ping"}) {
		t.Fatalf("catalog = %v", got)
	}
	rt.Kill()
	ev.wait(t, EventFailed, "w")
	if got := toolNames(t, s); len(got) != 0 {
		t.Errorf("catalog while down = %v, want empty", got)
	}
	for range 2 { // and again after another catalog build
		_, err := s.CallTool(ctx, "w__ping", nil)
		var ue *UnavailableError
		if !errors.As(err, &ue) || ue.Server != "w" || ue.Tool != "w__ping" || ue.Since.IsZero() || errors.Is(err, ErrUnknownTool) ||
			!errors.Is(err, ErrNotConnected) || !strings.Contains(err.Error(), `MCP server "w" is unavailable since `) ||
			!strings.Contains(err.Error(), "session: the connection ended") {
			t.Fatalf("call while down = %v, want an *UnavailableError naming w, since when and its diagnostic", err)
		}
		if got := s.Unavailable("w__ping"); got == nil || got.Error() != err.Error() {
			t.Errorf("Unavailable = %v, want %v", got, err)
		}
		toolNames(t, s)
	}
	if _, err := s.CallTool(ctx, "w__nope", nil); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("call of a name never listed = %v, want ErrUnknownTool", err)
	}

	// A failed retry keeps it unavailable, with the retry's diagnostic.
	backdate(s, "w")
	toolNames(t, s)
	ev.wait(t, EventRetrying, "w")
	ev.wait(t, EventFailed, "w")
	awaitRetries(s)
	if _, err := s.CallTool(ctx, "w__ping", nil); !strings.Contains(err.Error(), "unavailable since") || !strings.Contains(err.Error(), "connection refused (test)") {
		t.Errorf("call after a failed retry = %v, want unavailable with the connect diagnostic", err)
	}

	rt.Up()
	backdate(s, "w")
	toolNames(t, s)
	ev.wait(t, EventConnected, "w")
	awaitRetries(s)
	if got := toolNames(t, s); !slices.Equal(got, []string{"w__ping"}) {
		t.Fatalf("catalog after the server came back = %v", got)
	}
	if _, err := s.CallTool(ctx, "w__ping", nil); err != nil {
		t.Errorf("call after the server came back: %v", err)
	}
	if s.Unavailable("w__ping") != nil {
		t.Error("Unavailable names a tool that is back")
	}
}
