package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/wasmhost"
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
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		m, err := wasmhost.Load(context.Background(), name, b, &wasmhost.Options{NoCache: true, MemoryLimitPages: 65536})
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

func TestParseWasmRefusals(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want string
	}{
		{"", "no \\0asm magic"},
		{"\x00asm\x0d\x00\x01\x00", "version 65549 (want 1: a core module, not a component)"},
		{"\x00asm\x01\x00\x00\x00\x01\x05", "section 1: size 5: unexpected end of data"},
		{"\x00asm\x01\x00\x00\x00\x01\x03\x01\x61\x00", "type form 0x61 is not a function type"},
		{"\x00asm\x01\x00\x00\x00\x01\x04\x01\x60\x01\x01", "unknown value type 0x01"},
		{"\x00asm\x01\x00\x00\x00\x03\x02\x01\x00", "function type index 0 out of range"},
		{"\x00asm\x01\x00\x00\x00\x02\x06\xff\xff\xff\xff\x0f\x00", "vector of 4294967295 elements"},
	} {
		if _, err := parseWasm([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err %v, want %q", tt.in, err, tt.want)
		}
	}
}

// FuzzParseWasm: the parser reads untrusted files; it must never panic or
// hang, whatever the bytes.
func FuzzParseWasm(f *testing.F) {
	for _, b := range testModules(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseWasm(b)
	})
}
