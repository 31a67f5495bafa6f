package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// scriptTool is one tools/list entry of a scriptPeer.
type scriptTool struct{ name, description string }

// scriptHooks change how a scriptPeer answers; nil fields keep the default.
type scriptHooks struct {
	// list runs before each tools/list is answered (n counts them from 1),
	// in its own goroutine; a non-nil error is sent as the JSON-RPC error.
	list func(ctx context.Context, n int) *jsonrpc.Error
	// call answers a tools/call with a text, and may first write
	// notifications on conn; the default answers "called <name>".
	call func(ctx context.Context, conn mcp.Connection, params json.RawMessage) string
}

// scriptPeer is a raw MCP server on an in-memory transport: it lists
// tools as given (repeats included, which no SDK server allows) and
// answers tools/call, as hooks say.
func scriptPeer(t *testing.T, name string, tools []scriptTool, hooks scriptHooks) Server {
	t.Helper()
	lists := 0
	return rawServer(t, name, func(ctx context.Context, conn *rawConn, req *jsonrpc.Request) *jsonrpc.Response {
		resp := &jsonrpc.Response{ID: req.ID}
		switch req.Method {
		case "tools/list":
			list := []map[string]any{}
			for _, tl := range tools {
				list = append(list, map[string]any{"name": tl.name, "description": tl.description, "inputSchema": map[string]any{"type": "object"}})
			}
			resp.Result, _ = json.Marshal(map[string]any{"tools": list})
			if hooks.list != nil {
				lists++
				n := lists
				conn.wg.Go(func() {
					if jerr := hooks.list(ctx, n); jerr != nil {
						resp.Result, resp.Error = nil, jerr
					}
					_ = conn.Write(ctx, resp)
				})
				return nil
			}
		case "tools/call":
			var p struct{ Name string }
			_ = json.Unmarshal(req.Params, &p)
			text := "called " + p.Name
			if hooks.call != nil {
				text = hooks.call(ctx, conn, req.Params)
			}
			resp.Result, _ = json.Marshal(map[string]any{"content": []map[string]any{{"type": "text", "text": text}}})
		default:
			resp.Result = json.RawMessage(`{}`)
		}
		return resp
	})
}

// A server that lists a name twice exposes it once, with its first
// definition; a tool policy entry written for `server__tool` hides the tool
// whatever suffix the sanitizer gave it (case collision, reserved name).
func TestRepeatedToolNamesAndRenamedPolicyMatch(t *testing.T) {
	t.Parallel()
	dupTools := []scriptTool{{"t", "first"}, {"t", "second"}, {"T", "upper"}}
	tests := []struct {
		name     string
		reserved []string
		policy   *ToolPolicy
		want     []string // the catalog: exposed name -> description
		hidden   []string // exposed names CallTool must refuse as hidden
		unknown  []string // exposed names that must not exist at all
	}{
		{name: "no policy", want: []string{"dup__t=first", "dup__T-2=upper"}, unknown: []string{"dup__t-2", "dup__T-3"}},
		{name: "deny the tool", policy: &ToolPolicy{Deny: []string{"dup__t"}},
			hidden: []string{"dup__t", "dup__T-2"}, unknown: []string{"dup__t-2", "dup__T-3"}},
		{name: "deny a reserved-renamed tool", reserved: []string{"DUP__t"}, policy: &ToolPolicy{Deny: []string{"dup__t"}},
			hidden: []string{"dup__t-2", "dup__T-3"}},
		{name: "allow a reserved-renamed tool", reserved: []string{"DUP__t"}, policy: &ToolPolicy{Allow: []string{"dup__t"}},
			want: []string{"dup__t-2=first", "dup__T-3=upper"}},
		{name: "allow another name", policy: &ToolPolicy{Allow: []string{"dup__x"}},
			hidden: []string{"dup__t", "dup__T-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := open(t, []Server{scriptPeer(t, "dup", dupTools, scriptHooks{})}, &Options{Reserved: tt.reserved, ToolPolicy: tt.policy})
			tools, err := s.Tools(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tl := range tools {
				got = append(got, tl.Name+"="+tl.Upstream.Description)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("catalog = %v, want %v", got, tt.want)
			}
			for _, name := range tt.hidden {
				res, err := s.CallTool(context.Background(), name, []byte(`{}`))
				var he *HiddenToolError
				if !errors.As(err, &he) || !strings.Contains(he.Rule, "dup__t") && !strings.Contains(he.Rule, "tools.allow") {
					t.Errorf("CallTool(%s) = %v, %v; want hidden by the entry", name, res, err)
				}
			}
			for _, name := range tt.unknown {
				res, err := s.CallTool(context.Background(), name, []byte(`{}`))
				var he *HiddenToolError
				if !errors.Is(err, ErrUnknownTool) || errors.As(err, &he) {
					t.Errorf("CallTool(%s) = %v, %v; want an unknown tool", name, res, err)
				}
			}
		})
	}
}

func TestUniqueTools(t *testing.T) {
	t.Parallel()
	mk := func(names ...string) []*mcp.Tool {
		var out []*mcp.Tool
		for _, n := range names {
			out = append(out, &mcp.Tool{Name: n})
		}
		return out
	}
	for _, tc := range []struct {
		in, want, repeated []string
	}{
		{in: nil},
		{in: []string{"a", "b", "A"}, want: []string{"a", "b", "A"}},
		{in: []string{"a", "a"}, want: []string{"a"}, repeated: []string{"a"}},
		{in: []string{"a", "b", "a", "c", "b", "a"}, want: []string{"a", "b", "c"}, repeated: []string{"a", "b"}},
	} {
		in := mk(tc.in...)
		out, rep := uniqueTools(in)
		var got []string
		for _, tl := range out {
			got = append(got, tl.Name)
		}
		if !slices.Equal(got, tc.want) || !slices.Equal(rep, tc.repeated) {
			t.Errorf("uniqueTools(%v) = %v, %v; want %v, %v", tc.in, got, rep, tc.want, tc.repeated)
		}
		if len(in) > 0 && out[0] != in[0] {
			t.Errorf("uniqueTools(%v) did not keep the first definition", tc.in)
		}
	}
}

// A server cannot inject progress into a call to another server: it sends
// notifications/progress with the token of that call (learnt here through
// the test; tokens are random, so it could not guess one) and with
// counter-shaped tokens; only the called server's notification reaches the
// call's handler.
func TestProgressFromAnotherServerIsDropped(t *testing.T) {
	t.Parallel()
	tokA := make(chan any, 1)
	release := make(chan struct{})
	a := newServer("a", nil)
	a.AddTool(&mcp.Tool{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tok := req.Params.GetProgressToken()
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "from a"})
			tokA <- tok
			select {
			case <-release:
			case <-ctx.Done():
			}
			return textResult("done"), nil
		})
	progress := func(conn mcp.Connection, ctx context.Context, tok any, msg string) {
		p, _ := json.Marshal(map[string]any{"progressToken": tok, "progress": 99, "total": 100, "message": msg})
		_ = conn.Write(ctx, &jsonrpc.Request{Method: "notifications/progress", Params: p})
	}
	b := scriptPeer(t, "b", []scriptTool{{"t", ""}}, scriptHooks{call: func(ctx context.Context, conn mcp.Connection, params json.RawMessage) string {
		var p struct {
			Meta struct {
				ProgressToken any `json:"progressToken"`
			} `json:"_meta"`
		}
		_ = json.Unmarshal(params, &p)
		stolen := <-tokA
		progress(conn, ctx, stolen, "spoofed by b")
		for i := range 30 {
			progress(conn, ctx, "openclaw-"+strconv.Itoa(i), "guessed by b")
		}
		// b's own progress last: once its call sees it, every notification
		// before it has been handled (go-sdk handles them in order).
		progress(conn, ctx, p.Meta.ProgressToken, "b's own")
		select { // answering now could end the call before its progress is handled
		case <-release:
		case <-ctx.Done():
		}
		return "ok"
	}})
	s := open(t, []Server{inProcess(t, "a", a), b}, &Options{})
	ctx := context.Background()

	var mu sync.Mutex
	var seenA []string
	gotA := make(chan struct{}, 1)
	ctxA := WithProgress(ctx, func(p Progress) {
		mu.Lock()
		seenA = append(seenA, p.Tool+": "+p.Message)
		mu.Unlock()
		select {
		case gotA <- struct{}{}:
		default:
		}
	})
	doneA := make(chan error, 1)
	go func() {
		_, err := s.CallTool(ctxA, "a__slow", []byte(`{}`))
		doneA <- err
	}()
	<-gotA // a's own notification arrived; a's call still runs

	var seenB []string
	gotB := make(chan struct{}, 1)
	ctxB := WithProgress(ctx, func(p Progress) {
		mu.Lock()
		seenB = append(seenB, p.Tool+": "+p.Message)
		mu.Unlock()
		select {
		case gotB <- struct{}{}:
		default:
		}
	})
	doneB := make(chan error, 1)
	go func() {
		_, err := s.CallTool(ctxB, "b__t", []byte(`{}`))
		doneB <- err
	}()
	// b's own notification comes after the spoofed ones, on the same
	// connection: once it is seen, they have been handled.
	<-gotB
	close(release)
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"a__slow: from a"}; !slices.Equal(seenA, want) {
		t.Errorf("progress seen by the call to a = %q, want %q", seenA, want)
	}
	if want := []string{"b__t: b's own"}; !slices.Equal(seenB, want) {
		t.Errorf("progress seen by the call to b = %q, want %q", seenB, want)
	}
}

// ctxHook is a before_tool_call module "rules" that allows every call
// whose context is live and fails on a dead one, as a Wasm module's host
// call does.
func ctxHook() *policiestest.BeforeToolCallHook {
	return &policiestest.BeforeToolCallHook{Module: "rules",
		Decide: func(ctx context.Context, _ *policies.ToolCall) (policies.Verdict, error) {
			if err := ctx.Err(); err != nil {
				return policies.Verdict{}, err
			}
			return policies.Verdict{Decision: policies.Allow}, nil
		}}
}

// A cancelled call returns the context's error (audited as cancelled, not
// blamed on the policy); arguments that are not a JSON object are refused,
// naming the tool, before the policy or the server sees them.
func TestCallToolArgumentsAndCancellation(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		args    string
		want    string // the result text, or "" for an error
		is      error  // the error, by errors.Is
		errText string // in the error's text
		policy  bool   // the policy saw the call
		audit   string // the audited decision, "" for none
		// policyArgs, when set, are the arguments the policy must see.
		policyArgs string
	}{
		{name: "object", ctx: context.Background(), args: `{"a":1}`, want: `echo: {"a":1}`, policy: true, audit: "allow"},
		{name: "empty", ctx: context.Background(), args: ``, want: `echo: {}`, policy: true, audit: "allow"},
		{name: "blank", ctx: context.Background(), args: " \n", want: `echo: {}`, policy: true, audit: "allow"},
		{name: "null", ctx: context.Background(), args: `null`, want: `echo: {}`, policy: true, audit: "allow"},
		{name: "not json", ctx: context.Background(), args: `not json`, is: ErrInvalidArguments, errText: `tool "s__echo": the arguments are not valid JSON`},
		{name: "array", ctx: context.Background(), args: `[1,2]`, is: ErrInvalidArguments, errText: `tool "s__echo": the arguments are a JSON array`},
		{name: "string", ctx: context.Background(), args: `"x"`, is: ErrInvalidArguments, errText: "a JSON string"},
		{name: "two objects", ctx: context.Background(), args: `{}{}`, is: ErrInvalidArguments, errText: "not valid JSON"},
		// Repaired as Node.js decodes it (one U+FFFD for the truncated
		// sequence), for the policy and the server alike.
		{name: "ill-formed UTF-8", ctx: context.Background(), args: `{"q":"Z` + "\xe2\x82" + `A"}`, want: `echo: {"q":"Z` + "\uFFFD" + `A"}`, policy: true, audit: "allow",
			policyArgs: `{"q":"Z` + "\uFFFD" + `A"}`},
		{name: "cancelled", ctx: cancelled, args: `{}`, is: context.Canceled, errText: "context canceled", policy: true, audit: policies.DecisionCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer("s", nil)
			echoTool(srv, "echo")
			hook, audit := ctxHook(), &policiestest.AuditRecorder{}
			chain := policies.NewChain([]policies.ChainEntry{{Hook: hook}}, &policies.ChainOptions{Audit: audit})
			s := open(t, []Server{inProcess(t, "s", srv)}, &Options{Enforcer: chain})
			toolNames(t, s) // the catalog is built before a cancelled call
			res, err := s.CallTool(tt.ctx, "s__echo", []byte(tt.args))
			if tt.want != "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := resultText(t, res); got != tt.want {
					t.Errorf("result %q, want %q", got, tt.want)
				}
			} else {
				var pe *PolicyError
				if !errors.Is(err, tt.is) || errors.As(err, &pe) || !strings.Contains(fmt.Sprint(err), tt.errText) {
					t.Fatalf("CallTool(%q) = %v, %v; want %v containing %q, not a policy error", tt.args, res, err, tt.is, tt.errText)
				}
			}
			calls := hook.Calls()
			saw := len(calls) > 0
			if tt.policyArgs != "" && (!saw || string(calls[0].Arguments) != tt.policyArgs) {
				t.Errorf("policy saw calls %+v, want arguments %q", calls, tt.policyArgs)
			}
			if saw != tt.policy {
				t.Errorf("policy saw the call: %v, want %v", saw, tt.policy)
			}
			var got string
			if recs := audit.Records(); len(recs) > 0 {
				got = recs[0].Decision
			}
			if got != tt.audit {
				t.Errorf("audited %q, want %q", got, tt.audit)
			}
		})
	}
}

// An input request the session refuses (no handler, or a failing one) is
// not the server's failure: however often it happens, the server is not
// paused. A server that exhausts the loop's limits is, as before.
func TestRefusedInputRequestsDoNotPause(t *testing.T) {
	t.Parallel()
	failing := func(ctx context.Context, server string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		return nil, errors.New("the person is away")
	}
	for _, tc := range []struct {
		name   string
		elicit func(context.Context, string, *mcp.ElicitParams) (*mcp.ElicitResult, error)
	}{{"no handler", nil}, {"failing handler", failing}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t, []Server{inProcess(t, "inq", inputServer(t, "inq"))}, &Options{
				ProtocolVersion: rev20260728[0], PauseAfter: 2, Elicit: tc.elicit,
			})
			ctx := context.Background()
			for i := range 3 {
				for _, call := range []struct{ tool, args string }{{"inq__ask", `{}`}, {"inq__resources_read", `{"uri":"test://input"}`}} {
					_, err := s.CallTool(ctx, call.tool, []byte(call.args))
					var ie *InputRequestError
					if !errors.As(err, &ie) || ie.Method == "" {
						t.Fatalf("call %d of %s: err = %v, want an *InputRequestError naming what was asked", i+1, call.tool, err)
					}
				}
			}
			if st := s.Status()[0]; !st.PausedUntil.IsZero() {
				t.Errorf("status %+v: paused for the client's refusals", st)
			}
		})
	}
	t.Run("server stays busy", func(t *testing.T) {
		t.Parallel()
		srv := newServer("busy", &mcp.ServerOptions{SupportedProtocolVersions: rev20260728})
		mcp.AddTool(srv, &mcp.Tool{Name: "always_busy"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{}}, nil, nil
		})
		s := open(t, []Server{inProcess(t, "busy", srv)}, &Options{ProtocolVersion: rev20260728[0], PauseAfter: 2})
		ctx := context.Background()
		for i := range 2 {
			if _, err := s.CallTool(ctx, "busy__always_busy", nil); err == nil || !strings.Contains(err.Error(), "stayed busy") {
				t.Fatalf("call %d: err = %v, want 'stayed busy'", i+1, err)
			}
		}
		var pe *PausedError
		if _, err := s.CallTool(ctx, "busy__always_busy", nil); !errors.As(err, &pe) {
			t.Fatalf("third call: err = %v, want the server paused", err)
		}
	})
}

// A listing that Connect's context cuts short is not the server's failure:
// no diagnostic, and the next catalog use lists the server at once (not
// ListRetryDelay later). A listing the server fails is named once
// ("tools/list: <cause>", not "tools/list: tools/list: ...").
func TestListingCutByTheCaller(t *testing.T) {
	t.Parallel()
	t.Run("short Connect ctx", func(t *testing.T) {
		t.Parallel()
		listing, release := make(chan struct{}), make(chan struct{})
		slow := scriptPeer(t, "slow", []scriptTool{{"t", ""}}, scriptHooks{list: func(ctx context.Context, n int) *jsonrpc.Error {
			if n == 1 {
				close(listing)
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return nil
		}})
		s, err := New([]Server{slow}, &Options{Enforcer: &policiestest.Enforcer{}, Sanitizer: &policiestest.Sanitizer{}, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-listing; cancel() }()
		if err := s.Connect(ctx); err != nil {
			t.Fatalf("Connect = %v, want nil: the catalog is named without the cut listing", err)
		}
		close(release)
		if d := s.Diagnostics(); len(d) != 0 {
			t.Errorf("diagnostics %v, want none: the caller ended the listing", d)
		}
		if got := toolNames(t, s); !slices.Equal(got, []string{"slow__t"}) {
			t.Errorf("catalog after Connect = %v, want [slow__t] listed again at once", got)
		}
	})
	t.Run("server fails the listing", func(t *testing.T) {
		t.Parallel()
		broken := scriptPeer(t, "broken", []scriptTool{{"t", ""}}, scriptHooks{list: func(context.Context, int) *jsonrpc.Error {
			return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "disk on fire"}
		}})
		s := open(t, []Server{broken}, &Options{})
		d := s.Diagnostics()
		if len(d) != 1 || !strings.Contains(d[0].Error(), `MCP server "broken": tools/list: `) || strings.Contains(d[0].Error(), "tools/list: tools/list") ||
			!strings.Contains(d[0].Error(), "disk on fire") {
			t.Errorf("diagnostics %v, want one naming tools/list once and the cause", d)
		}
	})
}

// A module's rewrite is held to the caller's rule: arguments that are not
// one JSON object are refused as a block naming the module; a rewrite into
// an object is what the server gets.
func TestRewrittenArgumentsChecked(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ rewrite, want, errText string }{
		{rewrite: `{"b":2}`, want: `echo: {"b":2}`},
		{rewrite: `[1,2]`, errText: `blocked by policy "rewriter": rewrote the arguments into invalid ones: ` +
			`runtime: tool arguments must be a JSON object: tool "s__echo": the arguments are a JSON array`},
		{rewrite: `{"b":`, errText: `policy "rewriter": rewrote the arguments into invalid ones`},
	} {
		t.Run(tt.rewrite, func(t *testing.T) {
			t.Parallel()
			srv := newServer("s", nil)
			echoTool(srv, "echo")
			s := open(t, []Server{inProcess(t, "s", srv)}, &Options{Enforcer: &policiestest.Enforcer{Outcome: policies.Outcome{
				Decision: policies.Allow, Module: "rules", RewrittenBy: "rewriter", Arguments: json.RawMessage(tt.rewrite)}}})
			res, err := s.CallTool(context.Background(), "s__echo", []byte(`{"a":1}`))
			if tt.want != "" {
				if err != nil || resultText(t, res) != tt.want {
					t.Fatalf("call = %v, %v; want %q", res, err, tt.want)
				}
				return
			}
			var pe *PolicyError
			if !errors.As(err, &pe) || pe.Module != "rewriter" || !strings.Contains(err.Error(), tt.errText) {
				t.Fatalf("call = %v, %v; want a *PolicyError of rewriter containing %q", res, err, tt.errText)
			}
		})
	}
}
