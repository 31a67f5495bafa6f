package gatewayit_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/bridge/gwclient"
	"github.com/openclaw-go/openclaw/gateway"
	"github.com/openclaw-go/openclaw/gateway/protocol"
)

const token = "it-token"

// serve runs a local Gateway on addr ("127.0.0.1:0" for any port) until the
// returned stop is called or the test ends.
func serve(t *testing.T, addr string) (url string, stop func()) {
	t.Helper()
	srv, err := gateway.New(&gateway.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv.Close(ctx)
			if err := <-done; err != nil {
				t.Errorf("gateway Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return "ws://" + ln.Addr().String(), stop
}

func options(t *testing.T, url string) *gwclient.Options {
	t.Helper()
	id, err := protocol.NewDeviceIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return &gwclient.Options{URL: url, Token: token, Identity: id, ClientVersion: "it",
		InitialBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// Our client against our Gateway: handshake with a device proof, RPCs,
// live session.message events.
func TestClientAgainstLocalGateway(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, "127.0.0.1:0")
	events := make(chan string, 64)
	o := options(t, url)
	o.OnEvent = func(name string, payload json.RawMessage) {
		if name == protocol.EventSessionMessage {
			events <- string(payload)
		}
	}
	c := gwclient.New(o)
	errc := make(chan error, 1)
	go func() { errc <- c.Run(context.Background()) }()
	t.Cleanup(func() { c.Close() })
	if err := c.WaitReady(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if h := c.Hello(); h == nil || h.Protocol != protocol.Version || !c.HasMethod("sessions.list") {
		t.Fatalf("hello %+v", h)
	}
	if _, err := c.Request(ctx(t), "chat.send", map[string]any{"sessionKey": "agent:main:it",
		"message": "hello from gwclient", "idempotencyKey": "it-1"}); err != nil {
		t.Fatalf("chat.send: %v", err)
	}
	select {
	case p := <-events:
		if !strings.Contains(p, "hello from gwclient") {
			t.Errorf("session.message payload %s", p)
		}
	case <-ctx(t).Done():
		t.Fatal("no session.message event")
	}
	payload, err := c.Request(ctx(t), "sessions.list", map[string]any{"limit": 50})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(payload), "agent:main:it") {
		t.Errorf("sessions.list lacks the new session: %s", payload)
	}
	_, err = c.Request(ctx(t), "exec.approval.resolve", map[string]any{"id": "bogus", "decision": "deny"})
	var re *protocol.RequestError
	if !errors.As(err, &re) || re.Message != "unknown or expired approval id" {
		t.Errorf("bogus resolve: %v, want OpenClaw's unknown-approval error", err)
	}
}

func TestBadTokenAgainstLocalGateway(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, "127.0.0.1:0")
	o := options(t, url)
	o.Token = "wrong"
	c := gwclient.New(o)
	defer c.Close()
	err := c.Run(ctx(t))
	if err == nil || !strings.HasPrefix(err.Error(), "unauthorized: gateway token mismatch") {
		t.Fatalf("Run = %v, want the Gateway's token mismatch", err)
	}
}

// A Gateway restart (shutdown event, 1012) is survived: the client
// reconnects to the new process on the same address; calls in between
// fail with ErrNotConnected.
func TestGatewayRestart(t *testing.T) {
	t.Parallel()
	url, stop := serve(t, "127.0.0.1:0")
	states := make(chan gwclient.State, 64)
	o := options(t, url)
	o.OnStateChange = func(sc gwclient.StateChange) { states <- sc.State }
	c := gwclient.New(o)
	go c.Run(context.Background())
	t.Cleanup(func() { c.Close() })
	if err := c.WaitReady(ctx(t)); err != nil {
		t.Fatal(err)
	}
	stop()
	wait := ctx(t)
	for disconnected := false; !disconnected; {
		select {
		case s := <-states:
			disconnected = s == gwclient.StateDisconnected
		case <-wait.Done():
			t.Fatal("no disconnect after the Gateway stopped")
		}
	}
	// While the Gateway is down a call fails at once, as OpenClaw's does.
	if _, err := c.Request(ctx(t), "sessions.list", nil); !errors.Is(err, gwclient.ErrNotConnected) {
		t.Fatalf("while the Gateway is down: %v, want ErrNotConnected", err)
	}
	serve(t, strings.TrimPrefix(url, "ws://"))
	if err := c.WaitReady(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Request(ctx(t), "sessions.list", nil); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}
