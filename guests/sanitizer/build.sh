#!/bin/sh
# build.sh rebuilds the built-in tool-name sanitizer from its source:
#
#   guests/sanitizer/lib.rs (+ ../sdk/rust/abi.rs, json.rs) -> policies/builtin/sanitizer.wasm
#
# Same toolchain and flags as every Rust guest (guests/rust.sh: Debian's
# rustc 1.63, std only, set RUSTC to override); the output is reproducible.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
guests=$(dirname "$here")
root=$(dirname "$guests")
. "$guests/rust.sh"
rust_check sanitizer/build.sh

mkdir -p "$root/policies/builtin"
rust_guest sanitizer "$here" "$root/policies/builtin/sanitizer.wasm"

# The containment fixture of the sanitize_tool_names and decide_approval
# adapters (policies/wasmpolicy/hooks_test.go).
"${WAT2WASM:-wat2wasm}" "$root/policies/wasmpolicy/testdata/hooks.wat" -o "$root/policies/wasmpolicy/testdata/hooks.wasm"
