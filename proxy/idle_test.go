package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/runtime"
)

// A streamable HTTP session with no request in flight and no GET stream
// for SessionIdleTimeout is closed, its resource subscription released
// upstream, and its next request gets 404; a request restarts the idle
// time, and a session whose GET stream is open is never idle.
func TestIdleSessionsAreReaped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var unsubscribed []string
		up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, &mcp.ServerOptions{
			SupportedProtocolVersions: legacy,
			SubscribeHandler:          func(context.Context, *mcp.SubscribeRequest) error { return nil },
			UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
				mu.Lock()
				unsubscribed = append(unsubscribed, req.Params.URI)
				mu.Unlock()
				return nil
			},
		})
		up.AddResource(&mcp.Resource{URI: "mem://doc", Name: "doc"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "mem://doc", Text: "x"}}}, nil
		})
		s := newStack(t, []runtime.Server{{Name: "up", Transport: testkit.InMemory(t, up)}}, &policiestest.BeforeToolCallHook{Module: "allow"}, "")
		h, err := NewHTTPHandler(s.p, &HTTPOptions{NoAuth: true, Logger: discard(), SessionIdleTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			for ss := range s.p.Server().Sessions() {
				_ = ss.Close()
			}
		}()
		post := func(sid, body string) *httptest.ResponseRecorder {
			req := httptest.NewRequest("POST", "http://127.0.0.1"+PathMCP, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if sid != "" {
				req.Header.Set("Mcp-Session-Id", sid)
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec
		}
		open := func() string {
			sid := post("", initBody).Header().Get("Mcp-Session-Id")
			if sid == "" {
				t.Fatal("initialize opened no session")
			}
			if rec := post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); rec.Code != http.StatusAccepted {
				t.Fatalf("notifications/initialized: %d %s", rec.Code, rec.Body)
			}
			return sid
		}
		idle, listening := open(), open()
		if rec := post(idle, `{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"mem://doc"}}`); !strings.Contains(rec.Body.String(), `"result"`) {
			t.Fatalf("resources/subscribe: %d %s", rec.Code, rec.Body)
		}
		ctx, stopGET := context.WithCancel(context.Background())
		get := httptest.NewRequest("GET", "http://127.0.0.1"+PathMCP, nil).WithContext(ctx)
		get.Header.Set("Accept", "text/event-stream")
		get.Header.Set("Mcp-Session-Id", listening)
		get.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		streamDone := make(chan struct{})
		go func() {
			defer close(streamDone)
			h.ServeHTTP(httptest.NewRecorder(), get)
		}()
		defer func() { stopGET(); <-streamDone }()
		ping := `{"jsonrpc":"2.0","id":4,"method":"ping"}`

		time.Sleep(50 * time.Second)
		synctest.Wait()
		if rec := post(idle, ping); rec.Code != http.StatusOK { // restarts its idle time
			t.Fatalf("ping after 50 s idle: %d %s", rec.Code, rec.Body)
		}
		time.Sleep(50 * time.Second)
		synctest.Wait()
		if h.session(idle) == nil {
			t.Fatal("a session idle for 50 s since its last request was closed (timeout 1m)")
		}
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if h.session(idle) != nil {
			t.Fatal("a session idle for 61 s (timeout 1m) is still open")
		}
		if h.session(listening) == nil {
			t.Fatal("a session with its GET stream open was closed as idle")
		}
		mu.Lock()
		got := slices.Clone(unsubscribed)
		mu.Unlock()
		if !slices.Equal(got, []string{"mem://doc"}) {
			t.Errorf("upstream unsubscriptions = %v, want the reaped session's mem://doc", got)
		}
		if rec := post(idle, ping); rec.Code != http.StatusNotFound {
			t.Errorf("request of a reaped session: %d %s, want 404", rec.Code, rec.Body)
		}
	})
}
