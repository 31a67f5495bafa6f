package opa

import (
	"errors"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/wasmhost"
)

// A result set that JSON readers could take two ways (a repeated
// "result", as a hostile module can write it) is refused naming the
// module, never read as its last value.
func TestUnwrapResultStrict(t *testing.T) {
	t.Parallel()
	i := &instance{m: &Module{name: "rego"}}
	v, err := i.unwrapResult("opa_eval", "openclaw/before_tool_call", []byte(`[{"result":{"decision":"allow"}}]`))
	if err != nil || string(v) != `{"decision":"allow"}` {
		t.Fatalf("a plain result set: %s, %v", v, err)
	}
	for _, raw := range []string{
		`[{"result":{"decision":"block"},"result":{"decision":"allow"}}]`,
		`[{"result":{"decision":"block"},"r\u0065sult":{"decision":"allow"}}]`,
		`[ {"result":{"decision":"block"}, "result":{"decision":"allow"}} ]`,
	} {
		v, err := i.unwrapResult("opa_eval", "openclaw/before_tool_call", []byte(raw))
		var we *wasmhost.Error
		if !errors.As(err, &we) || we.Module != "rego" || we.Kind != wasmhost.KindABI || !strings.Contains(err.Error(), `repeated field "result"`) {
			t.Errorf("%s: got %s, %v; want an ABI error naming the module and the repeated field", raw, v, err)
		}
	}
}
