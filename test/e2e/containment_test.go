package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestContainmentThroughServe loads guests/testdata/hostile.wasm (built
// from source by `make guests`) as the policy of `openclaw mcp serve`. The
// module misbehaves when a marker appears in the call's input: each such
// call is blocked with a reason naming the module, and the next call is
// served normally by the same process.
func TestContainmentThroughServe(t *testing.T) {
	t.Parallel()
	ctx, gw, tokenFile := setup(t)
	// A 2 s deadline: on a loaded machine, growing memory to the cap must
	// be reported as the memory limit, not as a deadline.
	policy, err := filepath.Abs("../../guests/testdata/hostile.wasm")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(cfg, []byte(`{"modules":[{"name":"hostile","source":"`+policy+`","timeout_ms":2000}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := serve(t, ctx, gw, tokenFile, "--policy-config", cfg)
	for _, tc := range []struct{ marker, reason string }{
		{"hostile_loop", "deadline"},
		{"hostile_trap", "unreachable"},
		{"hostile_grow", "memory"},
		{"hostile_oob", ""},
		{"hostile_badjson", ""},
		{"hostile_unknown", `"maybe"`},
		{"hostile_huge", ""},
		{"hostile_zero", ""},
		{"hostile_block", "hostile says no"},
	} {
		r := mustCall(t, ctx, s, "events_poll", map[string]any{"session_key": tc.marker})
		if !r.IsError || !strings.HasPrefix(r.Text, `blocked by policy "hostile": `) || !strings.Contains(r.Text, tc.reason) {
			t.Errorf("%s: want a block naming the module and %q, got %+v", tc.marker, tc.reason, r)
		}
		if r := mustCall(t, ctx, s, "events_poll", nil); r.IsError || !strings.HasPrefix(r.Text, "events: ") {
			t.Fatalf("after %s the next call was not served: %+v\nstderr:\n%s", tc.marker, r, s.Stderr())
		}
	}
}
