package opa

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/wasmhost"
)

// fakeOPA builds a module that passes IsModule (it exports a function
// opa_eval and an i32 global opa_wasm_abi_version) with the given function
// imports, and nothing else of OPA's ABI.
func fakeOPA(imports [][2]string) []byte {
	var types writer
	types.u32(2)
	types = append(types, 0x60, 0, 0) // t0: () -> ()
	types = append(types, 0x60, 7, valI32, valI32, valI32, valI32, valI32, valI32, valI32, 1, valI32)
	var imp writer
	imp.u32(uint32(len(imports)))
	for _, im := range imports {
		imp.name(im[0])
		imp.name(im[1])
		imp = append(imp, externFunc, 0)
	}
	var funcs writer
	funcs.u32(1)
	funcs.u32(1)
	var globals writer
	globals.u32(1)
	globals = append(globals, valI32, 0, 0x41, 1, 0x0b) // immutable i32 = 1
	var exports writer
	exports.u32(2)
	exports.name(exportEval)
	exports = append(exports, externFunc)
	exports.u32(uint32(len(imports)))
	exports.name(globalABIVersion)
	exports = append(exports, externGlobal, 0)
	var code writer
	code.u32(1)
	code = append(code, 4, 0, 0x41, 0, 0x0b) // no locals; i32.const 0; end
	w := writer(wasmMagic + wasmVersion)
	w.section(sectionType, types)
	w.section(sectionImport, imp)
	w.section(3, funcs)
	w.section(6, globals)
	w.section(sectionExport, exports)
	w.section(10, code)
	return w
}

func TestLoadRefusesImports(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		imports [][2]string
		want    string
	}{
		{"WASI", [][2]string{{"wasi_snapshot_preview1", "fd_write"}},
			`wasm module "fake": unsupported import "wasi_snapshot_preview1"."fd_write": an OPA module may import only env.memory, env.opa_abort, env.opa_println and env.opa_builtin0…4`},
		{"unknown env function", [][2]string{{"env", "opa_now"}}, `unsupported import "env"."opa_now"`},
		{"env function of the wrong type", [][2]string{{"env", "opa_abort"}}, `import "env"."opa_abort" has signature () -> (), want (i32) -> ()`},
		{"no memory import", nil, `wasm module "fake": does not import env.memory, as every OPA Wasm module does`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wasm := fakeOPA(tc.imports)
			if !IsModule(wasm) {
				t.Fatal("IsModule(fake) = false")
			}
			m, err := Load(context.Background(), "fake", wasm, nil, &Options{Host: wasmhost.Options{NoCache: true}})
			if err == nil {
				m.Close(context.Background())
				t.Fatal("Load succeeded")
			}
			if !errors.Is(err, wasmhost.ErrLoad) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want ErrLoad containing %q", err, tc.want)
			}
		})
	}
}
