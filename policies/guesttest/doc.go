// Package guesttest checks the example policy modules of the guest SDKs
// (guests/examples: Go, AssemblyScript and Rust) from the host side: each
// committed .wasm is loaded through package wasmpolicy, exactly as
// `openclaw mcp serve --policy FILE.wasm` loads it, and its answers to
// every hook are compared with one table, since the three examples
// implement the same rules. Its benchmarks produce the "Guest languages"
// table of docs/benchmarks.md.
//
// The package has no API beyond [Examples]; its tests are the point:
//
//	go test -race ./policies/guesttest/
//	go test -run '^$' -bench . -benchtime 2000x ./policies/guesttest/
package guesttest

import "path/filepath"

// Example is one committed example module.
type Example struct {
	// Lang names the guest language: "go", "assemblyscript" or "rust".
	Lang string
	// Path is the module's path relative to the repository root.
	Path string
	// Traps is true when the module traps on input it cannot decode (the
	// AssemblyScript SDK: json-as aborts), logging why through
	// openclaw_policy.log, instead of returning 0 with a last_error
	// message. Either way the host fails closed.
	Traps bool
}

// Examples lists the example modules built by guests/examples/build.sh.
var Examples = []Example{
	{Lang: "go", Path: filepath.Join("guests", "examples", "go", "policy.wasm")},
	{Lang: "assemblyscript", Path: filepath.Join("guests", "examples", "assemblyscript", "policy.wasm"), Traps: true},
	{Lang: "rust", Path: filepath.Join("guests", "examples", "rust", "policy.wasm")},
}
