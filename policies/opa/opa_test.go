package opa_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/opa"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// The committed modules under test, built from their .rego sources by
// guests/rego/build.sh.
const (
	examplePath       = "../../guests/rego/policy.wasm"
	hostilePath       = "testdata/hostile.wasm"
	decisionPath      = "testdata/decision.wasm"
	needsBuiltinsPath = "testdata/needs_builtins.wasm"
)

// TestMain holds the test modules compiled in a Runtime while the tests
// run, so that the process's in-memory compilation cache keeps them and
// each is compiled once per run (the example takes about half a second).
func TestMain(m *testing.M) {
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, "held", 0, true)
	if err != nil {
		panic(err)
	}
	paths, _ := filepath.Glob("testdata/*.wasm")
	for _, p := range append(paths, examplePath) {
		if b, err := os.ReadFile(p); err == nil {
			_, _, _ = rt.Compile(ctx, b)
		}
	}
	code := m.Run()
	rt.Close(ctx)
	os.Exit(code)
}

func readWasm(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// load loads a module and closes it when the test ends. Unless the test sets them, the deadlines are 10 s: the
// tests share two cores with everyone's builds (and run under -race), and
// only the tests about deadlines may depend on one.
func load(t testing.TB, path string, config string, opts *opa.Options) *opa.Module {
	t.Helper()
	var o opa.Options
	if opts != nil {
		o = *opts
	}
	relaxDeadlines(&o.Host)
	var cfg json.RawMessage
	if config != "" {
		cfg = json.RawMessage(config)
	}
	m, err := opa.Load(context.Background(), "rego", readWasm(t, path), cfg, &o)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

func relaxDeadlines(h *wasmhost.Options) {
	if h.CallTimeout == 0 {
		h.CallTimeout = 10 * time.Second
	}
	if h.InitTimeout == 0 {
		h.InitTimeout = 10 * time.Second
	}
}

func call(name string, args string) *policies.ToolCall {
	c := &policies.ToolCall{Surface: policies.SurfaceServe, SessionKey: "agent:main:main",
		Caller: policies.Caller{Name: "claude-code", Version: "2.1"}, Tool: policies.ToolRef{Name: name}}
	if args != "" {
		c.Arguments = json.RawMessage(args)
	}
	return c
}

func TestExampleBeforeToolCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		config string
		call   *policies.ToolCall
		want   policies.Verdict
	}{
		{"allow", "", call("conversations_list", `{"limit":5}`),
			policies.Verdict{Decision: policies.Allow}},
		{"allow without arguments", "", call("events_poll", ""),
			policies.Verdict{Decision: policies.Allow}},
		{"block a protected path", "", call("fs_read_file", `{"path":"/etc/shadow"}`),
			policies.Verdict{Decision: policies.Block, Reason: "argument path names a protected path"}},
		{"block a path escape", "", call("fs_write_file", `{"content":"x","target":"a/../../b"}`),
			policies.Verdict{Decision: policies.Block, Reason: "argument target names a protected path"}},
		{"block by config", `{"blocked_tools":["exec"]}`, call("exec", `{"cmd":"ls"}`),
			policies.Verdict{Decision: policies.Block, Reason: "tool exec is blocked by configuration"}},
		{"two block reasons, sorted", `{"blocked_tools":["fs_read_file"]}`, call("fs_read_file", `{"path":"/home/u/.ssh/id_ed25519"}`),
			policies.Verdict{Decision: policies.Block, Reason: "argument path names a protected path; tool fs_read_file is blocked by configuration"}},
		{"require_approval by default", "", call("messages_send", `{"text":"hi"}`),
			policies.Verdict{Decision: policies.RequireApproval, Reason: "this tool acts outside the agent",
				Title: "Allow messages_send?", Description: "The agent asks to call messages_send.", TimeoutMs: 120000}},
		{"block wins over approval", "", call("messages_send", `{"attachment":"/etc/passwd"}`),
			policies.Verdict{Decision: policies.Block, Reason: "argument attachment names a protected path"}},
		{"approval list from config", `{"approval_tools":["fs_write_file"]}`, call("fs_write_file", `{"path":"notes.txt"}`),
			policies.Verdict{Decision: policies.RequireApproval, Reason: "this tool acts outside the agent",
				Title: "Allow fs_write_file?", Description: "The agent asks to call fs_write_file.", TimeoutMs: 120000}},
		{"config replaces the default approval list", `{"approval_tools":["fs_write_file"]}`, call("messages_send", `{"text":"hi"}`),
			policies.Verdict{Decision: policies.Allow}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := load(t, examplePath, tc.config, nil)
			got, err := m.BeforeToolCall(context.Background(), tc.call)
			if err != nil {
				t.Fatalf("BeforeToolCall: %v", err)
			}
			if got.Decision != tc.want.Decision || got.Reason != tc.want.Reason || got.Title != tc.want.Title ||
				got.Description != tc.want.Description || got.TimeoutMs != tc.want.TimeoutMs || got.Arguments != nil {
				t.Errorf("verdict = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestExampleSanitizeToolNames(t *testing.T) {
	t.Parallel()
	m := load(t, examplePath, "", nil)
	req := &policies.SanitizeRequest{
		Reserved: []string{"conversations_list", "Web__Fetch"},
		Servers: []policies.SanitizeServer{
			{Name: "files", Tools: []string{"read_file", "read.file", "Read_File", " "}},
			{Name: "my web", Tools: []string{"fetch url", "a/b"}},
			{Name: "web", Tools: []string{"fetch"}},
			{Name: "long", Tools: []string{strings.Repeat("x", 70)}},
			{Name: "empty"},
		},
	}
	res, err := m.SanitizeToolNames(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := []policies.SanitizedServer{
		{Safe: "files", Tools: []policies.ToolName{{Name: "files__read_file"}, {Reject: "name taken by an earlier tool"},
			{Reject: "name taken by an earlier tool"}, {Reject: "empty tool name"}}},
		{Safe: "my_web", Tools: []policies.ToolName{{Name: "my_web__fetch_url"}, {Name: "my_web__a_b"}}},
		{Safe: "web", Tools: []policies.ToolName{{Reject: "name reserved by the surface"}}},
		{Safe: "long", Tools: []policies.ToolName{{Reject: "name over 64 characters: long__" + strings.Repeat("x", 70)}}},
		{Safe: "empty", Tools: []policies.ToolName{}},
	}
	if len(res.Servers) != len(want) {
		t.Fatalf("got %d servers, want %d: %+v", len(res.Servers), len(want), res)
	}
	for i, w := range want {
		got := res.Servers[i]
		if got.Safe != w.Safe || len(got.Tools) != len(w.Tools) {
			t.Errorf("servers[%d] = %+v, want %+v", i, got, w)
			continue
		}
		for j := range w.Tools {
			if got.Tools[j] != w.Tools[j] {
				t.Errorf("servers[%d].tools[%d] = %+v, want %+v", i, j, got.Tools[j], w.Tools[j])
			}
		}
	}
}

func TestExampleDecideApproval(t *testing.T) {
	t.Parallel()
	exec := func(cmd string) *policies.ApprovalRequest {
		return &policies.ApprovalRequest{Kind: policies.ApprovalExec, ID: "appr-exec-1", SessionKey: "agent:main:main",
			Requester: policies.Caller{Name: "agent:main"}, Command: cmd,
			Request: json.RawMessage(`{"command":` + strconvQuote(cmd) + `,"cwd":"/tmp","host":"gateway"}`)}
	}
	for _, tc := range []struct {
		name, config string
		req          *policies.ApprovalRequest
		want         policies.ApprovalVerdict
	}{
		{"read-only command", "", exec("ls -la $TMPDIR"),
			policies.ApprovalVerdict{Decision: policies.AllowOnce, Reason: "read-only command"}},
		{"destructive command", "", exec("cd /; sudo rm -rf /"),
			policies.ApprovalVerdict{Decision: policies.Deny, Reason: "destructive or network command"}},
		{"chained without spaces", "", exec("ls&&rm -rf ~"),
			policies.ApprovalVerdict{Decision: policies.Deny, Reason: "destructive or network command"}},
		{"network command", "", exec("curl http://example.com"),
			policies.ApprovalVerdict{Decision: policies.Deny, Reason: "destructive or network command"}},
		{"other command asks", "", exec("git push"),
			policies.ApprovalVerdict{Decision: policies.Ask, Reason: "needs a human", TTLMs: 300000}},
		{"tool approval asks", "", &policies.ApprovalRequest{Kind: policies.ApprovalTool, Surface: policies.SurfaceServe,
			Tool: policies.ToolRef{Name: "messages_send"}, Request: json.RawMessage(`{"reason":"x"}`)},
			policies.ApprovalVerdict{Decision: policies.Ask, Reason: "needs a human", TTLMs: 300000}},
		{"read-only list from config", `{"readonly_commands":["git"]}`, exec("git status"),
			policies.ApprovalVerdict{Decision: policies.AllowOnce, Reason: "read-only command"}},
		{"config replaces the default list", `{"readonly_commands":["git"]}`, exec("ls"),
			policies.ApprovalVerdict{Decision: policies.Ask, Reason: "needs a human", TTLMs: 300000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := load(t, examplePath, tc.config, nil)
			got, err := m.DecideApproval(context.Background(), tc.req)
			if err != nil || got != tc.want {
				t.Errorf("verdict %+v, err %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestTypedHooksFailClosed(t *testing.T) {
	t.Parallel()
	m := load(t, hostilePath, "", nil)
	ctx := context.Background()
	_, err := m.SanitizeToolNames(ctx, &policies.SanitizeRequest{Servers: []policies.SanitizeServer{{Name: "s", Tools: []string{"t"}}}})
	if !errors.Is(err, wasmhost.ErrABI) || !strings.Contains(err.Error(), `wasm module "rego": sanitize_tool_names: entrypoint "openclaw/sanitize_tool_names" is undefined`) {
		t.Errorf("SanitizeToolNames error = %v", err)
	}
	v, err := m.DecideApproval(ctx, &policies.ApprovalRequest{Kind: policies.ApprovalExec, Command: "ls"})
	if !errors.Is(err, wasmhost.ErrABI) || v.Decision != policies.Deny || v.Reason != err.Error() {
		t.Errorf("DecideApproval on a module without the hook: verdict %+v, err %v; want a deny with ErrABI", v, err)
	}
	// An answer of the wrong shape: the example's decide_approval rule
	// answers {"decision":"ask",…}, which is no sanitize_tool_names output.
	wrong := load(t, examplePath, "", &opa.Options{Entrypoints: map[policies.Hook]string{
		policies.HookSanitizeToolNames: "openclaw/decide_approval",
	}})
	_, err = wrong.SanitizeToolNames(ctx, &policies.SanitizeRequest{Servers: []policies.SanitizeServer{{Name: "s", Tools: []string{"t"}}}})
	if !errors.Is(err, wasmhost.ErrABI) || !strings.Contains(err.Error(), "invalid names") {
		t.Errorf("SanitizeToolNames with a wrong answer: error = %v", err)
	}
}

func TestModuleInfo(t *testing.T) {
	t.Parallel()
	m := load(t, examplePath, "", nil)
	if got, want := strings.Join(m.Entrypoints(), " "), "openclaw/before_tool_call openclaw/decide_approval openclaw/sanitize_tool_names"; got != want {
		t.Errorf("Entrypoints() = %q, want %q", got, want)
	}
	hooks := m.Hooks()
	if len(hooks) != 3 || hooks[0] != policies.HookBeforeToolCall || hooks[1] != policies.HookSanitizeToolNames || hooks[2] != policies.HookDecideApproval {
		t.Errorf("Hooks() = %v, want all three in ABI order", hooks)
	}
	if got := m.Entrypoint(policies.HookDecideApproval); got != "openclaw/decide_approval" {
		t.Errorf("Entrypoint(decide_approval) = %q", got)
	}
	if got := m.ABIVersion(); got != "1.3" {
		t.Errorf("ABIVersion() = %q, want 1.3 (OPA v1.22.3)", got)
	}
	if m.Name() != "rego" {
		t.Errorf("Name() = %q", m.Name())
	}
}

func TestDecisionEntrypoint(t *testing.T) {
	t.Parallel()
	m := load(t, decisionPath, "", nil)
	if got := m.Entrypoint(policies.HookBeforeToolCall); got != "mcp/policy/decision" {
		t.Fatalf("before_tool_call served by %q, want mcp/policy/decision", got)
	}
	if m.Has(policies.HookDecideApproval) || m.Has(policies.HookSanitizeToolNames) {
		t.Errorf("Hooks() = %v, want only before_tool_call", m.Hooks())
	}
	for name, want := range map[string]policies.Decision{"exec": policies.Block, "conversations_list": policies.Allow} {
		v, err := m.BeforeToolCall(context.Background(), call(name, `{}`))
		if err != nil || v.Decision != want {
			t.Errorf("%s: verdict %+v, err %v; want %s", name, v, err, want)
		}
	}
	_, err := m.CallHook(context.Background(), policies.HookDecideApproval, []byte(`{"abi":1}`))
	if !errors.Is(err, wasmhost.ErrABI) || !strings.Contains(err.Error(), `no entrypoint serves decide_approval (the module has "mcp/policy/decision")`) {
		t.Errorf("CallHook(decide_approval) error = %v", err)
	}
}

func TestEntrypointOverride(t *testing.T) {
	t.Parallel()
	m := load(t, examplePath, "", &opa.Options{Entrypoints: map[policies.Hook]string{
		policies.HookBeforeToolCall: "openclaw/decide_approval",
	}})
	// decide_approval's rule answers {"decision":"ask",…}: not a
	// before_tool_call verdict, so the call fails closed.
	v, err := m.BeforeToolCall(context.Background(), call("x", ""))
	if !errors.Is(err, wasmhost.ErrABI) || v.Decision != policies.Block {
		t.Fatalf("verdict %+v, err %v; want a block with ErrABI", v, err)
	}
}

func TestDataDocument(t *testing.T) {
	t.Parallel()
	m := load(t, hostilePath, `{"greeting":"hello from data"}`, nil)
	v, err := m.BeforeToolCall(context.Background(), call("greet", ""))
	if err != nil || v.Reason != "hello from data" {
		t.Errorf("verdict %+v, err %v; want the reason read from data.greeting", v, err)
	}
}

func TestLoadRefusals(t *testing.T) {
	t.Parallel()
	rules, ok := builtin.Lookup(builtin.Scheme + builtin.RulesName)
	if !ok {
		t.Fatal("no built-in rules module")
	}
	for _, tc := range []struct {
		name   string
		wasm   []byte
		config string
		opts   *opa.Options
		want   string
	}{
		{"builtins the host lacks", readWasm(t, needsBuiltinsPath), "", nil,
			`wasm module "p": needs OPA builtins "http.send", "time.now_ns", which this host does not provide (the host provides only "sprintf": no network, clock or randomness)`},
		{"not an OPA module", rules.Wasm, "", nil,
			`wasm module "p": not an OPA Wasm module: no "opa_eval" function and "opa_wasm_abi_version" global exported`},
		{"not Wasm at all", []byte("#!/bin/sh\n"), "", nil, `wasm module "p": not an OPA Wasm module`},
		{"config not an object", readWasm(t, examplePath), `["exec"]`, nil,
			`wasm module "p": config must be a JSON object (it becomes the policy's data document): "[\"exec\"]"`},
		{"config not JSON", readWasm(t, examplePath), `{blocked_tools: 1}`, nil, `config must be a JSON object`},
		{"initial memory over the cap", readWasm(t, examplePath), "", &opa.Options{Host: wasmhost.Options{MemoryLimitPages: 1}},
			`wasm module "p": initial memory of 2 pages is over the cap of 1 pages (0 MiB)`},
		{"unknown entrypoint named", readWasm(t, examplePath), "", &opa.Options{Entrypoints: map[policies.Hook]string{policies.HookBeforeToolCall: "openclaw/nope"}},
			`wasm module "p": entrypoint "openclaw/nope" for before_tool_call is not in the module (it has "openclaw/before_tool_call", "openclaw/decide_approval", "openclaw/sanitize_tool_names")`},
		{"an option that does not apply", readWasm(t, examplePath), "", &opa.Options{Host: wasmhost.Options{ErrorExport: "last_error"}},
			`do not apply to OPA modules`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var o opa.Options
			if tc.opts != nil {
				o = *tc.opts
			}
			relaxDeadlines(&o.Host)
			m, err := opa.Load(context.Background(), "p", tc.wasm, json.RawMessage(tc.config), &o)
			if err == nil {
				m.Close(context.Background())
				t.Fatal("Load succeeded, want an error")
			}
			if !errors.Is(err, wasmhost.ErrLoad) {
				t.Errorf("error %v is not wasmhost.ErrLoad", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestFailClosed(t *testing.T) {
	t.Parallel()
	const capMsg = `wasm module "rego": before_tool_call: wall-clock cap of 2s exceeded (`
	for _, tc := range []struct {
		name string
		opts *opa.Options
		tool string
		kind error
		want string
	}{
		{"undefined result", nil, "anything", wasmhost.ErrABI,
			`wasm module "rego": before_tool_call: entrypoint "openclaw/before_tool_call" is undefined for this input (give the rule a default)`},
		{"unknown decision", nil, "unknown_decision", wasmhost.ErrABI,
			`wasm module "rego": before_tool_call: unknown decision "maybe" (want allow, block or require_approval)`},
		{"unknown field", nil, "unknown_field", wasmhost.ErrABI, `unknown field "extra"`},
		{"not an object", nil, "not_an_object", wasmhost.ErrABI, `invalid verdict "\"allow\""`},
		// The spin allocates as it goes (OPA allocates per iteration): a
		// large cap lets the deadline, not memory, end it.
		{"deadline", &opa.Options{Host: wasmhost.Options{CallTimeout: 100 * time.Millisecond, MemoryLimitPages: 4096}}, "spin", wasmhost.ErrTimeout,
			`wasm module "rego": before_tool_call: deadline of 100ms exceeded`},
		{"memory cap", &opa.Options{Host: wasmhost.Options{MemoryLimitPages: 64, CallTimeout: 10 * time.Second}}, "hog", wasmhost.ErrMemoryLimit,
			`wasm module "rego": before_tool_call: out of memory: growing to`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := load(t, hostilePath, "", tc.opts)
			for range 3 {
				v, err := m.BeforeToolCall(context.Background(), call(tc.tool, ""))
				if !errors.Is(err, tc.kind) {
					t.Fatalf("error %v, want kind %v", err, tc.kind)
				}
				if v.Decision != policies.Block || v.Reason != err.Error() {
					t.Errorf("verdict %+v, want a block with the error as reason", v)
				}
				// A spinning guest that the machine starves of CPU for 2 s
				// is stopped by the wall-clock cap instead.
				if !strings.Contains(err.Error(), tc.want) && !(tc.kind == wasmhost.ErrTimeout && strings.Contains(err.Error(), capMsg)) {
					t.Errorf("error = %q, want it to contain %q", err, tc.want)
				}
				// The failed instance is gone; the module keeps serving.
				if v, err := m.BeforeToolCall(context.Background(), call("ok", "")); err != nil || v.Decision != policies.Allow {
					t.Fatalf("after the failure: verdict %+v, err %v", v, err)
				}
			}
		})
	}
}

func TestFailClosedThroughChain(t *testing.T) {
	t.Parallel()
	m := load(t, hostilePath, "", nil)
	chain := policies.NewChain([]policies.ChainEntry{{Hook: m}}, nil)
	d := chain.BeforeToolCall(context.Background(), call("unknown_decision", ""))
	want := `blocked by policy "rego": policy module failed: wasm module "rego": before_tool_call: unknown decision "maybe" (want allow, block or require_approval)`
	if d.Decision != policies.Block || d.Message() != want {
		t.Errorf("decision %q (%s), want %q", d.Message(), d.Decision, want)
	}
}

func TestUndefinedHookOutput(t *testing.T) {
	t.Parallel()
	m := load(t, hostilePath, "", nil)
	_, err := m.CallHook(context.Background(), policies.HookSanitizeToolNames, []byte(`{"abi":1,"max_len":64,"tools":[]}`))
	if !errors.Is(err, wasmhost.ErrABI) || !strings.Contains(err.Error(), `sanitize_tool_names: entrypoint "openclaw/sanitize_tool_names" is undefined`) {
		t.Errorf("error = %v", err)
	}
}

func TestCallerContext(t *testing.T) {
	t.Parallel()
	m := load(t, hostilePath, "", &opa.Options{Host: wasmhost.Options{CallTimeout: time.Minute}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.BeforeToolCall(ctx, call("ok", ""))
	if !errors.Is(err, wasmhost.ErrCanceled) {
		t.Errorf("canceled context: error %v, want ErrCanceled", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	_, err = m.BeforeToolCall(ctx, call("spin", ""))
	if !errors.Is(err, wasmhost.ErrTimeout) || !strings.Contains(err.Error(), "caller's deadline exceeded") {
		t.Errorf("caller's deadline: error %v, want ErrTimeout naming the caller's deadline", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	m := load(t, examplePath, "", &opa.Options{Host: wasmhost.Options{PoolSize: 2}})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				tool, want := "conversations_list", policies.Allow
				if (g+i)%2 == 0 {
					tool, want = "messages_send", policies.RequireApproval
				}
				v, err := m.BeforeToolCall(context.Background(), call(tool, `{"n":1}`))
				if err != nil || v.Decision != want {
					errs <- errors.Join(err, errors.New(string(v.Decision)+" for "+tool))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	m, err := opa.Load(context.Background(), "rego", readWasm(t, examplePath), nil, &opa.Options{Host: wasmhost.Options{}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := m.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	v, err := m.BeforeToolCall(context.Background(), call("x", ""))
	if !errors.Is(err, wasmhost.ErrClosed) || v.Decision != policies.Block {
		t.Errorf("after Close: verdict %+v, err %v; want a block with ErrClosed", v, err)
	}
}

// TestNoLeaks runs failing calls of both kinds (fast failures and
// deadlines) and checks that goroutines return to their count before.
func TestNoLeaks(t *testing.T) {
	// Not parallel: it counts the process's goroutines.
	before := runtime.NumGoroutine()
	m, err := opa.Load(context.Background(), "rego", readWasm(t, hostilePath), nil,
		&opa.Options{Host: wasmhost.Options{CallTimeout: 2 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		tool := "unknown_decision"
		if i%50 == 0 {
			tool = "spin"
		}
		if _, err := m.BeforeToolCall(context.Background(), call(tool, "")); err == nil {
			t.Fatalf("call %d (%s) succeeded", i, tool)
		}
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var after int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); { // a hang guard, not a timing assertion
		if after = runtime.NumGoroutine(); after <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("goroutines: %d before, %d after", before, after)
}

func TestIsModule(t *testing.T) {
	t.Parallel()
	rules, _ := builtin.Lookup(builtin.Scheme + builtin.RulesName)
	for _, tc := range []struct {
		name string
		wasm []byte
		want bool
	}{
		{"example", readWasm(t, examplePath), true},
		{"fixture", readWasm(t, needsBuiltinsPath), true},
		{"openclaw-policy v1 module", rules.Wasm, false},
		{"empty", nil, false},
		{"header only", []byte("\x00asm\x01\x00\x00\x00"), false},
		{"truncated", readWasm(t, examplePath)[:1000], false},
		{"text", []byte("package openclaw"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := opa.IsModule(tc.wasm); got != tc.want {
				t.Errorf("IsModule = %v, want %v", got, tc.want)
			}
		})
	}
}

func FuzzIsModule(f *testing.F) {
	f.Add(readWasm(f, decisionPath))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x07\x05\x01\x01a\x00\x00"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x07\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		opa.IsModule(b) // must not panic or hang
	})
}

// TestSprintf checks the host's sprintf against the strings OPA v1.22.3
// itself printed for the same policy and inputs (`opa eval -d
// testdata/sprintf.rego -i input.json data.openclaw.before_tool_call.reason`).
func TestSprintf(t *testing.T) {
	t.Parallel()
	m := load(t, "testdata/sprintf.wasm", "", nil)
	for tool, want := range map[string]string{
		"exec":      `tool exec: 2 args, {"a": [1, "x"], "b": {1, 2}} true null 2.5 3.14 "quo\"te"    ab|7   |12345678901234567890|1e+30`,
		"count":     `2`,
		"missing":   `x and %!v(MISSING)`,
		"empty_set": `set()`,
	} {
		v, err := m.BeforeToolCall(context.Background(), call(tool, `{"a":1,"b":2}`))
		if err != nil {
			t.Errorf("%s: %v", tool, err)
			continue
		}
		if v.Reason != want {
			t.Errorf("%s: reason\n %s\nwant (OPA's)\n %s", tool, v.Reason, want)
		}
	}
	if got := opa.ProvidedBuiltins(); len(got) != 1 || got[0] != "sprintf" {
		t.Errorf("ProvidedBuiltins() = %v", got)
	}
}

// policyModule is the method set a policy engine uses of a loaded module.
// An OPA module must offer all of it, like a wasmpolicy module, so that
// the engine can hold either behind one interface.
type policyModule interface {
	policies.BeforeToolCallHook
	policies.SanitizeToolNamesHook
	policies.DecideApprovalHook
	Has(policies.Hook) bool
	Hooks() []policies.Hook
	CallHook(ctx context.Context, h policies.Hook, input []byte) ([]byte, error)
	Close(ctx context.Context) error
}

var (
	_ policyModule = (*opa.Module)(nil)
	_ policyModule = (*wasmpolicy.Module)(nil)
)
