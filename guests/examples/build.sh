#!/bin/sh
# build.sh rebuilds the example policy modules of the guest SDKs from source:
#
#   go/main.go + ../sdk/go                         -> go/policy.wasm
#   assemblyscript/src/policy.ts + ../sdk/assemblyscript -> assemblyscript/policy.wasm
#   rust/lib.rs + ../sdk/rust/openclaw_policy.rs (+ abi.rs, json.rs) -> rust/policy.wasm
#
# Requirements: Go 1.26.8 (GO overrides the command); Node.js with npm
# (the pinned assemblyscript and json-as are installed from
# assemblyscript/package-lock.json into assemblyscript/node_modules on
# first use, with `npm ci`); Debian's rustc 1.63 with
# libstd-rust-dev-wasm32 (RUSTC overrides the path). The outputs are
# reproducible: building twice gives the same bytes, and CI runs this
# script and then `git diff --exit-code`. Other compiler versions give
# other bytes.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
guests=$(dirname "$here")
GO=${GO:-go}
. "$guests/rust.sh"
rust_check examples/build.sh

# Go: its own module (guests/examples/go/go.mod, which replaces the SDK
# with ../../sdk/go); -trimpath and an empty build ID keep paths and
# build-specific bytes out of the artifact.
(
	cd "$here/go"
	GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 GOOS=wasip1 GOARCH=wasm \
		"$GO" build -buildmode=c-shared -trimpath -buildvcs=false -ldflags='-s -w -buildid=' \
		-o policy.wasm .
)

# Rust: the SDK is a module file the example includes (#[path]).
rust_guest policy "$here/rust" "$here/rust/policy.wasm"

# AssemblyScript: the entry is src/policy.ts (with the json-as transform,
# an entry at assembly/index.ts silently gives an empty module); the abort
# handler is the SDK's, so the module imports no env.abort.
(
	cd "$here/assemblyscript"
	[ -x node_modules/.bin/asc ] || npm ci --no-audit --no-fund
	node_modules/.bin/asc src/policy.ts --transform json-as \
		-O3 --noAssert --enable simd \
		--use abort=../../sdk/assemblyscript/policy/sdkAbort \
		-o policy.wasm 2>asc.log || { cat asc.log >&2; rm -f asc.log; exit 1; }
	rm -f asc.log
)
