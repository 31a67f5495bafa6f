package runtime

import (
	"context"
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/procfs"
	"github.com/openclaw-go/openclaw/internal/testkit"
)

// testMarker returns a KEY=value pair unique to this test, to find the
// processes the test started (procfs.WithEnv).
func testMarker(t *testing.T) (marker, key, value string) {
	marker = "OPENCLAW_LIFECYCLE_TEST=" + strconv.Itoa(os.Getpid()) + "-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	key, value, _ = strings.Cut(marker, "=")
	return marker, key, value
}

func statusOf(t *testing.T, s *Session, server string) ServerStatus {
	t.Helper()
	for _, st := range s.Status() {
		if st.Name == server {
			return st
		}
	}
	t.Fatalf("no status for %q", server)
	return ServerStatus{}
}

// TestDeadStdioServerRestartsOnUse kills server-everything (kill -9) while a
// call is in flight: the call fails, the server is marked failed at once
// (Status, EventFailed, its tools leave the catalog) while the other server
// keeps working, nothing restarts it within the retry delay, and the first
// use after the delay reconnects it in the background.
func TestDeadStdioServerRestartsOnUse(t *testing.T) {
	t.Parallel()
	script := everythingScript(t)
	if runtime.GOOS != "linux" {
		t.Skip("finding the child reads /proc")
	}
	marker, k, v := testMarker(t)
	ok := newServer("ok", nil)
	echoTool(ok, "ping")
	ev := newEvents()
	s := open(t, []Server{
		{Name: "everything", Entry: config.ServerEntry{
			Command: "node", Args: []string{script, "stdio"}, Env: map[string]any{k: v},
			RequestTimeoutMs: 30000, ConnectionTimeoutMs: 30000,
		}},
		inProcess(t, "ok", ok),
	}, &Options{OnEvent: ev.on})
	ctx := context.Background()
	if names := toolNames(t, s); !slices.Contains(names, "everything__echo") || !slices.Contains(names, "ok__ping") {
		t.Fatalf("catalog %v lacks everything__echo or ok__ping", names)
	}
	if st := statusOf(t, s, "everything"); !st.Connected || st.Err != nil {
		t.Fatalf("status before the kill = %+v", st)
	}

	// A long call is in flight when the server dies.
	started := make(chan struct{})
	var once sync.Once
	errc := make(chan error, 1)
	go func() {
		pctx := WithProgress(ctx, func(Progress) { once.Do(func() { close(started) }) })
		_, err := s.CallTool(pctx, "everything__trigger-long-running-operation", []byte(`{"duration":30,"steps":300}`))
		errc <- err
	}()
	select {
	case <-started:
	case err := <-errc:
		t.Fatalf("long operation ended before any progress: %v", err)
	}
	pids := procfs.WithEnv(marker)
	if len(pids) == 0 {
		t.Fatal("no server-everything process found")
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := <-errc; err == nil {
		t.Fatal("the call in flight succeeded although its server was killed")
	}
	failed := ev.wait(t, EventFailed, "everything")
	var se *ServerError
	if !errors.As(failed.Err, &se) || se.Op != "session" || !strings.Contains(se.Error(), "the connection ended") {
		t.Errorf("EventFailed error = %v, want a session *ServerError saying the connection ended", failed.Err)
	}
	if st := statusOf(t, s, "everything"); st.Connected || st.Err == nil {
		t.Errorf("status after the kill = %+v, want disconnected with a diagnostic", st)
	}

	// Within the delay: the dead server's tools are gone, the other
	// server's remain and work, and nothing is restarted.
	for range 3 {
		names := toolNames(t, s)
		if slices.Contains(names, "everything__echo") || !slices.Contains(names, "ok__ping") {
			t.Fatalf("catalog after the kill = %v, want ok__ping without everything's tools", names)
		}
	}
	// Why: the session's end, which the diagnostic words as the process's
	// exit or as its closed stdout, whichever the transport saw first.
	var ue *UnavailableError
	var why *ServerError
	if _, err := s.CallTool(ctx, "everything__echo", []byte(`{"message":"x"}`)); !errors.As(err, &ue) || ue.Server != "everything" ||
		!errors.As(ue.Err, &why) || why.Op != "session" || !strings.Contains(err.Error(), "the connection ended") {
		t.Errorf("call to the dead server's tool: %v, want an *UnavailableError naming everything and why", err)
	}
	if res, err := s.CallTool(ctx, "ok__ping", nil); err != nil || resultText(t, res) != "ping: {}" {
		t.Errorf("call to the healthy server: %v %v", res, err)
	}
	if p := procfs.WithEnv(marker); len(p) != 0 {
		t.Errorf("processes %v started within the retry delay", p)
	}

	// After the delay, the next use reconnects it in the background.
	backdate(s, "everything")
	toolNames(t, s)
	ev.wait(t, EventRetrying, "everything")
	ev.wait(t, EventConnected, "everything")
	awaitRetries(s)
	if names := toolNames(t, s); !slices.Contains(names, "everything__echo") {
		t.Fatalf("catalog after the retry = %v, want everything__echo", names)
	}
	res, err := s.CallTool(ctx, "everything__echo", []byte(`{"message":"back"}`))
	if err != nil || resultText(t, res) != "Echo: back" {
		t.Fatalf("echo after the retry: %v %v", res, err)
	}
	if st := statusOf(t, s, "everything"); !st.Connected || st.Err != nil || st.Tools == 0 {
		t.Errorf("status after the retry = %+v, want connected, healthy, with tools", st)
	}

	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if p := procfs.WithEnv(marker); len(p) != 0 {
		t.Errorf("processes %v survive Close", p)
	}
}

// gatedTransport fails its first connection, then holds every later one
// until release is closed (or the context ends), then connects to a fresh
// in-process session of srv.
type gatedTransport struct {
	t       *testing.T
	srv     *mcp.Server
	release chan struct{}

	mu       sync.Mutex
	attempts int
	waiting  chan struct{} // closed when an attempt waits at the gate
}

func (g *gatedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	g.mu.Lock()
	g.attempts++
	first := g.attempts == 1
	if first {
		g.mu.Unlock()
		return nil, errors.New("connection refused (test)")
	}
	waiting := g.waiting
	g.waiting = nil
	g.mu.Unlock()
	if waiting != nil {
		close(waiting)
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	ct, stop := testkit.ServeInMemory(g.srv)
	g.t.Cleanup(stop)
	return ct.Connect(ctx)
}

func (g *gatedTransport) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.attempts
}

// TestRetryRunsOffTheRequestPath holds a retry in its connect: the catalog
// and calls to the healthy server answer meanwhile, one retry runs at a
// time, and its success brings the tools (EventConnected).
func TestRetryRunsOffTheRequestPath(t *testing.T) {
	t.Parallel()
	slow := newServer("slow", nil)
	echoTool(slow, "late")
	waiting := make(chan struct{})
	g := &gatedTransport{t: t, srv: slow, release: make(chan struct{}), waiting: waiting}
	ok := newServer("ok", nil)
	echoTool(ok, "ping")
	ev := newEvents()
	s := open(t, []Server{{Name: "slow", Transport: g}, inProcess(t, "ok", ok)}, &Options{OnEvent: ev.on})
	ev.wait(t, EventFailed, "slow")
	ctx := context.Background()

	backdate(s, "slow")
	if got, want := toolNames(t, s), []string{"ok__ping"}; !slices.Equal(got, want) {
		t.Fatalf("catalog = %v, want %v", got, want)
	}
	<-waiting // the retry is held in its connect
	ev.wait(t, EventRetrying, "slow")
	for range 3 {
		backdate(s, "slow")
		if got, want := toolNames(t, s), []string{"ok__ping"}; !slices.Equal(got, want) {
			t.Fatalf("catalog during the retry = %v, want %v", got, want)
		}
		if res, err := s.CallTool(ctx, "ok__ping", nil); err != nil || resultText(t, res) != "ping: {}" {
			t.Fatalf("call during the retry: %v %v", res, err)
		}
	}
	if !retryInFlight(s, "slow") {
		t.Fatal("the retry ended although its connect is held")
	}
	if n := g.count(); n != 2 {
		t.Errorf("%d connection attempts, want 2 (one retry at a time)", n)
	}

	close(g.release)
	ev.wait(t, EventConnected, "slow")
	awaitRetries(s)
	if got, want := toolNames(t, s), []string{"ok__ping", "slow__late"}; !slices.Equal(got, want) {
		t.Fatalf("catalog after the retry = %v, want %v", got, want)
	}
	if res, err := s.CallTool(ctx, "slow__late", nil); err != nil || resultText(t, res) != "late: {}" {
		t.Fatalf("call after the retry: %v %v", res, err)
	}
}

// TestCloseEndsARetryInFlight closes the session while a retry is
// connecting to a server that prints junk and never answers initialize:
// Close ends the retry and the server's process.
func TestCloseEndsARetryInFlight(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the leak check reads /proc")
	}
	marker, k, v := testMarker(t)
	ev := newEvents()
	s := open(t, []Server{{Name: "hang", Entry: config.ServerEntry{
		Command: "sh", Args: []string{"-c", "echo 'not json'; exec sleep 600"}, Env: map[string]any{k: v},
		ConnectionTimeoutMs: 1000,
	}}}, &Options{OnEvent: ev.on})
	if e := ev.wait(t, EventFailed, "hang"); e.Err == nil {
		t.Fatal("EventFailed without an error")
	}
	backdate(s, "hang")
	toolNames(t, s)
	ev.wait(t, EventRetrying, "hang")
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if retryInFlight(s, "hang") {
		t.Error("a retry is still in flight after Close")
	}
	if p := procfs.WithEnv(marker); len(p) != 0 {
		t.Errorf("processes %v survive Close", p)
	}
}

// TestServerEndingAfterConnectIsRetried ends an in-process server's
// session: the server is marked failed and reconnected after the delay.
func TestServerEndingAfterConnectIsRetried(t *testing.T) {
	t.Parallel()
	srv := newServer("brief", nil)
	echoTool(srv, "ping")
	ft := &testkit.Restartable{T: t, Server: srv}
	ev := newEvents()
	s := open(t, []Server{{Name: "brief", Transport: ft}}, &Options{OnEvent: ev.on})
	if got, want := toolNames(t, s), []string{"brief__ping"}; !slices.Equal(got, want) {
		t.Fatalf("catalog = %v, want %v", got, want)
	}
	var sessions []*mcp.ServerSession
	for ss := range srv.Sessions() {
		sessions = append(sessions, ss)
	}
	if len(sessions) != 1 {
		t.Fatalf("%d server sessions, want 1", len(sessions))
	}
	// The session ends as a server that exits ends it: both ends of the
	// in-memory pipe close. go-sdk v1.8.0's ServerSession.Close alone can
	// wait forever when it races the client's subscriptions/listen (the
	// request is read before Close and registered after it).
	ft.Kill()
	ft.Up()
	ev.wait(t, EventFailed, "brief")
	if got := toolNames(t, s); len(got) != 0 {
		t.Fatalf("catalog after the server left = %v, want empty", got)
	}
	var ue *UnavailableError
	if _, err := s.CallTool(context.Background(), "brief__ping", nil); !errors.As(err, &ue) || ue.Server != "brief" {
		t.Errorf("call after the server left: %v, want an *UnavailableError naming brief", err)
	}
	backdate(s, "brief")
	toolNames(t, s)
	ev.wait(t, EventConnected, "brief")
	awaitRetries(s)
	if got, want := toolNames(t, s), []string{"brief__ping"}; !slices.Equal(got, want) {
		t.Fatalf("catalog after the retry = %v, want %v", got, want)
	}
	if n := ft.Attempts(); n != 2 {
		t.Errorf("%d connection attempts, want 2", n)
	}
}
