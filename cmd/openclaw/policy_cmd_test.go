package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/internal/e2e"
	"github.com/openclaw-go/openclaw/policies/builtin"
)

const testdataWasm = "../../guests/testdata/"

// runPolicyCLI runs `openclaw ARGS…` in process and returns its stdout and
// exit code (as main would compute it).
func runPolicyCLI(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	code := 0
	if err != nil {
		code = 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
	}
	return out.String(), code, err
}

func TestPolicyInspect(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		file string
		want []string
		code int // 1 when the module would not load
	}{
		{testdataWasm + "hostile.wasm", []string{
			"abi version  1\n", "hooks        before_tool_call\n", "memory       1 pages initial (64 KiB), no declared max\n",
			"loads        yes\n", "size         1116 bytes\n",
			"before_tool_call    func    (i32, i32) -> (i64)", "imports (1):\n  openclaw_policy.log  func  (i32, i32, i32) -> ()"}, 0},
		{testdataWasm + "abi2.wasm", []string{"abi version  2\n",
			"loads        no: wasm module \"abi2\": policy_abi_version: policy ABI version 2 is not supported (this host speaks version 1)"}, 1},
		{testdataWasm + "import_env.wasm", []string{"imports (1):\n  env.abort  func  (i32, i32, i32, i32) -> ()",
			`loads        no: wasm module "import_env": unsupported import "env"."abort"`}, 1},
		{testdataWasm + "bigmem.wasm", []string{"memory       300 pages initial (18.75 MiB), no declared max",
			"initial memory of 300 pages is over the cap of 256 pages"}, 1},
		{testdataWasm + "nohooks.wasm", []string{"hooks        -\n", "exports no hook"}, 1},
		{testdataWasm + "locals.wasm", []string{"hooks        before_tool_call\n",
			`loads        no: wasm module "locals": refused before compiling: function 0 exceeds the load limit of locals per function: 4294967295, over the limit of 50000`}, 1},
		{"../../guests/rego/policy.wasm", []string{"format       opa\n", "abi version  OPA Wasm ABI 1.", "hooks        before_tool_call, sanitize_tool_names, decide_approval\n",
			"memory       2 pages initial (128 KiB), no declared max, imported\n", "loads        yes\n", "  env.memory        memory  min 2\n"}, 0},
		{"builtin:rules", []string{"source       builtin:rules\n", "sha256       " + rulesSHA256(t) + "\n", "loads        yes\n"}, 0},
	} {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			t.Parallel()
			out, code, err := runPolicyCLI(t, "policy", "inspect", tt.file)
			if code != tt.code || (code != 0 && !strings.Contains(err.Error(), "would not load")) {
				t.Fatalf("exit %d (want %d): %v\n%s", code, tt.code, err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func rulesSHA256(t *testing.T) string {
	m, ok := builtin.Lookup("builtin:rules")
	if !ok {
		t.Fatal("no builtin:rules")
	}
	return m.SHA256
}

func TestPolicyInspectJSON(t *testing.T) {
	t.Parallel()
	out, code, err := runPolicyCLI(t, "policy", "inspect", "--json", testdataWasm+"hostile.wasm")
	if code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	var got struct {
		ABIVersion int      `json:"abi_version"`
		Hooks      []string `json:"hooks"`
		SHA256     string   `json:"sha256"`
		Size       int      `json:"size"`
		Memory     struct {
			InitialPages int  `json:"initial_pages"`
			MaxPages     *int `json:"max_pages"`
		} `json:"memory"`
		Imports  []struct{ Module, Name, Kind, Type string } `json:"imports"`
		Exports  []struct{ Name, Kind, Type string }         `json:"exports"`
		Loadable bool                                        `json:"loadable"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.ABIVersion != 1 || len(got.Hooks) != 1 || got.Hooks[0] != "before_tool_call" || len(got.SHA256) != 64 ||
		got.Size != 1116 || got.Memory.InitialPages != 1 || got.Memory.MaxPages != nil || !got.Loadable ||
		len(got.Imports) != 1 || got.Imports[0].Module != "openclaw_policy" || got.Imports[0].Type != "(i32, i32, i32) -> ()" ||
		len(got.Exports) != 7 {
		t.Fatalf("unexpected inspection: %+v", got)
	}
}

func TestPolicyInspectRefusesNonWasm(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "x.wasm")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, code, err := runPolicyCLI(t, "policy", "inspect", p)
	if code == 0 || !strings.Contains(err.Error(), "not a WebAssembly binary") {
		t.Fatalf("exit %d, err %v", code, err)
	}
}

// TestPolicyTestExamples runs each example module's cases as its README
// says: guests/examples/cases.jsonl against the Go, Rust and
// AssemblyScript examples, guests/rego/cases.jsonl against the Rego one.
// Every case passes, the group rule's among them (an authenticated alice
// in group oncall may call prod__deploy, bob and a clientInfo named oncall
// may not).
func TestPolicyTestExamples(t *testing.T) {
	t.Parallel()
	const root = "../../guests/"
	for _, tt := range []struct{ module, cases string }{
		{root + "examples/go/policy.wasm", root + "examples/cases.jsonl"},
		{root + "examples/rust/policy.wasm", root + "examples/cases.jsonl"},
		{root + "examples/assemblyscript/policy.wasm", root + "examples/cases.jsonl"},
		{root + "rego/policy.wasm", root + "rego/cases.jsonl"},
	} {
		t.Run(tt.module, func(t *testing.T) {
			t.Parallel()
			out, code, err := runPolicyCLI(t, "policy", "test", tt.module, "--timeout-ms", "60000", "--cases", tt.cases)
			if code != 0 {
				t.Fatalf("exit %d: %v\n%s", code, err, out)
			}
			for _, name := range []string{"prod tools are for the on-call group", "bob is not on call", "a clientInfo is no identity"} {
				if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` .* PASS$`).MatchString(out) {
					t.Errorf("case %q did not pass:\n%s", name, out)
				}
			}
		})
	}
}

func TestPolicyTest(t *testing.T) {
	t.Parallel()
	const td = "testdata/policy/"
	for _, tt := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"all pass", []string{"builtin:rules", "--timeout-ms", "10000", "--config", "@" + td + "rules-config.json", "--cases", td + "rules-cases.jsonl"}, 0,
			[]string{"sends are blocked       before_tool_call  block             block             PASS", "\n3 passed, 0 failed\n"}},
		{"inline config", []string{"builtin:rules", "--timeout-ms", "10000", "--config", `{"default":"block","rules":[]}`, "--cases", td + "rules-cases.jsonl"}, 1,
			[]string{"reads are allowed       before_tool_call  allow             block  FAIL",
				`FAIL sends are blocked (rules-cases.jsonl:3): reason "no rule matched", want "sending is disabled"`, "\n0 passed, 3 failed\n"}},
		{"mismatches", []string{"builtin:rules", "--timeout-ms", "10000", "--config", "@" + td + "rules-config.json", "--cases", td + "rules-cases-wrong.jsonl"}, 1,
			[]string{
				`FAIL sends are allowed (wrong) (rules-cases-wrong.jsonl:2): decision "block", want "allow"`,
				`FAIL reason typo (rules-cases-wrong.jsonl:3): reason "sending is disabled", want "sending is disabled!"`,
				"\n1 passed, 2 failed\n"}},
		{"failures expected and not", []string{testdataWasm + "hostile.wasm", "--timeout-ms", "1000", "--cases", td + "hostile-cases.jsonl"}, 1,
			[]string{"trap fails              before_tool_call  error     error  PASS",
				"loop hits the deadline  before_tool_call  error     error  PASS",
				`FAIL a trap is not a pass (hostile-cases.jsonl:6): the call failed: wasm module "hostile": before_tool_call: wasm error: unreachable`,
				"\n5 passed, 1 failed\n"}},
		{"module refused", []string{testdataWasm + "abi2.wasm", "--cases", td + "rules-cases.jsonl"}, 2,
			[]string{`policy module "abi2"`, "policy ABI version 2 is not supported"}},
		{"configure refuses", []string{testdataWasm + "hostile.wasm", "--config", `{"x":"reject"}`, "--cases", td + "rules-cases.jsonl"}, 2,
			[]string{"configuration refused"}},
		{"no cases flag", []string{"builtin:rules"}, 2, []string{"--cases FILE.jsonl is required"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, code, err := runPolicyCLI(t, append([]string{"policy", "test"}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d: %v\n%s", code, tt.code, err, out)
			}
			if err != nil {
				out += err.Error()
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestPolicyTestAmbiguousOutput: `policy test` of a module whose answers
// JSON readers could take two ways (testdata parrot.wasm answers its
// config) reports each call as failed with the key named: a repeated
// "decision" is no allow-always, a "Decision" is no allow.
func TestPolicyTestAmbiguousOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i, tt := range []struct{ answer, want string }{
		{`{"decision":"deny","decision":"allow-always"}`, `repeated field \"decision\"`},
		{`{"Decision":"allow-always"}`, `unknown field \"Decision\"`},
		{`{"decision":"allow","DECISION":"deny"}`, `unknown field \"DECISION\"`},
	} {
		cases := filepath.Join(dir, strconv.Itoa(i)+".jsonl")
		lines := `{"name":"approval","hook":"decide_approval","input":{"kind":"exec","session_key":"agent:main:main","request":{"command":"rm -rf /"}},"expect":{"error":"` + tt.want + `"}}` + "\n" +
			`{"name":"call","input":{"surface":"serve","tool":{"name":"x"}},"expect":{"error":"` + tt.want + `"}}` + "\n"
		if err := os.WriteFile(cases, []byte(lines), 0o600); err != nil {
			t.Fatal(err)
		}
		out, code, err := runPolicyCLI(t, "policy", "test", testdataWasm+"parrot.wasm", "--config", tt.answer, "--cases", cases)
		if code != 0 || !strings.Contains(out, "\n2 passed, 0 failed\n") {
			t.Errorf("%s: exit %d (%v), want both calls failed naming the key:\n%s", tt.answer, code, err, out)
		}
	}
}

// `policy test` shows a module's log lines with its name; a start
// function that never returns is refused saying it timed out, and after
// how long.
func TestPolicyTestGuestLogAndStartTimeout(t *testing.T) {
	t.Parallel()
	cases := filepath.Join(t.TempDir(), "log.jsonl")
	if err := os.WriteFile(cases, []byte(`{"name":"logs","input":{"surface":"serve","session_key":"hostile_log","tool":{"name":"x"}},"expect":{"decision":"allow"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code, err := runPolicyCLI(t, "policy", "test", testdataWasm+"hostile.wasm", "--cases", cases)
	if code != 0 || !strings.Contains(out, `level=INFO msg="hello from the guest" module=hostile`) {
		t.Errorf("exit %d (%v), want the guest's line:\n%s", code, err, out)
	}
	_, code, err = runPolicyCLI(t, "policy", "test", testdataWasm+"startloop.wasm", "--cases", cases)
	if code != 2 || err == nil || !strings.Contains(err.Error(), `wasm module "startloop": instantiating: the start function timed out: `) ||
		!strings.Contains(err.Error(), "1s") {
		t.Errorf("start loop: exit %d, %v; want exit 2 saying the start function timed out after 1s", code, err)
	}
}

func TestPolicyTestJSON(t *testing.T) {
	t.Parallel()
	out, code, _ := runPolicyCLI(t, "policy", "test", "builtin:rules", "--json", "--timeout-ms", "10000",
		"--config", "@testdata/policy/rules-config.json", "--cases", "testdata/policy/rules-cases-wrong.jsonl")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	var rep struct {
		Cases []struct {
			Name, Hook, Expected, Got, Reason, Error string
			Pass                                     bool
			Mismatches                               []string
		} `json:"cases"`
		Passed, Failed int
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Passed != 1 || rep.Failed != 2 || len(rep.Cases) != 3 || !rep.Cases[0].Pass || rep.Cases[1].Got != "block" ||
		len(rep.Cases[1].Mismatches) != 1 || rep.Cases[1].Mismatches[0] != `decision "block", want "allow"` {
		t.Fatalf("report = %+v", rep)
	}
	// The module's reason is in the report, not only in a mismatch.
	if rep.Cases[1].Reason == "" || rep.Cases[1].Reason != rep.Cases[2].Reason || rep.Cases[1].Error != "" {
		t.Errorf("reasons %q, %q; error %q: want the module's reason for both blocks, no error", rep.Cases[1].Reason, rep.Cases[2].Reason, rep.Cases[1].Error)
	}
}

func TestPolicyTestBadCases(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct{ cases, want string }{
		{`{"input":{"tool":{"name":"x"}},"expect":{"decison":"allow"}}`, `line 1: json: unknown field "decison"`},
		{"\n" + `{"hook":"after_call","input":{},"expect":{"decision":"allow"}}`, `line 2 (line 2): unknown hook "after_call"`},
		{`{"name":"n","input":{"tool":{"name":"x"}},"expect":{}}`, "line 1 (n): expect is empty"},
		{`{"name":"n","expect":{"decision":"allow"}}`, "line 1 (n): input must be a JSON object"},
		{"# only a comment\n", "no cases"},
	} {
		p := filepath.Join(dir, "c.jsonl")
		if err := os.WriteFile(p, []byte(tt.cases), 0o600); err != nil {
			t.Fatal(err)
		}
		_, code, err := runPolicyCLI(t, "policy", "test", "builtin:rules", "--cases", p)
		if code != 2 || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: exit %d, err %v; want exit 2 and %q", tt.cases, code, err, tt.want)
		}
	}
}

func TestPolicyBench(t *testing.T) {
	t.Parallel()
	// A long deadline: on a loaded machine under -race a call may take
	// more than the default 100 ms, and this test is about the report.
	out, code, err := runPolicyCLI(t, "policy", "bench", "builtin:rules", "-n", "300", "--timeout-ms", "10000")
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	row := regexp.MustCompile(`(?m)^before_tool_call\s+300\s+0\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$`)
	if !strings.Contains(out, "builtin:rules: 300 calls per hook, one at a time, interruption on, deadline 10s") ||
		!strings.Contains(out, "HOOK              CALLS  ERRORS  P50") || !row.MatchString(out) {
		t.Fatalf("unexpected bench output:\n%s", out)
	}

	out, code, err = runPolicyCLI(t, "policy", "bench", testdataWasm+"hostile.wasm", "-n", "50", "--json",
		"--cases", "testdata/policy/hostile-bench.jsonl", "--timeout-ms", "10000")
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	var rs []struct {
		Hook       string `json:"hook"`
		Calls      int    `json:"calls"`
		Errors     int    `json:"errors"`
		FirstError string `json:"first_error"`
		P50, P99   int64
	}
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// The cases' inputs cycle: 2 of every 4 fail (the trap, the unknown
	// decision) and count as errors; the bench goes on. The measured calls
	// start at input 1 and end with inputs 1 and 2.
	if len(rs) != 1 || rs[0].Hook != "before_tool_call" || rs[0].Calls != 50 || rs[0].Errors != 24 ||
		!strings.Contains(rs[0].FirstError, `wasm module "hostile"`) {
		t.Fatalf("unexpected results: %+v", rs)
	}

	_, code, err = runPolicyCLI(t, "policy", "bench", "builtin:rules", "--hook", "decide_approval")
	if code == 0 || !strings.Contains(err.Error(), "--hook decide_approval: the module does not export it") {
		t.Fatalf("bench of a hook the module lacks: exit %d, %v", code, err)
	}
}

// TestPolicyReloadReachesServe runs a real `openclaw mcp serve` against a
// local Gateway, changes its policy module, and checks that `openclaw
// policy reload` swaps it (and reports it), that a broken module is
// refused with the previous one left in place, and that run files of dead
// processes are cleaned up. Not parallel: it sets OPENCLAW_STATE_DIR for the
// children.
func TestPolicyReloadReachesServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a Gateway")
	}
	dir := t.TempDir()
	bin := testBinary(t)
	state := filepath.Join(dir, "state")
	t.Setenv("OPENCLAW_STATE_DIR", state)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	gw, err := e2e.StartGateway(ctx, bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Stop()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(gw.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(testdataWasm + name + ".wasm")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mod := filepath.Join(dir, "p.wasm")
	if err := os.WriteFile(mod, read("allow"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The module's deadline is long: the test is about swapping, and a
	// loaded machine must not turn a slow call into a block.
	pf := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(pf, []byte(`{"audit_log":"-","modules":[{"source":"p.wasm","timeout_ms":10000}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := gw.StartServe(ctx, tokenFile, "policy-reload-test", "--policy-config", pf)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	poll := func() *e2e.Result {
		t.Helper()
		r, err := s.Call(ctx, "events_poll", map[string]any{"session_key": "hostile_block"})
		if err != nil {
			t.Fatalf("%v\nstderr:\n%s", err, s.Stderr())
		}
		return r
	}
	if r := poll(); r.IsError {
		t.Fatalf("allow.wasm blocked: %+v", r)
	}
	reload := func() (string, int) {
		t.Helper()
		out, err := exec.Command(bin, "policy", "reload").CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}

	// A stale run file of a process that is gone is removed.
	stale := filepath.Join(state, "openclaw-go", "run", "4194309.json")
	if err := os.WriteFile(stale, []byte(`{"pid":4194309,"command":"mcp serve","started":"2026-01-01T00:00:00Z","modules":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(mod, read("hostile"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := reload()
	// The file watcher may have swapped the module first; either way the
	// reload reports success and the new module decides.
	live := regexp.MustCompile(`pid \d+ \(mcp serve, started [0-9: -]+\): reloaded: (swapped|unchanged) p\n`)
	if code != 0 || !live.MatchString(out) || !strings.Contains(out, "pid 4194309: not running any more; removed its run file") {
		t.Fatalf("policy reload: exit %d\n%s\nserve stderr:\n%s", code, out, s.Stderr())
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale run file still there: %v", err)
	}
	if r := poll(); !r.IsError || r.Text != `blocked by policy "p": hostile says no` {
		t.Fatalf("after the reload: %+v", r)
	}

	if err := os.WriteFile(mod, []byte("\x00asm\x01\x00\x00\x00\x05\x03\x01"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = reload()
	if code != 1 || !strings.Contains(out, `: reload refused, the previous policies stay active: policy module "p" (`+mod+`): wasm module "p": compiling`) {
		t.Fatalf("reload of a broken module: exit %d\n%s", code, out)
	}
	if r := poll(); !r.IsError || r.Text != `blocked by policy "p": hostile says no` {
		t.Fatalf("after a refused reload the previous module must stay: %+v", r)
	}
	if !strings.Contains(s.Stderr(), "policy reload refused; the active policies stay in place") {
		t.Errorf("serve did not log the refusal:\n%s", s.Stderr())
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if out, code := reload(); code != 0 || out != "no running openclaw process enforces policies; nothing to reload\n" {
		t.Fatalf("reload with no process: exit %d\n%s", code, out)
	}
	entries, _ := os.ReadDir(filepath.Join(state, "openclaw-go", "run"))
	if len(entries) != 0 {
		t.Errorf("run files left after serve exited: %v", entries)
	}
}

// TestServeRefusesBrokenPolicies: `openclaw mcp serve` does not start when
// a module cannot be loaded, and says which module and why, before it
// touches stdin or the Gateway.
func TestServeRefusesBrokenPolicies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	abs, err := filepath.Abs(testdataWasm)
	if err != nil {
		t.Fatal(err)
	}
	policy := func(body string) string {
		p := filepath.Join(dir, strconv.Itoa(len(body))+"-policy.json")
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(body, "TD/", abs+"/")), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"wrong pin", []string{"--policy-config", policy(`{"modules":[{"source":"TD/allow.wasm","sha256":"` + strings.Repeat("ab", 32) + `"}]}`)},
			`policy module "allow": sha256 pin mismatch`},
		{"unknown ABI version", []string{"--policy", testdataWasm + "abi2.wasm"},
			`policy module "abi2" (` + testdataWasm + `abi2.wasm): wasm module "abi2": policy_abi_version: policy ABI version 2 is not supported (this host speaks version 1)`},
		{"missing export", []string{"--policy", testdataWasm + "nohooks.wasm"}, `policy module "nohooks" (` + testdataWasm + `nohooks.wasm): wasm module "nohooks": exports no hook`},
		{"unknown host import", []string{"--policy", testdataWasm + "import_env.wasm"}, `unsupported import "env"."abort"`},
		{"configure fails", []string{"--policy-config", policy(`{"modules":[{"source":"TD/hostile.wasm","config":"reject"}]}`)},
			`policy module "hostile" (` + abs + `/hostile.wasm): wasm module "hostile": configure: configuration refused: configure rejected: the config asked for it`},
		{"hook not exported", []string{"--policy-config", policy(`{"modules":[{"source":"TD/allow.wasm","hooks":["sanitize_tool_names"]}]}`)},
			`hooks lists sanitize_tool_names, which the module does not export`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"mcp", "serve", "--url", "ws://127.0.0.1:9", "--token", "x", "--audit-log", "-"}, tt.args...)
			_, code, err := runPolicyCLI(t, args...)
			if code != 1 || err == nil || !strings.HasPrefix(err.Error(), "MCP server failed to start: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("exit %d, err %v\nwant exit 1 and %q", code, err, tt.want)
			}
		})
	}
}
