//lint:file-ignore SA1019 logging is deprecated by SEP-2577 but still served during its deprecation window: the test relays a server's log lines on purpose

package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/runtime"
	"github.com/openclaw-go/openclaw/transport"
)

// chattyN is how many log lines (and progress steps) the chatty tool
// writes before its answer.
const chattyN = 1000

// chattyUpstream is a server whose tool "chatty" logs chattyN lines and
// sends chattyN progress steps (when asked), interleaved, then answers.
func chattyUpstream(t *testing.T) runtime.Server {
	t.Helper()
	return runtime.Server{Name: "up", Transport: testkit.InMemory(t, chattyServer(chattyN))}
}

// chattyServer is the server of chattyUpstream with n log lines and
// progress steps.
func chattyServer(n int) *mcp.Server {
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: legacy})
	up.AddTool(&mcp.Tool{Name: "chatty", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := req.Params.GetProgressToken()
		for i := 1; i <= n; i++ {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: i}); err != nil {
				return nil, err
			}
			if tok != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(n)}); err != nil {
					return nil, err
				}
			}
		}
		return text("done"), nil
	})
	return up
}

// checkOrder reads the JSON-RPC messages of msgs (in the order the client
// received them) up to the answer of call id 9, and fails unless every log
// line (n) and progress step (steps) came before it, in order.
func checkOrder(t *testing.T, n, wantSteps int, next func() (string, bool)) {
	t.Helper()
	logs, steps := 0, 0
	for {
		raw, ok := next()
		if !ok {
			t.Fatalf("stream ended before the answer; %d log lines and %d progress steps seen", logs, steps)
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Data     json.RawMessage `json:"data"`
				Progress float64         `json:"progress"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatalf("not JSON-RPC: %q", raw)
		}
		switch {
		case m.Method == "notifications/message":
			logs++
			if string(m.Params.Data) != fmt.Sprint(logs) {
				t.Fatalf("log line %d carries %s: out of order", logs, m.Params.Data)
			}
		case m.Method == "notifications/progress":
			steps++
			if m.Params.Progress != float64(steps) {
				t.Fatalf("progress step %d is %v: out of order", steps, m.Params.Progress)
			}
		case string(m.ID) == "9":
			if logs != n || steps != wantSteps {
				t.Fatalf("the answer came after %d of %d log lines and %d of %d progress steps", logs, n, steps, wantSteps)
			}
			return
		}
	}
}

const (
	setLevelBody = `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`
	chattyBody   = `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"up__chatty","arguments":{},"_meta":{"progressToken":"p1"}}}`
	// chattyLogsBody calls chatty without a progress token: log lines only.
	chattyLogsBody = `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"up__chatty","arguments":{}}}`
)

// TestNotificationsBeforeTheAnswerHTTP: a tool's log lines and progress
// all reach the POST stream of its call, in order, before its answer.
func TestNotificationsBeforeTheAnswerHTTP(t *testing.T) {
	t.Parallel()
	s := newStack(t, []runtime.Server{chattyUpstream(t)}, &policiestest.BeforeToolCallHook{Module: "allow"}, "")
	checkOrderHTTP(t, s.p, chattyBody, chattyN, 3)
}

// TestNotificationsBeforeTheAnswerHTTPUpstream: the same through an
// upstream server over streamable HTTP (go-sdk's server, over a real HTTP
// listener), whether its transport is Resolve's or go-sdk's own
// (an embedder's): 10,000 log lines, none dropped.
func TestNotificationsBeforeTheAnswerHTTPUpstream(t *testing.T) {
	t.Parallel()
	const n = 10000
	up := chattyServer(n)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name string
		sv   runtime.Server
	}{
		{"resolved", runtime.Server{Name: "up", Entry: config.ServerEntry{URL: srv.URL, Transport: "streamable-http"}}},
		{"go-sdk transport", runtime.Server{Name: "up", Transport: &mcp.StreamableClientTransport{Endpoint: srv.URL}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, []runtime.Server{tc.sv}, &policiestest.BeforeToolCallHook{Module: "allow"}, "2025-11-25")
			checkOrderHTTP(t, s.p, chattyLogsBody, n, 1)
		})
	}
}

// checkOrderHTTP calls the chatty tool (n log lines, and as many progress
// steps when body asks for them) calls times on a session of p's /mcp and
// checks the order of each POST stream (checkOrder), then that p dropped
// none.
func checkOrderHTTP(t *testing.T, p *Proxy, body string, n, calls int) {
	t.Helper()
	h, err := NewHTTPHandler(p, &HTTPOptions{NoAuth: true, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	post := func(sid, body string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+PathMCP, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := post("", initBody)
	sid := res.Header.Get("Mcp-Session-Id")
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	for _, b := range []string{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, setLevelBody} {
		res := post(sid, b)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	for range calls {
		res = post(sid, body)
		if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("a call that streams was answered %q, want an SSE stream", ct)
		}
		steps := 0
		if strings.Contains(body, "progressToken") {
			steps = n
		}
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		checkOrder(t, n, steps, func() (string, bool) {
			for sc.Scan() {
				if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					return data, true
				}
			}
			return "", false
		})
		res.Body.Close()
	}
	if logs, progress := p.NotificationsDropped(); logs != 0 || progress != 0 {
		t.Fatalf("dropped %d log lines and %d progress steps", logs, progress)
	}
}

// TestNotificationsBeforeTheAnswerStdio: the same on the stdio surface.
func TestNotificationsBeforeTheAnswerStdio(t *testing.T) {
	t.Parallel()
	s := newStack(t, []runtime.Server{chattyUpstream(t)}, &policiestest.BeforeToolCallHook{Module: "allow"}, "")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	tr := transport.NewServeStdioTransport(inR, outW, &transport.ServeStdioOptions{Logger: discard()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.p.Server().Run(ctx, tr)
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		cancel()
		_ = outR.Close()
		<-done
	})
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	next := func() (string, bool) {
		if lines.Scan() {
			return lines.Text(), true
		}
		return "", false
	}
	for _, b := range []string{initBody, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, setLevelBody} {
		if _, err := io.WriteString(inW, b+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	// The level is set upstream once logging/setLevel is answered.
	for {
		line, ok := next()
		if !ok {
			t.Fatal("stdout ended before logging/setLevel was answered")
		}
		if strings.HasPrefix(line, `{"jsonrpc":"2.0","id":2,`) {
			break
		}
	}
	for range 3 {
		if _, err := io.WriteString(inW, chattyBody+"\n"); err != nil {
			t.Fatal(err)
		}
		checkOrder(t, chattyN, chattyN, next)
	}
}
