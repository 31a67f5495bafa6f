package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/transport"
)

func TestNewRefusesMissingPolicies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		servers []Server
		opts    *Options
		want    string
	}{
		{"nil options", nil, nil, "Enforcer is nil"},
		{"no enforcer", nil, &Options{Sanitizer: &policiestest.Sanitizer{}}, "Enforcer is nil"},
		{"no sanitizer", nil, &Options{Enforcer: &policiestest.Enforcer{}}, "Sanitizer is nil"},
		{"empty name", []Server{{}}, &Options{Enforcer: &policiestest.Enforcer{}, Sanitizer: &policiestest.Sanitizer{}}, "empty name"},
		{"duplicate", []Server{{Name: "a"}, {Name: "a"}}, &Options{Enforcer: &policiestest.Enforcer{}, Sanitizer: &policiestest.Sanitizer{}}, `"a" is declared twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tc.servers, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestCatalogNamesOrderAndRouting(t *testing.T) {
	t.Parallel()
	web := newServer("web", nil)
	echoTool(web, "fetch")
	echoTool(web, "a.search")
	files := newServer("files", nil)
	echoTool(files, "read")
	echoTool(files, "fetch")
	pol := &policiestest.Enforcer{}
	s := open(t, []Server{inProcess(t, "web", web), {Name: "off", Disabled: true}, inProcess(t, "my files", files)},
		&Options{Enforcer: pol, Caller: policies.Caller{Name: "harness", Version: "1"}, SessionKey: "agent:main"})

	// Catalog order: by safe server name, then raw tool name (docs/tool-names.md §2).
	want := []string{"my-files__fetch", "my-files__read", "web__a-search", "web__fetch"}
	if got := toolNames(t, s); !slices.Equal(got, want) {
		t.Fatalf("catalog = %v, want %v", got, want)
	}
	ctx := context.Background()
	for _, tc := range []struct{ name, want string }{
		{"web__fetch", `fetch: {"url":"x"}`},
		{"my-files__fetch", `fetch: {"url":"x"}`},
		{"web__a-search", `a.search: {"url":"x"}`},
	} {
		res, err := s.CallTool(ctx, tc.name, []byte(`{"url":"x"}`))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := resultText(t, res); got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, got, tc.want)
		}
	}
	calls := pol.Calls()
	if len(calls) != 3 {
		t.Fatalf("policy saw %d calls, want 3", len(calls))
	}
	c := calls[2]
	wantRef := policies.ToolRef{Name: "web__a-search", Server: "web", RawName: "a.search"}
	if c.Surface != policies.SurfaceEmbedded || c.Tool != wantRef || c.Caller.Name != "harness" || c.SessionKey != "agent:main" || string(c.Arguments) != `{"url":"x"}` {
		t.Errorf("policy input = %+v", c)
	}
	if _, err := s.CallTool(ctx, "web__nope", nil); !errors.Is(err, ErrUnknownTool) || !strings.Contains(err.Error(), `"web__nope"`) {
		t.Errorf("unknown tool: %v", err)
	}
	st := s.Status()
	if len(st) != 3 || st[0].Tools != 2 || !st[0].Connected || st[1].Enabled || st[1].Connected || st[2].Tools != 2 {
		t.Errorf("status = %+v", st)
	}
}

func TestReservedNamesAndSanitizerFailure(t *testing.T) {
	t.Parallel()
	srv := newServer("s", nil)
	echoTool(srv, "x")
	s := open(t, []Server{inProcess(t, "s", srv)}, &Options{Reserved: []string{"S__X"}})
	if got := toolNames(t, s); !slices.Equal(got, []string{"s__x-2"}) {
		t.Errorf("catalog = %v, want the reserved name avoided", got)
	}

	srv2 := newServer("s", nil)
	echoTool(srv2, "x")
	s2, err := New([]Server{inProcess(t, "s", srv2)}, &Options{Enforcer: &policiestest.Enforcer{}, Sanitizer: &policiestest.Sanitizer{Err: &policies.SanitizeError{Module: "broken", Err: io.ErrUnexpectedEOF}}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(context.Background())
	err = s2.Connect(context.Background())
	var se *policies.SanitizeError
	if !errors.As(err, &se) || se.Module != "broken" {
		t.Fatalf("Connect with a failing sanitizer: %v, want its *SanitizeError", err)
	}
	if _, err := s2.CallTool(context.Background(), "s__x", nil); !errors.As(err, &se) {
		t.Errorf("CallTool without a catalog: %v, want the sanitizer's error", err)
	}
}

func TestFailingServerIsADiagnostic(t *testing.T) {
	t.Parallel()
	good := newServer("good", nil)
	echoTool(good, "ping")
	evs := newEvents()
	s := open(t, []Server{
		{Name: "nohost", Entry: config.ServerEntry{URL: "ftp://example.invalid/"}},
		{Name: "missing", Entry: config.ServerEntry{Command: "/nonexistent/openclaw-test-server"}},
		{Name: "blocked", Entry: config.ServerEntry{Command: "true"}, BlockedEnv: []string{"NODE_OPTIONS"}},
		inProcess(t, "good", good),
	}, &Options{OnEvent: evs.on})
	if got := toolNames(t, s); !slices.Equal(got, []string{"good__ping"}) {
		t.Fatalf("catalog = %v", got)
	}
	diags := s.Diagnostics()
	if len(diags) != 3 {
		t.Fatalf("diagnostics = %v, want 3", diags)
	}
	for i, want := range []struct{ server, op string }{{"nohost", "resolve"}, {"missing", "connect"}, {"blocked", "resolve"}} {
		var se *ServerError
		if !errors.As(diags[i], &se) || se.Server != want.server || se.Op != want.op {
			t.Errorf("diagnostic %d = %v, want server %q op %q", i, diags[i], want.server, want.op)
		}
	}
	var be *transport.BlockedEnvError
	if !errors.As(diags[2], &be) || !slices.Equal(be.Keys, []string{"NODE_OPTIONS"}) {
		t.Errorf("blocked env diagnostic = %v", diags[2])
	}
	if !errors.Is(diags[0], transport.ErrUnusable) {
		t.Errorf("ftp URL diagnostic %v does not wrap transport.ErrUnusable", diags[0])
	}
	evs.wait(t, EventFailed, "missing")
}

func TestToolFilter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		filter *config.ToolFilter
		want   []string
	}{
		// "_" sorts before "." (localeCompare), so write_dir comes first.
		{"none", nil, []string{"srv__read_file", "srv__write_dir", "srv__write-file"}},
		{"include raw glob", &config.ToolFilter{Include: []string{"write*"}}, []string{"srv__write_dir", "srv__write-file"}},
		{"include raw exact", &config.ToolFilter{Include: []string{"write.file"}}, []string{"srv__write-file"}},
		{"include namespaced", &config.ToolFilter{Include: []string{"srv__write-file"}}, []string{"srv__write-file"}},
		{"exclude namespaced glob", &config.ToolFilter{Exclude: []string{"srv__*dir"}}, []string{"srv__read_file", "srv__write-file"}},
		{"include and exclude", &config.ToolFilter{Include: []string{"*file"}, Exclude: []string{"read_*"}}, []string{"srv__write-file"}},
		{"empty pattern never matches", &config.ToolFilter{Include: []string{" "}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer("srv", nil)
			for _, n := range []string{"write_dir", "read_file", "write.file"} {
				echoTool(srv, n)
			}
			sv := inProcess(t, "srv", srv)
			sv.ToolFilter = tc.filter
			s := open(t, []Server{sv}, &Options{})
			if got := toolNames(t, s); !slices.Equal(got, tc.want) {
				t.Errorf("catalog = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPagination(t *testing.T) {
	t.Parallel()
	srv := newServer("paged", &mcp.ServerOptions{PageSize: 5})
	var want []string
	for i := range 12 {
		name := fmt.Sprintf("t%02d", i)
		echoTool(srv, name)
		want = append(want, "paged__"+name)
	}
	s := open(t, []Server{inProcess(t, "paged", srv)}, &Options{})
	if got := toolNames(t, s); !slices.Equal(got, want) {
		t.Errorf("catalog = %v, want the 12 tools of 3 pages", got)
	}
}

// rawPeer serves initialize itself and answers tools/list with list; it
// lets a test send cursors no SDK server would.
func rawPeer(t *testing.T, name string, list func(cursor string) (tools []string, next string)) Server {
	t.Helper()
	return rawServer(t, name, func(_ context.Context, _ *rawConn, req *jsonrpc.Request) *jsonrpc.Response {
		resp := &jsonrpc.Response{ID: req.ID}
		if req.Method != "tools/list" {
			resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + req.Method}
			return resp
		}
		var p struct{ Cursor string }
		_ = json.Unmarshal(req.Params, &p)
		names, next := list(p.Cursor)
		var tools []map[string]any
		for _, n := range names {
			tools = append(tools, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
		}
		resp.Result, _ = json.Marshal(map[string]any{"tools": tools, "nextCursor": next})
		return resp
	})
}

// rawConn is the server end of a rawServer: writes are serialized, and
// goroutines started with Go end before the test does.
type rawConn struct {
	mcp.Connection
	mu sync.Mutex
	wg sync.WaitGroup
}

// Write sends msg, one writer at a time (responses answered later and a
// hook's notifications may interleave); an error means the connection is
// gone.
func (r *rawConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Connection.Write(ctx, msg)
}

// rawServer runs a raw MCP peer on an in-memory transport, for answers no
// SDK server would give: it answers initialize (2025-11-25, tools) itself
// and every other request with handle, which returns the response, or nil
// when it answers later (rawConn.Write from a goroutine of rawConn.wg).
// Notifications are ignored.
func rawServer(t *testing.T, name string, handle func(ctx context.Context, conn *rawConn, req *jsonrpc.Request) *jsonrpc.Response) Server {
	t.Helper()
	return rawServerCaps(t, name, `{"tools":{}}`, handle)
}

// rawServerCaps is rawServer announcing the capabilities caps (a JSON
// object) in its initialize answer.
func rawServerCaps(t *testing.T, name, caps string, handle func(ctx context.Context, conn *rawConn, req *jsonrpc.Request) *jsonrpc.Response) Server {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	conn := &rawConn{}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done; conn.wg.Wait() })
	go func() {
		defer close(done)
		c, err := st.Connect(ctx)
		if err != nil {
			return
		}
		defer c.Close()
		conn.Connection = c
		for {
			msg, err := c.Read(ctx)
			if err != nil {
				return
			}
			req, ok := msg.(*jsonrpc.Request)
			if !ok || !req.ID.IsValid() {
				continue
			}
			var resp *jsonrpc.Response
			if req.Method == "initialize" {
				resp = &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"serverInfo":{"name":"` + name + `","version":"1"}}`)}
			} else if resp = handle(ctx, conn, req); resp == nil {
				continue
			}
			if conn.Write(ctx, resp) != nil {
				return
			}
		}
	}()
	sv := Server{Name: name, Transport: ct}
	sv.Entry.RequestTimeoutMs = 30000
	return sv
}

func TestListCaps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		list func(cursor string) ([]string, string)
		want string
	}{
		{"cursor that never ends", func(c string) ([]string, string) { return []string{"t" + c}, c + "x" }, "more than 128 pages"},
		{"repeated cursor", func(c string) ([]string, string) {
			if c == "" {
				return []string{"a"}, "c1"
			}
			return []string{"b"}, "c1"
		}, `cursor "c1" repeated`},
		{"too many tools", func(c string) ([]string, string) {
			names := make([]string, 9000)
			for i := range names {
				names[i] = fmt.Sprintf("%s%d", c, i)
			}
			return names, c + "x"
		}, "more than 16384 tools"},
		{"too many bytes", func(c string) ([]string, string) {
			names := make([]string, 10)
			for i := range names {
				names[i] = fmt.Sprintf("%s%d-%s", c, i, strings.Repeat("x", 100<<10))
			}
			return names, c + "x"
		}, "more than 10485760 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			good := newServer("good", nil)
			echoTool(good, "ok")
			evs := newEvents()
			s := open(t, []Server{rawPeer(t, "raw", tc.list), inProcess(t, "good", good)}, &Options{OnEvent: evs.on})
			if got := toolNames(t, s); !slices.Equal(got, []string{"good__ok"}) {
				t.Errorf("catalog = %v, want only the good server's tool", got)
			}
			ev := evs.wait(t, EventFailed, "raw")
			var le *ListError
			if !errors.As(ev.Err, &le) || !strings.Contains(le.Error(), tc.want) {
				t.Errorf("failure = %v, want a *ListError with %q", ev.Err, tc.want)
			}
			if d := s.Diagnostics(); len(d) != 1 || !strings.Contains(d[0].Error(), `MCP server "raw": tools/list: listing broke OpenClaw's caps: `) {
				t.Errorf("diagnostics = %v", d)
			}
		})
	}
}

func TestListChangedRefreshesOnNextUse(t *testing.T) {
	t.Parallel()
	srv := newServer("dyn", nil)
	echoTool(srv, "one")
	evs := newEvents()
	s := open(t, []Server{inProcess(t, "dyn", srv)}, &Options{OnEvent: evs.on})
	if got := toolNames(t, s); !slices.Equal(got, []string{"dyn__one"}) {
		t.Fatalf("catalog = %v", got)
	}
	echoTool(srv, "two")
	evs.wait(t, EventToolsChanged, "dyn")
	if got := toolNames(t, s); !slices.Equal(got, []string{"dyn__one", "dyn__two"}) {
		t.Fatalf("after list_changed, catalog = %v", got)
	}
	res, err := s.CallTool(context.Background(), "dyn__two", nil)
	if err != nil || resultText(t, res) != "two: {}" {
		t.Fatalf("new tool: %v %v", res, err)
	}
	srv.RemoveTools("one")
	evs.wait(t, EventToolsChanged, "dyn")
	if _, err := s.CallTool(context.Background(), "dyn__one", nil); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("removed tool: %v, want ErrUnknownTool", err)
	}
}

func TestPolicyOutcomes(t *testing.T) {
	t.Parallel()
	type result struct {
		text    string
		errText string
		module  string
	}
	approve := func(ok bool, err error) ApprovalFunc {
		return func(ctx context.Context, req *ApprovalRequest) (bool, error) {
			if req.Tool.Name != "srv__act" || req.Title != "Run act?" || req.Module != "rules" {
				return false, fmt.Errorf("unexpected request %+v", req)
			}
			return ok, err
		}
	}
	ask := policies.Outcome{Decision: policies.RequireApproval, Module: "rules", Reason: "writes need a human", Title: "Run act?"}
	for _, tc := range []struct {
		name      string
		policy    policies.Enforcer
		approvals policies.ApprovalDecider
		approve   ApprovalFunc
		want      result
	}{
		{"allow", &policiestest.Enforcer{}, nil, nil, result{text: `act: {"n":1}`}},
		{"block", &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.Block, Module: "rules", Reason: "no acting"}}, nil, nil,
			result{errText: `runtime: tool "srv__act": blocked by policy "rules": no acting`, module: "rules"}},
		{"rewrite", &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.Allow, Arguments: json.RawMessage(`{"n":2}`)}}, nil, nil, result{text: `act: {"n":2}`}},
		{"approval without callback", &policiestest.Enforcer{Outcome: ask}, nil, nil,
			result{errText: `approval denied by the approver: nobody to ask`}},
		{"approved by human", &policiestest.Enforcer{Outcome: ask}, nil, approve(true, nil), result{text: `act: {"n":1}`}},
		{"refused by human", &policiestest.Enforcer{Outcome: ask}, nil, approve(false, nil), result{errText: `runtime: tool "srv__act": approval denied by the approver`}},
		{"callback error", &policiestest.Enforcer{Outcome: ask}, nil, approve(false, errors.New("user away")), result{errText: `approval denied by the approver: user away`}},
		{"decider allows", &policiestest.Enforcer{Outcome: ask}, &policiestest.ApprovalDecider{Outcome: policies.ApprovalOutcome{Decision: policies.AllowOnce}}, approve(false, nil), result{text: `act: {"n":1}`}},
		{"decider denies", &policiestest.Enforcer{Outcome: ask}, &policiestest.ApprovalDecider{Outcome: policies.ApprovalOutcome{Decision: policies.Deny, Module: "approvals", Reason: "never"}}, approve(true, nil),
			result{errText: `approval denied by policy "approvals": never`, module: "approvals"}},
		{"decider asks", &policiestest.Enforcer{Outcome: ask}, &policiestest.ApprovalDecider{Outcome: policies.ApprovalOutcome{Decision: policies.Ask}}, approve(true, nil), result{text: `act: {"n":1}`}},
		{"decider answers garbage", &policiestest.Enforcer{Outcome: ask}, &policiestest.ApprovalDecider{Outcome: policies.ApprovalOutcome{Decision: "maybe", Module: "odd"}}, approve(true, nil),
			result{errText: `approval denied by policy "odd"`, module: "odd"}},
		{"unknown outcome fails closed", &policiestest.Enforcer{Outcome: policies.Outcome{Decision: "perhaps", Module: "odd"}}, nil, nil, result{errText: `blocked by policy "odd"`, module: "odd"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer("srv", nil)
			echoTool(srv, "act")
			s := open(t, []Server{inProcess(t, "srv", srv)}, &Options{Enforcer: tc.policy, ApprovalDecider: tc.approvals, AskHuman: tc.approve})
			res, err := s.CallTool(context.Background(), "srv__act", []byte(`{"n":1}`))
			if tc.want.errText == "" {
				if err != nil {
					t.Fatalf("CallTool: %v", err)
				}
				if got := resultText(t, res); got != tc.want.text {
					t.Errorf("result = %q, want %q", got, tc.want.text)
				}
				return
			}
			var pe *PolicyError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want.errText) || pe.Module != tc.want.module {
				t.Fatalf("CallTool: %v, want a *PolicyError %q from module %q", err, tc.want.errText, tc.want.module)
			}
			if fa, ok := tc.approvals.(*policiestest.ApprovalDecider); ok {
				r := fa.Requests()[0]
				if r.Kind != policies.ApprovalTool || r.Surface != policies.SurfaceEmbedded || r.Tool.RawName != "act" || !strings.Contains(string(r.Request), `"reason":"writes need a human"`) {
					t.Errorf("decide_approval input = %+v (%s)", r, r.Request)
				}
			}
		})
	}
}

// Every answer of Options.AskHuman is audited under "approve:"+Approver,
// with the refusal's reason; decide_approval's own answers are not (the
// engine records those).
func TestApprovalAnswersAudited(t *testing.T) {
	t.Parallel()
	ask := policies.Outcome{Decision: policies.RequireApproval, Module: "rules", Reason: "writes need a human"}
	for _, tc := range []struct {
		name     string
		approve  ApprovalFunc
		approver string
		want     string // decision and reason of the one record; "" for none
	}{
		{"approved", func(context.Context, *ApprovalRequest) (bool, error) { return true, nil }, "terminal", "allow-once/"},
		{"refused", func(context.Context, *ApprovalRequest) (bool, error) { return false, nil }, "terminal", "deny/refused"},
		{"error", func(context.Context, *ApprovalRequest) (bool, error) { return false, errors.New("user away") }, "", "deny/user away"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer("srv", nil)
			echoTool(srv, "act")
			audit := &policiestest.AuditRecorder{}
			s := open(t, []Server{inProcess(t, "srv", srv)}, &Options{Enforcer: &policiestest.Enforcer{Outcome: ask}, AskHuman: tc.approve, Approver: tc.approver, Audit: audit})
			_, _ = s.CallTool(context.Background(), "srv__act", []byte(`{}`))
			recs := audit.Records()
			who := tc.approver
			if who == "" {
				who = "embedder"
			}
			if len(recs) != 1 || recs[0].Hook != policies.HookDecideApproval || recs[0].Module != "approve:"+who ||
				recs[0].Tool != "srv__act" || recs[0].Server != "srv" || recs[0].Surface != policies.SurfaceEmbedded ||
				recs[0].Decision+"/"+recs[0].Reason != tc.want {
				t.Fatalf("audit %+v, want one approve:%s record %s", recs, who, tc.want)
			}
		})
	}
}

func TestApprovalTimeout(t *testing.T) {
	t.Parallel()
	srv := newServer("srv", nil)
	echoTool(srv, "act")
	var deadline atomic.Bool
	s := open(t, []Server{inProcess(t, "srv", srv)}, &Options{
		Enforcer: &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.RequireApproval, Module: "rules", TimeoutMs: 20}},
		AskHuman: func(ctx context.Context, req *ApprovalRequest) (bool, error) {
			_, ok := ctx.Deadline()
			deadline.Store(ok && req.Timeout == 20*time.Millisecond)
			<-ctx.Done() // nobody answers
			return false, ctx.Err()
		},
	})
	_, err := s.CallTool(context.Background(), "srv__act", nil)
	var pe *PolicyError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "not answered within 20ms") {
		t.Fatalf("CallTool: %v, want an approval timeout", err)
	}
	if !deadline.Load() {
		t.Error("the approval callback's ctx carried no deadline from timeout_ms")
	}
}

// A server that answers with JSON-RPC errors works: however many error
// answers in a row, it is never paused (the pause would take it away from
// every caller), and each caller gets its answer.
func TestErrorAnswersDoNotPause(t *testing.T) {
	t.Parallel()
	srv := newServer("picky", nil)
	var n atomic.Int32
	srv.AddTool(&mcp.Tool{Name: "op", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("bad input %d", n.Add(1))}
		})
	s := open(t, []Server{inProcess(t, "picky", srv)}, &Options{PauseAfter: 2})
	for i := range 5 {
		_, err := s.CallTool(context.Background(), "picky__op", nil)
		var pe *PausedError
		var rpc *jsonrpc.Error
		if errors.As(err, &pe) || !errors.As(err, &rpc) || rpc.Message != fmt.Sprintf("bad input %d", i+1) {
			t.Fatalf("call %d: %v, want the server's own error answer", i+1, err)
		}
	}
	if st := s.Status()[0]; !st.PausedUntil.IsZero() {
		t.Errorf("status %+v: paused by error answers", st)
	}
}

// gate adds a tool that blocks until release is closed, counting the calls
// inside it.
func gate(srv *mcp.Server, inside, peak *atomic.Int32, entered chan<- struct{}, release <-chan struct{}) {
	srv.AddTool(&mcp.Tool{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := inside.Add(1)
			defer inside.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return textResult("done"), nil
		})
}

func TestParallelism(t *testing.T) {
	t.Parallel()
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) {
			t.Parallel()
			srv := newServer("srv", nil)
			var inside, peak atomic.Int32
			entered := make(chan struct{}, 4)
			release := make(chan struct{})
			gate(srv, &inside, &peak, entered, release)
			sv := inProcess(t, "srv", srv)
			sv.SupportsParallelToolCalls = parallel
			s := open(t, []Server{sv}, &Options{})
			var wg sync.WaitGroup
			errs := make([]error, 3)
			for i := range 3 {
				wg.Go(func() { _, errs[i] = s.CallTool(context.Background(), "srv__slow", nil) })
			}
			<-entered
			if parallel {
				<-entered // a second call enters while the first is held
				<-entered
			}
			close(release)
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			want := int32(1)
			if parallel {
				want = 3
			}
			if got := peak.Load(); got != want {
				t.Errorf("peak concurrent calls = %d, want %d", got, want)
			}
		})
	}
}

func TestRequestTimeoutCancelsUpstream(t *testing.T) {
	t.Parallel()
	srv := newServer("srv", nil)
	var inside atomic.Int32
	entered := make(chan struct{}, 4)
	cancelled := make(chan struct{}, 4)
	srv.AddTool(&mcp.Tool{Name: "hang", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			inside.Add(1)
			entered <- struct{}{}
			<-ctx.Done() // ends only when the client's cancellation arrives
			cancelled <- struct{}{}
			return nil, ctx.Err()
		})
	sv := inProcess(t, "srv", srv)
	// Must fire for the first call but not for the listing or the second
	// call, which the caller cancels: seconds, as a loaded machine can
	// stall an in-process round trip for more than 50 ms.
	sv.Entry.RequestTimeoutMs = 2000
	sv.SupportsParallelToolCalls = true
	s := open(t, []Server{sv}, &Options{})

	_, err := s.CallTool(context.Background(), "srv__hang", nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within the request timeout (2s)") {
		t.Fatalf("CallTool: %v, want the request timeout", err)
	}
	<-cancelled // notifications/cancelled reached the server

	// A caller's cancellation is passed upstream too, and is not the
	// server's failure.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-entered; <-entered; cancel() }()
	_, err = s.CallTool(ctx, "srv__hang", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled CallTool: %v", err)
	}
	<-cancelled
	s.set.Load().conns[0].mu.Lock()
	failures := s.set.Load().conns[0].failures
	s.set.Load().conns[0].mu.Unlock()
	if failures != 1 {
		t.Errorf("failures = %d, want 1 (the timeout only)", failures)
	}
}

func TestProgressPassesThrough(t *testing.T) {
	t.Parallel()
	srv := newServer("srv", nil)
	ack := make(chan struct{}, 1)
	srv.AddTool(&mcp.Tool{Name: "work", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tok := req.Params.GetProgressToken()
			if tok == nil {
				return textResult("no token"), nil
			}
			for i := 1; i <= 3; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)}); err != nil {
					return nil, err
				}
				select { // the embedder saw it while the call runs
				case <-ack:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return textResult("done"), nil
		})
	s := open(t, []Server{inProcess(t, "srv", srv)}, &Options{})
	var got []Progress // written by the handler before each ack
	ctx := WithProgress(context.Background(), func(p Progress) {
		got = append(got, p)
		ack <- struct{}{}
	})
	res, err := s.CallTool(ctx, "srv__work", nil)
	if err != nil || resultText(t, res) != "done" {
		t.Fatalf("CallTool: %v %v", res, err)
	}
	want := []Progress{{"srv__work", 1, 3, "step 1"}, {"srv__work", 2, 3, "step 2"}, {"srv__work", 3, 3, "step 3"}}
	if !slices.Equal(got, want) {
		t.Errorf("progress = %+v, want %+v", got, want)
	}
	if res, _ := s.CallTool(context.Background(), "srv__work", nil); resultText(t, res) != "no token" {
		t.Error("a call without WithProgress asked for progress")
	}
}

func TestCloseEndsEverything(t *testing.T) {
	t.Parallel()
	srv := newServer("srv", nil)
	var inside, peak atomic.Int32
	entered := make(chan struct{}, 1)
	gate(srv, &inside, &peak, entered, make(chan struct{}))
	s := open(t, []Server{inProcess(t, "srv", srv)}, &Options{})
	errc := make(chan error, 1)
	go func() {
		_, err := s.CallTool(context.Background(), "srv__slow", nil)
		errc <- err
	}()
	<-entered
	var wg sync.WaitGroup
	for range 3 { // concurrent, idempotent
		wg.Go(func() {
			if err := s.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	wg.Wait()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("call in flight: %v, want ErrClosed", err)
	}
	if _, err := s.CallTool(context.Background(), "srv__slow", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("CallTool after Close: %v", err)
	}
	if _, err := s.Tools(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Tools after Close: %v", err)
	}
	if err := s.Connect(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Connect after Close: %v", err)
	}
	if st := s.Status(); st[0].Connected {
		t.Error("status still connected after Close")
	}
}

func TestCallBeforeConnect(t *testing.T) {
	t.Parallel()
	s, err := New(nil, &Options{Enforcer: &policiestest.Enforcer{}, Sanitizer: &policiestest.Sanitizer{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CallTool(context.Background(), "x", nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("CallTool before Connect: %v", err)
	}
	if err := s.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(context.Background()); err == nil {
		t.Error("second Connect succeeded")
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// redialer is a reconnectable in-process transport: each Connect starts a
// fresh session of srv.
type redialer struct {
	srv   *mcp.Server
	dials atomic.Int32
	mu    sync.Mutex
	stops []func()
}

func (r *redialer) Connect(ctx context.Context) (mcp.Connection, error) {
	r.dials.Add(1)
	ct, stop := testkit.ServeInMemory(r.srv)
	r.mu.Lock()
	r.stops = append(r.stops, stop)
	r.mu.Unlock()
	return ct.Connect(ctx)
}

func (r *redialer) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.stops {
		f()
	}
}

func TestIdleReaping(t *testing.T) {
	t.Parallel()
	srv := newServer("srv", nil)
	echoTool(srv, "ping")
	rd := &redialer{srv: srv}
	t.Cleanup(rd.stop)
	evs := newEvents()
	s := open(t, []Server{{Name: "srv", Transport: rd, Entry: config.ServerEntry{RequestTimeoutMs: 30000}}}, &Options{IdleTTL: 20 * time.Millisecond, OnEvent: evs.on})
	evs.wait(t, EventIdle, "srv")
	if st := s.Status()[0]; st.Connected {
		t.Errorf("status after reaping = %+v, want disconnected", st)
	}
	dials := rd.dials.Load()
	res, err := s.CallTool(context.Background(), "srv__ping", []byte(`{}`))
	if err != nil || resultText(t, res) != "ping: {}" {
		t.Fatalf("call after reaping: %v %v", res, err)
	}
	if got := rd.dials.Load(); got <= dials {
		t.Errorf("dials = %d after the call, want a new connection (> %d)", got, dials)
	}
}

func TestNoReapingWhileInUse(t *testing.T) {
	t.Parallel()
	srv := newServer("srv", nil)
	var inside, peak atomic.Int32
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	gate(srv, &inside, &peak, entered, release)
	rd := &redialer{srv: srv}
	t.Cleanup(rd.stop)
	evs := newEvents()
	s := open(t, []Server{{Name: "srv", Transport: rd, Entry: config.ServerEntry{RequestTimeoutMs: 30000}}}, &Options{IdleTTL: time.Millisecond, OnEvent: evs.on})
	errc := make(chan error, 1)
	go func() {
		_, err := s.CallTool(context.Background(), "srv__slow", nil)
		errc <- err
	}()
	<-entered
	// The call is in flight: the reaper, ticking every millisecond, must
	// leave it alone (a reap would cancel the call and fail it).
	for range 20 {
		s.reapIfIdle(time.Nanosecond)
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatalf("call in flight during reaping: %v", err)
	}
}

func TestTimeoutsRecycleTheConnection(t *testing.T) {
	t.Parallel()
	srv := newServer("srv", nil)
	echoTool(srv, "ping")
	srv.AddTool(&mcp.Tool{Name: "hang", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
	rd := &redialer{srv: srv}
	t.Cleanup(rd.stop)
	evs := newEvents()
	sv := Server{Name: "srv", Transport: rd}
	// The request timeout must fire for hang but never for the listing or
	// ping (it bounds tools/list too): on a loaded machine 20 ms was not
	// enough for them, so it is seconds, and the three hangs cost 3 × 2 s.
	sv.Entry.RequestTimeoutMs = 2000
	s := open(t, []Server{sv}, &Options{OnEvent: evs.on, PauseDuration: time.Millisecond})
	for range 3 {
		if _, err := s.CallTool(context.Background(), "srv__hang", nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("hang: %v, want a timeout", err)
		}
	}
	evs.wait(t, EventPaused, "srv")
	evs.wait(t, EventResumed, "srv")
	if st := s.Status()[0]; st.Connected {
		t.Errorf("after 3 timeouts the connection is still open: %+v", st)
	}
	if n := rd.dials.Load(); n != 1 {
		t.Fatalf("dials before the next call = %d, want 1", n)
	}
	res, err := s.CallTool(context.Background(), "srv__ping", []byte(`{}`))
	if err != nil || resultText(t, res) != "ping: {}" {
		t.Fatalf("call after recycling: %v %v", res, err)
	}
	if n := rd.dials.Load(); n != 2 {
		t.Errorf("dials = %d, want 2 (one redial)", n)
	}
}

// TestIdentityReachesDecisions: the identity WithIdentity names reaches the
// before_tool_call input, the decide_approval input and the audit record of
// the human's answer; a call without one has none.
func TestIdentityReachesDecisions(t *testing.T) {
	t.Parallel()
	srv := newServer("srv", nil)
	echoTool(srv, "act")
	pol := &policiestest.Enforcer{Outcome: policies.Outcome{Decision: policies.RequireApproval, Module: "rules", Reason: "ask"}}
	appr := &policiestest.ApprovalDecider{Outcome: policies.ApprovalOutcome{Decision: policies.Ask}}
	audit := &policiestest.AuditRecorder{}
	s := open(t, []Server{inProcess(t, "srv", srv)}, &Options{Enforcer: pol, ApprovalDecider: appr, Audit: audit,
		AskHuman: func(context.Context, *ApprovalRequest) (bool, error) { return true, nil }})
	id := &policies.Identity{Issuer: "https://idp.example", Subject: "alice", Claims: map[string]json.RawMessage{"groups": json.RawMessage(`["oncall"]`)}}
	if _, err := s.CallTool(WithIdentity(context.Background(), id), "srv__act", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CallTool(context.Background(), "srv__act", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if calls := pol.Calls(); len(calls) != 2 || calls[0].Identity != id || calls[1].Identity != nil {
		t.Errorf("before_tool_call identities: %+v", calls)
	}
	if reqs := appr.Requests(); len(reqs) != 2 || reqs[0].Identity != id || reqs[1].Identity != nil {
		t.Errorf("decide_approval identities: %+v", reqs)
	}
	recs := audit.Records()
	if len(recs) != 2 || recs[0].Subject != "alice" || recs[0].Issuer != "https://idp.example" || recs[1].Subject != "" {
		t.Errorf("audit records: %+v", recs)
	}
}
