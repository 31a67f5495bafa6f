package wasmhost_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports enforces DESIGN.md §2: wasmhost imports the standard library,
// wazero and its own wasmbin only (never go-sdk, never policies), and
// wasmbin imports the standard library only.
func TestImports(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := filepath.Glob(filepath.Join("wasmbin", "*.go"))
	if err != nil || len(bin) == 0 {
		t.Fatalf("no wasmbin files: %v", err)
	}
	files = append(files, bin...)
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first := strings.SplitN(path, "/", 2)[0]
			if !strings.Contains(first, ".") { // standard library
				continue
			}
			switch {
			case strings.HasPrefix(f, "wasmbin"):
				t.Errorf("%s imports %s: wasmbin may import only the standard library", f, path)
			case !strings.HasPrefix(path, "github.com/tetratelabs/wazero") && path != "github.com/openclaw-go/openclaw/wasmhost/wasmbin":
				t.Errorf("%s imports %s: wasmhost may import only the standard library, wazero and wasmhost/wasmbin", f, path)
			}
		}
	}
}
