package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

func loadRules(t testing.TB, config string) (*wasmpolicy.Module, error) {
	t.Helper()
	m, err := wasmpolicy.Load(context.Background(), "rules", builtin.Rules(), json.RawMessage(config),
		&wasmpolicy.Options{Host: wasmhost.Options{PoolSize: 1, CallTimeout: time.Minute, InitTimeout: time.Minute}})
	if err == nil {
		t.Cleanup(func() { _ = m.Close(context.Background()) })
	}
	return m, err
}

const sampleConfig = `{
  "default": "allow",
  "rules": [
    {"id": "no-send", "tool": "messages_send", "decision": "block", "reason": "sending is disabled"},
    {"tool": "fs_*", "server": "files", "args": {"path": {"path_prefix": "/etc"}},
     "decision": "require_approval", "title": "Touch /etc?", "description": "a \"quoted\"\nline", "timeout_ms": 60000},
    {"tool": "fs_write?", "args": {"path": {"suffix": ".sh"}, "mode": {"exists": true}}, "decision": "block"},
    {"tool": "exec", "args": {"cmd": {"glob": "rm -r*"}}, "decision": "block", "reason": "no recursive rm"},
    {"tool": "exec", "args": {"cmd": {"prefix": "sudo ", "contains": "passwd"}}, "decision": "block", "reason": "no passwd"},
    {"tool": "exec", "args": {"cmd": "ls"}, "decision": "allow", "reason": "ls is fine"},
    {"surface": "proxy", "tool": "admin_*", "decision": "block", "reason": "no admin via proxy"},
    {"tool": "net_fetch", "args": {"url": {"exists": false}}, "decision": "block", "reason": "url required"},
    {"tool": "héllo_?", "decision": "block", "reason": "unicode glob"}
  ]
}`

func TestRulesDecisions(t *testing.T) {
	t.Parallel()
	m, err := loadRules(t, sampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	approve := policies.Verdict{Decision: policies.RequireApproval, Reason: "rules[1] matched", Title: "Touch /etc?",
		Description: "a \"quoted\"\nline", TimeoutMs: 60000}
	tests := []struct {
		name    string
		surface policies.Surface
		tool    policies.ToolRef
		args    string
		want    policies.Verdict
	}{
		{"unmatched tool allows", "", policies.ToolRef{Name: "conversations_list"}, `{}`, policies.Verdict{Decision: policies.Allow}},
		{"exact tool blocks", "", policies.ToolRef{Name: "messages_send"}, `{"text":"hi"}`,
			policies.Verdict{Decision: policies.Block, Reason: "sending is disabled"}},
		{"glob, server and path_prefix", "", policies.ToolRef{Name: "fs_read", Server: "files"}, `{"path":"/etc/passwd"}`, approve},
		{"path_prefix sees through ..", "", policies.ToolRef{Name: "fs_read", Server: "files"}, `{"path":"/srv/../etc/shadow"}`, approve},
		{"path_prefix sees through //", "", policies.ToolRef{Name: "fs_read", Server: "files"}, `{"path":"//etc//hosts"}`, approve},
		{"path_prefix is the directory itself", "", policies.ToolRef{Name: "fs_list", Server: "files"}, `{"path":"/etc"}`, approve},
		{"path_prefix is not a string prefix", "", policies.ToolRef{Name: "fs_read", Server: "files"}, `{"path":"/etcetera"}`, policies.Verdict{Decision: policies.Allow}},
		{"escaped path argument", "", policies.ToolRef{Name: "fs_read", Server: "files"}, `{"path":"\/etc\u002fpasswd"}`, approve},
		{"other server", "", policies.ToolRef{Name: "fs_read", Server: "other"}, `{"path":"/etc/passwd"}`, policies.Verdict{Decision: policies.Allow}},
		{"no server", "", policies.ToolRef{Name: "fs_read"}, `{"path":"/etc/passwd"}`, policies.Verdict{Decision: policies.Allow}},
		{"non-string argument does not match", "", policies.ToolRef{Name: "fs_read", Server: "files"}, `{"path":["/etc/passwd"]}`, policies.Verdict{Decision: policies.Allow}},
		{"? is one character; suffix and exists", "", policies.ToolRef{Name: "fs_writeX"}, `{"path":"a.sh","mode":0}`,
			policies.Verdict{Decision: policies.Block, Reason: "rules[2] matched"}},
		{"exists fails", "", policies.ToolRef{Name: "fs_writeX"}, `{"path":"a.sh"}`, policies.Verdict{Decision: policies.Allow}},
		{"? needs a character", "", policies.ToolRef{Name: "fs_write"}, `{"path":"a.sh","mode":0}`, policies.Verdict{Decision: policies.Allow}},
		{"glob argument", "", policies.ToolRef{Name: "exec"}, `{"cmd":"rm -rf /"}`, policies.Verdict{Decision: policies.Block, Reason: "no recursive rm"}},
		{"all matchers of an argument hold", "", policies.ToolRef{Name: "exec"}, `{"cmd":"sudo cat /etc/passwd"}`, policies.Verdict{Decision: policies.Block, Reason: "no passwd"}},
		{"one matcher fails", "", policies.ToolRef{Name: "exec"}, `{"cmd":"cat /etc/passwd"}`, policies.Verdict{Decision: policies.Allow}},
		{"string shorthand is equals", "", policies.ToolRef{Name: "exec"}, `{"cmd":"ls"}`, policies.Verdict{Decision: policies.Allow, Reason: "ls is fine"}},
		{"surface glob", policies.SurfaceProxy, policies.ToolRef{Name: "admin_reset"}, `{}`, policies.Verdict{Decision: policies.Block, Reason: "no admin via proxy"}},
		{"other surface", policies.SurfaceServe, policies.ToolRef{Name: "admin_reset"}, `{}`, policies.Verdict{Decision: policies.Allow}},
		{"exists false", "", policies.ToolRef{Name: "net_fetch"}, `{}`, policies.Verdict{Decision: policies.Block, Reason: "url required"}},
		{"no arguments at all", "", policies.ToolRef{Name: "net_fetch"}, ``, policies.Verdict{Decision: policies.Block, Reason: "url required"}},
		{"unicode ?", "", policies.ToolRef{Name: "héllo_é"}, `{}`, policies.Verdict{Decision: policies.Block, Reason: "unicode glob"}},
		{"surrogate pair is one character", "", policies.ToolRef{Name: "fs_read", Server: "files"}, `{"path":"/etc/\ud83d\ude00"}`, approve},
		{"lone surrogate reads as U+FFFD", "", policies.ToolRef{Name: "exec"}, `{"cmd":"rm -r\ud800"}`, policies.Verdict{Decision: policies.Block, Reason: "no recursive rm"}},
		{"duplicate inspected argument blocks", "", policies.ToolRef{Name: "fs_read", Server: "files"}, `{"path":"/srv/a","path":"/etc/passwd"}`,
			policies.Verdict{Decision: policies.Block, Reason: `argument "path" appears more than once`}},
		{"duplicate uninspected argument is fine", "", policies.ToolRef{Name: "conversations_list"}, `{"a":1,"a":2}`, policies.Verdict{Decision: policies.Allow}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			call := &policies.ToolCall{Surface: tt.surface, Tool: tt.tool}
			if tt.surface == "" {
				call.Surface = policies.SurfaceServe
			}
			if tt.args != "" {
				call.Arguments = json.RawMessage(tt.args)
			}
			got, err := m.BeforeToolCall(context.Background(), call)
			if err != nil {
				t.Fatalf("BeforeToolCall: %v", err)
			}
			if got.Decision != tt.want.Decision || got.Reason != tt.want.Reason || got.Title != tt.want.Title ||
				got.Description != tt.want.Description || got.TimeoutMs != tt.want.TimeoutMs || got.Arguments != nil {
				t.Fatalf("verdict %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestRulesDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		config string
		want   policies.Verdict
	}{
		{"", policies.Verdict{Decision: policies.Allow}},
		{builtin.DefaultRulesConfig, policies.Verdict{Decision: policies.Allow}},
		{`{}`, policies.Verdict{Decision: policies.Allow}},
		{`{"default":"block"}`, policies.Verdict{Decision: policies.Block, Reason: "no rule matched"}},
		{`{"default":"require_approval","default_reason":"ask first"}`, policies.Verdict{Decision: policies.RequireApproval, Reason: "ask first"}},
		{`{"rules":[{"decision":"block","id":"everything"}]}`, policies.Verdict{Decision: policies.Block, Reason: `rule "everything"`}},
	}
	for _, tt := range tests {
		t.Run(tt.config, func(t *testing.T) {
			t.Parallel()
			m, err := loadRules(t, tt.config)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.BeforeToolCall(context.Background(), &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "anything"}})
			if err != nil || got.Decision != tt.want.Decision || got.Reason != tt.want.Reason {
				t.Fatalf("verdict %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestRulesConfigErrors(t *testing.T) {
	t.Parallel()
	const prefix = `wasm module "rules": configure: configuration refused: `
	tests := []struct{ config, message string }{
		{`{"default":"allow","rulez":[]}`, `config: unknown key "rulez" (want default, default_reason, rules)`},
		{`{"default":"deny"}`, `default: unknown decision "deny" (want allow, block or require_approval)`},
		{`{"rules":[{"tool":"a","desicion":"block"}]}`, `rules[0]: unknown key "desicion" (want id, tool, server, surface, caller, args, decision, reason, title, description, timeout_ms)`},
		{`{"rules":[{"tool":"a"}]}`, `rules[0]: missing "decision"`},
		{`{"rules":[{"tool":"a","decision":"block"},{"tool":"b","decision":"ask"}]}`, `rules[1].decision: unknown decision "ask" (want allow, block or require_approval)`},
		{`{"rules":[{"decision":"block","args":{"path":{"startswith":"/"}}}]}`, `rules[0].args.path: unknown matcher "startswith" (want equals, prefix, suffix, contains, glob, path_prefix, exists)`},
		{`{"rules":[{"decision":"block","args":{"path":{}}}]}`, `rules[0].args.path: empty matcher`},
		{`{"rules":[{"decision":"block","args":{"path":{"path_prefix":"etc"}}}]}`, `rules[0].args.path.path_prefix: want an absolute path, got "etc"`},
		{`{"rules":[{"decision":"block","args":{"path":{"exists":"yes"}}}]}`, `rules[0].args.path.exists: want a boolean, got a string`},
		{`{"rules":[{"decision":"block","args":{"n":3}}]}`, `rules[0].args.n: want a string or a matcher object, got a number`},
		{`{"rules":[{"decision":"block","title":"T"}]}`, `rules[0].title: only a require_approval rule takes "title"`},
		{`{"rules":[{"decision":"require_approval","timeout_ms":-5}]}`, `rules[0].timeout_ms: want a non-negative integer, got a number`},
		{`{"rules":[{"decision":"block","tool":7}]}`, `rules[0].tool: want a string, got a number`},
		{`{"rules":{}}`, `rules: want an array, got an object`},
		{`{"rules":[1]}`, `rules[0]: want an object, got a number`},
		{`[]`, `config: want an object, got an array`},
		{`{"default":"allow","default":"block"}`, `config: duplicate key "default"`},
		{`{"default":"allow"`, `config: expected ',' or '}' at byte 18`},
		{`{"default":"allow"} x`, `config: unexpected data after the JSON value at byte 20`},
		{`{"default":"\x"}`, `config: invalid escape at byte 14`},
		{`{"default":"\u12"}`, `config: invalid \u escape at byte 16`},
	}
	for _, tt := range tests {
		t.Run(tt.config, func(t *testing.T) {
			t.Parallel()
			_, err := loadRules(t, tt.config)
			if !errors.Is(err, wasmhost.ErrLoad) || err.Error() != prefix+tt.message {
				t.Fatalf("Load error\n got %v\nwant %q", err, prefix+tt.message)
			}
		})
	}
}

// TestRulesInvalidInput: input the guest cannot read fails closed, with
// the guest's message.
func TestRulesInvalidInput(t *testing.T) {
	t.Parallel()
	m, err := loadRules(t, "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, message string }{
		{`{"abi":1,"tool":{"name":"x"}`, `rules: invalid input: expected ',' or '}' at byte 28`},
		{`{"abi":2,"tool":{"name":"x"}}`, `rules: invalid input: abi 2 is not 1`},
		{`{"abi":1}`, `rules: invalid input: no "tool" member`},
		{"{\"abi\":1,\"tool\":{\"name\":\"\xff\"}}", `rules: invalid input: not UTF-8 at byte 25`},
		{`{"abi":1,"tool":{"name":"x"},"arguments":{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}`,
			`rules: invalid input: nesting too deep at byte 109`},
	}
	for _, tt := range tests {
		_, err := m.CallHook(context.Background(), policies.HookBeforeToolCall, []byte(tt.in))
		want := `wasm module "rules": before_tool_call: returned 0: ` + tt.message
		if !errors.Is(err, wasmhost.ErrABI) || err.Error() != want {
			t.Errorf("input %s\n got %v\nwant %q", tt.in, err, want)
		}
	}
}

// TestRulesStringLengths checks the guests' shared JSON reader
// (guests/sdk/rust/json.rs) where it changes gear: it scans strings 16
// bytes at a time, then 64, and reads the last partial block of the input
// from a copy. Arguments of every length from 0 to 200 (so every end
// alignment, the argument being the input's last string), plain or with
// escapes and multi-byte characters, must decide as their text says.
func TestRulesStringLengths(t *testing.T) {
	t.Parallel()
	m, err := loadRules(t, `{"rules":[{"tool":"exec","args":{"cmd":{"suffix":"zé"}},"decision":"block","reason":"ends in zé"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n <= 200; n++ {
		pad := strings.Repeat("a", n)
		tests := []struct {
			name, cmd string // cmd as written in the JSON input
			block     bool
		}{
			{"plain", pad + "zé", true},
			{"plain, other end", pad + "zz", false},
			{"escaped end", pad + `\u007a\u00e9`, true},
			{"escape first", `\"` + pad + "zé", true},
			{"escaped quote last", pad + `zé\"`, false},
			{"multi-byte run", strings.Repeat("é", n/2) + "zé", true},
		}
		for _, tt := range tests {
			in := `{"abi":1,"tool":{"name":"exec"},"arguments":{"cmd":"` + tt.cmd + `"}}`
			out, err := m.CallHook(context.Background(), policies.HookBeforeToolCall, []byte(in))
			if err != nil {
				t.Fatalf("%s, %d bytes before the end: %v", tt.name, n, err)
			}
			v, err := wasmpolicy.DecodeVerdict(out)
			if err != nil {
				t.Fatalf("%s, %d: output %q: %v", tt.name, n, out, err)
			}
			if got := v.Decision == policies.Block; got != tt.block {
				t.Errorf("%s, n=%d: %s -> %s, want block=%v", tt.name, n, in, v.Decision, tt.block)
			}
		}
	}
	// A string that runs to the very end of the input is unterminated.
	for n := 0; n <= 130; n++ {
		in := `{"abi":1,"tool":{"name":"exec"},"arguments":{"cmd":"` + strings.Repeat("a", n)
		_, err := m.CallHook(context.Background(), policies.HookBeforeToolCall, []byte(in))
		if want := fmt.Sprintf("unterminated string at byte %d", len(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("n=%d: err = %v, want %q", n, err, want)
		}
	}
}

// FuzzRulesInput feeds arbitrary arguments to the rules module: it must
// answer with a valid verdict or refuse the input with a message, and
// never trap.
func FuzzRulesInput(f *testing.F) {
	m, err := loadRules(f, sampleConfig)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{"path":"/etc/x"}`, `{"cmd":"rm -rf"}`, `{"a":"\u00e9\ud83d\ude00"}`, `[`, `{"a":1e5,"b":[true,null]}`} {
		f.Add("fs_read", s)
	}
	f.Fuzz(func(t *testing.T, tool, args string) {
		in, _ := json.Marshal(map[string]any{"abi": 1, "tool": map[string]string{"name": tool, "server": "files"}})
		in = append(in[:len(in)-1], []byte(`,"arguments":`+args+`}`)...)
		out, err := m.CallHook(context.Background(), policies.HookBeforeToolCall, in)
		// The guest reads RFC 8259 JSON, which is UTF-8 (encoding/json is
		// lenient there); anything else it must refuse.
		valid := json.Valid(in) && utf8.Valid(in)
		if err != nil {
			if !errors.Is(err, wasmhost.ErrABI) || valid {
				t.Fatalf("input %q: %v", in, err)
			}
			return
		}
		if !valid {
			t.Fatalf("invalid input %q accepted: %s", in, out)
		}
		if _, err := wasmpolicy.DecodeVerdict(out); err != nil {
			t.Fatalf("input %q: output %q: %v", in, out, err)
		}
	})
}

func TestLookup(t *testing.T) {
	t.Parallel()
	for _, ref := range []string{"builtin:rules", "rules"} {
		m, ok := builtin.Lookup(ref)
		if !ok || m.Name != "rules" || len(m.Wasm) == 0 || len(m.SHA256) != 64 || string(m.DefaultConfig) != builtin.DefaultRulesConfig {
			t.Fatalf("Lookup(%q) = %+v, %v", ref, m, ok)
		}
	}
	if _, ok := builtin.Lookup("builtin:nope"); ok {
		t.Fatal("Lookup(builtin:nope) found a module")
	}
	if !builtin.IsRef("builtin:x") || builtin.IsRef("/tmp/x.wasm") {
		t.Fatal("IsRef")
	}
	// Rules returns a copy: changing it does not change the embedded module.
	b := builtin.Rules()
	b[0] = 'X'
	if builtin.Rules()[0] != 0 {
		t.Fatal("Rules() shares its bytes")
	}
}

// TestRulesCaller: a "caller" condition matches the authenticated identity
// (the input's "identity"), never the self-declared clientInfo: a group
// rule allows alice (group oncall) and blocks bob on the same tool.
func TestRulesCaller(t *testing.T) {
	t.Parallel()
	m, err := loadRules(t, `{"default":"allow","rules":[
	  {"id":"oncall-deploys","tool":"prod__deploy","caller":{"groups":["oncall"]},"decision":"allow"},
	  {"id":"deploy-oncall-only","tool":"prod__deploy","decision":"block","reason":"prod__deploy is for the on-call group"},
	  {"tool":"admin_*","caller":{"subject":["root","svc-*"],"issuer":"https://idp.example*","scopes":"admin"},"decision":"allow"},
	  {"tool":"admin_*","decision":"block","reason":"admins only"},
	  {"tool":"anon_*","caller":{"authenticated":false},"decision":"block","reason":"log in first"},
	  {"tool":"ci_*","caller":{"client_id":"ci-*","authenticated":true},"decision":"require_approval","title":"CI?"}
	]}`)
	if err != nil {
		t.Fatal(err)
	}
	id := func(sub string, claims string, scopes ...string) *policies.Identity {
		i := &policies.Identity{Issuer: "https://idp.example.com", Subject: sub, ClientID: "cli", Scopes: scopes}
		if claims != "" {
			_ = json.Unmarshal([]byte(claims), &i.Claims)
		}
		return i
	}
	tests := []struct {
		name   string
		tool   string
		caller policies.Caller
		id     *policies.Identity
		want   policies.Decision
		reason string
	}{
		{"alice in oncall", "prod__deploy", policies.Caller{}, id("alice", `{"groups":["dev","oncall"]}`), policies.Allow, `rule "oncall-deploys"`},
		{"bob not in oncall", "prod__deploy", policies.Caller{}, id("bob", `{"groups":["dev"]}`), policies.Block, "prod__deploy is for the on-call group"},
		{"a group given as one string", "prod__deploy", policies.Caller{}, id("carol", `{"groups":"oncall"}`), policies.Allow, `rule "oncall-deploys"`},
		{"a group claim of another type", "prod__deploy", policies.Caller{}, id("dave", `{"groups":{"oncall":true}}`), policies.Block, "prod__deploy is for the on-call group"},
		{"clientInfo named oncall is no identity", "prod__deploy", policies.Caller{Name: "oncall"}, nil, policies.Block, "prod__deploy is for the on-call group"},
		{"subject glob, issuer glob and scope", "admin_reset", policies.Caller{}, id("svc-backup", "", "read", "admin"), policies.Allow, "rules[2] matched"},
		{"scope missing", "admin_reset", policies.Caller{}, id("root", ""), policies.Block, "admins only"},
		{"subject not listed", "admin_reset", policies.Caller{}, id("alice", "", "admin"), policies.Block, "admins only"},
		{"unauthenticated", "anon_x", policies.Caller{}, nil, policies.Block, "log in first"},
		{"authenticated is not anonymous", "anon_x", policies.Caller{}, id("alice", ""), policies.Allow, ""},
		{"client id glob", "ci_run", policies.Caller{}, &policies.Identity{Subject: "job", ClientID: "ci-42"}, policies.RequireApproval, "rules[5] matched"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := m.BeforeToolCall(context.Background(), &policies.ToolCall{Surface: policies.SurfaceProxy, Caller: tt.caller, Identity: tt.id, Tool: policies.ToolRef{Name: tt.tool}})
			if err != nil {
				t.Fatal(err)
			}
			if got.Decision != tt.want || got.Reason != tt.reason {
				t.Fatalf("verdict %+v, want %s %q", got, tt.want, tt.reason)
			}
		})
	}
	for _, tc := range []struct{ config, message string }{
		{`{"rules":[{"decision":"block","caller":{}}]}`, `rules[0].caller: empty caller condition`},
		{`{"rules":[{"decision":"block","caller":"alice"}]}`, `rules[0].caller: want an object, got a string`},
		{`{"rules":[{"decision":"block","caller":{"groups":[]}}]}`, `rules[0].caller.groups: want a glob or a non-empty array of globs, got an array`},
		{`{"rules":[{"decision":"block","caller":{"groups":[1]}}]}`, `rules[0].caller.groups[0]: want a string, got a number`},
		{`{"rules":[{"decision":"block","caller":{"authenticated":"yes"}}]}`, `rules[0].caller.authenticated: want a boolean, got a string`},
		{`{"rules":[{"decision":"block","caller":{"authenticated":false,"subject":"x"}}]}`, `rules[0].caller: "authenticated": false matches calls without an identity, which have no other field`},
	} {
		if _, err := loadRules(t, tc.config); err == nil || !strings.HasSuffix(err.Error(), tc.message) {
			t.Errorf("%s: %v, want %q", tc.config, err, tc.message)
		}
	}
}
