package wasmhost_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/wasmhost"
	"github.com/openclaw-go/openclaw/wasmhost/wasmbin"
)

// slowModule is a module just under the load limits that takes the
// compiler seconds: 100 functions of 1,500 sequential if blocks each.
func slowModule() []byte {
	var body wasmbin.Writer
	body.U32(0)
	for range 1500 {
		body.Byte(0x41, 0x00, 0x04, 0x40, 0x0b) // i32.const 0; if; end
	}
	body.Byte(0x0b)
	return funcsModule(100, body)
}

// funcsModule is a module of n functions () -> () with the same body,
// exporting its memory.
func funcsModule(n int, body wasmbin.Writer) []byte {
	m := &wasmbin.Module{Types: []wasmbin.FuncType{{}}, Memories: []wasmbin.Limits{{Min: 1}},
		Exports: []wasmbin.Export{{Name: "memory", Kind: wasmbin.ExternMemory}}}
	bodies := make([]wasmbin.Writer, n)
	for i := range bodies {
		m.Funcs = append(m.Funcs, 0)
		bodies[i] = body
	}
	return wasmbin.Encode(m, bodies)
}

// TestLoadHonoursContext: a load whose context ends while the module
// compiles returns then, as canceled, instead of when the compiler is
// done (what a signal to `openclaw policy test` or `mcp serve` needs).
func TestLoadHonoursContext(t *testing.T) {
	t.Parallel()
	wasm := slowModule()
	if _, err := wasmbin.Parse(wasm, &wasmbin.DefaultCaps); err != nil {
		t.Fatalf("the slow module must be under the caps: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel) // the compile takes seconds
	m, err := wasmhost.Load(ctx, "slow", wasm, nil)
	if err == nil {
		m.Close(context.Background())
		t.Fatal("Load succeeded")
	}
	if !errors.Is(err, wasmhost.ErrCanceled) || err.Error() != `wasm module "slow": compiling: context canceled` {
		t.Fatalf("err = %v, want ErrCanceled", err)
	}
}

// BenchmarkCompileAtCaps is the compile time (Load: limits check,
// compile, first instance) of modules just under the load limits, shaped
// to make wazero's compiler work hardest: 100 functions of 1,500
// sequential if blocks, and 150 functions of 1,000 nested ones.
//
//	go test -run '^$' -bench CompileAtCaps -benchtime 1x ./wasmhost/
func BenchmarkCompileAtCaps(b *testing.B) {
	nested := func() []byte {
		var body wasmbin.Writer
		body.U32(0)
		for range 1000 {
			body.Byte(0x41, 0x00, 0x04, 0x40) // i32.const 0; if
		}
		for range 1000 {
			body.Byte(0x0b)
		}
		body.Byte(0x0b)
		return funcsModule(150, body)
	}
	for _, bc := range []struct {
		name string
		wasm []byte
	}{{"sequential", slowModule()}, {"nested", nested()}} {
		b.Run(bc.name, func(b *testing.B) {
			if _, err := wasmbin.Parse(bc.wasm, &wasmbin.DefaultCaps); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				m, err := wasmhost.Load(context.Background(), "caps", bc.wasm, &wasmhost.Options{InitTimeout: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				m.Close(context.Background())
			}
		})
	}
}
