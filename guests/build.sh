#!/bin/sh
# build.sh rebuilds the committed Wasm artifacts from their sources:
#
#   guests/rules/lib.rs       -> policies/builtin/rules.wasm  (Rust, std only;
#                                with ../sdk/rust/abi.rs and json.rs)
#   guests/testdata/*.wat     -> guests/testdata/*.wasm       (containment fixtures)
#
# Requirements (Debian/Ubuntu): apt-get install -y rustc libstd-rust-dev-wasm32 wabt
# The Rust compiler must be Debian's rustc 1.63 (RUSTC overrides the path):
# a rustup toolchain without the wasm32 target will not do, and a different
# compiler version gives different bytes. The outputs are reproducible: CI
# runs this script and then `git diff --exit-code`.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
guests=$here
WAT2WASM=${WAT2WASM:-wat2wasm}
. "$here/rust.sh"
rust_check build.sh

mkdir -p "$root/policies/builtin"
rust_guest rules "$here/rules" "$root/policies/builtin/rules.wasm"

for src in "$here"/testdata/*.wat; do
	"$WAT2WASM" "$src" -o "${src%.wat}.wasm"
done
"$here/sanitizer/build.sh"
"$here/approvals/build.sh"
"$here/examples/build.sh"
