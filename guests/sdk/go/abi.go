// Package policy is the Go guest SDK of the openclaw-go policy ABI
// ("openclaw-policy v1", docs/policy-abi.md in the openclaw-go
// repository). A program that imports it and is built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o policy.wasm .
//
// is a policy module: the package exports the ABI plumbing
// (policy_abi_version, alloc, free, configure, last_error) and gives typed
// requests and responses for the three hooks. The program exports the
// hooks it implements itself, each in three lines, so that a module
// exports exactly the hooks it serves (the host routes a hook to a module
// only when the module exports it):
//
//	package main
//
//	import policy "github.com/openclaw-go/openclaw/guests/sdk/go"
//
//	//go:wasmexport before_tool_call
//	func beforeToolCall(ptr, size uint32) uint64 {
//		return policy.BeforeToolCall(ptr, size, decide)
//	}
//
//	func decide(call *policy.ToolCall) (policy.Verdict, error) {
//		if call.Tool.Name == "messages_send" {
//			return policy.Verdict{Decision: policy.Block, Reason: "no sending"}, nil
//		}
//		return policy.Verdict{Decision: policy.Allow}, nil
//	}
//
//	func main() {}
//
// A configuration is received by the function given to [OnConfigure],
// registered from an init function.
//
// Inputs are decoded and outputs encoded by a small hand-written JSON
// codec, not by encoding/json: with the host's deadline interruption on,
// every loop iteration of a guest costs a call back into the host, and the
// reflection of encoding/json costs several times the codec's loops (see
// docs/benchmarks.md, "Guest languages"). Raw JSON values ([Raw]) can still
// be handed to encoding/json where convenience matters more than speed.
//
// An instance serves one call at a time, so nothing here takes a lock; the
// host may run many instances of one module, each with its own memory, so
// a policy must not rely on state surviving between calls.
package policy

import "unsafe"

// ABIVersion is the version of the policy ABI this SDK implements,
// returned by the policy_abi_version export.
const ABIVersion = 1

// pinned keeps every buffer handed to the host reachable, keyed by its
// address, until the host frees it: the Go GC does not know that the host
// holds the pointer.
var pinned = map[uint32][]byte{}

// out is the output of the last hook call. It stays reachable (and so
// valid for the host to read) until the next call replaces it.
var out []byte

// lastError is the message behind the last refused configure or zero hook
// result, returned by last_error.
var lastError []byte

// configureFunc is the function registered by OnConfigure.
var configureFunc func(config []byte) error

//go:wasmexport policy_abi_version
func policyABIVersion() int32 { return ABIVersion }

//go:wasmexport alloc
func alloc(size uint32) uint32 {
	b := make([]byte, max(size, 1))
	p := addr(b)
	pinned[p] = b
	return p
}

//go:wasmexport free
func free(ptr, _ uint32) { delete(pinned, ptr) }

//go:wasmexport last_error
func lastErrorExport() uint64 { return pack(lastError) }

//go:wasmexport configure
func configure(ptr, size uint32) int32 {
	config := view(ptr, size)
	if configureFunc == nil {
		if len(trimSpace(config)) == 0 {
			return 0
		}
		setError("this module takes no configuration (it registered no policy.OnConfigure)")
		return 1
	}
	if err := configureFunc(config); err != nil {
		setError(err.Error())
		return 1
	}
	return 0
}

// OnConfigure registers f to receive the module's configuration: the JSON
// the operator wrote for the module, or an empty slice when there is none.
// The host calls it once on every new instance before any hook; a non-nil
// error refuses the module, and its message is shown to the operator
// (wasm module "NAME": configure: configuration refused: MESSAGE). config
// is only valid during the call: copy what you keep. Call OnConfigure from
// an init function. Without it, the module accepts only an empty config.
func OnConfigure(f func(config []byte) error) { configureFunc = f }

// addr returns the guest address of b's first byte.
func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// view returns the size bytes of guest memory at ptr, without copying.
func view(ptr, size uint32) []byte {
	if size == 0 {
		return nil
	}
	// The host's buffer lives in this module's linear memory, at ptr; in
	// Wasm a linear-memory address is a Go pointer's value.
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), uintptr(ptr))), size)
}

// pack returns b's address and length packed as ptr<<32|len; b must stay
// reachable until the host has read it.
func pack(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(addr(b))<<32 | uint64(len(b))
}

func setError(msg string) { lastError = append(lastError[:0], msg...) }

// result finishes a hook call: it keeps the encoded output reachable and
// packs it, or records err for last_error and returns 0 (which the host
// treats as a failure of the module: it fails closed).
func result(b []byte, err error) uint64 {
	if err != nil {
		setError(err.Error())
		return 0
	}
	out = b
	return pack(out)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
