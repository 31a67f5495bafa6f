package runtime

//lint:file-ignore SA1019 an input request (SEP-2322) may ask for sampling or roots, deprecated by SEP-2577 but still served during its deprecation window: the runtime answers them on purpose

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rev20260728 restricts an in-process server to the MCP revision on which a
// server asks its questions as input requests in its result (SEP-2322)
// instead of sending requests while it serves a call.
var rev20260728 = []string{"2026-07-28"}

// inputServer is a 2026-07-28 server with tools, a prompt and a resource
// that each need the client's input: the first round returns input
// requests (sampling, elicitation, roots) with a request state; the retry
// answers from the input responses it got back.
func inputServer(t *testing.T, name string) *mcp.Server {
	t.Helper()
	srv := newServer(name, &mcp.ServerOptions{SupportedProtocolVersions: rev20260728})
	ask := mcp.InputRequestMap{
		"model": &mcp.CreateMessageParams{MaxTokens: 8, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "2+2?"}}}},
		"user":  &mcp.ElicitParams{Message: "name?", RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"name": {Type: "string"}}}},
		"roots": &mcp.ListRootsParams{},
	}
	answer := func(in mcp.InputResponseMap, state string) (string, error) {
		if state != "round-2" {
			return "", fmt.Errorf("request state %q, want round-2", state)
		}
		// go-sdk decodes a sampling answer as the with-tools result.
		var sampled string
		switch cm := in["model"].(type) {
		case *mcp.CreateMessageResult:
			sampled = cm.Content.(*mcp.TextContent).Text
		case *mcp.CreateMessageWithToolsResult:
			sampled = cm.Content[0].(*mcp.TextContent).Text
		default:
			return "", fmt.Errorf("sampling answer %T", cm)
		}
		el, ok2 := in["user"].(*mcp.ElicitResult)
		rl, ok3 := in["roots"].(*mcp.ListRootsResult)
		if !ok2 || !ok3 {
			return "", fmt.Errorf("input responses %#v", in)
		}
		var uris []string
		for _, r := range rl.Roots {
			uris = append(uris, r.URI)
		}
		return fmt.Sprintf("%s/%s:%v/%s", sampled, el.Action, el.Content["name"], strings.Join(uris, ",")), nil
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if req.Params.InputResponses == nil {
			return &mcp.CallToolResult{InputRequests: ask, RequestState: "round-2"}, nil, nil
		}
		text, err := answer(req.Params.InputResponses, req.Params.RequestState)
		if err != nil {
			return nil, nil, err
		}
		return textResult(text), nil, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: "greet"}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		if req.Params.InputResponses == nil {
			return &mcp.GetPromptResult{InputRequests: ask, RequestState: "round-2"}, nil
		}
		text, err := answer(req.Params.InputResponses, req.Params.RequestState)
		if err != nil {
			return nil, err
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}}, nil
	})
	srv.AddResource(&mcp.Resource{URI: "test://input", Name: "input"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if req.Params.InputResponses == nil {
			return &mcp.ReadResourceResult{InputRequests: ask, RequestState: "round-2"}, nil
		}
		text, err := answer(req.Params.InputResponses, req.Params.RequestState)
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: text}}}, nil
	})
	return srv
}

// TestInputRequestsAnswered: a 2026-07-28 server's input requests (SEP-2322)
// in a tools/call, prompts/get or resources/read result reach the
// embedder's CreateMessage, Elicit and ListRoots handlers, with the call's
// context, and the request is retried with their answers; the caller sees
// only the final result.
func TestInputRequestsAnswered(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		seen []string
	)
	record := func(ctx context.Context, what, server string) {
		tag, _ := ctx.Value(ctxTag{}).(string)
		ci, _ := CallFromContext(ctx) // set for tools/call only
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s tag=%s call=%s", what, server, tag, ci.Tool))
		mu.Unlock()
	}
	s := open(t, []Server{inProcess(t, "inq", inputServer(t, "inq"))}, &Options{
		ProtocolVersion: rev20260728[0],
		CreateMessage: func(ctx context.Context, server string, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			record(ctx, "sampling", server)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: &mcp.TextContent{Text: "4"}}, nil
		},
		Elicit: func(ctx context.Context, server string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			record(ctx, "elicit", server)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
		},
		ListRoots: func(ctx context.Context, server string) (*mcp.ListRootsResult, error) {
			record(ctx, "roots", server)
			return &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///work"}}}, nil
		},
	})
	s.RootsChanged() // go-sdk's own roots list now holds a marker that must never be served
	const want = "4/accept:ada/file:///work"
	ctx := context.Background()

	res, err := s.CallTool(context.WithValue(ctx, ctxTag{}, "call"), "inq__ask", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, res); got != want {
		t.Errorf("tools/call = %q, want %q", got, want)
	}
	pr, err := s.GetPrompt(context.WithValue(ctx, ctxTag{}, "prompt"), "inq__greet", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := pr.Messages[0].Content.(*mcp.TextContent).Text; got != want {
		t.Errorf("prompts/get = %q, want %q", got, want)
	}
	rr, err := s.ReadResource(context.WithValue(ctx, ctxTag{}, "read"), "test://input")
	if err != nil {
		t.Fatal(err)
	}
	if got := rr.Contents[0].Text; got != want {
		t.Errorf("resources/read = %q, want %q", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(seen) // the input requests of one round are answered concurrently
	var wantSeen []string
	for _, tag := range []string{"call", "prompt", "read"} {
		call := ""
		if tag == "call" {
			call = "inq__ask"
		}
		for _, what := range []string{"elicit", "roots", "sampling"} {
			wantSeen = append(wantSeen, fmt.Sprintf("%s inq tag=%s call=%s", what, tag, call))
		}
	}
	slices.Sort(wantSeen)
	if !slices.Equal(seen, wantSeen) {
		t.Errorf("handlers saw\n%s\nwant\n%s", strings.Join(seen, "\n"), strings.Join(wantSeen, "\n"))
	}
}

// TestInputRequestsWithoutHandler: an input request the embedder supplied
// no handler for fails the call with an *InputRequestError naming the
// server and what it asked for; nothing is retried with a made-up answer.
func TestInputRequestsWithoutHandler(t *testing.T) {
	t.Parallel()
	s := open(t, []Server{inProcess(t, "inq", inputServer(t, "inq"))}, &Options{
		ProtocolVersion: rev20260728[0],
		Elicit: func(ctx context.Context, server string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	_, err := s.CallTool(context.Background(), "inq__ask", nil)
	var ie *InputRequestError
	if !errors.As(err, &ie) {
		t.Fatalf("tools/call error = %v: want an *InputRequestError", err)
	}
	if ie.Server != "inq" || (ie.Method != "sampling/createMessage" && ie.Method != "roots/list") || !errors.Is(err, errNoHandler) {
		t.Errorf("error %+v: want server inq, sampling or roots, no handler", ie)
	}
	if !strings.Contains(err.Error(), `MCP server "inq" asked for `+ie.Method) {
		t.Errorf("message %q does not say who asked for what", err)
	}
}

// TestInputRequestsRounds: a server that sheds load (an input-required
// result with no input requests) is retried, and the call succeeds when it
// stops; one that stays busy, or keeps asking, fails with an error saying
// so instead of looping.
func TestInputRequestsRounds(t *testing.T) {
	t.Parallel()
	srv := newServer("rounds", &mcp.ServerOptions{SupportedProtocolVersions: rev20260728})
	var busyCalls, askCalls atomic.Int32
	mcp.AddTool(srv, &mcp.Tool{Name: "busy_twice"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if busyCalls.Add(1) <= 2 {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{}}, nil, nil
		}
		return textResult("served"), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "always_busy"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "always_asks"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		askCalls.Add(1)
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"again": &mcp.ListRootsParams{}}, RequestState: "more"}, nil, nil
	})
	s := open(t, []Server{inProcess(t, "rounds", srv)}, &Options{
		ProtocolVersion: rev20260728[0],
		ListRoots: func(context.Context, string) (*mcp.ListRootsResult, error) {
			return &mcp.ListRootsResult{}, nil
		},
	})
	ctx := context.Background()
	res, err := s.CallTool(ctx, "rounds__busy_twice", nil)
	if err != nil {
		t.Fatalf("busy twice: %v", err)
	}
	if got := resultText(t, res); got != "served" || busyCalls.Load() != 3 {
		t.Errorf("busy twice = %q after %d calls, want served after 3", got, busyCalls.Load())
	}
	if _, err := s.CallTool(ctx, "rounds__always_busy", nil); err == nil || !strings.Contains(err.Error(), "stayed busy") {
		t.Errorf("always busy: err = %v, want 'stayed busy'", err)
	}
	if _, err := s.CallTool(ctx, "rounds__always_asks", nil); err == nil || !strings.Contains(err.Error(), "still needs input after 10 rounds") {
		t.Errorf("always asks: err = %v, want 'still needs input after 10 rounds'", err)
	}
	if n := askCalls.Load(); n != maxInputRounds {
		t.Errorf("always asks was called %d times, want %d", n, maxInputRounds)
	}
}

// TestInputRequestsElicitAnswerChecked: an accepted elicitation whose
// content does not match the requested schema is refused on the first
// round with the reason; the person behind Options.Elicit is not asked
// again round after round.
func TestInputRequestsElicitAnswerChecked(t *testing.T) {
	t.Parallel()
	srv := newServer("form", &mcp.ServerOptions{SupportedProtocolVersions: rev20260728})
	mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if el, ok := req.Params.InputResponses["who"].(*mcp.ElicitResult); ok {
			if name, _ := el.Content["name"].(string); name != "" {
				return textResult("hello " + name), nil, nil
			}
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"who": &mcp.ElicitParams{Message: "name?",
			RequestedSchema: &jsonschema.Schema{Type: "object", Required: []string{"name"},
				Properties: map[string]*jsonschema.Schema{"name": {Type: "string"}}}}}}, nil, nil
	})
	var asked atomic.Int32
	answer := map[string]any{"nom": "ada"} // the wrong field
	s := open(t, []Server{inProcess(t, "form", srv)}, &Options{
		ProtocolVersion: rev20260728[0],
		Elicit: func(context.Context, string, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: answer}, nil
		},
	})
	_, err := s.CallTool(context.Background(), "form__ask", nil)
	var ie *InputRequestError
	if !errors.As(err, &ie) || ie.Method != "elicitation/create" || !strings.Contains(err.Error(), "does not match the requested schema") {
		t.Fatalf("error = %v: want an *InputRequestError saying the answer does not match", err)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the handler was asked %d times, want once", n)
	}
	answer = map[string]any{"name": "ada"}
	res, err := s.CallTool(context.Background(), "form__ask", nil)
	if err != nil || resultText(t, res) != "hello ada" {
		t.Fatalf("a matching answer: %v, %v", res, err)
	}
}

// TestInputRelay: under WithInputRelay a server's input requests come back
// to the caller as they are (its keys, its state) and no handler is asked;
// the caller's InputRound carries the answers and the state back, and the
// server completes. WithClientCapabilities puts the given capabilities, not
// the session's, in the request's _meta (roots in its wire form).
func TestInputRelay(t *testing.T) {
	t.Parallel()
	srv := inputServer(t, "inq")
	var seenCaps []string
	mcp.AddTool(srv, &mcp.Tool{Name: "caps"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		c := req.ClientCapabilities()
		seenCaps = append(seenCaps, fmt.Sprintf("sampling=%v elicitation=%v roots=%v", c.Sampling != nil, c.Elicitation != nil, c.RootsV2 != nil))
		return textResult("ok"), nil, nil
	})
	asked := 0
	s := open(t, []Server{inProcess(t, "inq", srv)}, &Options{
		ProtocolVersion: rev20260728[0],
		Elicit: func(context.Context, string, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			asked++
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	ctx := context.Background()
	res, err := s.CallTool(WithInputRelay(ctx, nil), "inq__ask", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequestState != "round-2" || len(res.InputRequests) != 3 || res.InputRequests["user"] == nil || asked != 0 {
		t.Fatalf("relayed round = state %q, requests %v, handler asked %d times; want the server's own, unanswered", res.RequestState, res.InputRequests, asked)
	}
	round := &InputRound{State: res.RequestState, Responses: mcp.InputResponseMap{
		"model": &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "4"}},
		"user":  &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}},
		"roots": &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///relayed"}}},
	}}
	res, err = s.CallTool(WithInputRelay(ctx, round), "inq__ask", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, res); got != "4/accept:ada/file:///relayed" {
		t.Errorf("retry with the caller's answers = %q", got)
	}
	for _, caps := range []*mcp.ClientCapabilities{{}, {Elicitation: &mcp.ElicitationCapabilities{}, RootsV2: &mcp.RootCapabilities{}}} {
		if _, err := s.CallTool(WithClientCapabilities(ctx, caps), "inq__caps", nil); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"sampling=false elicitation=false roots=false", "sampling=false elicitation=true roots=true"}; !slices.Equal(seenCaps, want) {
		t.Errorf("the server saw capabilities %q, want %q", seenCaps, want)
	}
}

// TestInputRelayUtilityTools: the utility tools __prompts_get and
// __resources_read called under WithInputRelay answer their server's input
// requests through the Options handlers and return the prompt or resource:
// the caller asked for a tool, and a tool result has no place for the
// input requests of the prompts/get or resources/read behind it.
func TestInputRelayUtilityTools(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	s := open(t, []Server{inProcess(t, "inq", inputServer(t, "inq"))}, &Options{
		ProtocolVersion: rev20260728[0],
		CreateMessage: func(context.Context, string, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			asked.Add(1)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: &mcp.TextContent{Text: "4"}}, nil
		},
		Elicit: func(context.Context, string, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
		},
		ListRoots: func(context.Context, string) (*mcp.ListRootsResult, error) {
			asked.Add(1)
			return &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///work"}}}, nil
		},
	})
	const want = "4/accept:ada/file:///work"
	for _, tc := range []struct{ tool, args string }{
		{"inq__prompts_get", `{"name":"greet"}`}, {"inq__resources_read", `{"uri":"test://input"}`},
	} {
		before := asked.Load()
		res, err := s.CallTool(WithInputRelay(context.Background(), nil), tc.tool, []byte(tc.args))
		if err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		var text []string
		for _, c := range res.Content {
			if tx, ok := c.(*mcp.TextContent); ok {
				text = append(text, tx.Text)
			}
		}
		if res.IsError || res.InputRequests != nil || !strings.Contains(strings.Join(text, "\n"), want) {
			t.Errorf("%s under WithInputRelay = %q (isError %v, input requests %v); want the server's answer %q", tc.tool, text, res.IsError, res.InputRequests, want)
		}
		if n := asked.Load() - before; n != 3 {
			t.Errorf("%s: the handlers were asked %d times, want 3", tc.tool, n)
		}
	}
}

// TestInputRequestStateIsolated: parallel calls of a 2026-07-28 server that
// asks for input each echo their own request state, exactly, with their
// own answers; a call that got no state sends none back, and a call that
// asked for nothing carries neither answers nor state (SEP-2322).
func TestInputRequestStateIsolated(t *testing.T) {
	t.Parallel()
	const n = 16
	srv := newServer("par", &mcp.ServerOptions{SupportedProtocolVersions: rev20260728})
	var mismatch atomic.Value
	bad := func(format string, args ...any) { mismatch.CompareAndSwap(nil, fmt.Sprintf(format, args...)) }
	type args struct {
		N int `json:"n"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(_ context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		// A state with bytes a client might be tempted to touch.
		state := fmt.Sprintf(" {\"n\":%d} \u00e9+/= ", a.N)
		if req.Params.InputResponses == nil {
			if req.Params.RequestState != "" {
				bad("call %d: first round carries request state %q", a.N, req.Params.RequestState)
			}
			msg := fmt.Sprintf("who is %d?", a.N)
			if a.N%2 == 1 {
				state = "" // odd calls get no state
			}
			return &mcp.CallToolResult{RequestState: state, InputRequests: mcp.InputRequestMap{
				"who": &mcp.ElicitParams{Message: msg, RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"n": {Type: "integer"}}}},
			}}, nil, nil
		}
		if a.N%2 == 1 {
			state = ""
		}
		if req.Params.RequestState != state {
			bad("call %d: request state %q, want %q", a.N, req.Params.RequestState, state)
		}
		el, _ := req.Params.InputResponses["who"].(*mcp.ElicitResult)
		if el == nil || fmt.Sprint(el.Content["n"]) != fmt.Sprint(a.N) {
			bad("call %d: input responses %#v", a.N, req.Params.InputResponses)
		}
		return textResult(fmt.Sprint(a.N)), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "plain"}, func(_ context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		if req.Params.InputResponses != nil || req.Params.RequestState != "" {
			bad("plain call %d carries input responses %v, request state %q", a.N, req.Params.InputResponses, req.Params.RequestState)
		}
		return textResult("plain"), nil, nil
	})
	sv := inProcess(t, "par", srv)
	sv.SupportsParallelToolCalls = true
	// Every first round is answered only once all of them are in, so that
	// the retries interleave.
	var arrived sync.WaitGroup
	arrived.Add(n)
	s := open(t, []Server{sv}, &Options{
		ProtocolVersion: rev20260728[0],
		Elicit: func(_ context.Context, _ string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			var k int
			if _, err := fmt.Sscanf(p.Message, "who is %d?", &k); err != nil {
				return nil, err
			}
			arrived.Done()
			arrived.Wait()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"n": k}}, nil
		},
	})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := s.CallTool(context.Background(), "par__ask", []byte(fmt.Sprintf(`{"n":%d}`, i)))
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			if got := resultText(t, res); got != fmt.Sprint(i) {
				t.Errorf("call %d = %q", i, got)
			}
		})
		wg.Go(func() {
			if _, err := s.CallTool(context.Background(), "par__plain", []byte(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
				t.Errorf("plain call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if m := mismatch.Load(); m != nil {
		t.Error(m)
	}
}
