#!/usr/bin/env bash
# conversations_list through `openclaw mcp serve` against the Gateway's own sessions.list round
# trip (its floor), in one run on one Gateway: the raw Go JSON-RPC client (ocinterop calls, whose
# rounds interleave our Gateway client's sessions.list) and the MCP TypeScript SDK's Client over
# StdioClientTransport (bench/serve-calls.mjs, whose rounds interleave a raw WebSocket
# sessions.list), RUNS times, alternating which client goes first. Prints Markdown rows, the
# load average before and after, and the commit.
# The Gateway is our own (`openclaw gateway run --seed demo --state-dir none`), started here on
# PORT and stopped at the end: the raw WebSocket floor connects with a token and no device block,
# which the real OpenClaw Gateway answers with no scopes (use bench/serve-calls.sh there).
# Env: N (Go calls of each request, default 600), NODE_N (default 300), ROUNDS (default 10),
# RUNS (default 2), PORT (default 18941), PEERS_DIR (default $REPO/.peers). BASE=REV also serves
# the build of commit REV beside HEAD's in the same rounds (labelled ours@REV).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-600}
NODE_N=${NODE_N:-300}
ROUNDS=${ROUNDS:-10}
RUNS=${RUNS:-2}
PORT=${PORT:-18941}
SDK=${PEERS_DIR:-$REPO/.peers}/npm/node_modules/@modelcontextprotocol/sdk
[ -d "$SDK" ] || { echo "no TypeScript SDK at $SDK (set PEERS_DIR)" >&2; exit 2; }
WORK=$(mktemp -d)
GW_PID=
cleanup() {
  if [ -n "$GW_PID" ]; then kill "$GW_PID" 2>/dev/null || true; wait "$GW_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
log() { printf '== %s\n' "$*" >&2; }

log "building openclaw and ocinterop into $WORK"
(cd "$REPO" && go build -o "$WORK/openclaw" ./cmd/openclaw && go build -o "$WORK/ocinterop" ./internal/e2e/ocinterop)
head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$WORK/token"
"$WORK/openclaw" gateway run --seed demo --port "$PORT" --state-dir none --token-file "$WORK/token" 2>"$WORK/gw.log" &
GW_PID=$!
URL=ws://127.0.0.1:$PORT
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.1
done
SERVE="$WORK/openclaw mcp serve --url $URL --token-file $WORK/token"
GO_BASE=() NODE_BASE=() LABELS=ours
if [ -n "${BASE:-}" ]; then
  log "building openclaw of $BASE ($(git -C "$REPO" rev-parse --short "$BASE"))"
  mkdir "$WORK/base"
  git -C "$REPO" archive "$BASE" | tar -x -C "$WORK/base"
  (cd "$WORK/base" && go build -o "$WORK/openclaw-base" ./cmd/openclaw)
  BASE_SERVE="$WORK/openclaw-base mcp serve --url $URL --token-file $WORK/token"
  GO_BASE=(-real "$BASE_SERVE" -real-label "ours@$BASE")
  NODE_BASE=("$BASE_SERVE")
  LABELS="ours@$BASE,ours"
fi

log "commit $(git -C "$REPO" rev-parse --short HEAD)$(git -C "$REPO" diff --quiet HEAD -- . || echo ' (with uncommitted changes)')"
log "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
go_run() {
  log "raw Go client, n=$N, $ROUNDS rounds (load $(cut -d' ' -f1 /proc/loadavg))"
  "$WORK/ocinterop" calls "${GO_BASE[@]}" -ours "$SERVE" -n "$N" -rounds "$ROUNDS" -floor-url "$URL" -floor-token-file "$WORK/token"
}
node_run() {
  log "Node SDK client, n=$NODE_N, $ROUNDS rounds (load $(cut -d' ' -f1 /proc/loadavg))"
  LABELS=$LABELS FLOOR_URL=$URL FLOOR_TOKEN_FILE=$WORK/token node "$REPO/bench/serve-calls.mjs" "$SDK" "$NODE_N" "$ROUNDS" "${NODE_BASE[@]}" "$SERVE"
}
for r in $(seq "$RUNS"); do
  if [ $((r % 2)) = 1 ]; then go_run; node_run; else node_run; go_run; fi
done
log "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
