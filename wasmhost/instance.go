package wasmhost

import (
	"context"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero/api"
)

// Instance is one instantiated guest, handed to [Options.Init]. It is not
// safe for concurrent use, and must not be kept after Init returns: the
// pool owns it. Any failed call marks it broken, and it is then discarded.
type Instance struct {
	m      *Module
	mod    api.Module
	mem    api.Memory
	fns    map[string]api.Function
	stack  [2]uint64
	in     uint32 // guest address of the input buffer, 0 before the first input
	inCap  uint32
	output *tailBuffer // WASI stdout+stderr, nil without WASI
	logs   int         // openclaw_policy.log records in the current call
	abiErr error       // set by a host function before it traps the guest
	// refusedGrow is the size in bytes of a memory.grow refused by the cap
	// during the current call, 0 if none.
	refusedGrow uint64
	broken      bool
	dl          Deadline // bounds each call made through the Module
}

// MemorySize returns the size of the instance's linear memory in bytes.
func (i *Instance) MemorySize() uint32 { return i.mem.Size() }

// fn returns the cached api.Function for export (wazero allocates a new one
// per lookup).
func (i *Instance) fn(export string) api.Function {
	f, ok := i.fns[export]
	if !ok {
		f = i.mod.ExportedFunction(export)
		if f == nil {
			return nil
		}
		i.fns[export] = f
	}
	return f
}

// Call calls export with params and returns its results. ctx bounds the
// call (the caller applies any deadline); a missing export or a wrong
// number of parameters is a KindABI error.
func (i *Instance) Call(ctx context.Context, export string, params ...uint64) ([]uint64, error) {
	return i.callRaw(ctx, ctx, export, params)
}

func (i *Instance) callRaw(ctx, callerCtx context.Context, export string, params []uint64) ([]uint64, error) {
	ft, ok := i.m.funcs[export]
	if !ok {
		return nil, i.fail(errorf(i.m.name, export, KindABI, "no exported function %q", export))
	}
	if len(params) != len(ft.Params) {
		return nil, i.fail(errorf(i.m.name, export, KindABI, "called with %d parameters, signature is %s", len(params), ft))
	}
	stack := make([]uint64, max(len(ft.Params), len(ft.Results)))
	copy(stack, params)
	if err := i.call(ctx, callerCtx, export, stack); err != nil {
		return nil, err
	}
	return stack[:len(ft.Results)], nil
}

// call runs one export with stack as params and results. callerCtx is the
// context before the call deadline was added, to tell the two apart.
func (i *Instance) call(ctx, callerCtx context.Context, export string, stack []uint64) error {
	if i.broken {
		return errorf(i.m.name, export, KindABI, "instance already failed")
	}
	f := i.fn(export)
	if f == nil {
		return i.fail(errorf(i.m.name, export, KindABI, "no exported function %q", export))
	}
	i.logs = 0
	i.refusedGrow = 0
	if i.output != nil {
		i.output.reset()
	}
	if err := f.CallWithStack(ctx, stack); err != nil {
		return i.fail(i.classify(ctx, callerCtx, export, err))
	}
	return nil
}

// fail marks the instance broken and returns err.
func (i *Instance) fail(err *Error) error {
	i.broken = true
	return err
}

// Input places data in the instance's input buffer and returns its guest
// address. The buffer comes from the guest's alloc export; it is reused for
// later inputs and replaced (free, then alloc) when too small. ctx bounds
// any alloc or free call.
func (i *Instance) Input(ctx context.Context, data []byte) (uint32, error) {
	return i.input(ctx, ctx, "", data)
}

func (i *Instance) input(ctx, callerCtx context.Context, export string, data []byte) (uint32, error) {
	n := uint32(len(data))
	if uint64(len(data)) > uint64(i.m.opts.MemoryLimitPages)*pageSize {
		return 0, i.fail(errorf(i.m.name, export, KindMemoryLimit,
			"an input of %d bytes is larger than the module's memory cap (%d pages = %d MiB: raise memory_limit_pages)",
			len(data), i.m.opts.MemoryLimitPages, uint64(i.m.opts.MemoryLimitPages)*pageSize>>20))
	}
	if n > i.inCap || i.in == 0 {
		if err := i.grow(ctx, callerCtx, export, n); err != nil {
			return 0, err
		}
	}
	if !i.mem.Write(i.in, data) {
		return 0, i.fail(errorf(i.m.name, export, KindABI, "input buffer [%d, %d) is outside memory of %d bytes", i.in, uint64(i.in)+uint64(n), i.mem.Size()))
	}
	return i.in, nil
}

// grow replaces the input buffer with one of at least n bytes.
func (i *Instance) grow(ctx, callerCtx context.Context, export string, n uint32) error {
	if _, ok := i.m.funcs[wasmExportAlloc]; !ok {
		return i.fail(errorf(i.m.name, export, KindABI, "no exported function %q to allocate the input buffer", wasmExportAlloc))
	}
	if i.in != 0 {
		if _, ok := i.m.funcs[wasmExportFree]; ok {
			i.stack[0], i.stack[1] = uint64(i.in), uint64(i.inCap)
			if err := i.call(ctx, callerCtx, wasmExportFree, i.stack[:]); err != nil {
				return err
			}
		}
		i.in, i.inCap = 0, 0
	}
	c := uint64(minInputBuffer)
	for c < uint64(n) {
		c *= 2
	}
	c = min(c, uint64(i.m.opts.MemoryLimitPages)*pageSize, 1<<32-1)
	c = max(c, uint64(n))
	i.stack[0] = c
	if err := i.call(ctx, callerCtx, wasmExportAlloc, i.stack[:1]); err != nil {
		return err
	}
	p := uint32(i.stack[0])
	if p == 0 {
		return i.fail(errorf(i.m.name, export, KindMemoryLimit,
			"an input of %d bytes does not fit the module's memory (alloc(%d) returned 0; limit %d pages = %d MiB: raise memory_limit_pages)",
			n, c, i.m.opts.MemoryLimitPages, uint64(i.m.opts.MemoryLimitPages)*pageSize>>20))
	}
	if _, ok := i.mem.Read(p, uint32(c)); !ok {
		return i.fail(errorf(i.m.name, export, KindABI, "alloc(%d) returned %d: outside memory of %d bytes", c, p, i.mem.Size()))
	}
	i.in, i.inCap = p, uint32(c)
	return nil
}

// ReadPacked reads the result buffer named by a packed ptr<<32|len result
// of export and returns a copy. A result of 0 returns (nil, nil). A range
// outside the guest's memory or longer than Options.MaxResultBytes is a
// KindABI error.
func (i *Instance) ReadPacked(export string, result uint64) ([]byte, error) {
	if result == 0 {
		return nil, nil
	}
	ptr, n := uint32(result>>32), uint32(result)
	if n > i.m.opts.MaxResultBytes {
		return nil, i.fail(errorf(i.m.name, export, KindABI, "result of %d bytes exceeds the limit of %d bytes", n, i.m.opts.MaxResultBytes))
	}
	b, ok := i.mem.Read(ptr, n)
	if !ok {
		return nil, i.fail(errorf(i.m.name, export, KindABI, "result [%d, %d) is outside memory of %d bytes", ptr, uint64(ptr)+uint64(n), i.mem.Size()))
	}
	return append(make([]byte, 0, len(b)), b...), nil
}

// CallBytes is [Module.CallBytes] on this instance, bounded by ctx only.
func (i *Instance) CallBytes(ctx context.Context, export string, input []byte) ([]byte, error) {
	return i.callBytes(ctx, ctx, export, input)
}

func (i *Instance) callBytes(ctx, callerCtx context.Context, export string, input []byte) ([]byte, error) {
	ft, ok := i.m.funcs[export]
	if !ok {
		return nil, i.fail(errorf(i.m.name, export, KindABI, "no exported function %q", export))
	}
	if !ft.is(sigBytes.Params, sigBytes.Results) {
		return nil, i.fail(errorf(i.m.name, export, KindABI, "export has signature %s, want (i32, i32) -> (i64)", ft))
	}
	p, err := i.input(ctx, callerCtx, export, input)
	if err != nil {
		return nil, err
	}
	i.stack[0], i.stack[1] = uint64(p), uint64(len(input))
	if err := i.call(ctx, callerCtx, export, i.stack[:]); err != nil {
		return nil, err
	}
	res := i.stack[0]
	if res == 0 && i.m.opts.ErrorExport != "" {
		return nil, i.zeroResult(ctx, callerCtx, export)
	}
	return i.ReadPacked(export, res)
}

// zeroResult builds the error for a byte call that returned 0, with the
// guest's message from Options.ErrorExport when it gives one.
func (i *Instance) zeroResult(ctx, callerCtx context.Context, export string) error {
	ee := i.m.opts.ErrorExport
	ft, ok := i.m.funcs[ee]
	if !ok || !ft.is(nil, sigBytes.Results) {
		return i.fail(errorf(i.m.name, export, KindABI, "returned 0 (no result)"))
	}
	i.stack[0] = 0
	if err := i.call(ctx, callerCtx, ee, i.stack[:1]); err != nil {
		return err
	}
	msg, err := i.ReadPacked(ee, i.stack[0])
	if err != nil {
		return err
	}
	if len(msg) == 0 {
		return i.fail(errorf(i.m.name, export, KindABI, "returned 0 (no result)"))
	}
	return i.fail(errorf(i.m.name, export, KindABI, "returned 0: %s", GuestMessage(msg)))
}

// GuestMessage makes a message read from guest memory safe to show: valid
// UTF-8, one line, at most 512 bytes.
func GuestMessage(b []byte) string {
	const limit = 512
	cut := len(b) > limit
	if cut {
		b = b[:limit]
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if cut {
		s += "…"
	}
	return s
}

// Func returns the signature of the module's exported function name.
func (i *Instance) Func(name string) (FuncType, bool) { return i.m.Func(name) }

// classify turns a wazero call error into an *Error.
func (i *Instance) classify(ctx, callerCtx context.Context, export string, err error) *Error {
	f := CallFailure{Module: i.m.name, Export: export, Err: err, Limit: i.m.opts.CallTimeout,
		MemoryLimitPages: i.m.opts.MemoryLimitPages, RefusedGrow: i.refusedGrow, Closing: i.m.pool.Closing(), ABIErr: i.abiErr}
	if i.output != nil {
		f.Stderr = i.output.String()
	}
	return ClassifyCall(ctx, callerCtx, f)
}

// tailBuffer keeps the last limit bytes written to it. It is written by
// the guest (through WASI fd_write) only during a call on its instance, but
// is locked anyway since wazero owns the writer.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if n >= t.limit {
		t.buf = append(t.buf[:0], p[n-t.limit:]...)
		return n, nil
	}
	if over := len(t.buf) + n - t.limit; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tailBuffer) reset() {
	t.mu.Lock()
	t.buf = t.buf[:0]
	t.mu.Unlock()
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
