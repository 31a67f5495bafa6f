package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/proxy"
)

// TestMCPProxyDrainSIGTERM runs the built binary with --log-format json in
// front of server-everything. A tool call is held open (the server elicits
// during it; the client answers only when the test says so); SIGTERM then
// makes /readyz answer 503 naming draining and a new initialize 503 with
// Retry-After, while the session already open is still served: the
// client's answer to the elicitation gets through, the call completes with
// it, and the proxy exits 0. Every line the proxy logs is a JSON object
// with time, level and msg.
func TestMCPProxyDrainSIGTERM(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	hp := startHTTPProxy(t, ctx, []string{proxyTokenEnv + "=drain-token"}, "--log-format", "json")
	hc := &http.Client{Transport: bearerTransport{token: "drain-token"}}
	auth := map[string]string{"Authorization": "Bearer drain-token"}
	// A refused connection fails the test: the listener stays open while
	// the proxy drains.
	get := func(path string) (int, string) { return hp.get(t, path, auth) }
	if code, body := get(proxy.PathReady); code != http.StatusOK || !strings.Contains(body, `"ready":true`) {
		t.Fatalf("/readyz before SIGTERM = %d %s, want 200\n%s", code, body, hp.stderr.String())
	}

	asked, answer := make(chan struct{}), make(chan struct{})
	client := mcp.NewClient(&mcp.Implementation{Name: "drain-client", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			close(asked)
			select {
			case <-answer:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada drained"}}, nil
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hp.base + proxy.PathMCP, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__trigger-elicitation-request"})
		done <- result{res, err}
	}()
	<-asked // the call is in flight, waiting for the client
	if err := hp.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var code int
	var body string
	for {
		if code, body = get(proxy.PathReady); code != http.StatusOK {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling, not a pass/fail timing
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"draining"`) {
		t.Fatalf("/readyz after SIGTERM with a call in flight = %d %s, want 503 naming draining\n%s", code, body, hp.stderr.String())
	}
	if code, body := get(proxy.PathHealth); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz while draining = %d %s, want 503", code, body)
	}
	if _, body := get(proxy.PathMetrics); !strings.Contains(body, "openclaw_proxy_draining 1") || !strings.Contains(body, "openclaw_proxy_ready 0") {
		t.Errorf("metrics while draining lack openclaw_proxy_draining 1 / openclaw_proxy_ready 0")
	}
	req, _ := http.NewRequest(http.MethodPost, hp.base+proxy.PathMCP, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"late","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer drain-token")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("initialize while draining: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || !strings.Contains(string(b), `"code":-32004`) {
		t.Errorf("initialize while draining = %d %v %s, want 503 with Retry-After and code -32004", res.StatusCode, res.Header, b)
	}

	close(answer) // the open session's answer is served during the drain
	r := <-done
	var texts []string
	if r.err == nil {
		for _, c := range r.res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
	}
	if r.err != nil || r.res.IsError || !strings.Contains(strings.Join(texts, "\n"), "Ada drained") {
		t.Fatalf("call in flight at SIGTERM = %+v, %v; want the client's answer in its result\n%s", r.res, r.err, hp.stderr.String())
	}
	if err := <-hp.exited; err != nil {
		t.Fatalf("proxy exit = %v, want 0\n%s", err, hp.stderr.String())
	}
	logged := strings.Split(strings.TrimSpace(hp.stderr.String()), "\n")
	sawDrain := false
	for _, line := range logged {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("--log-format json: a stderr line is not JSON: %q", line)
			continue
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("--log-format json: line %q has no %q", line, k)
			}
		}
		if strings.Contains(fmt.Sprint(rec["msg"]), "draining") && rec["timeout"] == "10s" {
			sawDrain = true
		}
	}
	if !sawDrain {
		t.Errorf("no JSON record of the drain (msg ... draining, with its timeout) on stderr:\n%s", hp.stderr.String())
	}
}
