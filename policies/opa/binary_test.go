package opa

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/wasmhost"
	"github.com/openclaw-go/openclaw/wasmhost/wasmbin"
)

// fakeOPA builds a module that passes IsModule (it exports a function
// opa_eval and an i32 global opa_wasm_abi_version) with the given function
// imports, and nothing else of OPA's ABI.
func fakeOPA(imports [][2]string) []byte {
	return fakeOPABody(imports, wasmbin.Writer{0, 0x41, 0, 0x0b}) // no locals; i32.const 0; end
}

// fakeOPABody is fakeOPA with body as opa_eval's code.
func fakeOPABody(imports [][2]string, body wasmbin.Writer) []byte {
	i32 := wasmbin.I32
	m := &wasmbin.Module{
		Types: []wasmbin.FuncType{{}, // t0: () -> ()
			{Params: []wasmbin.ValType{i32, i32, i32, i32, i32, i32, i32}, Results: []wasmbin.ValType{i32}}}, // t1: opa_eval
		Funcs:   []uint32{1},
		Globals: []wasmbin.GlobalType{{Type: i32}},
		Exports: []wasmbin.Export{{Name: exportEval, Kind: wasmbin.ExternFunc, Index: uint32(len(imports))},
			{Name: globalABIVersion, Kind: wasmbin.ExternGlobal}},
	}
	for _, im := range imports {
		m.Imports = append(m.Imports, wasmbin.Import{Module: im[0], Name: im[1], Kind: wasmbin.ExternFunc})
	}
	return wasmbin.Encode(m, []wasmbin.Writer{body})
}

// TestLoadRefusesOverLimits: an OPA module passes the same load limits
// as any other before it is compiled.
func TestLoadRefusesOverLimits(t *testing.T) {
	t.Parallel()
	var body wasmbin.Writer
	body.U32(1)
	body.U32(1<<32 - 1)
	body.Byte(byte(wasmbin.I32), 0x41, 0, 0x0b)
	wasm := fakeOPABody([][2]string{{"env", "opa_abort"}}, body)
	if !IsModule(wasm) {
		t.Fatal("IsModule = false")
	}
	m, err := Load(context.Background(), "fake", wasm, nil, nil)
	if err == nil {
		m.Close(context.Background())
		t.Fatal("Load succeeded")
	}
	want := `wasm module "fake": refused before compiling: function 1 exceeds the load limit of locals per function: 4294967295, over the limit of 50000`
	if !errors.Is(err, wasmhost.ErrLoad) || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
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
			m, err := Load(context.Background(), "fake", wasm, nil, &Options{Host: wasmhost.Options{}})
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
