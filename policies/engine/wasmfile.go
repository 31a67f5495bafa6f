package engine

import (
	"errors"

	"github.com/openclaw-go/openclaw/wasmhost/wasmbin"
)

// This file describes the static shape of a WebAssembly binary (imports,
// exports, function signatures, memories), read by package wasmbin
// without compiling it, so that `openclaw policy inspect` can describe a
// module the host refuses.

// Import is one import of a module.
type Import struct {
	Module string `json:"module"`
	Name   string `json:"name"`
	// Kind is func, table, memory, global or tag.
	Kind string `json:"kind"`
	// Type is the function signature "(i32, i32) -> (i64)" for a func,
	// the limits for a memory or table, the value type for a global.
	Type string `json:"type,omitempty"`
}

// Export is one export of a module.
type Export struct {
	Name string `json:"name"`
	// Kind is func, table, memory, global or tag.
	Kind string `json:"kind"`
	// Type is as for [Import].
	Type string `json:"type,omitempty"`
}

// Memory is a module's linear memory, in 64 KiB pages.
type Memory struct {
	InitialPages uint64 `json:"initial_pages"`
	// MaxPages is the declared maximum; nil when the module declares none
	// (the host's cap applies either way).
	MaxPages *uint64 `json:"max_pages,omitempty"`
	// Imported is true when the memory is imported rather than defined
	// (which the policy ABI forbids).
	Imported bool `json:"imported,omitempty"`
}

// wasmShape is what parseWasm reads.
type wasmShape struct {
	imports  []Import
	exports  []Export
	memories []Memory
}

// parseWasm describes the imports, exports and memories of a module
// binary, read by wasmbin under the load limits. A module over one is
// described as far as it was read, with the *wasmbin.CapError.
func parseWasm(b []byte) (*wasmShape, error) {
	m, err := wasmbin.Parse(b, &wasmbin.DefaultCaps)
	var ce *wasmbin.CapError
	if err != nil && !errors.As(err, &ce) {
		return nil, err
	}
	shape := &wasmShape{}
	var (
		tables  []string
		globals []string
		mems    []Memory
	)
	memory := func(l wasmbin.Limits, imported bool) Memory {
		mem := Memory{InitialPages: l.Min, Imported: imported}
		if l.HasMax {
			max := l.Max
			mem.MaxPages = &max
		}
		return mem
	}
	for _, im := range m.Imports {
		e := Import{Module: im.Module, Name: im.Name, Kind: im.Kind.String()}
		switch im.Kind {
		case wasmbin.ExternFunc, wasmbin.ExternTag:
			e.Type = m.Types[im.TypeIndex].String()
		case wasmbin.ExternTable:
			e.Type = im.Table.String()
			tables = append(tables, e.Type)
		case wasmbin.ExternMemory:
			e.Type = im.Memory.String()
			mems = append(mems, memory(im.Memory, true))
		case wasmbin.ExternGlobal:
			e.Type = im.Global.String()
			globals = append(globals, e.Type)
		}
		shape.imports = append(shape.imports, e)
	}
	for _, t := range m.Tables {
		tables = append(tables, t.String())
	}
	for _, l := range m.Memories {
		mems = append(mems, memory(l, false))
	}
	for _, g := range m.Globals {
		globals = append(globals, g.String())
	}
	shape.memories = mems
	for _, ex := range m.Exports {
		e := Export{Name: ex.Name, Kind: ex.Kind.String()}
		switch ex.Kind {
		case wasmbin.ExternFunc:
			if ft, ok := m.FuncTypeOf(ex.Index); ok {
				e.Type = ft.String()
			}
		case wasmbin.ExternTable:
			if int(ex.Index) < len(tables) {
				e.Type = tables[ex.Index]
			}
		case wasmbin.ExternMemory:
			if int(ex.Index) < len(mems) {
				mm := mems[ex.Index]
				e.Type = wasmbin.Limits{Min: mm.InitialPages, HasMax: mm.MaxPages != nil, Max: deref(mm.MaxPages)}.String()
			}
		case wasmbin.ExternGlobal:
			if int(ex.Index) < len(globals) {
				e.Type = globals[ex.Index]
			}
		}
		shape.exports = append(shape.exports, e)
	}
	return shape, err
}

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}
