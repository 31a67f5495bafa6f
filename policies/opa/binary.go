package opa

import (
	"errors"

	"github.com/openclaw-go/openclaw/wasmhost/wasmbin"
)

// This file uses the few pieces of the WebAssembly binary format the
// adapter needs, through package wasmbin: the export names that identify
// an OPA module (IsModule), and the tiny "env" shim module that gives an
// OPA policy the memory it imports.

// IsModule reports whether wasm looks like a policy compiled by
// `opa build -t wasm`: a WebAssembly core module exporting the function
// opa_eval and the global opa_wasm_abi_version. It only reads the binary
// (wasmbin.Parse, no compilation), so it is cheap and safe on untrusted
// bytes; [Load] does the full checks.
func IsModule(wasm []byte) bool {
	mod, err := wasmbin.Parse(wasm, &wasmbin.DefaultCaps)
	var ce *wasmbin.CapError
	if err != nil && !errors.As(err, &ce) {
		return false // a module over a load limit is judged by the exports read (Load refuses it)
	}
	exports := mod.ExportKinds()
	eval, ok1 := exports[exportEval]
	abi, ok2 := exports[globalABIVersion]
	return ok1 && ok2 && eval == wasmbin.ExternFunc && abi == wasmbin.ExternGlobal
}

// envFunc is one function of OPA's "env" import module; params are all
// i32, and results is 0 or 1 i32.
type envFunc struct {
	name    string
	params  int
	results int
}

// envFuncs are the functions an OPA module may import from "env" (OPA's
// Wasm ABI): opa_abort(addr), opa_println(addr), and
// opa_builtinN(builtin_id, ctx, arg1…argN) -> value_addr for N = 0…4.
var envFuncs = []envFunc{
	{"opa_abort", 1, 0},
	{"opa_println", 1, 0},
	{"opa_builtin0", 2, 1},
	{"opa_builtin1", 3, 1},
	{"opa_builtin2", 4, 1},
	{"opa_builtin3", 5, 1},
	{"opa_builtin4", 6, 1},
}

// shimModule returns a module that imports envFuncs from hostModule,
// defines a linear memory of minPages (with maxPages as its declared
// maximum when hasMax) and exports both under the names an OPA policy
// imports from "env". wazero's host modules cannot export a memory, so each
// policy instance is linked to one instance of this shim.
func shimModule(hostModule string, minPages uint32, maxPages uint32, hasMax bool) []byte {
	m := &wasmbin.Module{Memories: []wasmbin.Limits{{Min: uint64(minPages), Max: uint64(maxPages), HasMax: hasMax}}}
	m.Exports = append(m.Exports, wasmbin.Export{Name: "memory", Kind: wasmbin.ExternMemory})
	for i, f := range envFuncs {
		m.Types = append(m.Types, f.funcType())
		m.Imports = append(m.Imports, wasmbin.Import{Module: hostModule, Name: f.name, Kind: wasmbin.ExternFunc, TypeIndex: uint32(i)})
		m.Exports = append(m.Exports, wasmbin.Export{Name: f.name, Kind: wasmbin.ExternFunc, Index: uint32(i)})
	}
	return wasmbin.Encode(m, nil)
}

// funcType is f's signature: params i32 parameters, results i32 results.
func (f envFunc) funcType() wasmbin.FuncType {
	var ft wasmbin.FuncType
	for range f.params {
		ft.Params = append(ft.Params, wasmbin.I32)
	}
	for range f.results {
		ft.Results = append(ft.Results, wasmbin.I32)
	}
	return ft
}
