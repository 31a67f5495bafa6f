package runtime

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// policyServers returns two in-process servers: docs (search, fetch) and
// mail (send).
func policyServers(t *testing.T) []Server {
	t.Helper()
	docs := newServer("docs", nil)
	echoTool(docs, "search")
	echoTool(docs, "fetch")
	mail := newServer("mail", nil)
	echoTool(mail, "send")
	return []Server{inProcess(t, "docs", docs), inProcess(t, "mail", mail)}
}

func TestToolPolicy(t *testing.T) {
	t.Parallel()
	all := []string{"docs__fetch", "docs__search", "mail__send"}
	tests := []struct {
		name   string
		policy *ToolPolicy
		want   []string // the catalog
		rule   string   // substring of the rule that hides the others
	}{
		{name: "none", policy: nil, want: all},
		{name: "empty", policy: &ToolPolicy{}, want: all},
		{name: "profile minimal", policy: &ToolPolicy{Profile: "minimal"}, rule: `tools.profile "minimal"`},
		{name: "minimal with alsoAllow server glob", policy: &ToolPolicy{Profile: "minimal", AlsoAllow: []string{"mail__*"}},
			want: []string{"mail__send"}, rule: `tools.profile "minimal"`},
		{name: "minimal with alsoAllow bundle-mcp", policy: &ToolPolicy{Profile: "minimal", AlsoAllow: []string{"bundle-mcp"}}, want: all},
		{name: "profile coding", policy: &ToolPolicy{Profile: "coding"}, want: all},
		{name: "profile messaging", policy: &ToolPolicy{Profile: "messaging"}, want: all},
		{name: "profile full", policy: &ToolPolicy{Profile: "full"}, want: all},
		{name: "deny bundle-mcp", policy: &ToolPolicy{Profile: "coding", Deny: []string{"bundle-mcp"}}, rule: `tools.deny entry "bundle-mcp"`},
		{name: "deny group:plugins", policy: &ToolPolicy{Deny: []string{"group:plugins"}}, rule: `tools.deny entry "group:plugins"`},
		{name: "deny server glob ignoring case", policy: &ToolPolicy{Deny: []string{"DOCS__*"}},
			want: []string{"mail__send"}, rule: `tools.deny entry "DOCS__*"`},
		{name: "deny a built-in tool only", policy: &ToolPolicy{Deny: []string{"exec", "group:fs"}}, want: all},
		{name: "allow one tool", policy: &ToolPolicy{Allow: []string{"docs__search"}},
			want: []string{"docs__search"}, rule: "tools.allow (no entry matches)"},
		{name: "allow built-in tools only", policy: &ToolPolicy{Allow: []string{"exec", "read"}}, rule: "tools.allow"},
		{name: "deny wins over allow", policy: &ToolPolicy{Allow: []string{"bundle-mcp"}, Deny: []string{"*__fetch"}},
			want: []string{"docs__search", "mail__send"}, rule: `tools.deny entry "*__fetch"`},
		{name: "sandboxed without alsoAllow", policy: &ToolPolicy{Profile: "coding", Sandboxed: true},
			rule: "no tools.sandbox.tools.alsoAllow entry matches"},
		{name: "sandboxed, alsoAllow a built-in tool only", policy: &ToolPolicy{Sandboxed: true, Sandbox: config.SandboxToolPolicy{AlsoAllow: []string{"web_search"}}},
			rule: "sandbox tool policy"},
		{name: "sandboxed, alsoAllow bundle-mcp", policy: &ToolPolicy{Sandboxed: true, Sandbox: config.SandboxToolPolicy{AlsoAllow: []string{"bundle-mcp"}}}, want: all},
		{name: "sandboxed, alsoAllow a server glob", policy: &ToolPolicy{Sandboxed: true, Sandbox: config.SandboxToolPolicy{AlsoAllow: []string{"docs__*"}}},
			want: []string{"docs__fetch", "docs__search"}, rule: "sandbox tool policy"},
		{name: "sandboxed, sandbox deny", policy: &ToolPolicy{Sandboxed: true, Sandbox: config.SandboxToolPolicy{AlsoAllow: []string{"bundle-mcp"}, Deny: []string{"docs__fetch"}}},
			want: []string{"docs__search", "mail__send"}, rule: `tools.sandbox.tools.deny entry "docs__fetch"`},
		{name: "sandboxed, explicit empty allow", policy: &ToolPolicy{Sandboxed: true, Sandbox: config.SandboxToolPolicy{HasAllow: true}},
			rule: "no tools.sandbox.tools.allow entry matches"},
		{name: "sandbox gate off when not sandboxed", policy: &ToolPolicy{SandboxMode: "non-main", Sandbox: config.SandboxToolPolicy{HasAllow: true}}, want: all},
		{name: "a tool must pass profile and sandbox", policy: &ToolPolicy{Profile: "minimal", AlsoAllow: []string{"mail__send", "docs__*"}, Sandboxed: true, Sandbox: config.SandboxToolPolicy{AlsoAllow: []string{"docs__*"}}},
			want: []string{"docs__fetch", "docs__search"}, rule: "sandbox tool policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pol := &policiestest.Enforcer{}
			s := open(t, policyServers(t), &Options{Enforcer: pol, ToolPolicy: tt.policy})
			got := toolNames(t, s)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("catalog = %v, want %v", got, tt.want)
			}
			ctx := context.Background()
			for _, name := range all {
				res, err := s.CallTool(ctx, name, []byte(`{"q":1}`))
				if slices.Contains(tt.want, name) {
					if err != nil || res.IsError {
						t.Errorf("visible %s: %v %v", name, res, err)
					}
					continue
				}
				var he *HiddenToolError
				if !errors.As(err, &he) || !errors.Is(err, ErrUnknownTool) {
					t.Errorf("hidden %s: err = %v, want a *HiddenToolError wrapping ErrUnknownTool", name, err)
					continue
				}
				if he.Tool != name || he.Server != strings.Split(name, "__")[0] || !strings.Contains(err.Error(), tt.rule) {
					t.Errorf("hidden %s: %+v (%v), want rule containing %q", name, he, err, tt.rule)
				}
			}
			if n := len(pol.Calls()); n != len(tt.want) {
				t.Errorf("before_tool_call saw %d calls, want %d (hidden tools never reach the policy)", n, len(tt.want))
			}
			for _, st := range s.Status() {
				want := 0
				for _, n := range tt.want {
					if strings.HasPrefix(n, st.Name+"__") {
						want++
					}
				}
				if st.Tools != want {
					t.Errorf("status %s: %d tools, want %d", st.Name, st.Tools, want)
				}
			}
		})
	}
}

// An unknown name still reads as an unknown tool, not a hidden one.
func TestToolPolicyUnknownTool(t *testing.T) {
	t.Parallel()
	s := open(t, policyServers(t), &Options{ToolPolicy: &ToolPolicy{Profile: "minimal"}})
	_, err := s.CallTool(context.Background(), "nope__x", nil)
	var he *HiddenToolError
	if !errors.Is(err, ErrUnknownTool) || errors.As(err, &he) {
		t.Fatalf("err = %v, want a plain ErrUnknownTool", err)
	}
}

// The policy read from openclaw.json reaches the catalog; the options are
// copied, so a later change to the caller's struct has no effect.
func TestToolPolicyFromConfig(t *testing.T) {
	t.Parallel()
	doc, err := config.ParseDocument("openclaw.json", []byte(`{
		// JSON5, as OpenClaw writes it by hand
		agents: {defaults: {sandbox: {mode: "all"}}},
		tools: {profile: "coding", deny: ["mail__*"], sandbox: {tools: {alsoAllow: ["bundle-mcp"]}}},
	}`))
	if err != nil {
		t.Fatal(err)
	}
	tp, err := doc.ToolPolicy()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, policyServers(t), &Options{ToolPolicy: tp})
	tp.Deny = nil
	if got, want := toolNames(t, s), []string{"docs__fetch", "docs__search"}; !slices.Equal(got, want) {
		t.Fatalf("catalog = %v, want %v", got, want)
	}
	_, err = s.CallTool(context.Background(), "mail__send", nil)
	if err == nil || err.Error() != `runtime: unknown tool "mail__send": hidden by tools.deny entry "mail__*"` {
		t.Fatalf("err = %v", err)
	}
}

// A server's tool list change is filtered the same way once refreshed.
func TestToolPolicyAfterListChanged(t *testing.T) {
	t.Parallel()
	srv := newServer("docs", nil)
	echoTool(srv, "search")
	ev := newEvents()
	s := open(t, []Server{inProcess(t, "docs", srv)}, &Options{
		OnEvent:    ev.on,
		ToolPolicy: &ToolPolicy{Deny: []string{"docs__secret*"}},
	})
	echoTool(srv, "secret_fetch")
	echoTool(srv, "summary")
	ev.wait(t, EventToolsChanged, "docs")
	if got, want := toolNames(t, s), []string{"docs__search", "docs__summary"}; !slices.Equal(got, want) {
		t.Fatalf("catalog = %v, want %v", got, want)
	}
	var he *HiddenToolError
	if _, err := s.CallTool(context.Background(), "docs__secret_fetch", nil); !errors.As(err, &he) {
		t.Fatalf("err = %v, want hidden", err)
	}
}

// BenchmarkToolPolicy5000 applies a realistic policy (profile, two deny
// globs, the sandbox gate with a server glob) to a catalog of 5000 exposed
// names: the cost the policy adds to a catalog build of 50 × 100 tools.
func BenchmarkToolPolicy5000(b *testing.B) {
	tp := compileToolPolicy(&ToolPolicy{
		Profile: "coding", Deny: []string{"*__delete*", "secrets__*"},
		Sandboxed: true, Sandbox: config.SandboxToolPolicy{AlsoAllow: []string{"web_search", "server-1*__*", "bundle-mcp"}},
	})
	type name struct{ exposed, server, raw string }
	names := make([]name, 0, 5000)
	for i := range 50 {
		for j := range 100 {
			server, raw := "server-"+strconv.Itoa(i), "tool_"+strconv.Itoa(j)
			names = append(names, name{server + "__" + raw, server, raw})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, n := range names {
			_ = tp.hides(n.exposed, n.server, n.raw)
		}
	}
}
