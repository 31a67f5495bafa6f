package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/wasmhost"
	"github.com/openclaw-go/openclaw/wasmhost/wasmbin"
)

func testModules(t testing.TB) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "guests", "testdata", "*.wasm"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	mods := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		mods[filepath.Base(p)] = b
	}
	for _, b := range builtin.List() {
		mods["builtin:"+b.Name] = b.Wasm
	}
	return mods
}

// TestParseWasmAgreesWithWazero checks the exports' signatures read by our
// parser against those wazero compiles, for every fixture and built-in
// that wazero accepts.
func TestParseWasmAgreesWithWazero(t *testing.T) {
	t.Parallel()
	for name, b := range testModules(t) {
		shape, err := parseWasm(b)
		var ce *wasmbin.CapError
		if errors.As(err, &ce) {
			continue // over a load limit on purpose: the host refuses it too
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		m, err := wasmhost.Load(context.Background(), name, b, &wasmhost.Options{MemoryLimitPages: 65536})
		if err != nil {
			continue // refused by the host (unknown import…): nothing to compare
		}
		nfunc := 0
		for _, ex := range shape.exports {
			if ex.Kind != "func" {
				continue
			}
			nfunc++
			ft, ok := m.Func(ex.Name)
			if !ok || ft.String() != ex.Type {
				t.Errorf("%s: export %s: parsed %q, wazero %q (%v)", name, ex.Name, ex.Type, ft, ok)
			}
		}
		if nfunc == 0 {
			t.Errorf("%s: no function export parsed", name)
		}
		_ = m.Close(context.Background())
	}
}
