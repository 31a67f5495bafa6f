package opa

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/openclaw-go/openclaw/policies/internal/strictjson"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// instance is one instantiated OPA policy with its env shim (memory and
// host functions). It serves one evaluation at a time; the pool owns it,
// and any failure discards it.
type instance struct {
	m   *Module
	env api.Module // the shim: env.memory and the env functions
	mod api.Module // the policy
	mem api.Memory

	eval, malloc, jsonParse, jsonDump, heapPtrGet, valueDump api.Function

	dataAddr uint32 // the parsed data document
	heap     uint32 // heap pointer after initialization: inputs go here
	stack    [7]uint64

	limit       time.Duration // the deadline of the current call, for messages
	prints      int           // Rego print() lines in the current call
	hostErr     error         // set by a host function before it traps the guest
	refusedGrow uint64        // a memory size refused by the cap in this call, 0 if none
}

type instKey struct{}

// ctx returns ctx carrying i, for the host functions.
func (i *instance) ctx(ctx context.Context) context.Context {
	return context.WithValue(ctx, instKey{}, i)
}

func instFrom(ctx context.Context) *instance {
	i, _ := ctx.Value(instKey{}).(*instance)
	return i
}

// newInstance instantiates the shim and the policy, parses the data
// document and records the heap pointer, bounded by InitTimeout.
func (m *Module) newInstance(ctx context.Context) (*instance, error) {
	inst := &instance{m: m, limit: m.opts.InitTimeout}
	ictx, dl := wasmhost.StartDeadline(inst.ctx(ctx), m.opts.InitTimeout)
	defer dl.Stop()
	err := inst.init(ictx, ctx)
	if err != nil {
		m.discard(inst)
		if m.pool.Closing() {
			return nil, m.pool.ClosedError("")
		}
		return nil, wasmhost.InitError(m.name, ctx, ictx, m.opts.InitTimeout, err)
	}
	return inst, nil
}

func (i *instance) init(ictx, callerCtx context.Context) error {
	m := i.m
	actx := m.rt.MemoryContext(ictx, &i.refusedGrow)
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions()
	env, err := m.rt.Wazero().InstantiateModule(actx, m.shim, cfg)
	if err != nil {
		return loadErr(m.name, "instantiating the env shim: %w", err)
	}
	i.env = env
	rctx := experimental.WithImportResolver(actx, func(name string) api.Module {
		if name == envModule {
			return env
		}
		return nil
	})
	mod, err := m.rt.Wazero().InstantiateModule(rctx, m.compiled, cfg)
	if err != nil {
		if e := i.classify(ictx, callerCtx, "", err); e.Kind != wasmhost.KindTrap {
			return e
		}
		return loadErr(m.name, "instantiating: %w", err)
	}
	i.mod = mod
	i.mem = env.ExportedMemory(exportMemory)
	i.eval = mod.ExportedFunction(exportEval)
	i.malloc = mod.ExportedFunction(exportMalloc)
	i.jsonParse = mod.ExportedFunction(exportJSONParse)
	i.jsonDump = mod.ExportedFunction(exportJSONDump)
	i.heapPtrGet = mod.ExportedFunction(exportHeapPtrGet)
	i.valueDump = mod.ExportedFunction(exportValueDump)

	// As OPA's own SDK does: a first malloc initializes the heap; then the
	// data document is parsed once, and the heap pointer above it is where
	// every evaluation writes its input.
	i.stack[0] = 0
	if err := i.call(ictx, callerCtx, exportMalloc, i.malloc, i.stack[:1]); err != nil {
		return err
	}
	if i.dataAddr, err = i.parseJSON(ictx, callerCtx, m.data); err != nil {
		return err
	}
	if err := i.call(ictx, callerCtx, exportHeapPtrGet, i.heapPtrGet, i.stack[:1]); err != nil {
		return err
	}
	i.heap = uint32(i.stack[0])
	return nil
}

// parseJSON copies b into the guest heap and parses it into an OPA value.
func (i *instance) parseJSON(ctx, callerCtx context.Context, b []byte) (uint32, error) {
	i.stack[0] = uint64(len(b))
	if err := i.call(ctx, callerCtx, exportMalloc, i.malloc, i.stack[:1]); err != nil {
		return 0, err
	}
	p := uint32(i.stack[0])
	if p == 0 || !i.mem.Write(p, b) {
		return 0, i.abiErr(exportMalloc, "opa_malloc(%d) returned %d, outside memory of %d bytes", len(b), p, i.mem.Size())
	}
	i.stack[0], i.stack[1] = uint64(p), uint64(len(b))
	if err := i.call(ctx, callerCtx, exportJSONParse, i.jsonParse, i.stack[:2]); err != nil {
		return 0, err
	}
	addr := uint32(i.stack[0])
	if addr == 0 {
		return 0, i.abiErr(exportJSONParse, "the module could not parse the data document %s", quote(b))
	}
	return addr, nil
}

// dumpExport calls export () -> value_addr, serializes the value with
// opa_json_dump and decodes the JSON into v.
func (i *instance) dumpExport(ctx context.Context, export string, v any) error {
	fn := i.mod.ExportedFunction(export)
	if err := i.call(ctx, ctx, export, fn, i.stack[:1]); err != nil {
		return err
	}
	i.stack[0] = uint64(uint32(i.stack[0]))
	if err := i.call(ctx, ctx, exportJSONDump, i.jsonDump, i.stack[:1]); err != nil {
		return err
	}
	raw, err := i.cstring(export, uint32(i.stack[0]), i.m.opts.MaxResultBytes)
	if err != nil {
		return err
	}
	if err := strictjson.Unmarshal(raw, v); err != nil {
		return i.abiErr(export, "invalid answer %s: %v", quote(raw), err)
	}
	return nil
}

// resultPrefix and resultSuffix frame the JSON result set of an
// evaluation that produced one value: [{"result":…}].
const (
	resultPrefix = `[{"result":`
	resultSuffix = `}]`
)

// evaluate runs opa_eval once: the input is written at the saved heap
// pointer, the evaluation allocates above it (opa_eval resets the heap
// there), and the JSON result set is read back and unwrapped to the value
// of the entrypoint's rule.
func (i *instance) evaluate(ctx, callerCtx context.Context, export string, he hookEntry, input []byte) ([]byte, error) {
	i.limit = i.m.opts.CallTimeout
	n := uint64(len(input))
	end := uint64(i.heap) + n
	if size := uint64(i.mem.Size()); end > size {
		pages := (end - size + pageSize - 1) / pageSize
		if pages > maxMemoryPages {
			pages = maxMemoryPages
		}
		i.refusedGrow = 0
		if _, ok := i.mem.Grow(uint32(pages)); !ok {
			limit := i.m.opts.MemoryLimitPages
			return nil, &wasmhost.Error{Module: i.m.name, Export: export, Kind: wasmhost.KindMemoryLimit,
				Err: fmt.Errorf("out of memory: an input of %d bytes does not fit under the cap of %d pages (%d MiB)", n, limit, uint64(limit)*pageSize>>20)}
		}
	}
	if !i.mem.Write(i.heap, input) {
		return nil, i.abiErr(export, "input [%d, %d) is outside memory of %d bytes", i.heap, end, i.mem.Size())
	}
	s := i.stack[:7]
	s[0], s[1], s[2] = 0, uint64(uint32(he.id)), uint64(i.dataAddr)
	s[3], s[4], s[5], s[6] = uint64(i.heap), n, end, 0 // format 0: JSON
	if err := i.call(ctx, callerCtx, export, i.eval, s); err != nil {
		return nil, err
	}
	res := uint32(s[0])
	if res == 0 {
		return nil, i.abiErr(export, "opa_eval of %q returned no result", he.name)
	}
	raw, err := i.cstring(export, res, i.m.opts.MaxResultBytes)
	if err != nil {
		return nil, err
	}
	return i.unwrapResult(export, he.name, raw)
}

// unwrapResult returns the value of a result set [{"result": value}].
func (i *instance) unwrapResult(export, entrypoint string, raw []byte) ([]byte, error) {
	if len(raw) > len(resultPrefix)+len(resultSuffix) && bytes.HasPrefix(raw, []byte(resultPrefix)) && bytes.HasSuffix(raw, []byte(resultSuffix)) {
		v := raw[len(resultPrefix) : len(raw)-len(resultSuffix)]
		if json.Valid(v) {
			return v, nil
		}
	}
	var set []map[string]json.RawMessage
	if err := strictjson.Unmarshal(raw, &set); err != nil {
		return nil, i.abiErr(export, "invalid result set %s: %v", quote(raw), err)
	}
	switch {
	case len(set) == 0:
		return nil, i.abiErr(export, "entrypoint %q is undefined for this input (give the rule a default)", entrypoint)
	case len(set) > 1:
		return nil, i.abiErr(export, "entrypoint %q gave %d results, want 1", entrypoint, len(set))
	}
	v, ok := set[0]["result"]
	if !ok {
		return nil, i.abiErr(export, "entrypoint %q is undefined for this input (give the rule a default)", entrypoint)
	}
	return v, nil
}

// cstring copies the NUL-terminated string at addr, of at most limit
// bytes.
func (i *instance) cstring(export string, addr uint32, limit uint32) ([]byte, error) {
	size := i.mem.Size()
	if addr >= size {
		return nil, i.abiErr(export, "result address %d is outside memory of %d bytes", addr, size)
	}
	n := min(uint64(size-addr), uint64(limit)+1)
	b, _ := i.mem.Read(addr, uint32(n))
	end := bytes.IndexByte(b, 0)
	if end < 0 {
		if n > uint64(limit) {
			return nil, i.abiErr(export, "result exceeds the limit of %d bytes", limit)
		}
		return nil, i.abiErr(export, "result at %d is not NUL-terminated within memory of %d bytes", addr, size)
	}
	return append([]byte(nil), b[:end]...), nil
}

func (i *instance) abiErr(export, format string, args ...any) *wasmhost.Error {
	return &wasmhost.Error{Module: i.m.name, Export: export, Kind: wasmhost.KindABI, Err: fmt.Errorf(format, args...)}
}

// call runs fn with stack as params and results, classifying a failure.
func (i *instance) call(ctx, callerCtx context.Context, export string, fn api.Function, stack []uint64) error {
	if fn == nil {
		return i.abiErr(export, "no exported function %q", export)
	}
	i.prints, i.hostErr, i.refusedGrow = 0, nil, 0
	if err := fn.CallWithStack(ctx, stack); err != nil {
		return i.classify(ctx, callerCtx, export, err)
	}
	return nil
}

// classify turns a wazero call error into a *wasmhost.Error.
func (i *instance) classify(ctx, callerCtx context.Context, export string, err error) *wasmhost.Error {
	return wasmhost.ClassifyCall(ctx, callerCtx, wasmhost.CallFailure{Module: i.m.name, Export: export, Err: err, Limit: i.limit,
		MemoryLimitPages: i.m.opts.MemoryLimitPages, RefusedGrow: i.refusedGrow, Closing: i.m.pool.Closing(), TrapMessage: i.hostErr})
}

// hostFunc returns the Go implementation of env function f. The instance
// making the call comes from the call's context.
func (m *Module) hostFunc(f envFunc) api.GoModuleFunc {
	switch f.name {
	case "opa_abort":
		return func(ctx context.Context, _ api.Module, stack []uint64) {
			i := instFrom(ctx)
			if i == nil {
				panic(errors.New("opa_abort outside an evaluation"))
			}
			msg := "(unreadable message)"
			if b, err := i.cstring("opa_abort", uint32(stack[0]), maxAbortBytes); err == nil {
				msg = wasmhost.GuestMessage(b)
			}
			i.hostErr = fmt.Errorf("opa_abort: %s", msg)
			panic(i.hostErr)
		}
	case "opa_println":
		return func(ctx context.Context, _ api.Module, stack []uint64) {
			i := instFrom(ctx)
			if i == nil {
				return
			}
			i.prints++
			if i.prints > maxPrints {
				return
			}
			b, err := i.cstring("opa_println", uint32(stack[0]), maxPrintBytes)
			if err != nil {
				return
			}
			m.logPrint(ctx, wasmhost.GuestMessage(b))
		}
	default:
		return m.builtinFunc(f.name)
	}
}
