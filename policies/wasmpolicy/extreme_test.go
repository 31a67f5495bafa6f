package wasmpolicy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// TestExtremeContainment covers the containment cases of docs/policy-abi.md §5 that the
// hostile module does not: a panic in configure, unbounded recursion, and a
// 100 MiB result. Each fails closed with a typed error naming the module,
// and the module keeps serving.
func TestExtremeContainment(t *testing.T) {
	t.Parallel()
	wasm, err := os.ReadFile("../../guests/testdata/extreme.wasm")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// A panic (trap) in configure refuses the module at load.
	_, err = Load(ctx, "extreme", wasm, json.RawMessage(`"panic"`), &Options{Host: wasmhost.Options{}})
	var we *wasmhost.Error
	if !errors.As(err, &we) || we.Module != "extreme" || !strings.Contains(err.Error(), "configure") {
		t.Fatalf("panic in configure: got %v", err)
	}

	// 2048 pages (128 MiB) let the guest really build a 100 MiB result;
	// the 1 MiB result cap still refuses it.
	m, err := Load(ctx, "extreme", wasm, nil, &Options{Host: wasmhost.Options{MemoryLimitPages: 2048, PoolSize: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	call := func(key string) (policies.Verdict, error) {
		return m.BeforeToolCall(ctx, &policies.ToolCall{Surface: policies.SurfaceServe, SessionKey: key, Tool: policies.ToolRef{Name: "t"}})
	}
	for _, tc := range []struct {
		key  string
		kind wasmhost.Kind
	}{
		{"R", wasmhost.KindTrap}, // call stack exhausted
		{"H", wasmhost.KindABI},  // result over the cap
	} {
		v, err := call(tc.key)
		if !errors.As(err, &we) || we.Module != "extreme" || we.Kind != tc.kind || v.Decision != policies.Block {
			t.Errorf("%s: got %+v, %v (kind %v), want a block with a %v error naming the module", tc.key, v, err, kindOf(err), tc.kind)
		}
		if v, err := call("ok"); err != nil || v.Decision != policies.Allow {
			t.Fatalf("after %s the module did not serve: %+v %v", tc.key, v, err)
		}
	}
}

func kindOf(err error) wasmhost.Kind {
	var we *wasmhost.Error
	if errors.As(err, &we) {
		return we.Kind
	}
	return 0
}

// An input larger than the module's memory is refused naming the limit
// and how to raise it; a normal call is served afterwards.
func TestInputOverMemoryLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, err := Load(ctx, "rules", builtin.Rules(), nil, &Options{Host: wasmhost.Options{MemoryLimitPages: 32, PoolSize: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	big, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", 3<<20)})
	v, err := m.BeforeToolCall(ctx, &policies.ToolCall{Tool: policies.ToolRef{Name: "messages_send"}, Arguments: big})
	var we *wasmhost.Error
	if !errors.As(err, &we) || we.Kind != wasmhost.KindMemoryLimit || !strings.Contains(err.Error(), "memory_limit_pages") || v.Decision != policies.Block {
		t.Fatalf("got %+v, %v", v, err)
	}
	if v, err := m.BeforeToolCall(ctx, &policies.ToolCall{Tool: policies.ToolRef{Name: "t"}}); err != nil || v.Decision != policies.Allow {
		t.Fatalf("after the refusal: %+v %v", v, err)
	}
}
