#!/usr/bin/env bash
# Installs the real MCP peers the tests run against, pinned, into $PEERS_DIR (default: .peers at
# the repository root): the npm packages into $PEERS_DIR/npm, go-sdk's conformance fixtures, the
# OpenTelemetry Collector of test/otelcol and sigstore's cosign (the policy bundle signature
# interop) into $PEERS_DIR/bin. Needs node, npm and go; the npm registry and the Go module proxy
# are the only network it uses. A second run with the same pins does nothing (the stamp files
# record them).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
PEERS_DIR=${PEERS_DIR:-$repo/.peers}
mkdir -p "$PEERS_DIR"
PEERS_DIR=$(cd "$PEERS_DIR" && pwd)

npm_pins=(
  @modelcontextprotocol/server-everything@2026.8.31
  @modelcontextprotocol/server-filesystem@2026.8.31
  @modelcontextprotocol/server-memory@2026.8.31
  @modelcontextprotocol/conformance@0.1.16
  @modelcontextprotocol/inspector-cli@1.0.3
  @modelcontextprotocol/sdk@1.32.2
  supergateway@4.0.0
  mcp-proxy@6.7.19
)
# The 0.2 line of the conformance suite (MCP 2026-07-28 requirements) lives in its own npm project
# beside the 0.1.16 one: same package name, and its own @modelcontextprotocol/sdk.
conformance_next_pin=@modelcontextprotocol/conformance@0.2.0-alpha.12
go_pins=(
  github.com/modelcontextprotocol/go-sdk/conformance/everything-server@v1.8.0
  github.com/modelcontextprotocol/go-sdk/conformance/everything-client@v1.8.0
)
# The OpenTelemetry Collector the tracing tests send spans to: test/otelcol, its own Go module
# (collector v0.165.0: the OTLP receiver and the file exporter), built into $PEERS_DIR/bin/otelcol.
# Its stamp is the digest of that module's files, so an edit there rebuilds it and nothing else.
otelcol_src="$repo/test/otelcol"
otelcol_stamp="$PEERS_DIR/.otelcol"
otelcol_want=$(cd "$otelcol_src" && cat go.mod go.sum ./*.go | sha256sum | cut -d' ' -f1)
if [ -x "$PEERS_DIR/bin/otelcol" ] && [ -f "$otelcol_stamp" ] && [ "$(cat "$otelcol_stamp")" = "$otelcol_want" ]; then
  echo "OpenTelemetry Collector already built in $PEERS_DIR/bin"
else
  command -v go >/dev/null || { echo "install.sh: go is not on PATH (the OpenTelemetry Collector is built from test/otelcol)" >&2; exit 1; }
  echo "Building the OpenTelemetry Collector (test/otelcol) into $PEERS_DIR/bin"
  mkdir -p "$PEERS_DIR/bin"
  (cd "$otelcol_src" && GOWORK=off GOFLAGS=-mod=readonly go build -trimpath -o "$PEERS_DIR/bin/otelcol" .)
  printf '%s\n' "$otelcol_want" >"$otelcol_stamp"
fi

# cosign v2, built in its own module (its dependencies never reach our go.mod); with a warm Go build
# cache a rebuild is a link.
cosign_pin=github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5
install_cosign() {
  local stamp="$PEERS_DIR/.cosign-installed"
  if [ -x "$PEERS_DIR/bin/cosign" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$cosign_pin" ]; then
    return
  fi
  mkdir -p "$PEERS_DIR/bin"
  local start=$SECONDS
  (cd "$PEERS_DIR" && GOFLAGS=-mod=mod GOBIN="$PEERS_DIR/bin" go install "$cosign_pin")
  echo "cosign built in $((SECONDS - start)) s"
  printf '%s\n' "$cosign_pin" >"$stamp"
}
stamp="$PEERS_DIR/.installed"
want=$(printf '%s\n' "${npm_pins[@]}" "$conformance_next_pin" "${go_pins[@]}")
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  install_cosign
  echo "MCP peers already installed in $PEERS_DIR"
  exit 0
fi
for tool in node npm go; do
  command -v "$tool" >/dev/null || { echo "install.sh: $tool is not on PATH (the MCP peers need node, npm and go)" >&2; exit 1; }
done

echo "Installing the MCP peers into $PEERS_DIR (npm, then go install)"
mkdir -p "$PEERS_DIR/npm" "$PEERS_DIR/conformance-next" "$PEERS_DIR/bin"
cd "$PEERS_DIR/npm"
[ -f package.json ] || npm init -y >/dev/null
npm install --no-audit --no-fund --loglevel=error "${npm_pins[@]}"
cd "$PEERS_DIR/conformance-next"
[ -f package.json ] || npm init -y >/dev/null
npm install --no-audit --no-fund --loglevel=error "$conformance_next_pin"
# go-sdk's own conformance fixtures, built outside this module so its go.mod is untouched.
cd "$PEERS_DIR"
GOFLAGS=-mod=mod GOBIN="$PEERS_DIR/bin" go install "${go_pins[@]}"
printf '%s\n' "$want" >"$stamp"
install_cosign
echo "MCP peers installed in $PEERS_DIR"
