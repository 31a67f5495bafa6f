package bridge

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Ending Serve through its ctx is a requested shutdown: go-sdk's "server run
// cancelled" (logged at Error) shows only with debug logging, at DEBUG.
func TestServeCancelLogsNoError(t *testing.T) {
	t.Parallel()
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) {
			t.Parallel()
			var log syncBuffer
			b := New(&fixtureGateway{t: t}, &Options{Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: level}))})
			defer b.Close()
			serverT, clientT := mcp.NewInMemoryTransports()
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- b.Serve(ctx, serverT) }()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), clientT, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			cancel()
			if err := <-served; err != nil {
				t.Fatalf("Serve after cancel: %v, want nil", err)
			}
			out := log.String()
			if strings.Contains(out, "level=ERROR") {
				t.Errorf("a requested shutdown logged an error:\n%s", out)
			}
			if debug := strings.Contains(out, `level=DEBUG msg="server run cancelled"`); debug != (level == slog.LevelDebug) {
				t.Errorf("at %v, server run cancelled at DEBUG: %v:\n%s", level, debug, out)
			}
		})
	}
}
