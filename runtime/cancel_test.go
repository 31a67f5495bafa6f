package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cancelLog records the request ids of the notifications/cancelled a
// server received and, when its transport notes them, of the tools/call
// requests it read.
type cancelLog struct {
	mu    sync.Mutex
	ids   []string
	calls map[string]bool
}

// call notes the id of a tools/call request.
func (l *cancelLog) call(id jsonrpc.ID) {
	l.mu.Lock()
	if l.calls == nil {
		l.calls = map[string]bool{}
	}
	l.calls[fmt.Sprint(id.Raw())] = true
	l.mu.Unlock()
}

func (l *cancelLog) note(params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	_ = json.Unmarshal(params, &p)
	l.mu.Lock()
	l.ids = append(l.ids, fmt.Sprint(p.RequestID))
	l.mu.Unlock()
}

// got returns the ids cancelled: of tools/call requests only when the
// calls were noted (on 2026-07-28 closing a session also cancels its
// subscriptions/listen request, which is not a call).
func (l *cancelLog) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, id := range l.ids {
		if l.calls == nil || l.calls[id] {
			out = append(out, id)
		}
	}
	return out
}

// recordingTransport is a server's end that notes the cancellations read.
type recordingTransport struct {
	inner mcp.Transport
	log   *cancelLog
}

func (r recordingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return recordingConn{c, r.log}, nil
}

type recordingConn struct {
	mcp.Connection
	log *cancelLog
}

func (c recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if req, ok := m.(*jsonrpc.Request); ok {
		switch req.Method {
		case "notifications/cancelled":
			c.log.note(req.Params)
		case "tools/call":
			c.log.call(req.ID)
		}
	}
	return m, err
}

// hangServer has a tool "hang" that returns only when its call is
// cancelled (or the test ends); started receives as each call begins.
func hangServer(t *testing.T, started chan<- struct{}) *mcp.Server {
	t.Helper()
	quit := make(chan struct{})
	srv := newServer("up", nil)
	srv.AddTool(&mcp.Tool{Name: "hang", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-quit:
			return nil, errors.New("the test ended")
		}
	})
	// Registered before the caller's cleanups, it would run after them:
	// the caller's server cleanups call quitHangs first.
	quitHangs.Store(t, quit)
	return srv
}

// quitHangs holds each test's channel that ends its hang calls.
var quitHangs sync.Map

// endHangs ends the hang calls still running in t's server.
func endHangs(t *testing.T) {
	if q, ok := quitHangs.LoadAndDelete(t); ok {
		close(q.(chan struct{}))
	}
}

// cancelCalls makes n calls of up__hang, cancels each once the server has
// it, closes the session at once, and checks (once read says the server
// has read everything) that the server received one notice per call.
func cancelCalls(t *testing.T, sv Server, started <-chan struct{}, log *cancelLog, n int, read func()) {
	t.Helper()
	s := open(t, []Server{sv}, &Options{})
	var wg sync.WaitGroup
	for range n {
		ctx, cancel := context.WithCancel(context.Background())
		wg.Go(func() {
			_, err := s.CallTool(ctx, "up__hang", nil)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled call: %v, want context.Canceled", err)
			}
		})
		<-started
		cancel()
	}
	wg.Wait()
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
	read() // the server has read what was written before the close
	got := log.got()
	seen := map[string]bool{}
	for _, id := range got {
		if seen[id] {
			t.Errorf("request %s cancelled twice", id)
		}
		seen[id] = true
	}
	if len(seen) != n {
		t.Fatalf("the server received notifications/cancelled for %d of %d cancelled calls (%v)", len(seen), n, got)
	}
}

// TestCancelledCallsReachTheServer: every call cancelled is cancelled
// upstream, once, before Close returns (stdio and in-process transports).
func TestCancelledCallsReachTheServer(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	log := &cancelLog{}
	ct, st := mcp.NewInMemoryTransports()
	srv := hangServer(t, started)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Run(ctx, recordingTransport{st, log})
	}()
	t.Cleanup(func() {
		endHangs(t)
		cancel()
		<-done
	})
	// Run returns once the server read the closed connection to its end.
	cancelCalls(t, Server{Name: "up", Transport: ct}, started, log, 20, func() { <-done })
}

// TestCancelledCallsReachTheHTTPServer: the same over streamable HTTP.
func TestCancelledCallsReachTheHTTPServer(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	log := &cancelLog{}
	srv := hangServer(t, started)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			if strings.Contains(string(b), `"notifications/cancelled"`) {
				var m struct{ Params json.RawMessage }
				_ = json.Unmarshal(b, &m)
				log.note(m.Params)
			}
			r.Body = io.NopCloser(strings.NewReader(string(b)))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		endHangs(t)
		hs.Close()
	})
	sv := Server{Name: "up"}
	sv.Entry.URL, sv.Entry.Transport = hs.URL, "streamable-http"
	sv.Entry.RequestTimeoutMs = 30000
	// The notice's POST is recorded before it is answered.
	cancelCalls(t, sv, started, log, 20, func() {})
}
