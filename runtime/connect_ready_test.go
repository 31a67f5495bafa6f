package runtime

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// slowStart holds back every message the server sends (its
// initialize answer first) until open is closed: a server slow to start.
type slowStart struct {
	inner mcp.Transport
	open  chan struct{}
}

func (g *slowStart) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := g.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &slowStartConn{Connection: c, open: g.open}, nil
}

type slowStartConn struct {
	mcp.Connection
	open chan struct{}
}

func (g *slowStartConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Connection.Read(ctx)
}

// With Options.ConnectWait, a server slow to answer initialize does not hold
// back the others: Connect returns with the fast servers' catalog, a call
// of a fast server's tool runs, and the slow server joins the catalog when
// it answers (EventConnected, then its tools).
func TestConnectWaitServesTheReadyServers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var servers []Server
		for _, name := range []string{"fast1", "fast2"} {
			srv := newServer(name, nil)
			echoTool(srv, "ping")
			servers = append(servers, inProcess(t, name, srv))
		}
		slowSrv := newServer("slow", nil)
		echoTool(slowSrv, "ping")
		slow := inProcess(t, "slow", slowSrv)
		open := make(chan struct{})
		slow.Transport = &slowStart{inner: slow.Transport, open: open}
		servers = append(servers, slow)
		ev := newEvents()
		s, err := New(servers, &Options{Enforcer: &policiestest.Enforcer{}, Sanitizer: &policiestest.Sanitizer{}, Logger: quietLogger(),
			OnEvent: ev.on, ConnectWait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		start := time.Now()
		if err := s.Connect(context.Background()); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Errorf("Connect returned after %v (bubble time), want ConnectWait (2s)", waited)
		}
		if got := toolNames(t, s); !slices.Equal(got, []string{"fast1__ping", "fast2__ping"}) {
			t.Fatalf("catalog after Connect = %v, want the fast servers'", got)
		}
		if _, err := s.CallTool(context.Background(), "fast1__ping", nil); err != nil {
			t.Fatalf("call of a fast server's tool: %v", err)
		}
		if got := ev.drain("slow"); len(got) != 0 {
			t.Fatalf("slow server events before it answered = %v", got)
		}
		// A call of a name no ready server has waits for the slow one,
		// which may own it.
		type answer struct {
			text string
			err  error
		}
		slowCall, noneCall := make(chan answer, 1), make(chan answer, 1)
		for name, ch := range map[string]chan answer{"slow__ping": slowCall, "none__ping": noneCall} {
			go func() {
				res, err := s.CallTool(context.Background(), name, nil)
				a := answer{err: err}
				if err == nil {
					a.text = resultText(t, res)
				}
				ch <- a
			}()
		}
		synctest.Wait()
		if len(slowCall) != 0 || len(noneCall) != 0 {
			t.Fatal("a call of an unknown name returned while a server was still starting")
		}
		close(open)
		synctest.Wait()
		if a := <-slowCall; a.err != nil || a.text != "ping: {}" {
			t.Errorf("call of the slow server's tool = %q, %v; want its answer once it started", a.text, a.err)
		}
		if a := <-noneCall; !errors.Is(a.err, ErrUnknownTool) {
			t.Errorf("call of a name nobody has = %v, want ErrUnknownTool once every server settled", a.err)
		}
		if got := ev.drain("slow"); !slices.Equal(got, []EventKind{EventConnected}) {
			t.Fatalf("slow server events = %v, want [connected]", got)
		}
		if got := toolNames(t, s); !slices.Equal(got, []string{"fast1__ping", "fast2__ping", "slow__ping"}) {
			t.Fatalf("catalog after the slow server answered = %v", got)
		}
	})
}

// A call of a name the catalog lacks while servers start looks again each
// time one of them settles: the tool of a server that answers goes ahead
// while another server still has not answered initialize.
func TestConnectWaitCallGoesAheadWhenItsServerSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var servers []Server
		gates := map[string]chan struct{}{}
		for _, name := range []string{"late", "stuck"} {
			srv := newServer(name, nil)
			echoTool(srv, "ping")
			sv := inProcess(t, name, srv)
			gates[name] = make(chan struct{})
			sv.Transport = &slowStart{inner: sv.Transport, open: gates[name]}
			servers = append(servers, sv)
		}
		s, err := New(servers, &Options{Enforcer: &policiestest.Enforcer{}, Sanitizer: &policiestest.Sanitizer{}, Logger: quietLogger(), ConnectWait: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		defer close(gates["stuck"]) // before Close: the stuck server answers at last
		if err := s.Connect(context.Background()); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := s.CallTool(context.Background(), "late__ping", nil)
			done <- err
		}()
		synctest.Wait()
		if len(done) != 0 {
			t.Fatal("the call returned before its server answered")
		}
		close(gates["late"])
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("call of the late server's tool: %v", err)
			}
		default:
			t.Fatal("the call still waits for the stuck server after its own server answered")
		}
	})
}

// Without ConnectWait, Connect waits for every server (the catalog is
// complete when it returns).
func TestConnectWaitsForEveryServerByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fast := newServer("fast", nil)
		echoTool(fast, "ping")
		slowSrv := newServer("slow", nil)
		echoTool(slowSrv, "ping")
		slow := inProcess(t, "slow", slowSrv)
		open := make(chan struct{})
		slow.Transport = &slowStart{inner: slow.Transport, open: open}
		s, err := New([]Server{inProcess(t, "fast", fast), slow}, &Options{Enforcer: &policiestest.Enforcer{}, Sanitizer: &policiestest.Sanitizer{}, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		go func() {
			time.Sleep(15 * time.Second)
			close(open)
		}()
		if err := s.Connect(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := toolNames(t, s); !slices.Equal(got, []string{"fast__ping", "slow__ping"}) {
			t.Fatalf("catalog after Connect = %v, want both servers'", got)
		}
	})
}
