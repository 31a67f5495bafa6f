#!/bin/sh
# build.sh rebuilds the built-in approval policy from its source:
#
#   guests/approvals/lib.rs (+ ../sdk/rust/abi.rs, json.rs) -> policies/builtin/approvals.wasm
#
# Same toolchain and flags as guests/build.sh's rules module (Debian's
# rustc 1.63, std only, set RUSTC to override); the output is reproducible.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
guests=$(dirname "$here")
root=$(dirname "$guests")
RUSTC=${RUSTC:-/usr/bin/rustc}

"$RUSTC" --version | grep -q '^rustc 1\.63\.' || {
	echo "approvals/build.sh: need Debian's rustc 1.63 (got: $("$RUSTC" --version)); set RUSTC" >&2
	exit 1
}

mkdir -p "$root/policies/builtin"
cd "$here"
"$RUSTC" --edition 2021 --crate-type cdylib --crate-name approvals \
	--target wasm32-unknown-unknown \
	-C opt-level=s -C panic=abort -C lto -C codegen-units=1 \
	-C target-feature=+simd128,+bulk-memory \
	-C strip=symbols -C debuginfo=0 \
	--remap-path-prefix "$guests=guests" \
	-o "$root/policies/builtin/approvals.wasm" lib.rs
rm -f "$root/policies/builtin/"*.d
