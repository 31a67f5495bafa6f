package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/procfs"
	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

func TestDiffServers(t *testing.T) {
	t.Parallel()
	yes := true
	stdio := func(name string, args ...string) Server {
		return Server{Name: name, Entry: config.ServerEntry{Command: "srv", Args: args, Env: map[string]any{"A": "1"}}}
	}
	web := Server{Name: "web", Entry: config.ServerEntry{URL: "https://h/mcp", Transport: "streamable-http", SSLVerify: &yes}}
	ct, _ := mcp.NewInMemoryTransports()
	ct2, _ := mcp.NewInMemoryTransports()
	with := func(s Server, f func(*Server)) Server { f(&s); return s }

	tests := []struct {
		name      string
		old, next []Server
		want      ServerChanges
		text      string
	}{
		{
			name: "same",
			old:  []Server{stdio("a"), web},
			next: []Server{stdio("a"), with(web, func(s *Server) { v := true; s.Entry.SSLVerify = &v })},
			want: ServerChanges{Unchanged: []string{"a", "web"}},
			text: "0 added, 0 removed, 0 changed, 2 unchanged",
		},
		{
			name: "added, removed, changed",
			old:  []Server{stdio("a"), stdio("gone"), web},
			next: []Server{stdio("a", "--new"), web, stdio("b")},
			want: ServerChanges{Added: []string{"b"}, Removed: []string{"gone"}, Changed: []string{"a"}, Unchanged: []string{"web"}},
			text: "1 added (b), 1 removed (gone), 1 changed (a), 1 unchanged",
		},
		{
			name: "every field that matters",
			old: []Server{stdio("env"), stdio("off"), stdio("par"), stdio("blk"), stdio("tf"),
				stdio("idn"), stdio("lp"), stdio("ap"),
				{Name: "mem", Transport: ct}, {Name: "mem2", Transport: ct}},
			next: []Server{
				with(stdio("env"), func(s *Server) { s.Entry.Env = map[string]any{"A": "2"} }),
				with(stdio("off"), func(s *Server) { s.Disabled = true }),
				with(stdio("par"), func(s *Server) { s.SupportsParallelToolCalls = true }),
				with(stdio("blk"), func(s *Server) { s.BlockedEnv = []string{"NODE_OPTIONS"} }),
				with(stdio("tf"), func(s *Server) { s.ToolFilter = &config.ToolFilter{Include: []string{"x"}} }),
				with(stdio("idn"), func(s *Server) { s.OAuthIdentity = IdentityPerRequester }),
				with(stdio("lp"), func(s *Server) { s.ListPrincipal = "alice" }),
				with(stdio("ap"), func(s *Server) { s.AuthProfileID = "work" }),
				{Name: "mem", Transport: ct}, {Name: "mem2", Transport: ct2},
			},
			want: ServerChanges{Changed: []string{"env", "off", "par", "blk", "tf", "idn", "lp", "ap", "mem2"}, Unchanged: []string{"mem"}},
		},
		{
			name: "reordered",
			old:  []Server{stdio("a"), stdio("b")},
			next: []Server{stdio("b"), stdio("a")},
			want: ServerChanges{Unchanged: []string{"b", "a"}, Reordered: true},
			text: "0 added, 0 removed, 0 changed, 2 unchanged, reordered",
		},
		{
			name: "from nothing",
			next: []Server{web},
			want: ServerChanges{Added: []string{"web"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := DiffServers(tc.old, tc.next)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("DiffServers = %+v, want %+v", got, tc.want)
			}
			if tc.text != "" && got.String() != tc.text {
				t.Errorf("String() = %q, want %q", got.String(), tc.text)
			}
			wantEmpty := len(tc.want.Added)+len(tc.want.Removed)+len(tc.want.Changed) == 0 && !tc.want.Reordered
			if got.Empty() != wantEmpty {
				t.Errorf("Empty() = %v, want %v", got.Empty(), wantEmpty)
			}
		})
	}
}

// pingServer returns an in-process server named name with one tool,
// `ping`, answering "<name>: <args>".
func pingServer(t *testing.T, name string) Server {
	t.Helper()
	srv := newServer(name, nil)
	srv.AddTool(&mcp.Tool{Name: "ping", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult(name + ": " + string(req.Params.Arguments)), nil
		})
	return inProcess(t, name, srv)
}

func TestReload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		next      []string // server names; "b*" is b on another transport (changed)
		want      ServerChanges
		tools     []string
		removed   []string // EventRemoved
		unknown   string   // a tool no longer callable
		reachable []string // tools answering "<server>: {}"
	}{
		{
			name:      "add",
			next:      []string{"a", "b", "c"},
			want:      ServerChanges{Added: []string{"c"}, Unchanged: []string{"a", "b"}},
			tools:     []string{"a__ping", "b__ping", "c__ping"},
			reachable: []string{"a__ping", "b__ping", "c__ping"},
		},
		{
			name:      "remove",
			next:      []string{"b"},
			want:      ServerChanges{Removed: []string{"a"}, Unchanged: []string{"b"}},
			tools:     []string{"b__ping"},
			removed:   []string{"a"},
			unknown:   "a__ping",
			reachable: []string{"b__ping"},
		},
		{
			name:      "change and add",
			next:      []string{"a", "b*", "c"},
			want:      ServerChanges{Added: []string{"c"}, Changed: []string{"b"}, Unchanged: []string{"a"}},
			tools:     []string{"a__ping", "b__ping", "c__ping"},
			removed:   []string{"b"},
			reachable: []string{"a__ping", "b__ping", "c__ping"},
		},
		{
			name:  "reorder",
			next:  []string{"b", "a"},
			want:  ServerChanges{Unchanged: []string{"b", "a"}, Reordered: true},
			tools: []string{"a__ping", "b__ping"},
		},
		{
			name:  "nothing",
			next:  []string{"a", "b"},
			want:  ServerChanges{Unchanged: []string{"a", "b"}},
			tools: []string{"a__ping", "b__ping"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// In-memory transports connect once: every session gets its own
			// servers.
			a, b := pingServer(t, "a"), pingServer(t, "b")
			known := map[string]Server{"a": a, "b": b}
			var next []Server
			var order []string
			for _, name := range tc.next {
				sv, ok := known[name]
				if !ok {
					sv = pingServer(t, strings.TrimSuffix(name, "*"))
				}
				next = append(next, sv)
				order = append(order, sv.Name)
			}
			evs := newEvents()
			s := open(t, []Server{a, b}, &Options{OnEvent: evs.on})
			if got := toolNames(t, s); !slices.Equal(got, []string{"a__ping", "b__ping"}) {
				t.Fatalf("before: %v", got)
			}
			got, err := s.Reload(context.Background(), next)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Reload = %+v, want %+v", got, tc.want)
			}
			if names := toolNames(t, s); !slices.Equal(names, tc.tools) {
				t.Errorf("tools after reload = %v, want %v", names, tc.tools)
			}
			for _, name := range tc.reachable {
				res, err := s.CallTool(context.Background(), name, []byte(`{}`))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if want := strings.TrimSuffix(name, "__ping") + ": {}"; resultText(t, res) != want {
					t.Errorf("%s = %q, want %q", name, resultText(t, res), want)
				}
			}
			if tc.unknown != "" {
				if _, err := s.CallTool(context.Background(), tc.unknown, nil); !errors.Is(err, ErrUnknownTool) {
					t.Errorf("%s after removal: %v, want ErrUnknownTool", tc.unknown, err)
				}
			}
			waitRemoved(t, evs, tc.removed...)
			var status []string
			for _, st := range s.Status() {
				status = append(status, st.Name)
				if !st.Connected {
					t.Errorf("status %+v: not connected", st)
				}
			}
			if !slices.Equal(status, order) {
				t.Errorf("status lists %v, want %v", status, order)
			}
		})
	}
}

func TestReloadErrors(t *testing.T) {
	t.Parallel()
	s := open(t, []Server{pingServer(t, "a")}, &Options{})
	for _, tc := range []struct {
		name    string
		servers []Server
		want    string
	}{
		{"empty name", []Server{{Name: ""}}, "server 0 has an empty name"},
		{"twice", []Server{pingServer(t, "x"), pingServer(t, "x")}, `server "x" is declared twice`},
	} {
		if _, err := s.Reload(context.Background(), tc.servers); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if got := toolNames(t, s); !slices.Equal(got, []string{"a__ping"}) {
		t.Errorf("a refused reload changed the catalog: %v", got)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reload(context.Background(), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Reload after Close: %v, want ErrClosed", err)
	}
}

// A call in flight on a removed server ends on its connection, which is
// closed only afterwards.
func TestReloadWaitsForCallsInFlight(t *testing.T) {
	t.Parallel()
	srv := newServer("slow", nil)
	entered, release := make(chan struct{}), make(chan struct{})
	srv.AddTool(&mcp.Tool{Name: "wait", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			close(entered)
			select {
			case <-release:
				return textResult("done"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	evs := newEvents()
	s := open(t, []Server{inProcess(t, "slow", srv), pingServer(t, "b")}, &Options{OnEvent: evs.on})
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := s.CallTool(context.Background(), "slow__wait", nil)
		done <- answer{res, err}
	}()
	<-entered
	if _, err := s.Reload(context.Background(), []Server{s.set.Load().decl[1]}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CallTool(context.Background(), "slow__wait", nil); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("new call to the removed server: %v, want ErrUnknownTool", err)
	}
	close(release)
	if a := <-done; a.err != nil || resultText(t, a.res) != "done" {
		t.Fatalf("call in flight across the reload: %v %v", a.res, a.err)
	}
	evs.wait(t, EventRemoved, "slow")
}

// Calls in a loop while the set is reloaded over and over: a call reaches
// a server of one set or of the next, never half of each (run with -race).
func TestReloadWhileCalling(t *testing.T) {
	t.Parallel()
	keep := pingServer(t, "keep")
	s := open(t, []Server{keep}, &Options{})
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, name := range []string{"keep__ping", "churn__ping", "keep__ping", "churn__ping"} {
		wg.Go(func() {
			for ctx.Err() == nil {
				res, err := s.CallTool(ctx, name, []byte(`{}`))
				switch {
				case err == nil && resultText(t, res) != strings.TrimSuffix(name, "__ping")+": {}":
					errs <- fmt.Errorf("%s answered %q", name, resultText(t, res))
					return
				case err == nil, ctx.Err() != nil:
				case name == "churn__ping" && errors.Is(err, ErrUnknownTool):
				default:
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			_, _ = s.Tools(ctx)
			_ = s.Status()
			_, _ = s.Prompts(ctx)
		}
	})
	for i := range 40 {
		next := []Server{keep}
		if i%2 == 0 {
			next = append(next, pingServer(t, "churn"))
		}
		if _, err := s.Reload(context.Background(), next); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// everythingServer returns the go-sdk conformance everything-server
// (stdio), or skips when it is not installed (fails in CI).
func everythingServer(t testing.TB) string {
	t.Helper()
	return testkit.Peer(t, testkit.GoEverythingServer)
}

// Real child processes: a reload starts the added server's, stops the
// removed one's, keeps the unchanged one's and replaces the changed one's;
// Close leaves none.
func TestReloadStdioChildren(t *testing.T) {
	t.Parallel()
	bin := everythingServer(t)
	if goruntime.GOOS != "linux" {
		t.Skip("the leak check reads /proc")
	}
	tag := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	server := func(name, gen string) Server {
		return Server{Name: name, Entry: config.ServerEntry{
			Command: bin, Env: map[string]any{"OPENCLAW_RELOAD_TEST": tag + "-" + name, "GEN": gen},
			ConnectionTimeoutMs: 30000, RequestTimeoutMs: 30000,
		}}
	}
	pids := func(name string) []int { return procfs.WithEnv("OPENCLAW_RELOAD_TEST=" + tag + "-" + name) }
	gone := func(name string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // a hang guard, not a timing assertion
		for p := pids(name); len(p) > 0; p = pids(name) {
			if time.Now().After(deadline) {
				t.Fatalf("server %s: processes %v survived", name, p)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	call := func(s *Session, tool string) {
		t.Helper()
		res, err := s.CallTool(context.Background(), tool, []byte(`{}`))
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", tool, res, err)
		}
	}
	evs := newEvents()
	s := open(t, []Server{server("one", "1")}, &Options{OnEvent: evs.on})
	call(s, "one__test_simple_text")
	onePIDs := pids("one")
	if len(onePIDs) == 0 {
		t.Fatal("found no child process of server one (the marker env did not reach it)")
	}

	ch, err := s.Reload(context.Background(), []Server{server("one", "1"), server("two", "1")})
	if err != nil || ch.String() != "1 added (two), 0 removed, 0 changed, 1 unchanged" {
		t.Fatalf("add: %v %v", ch, err)
	}
	evs.wait(t, EventReloaded, "")
	call(s, "two__test_simple_text")
	call(s, "one__test_simple_text")
	if p := pids("one"); !slices.Equal(p, onePIDs) {
		t.Errorf("unchanged server one: processes %v, were %v", p, onePIDs)
	}
	twoPIDs := pids("two")

	ch, err = s.Reload(context.Background(), []Server{server("two", "2")})
	if err != nil || ch.String() != "0 added, 1 removed (one), 1 changed (two), 0 unchanged" {
		t.Fatalf("remove and change: %v %v", ch, err)
	}
	gone("one")
	waitRemoved(t, evs, "one", "two")
	call(s, "two__test_simple_text")
	if p := pids("two"); len(p) == 0 || slices.Equal(p, twoPIDs) {
		t.Errorf("changed server two: processes %v, were %v: want new ones", p, twoPIDs)
	}
	if _, err := s.CallTool(context.Background(), "one__test_simple_text", nil); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("removed server's tool: %v, want ErrUnknownTool", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	gone("two")
}

// The prompt names are kept until a server's prompts change, a reload or a
// new tool catalog.
func TestPromptNamesCached(t *testing.T) {
	t.Parallel()
	srv := newServer("p", nil)
	prompt := func(name string) {
		srv.AddPrompt(&mcp.Prompt{Name: name}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: name}}}}, nil
		})
	}
	prompt("first")
	namer := &policiestest.Sanitizer{}
	evs := newEvents()
	s := open(t, []Server{inProcess(t, "p", srv)}, &Options{Sanitizer: namer, OnEvent: evs.on})
	ctx := context.Background()
	names := func() []string {
		t.Helper()
		ps, err := s.Prompts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	if got := names(); !slices.Equal(got, []string{"p__first"}) {
		t.Fatalf("prompts = %v", got)
	}
	n := len(namer.Requests())
	for range 3 {
		names()
		if _, err := s.GetPrompt(ctx, "p__first", nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(namer.Requests()); got != n {
		t.Errorf("naming ran %d more times for unchanged prompts, want 0", got-n)
	}
	prompt("second") // notifications/prompts/list_changed
	evs.wait(t, EventPromptsChanged, "p")
	if got := names(); !slices.Equal(got, []string{"p__first", "p__second"}) {
		t.Fatalf("prompts after a change = %v", got)
	}
	if got := len(namer.Requests()); got != n+1 {
		t.Errorf("naming ran %d times after a change, want 1", got-n)
	}
	n = len(namer.Requests())
	if _, err := s.Reload(ctx, []Server{s.set.Load().decl[0], pingServer(t, "q")}); err != nil {
		t.Fatal(err)
	}
	names()
	if got := len(namer.Requests()); got != n+2 { // the tool catalog, then the prompts
		t.Errorf("naming ran %d times after a reload, want 2", got-n)
	}
}

func TestSetToolPolicy(t *testing.T) {
	t.Parallel()
	s := open(t, []Server{pingServer(t, "a"), pingServer(t, "b")}, &Options{})
	s.SetToolPolicy(&ToolPolicy{Deny: []string{"a__*"}})
	if got := toolNames(t, s); !slices.Equal(got, []string{"b__ping"}) {
		t.Errorf("tools with a__* denied = %v", got)
	}
	var hidden *HiddenToolError
	if _, err := s.CallTool(context.Background(), "a__ping", nil); !errors.As(err, &hidden) || hidden.Rule != `tools.deny entry "a__*"` {
		t.Errorf("denied call: %v", err)
	}
	s.SetToolPolicy(nil)
	if got := toolNames(t, s); !slices.Equal(got, []string{"a__ping", "b__ping"}) {
		t.Errorf("tools without a policy = %v", got)
	}
}

// waitRemoved waits for EventRemoved of every server in names, in any
// order.
func waitRemoved(t *testing.T, evs *events, names ...string) {
	t.Helper()
	left := slices.Clone(names)
	deadline := time.After(30 * time.Second) // a hang guard, not a timing assertion
	for len(left) > 0 {
		select {
		case ev := <-evs.ch:
			if i := slices.Index(left, ev.Server); ev.Kind == EventRemoved && i >= 0 {
				left = slices.Delete(left, i, i+1)
			}
		case <-deadline:
			t.Fatalf("no %s event for %v", EventRemoved, left)
		}
	}
}

// BenchmarkPrompts lists the prompts of 10 in-process servers × 20
// prompts (named by the Go test sanitizer; the Wasm one costs more).
func BenchmarkPrompts(b *testing.B) {
	var servers []Server
	for i := range 10 {
		name := "s" + strconv.Itoa(i)
		srv := newServer(name, nil)
		for j := range 20 {
			srv.AddPrompt(&mcp.Prompt{Name: "p" + strconv.Itoa(j)}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{}, nil
			})
		}
		servers = append(servers, inProcess(b, name, srv))
	}
	s := open(b, servers, &Options{})
	ctx := context.Background()
	for b.Loop() {
		ps, err := s.Prompts(ctx)
		if err != nil || len(ps) != 200 {
			b.Fatalf("%d prompts, %v", len(ps), err)
		}
	}
}

// BenchmarkReloadStdio adds then removes a stdio server (the go-sdk
// everything-server) per op: connect, initialize and list the added one,
// publish, name the catalog, and close the removed one in the background.
func BenchmarkReloadStdio(b *testing.B) {
	bin := everythingServer(b)
	one := Server{Name: "one", Entry: config.ServerEntry{Command: bin}}
	two := Server{Name: "two", Entry: config.ServerEntry{Command: bin}}
	s := open(b, []Server{one}, &Options{})
	ctx := context.Background()
	for b.Loop() {
		for _, next := range [][]Server{{one, two}, {one}} {
			if _, err := s.Reload(ctx, next); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Tools(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
}
