package proxy

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/transport"
)

const (
	slowCallBody = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"up__slow","arguments":{}}}`
	cancel5Body  = `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"user pressed stop"}}`
)

// TestCancelledRequestGetsNoAnswerHTTP: a request the client cancels is
// not answered on its POST stream, which still ends.
func TestCancelledRequestGetsNoAnswerHTTP(t *testing.T) {
	t.Parallel()
	f := newHTTPFixture(t, HTTPOptions{NoAuth: true})
	post := func(sid, body string) *http.Response {
		req, _ := http.NewRequest("POST", f.url+PathMCP, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	drain := func(res *http.Response) string {
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	res := post("", initBody)
	sid := res.Header.Get("Mcp-Session-Id")
	drain(res)
	drain(post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	answer := make(chan string, 1)
	go func() { answer <- drain(post(sid, slowCallBody)) }() // headers come with the first event
	<-f.slowStarted
	if res := post(sid, cancel5Body); res.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", res.StatusCode, drain(res))
	} else {
		drain(res)
	}
	if got := <-answer; strings.Contains(got, `"id":5`) {
		t.Fatalf("the cancelled request was answered: %s", got)
	}
}

// TestCancelledRequestGetsNoAnswerStdio: the same over stdio.
func TestCancelledRequestGetsNoAnswerStdio(t *testing.T) {
	t.Parallel()
	f := newHTTPFixture(t, HTTPOptions{NoAuth: true})
	returned := callReturned(f)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	tr := transport.NewServeStdioTransport(inR, outW, &transport.ServeStdioOptions{Logger: discard()})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.p.Server().Run(context.Background(), tr)
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		_ = outR.Close()
		<-done
	})
	lines := make(chan string, 64) // stdout is a pipe: read it as it comes
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	send := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	cancelThenPing(t, f, returned, send, lines, "stdout")
}

// TestCancelledRequestGetsNoAnswerSSE: the same on the legacy SSE
// endpoint, whose answers share the session's GET stream.
func TestCancelledRequestGetsNoAnswerSSE(t *testing.T) {
	t.Parallel()
	f := newHTTPFixture(t, HTTPOptions{NoAuth: true})
	returned := callReturned(f)
	req, _ := http.NewRequest("GET", f.url+PathSSE, nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	data := make(chan string, 64)
	go func() {
		defer close(data)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data <- d
			}
		}
	}()
	endpoint := <-data
	send := func(body string) {
		code, _, got := do(t, "POST", f.url+endpoint, map[string]string{"Content-Type": "application/json"}, body)
		if code != http.StatusAccepted {
			t.Fatalf("POST %s: %d %s", body, code, got)
		}
	}
	cancelThenPing(t, f, returned, send, data, "the SSE stream")
}

// callReturned closes the returned channel once the proxy's tools/call
// handler has returned (go-sdk writes or drops its answer next).
func callReturned(f *httpFixture) <-chan struct{} {
	var once sync.Once
	returned := make(chan struct{})
	f.p.Server().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "tools/call" {
				once.Do(func() { close(returned) })
			}
			return res, err
		}
	})
	return returned
}

// cancelThenPing initializes a session through send, starts the slow call
// (id 5), cancels it once it runs, pings (id 77) once its handler returned,
// and fails if msgs (what the client reads from where) carries an answer
// to the cancelled call before the ping's.
func cancelThenPing(t *testing.T, f *httpFixture, returned <-chan struct{}, send func(string), msgs <-chan string, where string) {
	t.Helper()
	send(initBody)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(slowCallBody)
	<-f.slowStarted
	send(cancel5Body)
	<-returned
	send(`{"jsonrpc":"2.0","id":77,"method":"ping"}`)
	for m := range msgs {
		if strings.Contains(m, `"id":5`) {
			t.Fatalf("the cancelled request was answered: %s", m)
		}
		if strings.Contains(m, `"id":77`) {
			return
		}
	}
	t.Fatalf("%s ended before the ping was answered", where)
}
