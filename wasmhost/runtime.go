package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/openclaw-go/openclaw/wasmhost/wasmbin"
)

// Runtime is the sandbox one guest module runs in: its own wazero Runtime
// (compiler mode, with the process's in-memory compilation cache and none
// on disk), the load limits of [wasmbin.DefaultCaps] checked before anything is
// compiled, and the per-instance memory cap. [Load] makes one per
// [Module]; the OPA adapter makes one per OPA module. It is safe for
// concurrent use.
type Runtime struct {
	name  string
	rt    wazero.Runtime
	limit uint64 // bytes of linear memory per instance

	mu        sync.Mutex
	compiled  []wazero.CompiledModule // closed by Close: the shared cache keeps them until then
	compiling int                     // compilations in flight
	closed    bool                    // Close was called
	closeErr  chan error
}

// runtimeMu serializes the creation of wazero Runtimes: wazero v1.12
// memoizes its version string in an unguarded global the first time one
// is created, a data race when modules load concurrently.
var runtimeMu sync.Mutex

// compilationCache is shared by every Runtime of the process and lives in
// its memory only: a module whose bytes are already compiled in a live
// Runtime (a module reloaded while its previous version serves, the same
// file in several policy entries) is not compiled again. An entry is
// freed when the last Runtime that compiled it closes (Close closes its
// compiled modules). Nothing is read from or
// written to disk, where another process could plant native code.
var compilationCache = sync.OnceValue(wazero.NewCompilationCache)

// NewRuntime creates the Runtime of the module name (used in errors) with
// a memory cap of memoryLimitPages 64 KiB pages per instance (0 means
// DefaultMemoryLimitPages; over 65536 is an error). interrupt turns on
// wazero's WithCloseOnContextDone, so that a guest call ends when its
// context does; only benchmarks measuring its cost turn it off. Errors are
// *Error of KindLoad.
func NewRuntime(ctx context.Context, name string, memoryLimitPages uint32, interrupt bool) (*Runtime, error) {
	if memoryLimitPages == 0 {
		memoryLimitPages = DefaultMemoryLimitPages
	}
	if memoryLimitPages > maxMemoryPages {
		return nil, errorf(name, "", KindLoad, "memory limit of %d pages is over the maximum of %d", memoryLimitPages, maxMemoryPages)
	}
	// The wazero limit is the 4 GiB maximum: the cap is enforced by the
	// instances' memory allocator (memory.go), which sees every grow
	// request and so can report a refused one.
	runtimeMu.Lock()
	rc := wazero.NewRuntimeConfigCompiler().
		WithCloseOnContextDone(interrupt).
		WithMemoryLimitPages(maxMemoryPages).
		WithCompilationCache(compilationCache())
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	runtimeMu.Unlock()
	return &Runtime{name: name, rt: rt, limit: uint64(memoryLimitPages) * pageSize}, nil
}

// Wazero returns the wazero Runtime, to link host modules and instantiate
// compiled modules in.
func (r *Runtime) Wazero() wazero.Runtime { return r.rt }

// MemoryLimitPages returns the per-instance memory cap, in 64 KiB pages.
func (r *Runtime) MemoryLimitPages() uint32 { return uint32(r.limit / pageSize) }

// Compile checks wasm against the load limits ([wasmbin.DefaultCaps]:
// a module over one is refused naming the limit and the value) and
// compiles it. It returns as soon as ctx is done, with a KindCanceled
// error; wazero does not stop a compilation midway, so that compilation
// runs on in the background until it ends (the load limits bound it to a
// few seconds) and is then discarded. Other errors are *Error of
// KindLoad.
func (r *Runtime) Compile(ctx context.Context, wasm []byte) (wazero.CompiledModule, *wasmbin.Module, error) {
	shape, err := wasmbin.Parse(wasm, &wasmbin.DefaultCaps)
	if err != nil {
		var ce *wasmbin.CapError
		if errors.As(err, &ce) {
			return nil, nil, &Error{Module: r.name, Kind: KindLoad, Err: fmt.Errorf("refused before compiling: %w", err)}
		}
		return nil, nil, &Error{Module: r.name, Kind: KindLoad, Err: fmt.Errorf("compiling: %w", err)}
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, r.canceled(err)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, nil, errorf(r.name, "", KindClosed, "compiling: runtime closed")
	}
	r.compiling++
	r.mu.Unlock()
	type result struct {
		c   wazero.CompiledModule
		err error
	}
	done := make(chan result, 1) // never blocks the goroutine
	go func() {
		// The compiler gets a context without ctx's cancellation: it does
		// not check it, and a compilation left behind must end cleanly.
		c, err := r.rt.CompileModule(context.WithoutCancel(ctx), wasm)
		if c != nil {
			r.mu.Lock()
			r.compiled = append(r.compiled, c) // closed with the Runtime
			r.mu.Unlock()
		}
		done <- result{c, err}
		r.compileEnded()
	}()
	select {
	case res := <-done:
		if res.err != nil {
			return nil, nil, &Error{Module: r.name, Kind: KindLoad, Err: fmt.Errorf("compiling: %w", res.err)}
		}
		return res.c, shape, nil
	case <-ctx.Done():
		return nil, nil, r.canceled(ctx.Err())
	}
}

func (r *Runtime) canceled(err error) *Error {
	return &Error{Module: r.name, Kind: KindCanceled, Err: fmt.Errorf("compiling: %w", err)}
}

// compileEnded ends one compilation, and runs a Close that waited for it.
func (r *Runtime) compileEnded() {
	r.mu.Lock()
	r.compiling--
	run := r.closed && r.compiling == 0 && r.closeErr != nil
	r.mu.Unlock()
	if run {
		r.closeErr <- r.closeNow()
	}
}

// MemoryContext returns ctx carrying the memory allocator of one new
// instance: wazero.Runtime.InstantiateModule with it gives the instance's
// linear memory the cap, and a memory.grow over the cap fails (-1) and
// sets *refused to the size asked for, in bytes, so that the trap that
// usually follows can be reported as KindMemoryLimit.
func (r *Runtime) MemoryContext(ctx context.Context, refused *uint64) context.Context {
	return experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(func(_, _ uint64) experimental.LinearMemory {
		return &cappedMemory{limit: r.limit, refused: refused}
	}))
}

// Close releases the wazero Runtime and every instance in it. When a
// compilation abandoned by [Runtime.Compile] is still running, the
// release waits for it in the background and Close returns nil at once.
// It is idempotent; errors are *Error of KindClosed.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	if r.compiling > 0 {
		r.closeErr = make(chan error, 1)
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	return r.closeNow()
}

func (r *Runtime) closeNow() error {
	err := r.rt.Close(context.Background())
	// With a compilation cache, wazero keeps compiled code until every
	// CompiledModule of it is closed, not when the Runtime closes.
	r.mu.Lock()
	compiled := r.compiled
	r.compiled = nil
	r.mu.Unlock()
	for _, c := range compiled {
		_ = c.Close(context.Background())
	}
	if err != nil {
		return &Error{Module: r.name, Kind: KindClosed, Err: fmt.Errorf("closing runtime: %w", err)}
	}
	return nil
}
