package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/engine"
)

// The policy file's rate_limits reach Engine.Acquire and are audited in
// the engine's audit log; a reload swaps them and keeps the counters, and
// a bad limit refuses the file (at load and on reload, which keeps the
// limits in place).
func TestEngineRateLimits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pf := writeFile(t, dir, "policy.json", []byte(`{"modules":[],"rate_limits":[{"name":"two","requests":2,"interval_s":3600}]}`))
	audit := &sink{}
	e, _ := load(t, engine.Options{ConfigFile: pf, Audit: audit})
	ctx := context.Background()
	c := &policies.ToolCall{Surface: policies.SurfaceProxy, Tool: policies.ToolRef{Name: "docs__search", Server: "docs"},
		Identity: &policies.Identity{Subject: "alice"}}
	for range 2 {
		release, err := e.Acquire(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	_, err := e.Acquire(ctx, c)
	var le *policies.LimitError
	if !errors.As(err, &le) || le.Limit != "two" {
		t.Fatalf("third call: %v, want the limit two", err)
	}
	if rs := audit.records(); len(rs) != 1 || rs[0].Hook != policies.HookRateLimit || rs[0].Module != "two" {
		t.Fatalf("audit %+v: want the rate_limit record of two", rs)
	}

	// A bad limit: the reload is refused and the limit stays.
	replaceFile(t, pf, []byte(`{"modules":[],"rate_limits":[{"name":"two","requests":2}]}`))
	if _, err := e.Reload(ctx); err == nil || !strings.Contains(err.Error(), "rate_limits[0] (two): requests needs interval_s") {
		t.Fatalf("reload: %v, want the bad limit named", err)
	}
	if _, err := e.Acquire(ctx, c); err == nil {
		t.Fatal("after a refused reload the limit is gone")
	}
	// A new limit of the same name counts on from the same counters.
	replaceFile(t, pf, []byte(`{"modules":[],"rate_limits":[{"name":"two","requests":3,"interval_s":3600}]}`))
	if _, err := e.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Acquire(ctx, c); err != nil {
		t.Fatalf("third of three: %v", err)
	}
	if _, err := e.Acquire(ctx, c); err == nil {
		t.Fatal("fourth of three admitted: the reload reset the counter")
	}

	// At load, a bad limit refuses the engine.
	bad := writeFile(t, dir, "bad.json", []byte(`{"modules":[],"rate_limits":[{"name":"x","concurent":1}]}`))
	if _, err := engine.Load(ctx, &engine.Options{ConfigFile: bad, Audit: &sink{}, Host: testHost()}); err == nil ||
		!strings.Contains(err.Error(), `unknown field "concurent"`) {
		t.Fatalf("load: %v, want the unknown key named", err)
	}
}
