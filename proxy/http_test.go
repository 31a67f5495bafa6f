package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/runtime"
)

// blocker is a before_tool_call module "blocker" that blocks tools whose
// raw name is "reset" and asks approval for "guarded".
func blocker() *policiestest.BeforeToolCallHook {
	return &policiestest.BeforeToolCallHook{Module: "blocker",
		Decide: func(_ context.Context, call *policies.ToolCall) (policies.Verdict, error) {
			switch call.Tool.RawName {
			case "reset":
				return policies.Verdict{Decision: policies.Block, Reason: "resets are disabled"}, nil
			case "guarded":
				return policies.Verdict{Decision: policies.RequireApproval, Title: "guarded?"}, nil
			}
			return policies.Verdict{Decision: policies.Allow}, nil
		}}
}

// httpFixture is a proxy over one in-process upstream server (tools echo,
// reset, slow) served over HTTP on 127.0.0.1.
type httpFixture struct {
	p       *Proxy
	h       *HTTPHandler
	metrics *Metrics
	url     string // http://127.0.0.1:PORT
	// slowStarted receives when the upstream slow tool starts; it returns
	// when release is closed.
	slowStarted chan struct{}
	release     chan struct{}
	cancel      context.CancelFunc // starts the graceful shutdown
	serveDone   chan struct{}      // closed when Serve has returned
	serveErr    error              // what Serve returned, once serveDone is closed
	// protocols are the MCP-Protocol-Version headers the server saw;
	// callers the caller names before_tool_call saw, by message argument.
	mu        sync.Mutex
	protocols map[string]bool
	callers   map[string]string
	idents    map[string]*policies.Identity // the identity before_tool_call saw, by message argument
}

func newHTTPFixture(t testing.TB, opts HTTPOptions) *httpFixture {
	t.Helper()
	return newTracedHTTPFixture(t, opts, nil)
}

// newTracedHTTPFixture is newHTTPFixture with tp tracing the runtime and
// the proxy (nil: no tracing).
func newTracedHTTPFixture(t testing.TB, opts HTTPOptions, tp trace.TracerProvider) *httpFixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	f := &httpFixture{slowStarted: make(chan struct{}, 4), release: make(chan struct{}), protocols: map[string]bool{}, callers: map[string]string{}, idents: map[string]*policies.Identity{}}

	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}}}`)
	up.AddTool(&mcp.Tool{Name: "echo", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Message string }
		_ = json.Unmarshal(req.Params.Arguments, &a)
		return text("echo: " + a.Message), nil
	})
	up.AddTool(&mcp.Tool{Name: "reset", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("reset done"), nil
	})
	up.AddTool(&mcp.Tool{Name: "guarded", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Message string }
		_ = json.Unmarshal(req.Params.Arguments, &a)
		return &mcp.CallToolResult{IsError: strings.Contains(a.Message, "fail"), Content: []mcp.Content{&mcp.TextContent{Text: "guarded: " + a.Message}}}, nil
	})
	up.AddTool(&mcp.Tool{Name: "fail", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it failed"}}}, nil
	})
	up.AddTool(&mcp.Tool{Name: "slow", InputSchema: obj}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		f.slowStarted <- struct{}{}
		select {
		case <-f.release:
			return text("slow done"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	upClient := testkit.InMemory(t, up)

	f.metrics = NewMetrics()
	sess, err := runtime.New([]runtime.Server{{Name: "up", Transport: upClient}}, &runtime.Options{
		Enforcer:  f.metrics.Enforcer(callerLog{f, policies.NewChain([]policies.ChainEntry{{Hook: blocker()}}, nil)}),
		Surface:   policies.SurfaceProxy,
		Sanitizer: &policiestest.Sanitizer{},
		// The human approves when the arguments say yes.
		AskHuman: f.metrics.AskHuman(func(_ context.Context, req *runtime.ApprovalRequest) (bool, error) {
			return strings.Contains(string(req.Arguments), "yes"), nil
		}),
		TracerProvider: tp,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	if err := sess.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if f.p, err = New(ctx, sess, &Options{TracerProvider: tp}); err != nil {
		t.Fatal(err)
	}
	f.metrics.Instrument(f.p)
	opts.Metrics = f.metrics
	opts.Servers = sess.Status
	if f.h, err = NewHTTPHandler(f.p, &opts); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.url = "http://" + ln.Addr().String()
	sctx, scancel := context.WithCancel(context.Background())
	f.cancel = scancel
	f.serveDone = make(chan struct{})
	srv := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The revision a session settled on (a 2026-07-28 probe that fell
		// back to initialize does not count).
		if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && r.Header.Get("Mcp-Method") != "server/discover" {
			f.mu.Lock()
			f.protocols[v] = true
			f.mu.Unlock()
		}
		f.h.ServeHTTP(w, r)
	}))
	go func() {
		defer close(f.serveDone)
		f.serveErr = serveWith(sctx, f.h, srv, ln)
	}()
	t.Cleanup(func() {
		select {
		case <-f.release:
		default:
			close(f.release)
		}
		scancel()
		<-f.serveDone
	})
	return f
}

// serveWith runs h.Serve with a recording handler in front: the handler
// is swapped through a copy that keeps h's drain state.
func serveWith(ctx context.Context, h *HTTPHandler, front http.Handler, ln net.Listener) error {
	return h.serve(ctx, ln, front)
}

// callerLog notes the caller of every call by its message argument.
type callerLog struct {
	f    *httpFixture
	next policies.Enforcer
}

func (c callerLog) BeforeToolCall(ctx context.Context, call *policies.ToolCall) policies.Outcome {
	var a struct{ Message string }
	_ = json.Unmarshal(call.Arguments, &a)
	c.f.mu.Lock()
	c.f.callers[a.Message] = call.Caller.Name
	c.f.idents[a.Message] = call.Identity
	c.f.mu.Unlock()
	return c.next.BeforeToolCall(ctx, call)
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func (f *httpFixture) connect(t testing.TB, ctx context.Context, tr mcp.Transport, version string) *mcp.ClientSession {
	t.Helper()
	// A list-changed handler makes a 2026-07-28 client hold a
	// subscriptions/listen stream open, which shutdown must end.
	client := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
	})
	cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect (%s): %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callText(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	if len(res.Content) == 0 {
		t.Fatalf("tools/call %s: no content", name)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("tools/call %s: content %T", name, res.Content[0])
	}
	return tc.Text, res.IsError
}

func TestHTTPTransportsAndRevisions(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token"
	f := newHTTPFixture(t, HTTPOptions{Token: token, ListenHost: "127.0.0.1"})
	hc := &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}}
	tests := []struct {
		name, version string
		transport     func() mcp.Transport
	}{
		{"streamable 2025-11-25", "2025-11-25", func() mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: f.url + PathMCP, HTTPClient: hc}
		}},
		{"streamable 2026-07-28", "2026-07-28", func() mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: f.url + PathMCP, HTTPClient: hc}
		}},
		{"legacy SSE", "2024-11-05", func() mcp.Transport {
			return &mcp.SSEClientTransport{Endpoint: f.url + PathSSE, HTTPClient: hc}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs := f.connect(t, ctx, tc.transport(), tc.version)
			list, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			var names []string
			for _, tl := range list.Tools {
				names = append(names, tl.Name)
			}
			if strings.Join(names, ",") != "up__echo,up__fail,up__guarded,up__reset,up__slow" {
				t.Fatalf("tools = %v", names)
			}
			if got, isErr := callText(t, ctx, cs, "up__echo", map[string]any{"message": tc.name}); isErr || got != "echo: "+tc.name {
				t.Fatalf("echo = %q (isError %v)", got, isErr)
			}
			f.mu.Lock()
			caller := f.callers[tc.name]
			f.mu.Unlock()
			if caller != "http-client" {
				t.Errorf("before_tool_call saw caller %q, want the client's name http-client", caller)
			}
			if got, isErr := callText(t, ctx, cs, "up__reset", nil); !isErr || !strings.Contains(got, "resets are disabled") {
				t.Fatalf("reset = %q (isError %v), want the block reason", got, isErr)
			}
		})
	}
	t.Cleanup(func() {
		// Both streamable revisions were spoken after the handshake.
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, v := range []string{"2025-11-25", "2026-07-28"} {
			if !f.protocols[v] {
				t.Errorf("no request with MCP-Protocol-Version %s; saw %v", v, f.protocols)
			}
		}
	})
}

// do sends one request to the fixture and returns the status, the
// WWW-Authenticate header and the body.
func do(t *testing.T, method, url string, header map[string]string, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("WWW-Authenticate"), string(b)
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestHTTPAuthAndOrigin(t *testing.T) {
	t.Parallel()
	const token = "right-token"
	f := newHTTPFixture(t, HTTPOptions{Token: token, ListenHost: "127.0.0.1", AllowOrigins: []string{"https://App.Example.com/"}})
	mcpHdr := func(kv ...string) map[string]string {
		h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	tests := []struct {
		name, method, path string
		header             map[string]string
		body               string
		want               int
		wantAuth           string // WWW-Authenticate prefix
		wantBody           string
	}{
		{"mcp without token", "POST", PathMCP, mcpHdr(), initBody, 401, "Bearer", "missing bearer token"},
		{"mcp wrong token", "POST", PathMCP, mcpHdr("Authorization", "Bearer wrong-token"), initBody, 401, "Bearer", "invalid bearer token"},
		{"mcp other scheme", "POST", PathMCP, mcpHdr("Authorization", "Basic "+token), initBody, 401, "Bearer", "missing bearer token"},
		{"mcp right token", "POST", PathMCP, mcpHdr("Authorization", "Bearer "+token), initBody, 200, "", `"protocolVersion"`},
		{"sse without token", "GET", PathSSE, nil, "", 401, "Bearer", ""},
		{"sse message without token", "POST", PathSSE + "?sessionid=x", mcpHdr(), initBody, 401, "Bearer", ""},
		{"metrics without token", "GET", PathMetrics, nil, "", 401, "Bearer", ""},
		{"metrics with token", "GET", PathMetrics, mcpHdr("Authorization", "Bearer "+token), "", 200, "", "openclaw_proxy_tool_calls_in_flight"},
		{"healthz without token", "GET", PathHealth, nil, "", 200, "", `"ok":true`},
		{"foreign origin", "POST", PathMCP, mcpHdr("Authorization", "Bearer "+token, "Origin", "http://evil.example.com"), initBody, 403, "", "not allowed"},
		{"foreign origin on healthz", "GET", PathHealth, map[string]string{"Origin": "http://evil.example.com:8765"}, "", 403, "", "not allowed"},
		{"null origin", "POST", PathMCP, mcpHdr("Authorization", "Bearer "+token, "Origin", "null"), initBody, 403, "", "not allowed"},
		{"loopback origin", "POST", PathMCP, mcpHdr("Authorization", "Bearer "+token, "Origin", "http://localhost:3000"), initBody, 200, "", `"protocolVersion"`},
		{"allowed origin", "POST", PathMCP, mcpHdr("Authorization", "Bearer "+token, "Origin", "https://app.example.com"), initBody, 200, "", `"protocolVersion"`},
		{"allowed origin other port", "POST", PathMCP, mcpHdr("Authorization", "Bearer "+token, "Origin", "https://app.example.com:444"), initBody, 403, "", "not allowed"},
		// The DNS rebinding guard: loopback listener, foreign Host.
		{"foreign host", "POST", PathMCP, mcpHdr("Authorization", "Bearer "+token, "Host", "evil.example.com"), initBody, 403, "", `Host "evil.example.com" is not allowed`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequest(tc.method, f.url+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			if h := tc.header["Host"]; h != "" {
				req.Host = h
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.want {
				t.Fatalf("status = %d, want %d; body %s", res.StatusCode, tc.want, b)
			}
			if got := res.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, tc.wantAuth) || (tc.wantAuth == "" && got != "") {
				t.Errorf("WWW-Authenticate = %q, want %q…", got, tc.wantAuth)
			}
			if !strings.Contains(string(b), tc.wantBody) {
				t.Errorf("body = %s, want it to contain %q", b, tc.wantBody)
			}
		})
	}
}

func TestHTTPNoAuthAndOptions(t *testing.T) {
	t.Parallel()
	f := newHTTPFixture(t, HTTPOptions{NoAuth: true})
	code, _, body := do(t, "POST", f.url+PathMCP, map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}, initBody)
	if code != 200 || !strings.Contains(body, `"protocolVersion"`) {
		t.Fatalf("NoAuth initialize = %d %s", code, body)
	}
	for _, tc := range []struct {
		name string
		opts *HTTPOptions
		want string
	}{
		{"nil", nil, "options are required"},
		{"no token", &HTTPOptions{}, "needs a bearer token"},
		{"both", &HTTPOptions{Token: "x", NoAuth: true}, "both"},
		{"bad origin", &HTTPOptions{Token: "x", AllowOrigins: []string{"app.example.com"}}, `allowed origin "app.example.com"`},
	} {
		if _, err := NewHTTPHandler(f.p, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	f := newHTTPFixture(t, HTTPOptions{Token: "t"})
	code, _, body := do(t, "GET", f.url+PathHealth, nil, "")
	var got struct {
		OK      bool `json:"ok"`
		Tools   int  `json:"tools"`
		Servers struct {
			Connected, Total int
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || code != 200 {
		t.Fatalf("healthz = %d %s (%v)", code, body, err)
	}
	if !got.OK || got.Tools != 5 || got.Servers.Connected != 1 || got.Servers.Total != 1 {
		t.Fatalf("healthz = %s, want ok, 5 tools, 1/1 server connected", body)
	}
	if strings.Contains(body, "\"t\"") {
		t.Fatalf("healthz leaks the token: %s", body)
	}
}

func TestMetricsCountCallsAndBlocks(t *testing.T) {
	t.Parallel()
	const token = "m"
	f := newHTTPFixture(t, HTTPOptions{Token: token})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}}
	cs := f.connect(t, ctx, &mcp.StreamableClientTransport{Endpoint: f.url + PathMCP, HTTPClient: hc}, "2025-11-25")
	callText(t, ctx, cs, "up__echo", map[string]any{"message": "a"})
	callText(t, ctx, cs, "up__echo", map[string]any{"message": "b"})
	callText(t, ctx, cs, "up__reset", nil)
	callText(t, ctx, cs, "up__fail", nil)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"}); err == nil {
		t.Fatal("unknown tool: no error")
	}
	// require_approval: approved and fine, approved and failing, refused.
	for msg, wantErr := range map[string]bool{"yes": false, "yes but fail": true, "no": true} {
		if _, isErr := callText(t, ctx, cs, "up__guarded", map[string]any{"message": msg}); isErr != wantErr {
			t.Fatalf("guarded %q: isError %v, want %v", msg, isErr, wantErr)
		}
	}
	code, _, body := do(t, "GET", f.url+PathMetrics, map[string]string{"Authorization": "Bearer " + token}, "")
	if code != 200 {
		t.Fatalf("metrics = %d %s", code, body)
	}
	for _, want := range []string{
		`openclaw_proxy_tool_calls_total{outcome="ok",tool="up__echo"} 2`,
		`openclaw_proxy_tool_calls_total{outcome="blocked",tool="up__reset"} 1`,
		`openclaw_proxy_tool_calls_total{outcome="tool_error",tool="up__fail"} 1`,
		`openclaw_proxy_tool_calls_total{outcome="error",tool="(unrouted)"} 1`,
		`openclaw_proxy_tool_call_duration_seconds_count{tool="up__echo"} 2`,
		`openclaw_policy_decisions_total{decision="allow",hook="before_tool_call"} 3`,
		`openclaw_policy_decisions_total{decision="require_approval",hook="before_tool_call"} 3`,
		`openclaw_proxy_tool_calls_total{outcome="ok",tool="up__guarded"} 1`,
		`openclaw_proxy_tool_calls_total{outcome="tool_error",tool="up__guarded"} 1`,
		`openclaw_proxy_tool_calls_total{outcome="blocked",tool="up__guarded"} 1`,
		`openclaw_policy_decisions_total{decision="block",hook="before_tool_call"} 1`,
		`openclaw_proxy_tool_calls_in_flight 0`,
		`process_resident_memory_bytes`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(body, "no_such_tool") {
		t.Error("an unknown tool name became a label")
	}
}

// TestGracefulShutdown: once Serve's context ends with a call in flight, the proxy
// still answers: /readyz 503 naming draining, a new session (initialize,
// GET /sse) and a sessionless request 503 with Retry-After and
// CodeDraining, while a session already open is served; the call in
// flight completes and Serve returns nil.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		version string
		sse     bool
	}{{"streamable 2025-11-25", "2025-11-25", false}, {"streamable 2026-07-28", "2026-07-28", false}, {"legacy SSE", "2024-11-05", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const token = "d"
			f := newHTTPFixture(t, HTTPOptions{Token: token})
			auth := map[string]string{"Authorization": "Bearer " + token}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			hc := &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}}
			var tr mcp.Transport = &mcp.StreamableClientTransport{Endpoint: f.url + PathMCP, HTTPClient: hc}
			if tc.sse {
				tr = &mcp.SSEClientTransport{Endpoint: f.url + PathSSE, HTTPClient: hc}
			}
			cs := f.connect(t, ctx, tr, tc.version)
			if code, _, body := getWith(t, f.url+PathReady, nil); code != http.StatusOK {
				t.Fatalf("/readyz before the drain = %d %s", code, body)
			}
			done := make(chan error, 1)
			go func() {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__slow"})
				if err == nil && res.Content[0].(*mcp.TextContent).Text != "slow done" {
					err = errors.New("unexpected result")
				}
				done <- err
			}()
			<-f.slowStarted
			f.cancel() // the drain begins with the call in flight
			var code int
			var body string
			for {
				code, _, body = getWith(t, f.url+PathReady, nil)
				if code == 0 {
					t.Fatalf("/readyz at the drain: %s, want an answer while calls are in flight", body)
				}
				if code != http.StatusOK {
					break
				}
				time.Sleep(5 * time.Millisecond) // polling, not a pass/fail timing
			}
			if r := readyBody(t, body); code != http.StatusServiceUnavailable || r.NotReady["draining"] == "" {
				t.Fatalf("/readyz while draining = %d %s, want 503 naming draining", code, body)
			}
			if _, _, m := getWith(t, f.url+PathMetrics, auth); !strings.Contains(m, "openclaw_proxy_draining 1") || !strings.Contains(m, "openclaw_proxy_ready 0") {
				t.Errorf("metrics while draining lack openclaw_proxy_draining 1 / openclaw_proxy_ready 0:\n%s", m)
			}

			// A new session, and a sessionless request, go elsewhere.
			for _, req := range []struct{ what, version, body string }{
				{"initialize", "", `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"late","version":"1"}}}`},
				{"a 2026-07-28 request", "2026-07-28", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`},
			} {
				r, _ := http.NewRequest(http.MethodPost, f.url+PathMCP, strings.NewReader(req.body))
				r.Header.Set("Authorization", "Bearer "+token)
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Accept", "application/json, text/event-stream")
				if req.version != "" {
					r.Header.Set("Mcp-Protocol-Version", req.version)
					r.Header.Set("Mcp-Method", "tools/list")
				}
				res, err := http.DefaultClient.Do(r)
				if err != nil {
					t.Fatalf("%s while draining: %v", req.what, err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				var msg struct {
					ID    int `json:"id"`
					Error struct{ Code int64 }
				}
				_ = json.Unmarshal(b, &msg)
				if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || msg.Error.Code != CodeDraining || msg.ID != 7 {
					t.Errorf("%s while draining = %d Retry-After %q %s, want 503 with Retry-After and code %d", req.what, res.StatusCode, res.Header.Get("Retry-After"), b, CodeDraining)
				}
			}
			if code, h, body := getWith(t, f.url+PathSSE, auth); code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
				t.Errorf("GET /sse while draining = %d %s, want 503 with Retry-After", code, body)
			}

			// A session open here is served (its state is here); a
			// 2026-07-28 client has none, and goes elsewhere.
			_, err := cs.ListTools(ctx, nil)
			if sessionless := tc.version >= sessionlessRevision; sessionless != (err != nil) {
				t.Errorf("tools/list of the open %s session while draining: %v", tc.version, err)
			}

			close(f.release)
			if err := <-done; err != nil {
				t.Fatalf("call in flight at the drain: %v, want its result", err)
			}
			if <-f.serveDone; f.serveErr != nil {
				t.Fatalf("Serve = %v, want nil after the drain", f.serveErr)
			}
		})
	}
}

func TestShutdownTimeoutCutsOff(t *testing.T) {
	t.Parallel()
	const token = "c"
	f := newHTTPFixture(t, HTTPOptions{Token: token, ShutdownTimeout: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}}
	cs := f.connect(t, ctx, &mcp.StreamableClientTransport{Endpoint: f.url + PathMCP, HTTPClient: hc, MaxRetries: -1}, "2025-11-25")
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__slow"})
		done <- err
	}()
	<-f.slowStarted
	f.cancel()
	<-f.serveDone
	err := f.serveErr
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Serve = %v, want the shutdown deadline", err)
	}
	if err := <-done; err == nil {
		t.Fatal("a call cut off by the shutdown timeout got a result")
	}
}

func TestIsLoopbackHost(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.8.9.10": true, "::1": true, "[::1]": true, "localhost": true, "LOCALHOST": true,
		"0.0.0.0": false, "::": false, "": false, "10.0.0.1": false, "example.com": false, "localhost.evil.com": false,
	} {
		if got := IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// BenchmarkToolCallTracing measures one tools/call through the proxy's
// HTTP handler (streamable, 2025-11-25) to an in-process upstream, with
// tracing off (no TracerProvider) and on (the SDK, every span sampled and
// batched to an exporter that drops them: the call path's share of
// tracing, without the export).
func BenchmarkToolCallTracing(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			var tp trace.TracerProvider
			if on {
				sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
				b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
				tp = sdk
			}
			f := newTracedHTTPFixture(b, HTTPOptions{Token: "bench"}, tp)
			ctx := context.Background()
			hc := &http.Client{Transport: bearer{token: "bench", base: http.DefaultTransport}}
			cs := f.connect(b, ctx, &mcp.StreamableClientTransport{Endpoint: f.url + PathMCP, HTTPClient: hc}, "2025-11-25")
			params := &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"message": "bench"},
				Meta: mcp.Meta{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
			for b.Loop() {
				if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
					b.Fatalf("call: %v %+v", err, res)
				}
			}
		})
	}
}

// discardExporter is a span exporter that drops every span.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkToolCall measures one tools/call through the proxy to an
// in-process upstream: over an in-memory transport (the proxy alone) and
// over HTTP with the token, metrics and Origin check (what HTTP serving
// adds).
func BenchmarkToolCall(b *testing.B) {
	for _, mode := range []string{"in-memory", "streamable 2025-11-25", "streamable 2026-07-28", "legacy SSE"} {
		b.Run(mode, func(b *testing.B) {
			f := newHTTPFixture(b, HTTPOptions{Token: "bench"})
			ctx := context.Background()
			hc := &http.Client{Transport: bearer{token: "bench", base: http.DefaultTransport}}
			var tr mcp.Transport
			version := ""
			switch mode {
			case "in-memory":
				cEnd, sEnd := mcp.NewInMemoryTransports()
				ss, err := f.p.Server().Connect(ctx, sEnd, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = ss.Close() })
				tr = cEnd
			case "legacy SSE":
				tr = &mcp.SSEClientTransport{Endpoint: f.url + PathSSE, HTTPClient: hc}
			default:
				version = strings.TrimPrefix(mode, "streamable ")
				tr = &mcp.StreamableClientTransport{Endpoint: f.url + PathMCP, HTTPClient: hc}
			}
			cs := f.connect(b, ctx, tr, version)
			params := &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"message": "bench"}}
			b.ResetTimer()
			for b.Loop() {
				if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
					b.Fatalf("call: %v %+v", err, res)
				}
			}
		})
	}
}

// TestHTTPStatelessHeaders: on 2026-07-28 a POST is a whole request, and
// its Mcp-Method and Mcp-Name headers must agree with its body: a mismatch
// or a missing Mcp-Name is answered 400 with HeaderMismatch (-32020), the
// same request with the right headers is served.
func TestHTTPStatelessHeaders(t *testing.T) {
	t.Parallel()
	f := newHTTPFixture(t, HTTPOptions{Token: "tok"})
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo","arguments":{"message":"hi"},` + meta + `}}`
	base := map[string]string{"Authorization": "Bearer tok", "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}
	with := func(k, v string) map[string]string {
		h := maps.Clone(base)
		if v != "" {
			h[k] = v
		}
		return h
	}
	for _, tc := range []struct {
		name   string
		header map[string]string
		status int
		want   string
	}{
		{"wrong Mcp-Name", with("Mcp-Name", "up__other"), http.StatusBadRequest, "-32020"},
		{"no Mcp-Name", with("Mcp-Name", ""), http.StatusBadRequest, "-32020"},
		{"wrong Mcp-Method", with("Mcp-Method", "tools/list"), http.StatusBadRequest, "-32020"},
		{"agreeing headers", with("Mcp-Name", "up__echo"), http.StatusOK, "echo: hi"},
	} {
		if tc.name == "wrong Mcp-Method" {
			tc.header["Mcp-Name"] = "up__echo"
		}
		status, _, got := do(t, http.MethodPost, f.url+PathMCP, tc.header, body)
		if status != tc.status || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %d %s, want %d with %s", tc.name, status, got, tc.status, tc.want)
		}
	}
}

// TestHTTPAnswerIsJSON: a POST whose request streams nothing before its
// answer (no progress, no log line, no server request) is answered with the
// JSON-RPC response as an application/json body, on a session (2025-11-25,
// initialize included) and sessionless (2026-07-28); the streaming calls
// stay SSE streams (checkOrderHTTP).
func TestHTTPAnswerIsJSON(t *testing.T) {
	t.Parallel()
	f := newHTTPFixture(t, HTTPOptions{NoAuth: true})
	post := func(header map[string]string, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", f.url+PathMCP, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	isJSONAnswer := func(what string, res *http.Response, body string, id int64) {
		t.Helper()
		if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || ct != "application/json" || res.ContentLength != int64(len(body)) {
			t.Fatalf("%s: %d %q (Content-Length %d) %s, want 200 application/json with the answer", what, res.StatusCode, ct, res.ContentLength, body)
		}
		m, err := jsonrpc.DecodeMessage([]byte(body))
		if r, ok := m.(*jsonrpc.Response); err != nil || !ok || r.ID.Raw() != id || r.Error != nil {
			t.Fatalf("%s: body %s is not the answer to id %d (%v)", what, body, id, err)
		}
	}
	res, body := post(nil, initBody)
	isJSONAnswer("initialize", res, body, 1)
	sid := res.Header.Get("Mcp-Session-Id")
	session := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	if res, _ := post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); res.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", res.StatusCode)
	}
	res, body = post(session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","arguments":{"message":"hi"}}}`)
	isJSONAnswer("tools/call on a session", res, body, 2)
	if !strings.Contains(body, "echo: hi") {
		t.Fatalf("tools/call answered %s", body)
	}
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	res, body = post(map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "up__echo"},
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"up__echo","arguments":{"message":"new"},`+meta+`}}`)
	isJSONAnswer("tools/call sessionless", res, body, 3)
}
