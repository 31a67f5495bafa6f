package opa

import (
	"errors"
)

// This file reads and writes the few pieces of the WebAssembly binary
// format the adapter needs without compiling anything: the export names
// that identify an OPA module (IsModule), and the tiny "env" shim module
// that gives an OPA policy the memory it imports.

const (
	wasmMagic   = "\x00asm"
	wasmVersion = "\x01\x00\x00\x00"

	sectionType   = 1
	sectionImport = 2
	sectionMemory = 5
	sectionExport = 7

	externFunc   = 0x00
	externMemory = 0x02
	externGlobal = 0x03

	valI32 = 0x7f
)

var errTruncated = errors.New("truncated")

// reader walks a byte slice with bounds checks; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errTruncated
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// u32 reads an unsigned LEB128 value of at most 32 bits.
func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.err = errors.New("LEB128 value too long")
	return 0
}

func (r *reader) bytes(n uint32) []byte {
	if r.err != nil || uint64(n) > uint64(len(r.b)) {
		r.err = errTruncated
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

// exportKinds returns the export names of a Wasm binary with their kinds,
// reading only the section headers and the export section.
func exportKinds(wasm []byte) (map[string]byte, error) {
	if len(wasm) < 8 || string(wasm[:4]) != wasmMagic || string(wasm[4:8]) != wasmVersion {
		return nil, errors.New("not a WebAssembly core module (bad magic or version)")
	}
	r := &reader{b: wasm[8:]}
	for len(r.b) > 0 && r.err == nil {
		id := r.byte()
		size := r.u32()
		body := r.bytes(size)
		if r.err != nil {
			break
		}
		if id != sectionExport {
			continue
		}
		s := &reader{b: body}
		n := s.u32()
		out := make(map[string]byte, min(n, 256))
		for i := uint32(0); i < n && s.err == nil; i++ {
			name := s.bytes(s.u32())
			kind := s.byte()
			s.u32() // index
			if s.err == nil {
				out[string(name)] = kind
			}
		}
		if s.err != nil {
			return nil, s.err
		}
		return out, nil
	}
	if r.err != nil {
		return nil, r.err
	}
	return map[string]byte{}, nil
}

// IsModule reports whether wasm looks like a policy compiled by
// `opa build -t wasm`: a WebAssembly core module exporting the function
// opa_eval and the global opa_wasm_abi_version. It only reads the binary's
// export section (no compilation), so it is cheap and safe on untrusted
// bytes; [Load] does the full checks.
func IsModule(wasm []byte) bool {
	exports, err := exportKinds(wasm)
	if err != nil {
		return false
	}
	return exports[exportEval] == externFunc && exports[globalABIVersion] == externGlobal
}

// writer builds a Wasm binary.
type writer []byte

func (w *writer) u32(v uint32) {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			*w = append(*w, c|0x80)
			continue
		}
		*w = append(*w, c)
		return
	}
}

func (w *writer) name(s string) {
	w.u32(uint32(len(s)))
	*w = append(*w, s...)
}

func (w *writer) section(id byte, body writer) {
	*w = append(*w, id)
	w.u32(uint32(len(body)))
	*w = append(*w, body...)
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
	var types writer
	types.u32(uint32(len(envFuncs)))
	for _, f := range envFuncs {
		types = append(types, 0x60)
		types.u32(uint32(f.params))
		for range f.params {
			types = append(types, valI32)
		}
		types.u32(uint32(f.results))
		for range f.results {
			types = append(types, valI32)
		}
	}
	var imports writer
	imports.u32(uint32(len(envFuncs)))
	for i, f := range envFuncs {
		imports.name(hostModule)
		imports.name(f.name)
		imports = append(imports, externFunc)
		imports.u32(uint32(i))
	}
	var mem writer
	mem.u32(1)
	if hasMax {
		mem = append(mem, 0x01)
		mem.u32(minPages)
		mem.u32(maxPages)
	} else {
		mem = append(mem, 0x00)
		mem.u32(minPages)
	}
	var exports writer
	exports.u32(uint32(len(envFuncs) + 1))
	exports.name("memory")
	exports = append(exports, externMemory)
	exports.u32(0)
	for i, f := range envFuncs {
		exports.name(f.name)
		exports = append(exports, externFunc)
		exports.u32(uint32(i))
	}
	w := writer(wasmMagic + wasmVersion)
	w.section(sectionType, types)
	w.section(sectionImport, imports)
	w.section(sectionMemory, mem)
	w.section(sectionExport, exports)
	return w
}
