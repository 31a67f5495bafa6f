package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/engine"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// fixture returns the bytes of guests/testdata/NAME.wasm, built from its
// .wat source by guests/build.sh.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "guests", "testdata", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile writes data to dir/name and returns the path.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// replaceFile replaces path atomically by a rename, as deploy tools do.
func replaceFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// sink records audit records.
type sink struct {
	mu sync.Mutex
	rs []policies.AuditRecord
}

func (s *sink) Record(r policies.AuditRecord) {
	s.mu.Lock()
	s.rs = append(s.rs, r)
	s.mu.Unlock()
}

func (s *sink) records() []policies.AuditRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]policies.AuditRecord(nil), s.rs...)
}

// syncBuffer is a goroutine-safe log destination.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func load(t testing.TB, opts engine.Options) (*engine.Engine, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	if opts.Audit == nil {
		opts.Audit = &sink{}
	}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	// Shared CI machines under -race are slow: these tests are about
	// decisions and swaps, not deadlines (the leak test sets its own).
	if opts.Host.CallTimeout == 0 {
		opts.Host.CallTimeout = 10 * time.Second
	}
	opts.Host.InitTimeout = 10 * time.Second
	e, err := engine.Load(context.Background(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return e, logs
}

// call is a serve-surface call whose session key carries a hostile.wat
// marker (or none).
func call(marker string) *policies.ToolCall {
	return &policies.ToolCall{Surface: policies.SurfaceServe, SessionKey: marker, Tool: policies.ToolRef{Name: "events_poll"}}
}

func TestLoadRefusesNamingModuleAndReason(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, n := range []string{"allow", "abi2", "nohooks", "badsig", "import_env", "hostile", "bigmem"} {
		writeFile(t, dir, n+".wasm", fixture(t, n))
	}
	zeros := strings.Repeat("0", 64)
	for _, tt := range []struct {
		name, policy string
		want         []string
	}{
		{"wrong pin", `{"modules":[{"source":"allow.wasm","sha256":"` + zeros + `"}]}`,
			[]string{`policy module "allow": sha256 pin mismatch`, "pinned " + zeros}},
		{"unknown ABI version", `{"modules":[{"source":"abi2.wasm"}]}`,
			[]string{`policy module "abi2"`, "policy ABI version 2 is not supported (this host speaks version 1)"}},
		{"missing hook export", `{"modules":[{"source":"nohooks.wasm"}]}`,
			[]string{`policy module "nohooks"`, "exports no hook"}},
		{"mistyped export", `{"modules":[{"source":"badsig.wasm"}]}`,
			[]string{`policy module "badsig"`, "before_tool_call: export has signature (i32) -> (i32), want (i32, i32) -> (i64)"}},
		{"unknown host import", `{"modules":[{"source":"import_env.wasm"}]}`,
			[]string{`policy module "import_env"`, `unsupported import "env"."abort"`}},
		{"configure fails", `{"modules":[{"source":"hostile.wasm","config":{"please":"reject"}}]}`,
			[]string{`policy module "hostile"`, "configuration refused: configure rejected: the config asked for it"}},
		{"hook not exported", `{"modules":[{"source":"allow.wasm","hooks":["decide_approval"]}]}`,
			[]string{`policy module "allow"`, "hooks lists decide_approval, which the module does not export (it exports before_tool_call)"}},
		{"memory over the cap", `{"modules":[{"source":"bigmem.wasm"}]}`,
			[]string{`policy module "bigmem"`, "initial memory of 300 pages is over the cap of 256 pages"}},
		{"memory limit raised but config for a module without configure", `{"modules":[{"source":"allow.wasm","config":{}}]}`,
			[]string{`policy module "allow"`, `a config was given but the module exports no "configure"`}},
		{"missing file", `{"modules":[{"source":"gone.wasm"}]}`,
			[]string{`policy module "gone"`, "no such file"}},
		{"unknown built-in", `{"modules":[{"source":"builtin:nope"}]}`,
			[]string{`policy module "nope": unknown built-in "builtin:nope" (built-ins: `, "builtin:rules"}},
		{"second module fails, first named fine", `{"modules":[{"source":"allow.wasm"},{"name":"late","source":"abi2.wasm"}]}`,
			[]string{`policy module "late"`, "policy ABI version 2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Relative sources resolve against the policy file's folder.
			pf := writeFile(t, dir, strings.ReplaceAll(tt.name, " ", "-")+".json", []byte(tt.policy))
			_, err := engine.Load(context.Background(), &engine.Options{ConfigFile: pf, Audit: &sink{}, Host: testHost()})
			if err == nil {
				t.Fatal("loaded; want a refusal")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestDefaultIsBuiltinRulesAllowingAndAuditing(t *testing.T) {
	t.Parallel()
	audit := &sink{}
	e, _ := load(t, engine.Options{Audit: audit})
	mods := e.Modules()
	if len(mods) != 1 || mods[0].Name != "rules" || !mods[0].Default || mods[0].Source != "builtin:rules" {
		t.Fatalf("modules = %+v, want the default builtin:rules", mods)
	}
	if got := mods[0].String(); !strings.HasPrefix(got, "rules (builtin:rules, sha256 ") || !strings.HasSuffix(got, "enforce, hooks before_tool_call): default ruleset, allows every call and audits it") {
		t.Errorf("summary = %q", got)
	}
	if d := e.BeforeToolCall(context.Background(), call("")); d.Decision != policies.Allow {
		t.Fatalf("decision = %+v, want allow", d)
	}
	if rs := audit.records(); len(rs) != 1 || rs[0].Module != "rules" || rs[0].Decision != "allow" {
		t.Fatalf("audit = %+v", rs)
	}
}

// TestAuditTapSeesEveryRecord: the tap gets the same records as the
// audit log, after it.
func TestAuditTapSeesEveryRecord(t *testing.T) {
	t.Parallel()
	audit, tap := &sink{}, &sink{}
	e, _ := load(t, engine.Options{Audit: audit, AuditTap: tap})
	for range 3 {
		e.BeforeToolCall(context.Background(), call(""))
	}
	a, b := audit.records(), tap.records()
	if len(a) != 3 || len(b) != 3 || b[2].Module != "rules" || b[2].Decision != "allow" {
		t.Fatalf("audit %d records, tap %d (%+v); want 3 and 3 allow by rules", len(a), len(b), b)
	}
}

func TestAuditModeRecordsButNeverBlocks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "hostile.wasm", fixture(t, "hostile"))
	pf := writeFile(t, dir, "policy.json", []byte(`{"modules":[{"source":"hostile.wasm","mode":"audit"}]}`))
	audit := &sink{}
	e, _ := load(t, engine.Options{ConfigFile: pf, Audit: audit})
	for _, marker := range []string{"hostile_block", "hostile_trap"} {
		if d := e.BeforeToolCall(context.Background(), call(marker)); d.Decision != policies.Allow {
			t.Errorf("%s: decision = %+v, want allow (audit mode)", marker, d)
		}
	}
	rs := audit.records()
	if len(rs) != 2 || rs[0].Mode != policies.AuditOnly || rs[0].Decision != "block" || rs[0].Reason != "hostile says no" ||
		rs[1].Decision != "block" || !strings.Contains(rs[1].Error, "unreachable") {
		t.Fatalf("audit = %+v", rs)
	}
}

// A module's openclaw_policy.log lines reach the engine's Logger with the
// module's name, when no Host.Logger is given: the path of every surface
// (serve, proxy, mcp call) and of a reload.
func TestGuestLogReachesLogger(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "hostile.wasm", fixture(t, "hostile"))
	pf := writeFile(t, dir, "policy.json", []byte(`{"modules":[{"name":"loud","source":"hostile.wasm"}]}`))
	e, logs := load(t, engine.Options{ConfigFile: pf})
	if d := e.BeforeToolCall(context.Background(), call("hostile_log")); d.Decision != policies.Allow {
		t.Fatalf("decision = %+v", d)
	}
	if !strings.Contains(logs.String(), `level=INFO msg="hello from the guest" module=loud`) {
		t.Fatalf("logs %q lack the guest's line", logs.String())
	}
	// A reloaded module logs the same way.
	replaceFile(t, pf, []byte(`{"modules":[{"name":"louder","source":"hostile.wasm"}]}`))
	if _, err := e.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.BeforeToolCall(context.Background(), call("hostile_log"))
	if !strings.Contains(logs.String(), `level=INFO msg="hello from the guest" module=louder`) {
		t.Fatalf("logs %q lack the reloaded module's line", logs.String())
	}
}

func TestHooksSelectsTheChain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "hostile.wasm", fixture(t, "hostile"))
	// The module exports before_tool_call; listing it explicitly keeps it in
	// the chain, and the ABI order is kept whatever the listed order.
	pf := writeFile(t, dir, "policy.json", []byte(`{"modules":[{"source":"hostile.wasm","hooks":["before_tool_call"]}]}`))
	e, _ := load(t, engine.Options{ConfigFile: pf})
	if d := e.BeforeToolCall(context.Background(), call("hostile_block")); d.Decision != policies.Block || d.Module != "hostile" {
		t.Fatalf("decision = %+v", d)
	}
	var outs []string
	err := e.CallHook(context.Background(), policies.HookBeforeToolCall, []byte(`{"abi":1,"session_key":"hostile_echo"}`),
		func(m engine.ModuleInfo, out []byte, err error) bool {
			outs = append(outs, m.Name+"="+string(out))
			return true
		})
	if err != nil || len(outs) != 1 || outs[0] != `hostile={"abi":1,"session_key":"hostile_echo"}` {
		t.Fatalf("CallHook = %v, %q", err, outs)
	}
}

func TestReloadSwapsChangedModule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := writeFile(t, dir, "p.wasm", fixture(t, "allow"))
	e, logs := load(t, engine.Options{Files: []string{p}, WatchDebounce: time.Millisecond})
	ctx := context.Background()
	if d := e.BeforeToolCall(ctx, call("hostile_block")); d.Decision != policies.Allow {
		t.Fatalf("before the swap: %+v", d)
	}

	// Unchanged bytes: nothing is swapped.
	res, err := e.Reload(ctx)
	if err != nil || res.Changed() || len(res.Unchanged) != 1 {
		t.Fatalf("reload of the same file = %+v, %v", res, err)
	}

	replaceFile(t, p, fixture(t, "hostile"))
	res, err = e.Reload(ctx)
	if err != nil || len(res.Swapped) != 1 || res.Swapped[0] != "p" || res.String() != "swapped p" {
		t.Fatalf("reload = %+v, %v", res, err)
	}
	if d := e.BeforeToolCall(ctx, call("hostile_block")); d.Decision != policies.Block || d.Reason != "hostile says no" || d.Module != "p" {
		t.Fatalf("after the swap: %+v", d)
	}
	if !strings.Contains(logs.String(), "policy reload: swapped p") {
		t.Errorf("log = %q", logs)
	}

	// A file that does not compile: the reload is refused, the old module
	// stays, and the log says why.
	replaceFile(t, p, []byte("\x00asm\x01\x00\x00\x00garbage"))
	if _, err := e.Reload(ctx); err == nil || !strings.Contains(err.Error(), `policy module "p"`) || !strings.Contains(err.Error(), "compiling") {
		t.Fatalf("reload of garbage: err = %v", err)
	}
	if d := e.BeforeToolCall(ctx, call("hostile_block")); d.Decision != policies.Block || d.Reason != "hostile says no" {
		t.Fatalf("after a failed reload: %+v, want the previous module's block", d)
	}
	if d := e.BeforeToolCall(ctx, call("")); d.Decision != policies.Allow {
		t.Fatalf("after a failed reload: %+v, want allow", d)
	}
	if l := logs.String(); !strings.Contains(l, "policy reload refused; the active policies stay in place") || !strings.Contains(l, `policy module \"p\"`) {
		t.Errorf("log = %q", l)
	}

	// A module over a load limit (a function declaring 2^32-1 locals) is
	// refused before it is compiled, naming the limit; the old module
	// stays.
	replaceFile(t, p, fixture(t, "locals"))
	_, err = e.Reload(ctx)
	if err == nil || !strings.Contains(err.Error(), `policy module "p"`) ||
		!strings.Contains(err.Error(), "exceeds the load limit of locals per function: 4294967295, over the limit of 50000") {
		t.Fatalf("reload of locals.wasm: err = %v", err)
	}
	if d := e.BeforeToolCall(ctx, call("hostile_block")); d.Decision != policies.Block || d.Reason != "hostile says no" {
		t.Fatalf("after a refused reload: %+v, want the previous module's block", d)
	}
}

func TestReloadPolicyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "hostile.wasm", fixture(t, "hostile"))
	block := `{"modules":[{"source":"builtin:rules","config":{"default":"allow","rules":[{"tool":"events_poll","decision":"block","reason":"no polling"}]}}]}`
	pf := writeFile(t, dir, "policy.json", []byte(block))
	e, _ := load(t, engine.Options{ConfigFile: pf})
	ctx := context.Background()
	if d := e.BeforeToolCall(ctx, call("")); d.Decision != policies.Block || d.Reason != "no polling" {
		t.Fatalf("decision = %+v", d)
	}
	for _, step := range []struct {
		name, policy string
		want         engine.ReloadResult
		outcome      policies.Decision
	}{
		{"config change", `{"modules":[{"source":"builtin:rules","config":{"default":"allow"}}]}`,
			engine.ReloadResult{Swapped: []string{"rules"}}, policies.Allow},
		{"module added", `{"modules":[{"source":"builtin:rules","config":{"default":"allow"}},{"source":"hostile.wasm"}]}`,
			engine.ReloadResult{Added: []string{"hostile"}, Unchanged: []string{"rules"}}, policies.Block},
		{"mode change only", `{"modules":[{"source":"builtin:rules","config":{"default":"allow"}},{"source":"hostile.wasm","mode":"audit"}]}`,
			engine.ReloadResult{Reconfigured: []string{"hostile"}, Unchanged: []string{"rules"}}, policies.Allow},
		{"module removed, mode back to enforce", `{"modules":[{"source":"hostile.wasm"}]}`,
			engine.ReloadResult{Removed: []string{"rules"}, Reconfigured: []string{"hostile"}}, policies.Block},
		{"order change", `{"modules":[{"source":"builtin:rules"},{"source":"hostile.wasm"}]}`,
			engine.ReloadResult{Added: []string{"rules"}, Unchanged: []string{"hostile"}}, policies.Block},
		{"swap positions", `{"modules":[{"source":"hostile.wasm"},{"source":"builtin:rules"}]}`,
			engine.ReloadResult{Reconfigured: []string{"hostile", "rules"}}, policies.Block},
	} {
		replaceFile(t, pf, []byte(step.policy))
		res, err := e.Reload(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if a, b := mustJSON(t, res), mustJSON(t, step.want); a != b {
			t.Errorf("%s: result %s, want %s", step.name, a, b)
		}
		if d := e.BeforeToolCall(ctx, call("hostile_block")); d.Decision != step.outcome {
			t.Errorf("%s: decision %+v, want %s", step.name, d, step.outcome)
		}
	}
	replaceFile(t, pf, []byte(`{"modules":[{"source":"hostile.wasm","mdoe":"audit"}]}`))
	if _, err := e.Reload(ctx); err == nil || !strings.Contains(err.Error(), `unknown field "mdoe"`) {
		t.Fatalf("typo in the policy file: %v", err)
	}
	if mods := e.Modules(); len(mods) != 2 || mods[0].Name != "hostile" || mods[1].Name != "rules" || mods[0].Mode != policies.Enforce {
		t.Fatalf("modules after a refused reload = %+v", mods)
	}
}

// TestReloadFrom: the set swaps to another policy file, which later
// reloads read, and its audit records name the bundle digest given with
// it; a file that does not load leaves the set, the file and the digest in
// place.
func TestReloadFrom(t *testing.T) {
	t.Parallel()
	rules := func(reason string) []byte {
		return []byte(`{"modules":[{"source":"builtin:rules","config":{"default":"allow","rules":[{"tool":"events_poll","decision":"block","reason":"` + reason + `"}]}}]}`)
	}
	a := writeFile(t, t.TempDir(), "policy.json", rules("a"))
	b := writeFile(t, t.TempDir(), "policy.json", rules("b"))
	bad := writeFile(t, t.TempDir(), "policy.json", []byte(`{"modules":[{"source":"missing.wasm"}]}`))
	audit := &sink{}
	e, _ := load(t, engine.Options{ConfigFile: a, Audit: audit})
	ctx := context.Background()
	lastBundle := func() string {
		t.Helper()
		rs := audit.records()
		if len(rs) == 0 {
			t.Fatal("no audit record")
		}
		return rs[len(rs)-1].BundleDigest
	}
	e.BeforeToolCall(ctx, call(""))
	if got := lastBundle(); got != "" {
		t.Fatalf("a plain policy file's record names bundle %q", got)
	}
	const digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	if _, err := e.ReloadFrom(ctx, b, digestB, nil); err != nil {
		t.Fatal(err)
	}
	if d := e.BeforeToolCall(ctx, call("")); d.Reason != "b" {
		t.Fatalf("after ReloadFrom(b): %+v", d)
	}
	if got := lastBundle(); got != digestB {
		t.Fatalf("after ReloadFrom(b): bundle_digest %q, want %q", got, digestB)
	}
	if _, err := e.ReloadFrom(ctx, bad, "sha256:0000000000000000000000000000000000000000000000000000000000000000", nil); err == nil || !strings.Contains(err.Error(), "missing.wasm") {
		t.Fatalf("ReloadFrom(bad): %v", err)
	}
	replaceFile(t, b, rules("b2"))
	if _, err := e.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if d := e.BeforeToolCall(ctx, call("")); d.Reason != "b2" {
		t.Fatalf("a reload after a refused ReloadFrom reads %+v, want b's file", d)
	}
	if got := lastBundle(); got != digestB {
		t.Fatalf("a reload after a refused ReloadFrom: bundle_digest %q, want %q", got, digestB)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSwapUnderLoad swaps the module back and forth while calls run: every
// decision is the old module's or the new one's, never a failure from a
// module closed under a call.
func TestSwapUnderLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := writeFile(t, dir, "p.wasm", fixture(t, "allow"))
	// A generous deadline: this test is about atomicity, and a shared CI
	// machine under -race must not turn a slow call into a failure.
	e, _ := load(t, engine.Options{Files: []string{p}, Host: wasmhost.Options{CallTimeout: 10 * time.Second}})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	seen := make([]map[string]bool, 4)
	for i := range seen {
		seen[i] = map[string]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				d := e.BeforeToolCall(context.Background(), call("hostile_block"))
				seen[i][string(d.Decision)] = true
				if d.Decision != policies.Allow && d.Reason != "hostile says no" {
					select {
					case errs <- d.Message():
					default:
					}
					return
				}
			}
		}()
	}
	for i := range 20 {
		next := "hostile"
		if i%2 == 1 {
			next = "allow"
		}
		replaceFile(t, p, fixture(t, next))
		if _, err := e.Reload(context.Background()); err != nil {
			t.Error(err)
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Errorf("a call saw neither module: %s", msg)
	}
}

func TestWatchSwapsOnFileChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := writeFile(t, dir, "p.wasm", fixture(t, "allow"))
	e, logs := load(t, engine.Options{Files: []string{p}, WatchDebounce: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan error, 1)
	go func() { watched <- e.Watch(ctx) }()
	defer func() {
		cancel()
		if err := <-watched; err != nil {
			t.Error(err)
		}
	}()
	// The watcher may not have started yet when the file changes: keep
	// replacing it until the decision flips (a condition, not a timing).
	waitFor := func(what string, ok func() bool, change func()) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s never happened; log:\n%s", what, logs)
			}
			change()
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("the swap to hostile", func() bool {
		return e.BeforeToolCall(context.Background(), call("hostile_block")).Decision == policies.Block
	}, func() { replaceFile(t, p, fixture(t, "hostile")) })

	waitFor("the refusal of a broken file", func() bool {
		return strings.Contains(logs.String(), "policy reload refused")
	}, func() { replaceFile(t, p, []byte("not wasm")) })
	if d := e.BeforeToolCall(context.Background(), call("hostile_block")); d.Reason != "hostile says no" {
		t.Fatalf("after a broken file: %+v, want the previous module", d)
	}

	waitFor("the refusal of a module over a load limit", func() bool {
		return strings.Contains(logs.String(), "load limit of locals per function")
	}, func() { replaceFile(t, p, fixture(t, "locals")) })
	if d := e.BeforeToolCall(context.Background(), call("hostile_block")); d.Reason != "hostile says no" {
		t.Fatalf("after a module over a load limit: %+v, want the previous module", d)
	}
}

func TestClosedEngineBlocks(t *testing.T) {
	t.Parallel()
	e, err := engine.Load(context.Background(), &engine.Options{Audit: &sink{}, Host: testHost()})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	d := e.BeforeToolCall(context.Background(), call(""))
	if d.Decision != policies.Block || d.Message() != `blocked by policy "engine": engine: policy engine is closed` {
		t.Fatalf("decision after Close = %+v", d)
	}
	if _, err := e.Reload(context.Background()); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Reload after Close = %v", err)
	}
}

func TestReadModule(t *testing.T) {
	t.Parallel()
	wasm, cfg, err := engine.ReadModule("builtin:rules")
	if err != nil || !bytes.Equal(wasm, builtin.Rules()) || string(cfg) != builtin.DefaultRulesConfig {
		t.Fatalf("ReadModule(builtin:rules) = %d bytes, %s, %v", len(wasm), cfg, err)
	}
	if _, _, err := engine.ReadModule("builtin:nope"); err == nil || !strings.Contains(err.Error(), "unknown built-in") {
		t.Fatalf("unknown built-in: %v", err)
	}
}

// TestWatchFollowsSymlinkSwap replaces a module the way a Kubernetes
// ConfigMap does: the module path is a symlink through "..data", and an
// update points "..data" at a new folder by a rename.
func TestWatchFollowsSymlinkSwap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "v1"), filepath.Join(dir, "v2")
	for _, d := range []string{v1, v2} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, v1, "p.wasm", fixture(t, "allow"))
	writeFile(t, v2, "p.wasm", fixture(t, "hostile"))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("v1", filepath.Join(dir, "..data")))
	must(os.Symlink(filepath.Join("..data", "p.wasm"), filepath.Join(dir, "p.wasm")))
	e, logs := load(t, engine.Options{Files: []string{filepath.Join(dir, "p.wasm")}, WatchDebounce: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan error, 1)
	go func() { watched <- e.Watch(ctx) }()
	defer func() {
		cancel()
		if err := <-watched; err != nil {
			t.Error(err)
		}
	}()
	target := "v2"
	deadline := time.Now().Add(20 * time.Second)
	for e.BeforeToolCall(context.Background(), call("hostile_block")).Decision != policies.Block {
		if time.Now().After(deadline) {
			t.Fatalf("the symlink swap was never seen; log:\n%s", logs)
		}
		// Swap "..data" atomically; again until the watcher has started.
		tmp := filepath.Join(dir, "..data_tmp")
		_ = os.Remove(tmp)
		must(os.Symlink(target, tmp))
		must(os.Rename(tmp, filepath.Join(dir, "..data")))
		time.Sleep(50 * time.Millisecond)
	}
}

// NamingModule keeps catalogs named when the configured set has no
// sanitize_tool_names module in enforce mode, on load and on every reload;
// a set that names tools itself gets none added.
func TestNamingModule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rulesOnly := `{"modules":[{"source":"builtin:rules"}]}`
	withNames := `{"modules":[{"source":"builtin:rules"},{"name":"names","source":"builtin:sanitizer"}]}`
	pf := writeFile(t, dir, "policy.json", []byte(rulesOnly))
	req := &policies.SanitizeRequest{Servers: []policies.SanitizeServer{{Name: "my docs", Tools: []string{"search pages"}}}}
	ctx := context.Background()

	bare, _ := load(t, engine.Options{ConfigFile: pf})
	if _, err := bare.SanitizeToolNames(ctx, req); !errors.Is(err, policies.ErrNoSanitizer) {
		t.Fatalf("without NamingModule: %v, want ErrNoSanitizer", err)
	}

	e, _ := load(t, engine.Options{ConfigFile: pf, NamingModule: "builtin:sanitizer"})
	names := func(step string) []string {
		t.Helper()
		var out []string
		for _, m := range e.Modules() {
			out = append(out, fmt.Sprintf("%s default=%v", m.Name, m.Default))
		}
		res, err := e.SanitizeToolNames(ctx, req)
		if err != nil || res.Servers[0].Safe != "my-docs" || res.Servers[0].Tools[0].Name != "my-docs__search-pages" {
			t.Fatalf("%s: names %+v, %v", step, res, err)
		}
		return out
	}
	if got := names("load"); !slices.Equal(got, []string{"rules default=false", "sanitizer default=true"}) {
		t.Errorf("load: modules %v", got)
	}
	for _, step := range []struct {
		name, policy string
		want         engine.ReloadResult
		modules      []string
	}{
		{"the file names tools", withNames, engine.ReloadResult{Added: []string{"names"}, Removed: []string{"sanitizer"}, Unchanged: []string{"rules"}},
			[]string{"rules default=false", "names default=false"}},
		{"the file names none again", rulesOnly, engine.ReloadResult{Added: []string{"sanitizer"}, Removed: []string{"names"}, Unchanged: []string{"rules"}},
			[]string{"rules default=false", "sanitizer default=true"}},
	} {
		replaceFile(t, pf, []byte(step.policy))
		res, err := e.Reload(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if a, b := mustJSON(t, res), mustJSON(t, step.want); a != b {
			t.Errorf("%s: result %s, want %s", step.name, a, b)
		}
		if got := names(step.name); !slices.Equal(got, step.modules) {
			t.Errorf("%s: modules %v, want %v", step.name, got, step.modules)
		}
	}
}

// A module whose load outlasts ProgressAfter is announced while it
// compiles, then said done, in that order, naming the module.
func TestSlowLoadIsAnnounced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pf := writeFile(t, dir, "policy.json", []byte(`{"modules":[{"name":"slowpoke","source":"builtin:rules"}]}`))
	_, logs := load(t, engine.Options{ConfigFile: pf, ProgressAfter: time.Nanosecond})
	out := logs.String()
	i, j := strings.Index(out, `msg="compiling policy module" module=slowpoke source=builtin:rules bytes=`), strings.Index(out, `msg="policy module compiled" module=slowpoke took=`)
	if i < 0 || j < i || !strings.Contains(out[j:], " ok=true") {
		t.Fatalf("log:\n%s\nwant the compiling line, then the compiled line", out)
	}
}
