package runtime

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportRules enforces DESIGN.md §2: runtime depends, within this
// module, only on transport, policies (the contract, not its sub-packages),
// config and the stdlib-only internal leaves (internal/redact,
// internal/jsonw); never on the Wasm host or the policy engine, which
// cmd/openclaw hands in through interfaces.
func TestImportRules(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	allowed := map[string]bool{
		"github.com/openclaw-go/openclaw/runtime":         true,
		"github.com/openclaw-go/openclaw/transport":       true,
		"github.com/openclaw-go/openclaw/policies":        true,
		"github.com/openclaw-go/openclaw/config":          true,
		"github.com/openclaw-go/openclaw/internal/redact": true,
		"github.com/openclaw-go/openclaw/internal/jsonw":  true,
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/openclaw-go/openclaw/") && !allowed[dep] {
			t.Errorf("runtime depends on %s; it may import only transport, policies, config and the stdlib-only internal leaves of this module", dep)
		}
		if strings.HasPrefix(dep, "github.com/tetratelabs/wazero") {
			t.Errorf("runtime depends on %s: the Wasm host must stay out of the embedded runtime", dep)
		}
	}
}
