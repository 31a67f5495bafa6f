package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/bridge/gwclient"
	"github.com/openclaw-go/openclaw/gateway/gatewaytest"
	"github.com/openclaw-go/openclaw/gateway/protocol"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/transport"
)

// lineClient sends request lines to a served bridge and returns the
// messages it writes: the lines themselves (stdio) or go-sdk's encoding of
// the messages (in-memory).
type lineClient struct {
	write func(line string) error
	in    chan string
}

func (c *lineClient) send(t testing.TB, line string) {
	t.Helper()
	if err := c.write(line); err != nil {
		t.Fatalf("sending %s: %v", line, err)
	}
}

func (c *lineClient) recv(t testing.TB) string {
	t.Helper()
	select {
	case l := <-c.in:
		return l
	case <-time.After(20 * time.Second):
		t.Fatal("no message within 20s")
		return ""
	}
}

// serveMem serves b on go-sdk's in-memory transport: the bridge sees no
// transport.LocalHandler, so go-sdk answers everything.
func serveMem(t testing.TB, b *Bridge) *lineClient {
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, st) }()
	conn, err := ct.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &lineClient{in: make(chan string, 64), write: func(line string) error {
		m, err := jsonrpc.DecodeMessage([]byte(line))
		if err != nil {
			return err
		}
		return conn.Write(context.Background(), m)
	}}
	go func() {
		for {
			m, err := conn.Read(ctx)
			if err != nil {
				return
			}
			data, _ := jsonrpc.EncodeMessage(m)
			c.in <- string(data)
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
		cancel()
	})
	return c
}

// servePipes serves b on transport.ServeStdioTransport, as `openclaw mcp
// serve` does: the local path answers what it takes.
func servePipes(t testing.TB, b *Bridge) *lineClient {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	st := transport.NewServeStdioTransport(inR, outW, nil)
	done := make(chan error, 1)
	go func() { done <- b.Serve(context.Background(), st) }()
	c := &lineClient{in: make(chan string, 64), write: func(line string) error {
		_, err := io.WriteString(inW, line+"\n")
		return err
	}}
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c.in <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		outR.Close()
	})
	return c
}

// jsonTokens is the token stream of a JSON text: key order and values,
// not the spelling of escapes.
func jsonTokens(t *testing.T, s string) []any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var out []any
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading %s: %v", s, err)
		}
		out = append(out, tok)
	}
}

// goldenBridge is a bridge with fixed state: two queued events, two open
// approvals, a fixed clock, and policy as its policy, over the captured
// Gateway answers (fixtureGateway).
func goldenBridge(t testing.TB, policy policies.Enforcer) *Bridge {
	return goldenBridgeOn(t, &fixtureGateway{t: t}, policy)
}

// goldenBridgeOn is goldenBridge over gw.
func goldenBridgeOn(t testing.TB, gw GatewayConn, policy policies.Enforcer) *Bridge {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b := New(gw, &Options{Enforcer: policy, ServerVersion: "9.9.9", ClaudeChannelMode: ChannelOff,
		Now: func() time.Time { return now }})
	t.Cleanup(func() { b.Close() })
	b.HandleGatewayEvent("session.message", sessionMessagePayload(t, "first <message> & more", nil))
	b.HandleGatewayEvent("session.message", sessionMessagePayload(t, "second", nil))
	b.HandleGatewayEvent("plugin.approval.requested", json.RawMessage(`{"approvalKind":"plugin","id":"p1","request":{"title":"t"},"createdAtMs":20}`))
	b.HandleGatewayEvent("exec.approval.requested", json.RawMessage(`{"approvalKind":"exec","id":"e2","request":{"command":"ls"}}`))
	return b
}

const perRequestMeta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`

// policyQuestions lists, sorted, the calls p was asked about.
func policyQuestions(p *policiestest.Enforcer) []string {
	var out []string
	for _, c := range p.Calls() {
		out = append(out, fmt.Sprintf("%s %s %s caller=%s/%s key=%s", c.Surface, c.Tool.Name, c.Arguments, c.Caller.Name, c.Caller.Version, c.SessionKey))
	}
	slices.Sort(out)
	return out
}

// goldenRequests are the requests both paths answer, for a client of
// protocol revision rev ("2026-07-28": no initialize, _meta on every
// request). Each has an id; notifications are sent and not answered.
func goldenRequests(rev string) []string {
	var reqs []string
	add := func(method, params string) {
		id := len(reqs) + 1
		if params == "" {
			reqs = append(reqs, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, id, method))
			return
		}
		reqs = append(reqs, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	}
	meta := ""
	if rev == newProtocolVersion {
		meta = perRequestMeta
	} else {
		rev = strings.TrimSuffix(rev, "+initialize")
		// Refused before initialize.
		add("tools/list", "")
		add("tools/call", `{"name":"events_poll","arguments":{}}`)
		add("initialize", fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"golden","version":"1.0"}}`, rev))
		reqs = append(reqs, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	withMeta := func(extra string) string {
		m := meta
		if extra != "" {
			if m != "" {
				m += ","
			}
			m += extra
		}
		return `"_meta":{` + m + `}`
	}
	add("tools/list", `{`+withMeta("")+`}`)
	add("tools/list", `{`+withMeta(`"progressToken":"p1"`)+`}`)
	add("tools/list", `{"cursor":"nope",`+withMeta("")+`}`)
	for _, args := range []string{`{}`, `{"after_cursor":1}`, `{"limit":1}`, `{"limit":0}`, `{"limit":"x"}`,
		`{"session_key":"agent:main:main","after_cursor":0,"limit":200}`, `{"after_cursor":-1}`, `[]`, `"x"`} {
		add("tools/call", `{"name":"events_poll","arguments":`+args+`,`+withMeta("")+`}`)
	}
	add("tools/call", `{"name":"events_poll",`+withMeta(`"progressToken":7`)+`}`)
	add("tools/call", `{"name":"events_poll","arguments":null,`+withMeta("")+`}`)
	add("tools/call", `{"name":"permissions_list_open","arguments":{},`+withMeta("")+`}`)
	add("tools/call", `{"name":"permissions_list_open","arguments":{"extra":1},`+withMeta(`"io.modelcontextprotocol/clientInfo":{"name":"other","version":"2"}`)+`}`)
	add("tools/call", `{"name":"ev\u0065nts_poll","arguments":{},`+withMeta("")+`}`)
	add("tools/call", `{"\u005fmeta":{`+perRequestMeta+`},"name":"events_poll","arguments":{}}`)
	add("tools/call", `{"name":"no_such_tool","arguments":{},`+withMeta("")+`}`)
	add("tools/call", `{"name":"events_poll","arguments":{},"_meta":null}`)
	add("tools/call", `{"name":"events_poll","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`)
	add("tools/call", `{"name":"events_poll","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}`)
	add("tools/call", `{"name":"events_poll","arguments":{},"_meta":{`+perRequestMeta+`,"io.modelcontextprotocol/clientInfo":{"name":"late","version":"3"}}}`)
	add("tools/list", `{"_meta":{`+perRequestMeta+`}}`)
	add("tools/call", `{"arguments":{},`+withMeta("")+`}`)
	reqs = append(reqs, `{"jsonrpc":"2.0","id":"s-\u00e9\"1","method":"tools/call","params":{"name":"events_poll","arguments":{},`+withMeta("")+`}}`)
	// The tools that wait (on the Gateway, on the queue): answered later.
	for _, call := range []string{
		`"name":"conversations_list","arguments":{}`,
		`"name":"conversations_list","arguments":{"limit":5,"channel":" IMessage ","search":"seeded","includeLastMessage":false}`,
		`"name":"conversations_list","arguments":{"limit":0}`,
		`"name":"conversations_list","arguments":{"includeDerivedTitles":"yes"}`,
		`"name":"conversation_get","arguments":{"session_key":"agent:main:main"}`,
		`"name":"conversation_get","arguments":{"session_key":" AGENT:MAIN:TG-DM "}`,
		`"name":"conversation_get","arguments":{"session_key":"main"}`,
		`"name":"conversation_get","arguments":{}`,
		`"name":"conversation_get","arguments":{"session_key":"agent:main:nope"}`,
		`"name":"messages_read","arguments":{"session_key":"agent:main:main","limit":2}`,
		`"name":"messages_read","arguments":{"session_key":"agent:main:main","limit":201}`,
		`"name":"attachments_fetch","arguments":{"session_key":"agent:main:main","message_id":"msg-attachment"}`,
		`"name":"attachments_fetch","arguments":{"session_key":"agent:main:main","message_id":"no-such"}`,
		`"name":"events_wait","arguments":{"after_cursor":0}`,
		`"name":"events_wait","arguments":{"after_cursor":2,"timeout_ms":1}`,
		`"name":"permissions_respond","arguments":{"kind":"exec","id":"e2","decision":"deny"}`,
		`"name":"permissions_respond","arguments":{"kind":"plugin","id":"p1","decision":"allow-once"}`,
		`"name":"permissions_respond","arguments":{"kind":"plugin","id":"zzz","decision":"deny"}`,
		`"name":"permissions_respond","arguments":{"kind":"neither","id":"e2","decision":"deny"}`,
	} {
		add("tools/call", `{`+call+`,`+withMeta("")+`}`)
	}
	add("tools/call", `{"name":"messages_read","arguments":{"session_key":"agent:main:tg-dm"},`+withMeta(`"progressToken":"mr"`)+`}`)
	add("tools/call", `{"name":"conversations_list","arguments":{},`+withMeta(`"io.modelcontextprotocol/clientInfo":{"name":"other","version":"2"}`)+`}`)
	add("tools/call", `{"name":"conversations_list","arguments":{},"_meta":{`+perRequestMeta+`,"io.modelcontextprotocol/clientInfo":{"name":"late","version":"3"}}}`)
	// Last: it adds to the transcripts the calls above read.
	add("tools/call", `{"name":"messages_send","arguments":{"session_key":"agent:main:main","text":"hi <there> & more"},`+withMeta("")+`}`)
	return reqs
}

// frameID returns the id of the JSON-RPC message line, decoded (so that
// the spellings of one string compare equal); ok is false without one.
func frameID(line string) (string, bool) {
	var m struct {
		ID any `json:"id"`
	}
	if json.Unmarshal([]byte(line), &m) != nil || m.ID == nil {
		return "", false
	}
	return fmt.Sprintf("%T:%v", m.ID, m.ID), true
}

// runGolden sends reqs to c and returns the responses by id. After an
// initialize it sends nothing more until the answer arrived and, when
// answered is not nil, until it is closed (the bridge's
// InitializeAnswered: the local path takes a session once the answer's
// write returned, which may be after the client read it).
func runGolden(t *testing.T, c *lineClient, reqs []string, answered <-chan struct{}) map[string]string {
	t.Helper()
	got := map[string]string{}
	want := 0
	read := func(n int) {
		for len(got) < n {
			l := c.recv(t)
			id, ok := frameID(l)
			if !ok {
				continue // a notification
			}
			if got[id] != "" {
				t.Errorf("request %s answered twice:\n%s\n%s", id, got[id], l)
			}
			got[id] = l
		}
	}
	for _, r := range reqs {
		c.send(t, r)
		if strings.Contains(r, `"id":`) {
			want++
		}
		if strings.Contains(r, `"method":"initialize"`) {
			read(want)
			if answered != nil {
				<-answered
			}
		}
	}
	read(want)
	return got
}

// TestLocalPathAnswersAsGoSDK diffs the local path's answers (stdio, as
// `mcp serve` runs) against go-sdk's (the same bridge on an in-memory
// transport, where go-sdk answers every request), for each protocol
// revision, under an allowing, a blocking and an approval-requiring policy:
// the same results and errors (members in the same order), the same
// policy questions (tool, arguments, session key, caller).
func TestLocalPathAnswersAsGoSDK(t *testing.T) {
	policiesUnder := map[string]func() *policiestest.Enforcer{
		"allow": func() *policiestest.Enforcer {
			return &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.Allow}}
		},
		"block": func() *policiestest.Enforcer {
			return &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.Block, Reason: "no <polling>", Module: "golden"}}
		},
		// No approval route: the handed-on call fails closed in go-sdk's path.
		"require_approval": func() *policiestest.Enforcer {
			return &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.RequireApproval, Reason: "ask", Module: "golden"}}
		},
	}
	// "2026-07-28+initialize": a client asking initialize for 2026-07-28,
	// which go-sdk answers with 2025-11-25.
	for _, rev := range append(mcp.SupportedProtocolVersions()[1:], newProtocolVersion, newProtocolVersion+"+initialize") {
		for name, newPolicy := range policiesUnder {
			t.Run(rev+"/"+name, func(t *testing.T) {
				reqs := goldenRequests(rev)
				sdkPolicy, localPolicy := newPolicy(), newPolicy()
				sdkGW, localGW := &fixtureGateway{t: t}, &fixtureGateway{t: t}
				want := runGolden(t, serveMem(t, goldenBridgeOn(t, sdkGW, sdkPolicy)), reqs, nil)
				local := goldenBridgeOn(t, localGW, localPolicy)
				got := runGolden(t, servePipes(t, local), reqs, local.InitializeAnswered())
				diffGolden(t, reqs, got, want, nil)
				// go-sdk runs calls concurrently: the questions, in any order.
				if g, w := policyQuestions(localPolicy), policyQuestions(sdkPolicy); !reflect.DeepEqual(g, w) {
					t.Errorf("policy asked\n local: %q\ngo-sdk: %q", g, w)
				}
				if g, w := gatewayRequests(localGW.recorded()), gatewayRequests(sdkGW.recorded()); !reflect.DeepEqual(g, w) {
					t.Errorf("Gateway asked\n local: %q\ngo-sdk: %q", g, w)
				}
			})
		}
	}
}

// diffGolden reports every request of reqs whose answer in got (the local
// path's) differs from the one in want (go-sdk's), after norm (nil: none).
func diffGolden(t *testing.T, reqs []string, got, want map[string]string, norm func(string) string) {
	t.Helper()
	for _, r := range reqs {
		id, ok := frameID(r)
		if !ok {
			continue
		}
		g, w := got[id], want[id]
		if g == "" || w == "" {
			t.Errorf("request %s: no answer (local %q, go-sdk %q)", r, g, w)
			continue
		}
		if norm != nil {
			g, w = norm(g), norm(w)
		}
		if !reflect.DeepEqual(jsonTokens(t, g), jsonTokens(t, w)) {
			t.Errorf("request %s\n local: %.900s\ngo-sdk: %.900s", r, g, w)
		}
	}
}

// idempotencyKeyRE matches the random idempotency key of a send.
var idempotencyKeyRE = regexp.MustCompile(`"idempotencyKey":"[^"]*"`)

// gatewayRequests lists, sorted, the Gateway requests of calls, their
// random idempotency keys masked.
func gatewayRequests(calls []gatewayCall) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Method+" "+idempotencyKeyRE.ReplaceAllString(string(c.Params), `"idempotencyKey":"…"`))
	}
	slices.Sort(out)
	return out
}

// uuidRE matches a UUID, as the Gateway makes for a sent message and the
// bridge for its run.
var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// TestLocalPathAnswersAsGoSDKOnGateway is TestLocalPathAnswersAsGoSDK on
// our own seeded Gateway (`openclaw gateway run --seed demo`) instead of
// the captured answers: two bridges on one Gateway, go-sdk answering one
// over go-sdk's in-memory transport and the local path the other over
// stdio, each request sent to both and answered by both before the next,
// for each protocol revision.
func TestLocalPathAnswersAsGoSDKOnGateway(t *testing.T) {
	gw := gatewaytest.StartSeeded(t)
	connect := func(t *testing.T) *Bridge {
		var b *Bridge
		client := gwclient.New(&gwclient.Options{URL: gw.URL, Token: gw.Token, Identity: newIdentity(t),
			OnEvent: func(name string, payload json.RawMessage) {
				if name != protocol.EventSessionMessage { // the queue holds goldenBridge's events only
					b.HandleGatewayEvent(name, payload)
				}
			}})
		b = goldenBridgeOn(t, client, &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.Allow}})
		runGatewayClient(t, client)
		return b
	}
	for _, rev := range append(mcp.SupportedProtocolVersions()[1:], newProtocolVersion) {
		t.Run(rev, func(t *testing.T) {
			reqs := goldenRequests(rev)
			sdk, local := connect(t), connect(t)
			sdkC, localC := serveMem(t, sdk), servePipes(t, local)
			want, got := map[string]string{}, map[string]string{}
			for _, r := range reqs {
				want = mergeAnswers(t, want, runGolden(t, sdkC, []string{r}, nil))
				got = mergeAnswers(t, got, runGolden(t, localC, []string{r}, local.InitializeAnswered()))
			}
			diffGolden(t, reqs, got, want, func(s string) string { return uuidRE.ReplaceAllString(s, "<uuid>") })
		})
	}
}

// mergeAnswers adds the answers of more to into.
func mergeAnswers(t *testing.T, into, more map[string]string) map[string]string {
	t.Helper()
	for id, l := range more {
		if into[id] != "" {
			t.Errorf("request %s answered twice:\n%s\n%s", id, into[id], l)
		}
		into[id] = l
	}
	return into
}

// TestLocalPathIsTheOnlyPath serves the bridge as `mcp serve` does and
// checks which requests reach go-sdk's method handlers: initialize, its
// notification, and the calls the local path does not take (a
// require_approval call, handed on once decided; a session_key alias the
// Gateway resolves), never tools/list, events_poll, permissions_list_open
// or a Gateway tool; every request is answered, and the policy is asked
// once per call.
func TestLocalPathIsTheOnlyPath(t *testing.T) {
	pol := &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.Allow}}
	b := goldenBridge(t, pol)
	var mu sync.Mutex
	var reached []string
	b.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			seen := method
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
				seen += " " + p.Name
			}
			mu.Lock()
			reached = append(reached, seen)
			mu.Unlock()
			return next(ctx, method, req)
		}
	})
	c := servePipes(t, b)
	reqs := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"only","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"events_poll","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"permissions_list_open","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"conversations_list","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"events_poll","arguments":{},"_meta":{` + perRequestMeta + `}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"messages_read","arguments":{"session_key":"agent:main:main"}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"messages_read","arguments":{"session_key":"main"}}}`,
	}
	got := runGolden(t, c, reqs, b.InitializeAnswered())
	for id := 1; id <= 8; id++ {
		if !strings.Contains(got[fmt.Sprintf("float64:%d", id)], `"result":`) {
			t.Errorf("request %d: %s", id, got[fmt.Sprintf("float64:%d", id)])
		}
	}
	pol.Outcome = policies.Outcome{Decision: policies.RequireApproval, Reason: "ask"}
	got = runGolden(t, c, []string{`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"events_poll","arguments":{}}}`}, nil)
	if !strings.Contains(got["float64:9"], "no approval route is configured") {
		t.Errorf("require_approval handed on: %s", got["float64:9"])
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"initialize", "notifications/initialized", "tools/call events_poll", "tools/call messages_read"}
	if slices.Sort(reached); !slices.Equal(reached, want) {
		t.Errorf("go-sdk handled %q, want %q", reached, want)
	}
	if n := len(pol.Calls()); n != 7 {
		t.Errorf("policy asked %d times for 7 calls", n)
	}
}

// cannedGateway answers every request with one payload at once.
type cannedGateway struct{ payload json.RawMessage }

func (g cannedGateway) HasMethod(string) bool { return false }

func (g cannedGateway) Request(context.Context, string, any) (json.RawMessage, error) {
	return g.payload, nil
}

// BenchmarkServeRoundTrip measures one request's round trip through a
// served bridge with the native allow policy: over the stdio transport, as
// `mcp serve` runs (the local path answers), and over go-sdk's in-memory
// transport (go-sdk answers). conversations_list gets the captured real
// sessions.list payload at once (cannedGateway): the bridge's own part.
//
//	go test -run '^$' -bench BenchmarkServeRoundTrip -benchmem ./bridge/
func BenchmarkServeRoundTrip(b *testing.B) {
	for _, tc := range []struct{ name, method, params string }{
		{"events_poll", "tools/call", `{"name":"events_poll","arguments":{"after_cursor":0}}`},
		{"tools_list", "tools/list", `{}`},
		{"conversations_list", "tools/call", `{"name":"conversations_list","arguments":{}}`},
	} {
		for _, via := range []struct {
			name  string
			serve func(testing.TB, *Bridge) *lineClient
		}{{"stdio-local", servePipes}, {"inmemory-gosdk", serveMem}} {
			b.Run(tc.name+"/"+via.name, func(b *testing.B) {
				t := b
				br := goldenBridgeOn(t, cannedGateway{realSessionsList(t)}, &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.Allow}})
				c := via.serve(t, br)
				c.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
				c.recv(t)
				c.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				line := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, tc.method, tc.params)
				b.ReportAllocs()
				for b.Loop() {
					c.send(t, line)
					c.recv(t)
				}
			})
		}
	}
}

// heldGateway is fixtureGateway whose requests wait until release is
// closed or their context ends; ended receives the error of each request
// whose context ended first.
type heldGateway struct {
	fixtureGateway
	release chan struct{}
	ended   chan error
	once    sync.Once
}

// serve serves b over stdio; the held requests are released when the
// test ends, before the session drains.
func (g *heldGateway) serve(t *testing.T, b *Bridge) *lineClient {
	c := servePipes(t, b)
	t.Cleanup(g.releaseAll)
	return c
}

func (g *heldGateway) releaseAll() { g.once.Do(func() { close(g.release) }) }

func (g *heldGateway) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	select {
	case <-g.release:
	case <-ctx.Done():
		g.ended <- context.Cause(ctx)
		return nil, ctx.Err()
	}
	return g.fixtureGateway.Request(ctx, method, params)
}

// The calls that wait on the Gateway do not hold up the others: while
// they wait, events_poll calls sent between them are answered at once, in
// the order sent, each seeing the events pushed meanwhile in cursor order
// and never fewer than the one before (a reordering, or a poll waiting
// behind a Gateway call, fails); the held calls are answered once each
// when the Gateway answers.
func TestLocalPathKeepsEventOrder(t *testing.T) {
	gw := &heldGateway{fixtureGateway: fixtureGateway{t: t}, release: make(chan struct{}), ended: make(chan error, 64)}
	b := goldenBridgeOn(t, gw, &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.Allow}})
	c := gw.serve(t, b)
	runGolden(t, c, []string{`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"order","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`}, b.InitializeAnswered())
	const n = 40
	pushed := make(chan struct{})
	go func() {
		defer close(pushed)
		for i := range n {
			b.HandleGatewayEvent("session.message", sessionMessagePayload(t, fmt.Sprintf("pushed %d", i), nil))
		}
	}()
	for i := range n {
		c.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":"held-%d","method":"tools/call","params":{"name":"conversations_list","arguments":{}}}`, i))
		c.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"events_poll","arguments":{"limit":200}}}`, i))
	}
	last := int64(-1)
	for i := range n {
		var m struct {
			ID     any `json:"id"`
			Result struct {
				StructuredContent struct {
					Events []struct {
						Cursor int64 `json:"cursor"`
					} `json:"events"`
					Next int64 `json:"next_cursor"`
				} `json:"structuredContent"`
			} `json:"result"`
		}
		l := c.recv(t)
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		if m.ID != float64(i) {
			t.Fatalf("answer %d is %.200s, want events_poll %d's (the Gateway calls still wait)", i, l, i)
		}
		sc := m.Result.StructuredContent
		if sc.Next < last {
			t.Errorf("events_poll %d: next_cursor %d after %d", i, sc.Next, last)
		}
		last = sc.Next
		for j := 1; j < len(sc.Events); j++ {
			if sc.Events[j].Cursor <= sc.Events[j-1].Cursor {
				t.Errorf("events_poll %d: cursor %d after %d", i, sc.Events[j].Cursor, sc.Events[j-1].Cursor)
			}
		}
	}
	<-pushed
	gw.releaseAll()
	seen := map[string]bool{}
	for range n {
		var m struct {
			ID     any `json:"id"`
			Result struct {
				IsError bool `json:"isError"`
			} `json:"result"`
		}
		l := c.recv(t)
		_ = json.Unmarshal([]byte(l), &m)
		id := fmt.Sprint(m.ID)
		if !strings.HasPrefix(id, "held-") || seen[id] || m.Result.IsError {
			t.Errorf("after the release: %.200s", l)
		}
		seen[id] = true
	}
}

// A client's notifications/cancelled ends a call waiting on the Gateway:
// its Gateway request's context is cancelled, and it gets no answer.
func TestLocalPathCancelledCall(t *testing.T) {
	gw := &heldGateway{fixtureGateway: fixtureGateway{t: t}, release: make(chan struct{}), ended: make(chan error, 1)}
	pol := &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.Allow}}
	b := goldenBridgeOn(t, gw, pol)
	c := gw.serve(t, b)
	runGolden(t, c, []string{`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cancel","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`}, b.InitializeAnswered())
	c.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"messages_read","arguments":{"session_key":"agent:main:main"}}}`)
	c.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}}`)
	if err := <-gw.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("Gateway request ended with %v, want context.Canceled", err)
	}
	c.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if l := c.recv(t); !strings.HasPrefix(l, `{"jsonrpc":"2.0","id":2,`) {
		t.Errorf("answer %.200s, want tools/list's (the cancelled call gets none)", l)
	}
	if n := len(pol.Calls()); n != 1 {
		t.Errorf("policy asked %d times, want once", n)
	}
}
