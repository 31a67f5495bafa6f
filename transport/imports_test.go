//go:build linux

package transport

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportRules enforces DESIGN.md §2: transport imports go-sdk, the
// standard library, the config leaf and the stdlib-only internal leaves
// (internal/redact, internal/jsonw), never the policy contract or the Wasm
// host.
func TestImportRules(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "github.com/openclaw-go/openclaw/transport", "github.com/openclaw-go/openclaw/config",
			"github.com/openclaw-go/openclaw/internal/redact", "github.com/openclaw-go/openclaw/internal/jsonw":
			continue
		}
		if strings.HasPrefix(dep, "github.com/openclaw-go/openclaw/") {
			t.Errorf("transport depends on %s; of the module it may import only config and the stdlib-only internal leaves", dep)
		}
	}
}
