// Package gatewaytest starts a local Gateway on 127.0.0.1 for tests, and
// provides a small Gateway protocol client, in the spirit of
// net/http/httptest.
//
//	gw := gatewaytest.StartSeeded(t)        // demo seed, random token, temp state dir
//	// point the code under test at gw.URL ("ws://127.0.0.1:<port>") with gw.Token
//	gw.Inject(ctx, gateway.InjectRequest{SessionKey: "agent:main:main", Text: "yes abcde", SenderIsOwner: true})
//
//	c, err := gatewaytest.Dial(ctx, gw.URL, &gatewaytest.DialOptions{Token: gw.Token})
//	rows, err := c.Request(ctx, "sessions.list", map[string]any{"limit": 10})
package gatewaytest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/gateway"
)

// Gateway is a Gateway serving on a loopback port for the length of a test.
type Gateway struct {
	*gateway.Server
	// URL is the WebSocket URL clients dial, ws://127.0.0.1:<port>.
	URL string
	// HTTPURL is the same endpoint as http://127.0.0.1:<port> (admin API).
	HTTPURL string
	// Token is the gateway token.
	Token string
	// StateDir is where sessions persist ("" for in-memory).
	StateDir string
}

// Start serves a new Gateway built from opts (nil: defaults with a
// generated token and in-memory state) on a free 127.0.0.1 port. It stops
// when the test ends.
func Start(t testing.TB, opts *gateway.Options) *Gateway {
	t.Helper()
	srv, err := gateway.New(opts)
	if err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	return serve(t, srv)
}

// StartSeeded is Start with a temporary state dir, the demo seed
// ([gateway.DemoSeed]) applied, and otherwise default options.
func StartSeeded(t testing.TB) *Gateway {
	t.Helper()
	srv, err := gateway.New(&gateway.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	if _, err := srv.ApplySeed(context.Background(), gateway.DemoSeed()); err != nil {
		t.Fatalf("gatewaytest: seeding: %v", err)
	}
	return serve(t, srv)
}

func serve(t testing.TB, srv *gateway.Server) *Gateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("gatewaytest: listening: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("gatewaytest: serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("gatewaytest: gateway did not stop within 30s")
		}
	})
	addr := ln.Addr().String()
	return &Gateway{Server: srv, URL: "ws://" + addr, HTTPURL: "http://" + addr, Token: srv.Token(), StateDir: srv.StateDir()}
}
