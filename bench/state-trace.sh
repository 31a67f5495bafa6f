#!/usr/bin/env bash
# What tracing costs a call through a replica with shared state, and that off it costs nothing:
# three `openclaw mcp proxy --listen --state redis://` side by side on one Redis, with the same
# policy file (a rate limit on every call: two Redis scripts a call) and upstream (go-sdk's
# everything-server over stdio, test_simple_text): BASE's binary (default main), this tree's with
# tracing off, and this tree's with --otlp-endpoint to the OpenTelemetry Collector of test/otelcol
# ($PEERS_DIR/bin/otelcol, file exporter). mcpbench (go-sdk client, streamable HTTP) makes N
# sequential calls on one session per proxy after WARMUP, in ROUNDS rounds in which the three take
# turns. By hand, not in CI; docs/benchmarks.md holds a recorded run.
#
# Env: PEERS_DIR (.peers), BASE (main), N (2000), WARMUP (200), ROUNDS (8), WORK (default a new
# /tmp/state-trace.XXXXXX). Needs redis-server on PATH. Only the processes it starts are stopped.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PEERS_DIR=${PEERS_DIR:-$REPO/.peers}
BASE=${BASE:-main} N=${N:-2000} WARMUP=${WARMUP:-200} ROUNDS=${ROUNDS:-8}
WORK=${WORK:-$(mktemp -d /tmp/state-trace.XXXXXX)}
SERVER=$PEERS_DIR/bin/everything-server COLLECTOR=$PEERS_DIR/bin/otelcol
for f in "$SERVER" "$COLLECTOR"; do
  [ -x "$f" ] || { echo "PEERS_DIR=$PEERS_DIR: $f missing (see test/peers/install.sh)" >&2; exit 2; }
done
command -v redis-server >/dev/null || { echo "redis-server is not on PATH (Debian: apt-get install redis-server)" >&2; exit 2; }
log() { printf '== %s\n' "$*" >&2; }
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

log "building $BASE's openclaw, this tree's openclaw and mcpbench into $WORK"
mkdir -p "$WORK/base"
git -C "$REPO" archive "$BASE" | tar -x -C "$WORK/base"
(cd "$WORK/base" && go build -o "$WORK/openclaw-base" ./cmd/openclaw)
(cd "$REPO" && go build -o "$WORK/openclaw" ./cmd/openclaw && go build -o "$WORK/mcpbench" ./bench/mcpbench)

port=$(freeport)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" --logfile "$WORK/redis.log" &
pids+=($!)
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
cport=$(freeport)
cat >"$WORK/collector.yaml" <<YAML
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$cport
exporters:
  file:
    path: $WORK/spans.jsonl
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
YAML
"$COLLECTOR" --config "$WORK/collector.yaml" >"$WORK/collector.log" 2>&1 &
pids+=($!)
until python3 -c "import socket; socket.create_connection(('127.0.0.1', $cport))" 2>/dev/null; do sleep 0.1; done

mkdir -p "$WORK/home/.openclaw"
printf '{"mcp":{"servers":{"one":{"command":"%s"}}}}\n' "$SERVER" >"$WORK/home/.openclaw/openclaw.json"
printf '{"modules":[{"name":"rules","source":"builtin:rules"},{"name":"sanitizer","source":"builtin:sanitizer"}],"rate_limits":[{"name":"bench","requests":1000000000,"interval_s":3600,"concurrent":64}]}\n' >"$WORK/policy.json"
export OPENCLAW_MCP_TOKEN=bench-token-$RANDOM$RANDOM OPENCLAW_HOME=$WORK/home

# start LABEL BINARY ARGS…: one proxy, its URL in $WORK/LABEL.url.
start() {
  local label=$1 bin=$2; shift 2
  : >"$WORK/$label.log"
  OPENCLAW_STATE_DIR=$WORK/state-$label "$bin" mcp proxy --listen 127.0.0.1:0 --connect-wait 0 \
    --policy-config "$WORK/policy.json" --audit-log "$WORK/audit-$label.jsonl" --state "redis://127.0.0.1:$port/0" "$@" 2>"$WORK/$label.log" &
  pids+=($!)
  until grep -q 'openclaw mcp proxy: serving' "$WORK/$label.log"; do sleep 0.05; done
  sed -n 's|.*serving \(http://[^ ]*/mcp\).*|\1|p' "$WORK/$label.log" | head -1 >"$WORK/$label.url"
}
start base "$WORK/openclaw-base"
start off "$WORK/openclaw"
start on "$WORK/openclaw" --otlp-endpoint "http://127.0.0.1:$cport"

log "load before: $(cut -d' ' -f1-3 /proc/loadavg); base $(git -C "$REPO" rev-parse --short "$BASE"), this tree $(git -C "$REPO" rev-parse --short HEAD)"
"$WORK/mcpbench" -target "base=$(cat "$WORK/base.url")" -target "off=$(cat "$WORK/off.url")" -target "on=$(cat "$WORK/on.url")" \
  -tool one__test_simple_text -args '{}' -expect 'simple text' -bearer-env OPENCLAW_MCP_TOKEN \
  -n "$N" -warmup "$WARMUP" -rounds "$ROUNDS" | tee "$WORK/results.jsonl"
log "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$WORK/mcpbench" -table -direct base -ours off "$WORK/results.jsonl"
sleep 1 # the batcher's last spans
log "spans the collector received: $(grep -o '"spanId"' "$WORK/spans.jsonl" | wc -l)"
