package proxy

//lint:file-ignore SA1019 roots, sampling and logging are deprecated by SEP-2577 but still served during its deprecation window: the passthrough relays them between clients and servers on purpose

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/engine"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/runtime"
)

// legacy is the protocol revision on which a server may send requests to
// the client while serving a call (2026-07-28 uses SEP-2322 input requests).
var legacy = []string{"2025-11-25"}

// asker is a before_tool_call module "asker" that wants approval for tools
// whose raw name starts with "danger".
func asker() *policiestest.BeforeToolCallHook {
	return &policiestest.BeforeToolCallHook{Module: "asker",
		Decide: func(_ context.Context, call *policies.ToolCall) (policies.Verdict, error) {
			if strings.HasPrefix(call.Tool.RawName, "danger") {
				return policies.Verdict{Decision: policies.RequireApproval, Title: "Dangerous tool", Description: "It deletes things.", Reason: "destructive"}, nil
			}
			return policies.Verdict{Decision: policies.Allow}, nil
		}}
}

// downstream records what a proxy client received.
type downstream struct {
	mu       sync.Mutex
	logs     []*mcp.LoggingMessageParams
	updated  []string
	elicited []*mcp.ElicitParams
	notify   chan string // "log", "updated", "tools", "resources", "prompts"
	// acceptEmpty makes the client accept approval forms with no content
	// (set before clientOptions).
	acceptEmpty bool
}

func (d *downstream) note(kind string) {
	select {
	case d.notify <- kind:
	default:
	}
}

// wait returns when a notification of kind arrived (a hang guard, not a
// timing assertion).
func (d *downstream) wait(t *testing.T, kind string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case k := <-d.notify:
			if k == kind {
				return
			}
		case <-deadline:
			t.Fatalf("the client received no %s notification", kind)
		}
	}
}

// clientOptions declares sampling, elicitation (answering approve with
// approve) and roots, when full; no server-to-client capability otherwise.
func (d *downstream) clientOptions(full, approve bool) *mcp.ClientOptions {
	o := &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			d.mu.Lock()
			d.logs = append(d.logs, req.Params)
			d.mu.Unlock()
			d.note("log")
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			d.mu.Lock()
			d.updated = append(d.updated, req.Params.URI)
			d.mu.Unlock()
			d.note("updated")
		},
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { d.note("tools") },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { d.note("resources") },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { d.note("prompts") },
	}
	if !full {
		return o
	}
	o.Capabilities.RootsV2 = &mcp.RootCapabilities{ListChanged: true}
	o.CreateMessageHandler = func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: "sampled by the client"}}, nil
	}
	o.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		d.mu.Lock()
		d.elicited = append(d.elicited, req.Params)
		d.mu.Unlock()
		if strings.HasPrefix(req.Params.Message, "Approve") {
			if d.acceptEmpty {
				return &mcp.ElicitResult{Action: "accept"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": approve}}, nil
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada", "username": "Ada"}}, nil
	}
	return o
}

// stack is runtime → proxy → a go-sdk client over in-memory transports.
type stack struct {
	sess  *runtime.Session
	p     *Proxy
	audit *policiestest.AuditRecorder
}

func newStack(t *testing.T, servers []runtime.Server, hook policies.BeforeToolCallHook, upstreamVersion string) *stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	audit := &policiestest.AuditRecorder{}
	relay := NewRelay()
	opts := runtime.Options{
		Enforcer:        policies.NewChain([]policies.ChainEntry{{Hook: hook}}, &policies.ChainOptions{Audit: audit}),
		ApprovalDecider: policies.NewApprovalChain([]policies.ApprovalEntry{{Hook: &policiestest.DecideApprovalHook{Module: "ask-human"}}}, &policies.ApprovalChainOptions{Audit: audit}),
		Sanitizer:       &policiestest.Sanitizer{},
		Surface:         policies.SurfaceProxy,
		Logger:          discard(),
		// The go-sdk fixture sends sampling and elicitation requests only
		// on 2025-11-25 (on 2026-07-28 it would have to use input requests).
		ProtocolVersion: upstreamVersion,
	}
	relay.Install(&opts)
	sess, err := runtime.New(servers, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	if err := sess.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if d := sess.Diagnostics(); len(d) > 0 {
		t.Fatalf("diagnostics: %v", d)
	}
	p, err := New(ctx, sess, &Options{Relay: relay, ProtocolVersions: legacy, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &stack{sess: sess, p: p, audit: audit}
}

// connect connects a client named name to the proxy.
func (s *stack) connect(t *testing.T, name string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return s.connectClient(t, mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, opts))
}

// connectClient connects client to the proxy.
func (s *stack) connectClient(t *testing.T, client *mcp.Client) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	cEnd, sEnd := mcp.NewInMemoryTransports()
	ss, err := s.p.Server().Connect(ctx, sEnd, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := client.Connect(ctx, cEnd, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// upstream is an in-process server (protocol 2025-11-25) whose tool "ask"
// uses sampling, elicitation and roots and logs, and whose "danger" tool
// needs approval. rootsChanged receives its roots/list_changed.
func upstream(t *testing.T) (up *mcp.Server, srv runtime.Server, rootsChanged <-chan struct{}) {
	t.Helper()
	roots := make(chan struct{}, 8)
	up = mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: legacy,
		RootsListChangedHandler: func(context.Context, *mcp.RootsListChangedRequest) {
			select {
			case roots <- struct{}{}:
			default:
			}
		},
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{req.Params.Ref.Name + ":" + req.Params.Argument.Value + "x"}}}, nil
		},
	})
	obj := json.RawMessage(`{"type":"object"}`)
	up.AddTool(&mcp.Tool{Name: "ask", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "asker", Data: "asking the client"})
		cm, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		if err != nil {
			return nil, fmt.Errorf("sampling: %w", err)
		}
		el, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "your name?", RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
		if err != nil {
			return nil, fmt.Errorf("elicitation: %w", err)
		}
		roots, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("roots: %w", err)
		}
		var uris []string
		for _, r := range roots.Roots {
			uris = append(uris, r.URI)
		}
		return text(fmt.Sprintf("%s | %s %v | roots %v", cm.Content.(*mcp.TextContent).Text, el.Action, el.Content["name"], uris)), nil
	})
	up.AddTool(&mcp.Tool{Name: "danger", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("deleted"), nil
	})
	up.AddResource(&mcp.Resource{URI: "mem://doc", Name: "doc", MIMEType: "text/plain"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "the doc"}}}, nil
	})
	up.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://items/{id}", Name: "item"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "item " + strings.TrimPrefix(req.Params.URI, "mem://items/")}}}, nil
	})
	up.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + req.Params.Arguments["who"]}}}}, nil
	})
	return up, runtime.Server{Name: "up", Transport: testkit.InMemory(t, up)}, roots
}

func toolText(t *testing.T, cs *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n"), res.IsError
}

func TestPassthroughInProcess(t *testing.T) {
	t.Parallel()
	up, srv, rootsChanged := upstream(t)
	st := newStack(t, []runtime.Server{srv}, asker(), "")
	d := &downstream{notify: make(chan string, 64)}
	client := mcp.NewClient(&mcp.Implementation{Name: "full-client", Version: "1"}, d.clientOptions(true, true))
	cs := st.connectClient(t, client)
	ctx := context.Background()

	caps := cs.InitializeResult().Capabilities
	if caps.Resources == nil || !caps.Resources.Subscribe || !caps.Resources.ListChanged || caps.Prompts == nil || caps.Completions == nil || caps.Logging == nil || caps.Tools == nil {
		t.Fatalf("proxy capabilities = %+v", caps)
	}

	// The runtime's utility tools are left out: resources and prompts are
	// served as such.
	listed, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range listed.Tools {
		names = append(names, tl.Name)
	}
	if want := []string{"up__ask", "up__danger"}; !slices.Equal(names, want) {
		t.Errorf("tools/list = %v, want %v", names, want)
	}
	withUtil, err := New(ctx, st.sess, &Options{UtilityTools: true, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer withUtil.Close()
	if got := withUtil.Tools(); !slices.Contains(got, "up__resources_read") || !slices.Contains(got, "up__prompts_get") {
		t.Errorf("with UtilityTools, Tools() = %v", got)
	}

	// Resources, templates, reads routed upstream.
	rl, err := cs.ListResources(ctx, nil)
	if err != nil || len(rl.Resources) != 1 || rl.Resources[0].URI != "mem://doc" || rl.Resources[0].MIMEType != "text/plain" {
		t.Fatalf("resources/list = %+v, %v", rl, err)
	}
	tl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tl.ResourceTemplates) != 1 || tl.ResourceTemplates[0].URITemplate != "mem://items/{id}" {
		t.Fatalf("resources/templates/list = %+v, %v", tl, err)
	}
	for uri, want := range map[string]string{"mem://doc": "the doc", "mem://items/7": "item 7"} {
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || rr.Contents[0].Text != want {
			t.Errorf("resources/read %s = %+v, %v; want %q", uri, rr, err, want)
		}
	}

	// Prompts under exposed names; completion by exposed prompt name.
	pl, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(pl.Prompts) != 1 || pl.Prompts[0].Name != "up__greet" || pl.Prompts[0].Arguments[0].Name != "who" {
		t.Fatalf("prompts/list = %+v, %v", pl, err)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "up__greet", Arguments: map[string]string{"who": "Ada"}})
	if err != nil || gp.Messages[0].Content.(*mcp.TextContent).Text != "hello Ada" {
		t.Fatalf("prompts/get = %+v, %v", gp, err)
	}
	cr, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "up__greet"}, Argument: mcp.CompleteParamsArgument{Name: "who", Value: "A"}})
	if err != nil || !slices.Equal(cr.Completion.Values, []string{"greet:Ax"}) {
		t.Fatalf("completion/complete = %+v, %v", cr, err)
	}

	// Sampling, elicitation, roots and a log message from inside a call go
	// back to the client that made it.
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	got, isErr := toolText(t, cs, "up__ask", nil)
	if isErr || got != "sampled by the client | accept Ada | roots []" {
		t.Fatalf("up__ask = %q (isError %v)", got, isErr)
	}
	d.mu.Lock()
	logs := slices.Clone(d.logs)
	d.mu.Unlock()
	if len(logs) == 0 || logs[0].Logger != "up/asker" || logs[0].Data != "asking the client" {
		t.Errorf("log messages = %+v; want one from up/asker", logs)
	}

	// The client's roots change: the server hears of it and sees the new
	// roots in its next roots/list.
	client.AddRoots(&mcp.Root{URI: "file:///projects/a", Name: "a"})
	select {
	case <-rootsChanged:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the server received no roots/list_changed")
	}
	if got, _ := toolText(t, cs, "up__ask", nil); !strings.HasSuffix(got, "roots [file:///projects/a]") {
		t.Errorf("up__ask after a roots change = %q", got)
	}

	// Subscriptions and updates.
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "mem://doc"}); err != nil {
		t.Fatal(err)
	}
	if err := up.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "mem://doc"}); err != nil {
		t.Fatal(err)
	}
	d.wait(t, "updated")
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "mem://doc"}); err != nil {
		t.Fatal(err)
	}

	// List changes are relayed as soon as the server sends them, with no
	// request from the client.
	up.AddPrompt(&mcp.Prompt{Name: "late"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "late"}}}}, nil
	})
	d.wait(t, "prompts")
	up.AddResource(&mcp.Resource{URI: "mem://new", Name: "new"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "new"}}}, nil
	})
	d.wait(t, "resources")
	up.AddTool(&mcp.Tool{Name: "late", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("late tool"), nil
	})
	d.wait(t, "tools")
	if got, _ := toolText(t, cs, "up__late", nil); got != "late tool" {
		t.Errorf("up__late = %q", got)
	}
	pl, err = cs.ListPrompts(ctx, nil)
	if err != nil || len(pl.Prompts) != 2 {
		t.Errorf("prompts/list after a change = %+v, %v", pl, err)
	}
}

// openStack is newStack on the upstream fixture with a second proxy on the
// same runtime session, open to every protocol revision: a go-sdk client
// of it negotiates 2026-07-28.
func openStack(t *testing.T) *stack {
	t.Helper()
	_, srv, _ := upstream(t)
	st := newStack(t, []runtime.Server{srv}, asker(), "")
	p2, err := New(context.Background(), st.sess, &Options{Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p2.Close() })
	return &stack{sess: st.sess, p: p2}
}

func TestPassthroughNewProtocolClient(t *testing.T) {
	t.Parallel()
	// On 2026-07-28 the servers' requests during a call travel as input
	// requests (SEP-2322), which the go-sdk client fulfils and sends back
	// in a retry.
	st2 := openStack(t)
	p2 := st2.p
	d := &downstream{notify: make(chan string, 64)}
	cs := st2.connect(t, "new-client", d.clientOptions(true, true))
	if v := cs.InitializeResult().ProtocolVersion; v < "2026-07-28" {
		t.Fatalf("the client negotiated %s, want 2026-07-28 or later", v)
	}
	for _, tc := range []struct{ tool, want string }{
		{"up__ask", "sampled by the client | accept Ada | roots []"},
		{"up__danger", "deleted"}, // approved through elicitation
		{"up__ask", "sampled by the client | accept Ada | roots []"},
	} {
		got, isErr := toolText(t, cs, tc.tool, nil)
		if isErr || got != tc.want {
			t.Errorf("%s from a 2026-07-28 client = %q (isError %v), want %q", tc.tool, got, isErr, tc.want)
		}
	}
	d.mu.Lock()
	n := len(d.elicited)
	d.mu.Unlock()
	if n != 3 {
		t.Errorf("elicitations = %d, want 3 (two asks, one approval)", n)
	}
	p2.roundsMu.Lock()
	left := len(p2.rounds)
	p2.roundsMu.Unlock()
	if left != 0 {
		t.Errorf("%d calls still wait for input after they ended", left)
	}

	// A retry naming a state nobody issued is refused.
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "up__ask", RequestState: "forged"})
	if err == nil || !strings.Contains(err.Error(), "requestState") {
		t.Errorf("forged requestState: %v", err)
	}
}

func TestPassthroughApprovalByElicitation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		full      bool // the client declares elicitation
		approve   bool
		wantText  string
		wantError bool
		empty     bool // the client accepts with no content
	}{
		{"approved", true, true, "deleted", false, false},
		{"refused", true, false, "approval denied by the approver", true, false},
		{"accepted with no answer", true, false, `approval denied by the approver: the MCP client accepted the approval form without an "approve" answer`, true, true},
		{"client cannot be asked", false, false, "no elicitation capability", true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, srv, _ := upstream(t)
			st := newStack(t, []runtime.Server{srv}, asker(), "")
			d := &downstream{notify: make(chan string, 64), acceptEmpty: tc.empty}
			cs := st.connect(t, "approver", d.clientOptions(tc.full, tc.approve))
			got, isErr := toolText(t, cs, "up__danger", nil)
			if isErr != tc.wantError || !strings.Contains(got, tc.wantText) {
				t.Fatalf("up__danger = %q (isError %v); want %q, isError %v", got, isErr, tc.wantText, tc.wantError)
			}
			d.mu.Lock()
			elicited := slices.Clone(d.elicited)
			d.mu.Unlock()
			if tc.full {
				if len(elicited) != 1 {
					t.Fatalf("elicitations = %d, want 1", len(elicited))
				}
				msg := elicited[0].Message
				for _, want := range []string{`"up__danger"`, `"up"`, "Dangerous tool", "It deletes things.", "asker"} {
					if !strings.Contains(msg, want) {
						t.Errorf("approval question %q lacks %q", msg, want)
					}
				}
				if elicited[0].Mode != "form" {
					t.Errorf("elicitation mode = %q, want form", elicited[0].Mode)
				}
			}
			var hooks []string
			for _, r := range st.audit.Records() {
				if r.Surface != policies.SurfaceProxy || r.Tool != "up__danger" || r.Caller == "" {
					t.Errorf("audit record %+v: want surface proxy, tool up__danger, a caller", r)
				}
				hooks = append(hooks, string(r.Hook)+"="+r.Decision)
			}
			if len(hooks) != 2 {
				t.Errorf("audit = %v; want before_tool_call and decide_approval", hooks)
			}
		})
	}
}

func TestPassthroughServerEverything(t *testing.T) {
	t.Parallel()
	script := testkit.Peer(t, testkit.ServerEverything)
	testkit.Node(t)
	st := newStack(t, []runtime.Server{{Name: "everything", Entry: config.ServerEntry{
		Command: "node", Args: []string{script, "stdio"}, RequestTimeoutMs: 30000, ConnectionTimeoutMs: 30000,
	}}}, asker(), "")
	d := &downstream{notify: make(chan string, 256)}
	cs := st.connect(t, "everything-client", d.clientOptions(true, true))
	ctx := context.Background()

	caps := cs.InitializeResult().Capabilities
	if caps.Resources == nil || !caps.Resources.Subscribe || caps.Prompts == nil || caps.Completions == nil || caps.Logging == nil {
		t.Fatalf("proxy capabilities = %+v", caps)
	}
	rl, err := cs.ListResources(ctx, nil)
	if err != nil || len(rl.Resources) == 0 || !strings.HasPrefix(rl.Resources[0].URI, "demo://resource/static/document/") {
		t.Fatalf("resources/list = %+v, %v", rl, err)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://resource/dynamic/text/3"})
	if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, "3") {
		t.Fatalf("resources/read of a templated URI = %+v, %v", rr, err)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "everything__args-prompt", Arguments: map[string]string{"city": "Lyon"}})
	if err != nil || !strings.Contains(gp.Messages[0].Content.(*mcp.TextContent).Text, "Lyon") {
		t.Fatalf("prompts/get args-prompt = %+v, %v", gp, err)
	}
	cr, err := cs.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "everything__completable-prompt"},
		Argument: mcp.CompleteParamsArgument{Name: "department", Value: "S"},
	})
	if err != nil || !slices.Equal(cr.Completion.Values, []string{"Sales", "Support"}) {
		t.Fatalf("completion/complete = %+v, %v", cr, err)
	}

	// The sampling tool appears (list_changed) because the runtime
	// advertised sampling; the request reaches this client.
	waitTool := func(name string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // a hang guard
		for {
			res, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == name }) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("tool %s never listed", name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitTool("everything__trigger-sampling-request")
	got, isErr := toolText(t, cs, "everything__trigger-sampling-request", map[string]any{"prompt": "hello"})
	if isErr || !strings.Contains(got, "sampled by the client") {
		t.Fatalf("trigger-sampling-request = %q (isError %v)", got, isErr)
	}
	waitTool("everything__trigger-elicitation-request")
	got, isErr = toolText(t, cs, "everything__trigger-elicitation-request", nil)
	if isErr || !strings.Contains(got, "Ada") {
		t.Fatalf("trigger-elicitation-request = %q (isError %v)", got, isErr)
	}

	// Logging: setLevel reaches the server; its messages reach the client.
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: rl.Resources[0].URI}); err != nil {
		t.Fatal(err)
	}
	// server-everything logs every subscribe request; other log lines (a
	// late "Roots updated") may come first.
	var lg *mcp.LoggingMessageParams
	for range 20 {
		d.wait(t, "log")
		d.mu.Lock()
		lg = d.logs[len(d.logs)-1]
		d.mu.Unlock()
		if strings.Contains(fmt.Sprint(lg.Data), "Subscribe") {
			break
		}
	}
	if !strings.HasPrefix(lg.Logger, "everything") || !strings.Contains(fmt.Sprint(lg.Data), "Subscribe") {
		t.Errorf("log message = %+v", lg)
	}
	got, isErr = toolText(t, cs, "everything__toggle-subscriber-updates", nil)
	if isErr {
		t.Fatalf("toggle-subscriber-updates = %q", got)
	}
	d.wait(t, "updated")
	d.mu.Lock()
	upd := d.updated[0]
	d.mu.Unlock()
	if upd != rl.Resources[0].URI {
		t.Errorf("resources/updated for %q, want %q", upd, rl.Resources[0].URI)
	}
}

func TestPassthroughConformanceServer(t *testing.T) {
	t.Parallel()
	bin := testkit.Peer(t, testkit.GoEverythingServer)
	st := newStack(t, []runtime.Server{{Name: "conf", Entry: config.ServerEntry{
		Command: bin, RequestTimeoutMs: 30000, ConnectionTimeoutMs: 30000,
	}}}, asker(), "2025-11-25")
	d := &downstream{notify: make(chan string, 256)}
	cs := st.connect(t, "conformance-client", d.clientOptions(true, true))
	ctx := context.Background()

	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static-text"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text == "" {
		t.Fatalf("resources/read test://static-text = %+v, %v", rr, err)
	}
	rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://template/42/data"})
	if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, "42") {
		t.Fatalf("resources/read of the template = %+v, %v", rr, err)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "conf__test_simple_prompt"})
	if err != nil || len(gp.Messages) == 0 {
		t.Fatalf("prompts/get test_simple_prompt = %+v, %v", gp, err)
	}
	got, isErr := toolText(t, cs, "conf__test_sampling", map[string]any{"prompt": "2+2?"})
	if isErr || !strings.Contains(got, "sampled by the client") {
		t.Fatalf("test_sampling = %q (isError %v)", got, isErr)
	}
	got, isErr = toolText(t, cs, "conf__test_elicitation", map[string]any{"message": "your name?"})
	if isErr || !strings.Contains(got, "action=accept") || !strings.Contains(got, "Ada") {
		t.Fatalf("test_elicitation = %q (isError %v)", got, isErr)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatalf("unsubscribe: %v", err)
	}
}

// TestPassthroughApprovalEngine runs the real policy engine (the built-in
// rules, sanitizer and approvals modules in Wasm): the approval is asked
// through elicitation and both hook decisions are audited with surface
// proxy and the client's identity.
func TestPassthroughApprovalEngine(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policy, []byte(`{"modules": [
		{"source": "builtin:rules", "config": {"default": "allow", "rules": [
			{"tool": "up__danger", "decision": "require_approval", "title": "Dangerous tool", "description": "It deletes things."}]}},
		{"source": "builtin:sanitizer"},
		{"source": "builtin:approvals"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	audit := &policiestest.AuditRecorder{}
	eng, err := engine.Load(ctx, &engine.Options{ConfigFile: policy, Audit: audit, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())
	_, srv, _ := upstream(t)
	relay := NewRelay()
	opts := runtime.Options{Enforcer: eng, Sanitizer: eng, ApprovalDecider: eng, Surface: policies.SurfaceProxy, Logger: discard()}
	relay.Install(&opts)
	sess, err := runtime.New([]runtime.Server{srv}, &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.Background())
	if err := sess.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := New(ctx, sess, &Options{Relay: relay, ProtocolVersions: legacy, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	d := &downstream{notify: make(chan string, 64)}
	cs := (&stack{sess: sess, p: p}).connect(t, "engine-client", d.clientOptions(true, true))

	if got, isErr := toolText(t, cs, "up__danger", nil); isErr || got != "deleted" {
		t.Fatalf("up__danger = %q (isError %v); want it approved and run", got, isErr)
	}
	d.mu.Lock()
	n := len(d.elicited)
	d.mu.Unlock()
	if n != 1 {
		t.Errorf("elicitations = %d, want 1", n)
	}
	var seen []string
	for _, r := range audit.Records() {
		if r.Tool != "up__danger" {
			continue
		}
		if r.Surface != policies.SurfaceProxy || !strings.Contains(r.Caller, "engine-client") {
			t.Errorf("audit record %+v: want surface proxy and the client as caller", r)
		}
		seen = append(seen, string(r.Hook)+"="+r.Decision)
	}
	if want := []string{"before_tool_call=require_approval", "decide_approval=ask"}; !slices.Equal(seen, want) {
		t.Errorf("audited %v, want %v", seen, want)
	}
}

// TestPassthroughRoutingBetweenClients: a server's request or log message
// during a call goes to the client that made the call; outside any call,
// a log message goes to every client and a request to the first client
// that can answer it.
func TestPassthroughRoutingBetweenClients(t *testing.T) {
	t.Parallel()
	up, srv, _ := upstream(t)
	st := newStack(t, []runtime.Server{srv}, asker(), "")
	da := &downstream{notify: make(chan string, 64)}
	a := st.connect(t, "client-a", da.clientOptions(false, false)) // no sampling
	db := &downstream{notify: make(chan string, 64)}
	b := st.connect(t, "client-b", db.clientOptions(true, true))
	ctx := context.Background()
	for _, cs := range []*mcp.ClientSession{a, b} {
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
	}
	if got, isErr := toolText(t, b, "up__ask", nil); isErr {
		t.Fatalf("up__ask from b = %q", got)
	}
	// a cannot answer sampling: its call fails, b is not asked instead.
	if got, isErr := toolText(t, a, "up__ask", nil); !isErr || !strings.Contains(got, "does not support sampling") {
		t.Fatalf("up__ask from a = %q (isError %v); want a tool error naming sampling", got, isErr)
	}

	var upSess *mcp.ServerSession
	for ss := range up.Sessions() {
		upSess = ss
	}
	if err := upSess.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "broadcast"}); err != nil {
		t.Fatal(err)
	}
	logsOf := func(d *downstream) []string {
		d.mu.Lock()
		defer d.mu.Unlock()
		var out []string
		for _, l := range d.logs {
			out = append(out, fmt.Sprint(l.Data))
		}
		return out
	}
	// Messages from one server arrive in order: a log misrouted during a
	// call would come before the broadcast.
	for _, c := range []struct {
		name string
		d    *downstream
	}{{"a", da}, {"b", db}} {
		for !slices.Contains(logsOf(c.d), "broadcast") {
			c.d.wait(t, "log")
		}
		if got, want := logsOf(c.d), []string{"asking the client", "broadcast"}; !slices.Equal(got, want) {
			t.Errorf("client %s received %q, want %q", c.name, got, want)
		}
	}

	// Outside a call, sampling goes to the first client that supports it.
	cm, err := upSess.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5,
		Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
	if err != nil || cm.Content.(*mcp.TextContent).Text != "sampled by the client" {
		t.Fatalf("sampling outside a call = %+v, %v", cm, err)
	}
}

// TestPassthroughReloadRelaysPrompts: a reload that adds a server with
// prompts and resources tells connected clients at once (no client
// request), and they see the new server's prompt and resource.
func TestPassthroughReloadRelaysPrompts(t *testing.T) {
	t.Parallel()
	_, srv, _ := upstream(t)
	st := newStack(t, []runtime.Server{srv}, asker(), "")
	d := &downstream{notify: make(chan string, 64)}
	cs := st.connect(t, "watcher", d.clientOptions(false, false))

	two := mcp.NewServer(&mcp.Implementation{Name: "two", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: legacy})
	two.AddPrompt(&mcp.Prompt{Name: "farewell"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "bye"}}}}, nil
	})
	two.AddResource(&mcp.Resource{URI: "mem://two", Name: "two"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "from two"}}}, nil
	})
	changes, err := st.sess.Reload(context.Background(), []runtime.Server{srv, {Name: "two", Transport: testkit.InMemory(t, two)}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(changes.Added, []string{"two"}) {
		t.Fatalf("reload changes %+v, want two added", changes)
	}
	d.wait(t, "prompts")
	prompts, err := cs.ListPrompts(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range prompts.Prompts {
		names = append(names, p.Name)
	}
	if !slices.Contains(names, "two__farewell") || !slices.Contains(names, "up__greet") {
		t.Fatalf("prompts after the reload: %v, want up__greet and two__farewell", names)
	}
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "mem://two"})
	if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != "from two" {
		t.Fatalf("read mem://two after the reload: %v %+v", err, res)
	}
}

// TestRelayFailsPendingOnClose: a server-to-client request the Relay
// carried to a client that never answers fails upstream when the Proxy
// closes, so the upstream call ends instead of waiting for its timeout.
func TestRelayFailsPendingOnClose(t *testing.T) {
	t.Parallel()
	_, srv, _ := upstream(t)
	s := newStack(t, []runtime.Server{srv}, asker(), "2025-11-25")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A raw client: it declares sampling but never answers it.
	cEnd, sEnd := mcp.NewInMemoryTransports()
	ss, err := s.p.Server().Connect(ctx, sEnd, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	conn, err := cEnd.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	send := func(line string) {
		t.Helper()
		msg, err := jsonrpc.DecodeMessage([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Write(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	// next returns the next message that is a request (with method) or the
	// response to id.
	next := func(id int64) jsonrpc.Message {
		t.Helper()
		for {
			msg, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("reading from the proxy: %v", err)
			}
			switch m := msg.(type) {
			case *jsonrpc.Request:
				if m.IsCall() {
					return m
				}
			case *jsonrpc.Response:
				if m.ID.Raw() == id {
					return m
				}
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"mute","version":"1"}}}`)
	next(1)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__ask","arguments":{}}}`)
	if req, ok := next(2).(*jsonrpc.Request); !ok || req.Method != "sampling/createMessage" {
		t.Fatalf("the proxy sent %v, want the relayed sampling/createMessage", req)
	}
	// The sampling request is never answered; closing the Proxy fails it.
	if err := s.p.Close(); err != nil {
		t.Fatal(err)
	}
	resp, ok := next(2).(*jsonrpc.Response)
	if !ok {
		t.Fatalf("after Close the proxy sent %v, want the answer to the call", resp)
	}
	var res mcp.CallToolResult
	if resp.Error == nil {
		if err := json.Unmarshal(resp.Result, &res); err != nil {
			t.Fatal(err)
		}
	}
	got := fmt.Sprint(resp.Error) + string(resp.Result)
	if resp.Error == nil && !res.IsError || !strings.Contains(got, "sampling") {
		t.Errorf("call answered %s (isError %v), want a failure naming sampling", got, res.IsError)
	}
}

// TestToolsListChangedRelayed: a server's notifications/tools/list_changed
// reaches the proxy's clients even when the tools it lists afterwards are
// the ones served (a server that registers a tool again): the proxy does
// not judge the server's change for the client.
func TestToolsListChangedRelayed(t *testing.T) {
	t.Parallel()
	up, srv, _ := upstream(t)
	st := newStack(t, []runtime.Server{srv}, asker(), "")
	d := &downstream{notify: make(chan string, 64)}
	st.connect(t, "listener", d.clientOptions(false, false))
	up.AddTool(&mcp.Tool{Name: "danger", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("deleted"), nil
	})
	d.wait(t, "tools")
}
