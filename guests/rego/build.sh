#!/bin/sh
# build.sh compiles the Rego policies of openclaw-go into OPA Wasm modules
# (`opa build -t wasm`), the artifacts committed next to their sources:
#
#   guests/rego/policy.rego          -> guests/rego/policy.wasm  (the example)
#   policies/opa/testdata/*.rego     -> policies/opa/testdata/*.wasm  (test fixtures)
#
# Each .rego names its entrypoints in a line "# entrypoints: a/b c/d"
# (the example's are openclaw/before_tool_call, openclaw/sanitize_tool_names
# and openclaw/decide_approval).
#
# OPA v1.22.3 comes through the Go module proxy: the first run downloads
# and compiles it (about 6.5 minutes), later runs reuse Go's build cache.
# Set OPA to use an opa binary of that version instead. This script is not
# part of guests/build.sh, so CI does not spend those minutes; CI checks the
# committed modules' behaviour through the tests of policies/opa.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$(dirname "$here")")
OPA=${OPA:-"go run github.com/open-policy-agent/opa@v1.22.3"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

$OPA version | grep -q '^Version: 1\.22\.3$' || {
	echo "build.sh: need OPA v1.22.3 (got: $($OPA version | head -1)); set OPA" >&2
	exit 1
}

# build SRC OUT: compile one policy with the entrypoints it declares. The
# source is copied alone into an empty directory, so no path of this
# checkout reaches the bundle.
build() {
	src=$1 out=$2
	eps=$(sed -n 's/^# entrypoints: //p' "$src")
	[ -n "$eps" ] || { echo "build.sh: $src has no '# entrypoints:' line" >&2; exit 1; }
	rm -rf "$tmp/src" "$tmp/bundle.tar.gz" "$tmp/policy.wasm"
	mkdir "$tmp/src"
	cp "$src" "$tmp/src/"
	args=""
	for e in $eps; do args="$args -e $e"; done
	(cd "$tmp/src" && $OPA build -t wasm $args -o "$tmp/bundle.tar.gz" .)
	tar -xzf "$tmp/bundle.tar.gz" -C "$tmp" /policy.wasm 2>/dev/null || tar -xzf "$tmp/bundle.tar.gz" -C "$tmp" policy.wasm
	cat "$tmp/policy.wasm" >"$out"
	echo "$out"
}

build "$here/policy.rego" "$here/policy.wasm"
for src in "$root"/policies/opa/testdata/*.rego; do
	build "$src" "${src%.rego}.wasm"
done
