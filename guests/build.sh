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
RUSTC=${RUSTC:-/usr/bin/rustc}
WAT2WASM=${WAT2WASM:-wat2wasm}

"$RUSTC" --version | grep -q '^rustc 1\.63\.' || {
	echo "build.sh: need Debian's rustc 1.63 (got: $("$RUSTC" --version)); set RUSTC" >&2
	exit 1
}

# The source is compiled from inside its directory with the path remapped,
# so no absolute path of this checkout can reach the artifact.
mkdir -p "$root/policies/builtin"
(
	cd "$here/rules"
	"$RUSTC" --edition 2021 --crate-type cdylib --crate-name rules \
		--target wasm32-unknown-unknown \
		-C opt-level=s -C panic=abort -C lto -C codegen-units=1 \
		-C target-feature=+simd128,+bulk-memory \
		-C strip=symbols -C debuginfo=0 \
		--remap-path-prefix "$here/rules=rules" \
		-o "$root/policies/builtin/rules.wasm" lib.rs
)
rm -f "$root/policies/builtin/"*.d

for src in "$here"/testdata/*.wat; do
	"$WAT2WASM" "$src" -o "${src%.wat}.wasm"
done
"$here/sanitizer/build.sh"
"$here/approvals/build.sh"
"$here/examples/build.sh"
