//go:build linux

package transport

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportRules enforces DESIGN.md §2: transport imports go-sdk and the
// standard library, never the policy contract or the Wasm host.
func TestImportRules(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/openclaw-go/openclaw/") && dep != "github.com/openclaw-go/openclaw/transport" {
			t.Errorf("transport depends on %s; it may import only go-sdk and the standard library", dep)
		}
	}
}
