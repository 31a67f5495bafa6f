#!/bin/sh
# build.sh rebuilds the built-in approval policy from its source:
#
#   guests/approvals/lib.rs (+ ../sdk/rust/abi.rs, json.rs) -> policies/builtin/approvals.wasm
#
# Same toolchain and flags as every Rust guest (guests/rust.sh: Debian's
# rustc 1.63, std only, set RUSTC to override); the output is reproducible.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
guests=$(dirname "$here")
root=$(dirname "$guests")
. "$guests/rust.sh"
rust_check approvals/build.sh

mkdir -p "$root/policies/builtin"
rust_guest approvals "$here" "$root/policies/builtin/approvals.wasm"
