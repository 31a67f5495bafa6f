# rust.sh is sourced (after setting guests to the absolute path of this
# folder) by the build scripts of the Rust guests (build.sh,
# sanitizer/build.sh, approvals/build.sh, examples/build.sh): one compiler
# check and one set of flags, so that every Rust module is built the same
# reproducible way.
#
#   rust_check WHO            exits unless $RUSTC is Debian's rustc 1.63
#                             (WHO names the calling script in the message)
#   rust_guest CRATE DIR OUT  compiles DIR/lib.rs as the cdylib CRATE for
#                             wasm32-unknown-unknown into OUT
#
# The crate is compiled from inside DIR, so the source paths rustc embeds
# (in panic locations) are relative; the remap covers any absolute one
# under guests/. A different compiler version gives other bytes.

RUSTC=${RUSTC:-/usr/bin/rustc}
: "${guests:?rust.sh: set guests to the absolute path of guests/ before sourcing}"

rust_check() {
	"$RUSTC" --version | grep -q '^rustc 1\.63\.' || {
		echo "$1: need Debian's rustc 1.63 (got: $("$RUSTC" --version)); set RUSTC" >&2
		exit 1
	}
}

rust_guest() {
	(
		cd "$2"
		"$RUSTC" --edition 2021 --crate-type cdylib --crate-name "$1" \
			--target wasm32-unknown-unknown \
			-C opt-level=s -C panic=abort -C lto -C codegen-units=1 \
			-C target-feature=+simd128,+bulk-memory \
			-C strip=symbols -C debuginfo=0 \
			--remap-path-prefix "$guests=guests" \
			-o "$3" lib.rs
	)
	rm -f "$(dirname "$3")"/*.d
}
