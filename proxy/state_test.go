package proxy

//lint:file-ignore SA1019 the tests declare and require sampling, deprecated by SEP-2577 but still served during its deprecation window

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/runtime"
)

// upstream2026 is an in-process server on MCP 2026-07-28 whose tool
// "confirm" and prompt "greet" ask for the user's name with an input
// request keyed "user_name" and their own requestState, whose tool "danger"
// needs approval (asker), and whose tool "needs_sampling" refuses a client without sampling (-32021).
func upstream2026(t *testing.T, calls *atomic.Int64) runtime.Server {
	t.Helper()
	up := mcp.NewServer(&mcp.Implementation{Name: "up26", Version: "1"}, nil)
	ask := mcp.InputRequestMap{"user_name": &mcp.ElicitParams{Mode: "form", Message: "your name?",
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}}
	// answered returns the name the retry carries with the server's own
	// state, or "" (ask again).
	answered := func(state string, responses mcp.InputResponseMap) string {
		if state != "up-state-1" {
			return ""
		}
		if r, ok := responses["user_name"].(*mcp.ElicitResult); ok && r.Action == "accept" {
			name, _ := r.Content["name"].(string)
			return name
		}
		return ""
	}
	obj := json.RawMessage(`{"type":"object"}`)
	up.AddTool(&mcp.Tool{Name: "confirm", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if name := answered(req.Params.RequestState, req.Params.InputResponses); name != "" {
			calls.Add(1)
			return text("hello " + name + " " + string(req.Params.Arguments)), nil
		}
		return &mcp.CallToolResult{InputRequests: ask, RequestState: "up-state-1"}, nil
	})
	up.AddTool(&mcp.Tool{Name: "danger", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		calls.Add(1)
		return text("deleted"), nil
	})
	up.AddTool(&mcp.Tool{Name: "needs_sampling", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if c := req.ClientCapabilities(); c == nil || c.Sampling == nil {
			return nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "sampling required",
				Data: json.RawMessage(`{"requiredCapabilities":{"sampling":{}}}`)}
		}
		return text("sampling declared"), nil
	})
	up.AddPrompt(&mcp.Prompt{Name: "greet"}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		if name := answered(req.Params.RequestState, req.Params.InputResponses); name != "" {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + name}}}}, nil
		}
		return &mcp.GetPromptResult{InputRequests: ask, RequestState: "up-state-1"}, nil
	})
	return runtime.Server{Name: "up", Transport: testkit.InMemory(t, up)}
}

// stack2026 is a runtime on 2026-07-28 upstream, with proxies in front of
// it: one per key (nil: a random one).
func stack2026(t *testing.T, keys ...[]byte) []*stack {
	t.Helper()
	return stack2026Calls(t, new(atomic.Int64), keys...)
}

// stack2026Calls is stack2026 whose upstream adds to calls each time a
// call of "danger", or an answered call of "confirm", runs.
func stack2026Calls(t *testing.T, calls *atomic.Int64, keys ...[]byte) []*stack {
	t.Helper()
	ctx := context.Background()
	relay := NewRelay()
	opts := runtime.Options{Enforcer: policies.NewChain([]policies.ChainEntry{{Hook: asker()}}, nil), Sanitizer: &policiestest.Sanitizer{},
		Surface: policies.SurfaceProxy, Logger: discard(), ProtocolVersion: "2026-07-28"}
	relay.Install(&opts)
	sess, err := runtime.New([]runtime.Server{upstream2026(t, calls)}, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	if err := sess.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	var out []*stack
	for i, key := range keys {
		o := &Options{Logger: discard(), StateKey: key}
		if i == 0 {
			o.Relay = relay
		}
		p, err := New(ctx, sess, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		out = append(out, &stack{sess: sess, p: p})
	}
	return out
}

// inputClient connects a 2026-07-28 client that declares elicitation and
// hands input requests back to the test (go-sdk's own retry loop off).
func inputClient(t *testing.T, s *stack, caps *mcp.ClientCapabilities) *mcp.ClientSession {
	t.Helper()
	cs := s.connectClient(t, mcp.NewClient(&mcp.Implementation{Name: "raw", Version: "1"}, &mcp.ClientOptions{
		Capabilities: caps, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}))
	if v := cs.InitializeResult().ProtocolVersion; v < "2026-07-28" {
		t.Fatalf("negotiated %s, want 2026-07-28", v)
	}
	return cs
}

var ada = mcp.InputResponseMap{"user_name": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}}

// TestRequestStateSealed follows an upstream's input requests through the
// proxy: relayed under the server's own key with a requestState the proxy
// sealed; the retry resumes on another proxy that shares the key (a
// replica), and is refused when the state was altered, issued for another
// request, or sealed under another key.
func TestRequestStateSealed(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", MinStateKeyBytes))
	stacks := stack2026(t, key, key, nil)
	a, b, other := stacks[0], stacks[1], stacks[2]
	elicit := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}
	ca, cb, cother := inputClient(t, a, elicit), inputClient(t, b, elicit), inputClient(t, other, elicit)
	ctx := context.Background()
	args := map[string]any{"x": 1}

	first, err := ca.CallTool(ctx, &mcp.CallToolParams{Name: "up__confirm", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if !first.NeedsInput() || first.InputRequests["user_name"] == nil {
		t.Fatalf("first round = %+v, want the server's input request under its key user_name", first)
	}
	state := first.RequestState
	if state == "" || strings.Contains(state, "up-state-1") {
		t.Fatalf("requestState %q: want the proxy's sealed state, not the server's in clear", state)
	}

	retry := func(cs *mcp.ClientSession, name string, args any, state string) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, InputResponses: ada, RequestState: state})
	}
	// Altered: one byte of the payload changed (its signature no longer
	// matches), or a state written by the client.
	payload, sig, _ := strings.Cut(state, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	forgedRaw := strings.Replace(string(raw), `"up__confirm"`, `"up__needs_sampling"`, 1)
	forged := base64.RawURLEncoding.EncodeToString([]byte(forgedRaw)) + "." + sig
	for what, st := range map[string]string{"altered payload": forged, "made up": "eyJtIjoidG9vbHMvY2FsbCJ9.AAAA", "other key": ""} {
		cs := ca
		if what == "other key" {
			cs, st = cother, state
		}
		if _, err := retry(cs, "up__confirm", args, st); !isInvalidParams(err, "requestState rejected") {
			t.Errorf("%s: retry answered %v, want invalid params naming the requestState", what, err)
		}
	}
	// Replayed on another request: other arguments, another tool, a prompt.
	if _, err := retry(ca, "up__confirm", map[string]any{"x": 2}, state); !isInvalidParams(err, "another request") {
		t.Errorf("replay with other arguments: %v", err)
	}
	if _, err := retry(ca, "up__needs_sampling", args, state); !isInvalidParams(err, "another request") {
		t.Errorf("replay on another tool: %v", err)
	}
	if _, err := ca.GetPrompt(ctx, &mcp.GetPromptParams{Name: "up__greet", InputResponses: ada, RequestState: state}); !isInvalidParams(err, "another request") {
		t.Errorf("replay on a prompt: %v", err)
	}

	// Valid: the replica that shares the key resumes it, on the upstream
	// server's own state.
	done, err := retry(cb, "up__confirm", args, state)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(done); got != `hello Ada {"x":1}` {
		t.Errorf("resumed call = %q, want the server's answer to Ada", got)
	}

	// The same for prompts/get.
	pr, err := ca.GetPrompt(ctx, &mcp.GetPromptParams{Name: "up__greet"})
	if err != nil {
		t.Fatal(err)
	}
	if !pr.NeedsInput() || pr.InputRequests["user_name"] == nil {
		t.Fatalf("prompts/get first round = %+v, want the input request user_name", pr)
	}
	pr, err = cb.GetPrompt(ctx, &mcp.GetPromptParams{Name: "up__greet", InputResponses: ada, RequestState: pr.RequestState})
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Messages) != 1 || pr.Messages[0].Content.(*mcp.TextContent).Text != "hello Ada" {
		t.Errorf("resumed prompt = %+v", pr.Messages)
	}
}

// TestMissingClientCapability: a 2026-07-28 client that did not declare
// what an upstream tool needs gets -32021 (go-sdk answers it with HTTP
// 400), not a tool result; declaring it runs the tool. An input request
// for a capability the client lacks is refused the same way.
func TestMissingClientCapability(t *testing.T) {
	t.Parallel()
	s := stack2026(t, nil)[0]
	ctx := context.Background()
	bare := inputClient(t, s, &mcp.ClientCapabilities{})
	_, err := bare.CallTool(ctx, &mcp.CallToolParams{Name: "up__needs_sampling"})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != mcp.CodeMissingRequiredClientCapabilities || !strings.Contains(string(je.Data), `"sampling"`) {
		t.Errorf("needs_sampling without sampling: %v, want -32021 naming sampling", err)
	}
	if _, err := bare.CallTool(ctx, &mcp.CallToolParams{Name: "up__confirm"}); !errors.As(err, &je) || je.Code != mcp.CodeMissingRequiredClientCapabilities || !strings.Contains(string(je.Data), `"elicitation"`) {
		t.Errorf("an elicitation input request to a client without elicitation: %v, want -32021 naming elicitation", err)
	}
	full := inputClient(t, s, &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}})
	res, err := full.CallTool(ctx, &mcp.CallToolParams{Name: "up__needs_sampling"})
	if err != nil || resultText(res) != "sampling declared" {
		t.Errorf("needs_sampling with sampling: %v, %v", res, err)
	}
}

// TestApprovalNeedsElicitation: a require_approval that only the client can
// answer (the Relay asks it through elicitation) is refused to a
// 2026-07-28 client that did not declare elicitation with -32021 naming
// elicitation, as MCP refuses a request needing a capability the client
// lacks; a client that declared it is asked, with an input request.
func TestApprovalNeedsElicitation(t *testing.T) {
	t.Parallel()
	s := stack2026(t, nil)[0]
	ctx := context.Background()
	bare := inputClient(t, s, &mcp.ClientCapabilities{})
	res, err := bare.CallTool(ctx, &mcp.CallToolParams{Name: "up__danger"})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != mcp.CodeMissingRequiredClientCapabilities || string(je.Data) != `{"requiredCapabilities":{"elicitation":{}}}` ||
		!strings.Contains(je.Message, `approval of tool "up__danger"`) {
		t.Fatalf("up__danger without elicitation: %v, %v; want -32021 naming elicitation and the approval", resultText(res), err)
	}
	asked := inputClient(t, s, &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}})
	res, err = asked.CallTool(ctx, &mcp.CallToolParams{Name: "up__danger"})
	if err != nil || len(res.InputRequests) != 1 {
		t.Fatalf("up__danger with elicitation: %+v, %v; want one input request", res, err)
	}
	for _, ask := range res.InputRequests {
		if e, ok := ask.(*mcp.ElicitParams); !ok || !strings.HasPrefix(e.Message, "Approve") {
			t.Errorf("input request %+v, want the approval form", ask)
		}
	}
}

// TestUtilityToolInputRequests: a 2026-07-28 client calling the utility
// tool __prompts_get, whose prompt asks for input, gets the question as the
// proxy's own input request of that tool call, and its retry gets the
// rendered prompt; never the prompt's input-required result as a tool's.
func TestUtilityToolInputRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := stack2026(t, nil)[0]
	withUtil, err := New(ctx, s.sess, &Options{UtilityTools: true, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = withUtil.Close() })
	cs := inputClient(t, &stack{sess: s.sess, p: withUtil}, &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}})
	args := map[string]any{"name": "greet"}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__prompts_get", Arguments: args})
	if err != nil || len(res.InputRequests) != 1 || res.RequestState == "" {
		t.Fatalf("up__prompts_get = %+v, %v; want one input request and a requestState", res, err)
	}
	answers := mcp.InputResponseMap{}
	for id, ask := range res.InputRequests {
		if e, ok := ask.(*mcp.ElicitParams); !ok || e.Message != "your name?" {
			t.Fatalf("input request %+v, want the prompt's question", ask)
		}
		answers[id] = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__prompts_get", Arguments: args, InputResponses: answers, RequestState: res.RequestState})
	if err != nil || res.IsError || res.InputRequests != nil || len(res.Content) != 2 {
		t.Fatalf("retry = %+v, %v; want the rendered prompt", res, err)
	}
	if got := res.Content[1].(*mcp.TextContent).Text; got != "hello Ada" {
		t.Errorf("rendered prompt %q, want hello Ada", got)
	}
}

// TestReadResourceResultType: a read the proxy answers itself carries
// resultType on 2026-07-28, as MCP requires of every result.
func TestReadResourceResultType(t *testing.T) {
	t.Parallel()
	cs := inputClient(t, openStack(t), nil)
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "mem://doc"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(res) // as decoded from the wire
	if !strings.Contains(string(got), `"resultType":"complete"`) || res.Contents[0].Text != "the doc" {
		t.Errorf("resources/read on 2026-07-28 = %s, want resultType complete and the doc", got)
	}
}

func isInvalidParams(err error, want string) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams && strings.Contains(je.Message, want)
}

func resultText(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) != 1 {
		return ""
	}
	tc, _ := res.Content[0].(*mcp.TextContent)
	if tc == nil {
		return ""
	}
	return tc.Text
}

// TestRequestStateOwner: a requestState handed to one identity opens only
// for it: another identity, or a client without one, is refused (and an
// anonymous state does not open for an identity).
func TestRequestStateOwner(t *testing.T) {
	t.Parallel()
	s, err := newStateSealer(nil)
	if err != nil {
		t.Fatal(err)
	}
	alice := stateOwner(&policies.Identity{Issuer: "tokens-file", Subject: "alice"})
	bob := stateOwner(&policies.Identity{Issuer: "tokens-file", Subject: "bob"})
	args := map[string]any{"x": 1}
	st := s.seal(requestState{Method: "tools/call", Name: "up__confirm", Args: argsDigest(args), Round: "k", Owner: alice})
	if got, err := s.open(st, alice, "tools/call", "up__confirm", args); err != nil || got.Round != "k" {
		t.Fatalf("alice's own state: %+v, %v", got, err)
	}
	for who, owner := range map[string]string{"bob": bob, "no identity": ""} {
		if _, err := s.open(st, owner, "tools/call", "up__confirm", args); !isInvalidParams(err, "issued to another identity") {
			t.Errorf("alice's state opened by %s: %v, want refused as another identity's", who, err)
		}
	}
	anon := s.seal(requestState{Method: "tools/call", Name: "up__confirm", Args: argsDigest(args)})
	if _, err := s.open(anon, alice, "tools/call", "up__confirm", args); !isInvalidParams(err, "issued to another identity") {
		t.Errorf("an anonymous state opened by alice: %v", err)
	}
}

// TestRequestStateOnce: a requestState runs its request once. The
// upstream's input requests, answered through a replica sharing the key,
// run there, and the same retry sent again is refused; the approval
// question of a require_approval asked through one proxy is answered
// through another, which runs the call (the first does not hold it), and
// the same answer sent again is refused. The upstream counts what ran.
func TestRequestStateOnce(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", MinStateKeyBytes))
	var calls atomic.Int64
	stacks := stack2026Calls(t, &calls, key, key)
	elicit := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}
	ca, cb := inputClient(t, stacks[0], elicit), inputClient(t, stacks[1], elicit)
	ctx := context.Background()
	args := map[string]any{"x": 1}

	first, err := ca.CallTool(ctx, &mcp.CallToolParams{Name: "up__confirm", Arguments: args})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first round: %+v, %v", first, err)
	}
	retry := &mcp.CallToolParams{Name: "up__confirm", Arguments: args, InputResponses: ada, RequestState: first.RequestState}
	if res, err := cb.CallTool(ctx, retry); err != nil || resultText(res) != `hello Ada {"x":1}` {
		t.Fatalf("retry through B: %v, %v", resultText(res), err)
	}
	if _, err := cb.CallTool(ctx, retry); !isInvalidParams(err, "already used") {
		t.Errorf("the same retry again through B: %v, want invalid params saying the requestState was used", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the upstream ran confirm %d times, want 1", n)
	}

	// The approval question, asked through A, answered through B.
	asked, err := ca.CallTool(ctx, &mcp.CallToolParams{Name: "up__danger", Arguments: args})
	if err != nil || !asked.NeedsInput() || len(asked.InputRequests) != 1 {
		t.Fatalf("up__danger: %+v, %v; want one input request, the approval", asked, err)
	}
	var id string
	for k, ask := range asked.InputRequests {
		if e, ok := ask.(*mcp.ElicitParams); !ok || !strings.HasPrefix(e.Message, "Approve") {
			t.Fatalf("input request %+v, want the approval form", ask)
		}
		id = k
	}
	yes := &mcp.CallToolParams{Name: "up__danger", Arguments: args, RequestState: asked.RequestState,
		InputResponses: mcp.InputResponseMap{id: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}}
	if res, err := cb.CallTool(ctx, yes); err != nil || resultText(res) != "deleted" {
		t.Fatalf("the approval answered through B: %v, %v; want the call run", resultText(res), err)
	}
	if _, err := cb.CallTool(ctx, yes); !isInvalidParams(err, "already used") {
		t.Errorf("the same approval again through B: %v, want invalid params saying the requestState was used", err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the upstream ran %d calls, want 2 (confirm once, danger once)", n)
	}

	// Answered "no" through B: refused, not run.
	asked, err = ca.CallTool(ctx, &mcp.CallToolParams{Name: "up__danger", Arguments: args})
	if err != nil || !asked.NeedsInput() {
		t.Fatalf("up__danger again: %+v, %v", asked, err)
	}
	for k := range asked.InputRequests {
		id = k
	}
	res, err := cb.CallTool(ctx, &mcp.CallToolParams{Name: "up__danger", Arguments: args, RequestState: asked.RequestState,
		InputResponses: mcp.InputResponseMap{id: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": false}}}})
	if err != nil || !res.IsError {
		t.Fatalf("the approval refused through B: %v, %v; want a tool error", resultText(res), err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the upstream ran %d calls after a refused approval, want 2", n)
	}
}
