package guesttest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

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

// cacheDir is the compilation cache the tests share, so that each module
// is compiled once per run (the Go example takes seconds under -race).
var cacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "guesttest-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cacheDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// hostOptions are generous deadlines: the machine is shared, and a test
// must not fail because a call was slow.
func hostOptions() wasmhost.Options {
	return wasmhost.Options{CacheDir: cacheDir, CallTimeout: time.Minute, InitTimeout: time.Minute, PoolSize: 2}
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

// lockedBuffer collects log output written from the pool's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func toolCall(tool, args string) *policies.ToolCall {
	c := &policies.ToolCall{Surface: policies.SurfaceServe, SessionKey: "agent:main:main",
		Caller: policies.Caller{Name: "claude-code", Version: "2.1"}, Tool: policies.ToolRef{Name: tool}}
	if args != "" {
		c.Arguments = json.RawMessage(args)
	}
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

// callJSON runs hook h with input and decodes the output into a generic
// JSON value.
func callJSON(t *testing.T, m *wasmpolicy.Module, h policies.Hook, input string) (any, error) {
	t.Helper()
	out, err := m.CallHook(context.Background(), h, []byte(input))
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s(%s): output %q is not JSON: %v", h, input, out, err)
	}
	return v, nil
}

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

func TestSanitizeToolNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 200)
	tests := []struct {
		name, in, want string
	}{
		{"plain", `{"abi":1,"max_len":64,"tools":[{"server":"files","name":"read_file"}]}`,
			`{"tools":[{"name":"files__read_file"}]}`},
		{"hostile characters", `{"abi":1,"max_len":64,"tools":[{"server":"web","name":"fetch url"},{"server":"a.b/c","name":"x-y_z"},{"server":"fr","name":"café"},{"server":"emoji","name":"go🚀"}]}`,
			`{"tools":[{"name":"web__fetch_url"},{"name":"a_b_c__x-y_z"},{"name":"fr__caf_"},{"name":"emoji__go_"}]}`},
		{"empty names", `{"abi":1,"max_len":64,"tools":[{"server":"","name":"x"},{"server":"s","name":""}]}`,
			`{"tools":[{"reject":"empty server or tool name"},{"reject":"empty server or tool name"}]}`},
		{"too long", `{"abi":1,"max_len":64,"tools":[{"server":"s","name":"` + long + `"},{"server":"s","name":"ok"}]}`,
			`{"tools":[{"reject":"name longer than 64"},{"name":"s__ok"}]}`},
		{"max_len honoured", `{"abi":1,"max_len":8,"tools":[{"server":"abc","name":"def"},{"server":"abc","name":"defg"}]}`,
			`{"tools":[{"name":"abc__def"},{"reject":"name longer than 8"}]}`},
		{"unknown fields ignored", `{"abi":1,"future":{"a":[1,2]},"max_len":64,"tools":[{"server":"1","name":"2","extra":true}]}`,
			`{"tools":[{"name":"1__2"}]}`},
		{"empty catalog", `{"abi":1,"max_len":64,"tools":[]}`, `{"tools":[]}`},
	}
	for _, ex := range guesttest.Examples {
		t.Run(ex.Lang, func(t *testing.T) {
			t.Parallel()
			m := load(t, ex, "")
			for _, tt := range tests {
				got, err := callJSON(t, m, policies.HookSanitizeToolNames, tt.in)
				if err != nil {
					t.Errorf("%s: %v", tt.name, err)
					continue
				}
				if want := mustJSON(t, tt.want); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: sanitize_tool_names = %v, want %v", tt.name, got, want)
				}
			}
		})
	}
}

func TestDecideApproval(t *testing.T) {
	t.Parallel()
	exec := func(cmd string) string {
		return `{"abi":1,"kind":"exec","session_key":"agent:main:main","requester":{"name":"claude-code"},"request":{"command":` +
			cmd + `,"cwd":"/srv","host":"node","commandAnalysis":null}}`
	}
	tests := []struct {
		name, in, want string
	}{
		{"read-only", exec(`"ls -la /srv"`), `{"decision":"allow-once","reason":"read-only command"}`},
		{"leading spaces", exec(`"  cat /srv/a.txt"`), `{"decision":"allow-once","reason":"read-only command"}`},
		{"destructive", exec(`"rm -rf /"`), `{"decision":"deny","reason":"command rm is not allowed"}`},
		{"sudo", exec(`"sudo ls"`), `{"decision":"deny","reason":"command sudo is not allowed"}`},
		{"prefix is not the command", exec(`"lsblk"`), `{"decision":"ask","reason":"needs a human","ttl_ms":120000}`},
		{"other command", exec(`"make deploy"`), `{"decision":"ask","reason":"needs a human","ttl_ms":120000}`},
		{"no command", exec(`null`), `{"decision":"deny","reason":"exec request without a command"}`},
		{"plugin", `{"abi":1,"kind":"plugin","request":{"pluginId":"plugin:1","title":"Deploy?","description":"prod"}}`,
			`{"decision":"ask","reason":"needs a human","ttl_ms":120000}`},
		{"other kind", `{"abi":1,"kind":"tool","session_key":"s","request":{}}`, `{"decision":"ask","reason":"needs a human"}`},
	}
	for _, ex := range guesttest.Examples {
		t.Run(ex.Lang, func(t *testing.T) {
			t.Parallel()
			m := load(t, ex, "")
			for _, tt := range tests {
				got, err := callJSON(t, m, policies.HookDecideApproval, tt.in)
				if err != nil {
					t.Errorf("%s: %v", tt.name, err)
					continue
				}
				if want := mustJSON(t, tt.want); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: decide_approval = %v, want %v", tt.name, got, want)
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
		{policies.HookSanitizeToolNames, `{"tools":[{"server":"a","name":"b"}`},
		{policies.HookDecideApproval, `[]`},
	}
	for _, ex := range guesttest.Examples {
		t.Run(ex.Lang, func(t *testing.T) {
			t.Parallel()
			var logs lockedBuffer
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
