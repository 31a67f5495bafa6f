package wasmhost_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports enforces DESIGN.md §2: wasmhost imports the standard library
// and wazero only (never go-sdk, never policies).
func TestImports(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
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
			if !strings.HasPrefix(path, "github.com/tetratelabs/wazero") {
				t.Errorf("%s imports %s: wasmhost may import only the standard library and wazero", f, path)
			}
		}
	}
}
