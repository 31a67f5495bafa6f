#!/usr/bin/env bash
# Memory of `openclaw mcp proxy --listen` under a flood of abandoned MCP sessions: N initialize
# POSTs (P at a time, curl, each on its own connection, no DELETE), then the proxy's VmRSS and
# VmHWM (/proc/PID/status) and how many initializes were answered 200 and 503. One run per
# --max-sessions value in CAPS; with IDLE set (e.g. 20s, --session-idle-timeout), VmRSS and the
# number of sessions still open are read again IDLE + 10 s after the flood. The proxy fronts
# one stdio server, server-everything (node), when PEERS_DIR has it, else none.
# By hand, not in CI; see docs/benchmarks.md for a recorded run. Only the proxy this script
# starts is stopped.
#
# Env: N (3000), P (20), CAPS ("512 100000"), IDLE (unset), OPENCLAW_BIN (default: go build).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${N:-3000} P=${P:-20} CAPS=${CAPS:-"512 100000"}
WORK=$(mktemp -d /tmp/session-flood.XXXXXX)
BIN=${OPENCLAW_BIN:-}
if [ -z "$BIN" ]; then
  BIN=$WORK/openclaw
  (cd "$REPO" && go build -o "$BIN" ./cmd/openclaw)
fi
mkdir -p "$WORK/home/.openclaw"
E=${PEERS_DIR:-$REPO/.peers}/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js
if [ -e "$E" ] && command -v node >/dev/null; then
  printf '{"mcp":{"servers":{"everything":{"command":"node","args":["%s","stdio"]}}}}\n' "$E" >"$WORK/home/.openclaw/openclaw.json"
else
  echo '{"mcp":{"servers":{}}}' >"$WORK/home/.openclaw/openclaw.json"
fi
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}'
kb() { awk -v k="$1:" '$1 == k { printf "%.1f", $2 / 1024 }' "/proc/$2/status"; }

for cap in $CAPS; do
  port=$((20000 + RANDOM % 20000))
  idle_flag=()
  [ -n "${IDLE:-}" ] && idle_flag=(--session-idle-timeout "$IDLE")
  OPENCLAW_HOME=$WORK/home OPENCLAW_STATE_DIR=$WORK/state setsid "$BIN" mcp proxy --listen "127.0.0.1:$port" --no-auth \
    --max-sessions "$cap" "${idle_flag[@]}" --audit-log /dev/null 2>"$WORK/proxy-$cap.log" &
  pid=$!
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.1; done
  sleep 1
  before=$(kb VmRSS $pid)
  seq "$N" | xargs -P "$P" -I@ curl -s -o /dev/null -w '%{http_code}\n' -X POST "http://127.0.0.1:$port/mcp" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -d "$INIT" >"$WORK/codes-$cap"
  after=$(kb VmRSS $pid) hwm=$(kb VmHWM $pid)
  ok=$(grep -c '^200$' "$WORK/codes-$cap" || true) refused=$(grep -c '^503$' "$WORK/codes-$cap" || true)
  line="--max-sessions $cap: $N initializes ($P at a time): $ok answered 200, $refused 503; VmRSS $before -> $after MiB, VmHWM $hwm MiB"
  if [ -n "${IDLE:-}" ]; then
    sleep "$(( ${IDLE%s} + 10 ))"
    open=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$port/mcp" -H 'Content-Type: application/json' \
      -H 'Accept: application/json, text/event-stream' -d "$INIT")
    line="$line; $IDLE + 10 s later VmRSS $(kb VmRSS $pid) MiB, a new initialize answered $open"
  fi
  echo "$line"
  kill -TERM -- -"$pid" 2>/dev/null || kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
