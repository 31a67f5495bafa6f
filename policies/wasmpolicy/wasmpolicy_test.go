package wasmpolicy_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "guests", "testdata", name+".wasm"))
	if err != nil {
		t.Fatalf("reading fixture (run guests/build.sh): %v", err)
	}
	return b
}

func load(t testing.TB, name string, wasm []byte, config string, host wasmhost.Options) *wasmpolicy.Module {
	t.Helper()
	// Deadlines under test are set explicitly; elsewhere a loaded shared
	// machine must not fail a call.
	if host.CallTimeout == 0 {
		host.CallTimeout = time.Minute
	}
	if host.InitTimeout == 0 {
		host.InitTimeout = time.Minute
	}
	m, err := wasmpolicy.Load(context.Background(), name, wasm, json.RawMessage(config), &wasmpolicy.Options{Host: host})
	if err != nil {
		t.Fatalf("Load(%s): %v", name, err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

func call(tool string) *policies.ToolCall {
	return &policies.ToolCall{Surface: policies.SurfaceServe, Caller: policies.Caller{Name: "test"},
		Tool: policies.ToolRef{Name: tool}, Arguments: json.RawMessage(`{"x":"y"}`)}
}

func TestContainment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tool    string
		host    wasmhost.Options
		kind    error
		message string
	}{
		{"hostile_loop", wasmhost.Options{CallTimeout: wasmhost.DefaultCallTimeout}, wasmhost.ErrTimeout,
			`wasm module "hostile": before_tool_call: deadline of 100ms exceeded`},
		{"hostile_trap", wasmhost.Options{}, wasmhost.ErrTrap,
			`wasm module "hostile": before_tool_call: wasm error: unreachable`},
		{"hostile_grow", wasmhost.Options{MemoryLimitPages: 64}, wasmhost.ErrMemoryLimit,
			`wasm module "hostile": before_tool_call: out of memory: growing to 65 pages was refused by the cap of 64 pages (4 MiB): wasm error: unreachable`},
		{"hostile_oob", wasmhost.Options{}, wasmhost.ErrABI,
			`wasm module "hostile": before_tool_call: result [4294901760, 4294901860) is outside memory of 65536 bytes`},
		{"hostile_huge", wasmhost.Options{}, wasmhost.ErrABI,
			`wasm module "hostile": before_tool_call: result of 2097153 bytes exceeds the limit of 1048576 bytes`},
		{"hostile_badjson", wasmhost.Options{}, wasmhost.ErrABI,
			`wasm module "hostile": before_tool_call: invalid verdict "not json": invalid character 'o' in literal null (expecting 'u')`},
		{"hostile_unknown", wasmhost.Options{}, wasmhost.ErrABI,
			`wasm module "hostile": before_tool_call: unknown decision "maybe" (want allow, block or require_approval)`},
		{"hostile_zero", wasmhost.Options{}, wasmhost.ErrABI,
			`wasm module "hostile": before_tool_call: returned 0: configure rejected: the config asked for it`},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			t.Parallel()
			h := tt.host
			h.PoolSize = 1
			m := load(t, "hostile", fixture(t, "hostile"), "", h)
			chain := policies.NewChain([]policies.ChainEntry{{Hook: m}}, nil)
			for round := range 2 {
				v, err := m.BeforeToolCall(context.Background(), call(tt.tool))
				if !errors.Is(err, tt.kind) || !sameFailure(err.Error(), tt.message) {
					t.Fatalf("round %d: err = %v, want %v %q", round, err, tt.kind, tt.message)
				}
				if v.Decision != policies.Block || v.Reason != err.Error() {
					t.Fatalf("round %d: verdict %+v, want a block with the error as reason", round, v)
				}
				d := chain.BeforeToolCall(context.Background(), call(tt.tool))
				i := strings.Index(d.Reason, `wasm module "hostile": `)
				if d.Decision != policies.Block || d.Module != "hostile" || i < 0 || !sameFailure(d.Reason[i:], tt.message) {
					t.Fatalf("round %d: chain decision %+v", round, d)
				}
				// The next call is served normally.
				v, err = m.BeforeToolCall(context.Background(), call("hostile_block"))
				if err != nil || v.Decision != policies.Block || v.Reason != "hostile says no" {
					t.Fatalf("round %d: next call = %+v, %v", round, v, err)
				}
				v, err = m.BeforeToolCall(context.Background(), call("fine"))
				if err != nil || v.Decision != policies.Allow {
					t.Fatalf("round %d: next call = %+v, %v", round, v, err)
				}
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fixture, config string
		opts            *wasmpolicy.Options
		message         string
	}{
		{"abi2", "", nil, `wasm module "p": policy_abi_version: policy ABI version 2 is not supported (this host speaks version 1)`},
		{"nohooks", "", nil, `wasm module "p": exports no hook: want at least one of before_tool_call, sanitize_tool_names, decide_approval (i32, i32) -> (i64)`},
		{"badsig", "", nil, `wasm module "p": before_tool_call: export has signature (i32) -> (i32), want (i32, i32) -> (i64)`},
		{"import_env", "", nil, `wasm module "p": unsupported import "env"."abort": only wasi_snapshot_preview1 (with no capabilities) and openclaw_policy.log are provided`},
		{"hostile", `{"please":"reject"}`, nil, `wasm module "p": configure: configuration refused: configure rejected: the config asked for it`},
		{"hostile", "", &wasmpolicy.Options{Host: wasmhost.Options{ErrorExport: "x"}}, `wasm module "p": options: the adapter owns Host.Init and Host.ErrorExport; leave them zero`},
	}
	for _, tt := range tests {
		t.Run(tt.fixture+tt.config, func(t *testing.T) {
			t.Parallel()
			opts := tt.opts
			if opts == nil {
				opts = &wasmpolicy.Options{Host: wasmhost.Options{}}
			}
			m, err := wasmpolicy.Load(context.Background(), "p", fixture(t, tt.fixture), json.RawMessage(tt.config), opts)
			if err == nil {
				_ = m.Close(context.Background())
				t.Fatalf("Load succeeded, want %q", tt.message)
			}
			if !errors.Is(err, wasmhost.ErrLoad) || err.Error() != tt.message {
				t.Fatalf("Load error\n got %v\nwant ErrLoad %q", err, tt.message)
			}
		})
	}
}

func TestHooks(t *testing.T) {
	t.Parallel()
	m := load(t, "rules", builtin.Rules(), "", wasmhost.Options{})
	if got := m.Hooks(); len(got) != 1 || got[0] != policies.HookBeforeToolCall {
		t.Fatalf("Hooks() = %v", got)
	}
	if m.Has(policies.HookDecideApproval) || m.Name() != "rules" {
		t.Fatalf("Has(decide_approval) = true or Name() = %q", m.Name())
	}
	_, err := m.CallHook(context.Background(), policies.HookDecideApproval, []byte("{}"))
	if !errors.Is(err, wasmhost.ErrABI) || err.Error() != `wasm module "rules": decide_approval: module does not export decide_approval` {
		t.Fatalf("CallHook(decide_approval): %v", err)
	}
	out, err := m.CallHook(context.Background(), policies.HookBeforeToolCall, []byte(`{"abi":1,"tool":{"name":"t"}}`))
	if err != nil || string(out) != `{"decision":"allow"}` {
		t.Fatalf("CallHook(before_tool_call) = %s, %v", out, err)
	}
}

func TestDecodeVerdict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		out     string
		want    policies.Verdict
		message string
	}{
		{`{"decision":"allow"}`, policies.Verdict{Decision: policies.Allow}, ""},
		{` {"decision":"require_approval","reason":"r","title":"T","description":"D","timeout_ms":5000} `,
			policies.Verdict{Decision: policies.RequireApproval, Reason: "r", Title: "T", Description: "D", TimeoutMs: 5000}, ""},
		{`{"decision":"allow","arguments":{"a":1}}`, policies.Verdict{Decision: policies.Allow, Arguments: json.RawMessage(`{"a":1}`)}, ""},
		{`{"decision":"allow","arguments":null}`, policies.Verdict{Decision: policies.Allow}, ""},
		{``, policies.Verdict{}, `invalid verdict "": unexpected end of JSON input`},
		{`{"decision":"allow"} {}`, policies.Verdict{}, `invalid verdict "{\"decision\":\"allow\"} {}": invalid character '{' after top-level value`},
		{`{"decision":"allow","desicion":"block"}`, policies.Verdict{}, `invalid verdict "{\"decision\":\"allow\",\"desicion\":\"block\"}": unknown field "desicion"`},
		// Ambiguous outputs, which encoding/json reads as the last key or
		// whatever its case, are refused.
		{`{"decision":"block","decision":"allow"}`, policies.Verdict{}, `invalid verdict "{\"decision\":\"block\",\"decision\":\"allow\"}": repeated field "decision"`},
		{`{"Decision":"allow"}`, policies.Verdict{}, `invalid verdict "{\"Decision\":\"allow\"}": unknown field "Decision" (field names are case-sensitive: want "decision")`},
		{`{"decision":"block","DECISION":"allow"}`, policies.Verdict{}, `invalid verdict "{\"decision\":\"block\",\"DECISION\":\"allow\"}": unknown field "DECISION" (field names are case-sensitive: want "decision")`},
		{`{"decision":"require_approval","timeout_ms":0,"Timeout_ms":9}`, policies.Verdict{}, `invalid verdict "{\"decision\":\"require_approval\",\"timeout_ms\":0,\"Timeout_ms\":9}": unknown field "Timeout_ms" (field names are case-sensitive: want "timeout_ms")`},
		{`{"decision":"allow","arguments":{},"arguments":{"x":1}}`, policies.Verdict{}, `invalid verdict "{\"decision\":\"allow\",\"arguments\":{},\"arguments\":{\"x\":1}}": repeated field "arguments"`},
		{`{"reason":"x"}`, policies.Verdict{}, `invalid verdict "{\"reason\":\"x\"}": no decision`},
		{`{"decision":"deny"}`, policies.Verdict{}, `unknown decision "deny" (want allow, block or require_approval)`},
		{`{"decision":"require_approval","timeout_ms":-1}`, policies.Verdict{}, `invalid verdict: negative timeout_ms -1`},
		{`{"decision":"allow","arguments":[1]}`, policies.Verdict{}, `invalid verdict: arguments must be a JSON object, got "[1]"`},
		{`{"decision":1}`, policies.Verdict{}, `invalid verdict "{\"decision\":1}": json: cannot unmarshal number into Go struct field Verdict.decision of type policies.Decision`},
	}
	for _, tt := range tests {
		v, err := wasmpolicy.DecodeVerdict([]byte(tt.out))
		if tt.message != "" {
			if err == nil || err.Error() != tt.message {
				t.Errorf("DecodeVerdict(%s) error\n got %v\nwant %q", tt.out, err, tt.message)
			}
			continue
		}
		if err != nil {
			t.Errorf("DecodeVerdict(%s): %v", tt.out, err)
			continue
		}
		if v.Decision != tt.want.Decision || v.Reason != tt.want.Reason || v.Title != tt.want.Title ||
			v.Description != tt.want.Description || v.TimeoutMs != tt.want.TimeoutMs || string(v.Arguments) != string(tt.want.Arguments) {
			t.Errorf("DecodeVerdict(%s) = %+v, want %+v", tt.out, v, tt.want)
		}
	}
}

func FuzzDecodeVerdict(f *testing.F) {
	for _, s := range []string{`{"decision":"allow"}`, `{"decision":"block","reason":"x"}`, `{"decision":"require_approval","arguments":{}}`, `[]`, `"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		v, err := wasmpolicy.DecodeVerdict(out)
		if err == nil && !v.Decision.Valid() {
			t.Fatalf("accepted %q with decision %q", out, v.Decision)
		}
	})
}

func TestClose(t *testing.T) {
	t.Parallel()
	m, err := wasmpolicy.Load(context.Background(), "rules", builtin.Rules(), nil, &wasmpolicy.Options{Host: wasmhost.Options{}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := m.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	wg.Wait()
	v, err := m.BeforeToolCall(context.Background(), call("t"))
	if !errors.Is(err, wasmhost.ErrClosed) || v.Decision != policies.Block {
		t.Fatalf("after Close: %+v, %v", v, err)
	}
}

// TestNoGoroutineLeak: many failing decisions, then Close; the goroutine
// count returns to where it was. Not parallel, so nothing else interferes.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	m, err := wasmpolicy.Load(context.Background(), "hostile", fixture(t, "hostile"), nil,
		&wasmpolicy.Options{Host: wasmhost.Options{PoolSize: 3, CallTimeout: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	tools := []string{"hostile_loop", "hostile_trap", "hostile_badjson", "hostile_zero", "hostile_oob", "ok"}
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for i := range 60 {
				_, _ = m.BeforeToolCall(context.Background(), call(tools[(g+i)%len(tools)]))
			}
		})
	}
	wg.Wait()
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var after int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); { // a hang guard, not a timing assertion
		runtime.GC()
		if after = runtime.NumGoroutine(); after <= before {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("goroutines: %d before, %d after\n%s", before, after, buf[:runtime.Stack(buf, true)])
}

// wallCap is the message of a spinning guest stopped by the wall-clock cap.
var wallCap = regexp.MustCompile(`: wall-clock cap of \S+ exceeded \(the guest's thread ran \S+ of its \S+ CPU deadline\)$`)

// sameFailure reports whether got is the failure message want. A spinning
// guest is stopped by its CPU deadline ("…: deadline of 100ms exceeded")
// or, when a loaded machine gave its thread less CPU than that in 2 s of
// wall time, by the wall-clock cap: for a deadline either message is the
// timeout a user sees.
func sameFailure(got, want string) bool {
	if got == want {
		return true
	}
	prefix, _, ok := strings.Cut(want, ": deadline of ")
	return ok && strings.HasPrefix(got, prefix+": wall-clock cap of ") && wallCap.MatchString(got)
}
