package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/wasmhost"
)

type discard struct{}

func (discard) Record(policies.AuditRecord) {}

// TestInFlightCallFinishesOnOldModule holds a policy set as a call in
// flight does, swaps the module underneath, and checks that the held set
// still decides with the old module, which is closed only once released.
func TestInFlightCallFinishesOnOldModule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "..", "guests", "testdata", name+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	p := filepath.Join(dir, "p.wasm")
	if err := os.WriteFile(p, read("allow"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e, err := Load(ctx, &Options{Files: []string{p}, Audit: discard{}, Host: wasmhost.Options{CallTimeout: 10 * time.Second, InitTimeout: 10 * time.Second},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	call := &policies.ToolCall{Surface: policies.SurfaceServe, SessionKey: "hostile_block", Tool: policies.ToolRef{Name: "x"}}

	held := e.acquire() // a call in flight
	old := held.members[0].g
	if err := os.WriteFile(p, read("hostile"), 0o600); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Reload(ctx); err != nil || len(res.Swapped) != 1 {
		t.Fatalf("Reload = %+v, %v", res, err)
	}
	if d := e.BeforeToolCall(ctx, call); d.Decision != policies.Block {
		t.Fatalf("new calls: %+v, want the new module's block", d)
	}
	if d := held.chain.BeforeToolCall(ctx, call); d.Decision != policies.Allow {
		t.Fatalf("the call in flight: %+v, want the old module's allow", d)
	}
	held.unref(ctx, e)
	e.retired.Wait()
	if _, err := old.mod.BeforeToolCall(ctx, call); !errors.Is(err, wasmhost.ErrClosed) {
		t.Fatalf("old module after its last call: %v, want closed", err)
	}
}
