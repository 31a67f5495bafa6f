package guesttest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/internal/e2e"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/guesttest"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

func read(t testing.TB, ex guesttest.Example) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", ex.Path))
	if err != nil {
		t.Fatalf("reading the %s example (run guests/examples/build.sh): %v", ex.Lang, err)
	}
	return b
}

// TestMain holds each example compiled in a Runtime while the tests run,
// so that the process's in-memory compilation cache keeps it and each
// module is compiled once per run (the Go example takes seconds under
// -race).
func TestMain(m *testing.M) {
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, "held", 0, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, ex := range guesttest.Examples {
		if b, err := os.ReadFile(filepath.Join("..", "..", ex.Path)); err == nil {
			_, _, _ = rt.Compile(ctx, b) // a test that needs it reports an error
		}
	}
	code := m.Run()
	rt.Close(ctx)
	os.Exit(code)
}

// hostOptions are generous deadlines: the machine is shared, and a test
// must not fail because a call was slow.
func hostOptions() wasmhost.Options {
	return wasmhost.Options{CallTimeout: time.Minute, InitTimeout: time.Minute, PoolSize: 2}
}

func load(t testing.TB, ex guesttest.Example, config string) *wasmpolicy.Module {
	t.Helper()
	m, err := wasmpolicy.Load(context.Background(), ex.Lang, read(t, ex), json.RawMessage(config), &wasmpolicy.Options{Host: hostOptions()})
	if err != nil {
		t.Fatalf("Load(%s): %v", ex.Lang, err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Errorf("Close(%s): %v", ex.Lang, err)
		}
	})
	return m
}

func TestExports(t *testing.T) {
	t.Parallel()
	for _, ex := range guesttest.Examples {
		t.Run(ex.Lang, func(t *testing.T) {
			t.Parallel()
			m := load(t, ex, "")
			want := []policies.Hook{policies.HookBeforeToolCall, policies.HookSanitizeToolNames, policies.HookDecideApproval}
			if got := m.Hooks(); !reflect.DeepEqual(got, want) {
				t.Errorf("Hooks() = %v, want %v", got, want)
			}
		})
	}
}

func toolCall(tool, args string) *policies.ToolCall {
	c := &policies.ToolCall{Surface: policies.SurfaceServe, SessionKey: "agent:main:main",
		Caller: policies.Caller{Name: "claude-code", Version: "2.1"}, Tool: policies.ToolRef{Name: tool}}
	if args != "" {
		c.Arguments = json.RawMessage(args)
	}
	return c
}

// withIdentity gives c an authenticated caller with claims (JSON).
func withIdentity(c *policies.ToolCall, claims string) *policies.ToolCall {
	c.Surface = policies.SurfaceProxy
	c.Identity = &policies.Identity{Issuer: "https://idp.example.com", Subject: "alice", Scopes: []string{"mcp"}}
	_ = json.Unmarshal([]byte(claims), &c.Identity.Claims)
	return c
}

func TestBeforeToolCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config string
		call   *policies.ToolCall
		want   policies.Verdict
	}{
		{"allow", "", toolCall("conversations_list", `{"limit":5}`), policies.Verdict{Decision: policies.Allow}},
		{"no arguments", "", toolCall("events_poll", ""), policies.Verdict{Decision: policies.Allow}},
		{"prod tool, caller in group oncall", "", withIdentity(toolCall("prod__deploy", `{}`), `{"groups":["dev","oncall"]}`), policies.Verdict{Decision: policies.Allow}},
		{"prod tool, oncall among other values", "", withIdentity(toolCall("prod__deploy", `{}`), `{"groups":[7,{"a":[1]},null,"oncall"]}`), policies.Verdict{Decision: policies.Allow}},
		{"prod tool, groups a string", "", withIdentity(toolCall("prod__deploy", `{}`), `{"groups":"oncall"}`), policies.Verdict{Decision: policies.Allow}},
		{"prod tool, caller not in oncall", "", withIdentity(toolCall("prod__deploy", `{}`), `{"groups":["dev"]}`),
			policies.Verdict{Decision: policies.Block, Reason: "prod tools are for the on-call group"}},
		{"prod tool, clientInfo named oncall is no identity", "", func() *policies.ToolCall {
			c := toolCall("prod__deploy", `{}`)
			c.Caller.Name = "oncall"
			return c
		}(), policies.Verdict{Decision: policies.Block, Reason: "prod tools are for the on-call group"}},
		{"delete blocked", "", toolCall("fs_delete_file", `{"path":"/srv/a"}`),
			policies.Verdict{Decision: policies.Block, Reason: "deleting is not allowed"}},
		{"default protected path", "", toolCall("fs_write_file", `{"path":"/etc/passwd","content":"x"}`),
			policies.Verdict{Decision: policies.Block, Reason: "path /etc/passwd is protected"}},
		{"escaped path", "", toolCall("fs_read_file", `{"path":"\/etc\/shadow"}`),
			policies.Verdict{Decision: policies.Block, Reason: "path /etc/shadow is protected"}},
		{"path elsewhere", "", toolCall("fs_write_file", `{"content":"/etc/x","path":"/srv/a.txt"}`),
			policies.Verdict{Decision: policies.Allow}},
		{"path not a string", "", toolCall("fs_read_file", `{"path":["/etc/passwd"]}`),
			policies.Verdict{Decision: policies.Allow}},
		{"nested path ignored", "", toolCall("fs_read_file", `{"opts":{"path":"/etc/passwd"}}`),
			policies.Verdict{Decision: policies.Allow}},
		{"unicode path", "", toolCall("fs_read_file", `{"path":"/etc/caf\u00e9 ☕"}`),
			policies.Verdict{Decision: policies.Block, Reason: "path /etc/café ☕ is protected"}},
		{"send needs approval", "", toolCall("messages_send", `{"to":"+15551234567","text":"hi"}`),
			policies.Verdict{Decision: policies.RequireApproval, Reason: "sending needs approval", Title: "Send a message?", TimeoutMs: 60000}},
		{"configured prefixes", `{"protected_paths":["/srv/","/root/"]}`, toolCall("fs_read_file", `{"path":"/root/.ssh/id_ed25519"}`),
			policies.Verdict{Decision: policies.Block, Reason: "path /root/.ssh/id_ed25519 is protected"}},
		{"configured prefixes replace the default", `{"protected_paths":["/srv/"]}`, toolCall("fs_read_file", `{"path":"/etc/hosts"}`),
			policies.Verdict{Decision: policies.Allow}},
		{"empty list protects nothing", `{"protected_paths":[]}`, toolCall("fs_read_file", `{"path":"/etc/hosts"}`),
			policies.Verdict{Decision: policies.Allow}},
	}
	for _, ex := range guesttest.Examples {
		t.Run(ex.Lang, func(t *testing.T) {
			t.Parallel()
			mods := map[string]*wasmpolicy.Module{}
			for _, tt := range tests {
				m := mods[tt.config]
				if m == nil {
					m = load(t, ex, tt.config)
					mods[tt.config] = m
				}
				got, err := m.BeforeToolCall(context.Background(), tt.call)
				if err != nil {
					t.Errorf("%s: BeforeToolCall: %v", tt.name, err)
					continue
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("%s: BeforeToolCall(%s %s) =\n %+v, want\n %+v", tt.name, tt.call.Tool.Name, tt.call.Arguments, got, tt.want)
				}
			}
		})
	}
}

func TestSanitizeToolNames(t *testing.T) {
	t.Parallel()
	type srv = policies.SanitizeServer
	type out = policies.SanitizedServer
	name := func(n string) policies.ToolName { return policies.ToolName{Name: n} }
	reject := func(r string) policies.ToolName { return policies.ToolName{Reject: r} }
	long := strings.Repeat("x", 200)
	tests := []struct {
		name     string
		reserved []string
		servers  []srv
		want     []out
	}{
		{"plain", nil, []srv{{Name: "files", Tools: []string{"read_file", "write_file"}}},
			[]out{{Safe: "files", Tools: []policies.ToolName{name("files__read_file"), name("files__write_file")}}}},
		{"hostile characters", nil, []srv{{Name: "a.b/c", Tools: []string{"fetch url", "x-y_z", "café", "go🚀", " padded "}}},
			[]out{{Safe: "a_b_c", Tools: []policies.ToolName{name("a_b_c__fetch_url"), name("a_b_c__x-y_z"), name("a_b_c__caf_"), name("a_b_c__go_"), name("a_b_c__padded")}}}},
		{"empty names", nil, []srv{{Name: "", Tools: []string{"x", "", "   "}}},
			[]out{{Safe: "mcp", Tools: []policies.ToolName{name("mcp__x"), reject("empty tool name"), reject("empty tool name")}}}},
		{"numeric server, no tools", nil, []srv{{Name: "123", Tools: []string{}}, {Name: "4", Tools: []string{"5"}}},
			[]out{{Safe: "123", Tools: []policies.ToolName{}}, {Safe: "4", Tools: []policies.ToolName{name("4__5")}}}},
		{"too long", nil, []srv{{Name: strings.Repeat("s", 40), Tools: []string{long, "ok"}}},
			[]out{{Safe: strings.Repeat("s", 30), Tools: []policies.ToolName{reject("name longer than 64 characters"), name(strings.Repeat("s", 30) + "__ok")}}}},
		{"collisions after sanitizing", nil, []srv{{Name: "web", Tools: []string{"fetch url", "fetch_url", "Fetch.URL"}}, {Name: "web!", Tools: []string{"fetch-url", "fetch url"}}},
			[]out{
				{Safe: "web", Tools: []policies.ToolName{name("web__fetch_url"), reject("name web__fetch_url is taken"), reject("name web__Fetch_URL is taken")}},
				{Safe: "web_", Tools: []policies.ToolName{name("web___fetch-url"), name("web___fetch_url")}},
			}},
		{"reserved", []string{"FILES__READ_FILE"}, []srv{{Name: "files", Tools: []string{"read_file"}}},
			[]out{{Safe: "files", Tools: []policies.ToolName{reject("name files__read_file is taken")}}}},
	}
	for _, ex := range guesttest.Examples {
		t.Run(ex.Lang, func(t *testing.T) {
			t.Parallel()
			m := load(t, ex, "")
			for _, tt := range tests {
				got, err := m.SanitizeToolNames(context.Background(), &policies.SanitizeRequest{Reserved: tt.reserved, Servers: tt.servers})
				if err != nil {
					t.Errorf("%s: %v", tt.name, err)
					continue
				}
				if !reflect.DeepEqual(got.Servers, tt.want) {
					t.Errorf("%s: SanitizeToolNames =\n %+v, want\n %+v", tt.name, got.Servers, tt.want)
				}
			}
		})
	}
}

func TestDecideApproval(t *testing.T) {
	t.Parallel()
	exec := func(cmd string) *policies.ApprovalRequest {
		return &policies.ApprovalRequest{Kind: policies.ApprovalExec, ID: "a1", SessionKey: "agent:main:main",
			Requester: policies.Caller{Name: "agent:main"}, Command: cmd,
			Request: json.RawMessage(`{"command":` + strconv.Quote(cmd) + `,"cwd":"/srv","host":"node","commandAnalysis":null}`)}
	}
	ask2m := policies.ApprovalVerdict{Decision: policies.Ask, Reason: "needs a human", TTLMs: 120000}
	tests := []struct {
		name string
		req  *policies.ApprovalRequest
		want policies.ApprovalVerdict
	}{
		{"read-only", exec("ls -la /srv"), policies.ApprovalVerdict{Decision: policies.AllowOnce, Reason: "read-only command"}},
		{"leading spaces", exec("  cat /srv/a.txt"), policies.ApprovalVerdict{Decision: policies.AllowOnce, Reason: "read-only command"}},
		{"destructive", exec("rm -rf /"), policies.ApprovalVerdict{Decision: policies.Deny, Reason: "command rm is not allowed"}},
		{"sudo", exec("sudo ls"), policies.ApprovalVerdict{Decision: policies.Deny, Reason: "command sudo is not allowed"}},
		{"prefix is not the command", exec("lsblk"), ask2m},
		{"other command", exec("make deploy"), ask2m},
		{"no command", exec(""), policies.ApprovalVerdict{Decision: policies.Deny, Reason: "exec request without a command"}},
		{"plugin", &policies.ApprovalRequest{Kind: policies.ApprovalPlugin, ID: "plugin:1", Tool: policies.ToolRef{Name: "deploy"},
			Request: json.RawMessage(`{"pluginId":"p","title":"Deploy?","description":"prod"}`)}, ask2m},
		{"tool", &policies.ApprovalRequest{Kind: policies.ApprovalTool, Surface: policies.SurfaceServe, SessionKey: "s",
			Requester: policies.Caller{Name: "claude-code"}, Tool: policies.ToolRef{Name: "messages_send"},
			Request: json.RawMessage(`{"reason":"sending needs approval","module":"x"}`)},
			policies.ApprovalVerdict{Decision: policies.Ask, Reason: "needs a human"}},
	}
	for _, ex := range guesttest.Examples {
		t.Run(ex.Lang, func(t *testing.T) {
			t.Parallel()
			m := load(t, ex, "")
			for _, tt := range tests {
				got, err := m.DecideApproval(context.Background(), tt.req)
				if err != nil {
					t.Errorf("%s: %v", tt.name, err)
					continue
				}
				if got != tt.want {
					t.Errorf("%s: DecideApproval = %+v, want %+v", tt.name, got, tt.want)
				}
			}
		})
	}
}

// TestBadInput checks that a guest refuses what it cannot read with a
// message through last_error, and that the host fails closed on it.
func TestBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		hook  policies.Hook
		input string
	}{
		{policies.HookBeforeToolCall, `not json`},
		{policies.HookBeforeToolCall, `{"tool":{"name":1}}`},
		{policies.HookSanitizeToolNames, `{"servers":[{"name":"a","tools":["b"]}`},
		{policies.HookDecideApproval, `[]`},
	}
	for _, ex := range guesttest.Examples {
		t.Run(ex.Lang, func(t *testing.T) {
			t.Parallel()
			var logs e2e.LockedBuffer
			o := hostOptions()
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			m, err := wasmpolicy.Load(context.Background(), ex.Lang, read(t, ex), nil, &wasmpolicy.Options{Host: o})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			for _, tt := range tests {
				_, err := m.CallHook(context.Background(), tt.hook, []byte(tt.input))
				if !strings.Contains(fmt.Sprint(err), `wasm module "`+ex.Lang+`": `+string(tt.hook)+": ") {
					t.Errorf("%s(%s): err = %v, want an error naming the module and hook", tt.hook, tt.input, err)
				}
				if ex.Traps {
					if !errors.Is(err, wasmhost.ErrTrap) {
						t.Errorf("%s(%s): err = %v, want a trap", tt.hook, tt.input, err)
					}
					continue
				}
				if !errors.Is(err, wasmhost.ErrABI) || !strings.Contains(err.Error(), "returned 0: invalid JSON at byte ") {
					t.Errorf("%s(%s): err = %v, want a bad-result error with the guest's message", tt.hook, tt.input, err)
				}
			}
			if ex.Traps && !strings.Contains(logs.String(), "level=ERROR") {
				t.Errorf("the guest logged no error about its aborts; log:\n%s", logs.String())
			}
			// The module keeps serving after a refusal.
			if v, err := m.BeforeToolCall(context.Background(), toolCall("x", "")); err != nil || v.Decision != policies.Allow {
				t.Errorf("after bad input: %+v, %v", v, err)
			}
		})
	}
}

func TestConfigRefused(t *testing.T) {
	t.Parallel()
	tests := []struct{ config, want string }{
		{`{"protected_path":["/etc/"]}`, `configuration refused: unknown key "protected_path"`},
		{`{"protected_paths":"/etc/"}`, `configuration refused: protected_paths: want an array of strings`},
		{`[1]`, ``}, // Go and Rust refuse with their reader's message; AssemblyScript traps
	}
	for _, ex := range guesttest.Examples {
		t.Run(ex.Lang, func(t *testing.T) {
			t.Parallel()
			for _, tt := range tests {
				m, err := wasmpolicy.Load(context.Background(), ex.Lang, read(t, ex), json.RawMessage(tt.config), &wasmpolicy.Options{Host: hostOptions()})
				if err == nil {
					m.Close(context.Background())
					t.Errorf("Load(%s) succeeded, want a refusal", tt.config)
					continue
				}
				loadErr := errors.Is(err, wasmhost.ErrLoad) || (ex.Traps && tt.want == "" && errors.Is(err, wasmhost.ErrTrap))
				if !loadErr || !strings.Contains(err.Error(), `wasm module "`+ex.Lang+`": configure: `+tt.want) {
					t.Errorf("Load(%s): %v, want a load error with %q", tt.config, err, tt.want)
				}
			}
		})
	}
}
