package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Defaults applied to zero fields of [Options].
const (
	DefaultMemoryLimitPages = 256 // 16 MiB
	DefaultCallTimeout      = 100 * time.Millisecond
	DefaultInitTimeout      = time.Second
	DefaultMaxResultBytes   = 1 << 20 // 1 MiB
	DefaultOutputLimit      = 4 << 10 // 4 KiB
)

// Names of the host modules a guest may import.
const (
	// WASIModule is the only WASI version provided, with no capabilities.
	WASIModule = wasi_snapshot_preview1.ModuleName
	// LogModule provides log(level i32, ptr i32, len i32).
	LogModule = "openclaw_policy"
)

const (
	pageSize        = 65536
	minInputBuffer  = 4 << 10
	maxLogsPerCall  = 64
	maxLogMessage   = 1 << 10
	maxMemoryPages  = 65536
	wasmExportAlloc = "alloc"
	wasmExportFree  = "free"
	wasmExportInit  = "_initialize"
	wasmExportMem   = "memory"
)

// Options configure a [Module]. Options are copied by [Load]; every zero
// value means the documented default, so a nil *Options is valid.
type Options struct {
	// MemoryLimitPages caps each instance's linear memory, in 64 KiB pages.
	// 0 means DefaultMemoryLimitPages (256 pages = 16 MiB); the maximum is
	// 65536 (4 GiB). A module whose initial memory is over the cap fails
	// to load; a guest that grows past it gets -1 from memory.grow, and a
	// trap after that is reported as KindMemoryLimit.
	MemoryLimitPages uint32
	// CallTimeout bounds every guest call made by [Module.CallBytes] and
	// [Module.Call], in CPU time of the OS thread running the guest (see
	// [Deadline]): the guest is interrupted once it has run that long, or
	// once [WallCap] (max(10 × CallTimeout, 2 s)) of wall time has passed
	// while it waited for a CPU. 0 means DefaultCallTimeout (100 ms). A
	// shorter deadline on the caller's context also applies, as wall time.
	CallTimeout time.Duration
	// InitTimeout bounds the creation of one instance: instantiation,
	// _initialize and the Init hook, in CPU time with a wall-clock cap like
	// CallTimeout. 0 means DefaultInitTimeout (1 s).
	InitTimeout time.Duration
	// MaxResultBytes caps the length of a result buffer read back from the
	// guest. 0 means DefaultMaxResultBytes (1 MiB).
	MaxResultBytes uint32
	// PoolSize is the maximum number of instances, and so of concurrent
	// calls; callers beyond it wait on their context. 0 means
	// runtime.GOMAXPROCS(0).
	PoolSize int
	// Logger receives the guest's openclaw_policy.log records (at most 64
	// per call, each cut to 1 KiB) with a "module" attribute, rate-limited
	// per module ([GuestLog]). nil discards.
	Logger *slog.Logger
	// OutputLimit is how many bytes of the guest's WASI stdout and stderr
	// are kept per call (the tail), to be attached to an [Error]. 0 means
	// DefaultOutputLimit (4 KiB). Guest output never reaches the process's
	// own stdout or stderr.
	OutputLimit int
	// ErrorExport, when set, names an export () -> i64 that returns a
	// packed ptr<<32|len UTF-8 message. When a byte call returns 0 and the
	// module exports it, it is called on the same instance and the call
	// fails with a KindABI error carrying the message; without it, or when
	// ErrorExport is "", a 0 result is returned as (nil, nil).
	ErrorExport string
	// Init, when set, runs once on every new instance after _initialize
	// and before its first call (the policy ABI uses it for configure). An
	// error refuses the instance: Load fails with it for the first
	// instance, a later call for later ones.
	Init func(ctx context.Context, inst *Instance) error

	// clock and wallCap replace the thread CPU clock and WallCap in
	// internal tests; zero values mean the real ones.
	clock   threadClock
	wallCap time.Duration
	// noInterrupt and noDeadline take out wazero's close-on-done and the
	// call Deadline, for benchmarks that measure their cost only: a
	// guest that loops is then never interrupted.
	noInterrupt, noDeadline bool
}

// Module is one compiled guest module with its own wazero Runtime and a
// bounded pool of instances. It is safe for concurrent use; each instance
// serves one call at a time and is discarded after any error.
type Module struct {
	name     string
	opts     Options
	rt       *Runtime
	compiled wazero.CompiledModule
	funcs    map[string]FuncType
	wasi     bool

	pool *Pool[*Instance]
	log  *GuestLog // openclaw_policy.log; nil discards

	byMod sync.Map // api.Module -> *Instance, for host functions

	closeOnce sync.Once
	closeErr  error
}

// FuncType is the signature of an exported function.
type FuncType struct {
	Params  []api.ValueType
	Results []api.ValueType
}

func (f FuncType) is(params, results []api.ValueType) bool {
	return equalTypes(f.Params, params) && equalTypes(f.Results, results)
}

func equalTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var (
	sigBytes = FuncType{Params: []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, Results: []api.ValueType{api.ValueTypeI64}}
	sigAlloc = FuncType{Params: []api.ValueType{api.ValueTypeI32}, Results: []api.ValueType{api.ValueTypeI32}}
	sigFree  = FuncType{Params: []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}}
	sigLog   = FuncType{Params: []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}}
)

// Load checks wasm against the load limits and compiles it in a new
// [Runtime] (compiler mode, close on context done, the memory cap), links the host modules it imports (WASI
// with no capabilities, openclaw_policy.log), and pre-warms one instance,
// running _initialize and opts.Init on it. name identifies the module in
// errors and logs. The module must export its linear memory as "memory"
// and may import nothing else: an unknown import fails the load with an
// error naming it. All errors are *Error of KindLoad, or the Init hook's
// error.
func Load(ctx context.Context, name string, wasm []byte, opts *Options) (*Module, error) {
	m := &Module{name: name}
	if opts != nil {
		m.opts = *opts
	}
	o := &m.opts
	if o.MemoryLimitPages == 0 {
		o.MemoryLimitPages = DefaultMemoryLimitPages
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.InitTimeout <= 0 {
		o.InitTimeout = DefaultInitTimeout
	}
	if o.MaxResultBytes == 0 {
		o.MaxResultBytes = DefaultMaxResultBytes
	}
	if o.PoolSize <= 0 {
		o.PoolSize = runtime.GOMAXPROCS(0)
	}
	if o.OutputLimit <= 0 {
		o.OutputLimit = DefaultOutputLimit
	}

	rt, err := NewRuntime(ctx, name, o.MemoryLimitPages, !o.noInterrupt)
	if err != nil {
		return nil, err
	}
	m.rt = rt
	m.pool = NewPool(name, o.PoolSize, m.newInstance, m.discard)
	m.log = NewGuestLog(o.Logger, name)

	if err := m.link(ctx, wasm); err != nil {
		return nil, errors.Join(err, m.closeRuntime(ctx))
	}
	inst, err := m.newInstance(ctx)
	if err != nil {
		return nil, errors.Join(err, m.closeRuntime(ctx))
	}
	m.pool.Put(inst)
	return m, nil
}

// link compiles the module, checks its imports and exports, and
// instantiates the host modules it needs.
func (m *Module) link(ctx context.Context, wasm []byte) error {
	compiled, _, err := m.rt.Compile(ctx, wasm)
	if err != nil {
		return err
	}
	m.compiled = compiled
	needLog := false
	for _, def := range compiled.ImportedFunctions() {
		mod, fn, _ := def.Import()
		ft := FuncType{Params: def.ParamTypes(), Results: def.ResultTypes()}
		switch {
		case mod == WASIModule:
			m.wasi = true
		case mod == LogModule && fn == "log" && ft.is(sigLog.Params, sigLog.Results):
			needLog = true
		case mod == LogModule && fn == "log":
			return errorf(m.name, "", KindLoad, "import %q.%q has signature %s, want (i32, i32, i32) -> ()", mod, fn, ft)
		default:
			return errorf(m.name, "", KindLoad, "unsupported import %q.%q: only %s (with no capabilities) and %s.log are provided", mod, fn, WASIModule, LogModule)
		}
	}
	for _, def := range compiled.ImportedMemories() {
		mod, n, _ := def.Import()
		return errorf(m.name, "", KindLoad, "unsupported import %q.%q: a module must define its own memory", mod, n)
	}
	mem, ok := compiled.ExportedMemories()[wasmExportMem]
	if !ok {
		return errorf(m.name, "", KindLoad, "no exported memory named %q", wasmExportMem)
	}
	if limit := m.opts.MemoryLimitPages; mem.Min() > limit {
		return errorf(m.name, "", KindLoad, "initial memory of %d pages is over the cap of %d pages (%d MiB)", mem.Min(), limit, uint64(limit)*pageSize>>20)
	}
	m.funcs = make(map[string]FuncType)
	for n, def := range compiled.ExportedFunctions() {
		m.funcs[n] = FuncType{Params: def.ParamTypes(), Results: def.ResultTypes()}
	}
	if ft, ok := m.funcs[wasmExportAlloc]; ok && !ft.is(sigAlloc.Params, sigAlloc.Results) {
		return errorf(m.name, "", KindLoad, "export %q has signature %s, want (i32) -> (i32)", wasmExportAlloc, ft)
	}
	if ft, ok := m.funcs[wasmExportFree]; ok && !ft.is(sigFree.Params, sigFree.Results) {
		return errorf(m.name, "", KindLoad, "export %q has signature %s, want (i32, i32) -> ()", wasmExportFree, ft)
	}
	if m.wasi {
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, m.rt.Wazero()); err != nil {
			return &Error{Module: m.name, Kind: KindLoad, Err: fmt.Errorf("instantiating WASI: %w", err)}
		}
	}
	if needLog {
		_, err := m.rt.Wazero().NewHostModuleBuilder(LogModule).
			NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(m.hostLog), sigLog.Params, nil).
			WithParameterNames("level", "ptr", "len").
			Export("log").
			Instantiate(ctx)
		if err != nil {
			return &Error{Module: m.name, Kind: KindLoad, Err: fmt.Errorf("instantiating %s: %w", LogModule, err)}
		}
	}
	return nil
}

// String formats a signature as "(i32, i32) -> (i64)".
func (f FuncType) String() string {
	return "(" + typeList(f.Params) + ") -> (" + typeList(f.Results) + ")"
}

func typeList(ts []api.ValueType) string {
	s := ""
	for i, t := range ts {
		if i > 0 {
			s += ", "
		}
		s += api.ValueTypeName(t)
	}
	return s
}

// Name returns the module's configured name.
func (m *Module) Name() string { return m.name }

// Func returns the signature of the exported function name, if the module
// exports it.
func (m *Module) Func(name string) (FuncType, bool) {
	ft, ok := m.funcs[name]
	return ft, ok
}

// Options returns the module's options with defaults applied.
func (m *Module) Options() Options { return m.opts }

// CallBytes runs export, a function (ptr i32, len i32) -> i64, on an
// instance from the pool: input is copied into the instance's input buffer
// (obtained from the guest's alloc and kept for later calls), the export is
// called once under the call deadline, and the packed result ptr<<32|len is
// bounds-checked and copied out. A result of 0 returns (nil, nil): the
// caller decides what "no output" means. It waits for a free instance while
// the pool is full, until ctx is done. Any error is an *Error, and the
// instance that failed is discarded.
func (m *Module) CallBytes(ctx context.Context, export string, input []byte) ([]byte, error) {
	return m.CallBytesChecked(ctx, export, input, nil)
}

// CallBytesChecked is CallBytes with check run on the output before the
// instance goes back to the pool. An error from check means the guest
// misbehaved: the instance is discarded like after a trap, and the error
// is returned, as a KindABI *Error naming the module and export unless it
// already is an *Error. check may be nil.
func (m *Module) CallBytesChecked(ctx context.Context, export string, input []byte, check func(out []byte) error) ([]byte, error) {
	inst, err := m.pool.Acquire(ctx, export)
	if err != nil {
		return nil, err
	}
	cctx, dl := m.callDeadline(ctx, inst)
	out, err := inst.callBytes(cctx, ctx, export, input)
	dl.Stop()
	if err == nil && check != nil {
		if cerr := check(out); cerr != nil {
			var e *Error
			if !errors.As(cerr, &e) {
				cerr = &Error{Module: m.name, Export: export, Kind: KindABI, Err: cerr}
			}
			inst.broken = true
			err = cerr
		}
	}
	m.release(ctx, inst, err)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Call calls export with raw parameters on an instance from the pool,
// under the call deadline, and returns its results. Like CallBytes it
// waits for a free instance until ctx is done, and discards an instance
// that failed.
func (m *Module) Call(ctx context.Context, export string, params ...uint64) ([]uint64, error) {
	inst, err := m.pool.Acquire(ctx, export)
	if err != nil {
		return nil, err
	}
	cctx, dl := m.callDeadline(ctx, inst)
	res, err := inst.callRaw(cctx, ctx, export, params)
	dl.Stop()
	m.release(ctx, inst, err)
	return res, err
}

// deadline starts the deadline of one guest call or instance creation.
func (m *Module) deadline(ctx context.Context, limit time.Duration) (context.Context, *Deadline) {
	if m.opts.noDeadline {
		return ctx, nil
	}
	return startDeadline(ctx, limit, m.opts.wallCap, m.opts.clock)
}

// callDeadline starts the deadline of one guest call on inst, with the
// Deadline (and timer) the instance keeps for its calls.
func (m *Module) callDeadline(ctx context.Context, inst *Instance) (context.Context, *Deadline) {
	if m.opts.noDeadline {
		return ctx, nil
	}
	return inst.dl.restart(ctx, m.opts.CallTimeout, m.opts.wallCap, m.opts.clock), &inst.dl
}

// release returns inst to the pool, or discards it after an error or when
// it is broken, and frees the pool slot.
func (m *Module) release(ctx context.Context, inst *Instance, err error) {
	m.pool.Release(ctx, inst, err != nil || inst.broken)
}

func (m *Module) discard(inst *Instance) {
	m.byMod.Delete(inst.mod)
	_ = inst.mod.Close(context.Background())
}

// newInstance instantiates the compiled module with no capabilities, runs
// _initialize and the Init hook, bounded by InitTimeout.
func (m *Module) newInstance(ctx context.Context) (*Instance, error) {
	ictx, dl := m.deadline(ctx, m.opts.InitTimeout)
	defer dl.Stop()
	inst := &Instance{m: m, fns: make(map[string]api.Function, 4)}
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions()
	if m.wasi {
		inst.output = &tailBuffer{limit: m.opts.OutputLimit}
		cfg = cfg.WithStdout(inst.output).WithStderr(inst.output)
	}
	mod, err := m.rt.Wazero().InstantiateModule(m.rt.MemoryContext(ictx, &inst.refusedGrow), m.compiled, cfg)
	if err != nil {
		if m.pool.Closing() {
			return nil, m.pool.ClosedError("")
		}
		if ctx.Err() == nil && ictx.Err() != nil {
			// The only guest code instantiation runs is the start function.
			return nil, &Error{Module: m.name, Kind: KindLoad, Err: wrapMsg(err, "instantiating: the start function timed out: %s", timeoutMessage(ictx, m.opts.InitTimeout))}
		}
		return nil, &Error{Module: m.name, Kind: KindLoad, Err: fmt.Errorf("instantiating: %w", err)}
	}
	inst.mod = mod
	inst.mem = mod.ExportedMemory(wasmExportMem)
	m.byMod.Store(api.Module(mod), inst)
	err = nil
	if _, ok := m.funcs[wasmExportInit]; ok {
		_, err = inst.callRaw(ictx, ctx, wasmExportInit, nil)
	}
	if err == nil && m.opts.Init != nil {
		err = m.opts.Init(ictx, inst)
	}
	if err != nil {
		m.discard(inst)
		return nil, InitError(m.name, ctx, ictx, m.opts.InitTimeout, err)
	}
	return inst, nil
}

// Close stops the module: new calls fail with ErrClosed at once, calls in
// flight may finish until ctx is done (then they are interrupted), and the
// Runtime and its instances are released. It
// is idempotent and safe for concurrent use; every call returns the first
// call's result.
func (m *Module) Close(ctx context.Context) error {
	m.closeOnce.Do(func() {
		m.pool.Shutdown(ctx)
		m.closeErr = m.closeRuntime(ctx)
	})
	return m.closeErr
}

func (m *Module) closeRuntime(ctx context.Context) error { return m.rt.Close(ctx) }
