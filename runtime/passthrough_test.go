package runtime

//lint:file-ignore SA1019 roots, sampling and logging are deprecated by SEP-2577 but still served during its deprecation window: the passthrough relays them between clients and servers on purpose

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// passServers builds two in-process servers with resources, templates,
// prompts and (alpha only) completion, logging and subscriptions. alpha
// pages its lists one item at a time. Both list mem://shared/1.
func passServers(t *testing.T, versions ...string) (alpha, beta *mcp.Server, servers []Server) {
	t.Helper()
	read := func(who string) mcp.ResourceHandler {
		return func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: who + " " + req.Params.URI}}}, nil
		}
	}
	prompt := func(who string) mcp.PromptHandler {
		return func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
				Content: &mcp.TextContent{Text: who + " says hello to " + req.Params.Arguments["name"]}}}}, nil
		}
	}
	alpha = newServer("alpha", &mcp.ServerOptions{
		PageSize:                  1,
		SupportedProtocolVersions: versions,
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			ref := req.Params.Ref
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{
				Values: []string{ref.Type + "|" + ref.Name + ref.URI + "|" + req.Params.Argument.Value}}}, nil
		},
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	for _, uri := range []string{"mem://alpha/1", "mem://alpha/2", "mem://shared/1"} {
		alpha.AddResource(&mcp.Resource{URI: uri, Name: uri}, read("alpha"))
	}
	alpha.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://alpha/dyn/{id}", Name: "dyn"}, read("alpha"))
	alpha.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "name"}}}, prompt("alpha"))
	alpha.AddPrompt(&mcp.Prompt{Name: "bad name!"}, prompt("alpha"))
	// ask uses every server-to-client request while its call is in flight.
	alpha.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: "asking"}); err != nil {
				return nil, err
			}
			cm, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "2+2?"}}}})
			if err != nil {
				return nil, fmt.Errorf("sampling: %w", err)
			}
			el, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "sure?", RequestedSchema: map[string]any{"type": "object"}})
			if err != nil {
				return nil, fmt.Errorf("elicitation: %w", err)
			}
			roots, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, fmt.Errorf("roots: %w", err)
			}
			return textResult(fmt.Sprintf("%s/%s/%s", cm.Content.(*mcp.TextContent).Text, el.Action, roots.Roots[0].URI)), nil
		})
	beta = newServer("beta", &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{}, SupportedProtocolVersions: versions})
	for _, uri := range []string{"mem://beta/1", "mem://shared/1"} {
		beta.AddResource(&mcp.Resource{URI: uri, Name: uri}, read("beta"))
	}
	beta.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://beta/dyn/{id}", Name: "dyn"}, read("beta"))
	beta.AddPrompt(&mcp.Prompt{Name: "greet"}, prompt("beta"))
	return alpha, beta, []Server{inProcess(t, "alpha", alpha), inProcess(t, "beta", beta)}
}

type ctxTag struct{}

// legacy restricts an in-process server to protocol 2025-11-25, where a
// server sends requests to the client while serving a call (2026-07-28
// servers return input requests instead, SEP-2322).
var legacy = []string{"2025-11-25"}

func TestPassthroughResourcesPromptsCompletion(t *testing.T) {
	t.Parallel()
	_, _, servers := passServers(t)
	s := open(t, servers, &Options{})
	ctx := context.Background()

	res, err := s.Resources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res {
		got = append(got, r.Server+" "+r.Upstream.URI)
	}
	want := []string{"alpha mem://alpha/1", "alpha mem://alpha/2", "alpha mem://shared/1", "beta mem://beta/1", "beta mem://shared/1"}
	if !slices.Equal(got, want) {
		t.Errorf("Resources = %q, want %q (alpha pages one by one)", got, want)
	}
	tpl, err := s.ResourceTemplates(ctx)
	if err != nil || len(tpl) != 2 || tpl[0].Server != "alpha" || tpl[1].Upstream.URITemplate != "mem://beta/dyn/{id}" {
		t.Errorf("ResourceTemplates = %+v, %v", tpl, err)
	}

	for _, tc := range []struct{ uri, want string }{
		{"mem://alpha/2", "alpha mem://alpha/2"},
		{"mem://beta/1", "beta mem://beta/1"},
		{"mem://shared/1", "alpha mem://shared/1"}, // a collision: the first declared server
		{"mem://beta/dyn/42", "beta mem://beta/dyn/42"},
		{"mem://alpha/dyn/7", "alpha mem://alpha/dyn/7"},
	} {
		r, err := s.ReadResource(ctx, tc.uri)
		if err != nil || len(r.Contents) != 1 || r.Contents[0].Text != tc.want {
			t.Errorf("ReadResource(%s) = %+v, %v; want %q", tc.uri, r, err, tc.want)
		}
	}
	if _, err := s.ReadResource(ctx, "mem://nobody/1"); !errors.Is(err, ErrUnknownResource) {
		t.Errorf("ReadResource of an unowned URI: %v, want ErrUnknownResource", err)
	}

	prompts, err := s.Prompts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range prompts {
		names = append(names, p.Name+"="+p.Server+"/"+p.RawName())
	}
	if want := []string{"alpha__bad-name-=alpha/bad name!", "alpha__greet=alpha/greet", "beta__greet=beta/greet"}; !slices.Equal(names, want) {
		t.Errorf("Prompts = %q, want %q (named by the Sanitizer)", names, want)
	}
	for _, tc := range []struct{ name, want string }{
		{"alpha__greet", "alpha says hello to Ada"},
		{"beta__greet", "beta says hello to Ada"},
	} {
		gp, err := s.GetPrompt(ctx, tc.name, map[string]string{"name": "Ada"})
		if err != nil || gp.Messages[0].Content.(*mcp.TextContent).Text != tc.want {
			t.Errorf("GetPrompt(%s) = %+v, %v", tc.name, gp, err)
		}
	}
	if _, err := s.GetPrompt(ctx, "greet", nil); !errors.Is(err, ErrUnknownPrompt) {
		t.Errorf("GetPrompt by raw name: %v, want ErrUnknownPrompt", err)
	}

	for _, tc := range []struct {
		ref  mcp.CompleteReference
		want []string
	}{
		{mcp.CompleteReference{Type: "ref/prompt", Name: "alpha__greet"}, []string{"ref/prompt|greet|Ad"}},
		{mcp.CompleteReference{Type: "ref/resource", URI: "mem://alpha/dyn/{id}"}, []string{"ref/resource|mem://alpha/dyn/{id}|Ad"}},
		{mcp.CompleteReference{Type: "ref/prompt", Name: "beta__greet"}, []string{}}, // beta has no completions
	} {
		cr, err := s.Complete(ctx, &mcp.CompleteParams{Ref: &tc.ref, Argument: mcp.CompleteParamsArgument{Name: "name", Value: "Ad"}})
		if err != nil || !slices.Equal(cr.Completion.Values, tc.want) {
			t.Errorf("Complete(%+v) = %+v, %v; want %q", tc.ref, cr, err, tc.want)
		}
	}

	caps := s.Capabilities()
	if caps.Resources == nil || !caps.Resources.Subscribe || caps.Prompts == nil || caps.Completions == nil || caps.Logging == nil || caps.Tools == nil {
		t.Errorf("Capabilities = %+v", caps)
	}
	if err := s.Subscribe(ctx, "mem://beta/1"); err == nil || !strings.Contains(err.Error(), `"beta"`) {
		t.Errorf("Subscribe to a server without subscriptions: %v", err)
	}
}

func TestPassthroughNotifications(t *testing.T) {
	t.Parallel()
	alpha, _, servers := passServers(t, legacy...)
	ev := newEvents()
	s := open(t, servers, &Options{OnEvent: ev.on})
	ctx := context.Background()

	if err := s.Subscribe(ctx, "mem://alpha/1"); err != nil {
		t.Fatal(err)
	}
	if err := alpha.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "mem://alpha/1"}); err != nil {
		t.Fatal(err)
	}
	if e := ev.wait(t, EventResourceUpdated, "alpha"); e.URI != "mem://alpha/1" {
		t.Errorf("resource_updated event = %+v", e)
	}
	if err := s.Unsubscribe(ctx, "mem://alpha/1"); err != nil {
		t.Fatal(err)
	}

	if _, err := s.Prompts(ctx); err != nil {
		t.Fatal(err)
	}
	alpha.AddPrompt(&mcp.Prompt{Name: "late"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "late"}}}}, nil
	})
	ev.wait(t, EventPromptsChanged, "alpha")
	if gp, err := s.GetPrompt(ctx, "alpha__late", nil); err != nil || gp.Messages[0].Content.(*mcp.TextContent).Text != "late" {
		t.Errorf("a prompt added after list_changed: %+v, %v", gp, err)
	}

	alpha.AddResource(&mcp.Resource{URI: "mem://alpha/new", Name: "new"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "new"}}}, nil
	})
	ev.wait(t, EventResourcesChanged, "alpha")
	res, err := s.Resources(ctx)
	if err != nil || !slices.ContainsFunc(res, func(r Resource) bool { return r.Upstream.URI == "mem://alpha/new" }) {
		t.Errorf("Resources after list_changed = %+v, %v", res, err)
	}
}

func TestPassthroughServerRequestsFollowTheCall(t *testing.T) {
	t.Parallel()
	_, _, servers := passServers(t, legacy...)
	var (
		mu   sync.Mutex
		seen []string
	)
	record := func(ctx context.Context, what, server string) {
		tag, _ := ctx.Value(ctxTag{}).(string)
		ci, _ := CallFromContext(ctx)
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s tag=%s call=%s", what, server, tag, ci.Tool))
		mu.Unlock()
	}
	s := open(t, servers, &Options{
		CreateMessage: func(ctx context.Context, server string, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			record(ctx, "sampling", server)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: &mcp.TextContent{Text: "4"}}, nil
		},
		Elicit: func(ctx context.Context, server string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			record(ctx, "elicit", server)
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
		ListRoots: func(ctx context.Context, server string) (*mcp.ListRootsResult, error) {
			record(ctx, "roots", server)
			return &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///work"}}}, nil
		},
		OnLog: func(ctx context.Context, server string, p *mcp.LoggingMessageParams) {
			record(ctx, "log:"+string(p.Level), server)
		},
	})
	ctx := context.Background()
	if err := s.SetLoggingLevel(ctx, "info"); err != nil {
		t.Fatal(err)
	}
	res, err := s.CallTool(context.WithValue(ctx, ctxTag{}, "call-1"), "alpha__ask", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, res); got != "4/decline/file:///work" {
		t.Errorf("ask = %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"log:warning alpha tag=call-1 call=alpha__ask",
		"sampling alpha tag=call-1 call=alpha__ask",
		"elicit alpha tag=call-1 call=alpha__ask",
		"roots alpha tag=call-1 call=alpha__ask",
	}
	if !slices.Equal(seen, want) {
		t.Errorf("handlers saw\n%s\nwant\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}

func TestPassthroughNoHandlersNoCapabilities(t *testing.T) {
	t.Parallel()
	_, _, servers := passServers(t, legacy...)
	s := open(t, servers, &Options{})
	res, err := s.CallTool(context.Background(), "alpha__ask", nil)
	// The log message is dropped (no level set); sampling fails upstream
	// because the runtime advertised no sampling capability.
	if err == nil || !strings.Contains(err.Error(), "client does not support CreateMessage") {
		t.Errorf("ask without handlers = %+v, %v", res, err)
	}
}

func TestPassthroughClosed(t *testing.T) {
	t.Parallel()
	_, _, servers := passServers(t)
	s := open(t, servers, &Options{})
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, err := range map[string]error{
		"Resources":       func() error { _, err := s.Resources(ctx); return err }(),
		"ReadResource":    func() error { _, err := s.ReadResource(ctx, "mem://alpha/1"); return err }(),
		"Prompts":         func() error { _, err := s.Prompts(ctx); return err }(),
		"SetLoggingLevel": s.SetLoggingLevel(ctx, "debug"),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func TestPassthroughRootsChanged(t *testing.T) {
	t.Parallel()
	changed := make(chan struct{}, 4)
	srv := newServer("roots", &mcp.ServerOptions{
		SupportedProtocolVersions: legacy,
		RootsListChangedHandler: func(context.Context, *mcp.RootsListChangedRequest) {
			changed <- struct{}{}
		},
	})
	echoTool(srv, "noop")
	var (
		mu    sync.Mutex
		roots = []*mcp.Root{{URI: "file:///a"}}
	)
	s := open(t, []Server{inProcess(t, "roots", srv)}, &Options{
		ListRoots: func(context.Context, string) (*mcp.ListRootsResult, error) {
			mu.Lock()
			defer mu.Unlock()
			return &mcp.ListRootsResult{Roots: slices.Clone(roots)}, nil
		},
	})
	var ss *mcp.ServerSession
	for x := range srv.Sessions() {
		ss = x
	}
	if got, err := ss.ListRoots(context.Background(), nil); err != nil || len(got.Roots) != 1 || got.Roots[0].URI != "file:///a" {
		t.Fatalf("roots/list = %+v, %v", got, err)
	}
	if caps := ss.InitializeParams().Capabilities; caps.RootsV2 == nil || !caps.RootsV2.ListChanged {
		t.Errorf("client capabilities %+v: want roots with listChanged", caps)
	}
	mu.Lock()
	roots = append(roots, &mcp.Root{URI: "file:///b"})
	mu.Unlock()
	s.RootsChanged()
	select {
	case <-changed:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("no notifications/roots/list_changed")
	}
	if got, err := ss.ListRoots(context.Background(), nil); err != nil || len(got.Roots) != 2 {
		t.Errorf("roots/list after the change = %+v, %v (the marker root must not leak)", got, err)
	}
}

// TestPassthroughElicitSchemaUnchecked: an elicitation whose schema the
// go-sdk client would refuse (a titled multi-select enum, SEP-1330, as the
// conformance fixture sends it) reaches Options.Elicit as sent.
func TestPassthroughElicitSchemaUnchecked(t *testing.T) {
	t.Parallel()
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"titledMulti": map[string]any{"type": "array", "items": map[string]any{
			"type": "string", "anyOf": []any{map[string]any{"const": "v1", "title": "First"}}}},
	}}
	srv := newServer("elicit", &mcp.ServerOptions{SupportedProtocolVersions: legacy})
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "pick", RequestedSchema: schema})
			if err != nil {
				return nil, err
			}
			return textResult(res.Action), nil
		})
	var got any
	s := open(t, []Server{inProcess(t, "elicit", srv)}, &Options{
		Elicit: func(_ context.Context, _ string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			got = p.RequestedSchema
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	res, err := s.CallTool(context.Background(), "elicit__ask", nil)
	if err != nil || resultText(t, res) != "decline" {
		t.Fatalf("ask = %+v, %v", res, err)
	}
	if !strings.Contains(fmt.Sprint(got), "anyOf") {
		t.Errorf("Elicit saw schema %v, want the server's", got)
	}
}

// BenchmarkPassthroughReadResource compares resources/read through the
// runtime (routing by the cached listing) with a go-sdk client reading the
// same in-process server directly.
func BenchmarkPassthroughReadResource(b *testing.B) {
	newSrv := func() *mcp.Server {
		srv := newServer("res", &mcp.ServerOptions{SupportedProtocolVersions: legacy})
		for i := range 100 {
			uri := fmt.Sprintf("mem://doc/%d", i)
			srv.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "x"}}}, nil
			})
		}
		srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://item/{id}", Name: "item"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "x"}}}, nil
		})
		return srv
	}
	ctx := context.Background()
	for _, uri := range []string{"mem://doc/99", "mem://item/7"} {
		b.Run("direct/"+uri, func(b *testing.B) {
			ct, st := mcp.NewInMemoryTransports()
			srv := newSrv()
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() { _ = srv.Run(sctx, st) }()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: legacy[0]})
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			for b.Loop() {
				if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("runtime/"+uri, func(b *testing.B) {
			s := open(b, []Server{inProcess(b, "res", newSrv())}, &Options{ProtocolVersion: legacy[0]})
			for b.Loop() {
				if _, err := s.ReadResource(ctx, uri); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
