package wasmhost_test

import (
	"context"
	"testing"

	"github.com/openclaw-go/openclaw/wasmhost"
)

// BenchmarkCallBytes is the host's own cost of one byte call: the guest
// (guests/testdata/allow.wat) answers a fixed verdict without a loop, with
// interruption on (close-on-done and the call deadline).
func BenchmarkCallBytes(b *testing.B) {
	m := load(b, "allow", &wasmhost.Options{NoCache: true})
	in := []byte(`{"abi":1,"tool":{"name":"t"}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.CallBytes(ctx, "before_tool_call", in); err != nil {
			b.Fatal(err)
		}
	}
}
