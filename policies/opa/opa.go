// Package opa runs policies written in Rego and compiled by OPA
// (`opa build -t wasm`, OPA's Wasm ABI 1.x) as openclaw-go policy modules,
// unchanged: a loaded [*Module] is a [policies.BeforeToolCallHook], a
// [policies.SanitizeToolNamesHook] and a [policies.DecideApprovalHook],
// like a module of package wasmpolicy.
//
// An OPA module is not an "openclaw-policy v1" module (docs/policy-abi.md):
// it imports its memory as env.memory and its host functions from "env",
// and is evaluated through opa_eval. So this package hosts it on wazero
// directly, under the sandbox rules of package wasmhost, and reports every
// failure as a *wasmhost.Error naming the module:
//
//   - one wazero Runtime per module, compiler mode, interruption on
//     (WithCloseOnContextDone): every evaluation has a deadline
//     (Options.Host.CallTimeout, default 100 ms) in CPU time of the thread
//     that runs it, with a wall-clock cap (wasmhost.Deadline);
//   - a memory cap per instance (Options.Host.MemoryLimitPages, default 16
//     MiB); running out of it is wasmhost.ErrMemoryLimit;
//   - zero capabilities: the module may import only env.memory,
//     env.opa_abort, env.opa_println and env.opa_builtin0…4; no WASI, no
//     clock, no network. Of the OPA builtins that a compiled module leaves
//     to the host (its builtins() export: http.send, time.now_ns, sprintf,
//     …) only pure ones are provided ([ProvidedBuiltins]: sprintf), and a
//     module that needs another is refused at load, naming it;
//   - a bounded instance pool (Options.Host.PoolSize, default GOMAXPROCS),
//     one evaluation per instance at a time; an instance that failed in any
//     way is discarded, never reused.
//
// Entrypoints map to hook points (see [HookEntrypoint]): the Rego rules
// openclaw.before_tool_call, openclaw.sanitize_tool_names and
// openclaw.decide_approval (package openclaw, built with
// `-e openclaw/before_tool_call` …), or a single entrypoint named
// "decision" (or ending in "/decision") for before_tool_call. The input of
// each hook is the JSON the ABI hooks get, and the rule's value is the
// hook's output object; an undefined result fails closed. The module's
// JSON config becomes OPA's data document.
//
// Usage sketch:
//
//	if opa.IsModule(wasm) {
//		m, err := opa.Load(ctx, "rego", wasm, cfg, nil)
//		if err != nil { … }
//		defer m.Close(ctx)
//		chain := policies.NewChain([]policies.ChainEntry{{Hook: m}}, nil)
//	}
package opa

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// OPA Wasm ABI names (https://www.openpolicyagent.org/docs/wasm).
const (
	exportEval        = "opa_eval"
	exportMalloc      = "opa_malloc"
	exportJSONParse   = "opa_json_parse"
	exportJSONDump    = "opa_json_dump"
	exportHeapPtrGet  = "opa_heap_ptr_get"
	exportBuiltins    = "builtins"
	exportEntrypoints = "entrypoints"
	exportMemory      = "memory"
	globalABIVersion  = "opa_wasm_abi_version"
	globalABIMinor    = "opa_wasm_abi_minor_version"
	envModule         = "env"
	hostModule        = "openclaw_opa"
)

// The OPA Wasm ABI versions this host speaks: major 1, minor 2 or later
// (opa_eval, the one-call evaluation, arrived in 1.2).
const (
	ABIMajor    = 1
	ABIMinorMin = 2
)

// EntrypointPrefix is the Rego package path whose rules serve the hooks:
// the entrypoint "openclaw/before_tool_call" (rule before_tool_call of
// package openclaw) serves before_tool_call, and so on for every
// [policies.Hook].
const EntrypointPrefix = "openclaw/"

// DecisionEntrypoint is the last path segment of an entrypoint that serves
// before_tool_call when the module has no openclaw/before_tool_call: a
// module built with one entrypoint such as "mcp/policy/decision".
const DecisionEntrypoint = "decision"

const (
	pageSize       = 65536
	maxMemoryPages = 65536
	maxPrints      = 64
	maxPrintBytes  = 1 << 10
	maxAbortBytes  = 512
)

var hookOrder = []policies.Hook{policies.HookBeforeToolCall, policies.HookSanitizeToolNames, policies.HookDecideApproval}

// HookEntrypoint returns the default entrypoint of hook h:
// EntrypointPrefix + h, e.g. "openclaw/before_tool_call".
func HookEntrypoint(h policies.Hook) string { return EntrypointPrefix + string(h) }

// Options configure [Load]. A nil *Options means all defaults.
type Options struct {
	// Host holds the sandbox limits, with wasmhost's meaning and defaults:
	// MemoryLimitPages, CallTimeout (per evaluation), InitTimeout (per new
	// instance), MaxResultBytes (the evaluation's JSON result), PoolSize,
	// and Logger (receives the lines of env.opa_println, rate-limited as
	// wasmhost.GuestLog says). OutputLimit does not apply (an OPA
	// module has no stdout) and is ignored; Init and ErrorExport are the
	// ABI adapter's and must be left zero.
	Host wasmhost.Options
	// Entrypoints, when set, names the entrypoint that serves a hook,
	// overriding the defaults (EntrypointPrefix + hook, and a "decision"
	// entrypoint for before_tool_call). A named entrypoint the module does
	// not have fails the load.
	Entrypoints map[policies.Hook]string

	// noInterrupt turns interruption off, for benchmarks that measure its
	// cost only: the deadline is then not enforced.
	noInterrupt bool
}

// Module is a loaded OPA policy. It is safe for concurrent use.
type Module struct {
	name     string
	opts     wasmhost.Options
	data     []byte // the data document, JSON
	rt       *wasmhost.Runtime
	compiled wazero.CompiledModule
	shim     wazero.CompiledModule

	abiMinor    int32
	builtins    map[int32]string // host builtins the module calls, by its ids
	entrypoints map[string]int32
	hooks       map[policies.Hook]hookEntry

	pool *wasmhost.Pool[*instance]
	log  *wasmhost.GuestLog // print() lines; nil discards

	closeOnce sync.Once
	closeErr  error
}

type hookEntry struct {
	name string
	id   int32
}

// Load compiles an OPA Wasm module in its own sandboxed wazero Runtime,
// checks it (OPA ABI 1.2+, its imports, the builtins it needs, the
// entrypoints that serve hooks), and pre-warms one instance with config as
// OPA's data document (nil or empty means {}; otherwise it must be a JSON
// object). name is the module's configured name, used in every error,
// reason and audit record. Every error is a *wasmhost.Error of kind
// wasmhost.KindLoad naming the module, e.g.
//
//	wasm module "rego": needs OPA builtin "http.send", which this host does not provide
func Load(ctx context.Context, name string, wasm []byte, config json.RawMessage, opts *Options) (*Module, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Host.Init != nil || o.Host.ErrorExport != "" {
		return nil, loadErr(name, "options: Host.Init and Host.ErrorExport do not apply to OPA modules; leave them zero")
	}
	m := &Module{name: name, opts: o.Host, log: wasmhost.NewGuestLog(o.Host.Logger, name)}
	if err := m.setDefaults(); err != nil {
		return nil, err
	}
	data := bytes.TrimSpace(config)
	if len(data) == 0 {
		data = []byte("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil, loadErr(name, "config must be a JSON object (it becomes the policy's data document): %s", quote(data))
	}
	m.data = append([]byte(nil), data...)

	rt, err := wasmhost.NewRuntime(ctx, name, m.opts.MemoryLimitPages, !o.noInterrupt)
	if err != nil {
		return nil, err
	}
	m.rt = rt
	m.pool = wasmhost.NewPool(m.name, m.opts.PoolSize, m.newInstance, m.discard)
	if err := m.link(ctx, wasm); err != nil {
		return nil, errors.Join(err, m.closeRuntime(ctx))
	}
	inst, err := m.newInstance(ctx)
	if err != nil {
		return nil, errors.Join(err, m.closeRuntime(ctx))
	}
	if err := m.inspect(ctx, inst, o.Entrypoints); err != nil {
		m.discard(inst)
		return nil, errors.Join(err, m.closeRuntime(ctx))
	}
	m.pool.Put(inst)
	return m, nil
}

func (m *Module) setDefaults() error {
	o := &m.opts
	if o.MemoryLimitPages == 0 {
		o.MemoryLimitPages = wasmhost.DefaultMemoryLimitPages
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = wasmhost.DefaultCallTimeout
	}
	if o.InitTimeout <= 0 {
		o.InitTimeout = wasmhost.DefaultInitTimeout
	}
	if o.MaxResultBytes == 0 {
		o.MaxResultBytes = wasmhost.DefaultMaxResultBytes
	}
	if o.PoolSize <= 0 {
		o.PoolSize = runtime.GOMAXPROCS(0)
	}
	return nil
}

func loadErr(name, format string, args ...any) *wasmhost.Error {
	return &wasmhost.Error{Module: name, Kind: wasmhost.KindLoad, Err: fmt.Errorf(format, args...)}
}

// Function signatures the adapter calls, as wasmhost.FuncType strings.
var wantExports = []struct{ name, sig string }{
	{exportEval, "(i32, i32, i32, i32, i32, i32, i32) -> (i32)"},
	{exportMalloc, "(i32) -> (i32)"},
	{exportJSONParse, "(i32, i32) -> (i32)"},
	{exportJSONDump, "(i32) -> (i32)"},
	{exportHeapPtrGet, "() -> (i32)"},
	{exportBuiltins, "() -> (i32)"},
	{exportEntrypoints, "() -> (i32)"},
}

// link compiles the module, checks its imports and exports, instantiates
// the host functions and compiles the env shim.
func (m *Module) link(ctx context.Context, wasm []byte) error {
	if !IsModule(wasm) {
		return loadErr(m.name, "not an OPA Wasm module: no %q function and %q global exported (build it with `opa build -t wasm`)", exportEval, globalABIVersion)
	}
	compiled, _, err := m.rt.Compile(ctx, wasm)
	if err != nil {
		return err
	}
	m.compiled = compiled
	for _, def := range compiled.ImportedFunctions() {
		mod, fn, _ := def.Import()
		ft := wasmhost.FuncType{Params: def.ParamTypes(), Results: def.ResultTypes()}
		i := slices.IndexFunc(envFuncs, func(f envFunc) bool { return f.name == fn })
		if mod != envModule || i < 0 {
			return loadErr(m.name, "unsupported import %q.%q: an OPA module may import only env.memory, env.opa_abort, env.opa_println and env.opa_builtin0…4", mod, fn)
		}
		if want := envFuncs[i].sig(); ft.String() != want {
			return loadErr(m.name, "import %q.%q has signature %s, want %s", mod, fn, ft, want)
		}
	}
	minPages, maxPages, hasMax := uint32(0), uint32(0), false
	imported := compiled.ImportedMemories()
	for _, def := range imported {
		mod, n, _ := def.Import()
		if mod != envModule || n != exportMemory {
			return loadErr(m.name, "unsupported import %q.%q: an OPA module imports its memory as env.memory", mod, n)
		}
		minPages = def.Min()
		maxPages, hasMax = def.Max()
	}
	if len(imported) == 0 {
		return loadErr(m.name, "does not import env.memory, as every OPA Wasm module does")
	}
	if limit := m.opts.MemoryLimitPages; minPages > limit {
		return loadErr(m.name, "initial memory of %d pages is over the cap of %d pages (%d MiB)", minPages, limit, uint64(limit)*pageSize>>20)
	}
	funcs := compiled.ExportedFunctions()
	for _, w := range wantExports {
		def, ok := funcs[w.name]
		if !ok {
			return loadErr(m.name, "missing export %q %s", w.name, w.sig)
		}
		if ft := (wasmhost.FuncType{Params: def.ParamTypes(), Results: def.ResultTypes()}); ft.String() != w.sig {
			return loadErr(m.name, "export %q has signature %s, want %s", w.name, ft, w.sig)
		}
	}
	b := m.rt.Wazero().NewHostModuleBuilder(hostModule)
	for _, f := range envFuncs {
		params := make([]api.ValueType, f.params)
		for i := range params {
			params[i] = api.ValueTypeI32
		}
		var results []api.ValueType
		if f.results == 1 {
			results = []api.ValueType{api.ValueTypeI32}
		}
		b.NewFunctionBuilder().WithGoModuleFunction(m.hostFunc(f), params, results).Export(f.name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return loadErr(m.name, "instantiating the host functions: %w", err)
	}
	if m.shim, _, err = m.rt.Compile(ctx, shimModule(hostModule, minPages, maxPages, hasMax)); err != nil {
		return err
	}
	return nil
}

// sig is the signature of an env function as a wasmhost.FuncType string.
func (f envFunc) sig() string { return f.funcType().String() }

// inspect reads the ABI version, the builtins and the entrypoints from the
// first instance and maps entrypoints to hooks.
func (m *Module) inspect(ctx context.Context, inst *instance, override map[policies.Hook]string) error {
	ictx, dl := wasmhost.StartDeadline(inst.ctx(ctx), m.opts.InitTimeout)
	defer dl.Stop()
	major, ok1 := globalI32(inst.mod, globalABIVersion)
	minor, ok2 := globalI32(inst.mod, globalABIMinor)
	if !ok1 || !ok2 {
		return loadErr(m.name, "missing i32 globals %q and %q", globalABIVersion, globalABIMinor)
	}
	if major != ABIMajor || minor < ABIMinorMin {
		return loadErr(m.name, "OPA Wasm ABI version %d.%d is not supported (this host speaks %d.%d and later %d.x)", major, minor, ABIMajor, ABIMinorMin, ABIMajor)
	}
	m.abiMinor = minor

	var builtins map[string]int32
	if err := inst.dumpExport(ictx, exportBuiltins, &builtins); err != nil {
		return wasmhost.AsLoad(err)
	}
	m.builtins = make(map[int32]string, len(builtins))
	var missing []string
	for n, id := range builtins {
		if _, ok := hostBuiltins[n]; !ok {
			missing = append(missing, n)
			continue
		}
		m.builtins[id] = n
	}
	sort.Strings(missing)
	provided := "the host provides only " + quoteList(ProvidedBuiltins()) + ": no network, clock or randomness"
	switch {
	case len(missing) == 1:
		return loadErr(m.name, "needs OPA builtin %q, which this host does not provide (%s)", missing[0], provided)
	case len(missing) > 1:
		return loadErr(m.name, "needs OPA builtins %s, which this host does not provide (%s)", quoteList(missing), provided)
	}
	if len(m.builtins) > 0 && inst.valueDump == nil {
		return loadErr(m.name, "uses host builtins but does not export %q", exportValueDump)
	}

	if err := inst.dumpExport(ictx, exportEntrypoints, &m.entrypoints); err != nil {
		return wasmhost.AsLoad(err)
	}
	return m.mapHooks(override)
}

// mapHooks chooses the entrypoint of each hook.
func (m *Module) mapHooks(override map[policies.Hook]string) error {
	m.hooks = make(map[policies.Hook]hookEntry)
	for h, ep := range override {
		if !slices.Contains(hookOrder, h) {
			return loadErr(m.name, "options: unknown hook %q", h)
		}
		id, ok := m.entrypoints[ep]
		if !ok {
			return loadErr(m.name, "entrypoint %q for %s is not in the module (it has %s)", ep, h, quoteList(m.entrypointNames()))
		}
		m.hooks[h] = hookEntry{ep, id}
	}
	for _, h := range hookOrder {
		if _, ok := m.hooks[h]; ok {
			continue
		}
		if id, ok := m.entrypoints[HookEntrypoint(h)]; ok {
			m.hooks[h] = hookEntry{HookEntrypoint(h), id}
		}
	}
	if _, ok := m.hooks[policies.HookBeforeToolCall]; !ok {
		var found []string
		for _, ep := range m.entrypointNames() {
			if ep == DecisionEntrypoint || strings.HasSuffix(ep, "/"+DecisionEntrypoint) {
				found = append(found, ep)
			}
		}
		switch len(found) {
		case 0:
		case 1:
			m.hooks[policies.HookBeforeToolCall] = hookEntry{found[0], m.entrypoints[found[0]]}
		default:
			return loadErr(m.name, "several %q entrypoints could serve before_tool_call: %s; name one in the options", DecisionEntrypoint, quoteList(found))
		}
	}
	if len(m.hooks) == 0 {
		return loadErr(m.name, "no entrypoint serves a hook: want %s, %s, %s or a %q entrypoint (the module has %s)",
			HookEntrypoint(policies.HookBeforeToolCall), HookEntrypoint(policies.HookSanitizeToolNames),
			HookEntrypoint(policies.HookDecideApproval), DecisionEntrypoint, quoteList(m.entrypointNames()))
	}
	return nil
}

func (m *Module) entrypointNames() []string {
	names := make([]string, 0, len(m.entrypoints))
	for n := range m.entrypoints {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func globalI32(mod api.Module, name string) (int32, bool) {
	g := mod.ExportedGlobal(name)
	if g == nil || g.Type() != api.ValueTypeI32 {
		return 0, false
	}
	return int32(uint32(g.Get())), true
}

func quoteList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// quote quotes bytes for an error message, cut to 64 bytes.
func quote(b []byte) string {
	if len(b) > 64 {
		return fmt.Sprintf("%q…", b[:64])
	}
	return fmt.Sprintf("%q", b)
}

// Name returns the module's configured name.
func (m *Module) Name() string { return m.name }

// ABIVersion returns the module's OPA Wasm ABI version, e.g. "1.3".
func (m *Module) ABIVersion() string { return fmt.Sprintf("%d.%d", ABIMajor, m.abiMinor) }

// Has reports whether an entrypoint of the module serves hook h.
func (m *Module) Has(h policies.Hook) bool { _, ok := m.hooks[h]; return ok }

// Hooks returns the hooks the module serves, in ABI order.
func (m *Module) Hooks() []policies.Hook {
	var hs []policies.Hook
	for _, h := range hookOrder {
		if m.Has(h) {
			hs = append(hs, h)
		}
	}
	return hs
}

// Entrypoint returns the entrypoint that serves hook h, or "".
func (m *Module) Entrypoint(h policies.Hook) string { return m.hooks[h].name }

// Entrypoints returns the names of all the module's entrypoints, sorted.
func (m *Module) Entrypoints() []string { return m.entrypointNames() }

// hookInput is the JSON input of before_tool_call: "abi":1 followed by the
// fields of policies.ToolCall, as docs/policy-abi.md §4 gives it to every
// module.
type hookInput struct {
	ABI int `json:"abi"`
	*policies.ToolCall
}

// BeforeToolCall implements [policies.BeforeToolCallHook] with one
// evaluation of the before_tool_call entrypoint. The rule's value must be
// a decision object of docs/policy-abi.md §4, decoded strictly. On any
// failure (no such entrypoint, an undefined result, a trap or opa_abort,
// the deadline, the memory cap, a malformed or unknown decision) it
// returns a block verdict whose reason is the error's message, and the
// error (a *wasmhost.Error naming the module).
func (m *Module) BeforeToolCall(ctx context.Context, call *policies.ToolCall) (policies.Verdict, error) {
	v, err := m.beforeToolCall(ctx, call)
	if err != nil {
		return policies.Verdict{Decision: policies.Block, Reason: err.Error()}, err
	}
	return v, nil
}

func (m *Module) beforeToolCall(ctx context.Context, call *policies.ToolCall) (policies.Verdict, error) {
	const h = policies.HookBeforeToolCall
	in, err := json.Marshal(hookInput{ABI: 1, ToolCall: call})
	if err != nil {
		return policies.Verdict{}, &wasmhost.Error{Module: m.name, Export: string(h), Kind: wasmhost.KindABI,
			Err: fmt.Errorf("encoding the input: %w", err)}
	}
	var v policies.Verdict
	ctx = wasmhost.WithCaller(ctx, policies.RequesterKey(call.SessionKey, call.Caller))
	_, err = m.eval(ctx, h, in, func(out []byte) error {
		var err error
		v, err = wasmpolicy.DecodeVerdict(out)
		return err
	})
	return v, err
}

// CallHook evaluates the entrypoint serving hook h with input (the hook's
// JSON input, docs/policy-abi.md) and returns the rule's value as JSON,
// undecoded, with the containment of BeforeToolCall: an undefined result,
// a trap, the deadline or the memory cap is a *wasmhost.Error naming the
// module. It mirrors wasmpolicy.Module.CallHook (for `openclaw policy
// test` and bench).
func (m *Module) CallHook(ctx context.Context, h policies.Hook, input []byte) ([]byte, error) {
	return m.eval(ctx, h, input, nil)
}

// eval runs one evaluation of hook h on a pooled instance. check, when
// set, runs on the result before the instance returns to the pool; its
// error discards the instance.
func (m *Module) eval(ctx context.Context, h policies.Hook, input []byte, check func([]byte) error) ([]byte, error) {
	he, ok := m.hooks[h]
	if !ok {
		return nil, &wasmhost.Error{Module: m.name, Export: string(h), Kind: wasmhost.KindABI,
			Err: fmt.Errorf("no entrypoint serves %s (the module has %s)", h, quoteList(m.entrypointNames()))}
	}
	inst, err := m.pool.Acquire(ctx, string(h))
	if err != nil {
		return nil, err
	}
	cctx, dl := wasmhost.StartDeadline(inst.ctx(ctx), m.opts.CallTimeout)
	out, err := inst.evaluate(cctx, ctx, string(h), he, input)
	dl.Stop()
	if err == nil && check != nil {
		if cerr := check(out); cerr != nil {
			var e *wasmhost.Error
			if !errors.As(cerr, &e) {
				cerr = &wasmhost.Error{Module: m.name, Export: string(h), Kind: wasmhost.KindABI, Err: cerr}
			}
			err = cerr
		}
	}
	m.pool.Release(ctx, inst, err != nil)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (m *Module) discard(inst *instance) {
	ctx := context.Background()
	if inst.mod != nil {
		_ = inst.mod.Close(ctx)
	}
	if inst.env != nil {
		_ = inst.env.Close(ctx)
	}
}

// Close stops the module: new evaluations fail with wasmhost.ErrClosed at
// once, evaluations in flight may finish until ctx is done (then they are
// interrupted), and the Runtime and its instances are released. It is
// idempotent and safe for concurrent use; every call returns the first
// call's result.
func (m *Module) Close(ctx context.Context) error {
	m.closeOnce.Do(func() {
		m.pool.Shutdown(ctx)
		m.closeErr = m.closeRuntime(ctx)
	})
	return m.closeErr
}

func (m *Module) closeRuntime(ctx context.Context) error { return m.rt.Close(ctx) }

// logPrint sends one Rego print() line to the logger, at info level.
func (m *Module) logPrint(ctx context.Context, msg string) {
	m.log.Log(ctx, slog.LevelInfo, msg)
}

var _ policies.BeforeToolCallHook = (*Module)(nil)
