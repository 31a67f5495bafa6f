package gwclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/openclaw-go/openclaw/bridge/gwclient"
)

// gatewayConn mirrors bridge.GatewayConn, which this package must not
// import; the assertion keeps the two in step.
type gatewayConn interface {
	Request(ctx context.Context, method string, params any) (json.RawMessage, error)
	HasMethod(method string) bool
}

var _ gatewayConn = (*gwclient.Client)(nil)

// How `openclaw mcp serve` drives the client: Run in its own goroutine, a
// fatal first connection reported as OpenClaw does, requests gated on
// readiness.
func Example() {
	ctx := context.Background()
	c := gwclient.New(&gwclient.Options{
		URL:           "ws://127.0.0.1:18789",
		Token:         os.Getenv("OPENCLAW_GATEWAY_TOKEN"),
		ClientVersion: "2026.9.6",
		OnEvent: func(name string, payload json.RawMessage) {
			// Fast: hand the event to the bridge's queue.
		},
	})
	defer c.Close()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()

	payload, err := c.Request(ctx, "sessions.list", map[string]any{"limit": 50})
	if err != nil {
		if runErr := <-errc; runErr != nil {
			fmt.Fprintf(os.Stderr, "MCP server failed to start: %v\n", runErr)
			return
		}
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Println(len(payload) > 0)
}

// BenchmarkRequest measures one sessions.list round trip (the captured
// payload, ~8 KB) through the client and the fake Gateway on loopback.
func BenchmarkRequest(b *testing.B) {
	g := newFakeGateway(b, false, nil)
	r := start(b, baseOptions(b, g.URL))
	waitReady(b, r.c)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.c.Request(ctx, "sessions.list", nil); err != nil {
			b.Fatal(err)
		}
	}
}
