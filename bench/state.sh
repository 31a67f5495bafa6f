#!/usr/bin/env bash
# Added latency of shared state: tools/call through one `openclaw mcp proxy --listen` replica with
# --state redis:// beside one without, in ONE run, with the same policy file (a rate limit on every
# call: requests per interval and concurrent calls, so each call takes two counters and gives one
# back: in Redis for one, in the process for the other) and the same upstream (go-sdk's
# everything-server over stdio, tool test_simple_text). mcpbench (go-sdk client, streamable HTTP)
# makes N sequential calls on one session per proxy after WARMUP, cut into ROUNDS rounds in which the
# two take turns. By hand, not in CI; docs/benchmarks.md holds a recorded run.
#
# Env: PEERS_DIR (.peers), N (3000), WARMUP (300), ROUNDS (10), LIMITS=0 (no rate limit: the
# calls then touch no counter, and Redis serves only the session record), WORK (default a new
# /tmp/state-bench.XXXXXX). Needs redis-server on PATH. Only the processes it starts are stopped.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PEERS_DIR=${PEERS_DIR:-$REPO/.peers}
N=${N:-3000} WARMUP=${WARMUP:-300} ROUNDS=${ROUNDS:-10}
WORK=${WORK:-$(mktemp -d /tmp/state-bench.XXXXXX)}
SERVER=$PEERS_DIR/bin/everything-server
[ -x "$SERVER" ] || { echo "PEERS_DIR=$PEERS_DIR: $SERVER missing (see test/peers/install.sh)" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "redis-server is not on PATH (Debian: apt-get install redis-server)" >&2; exit 2; }
log() { printf '== %s\n' "$*" >&2; }

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

log "building openclaw and mcpbench into $WORK"
(cd "$REPO" && go build -o "$WORK/openclaw" ./cmd/openclaw && go build -o "$WORK/mcpbench" ./bench/mcpbench)

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" --logfile "$WORK/redis.log" &
pids+=($!)
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done

mkdir -p "$WORK/home/.openclaw"
printf '{"mcp":{"servers":{"one":{"command":"%s"}}}}\n' "$SERVER" >"$WORK/home/.openclaw/openclaw.json"
limits='[{"name":"bench","requests":1000000000,"interval_s":3600,"concurrent":64}]'
[ "${LIMITS:-1}" != 0 ] || limits='[]'
printf '{"modules":[{"name":"rules","source":"builtin:rules"},{"name":"sanitizer","source":"builtin:sanitizer"}],"rate_limits":%s}\n' "$limits" >"$WORK/policy.json"
export OPENCLAW_MCP_TOKEN=bench-token-$RANDOM$RANDOM OPENCLAW_HOME=$WORK/home

# start LABEL ARGS…: one proxy, its URL in $WORK/LABEL.url.
start() {
  local label=$1; shift
  OPENCLAW_STATE_DIR=$WORK/state-$label "$WORK/openclaw" mcp proxy --listen 127.0.0.1:0 --connect-wait 0 \
    --policy-config "$WORK/policy.json" --audit-log "$WORK/audit-$label.jsonl" "$@" 2>"$WORK/$label.log" &
  pids+=($!)
  until grep -q 'openclaw mcp proxy: serving' "$WORK/$label.log"; do sleep 0.05; done
  sed -n 's|.*serving \(http://[^ ]*/mcp\).*|\1|p' "$WORK/$label.log" | head -1 >"$WORK/$label.url"
}
start memory
start redis --state "redis://127.0.0.1:$port/0"

log "load before: $(cut -d' ' -f1-3 /proc/loadavg); commit $(cd "$REPO" && git rev-parse --short HEAD)"
"$WORK/mcpbench" -target "memory=$(cat "$WORK/memory.url")" -target "redis=$(cat "$WORK/redis.url")" \
  -tool one__test_simple_text -args '{}' -expect 'simple text' -bearer-env OPENCLAW_MCP_TOKEN \
  -n "$N" -warmup "$WARMUP" -rounds "$ROUNDS" | tee "$WORK/results.jsonl"
log "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$WORK/mcpbench" -table -direct memory -ours redis "$WORK/results.jsonl"
log "Redis commands during the run: $(redis-cli -p "$port" info stats | grep -E '^total_commands_processed')"
