package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// builtinSanitizer loads the embedded builtin:sanitizer, closed at the end
// of the test.
func builtinSanitizer(t *testing.T) *wasmpolicy.Module {
	t.Helper()
	m, err := wasmpolicy.Load(context.Background(), "sanitizer", builtin.Sanitizer(), nil,
		&wasmpolicy.Options{Host: wasmhost.Options{CallTimeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// callText calls name and returns its text, failing the test on an error.
func callText(t *testing.T, s *Session, name string) string {
	t.Helper()
	res, err := s.CallTool(context.Background(), name, nil)
	if err != nil {
		t.Fatalf("call %q: %v", name, err)
	}
	return resultText(t, res)
}

// TestExposedNamesStayWithinSession: with the built-in sanitizer, a name the
// session exposed keeps calling the same tool when the server lists a tool
// that would take its name on a fresh start (a second 70-character tool, a
// tool that sanitizes to the same name) or a server is added whose safe name
// collides; the newcomer gets the suffix or the hash.
func TestExposedNamesStayWithinSession(t *testing.T) {
	t.Parallel()
	doc := "search_cloudflare_documentation_and_return_the_most_relevant_pages_x"
	doc2 := "search_cloudflare_documentation_and_return_the_most_relevant_pages_y"
	platform := "Acme_Enterprise_Data_Management_Platform_"
	cf, netapp, p2 := newServer("cloudflare", nil), newServer("netapp", nil), newServer("p2", nil)
	echoTool(cf, doc)
	echoTool(netapp, "Create-CIFS-Share")
	echoTool(p2, "list_assets")
	evs := newEvents()
	servers := []Server{inProcess(t, "cloudflare", cf), inProcess(t, "netapp", netapp), inProcess(t, platform+"2", p2)}
	s := open(t, servers, &Options{OnEvent: evs.on, Sanitizer: builtinSanitizer(t)})
	before := toolNames(t, s)
	want := []string{"Acme_Enterprise_Data_Managemen__list_assets", "cloudflare__" + doc[:52], "netapp__Create-CIFS-Share"}
	if !slices.Equal(before, want) {
		t.Fatalf("catalog %q, want %q", before, want)
	}

	echoTool(cf, doc2)
	evs.wait(t, EventToolsChanged, "cloudflare")
	echoTool(netapp, "Create CIFS Share")
	evs.wait(t, EventToolsChanged, "netapp")
	p3 := newServer("p3", nil)
	echoTool(p3, "list_assets")
	if _, err := s.Reload(context.Background(), append(slices.Clone(servers), inProcess(t, platform+"3", p3))); err != nil {
		t.Fatal(err)
	}
	after := toolNames(t, s)
	for _, n := range before {
		if !slices.Contains(after, n) {
			t.Errorf("%q left the catalog %q", n, after)
		}
	}
	for name, text := range map[string]string{
		"cloudflare__" + doc[:52]:                     doc + ": {}",
		"netapp__Create-CIFS-Share":                   "Create-CIFS-Share: {}",
		"netapp__Create-CIFS-Share-2":                 "Create CIFS Share: {}",
		"Acme_Enterprise_Data_Managemen__list_assets": "list_assets: {}",
	} {
		if got := callText(t, s, name); got != text {
			t.Errorf("%q answers %q, want %q", name, got, text)
		}
	}
	if len(after) != 6 {
		t.Errorf("catalog %q: want the 3 newcomers beside the 3 first tools", after)
	}
}

// TestExposedNamesHostCheck: a sanitizer that ignores "exposed" (policiestest.Sanitizer
// names in listing order) cannot move an exposed name to another tool: the
// host leaves the newcomer out and says why, and the old name never calls
// it.
func TestExposedNamesHostCheck(t *testing.T) {
	t.Parallel()
	netapp := newServer("netapp", nil)
	echoTool(netapp, "Create-CIFS-Share")
	evs := newEvents()
	var log syncBuffer
	s := open(t, []Server{inProcess(t, "netapp", netapp)}, &Options{OnEvent: evs.on, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if got := toolNames(t, s); !slices.Equal(got, []string{"netapp__Create-CIFS-Share"}) {
		t.Fatalf("catalog %q", got)
	}
	echoTool(netapp, "Create CIFS Share") // listed first: policiestest.Sanitizer gives it the plain name
	evs.wait(t, EventToolsChanged, "netapp")
	got := toolNames(t, s)
	if slices.Contains(got, "netapp__Create-CIFS-Share") {
		if text := callText(t, s, "netapp__Create-CIFS-Share"); text != "Create-CIFS-Share: {}" {
			t.Fatalf("netapp__Create-CIFS-Share now calls %q", text)
		}
	} else if _, err := s.CallTool(context.Background(), "netapp__Create-CIFS-Share", nil); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("netapp__Create-CIFS-Share: %v, want ErrUnknownTool", err)
	}
	log.mu.Lock()
	logged := log.buf.String()
	log.mu.Unlock()
	if !strings.Contains(logged, `name \"netapp__Create-CIFS-Share\" was exposed for tool \"Create-CIFS-Share\" of server \"netapp\" in this session; the tool is not exposed`) {
		t.Errorf("log does not say why the newcomer is left out:\n%s", logged)
	}
}

// TestAmbiguousServerNamesRouteAndWarn: servers a (tool b__c), a__b (tool
// c) and a_ (tool e): the exposed names route by the catalog's map, the
// session warns at start about a__b and a_, and a tools.deny glob "a__*"
// keeps OpenClaw's meaning (the exposed name matches: it hides all three).
func TestAmbiguousServerNamesRouteAndWarn(t *testing.T) {
	t.Parallel()
	a, ab, a_ := newServer("a", nil), newServer("a__b", nil), newServer("a_", nil)
	echoTool(a, "b__c")
	echoTool(ab, "c")
	echoTool(a_, "e")
	servers := []Server{inProcess(t, "a", a), inProcess(t, "a__b", ab), inProcess(t, "a_", a_)}
	var log syncBuffer
	s := open(t, servers, &Options{Logger: slog.New(slog.NewTextHandler(&log, nil)), Sanitizer: builtinSanitizer(t)})
	for name, text := range map[string]string{"a__b__c": "b__c: {}", "a__b__c-2": "c: {}", "a___e": "e: {}"} {
		if got := callText(t, s, name); got != text {
			t.Errorf("%q answers %q, want %q", name, got, text)
		}
	}
	log.mu.Lock()
	logged := log.buf.String()
	log.mu.Unlock()
	for _, server := range []string{"a__b", "a_"} {
		if !strings.Contains(logged, `level=WARN msg="MCP server \"`+server+`\": the server part`) {
			t.Errorf("no start warning for %s:\n%s", server, logged)
		}
	}
	if strings.Contains(logged, `MCP server \"a\":`) {
		t.Errorf("warned about server a:\n%s", logged)
	}
	s.SetToolPolicy(&ToolPolicy{Deny: []string{"a__*"}})
	if got := toolNames(t, s); len(got) != 0 {
		t.Errorf("tools.deny a__* leaves %q (OpenClaw hides every name starting a__)", got)
	}
}

// TestExposedNamesForgetsOldest: a server that renames its tools on every
// listing does not grow the session's record past maxRetiredNames beyond
// its catalog; the oldest names go first, the current ones stay.
func TestExposedNamesForgetsOldest(t *testing.T) {
	t.Parallel()
	x := newExposedNames()
	batch := func(round, n int) {
		req := &policies.SanitizeRequest{Servers: []policies.SanitizeServer{{Name: "s"}}}
		res := &policies.SanitizeResult{Servers: []policies.SanitizedServer{{Safe: "s"}}}
		keys := [][]toolKey{nil}
		for i := 0; i < n; i++ {
			raw := fmt.Sprintf("t%d_%d", round, i)
			req.Servers[0].Tools = append(req.Servers[0].Tools, raw)
			res.Servers[0].Tools = append(res.Servers[0].Tools, policies.ToolName{Name: "s__" + raw})
			keys[0] = append(keys[0], toolKey{server: "s", tool: raw})
		}
		x.request(req.Servers, keys)
		if bad := x.check(req, res, keys, "tool"); len(bad) != 0 {
			t.Fatalf("round %d: %v", round, bad[0])
		}
	}
	for round := 0; round < 5; round++ {
		batch(round, 5000)
	}
	if len(x.owner) != 5000+maxRetiredNames {
		t.Errorf("%d names remembered, want %d", len(x.owner), 5000+maxRetiredNames)
	}
	if _, ok := x.owner["s__t0_0"]; ok {
		t.Error("the oldest name is still remembered")
	}
	for _, n := range []string{"s__t4_0", "s__t4_4999", "s__t2_0"} {
		if _, ok := x.owner[n]; !ok {
			t.Errorf("%s forgotten", n)
		}
	}
}

// TestExposedPromptNamesStay: prompt names stay within the session as tool
// names do: a prompt that sanitizes to an exposed prompt's name takes the
// suffix, and the old name keeps getting the old prompt.
func TestExposedPromptNamesStay(t *testing.T) {
	t.Parallel()
	srv := newServer("p", nil)
	prompt := func(name string) {
		srv.AddPrompt(&mcp.Prompt{Name: name}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: name}}}}, nil
		})
	}
	prompt("Create-Report")
	evs := newEvents()
	s := open(t, []Server{inProcess(t, "p", srv)}, &Options{Sanitizer: builtinSanitizer(t), OnEvent: evs.on})
	ctx := context.Background()
	text := func(name string) string {
		t.Helper()
		r, err := s.GetPrompt(ctx, name, nil)
		if err != nil {
			t.Fatalf("prompt %q: %v", name, err)
		}
		return r.Messages[0].Content.(*mcp.TextContent).Text
	}
	if got := text("p__Create-Report"); got != "Create-Report" {
		t.Fatalf("p__Create-Report gets %q", got)
	}
	prompt("Create Report") // sorts first: fresh naming gives it p__Create-Report
	evs.wait(t, EventPromptsChanged, "p")
	if got := text("p__Create-Report"); got != "Create-Report" {
		t.Errorf("p__Create-Report now gets %q", got)
	}
	if got := text("p__Create-Report-2"); got != "Create Report" {
		t.Errorf("p__Create-Report-2 gets %q", got)
	}
}
