package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/runtime"
)

// leanFixture is a proxy served over HTTP in front of an MCP 2026-07-28
// upstream whose tools answer, fail, ask for input, need a client
// capability, need approval, are blocked, carry a parameter header, or wait
// to be cancelled.
type leanFixture struct {
	p         *Proxy
	url       string
	audit     *policiestest.AuditRecorder
	metrics   *Metrics
	spans     *tracetest.SpanRecorder
	mu        sync.Mutex
	seen      []policies.ToolCall // what the policy saw of each call
	started   chan struct{}       // receives when the upstream "slow" call starts
	cancelled chan struct{}       // receives when the upstream "slow" call ends cancelled
}

func newLeanFixture(t *testing.T) *leanFixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	f := &leanFixture{audit: &policiestest.AuditRecorder{}, metrics: NewMetrics(), spans: tracetest.NewSpanRecorder(), started: make(chan struct{}, 4), cancelled: make(chan struct{}, 4)}
	up := mcp.NewServer(&mcp.Implementation{Name: "up26", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}}}`)
	msg := func(req *mcp.CallToolRequest) string {
		var a struct{ Message string }
		_ = json.Unmarshal(req.Params.Arguments, &a)
		return a.Message
	}
	up.AddTool(&mcp.Tool{Name: "echo", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + msg(req) + " <&>"}},
			StructuredContent: map[string]any{"said": msg(req)}}, nil
	})
	up.AddTool(&mcp.Tool{Name: "fail", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it failed"}}}, nil
	})
	up.AddTool(&mcp.Tool{Name: "reset", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("reset done"), nil
	})
	up.AddTool(&mcp.Tool{Name: "danger", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("deleted"), nil
	})
	ask := mcp.InputRequestMap{"user_name": &mcp.ElicitParams{Mode: "form", Message: "your name?",
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}}
	up.AddTool(&mcp.Tool{Name: "confirm", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := req.Params.InputResponses["user_name"].(*mcp.ElicitResult); ok && req.Params.RequestState == "up-state-1" && r.Action == "accept" {
			return text(fmt.Sprintf("hello %v", r.Content["name"])), nil
		}
		return &mcp.CallToolResult{InputRequests: ask, RequestState: "up-state-1"}, nil
	})
	up.AddTool(&mcp.Tool{Name: "needs_sampling", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		//lint:ignore SA1019 the test drives a server that needs sampling (deprecated by SEP-2577, still served during its deprecation window)
		if c := req.ClientCapabilities(); c == nil || c.Sampling == nil {
			return nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "sampling required",
				Data: json.RawMessage(`{"requiredCapabilities":{"sampling":{}}}`)}
		}
		return text("sampling declared"), nil
	})
	up.AddTool(&mcp.Tool{Name: "keyed", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"opts":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}}}}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("keyed " + string(req.Params.Arguments)), nil
		})
	up.AddTool(&mcp.Tool{Name: "slow", InputSchema: obj}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		f.started <- struct{}{}
		<-ctx.Done()
		f.cancelled <- struct{}{}
		return nil, ctx.Err()
	})

	hook := &policiestest.BeforeToolCallHook{Module: "lean-policy",
		Decide: func(_ context.Context, call *policies.ToolCall) (policies.Verdict, error) {
			f.mu.Lock()
			f.seen = append(f.seen, *call)
			f.mu.Unlock()
			switch call.Tool.RawName {
			case "reset":
				return policies.Verdict{Decision: policies.Block, Reason: "resets are disabled"}, nil
			case "danger":
				return policies.Verdict{Decision: policies.RequireApproval, Title: "Dangerous tool", Reason: "destructive"}, nil
			}
			return policies.Verdict{Decision: policies.Allow}, nil
		}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(f.spans))
	relay := NewRelay()
	opts := runtime.Options{
		TracerProvider: tp,
		Enforcer:       f.metrics.Enforcer(policies.NewChain([]policies.ChainEntry{{Hook: hook}}, &policies.ChainOptions{Audit: f.audit})),
		Sanitizer:      &policiestest.Sanitizer{}, Surface: policies.SurfaceProxy, Logger: discard(), ProtocolVersion: "2026-07-28",
	}
	relay.Install(&opts)
	sess, err := runtime.New([]runtime.Server{{Name: "up", Transport: testkit.InMemory(t, up)}}, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	if err := sess.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if f.p, err = New(ctx, sess, &Options{Relay: relay, Logger: discard(), TracerProvider: tp}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.p.Close() })
	f.metrics.Instrument(f.p)
	h, err := NewHTTPHandler(f.p, &HTTPOptions{Metrics: f.metrics, Logger: discard(),
		Tokens: []StaticToken{{SHA256: sha256.Sum256([]byte("ci-token")), Identity: policies.Identity{Issuer: IssuerTokensFile, Subject: "ci"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.url = "http://" + ln.Addr().String() + PathMCP
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Serve(sctx, ln) }()
	t.Cleanup(func() { stop(); <-done })
	return f
}

// leanAnswer is what a client sees of an answer: the status, the headers
// that matter and the body (normalizeAnswer; Raw as it came).
type leanAnswer struct {
	Status                    int
	ContentType, CacheControl string
	HasLength                 bool
	Body                      string
	Raw                       string `json:"-"`
}

// post sends one 2026-07-28 POST: the standard headers for a tools/call
// of tool (Mcp-Name), then hdr ("" deletes), then body.
// onBothPaths answers a request on the lean path and then on go-sdk's
// (do is told which), and reports the two answers when they differ; the
// lean path is on again afterwards.
func (f *leanFixture) onBothPaths(t *testing.T, name string, do func(lean bool) leanAnswer) {
	t.Helper()
	var got [2]leanAnswer
	for i, lean := range []bool{true, false} {
		f.p.noLean.Store(!lean)
		got[i] = do(lean)
	}
	f.p.noLean.Store(false)
	if got[0] != got[1] {
		t.Errorf("%s:\n lean:   %+v\n go-sdk: %+v", name, got[0], got[1])
	}
}

func (f *leanFixture) post(t *testing.T, ctx context.Context, tool string, hdr map[string]string, body string) (leanAnswer, error) {
	t.Helper()
	return f.send(f.request(t, ctx, tool, hdr, body))
}

// request is the POST that post sends.
func (f *leanFixture) request(t *testing.T, ctx context.Context, tool string, hdr map[string]string, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer ci-token")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return req
}

// send sends req and reads what the client sees of the answer.
func (f *leanFixture) send(req *http.Request) (leanAnswer, error) {
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return leanAnswer{}, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return leanAnswer{Status: res.StatusCode, ContentType: res.Header.Get("Content-Type"), CacheControl: res.Header.Get("Cache-Control"),
		HasLength: res.ContentLength >= 0, Body: normalizeAnswer(string(b)), Raw: string(b)}, nil
}

var (
	stateValue  = regexp.MustCompile(`"requestState":"[^"]*"`)
	randomInput = regexp.MustCompile(`"[A-Z2-7]{26}"`) // rand.Text: an input request's id
)

// normalizeAnswer replaces what differs between two runs of one request:
// the sealed requestState and the ids of the proxy's own input requests.
func normalizeAnswer(body string) string {
	body = stateValue.ReplaceAllString(body, `"requestState":"<state>"`)
	return randomInput.ReplaceAllString(body, `"<id>"`)
}

// stateOf returns the requestState of an input_required answer.
func stateOf(t *testing.T, raw string) string {
	t.Helper()
	var resp struct {
		Result struct {
			RequestState  string                     `json:"requestState"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(raw), &resp); err != nil || resp.Result.RequestState == "" {
		t.Fatalf("no requestState in %s (%v)", raw, err)
	}
	return resp.Result.RequestState
}

// callBody is a 2026-07-28 tools/call of tool with args, caps (the
// declared client capabilities) and extra params members.
func callBody(id int, tool, args, caps, extra string) string {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"golden","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,%s%s}}`, id, tool, args, meta, extra)
}

// TestLeanMatchesGoSDK sends the same 2026-07-28 requests through the lean
// path and through go-sdk's StreamableHTTPHandler (the lean path off) and
// compares what the client gets: status, Content-Type, Cache-Control, a
// Content-Length, and the body (its sealed state and random input ids
// aside). Successes, tool errors, blocked calls, approvals, missing
// capabilities and request states are answered by the lean path; bad
// headers, header/body disagreements, unknown tools, invalid params and
// progress are go-sdk's, and must come out the same.
func TestLeanMatchesGoSDK(t *testing.T) {
	t.Parallel()
	f := newLeanFixture(t)
	ctx := context.Background()
	const noCaps, elicit, sampling = `{}`, `{"elicitation":{}}`, `{"sampling":{}}`
	type step struct {
		tool, body string
		hdr        map[string]string
		lean       bool // the lean path answers it
	}
	one := func(tool, body string, hdr map[string]string, lean bool) func(func(step) leanAnswer) leanAnswer {
		return func(send func(step) leanAnswer) leanAnswer { return send(step{tool, body, hdr, lean}) }
	}
	echo := callBody(1, "up__echo", `{"message":"hi"}`, noCaps, "")
	cases := []struct {
		name string
		run  func(send func(step) leanAnswer) leanAnswer
	}{
		{"success", one("up__echo", echo, nil, true)},
		{"string id", one("up__echo", strings.Replace(echo, `"id":1`, `"id":"abc"`, 1), nil, true)},
		{"no arguments", one("up__echo", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, nil, true)},
		{"tool error", one("up__fail", callBody(3, "up__fail", `{}`, noCaps, ""), nil, true)},
		{"blocked", one("up__reset", callBody(4, "up__reset", `{}`, noCaps, ""), nil, true)},
		{"arguments not an object", one("up__echo", callBody(5, "up__echo", `5`, noCaps, ""), nil, true)},
		{"approval without elicitation: -32021", one("up__danger", callBody(6, "up__danger", `{}`, noCaps, ""), nil, true)},
		{"approval asked", one("up__danger", callBody(7, "up__danger", `{}`, elicit, ""), nil, true)},
		{"upstream needs sampling: -32021", one("up__needs_sampling", callBody(8, "up__needs_sampling", `{}`, noCaps, ""), nil, true)},
		{"upstream sampling declared", one("up__needs_sampling", callBody(9, "up__needs_sampling", `{}`, sampling, ""), nil, true)},
		{"input required", one("up__confirm", callBody(10, "up__confirm", `{}`, elicit, ""), nil, true)},
		{"forged request state", one("up__confirm", callBody(11, "up__confirm", `{}`, elicit, `,"requestState":"forged"`), nil, true)},
		{"parameter headers agree", one("up__keyed", callBody(12, "up__keyed", `{"region":"eu-west","opts":{"n":3}}`, noCaps, ""), map[string]string{"Mcp-Param-Region": "eu-west", "Mcp-Param-N": "3"}, true)},
		{"parameter header base64", one("up__keyed", callBody(13, "up__keyed", `{"region":"été"}`, noCaps, ""), map[string]string{"Mcp-Param-Region": "=?base64?w6l0w6k=?="}, true)},
		{"parameter header disagrees", one("up__keyed", callBody(14, "up__keyed", `{"region":"eu-west"}`, noCaps, ""), map[string]string{"Mcp-Param-Region": "us-east"}, false)},
		{"parameter header missing", one("up__keyed", callBody(15, "up__keyed", `{"region":"eu-west"}`, noCaps, ""), nil, false)},
		{"parameter header for an absent argument", one("up__keyed", callBody(16, "up__keyed", `{}`, noCaps, ""), map[string]string{"Mcp-Param-Region": "eu"}, false)},
		{"integer header in another form", one("up__keyed", callBody(17, "up__keyed", `{"opts":{"n":3}}`, noCaps, ""), map[string]string{"Mcp-Param-N": "3.0"}, false)},
		{"wrong Mcp-Name", one("up__echo", echo, map[string]string{"Mcp-Name": "up__fail"}, false)},
		{"no Mcp-Name", one("up__echo", echo, map[string]string{"Mcp-Name": ""}, false)},
		{"wrong Mcp-Method", one("up__echo", echo, map[string]string{"Mcp-Method": "tools/list"}, false)},
		{"no Mcp-Method", one("up__echo", echo, map[string]string{"Mcp-Method": ""}, false)},
		{"_meta version disagrees", one("up__echo", strings.Replace(echo, `protocolVersion":"2026-07-28"`, `protocolVersion":"2026-08-01"`, 1), nil, false)},
		{"no _meta version", one("up__echo", `{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"up__echo","arguments":{},"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`, nil, false)},
		{"no client capabilities", one("up__echo", `{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":"up__echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, nil, false)},
		{"invalid clientInfo", one("up__echo", strings.Replace(echo, `{"name":"golden","version":"1"}`, `7`, 1), nil, false)},
		{"unknown tool", one("up__nope", callBody(20, "up__nope", `{}`, noCaps, ""), nil, false)},
		{"name not a string", one("up__echo", `{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":7,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, nil, false)},
		{"params not an object", one("up__echo", `{"jsonrpc":"2.0","id":22,"method":"tools/call","params":[]}`, nil, false)},
		{"Name in another case", one("up__echo", `{"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"NAME":"up__echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, nil, false)},
		{"progress token", one("up__echo", callBody(24, "up__echo", `{}`, noCaps, `,"_meta":{"progressToken":1,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`), nil, false)},
		{"no Accept of a stream", one("up__echo", echo, map[string]string{"Accept": "application/json"}, false)},
	}
	for _, tc := range cases {
		f.onBothPaths(t, tc.name, func(lean bool) leanAnswer {
			return tc.run(func(s step) leanAnswer {
				before := f.p.leanServed.Load()
				a, err := f.post(t, ctx, s.tool, s.hdr, s.body)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				if served := f.p.leanServed.Load() > before; lean && served != s.lean {
					t.Errorf("%s: served by the lean path: %v, want %v", tc.name, served, s.lean)
				}
				a.Raw = "" // compared normalised
				return a
			})
		})
	}
}

// TestLeanRoundsAcrossPaths: a call that asked for input resumes with its
// requestState whichever path served the first round, its state runs once,
// and an approval asked on one path is answered on the other.
func TestLeanRoundsAcrossPaths(t *testing.T) {
	t.Parallel()
	f := newLeanFixture(t)
	ctx := context.Background()
	const elicit = `{"elicitation":{}}`
	raw := func(tool string, lean bool, body string) leanAnswer {
		t.Helper()
		f.p.noLean.Store(!lean)
		a, err := f.post(t, ctx, tool, nil, body)
		if err != nil {
			t.Fatal(err)
		}
		a.Body = a.Raw
		return a
	}
	answer := `,"inputResponses":{"user_name":{"action":"accept","content":{"name":"Ada"}}},"requestState":%q`
	for _, first := range []bool{true, false} {
		a := raw("up__confirm", first, callBody(1, "up__confirm", `{}`, elicit, ""))
		state := stateOf(t, a.Body)
		b := raw("up__confirm", !first, callBody(2, "up__confirm", `{}`, elicit, fmt.Sprintf(answer, state)))
		if b.Status != http.StatusOK || !strings.Contains(b.Body, `"text":"hello Ada"`) || !strings.Contains(b.Body, `"resultType":"complete"`) {
			t.Fatalf("first round lean=%v: the retry answered %d %s", first, b.Status, b.Body)
		}
		again := raw("up__confirm", first, callBody(3, "up__confirm", `{}`, elicit, fmt.Sprintf(answer, state)))
		if again.Status != http.StatusBadRequest || !strings.Contains(again.Body, `"code":-32602`) {
			t.Fatalf("first round lean=%v: the state used again answered %d %s", first, again.Status, again.Body)
		}
	}
	// The approval question, asked on one path, answered on the other.
	for _, first := range []bool{true, false} {
		a := raw("up__danger", first, callBody(1, "up__danger", `{}`, elicit, ""))
		state := stateOf(t, a.Body)
		var resp struct {
			Result struct {
				InputRequests map[string]json.RawMessage `json:"inputRequests"`
			} `json:"result"`
		}
		_ = json.Unmarshal([]byte(a.Body), &resp)
		var id string
		for k := range resp.Result.InputRequests {
			id = k
		}
		b := raw("up__danger", !first, callBody(2, "up__danger", `{}`, elicit,
			fmt.Sprintf(`,"inputResponses":{%q:{"action":"accept","content":{"approve":true}}},"requestState":%q`, id, state)))
		if b.Status != http.StatusOK || !strings.Contains(b.Body, `"text":"deleted"`) {
			t.Fatalf("approval asked lean=%v: the retry answered %d %s", first, b.Status, b.Body)
		}
	}
	f.p.noLean.Store(false)
}

// TestLeanMiddleware: a call the lean path answers passes the same
// middleware as go-sdk's path: the policy sees the caller and its
// identity, the decision is audited, the call is counted and traced, and
// hanging up cancels it.
func TestLeanMiddleware(t *testing.T) {
	t.Parallel()
	f := newLeanFixture(t)
	ctx := context.Background()
	before := f.p.leanServed.Load()
	if a, err := f.post(t, ctx, "up__reset", nil, callBody(1, "up__reset", `{}`, `{}`, "")); err != nil || !strings.Contains(a.Body, "resets are disabled") {
		t.Fatalf("blocked call: %+v %v", a, err)
	}
	if f.p.leanServed.Load() == before {
		t.Fatal("the lean path did not serve the call")
	}
	if rec := f.audit.Find("lean-policy"); rec == nil || rec.Decision != string(policies.Block) {
		t.Fatalf("audit record: %+v", rec)
	}
	f.mu.Lock()
	call := f.seen[len(f.seen)-1]
	f.mu.Unlock()
	if call.Caller.Name != "golden" || call.Identity == nil || call.Identity.Subject != "ci" {
		t.Fatalf("the policy saw caller %+v, identity %+v", call.Caller, call.Identity)
	}
	var traced bool
	for _, sp := range f.spans.Ended() {
		if sp.Name() == "tools/call up__reset" && sp.SpanKind() == trace.SpanKindServer {
			traced = true
		}
	}
	if !traced {
		t.Fatal("no server span for the call")
	}
	if got := counters(t, f.metrics, "openclaw_proxy_tool_calls_total"); got[OutcomeBlocked+"/up__reset"] != 1 {
		t.Fatalf("calls counted: %v", got)
	}
	for _, lean := range []bool{true, false} { // go-sdk's path cancels too
		f.p.noLean.Store(!lean)
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			_, err := f.post(t, cctx, "up__slow", nil, callBody(2, "up__slow", `{}`, `{}`, ""))
			errc <- err
		}()
		<-f.started
		cancel()
		select {
		case <-f.cancelled:
		case <-time.After(20 * time.Second):
			t.Fatalf("lean path %v: hanging up did not cancel the upstream call", lean)
		}
		<-errc
	}
	f.p.noLean.Store(false)
}
