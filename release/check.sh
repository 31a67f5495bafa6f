#!/usr/bin/env bash
# Proves the release reproducible and usable: builds it twice, the second time from a copy of
# the tree at another path without .git (so neither the path nor git tags reach the bytes),
# compares the SHA256SUMS, verifies them with sha256sum -c, runs the linux/amd64 binary from
# its archive, checks the SBOM names the modules linked in, reads the OCI image with skopeo
# when it is installed, and checks that GOOS=windows fails naming the supported systems.
# Leaves the first build in $OUT (default dist/).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-dist}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
commit=$(git rev-parse HEAD)
version=$(cat VERSION)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go run ./release -out "$OUT" -commit "$commit"

mkdir "$tmp/src"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -c | tar -x -C "$tmp/src"
(cd "$tmp/src" && go run ./release -out "$tmp/second" -commit "$commit")

if ! diff -u "$OUT/SHA256SUMS" "$tmp/second/SHA256SUMS"; then
  echo "release-check: two builds of one commit differ" >&2
  exit 1
fi
(cd "$OUT" && sha256sum --quiet -c SHA256SUMS)

base=openclaw-go_${version}_linux_amd64
tar -xzf "$OUT/$base.tar.gz" -C "$tmp"
for f in openclaw LICENSE README.md man/man1/openclaw.1 man/man1/openclaw-mcp-serve.1 completions/openclaw.bash; do
  [ -e "$tmp/$base/$f" ] || { echo "release-check: $base.tar.gz lacks $f" >&2; exit 1; }
done
if [ "$(uname -sm)" = "Linux x86_64" ]; then
  "$tmp/$base/openclaw" version | tee "$tmp/version"
  grep -qx "openclaw-go $version" <(head -1 "$tmp/version")
  grep -q "^commit:   $commit\$" "$tmp/version"
fi
for mod in github.com/modelcontextprotocol/go-sdk github.com/tetratelabs/wazero github.com/spf13/cobra; do
  grep -q "\"name\": \"$mod\"" "$OUT/$base.cdx.json" || { echo "release-check: the SBOM lacks $mod" >&2; exit 1; }
done
if command -v skopeo >/dev/null; then
  mkdir "$tmp/oci" && tar -xf "$OUT/openclaw-go_${version}_oci.tar" -C "$tmp/oci"
  for arch in amd64 arm64; do
    skopeo --override-os linux --override-arch "$arch" inspect --config "oci:$tmp/oci:openclaw-go:$version" \
      | jq -e --arg a "$arch" '.architecture == $a and .config.User == "65532:65532" and .config.Entrypoint == ["/openclaw"]' >/dev/null
  done
  echo "release-check: skopeo reads the image for linux/amd64 and linux/arm64"
else
  echo "release-check: skopeo not installed, the image layout is checked by go test ./release only"
fi
# An unsupported GOOS fails with a sentence saying which are supported (transport, the package
# that needs Unix, fails first; building only it keeps the check cheap).
if GOOS=windows go build -o /dev/null ./transport 2>"$tmp/windows"; then
  echo "release-check: GOOS=windows builds: say so in the README" >&2; exit 1
fi
grep -q "builds_on_Linux_and_macOS_only" "$tmp/windows" || { cat "$tmp/windows" >&2; exit 1; }

echo "release-check: reproducible, $(wc -l <"$OUT/SHA256SUMS") files in $OUT"
