package wasmbin_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/wasmhost/wasmbin"
)

var update = flag.Bool("update", false, "rewrite guests/testdata/locals.wasm")

// realModules are every committed module: the built-ins, the guest
// examples (Go wasip1, Rust, AssemblyScript), OPA-compiled Rego and the
// containment fixtures.
func realModules(t testing.TB) map[string][]byte {
	t.Helper()
	var paths []string
	for _, g := range []string{"guests/*/*.wasm", "guests/*/*/*.wasm", "policies/*/*.wasm", "policies/*/testdata/*.wasm"} {
		p, err := filepath.Glob(filepath.Join("..", "..", g))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p...)
	}
	mods := map[string][]byte{}
	for _, p := range paths {
		if filepath.Base(p) == "locals.wasm" {
			continue // over a cap on purpose
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		mods[strings.TrimPrefix(p, "../../")] = b
	}
	if len(mods) < 15 {
		t.Fatalf("found %d modules", len(mods))
	}
	return mods
}

// TestDefaultCapsAdmitRealModules: the caps are generous for every real
// module the project has.
func TestDefaultCapsAdmitRealModules(t *testing.T) {
	t.Parallel()
	for name, b := range realModules(t) {
		if _, err := wasmbin.Parse(b, &wasmbin.DefaultCaps); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// module builds a module of one function () -> () with the given local
// declarations (count, type pairs) and body, and exports "memory".
func module(locals [][2]uint32, body []byte) []byte {
	var code wasmbin.Writer
	code.U32(uint32(len(locals)))
	for _, l := range locals {
		code.U32(l[0])
		code.Byte(byte(l[1]))
	}
	code.Byte(body...)
	return moduleBodies(code)
}

func moduleBodies(bodies ...wasmbin.Writer) []byte {
	m := &wasmbin.Module{Types: []wasmbin.FuncType{{}}, Memories: []wasmbin.Limits{{Min: 1}},
		Exports: []wasmbin.Export{{Name: "memory", Kind: wasmbin.ExternMemory}}}
	for range bodies {
		m.Funcs = append(m.Funcs, 0)
	}
	return wasmbin.Encode(m, bodies)
}

// localsModule is guests/testdata/locals.wasm: an "openclaw-policy v1"
// shape (memory, alloc, before_tool_call) whose alloc declares
// 2^32−1 i32 locals, which a compiler would allocate.
func localsModule() []byte {
	i32 := []wasmbin.ValType{wasmbin.I32}
	m := &wasmbin.Module{
		Types:    []wasmbin.FuncType{{Params: i32, Results: i32}, {Params: []wasmbin.ValType{wasmbin.I32, wasmbin.I32}, Results: []wasmbin.ValType{wasmbin.I64}}},
		Funcs:    []uint32{0, 1},
		Memories: []wasmbin.Limits{{Min: 1}},
		Exports: []wasmbin.Export{{Name: "memory", Kind: wasmbin.ExternMemory}, {Name: "alloc", Kind: wasmbin.ExternFunc},
			{Name: "before_tool_call", Kind: wasmbin.ExternFunc, Index: 1}},
	}
	var alloc wasmbin.Writer
	alloc.U32(1)
	alloc.U32(1<<32 - 1)
	alloc.Byte(byte(wasmbin.I32), 0x41, 0x00, 0x0b)                          // i32.const 0; end
	return wasmbin.Encode(m, []wasmbin.Writer{alloc, {0, 0x42, 0x00, 0x0b}}) // no locals; i64.const 0; end
}

// TestEncodeParse: Encode writes what Parse reads.
func TestEncodeParse(t *testing.T) {
	t.Parallel()
	m := &wasmbin.Module{
		Types: []wasmbin.FuncType{{Params: []wasmbin.ValType{wasmbin.I32}, Results: []wasmbin.ValType{wasmbin.I64}}},
		Imports: []wasmbin.Import{{Module: "env", Name: "f", Kind: wasmbin.ExternFunc},
			{Module: "env", Name: "memory", Kind: wasmbin.ExternMemory, Memory: wasmbin.Limits{Min: 2, Max: 3, HasMax: true}},
			{Module: "env", Name: "g", Kind: wasmbin.ExternGlobal, Global: wasmbin.GlobalType{Type: wasmbin.F64, Mutable: true}},
			{Module: "env", Name: "t", Kind: wasmbin.ExternTable, Table: wasmbin.TableType{Elem: wasmbin.FuncRef, Limits: wasmbin.Limits{Min: 1}}}},
		Funcs:   []uint32{0},
		Globals: []wasmbin.GlobalType{{Type: wasmbin.I64}, {Type: wasmbin.ExternRef, Mutable: true}},
		Exports: []wasmbin.Export{{Name: "h", Kind: wasmbin.ExternFunc, Index: 1}, {Name: "g", Kind: wasmbin.ExternGlobal, Index: 2}},
	}
	got, err := wasmbin.Parse(wasmbin.Encode(m, []wasmbin.Writer{{0, 0x42, 0, 0x0b}}), &wasmbin.DefaultCaps)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("parsed\n%+v\nwant\n%+v", got, m)
	}
	if ft, ok := got.FuncTypeOf(1); !ok || ft.String() != "(i32) -> (i64)" {
		t.Errorf("FuncTypeOf(1) = %v, %v", ft, ok)
	}
}

// TestLocalsFixture keeps guests/testdata/locals.wasm what localsModule
// builds (go test -run TestLocalsFixture -update rewrites it).
func TestLocalsFixture(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "..", "guests", "testdata", "locals.wasm")
	want := localsModule()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s differs from localsModule() (%v): run go test -run TestLocalsFixture -update", path, err)
	}
	_, err = wasmbin.Parse(got, nil)
	if err != nil {
		t.Fatalf("without caps: %v", err)
	}
}

func repeat(n int, b ...byte) []byte { return bytes.Repeat(b, n) }

func TestCaps(t *testing.T) {
	t.Parallel()
	nest := func(n int) []byte {
		return append(append(repeat(n, 0x02, 0x40), repeat(n, 0x0b)...), 0x0b)
	}
	seq := func(n int) []byte { return append(repeat(n, 0x02, 0x40, 0x0b), 0x0b) }
	big := func(n int) []byte { return append(repeat(n, 0x01), 0x0b) } // nops
	funcs := func(n int, body []byte) []byte {
		bodies := make([]wasmbin.Writer, n)
		for i := range bodies {
			bodies[i] = append(wasmbin.Writer{0}, body...)
		}
		return moduleBodies(bodies...)
	}
	locals, err := os.ReadFile(filepath.Join("..", "..", "guests", "testdata", "locals.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	caps := wasmbin.DefaultCaps
	for _, tc := range []struct {
		name string
		wasm []byte
		cap  wasmbin.Cap
		want string
	}{
		{"2^32-1 locals", locals, wasmbin.CapLocals,
			"function 0 exceeds the load limit of locals per function: 4294967295, over the limit of 50000"},
		{"locals summed over declarations", module([][2]uint32{{30000, 0x7f}, {30000, 0x7e}}, []byte{0x0b}), wasmbin.CapLocals,
			"function 0 exceeds the load limit of locals per function: 60000, over the limit of 50000"},
		{"nesting", module(nil, nest(1001)), wasmbin.CapNesting,
			"function 0 exceeds the load limit of block nesting depth: 1001, over the limit of 1000"},
		{"blocks in one function", module(nil, seq(1501)), wasmbin.CapBlocks,
			"function 0 exceeds the load limit of blocks per function: 1501, over the limit of 1500"},
		{"blocks in the module", funcs(101, seq(1500)), wasmbin.CapModuleBlocks,
			"the module exceeds the load limit of blocks per module: 150001, over the limit of 150000"},
		{"function body", module(nil, big(1<<20)), wasmbin.CapFunctionBytes,
			"function 0 exceeds the load limit of function body size in bytes: 1048578, over the limit of 1048576"},
		{"module size", append(module(nil, []byte{0x0b}), customSection(16<<20)...), wasmbin.CapModuleBytes,
			"the module exceeds the load limit of module size in bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := wasmbin.Parse(tc.wasm, &caps)
			var ce *wasmbin.CapError
			if !errors.As(err, &ce) || ce.Cap != tc.cap || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a %v CapError containing %q", err, tc.cap, tc.want)
			}
			if _, err := wasmbin.Parse(tc.wasm, nil); err != nil {
				t.Fatalf("without caps: %v", err)
			}
		})
	}
}

func customSection(n int) []byte {
	var body wasmbin.Writer
	body.Name("pad")
	body.Byte(make([]byte, n)...)
	var w wasmbin.Writer
	w.Section(wasmbin.SectionCustom, body)
	return w
}

// TestCountCaps: the caps on counts are checked on the count, before any
// element is read.
func TestCountCaps(t *testing.T) {
	t.Parallel()
	caps := wasmbin.Caps{wasmbin.CapImports: 2}
	var imp wasmbin.Writer
	imp.U32(3)
	for range 3 {
		imp.Name("m")
		imp.Name("g")
		imp.Byte(byte(wasmbin.ExternGlobal), byte(wasmbin.I32), 0)
	}
	w := wasmbin.NewWriter()
	w.Section(wasmbin.SectionImport, imp)
	_, err := wasmbin.Parse(w, &caps)
	if err == nil || err.Error() != "the module exceeds the load limit of imports: 3, over the limit of 2" {
		t.Fatalf("err = %v", err)
	}
}

func TestParseRefusals(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"", "no \\0asm magic"},
		{"\x00asm\x0d\x00\x01\x00", "version 65549 (want 1: a core module, not a component)"},
		{"\x00asm\x01\x00\x00\x00\x01\x05", "section 1: size 5: unexpected end of data"},
		{"\x00asm\x01\x00\x00\x00\x01\x03\x01\x61\x00", "type form 0x61 is not a function type"},
		{"\x00asm\x01\x00\x00\x00\x01\x04\x01\x60\x01\x01", "unknown value type 0x01"},
		{"\x00asm\x01\x00\x00\x00\x03\x02\x01\x00", "function type index 0 out of range"},
		{"\x00asm\x01\x00\x00\x00\x02\x06\xff\xff\xff\xff\x0f\x00", "vector of 4294967295 elements"},
		{"\x00asm\x01\x00\x00\x00\x01\x06\xff\xff\xff\xff\x1f\x00", "LEB128 number over 32 bits"},
		{string(module(nil, []byte{0xff, 0x0b})), "function 0: instruction 0xff at offset 1: unknown opcode"},
		{string(module(nil, []byte{0x02, 0x40, 0x0b})), "function 0: unexpected end of data"},
		{string(module(nil, []byte{0x0b, 0x01})), "function 0: 1 bytes after the final end"},
	} {
		if _, err := wasmbin.Parse([]byte(tt.in), nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err %v, want %q", tt.in, err, tt.want)
		}
	}
}

// TestReader covers the LEB128 edge cases.
func TestReader(t *testing.T) {
	t.Parallel()
	r := wasmbin.NewReader([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x7f, 0x80, 0x7f})
	if v, err := r.U32(); v != 1<<32-1 || err != nil {
		t.Errorf("U32 = %d, %v", v, err)
	}
	if v, err := r.SLEB(32); v != -1 || err != nil {
		t.Errorf("SLEB = %d, %v", v, err)
	}
	if v, err := r.SLEB(32); v != -128 || err != nil {
		t.Errorf("SLEB = %d, %v", v, err)
	}
	if _, err := r.Byte(); !errors.Is(err, wasmbin.ErrShort) {
		t.Errorf("Byte at end: %v", err)
	}
	var w wasmbin.Writer
	w.ULEB(1<<64 - 1)
	if v, err := wasmbin.NewReader(w).ULEB(64); v != 1<<64-1 || err != nil {
		t.Errorf("ULEB(64) = %d, %v", v, err)
	}
}

// FuzzParse: the reader reads untrusted files; it must never panic or
// hang, and never allocate beyond its input, whatever the bytes; and
// caps only ever refuse what Parse without caps accepts.
func FuzzParse(f *testing.F) {
	for _, b := range realModules(f) {
		if len(b) < 20_000 {
			f.Add(b)
		}
	}
	f.Add(localsModule())
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := wasmbin.Parse(b, nil)
		_, cerr := wasmbin.Parse(b, &wasmbin.DefaultCaps)
		var ce *wasmbin.CapError
		if err != nil && cerr == nil {
			t.Fatalf("accepted under caps, refused without: %v", err)
		}
		if err == nil && cerr != nil && !errors.As(cerr, &ce) {
			t.Fatalf("refused under caps with a non-cap error: %v", cerr)
		}
	})
}
