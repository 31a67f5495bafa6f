#!/usr/bin/env bash
# tools/call latency and load of `openclaw mcp proxy` (streamable HTTP) beside supergateway and
# mcp-proxy (npm), in ONE run against the same backend: server-everything over stdio (node).
# Issue 5, "Figures" and "Load". By hand, not in CI; see docs/benchmarks.md for a recorded run.
#
#   1. latency: one go-sdk client (bench/mcpbench), one session per path, N sequential echo
#      calls after WARMUP, cut into ROUNDS rounds in which the paths take turns:
#        direct       mcpbench → node server-everything (stdio)
#        ours         mcpbench → openclaw mcp proxy --listen (streamable HTTP, bearer token,
#                     default policies) → node server-everything (stdio)
#        supergateway mcpbench → supergateway --stateful (streamable HTTP) → node (stdio)
#        mcp-proxy    mcpbench → mcp-proxy /mcp (streamable HTTP) → node (stdio)
#   2. load: LOAD_C sessions × LOAD_N calls against each bridge in turn (errors must be 0) while
#      /proc/PID/status of the bridge and of its descendants is sampled every 100 ms.
#      supergateway --stateful starts one server child per session, so it gets SG_LOAD_C sessions
#      (default 20: 200 would be 200 node servers, ~13 GB, on a shared machine).
#   3. a Markdown table (bench/mcpbench -table) on stdout and in $OUT.
#
# Every process runs in a fresh loopback-only network namespace when run as root (supergateway
# binds all interfaces and has no host flag); ports are picked at random. Only the processes this
# script starts are stopped, by process group.
#
# Env: PEERS_DIR (.peers), N (2000), WARMUP (200), ROUNDS (10), LOAD_C (200), LOAD_N (100),
# SG_LOAD_C (20), ONLY (space-separated subset of: ours supergateway mcp-proxy), NO_LOAD=1,
# OURS_REV (commit to build ours from, default HEAD), OURS_BIN (a prebuilt binary instead), OUT (report, default $WORK/proxy-bench.md),
# WORK (default a new /tmp/proxy-bench.XXXXXX), NETNS=0 (do not enter a network namespace),
# BASE_REV (a second commit of ours, built and run beside it as "ours-base" with the same
# config: a before/after pair in one run),
# PARALLEL=1 (ours' server entry says supportsParallelToolCalls: true; by default, as in OpenClaw,
# the runtime sends one call at a time to a server), PERF=1 (record a perf CPU profile of ours during its load test: $WORK/ours.perf.{data,txt}).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { printf '== %s\n' "$*" >&2; }

if [ "${1:-}" != --inner ]; then
  export PEERS_DIR=${PEERS_DIR:-$REPO/.peers}
  export WORK=${WORK:-$(mktemp -d /tmp/proxy-bench.XXXXXX)}
  mkdir -p "$WORK"
  E=$PEERS_DIR/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js
  for f in "$E" "$PEERS_DIR/npm/node_modules/.bin/supergateway" "$PEERS_DIR/npm/node_modules/.bin/mcp-proxy"; do
    [ -e "$f" ] || { echo "PEERS_DIR=$PEERS_DIR: $f missing (see test/peers/install.sh)" >&2; exit 2; }
  done
  command -v node >/dev/null || { echo "node is not on PATH" >&2; exit 2; }
  log "building mcpbench (working tree) and openclaw (git archive ${OURS_REV:-HEAD}) into $WORK"
  (cd "$REPO" && go build -o "$WORK/mcpbench" ./bench/mcpbench)
  if [ -z "${OURS_BIN:-}" ]; then
    # A clean tree of the commit: others' edits in progress do not leak into the figures.
    rm -rf "$WORK/src" && mkdir -p "$WORK/src"
    (cd "$REPO" && git archive "${OURS_REV:-HEAD}") | tar -x -C "$WORK/src"
    (cd "$WORK/src" && go build -o "$WORK/openclaw" ./cmd/openclaw)
    export OURS_BIN=$WORK/openclaw
    export OURS_COMMIT=$(cd "$REPO" && git rev-parse --short "${OURS_REV:-HEAD}")
  else
    export OURS_COMMIT="$OURS_BIN"
  fi
  if [ -n "${BASE_REV:-}" ]; then
    rm -rf "$WORK/base-src" && mkdir -p "$WORK/base-src"
    (cd "$REPO" && git archive "$BASE_REV") | tar -x -C "$WORK/base-src"
    (cd "$WORK/base-src" && go build -o "$WORK/openclaw-base" ./cmd/openclaw)
    export BASE_BIN=$WORK/openclaw-base
    export BASE_COMMIT=$(cd "$REPO" && git rev-parse --short "$BASE_REV")
    export ONLY="${ONLY:-ours supergateway mcp-proxy} ours-base"
  fi
  if [ "${NETNS:-1}" != 0 ] && [ "$(id -u)" = 0 ]; then
    exec unshare --net -- bash -c 'ip link set lo up && exec bash "$0" --inner' "${BASH_SOURCE[0]}"
  fi
  [ "${NETNS:-1}" = 0 ] || log "not root: no network namespace; supergateway listens on every interface"
  exec bash "${BASH_SOURCE[0]}" --inner
fi

# ---- inner: in the namespace (or not), binaries built ----
E=$PEERS_DIR/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js
SG=$PEERS_DIR/npm/node_modules/.bin/supergateway
MP=$PEERS_DIR/npm/node_modules/.bin/mcp-proxy
BENCH=$WORK/mcpbench
N=${N:-2000} WARMUP=${WARMUP:-200} ROUNDS=${ROUNDS:-10}
LOAD_C=${LOAD_C:-200} LOAD_N=${LOAD_N:-100} SG_LOAD_C=${SG_LOAD_C:-20}
ONLY=${ONLY:-ours supergateway mcp-proxy}
OUT=${OUT:-$WORK/proxy-bench.md}
RESULTS=$WORK/results.jsonl
: >"$RESULTS"

declare -A PID PORT URL TOOL
STARTED=()

# stop_all: TERM then KILL the process group of every bridge this script started.
stop_all() {
  local p i
  for p in "${STARTED[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  for i in $(seq 30); do
    local alive=0
    for p in "${STARTED[@]}"; do kill -0 -- "-$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && return
    sleep 0.1
  done
  for p in "${STARTED[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done
}
trap stop_all EXIT

# free_port: a random port nothing listens on.
free_port() {
  local p
  while :; do
    p=$(shuf -i 20000-59999 -n 1)
    ss -Htln "sport = :$p" | grep -q . || { echo "$p"; return; }
  done
}

# wait_port PORT SECONDS NAME: poll until PORT accepts a connection.
wait_port() {
  local i
  for i in $(seq $(($2 * 10))); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "${PID[$3]}" 2>/dev/null || { echo "$3 exited; log:" >&2; cat "$WORK/$3.log" >&2; return 1; }
    sleep 0.1
  done
  echo "$3 did not listen on $1 within $2 s; log:" >&2
  cat "$WORK/$3.log" >&2
  return 1
}

# start NAME CMD…: run CMD in a session (process group) of its own, output to $WORK/NAME.log.
start() {
  local name=$1
  shift
  setsid "$@" >"$WORK/$name.log" 2>&1 </dev/null &
  PID[$name]=$!
  STARTED+=("$!")
}

want() { [[ " $ONLY " == *" $1 "* ]]; }

log "uptime before: $(uptime)"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

if want ours; then
  # The help is read whole first: grep -q would end the pipe early, and
  # pipefail then took the writer's SIGPIPE for "no --listen".
  help=$("$OURS_BIN" mcp proxy --help 2>/dev/null || true)
  if [[ $help == *--listen* ]]; then
    mkdir -p "$WORK/home/.openclaw" "$WORK/state"
    parallel=false
    [ "${PARALLEL:-0}" = 1 ] && parallel=true
    printf '{"mcp":{"servers":{"everything":{"command":"%s","args":["%s","stdio"],"supportsParallelToolCalls":%s}}}}\n' \
      "$(command -v node)" "$E" "$parallel" >"$WORK/home/.openclaw/openclaw.json"
    PORT[ours]=$(free_port)
    export OPENCLAW_MCP_TOKEN=bench-$RANDOM$RANDOM$RANDOM
    start ours env OPENCLAW_HOME="$WORK/home" OPENCLAW_STATE_DIR="$WORK/state" \
      "$OURS_BIN" mcp proxy --listen "127.0.0.1:${PORT[ours]}"
    URL[ours]=http://127.0.0.1:${PORT[ours]}/mcp
    TOOL[ours]=everything__echo
  else
    log "skipping ours: $OURS_BIN mcp proxy has no --listen yet"
    ONLY=${ONLY//ours/}
  fi
fi
if want ours-base; then
  PORT[ours-base]=$(free_port)
  mkdir -p "$WORK/state-base"
  start ours-base env OPENCLAW_HOME="$WORK/home" OPENCLAW_STATE_DIR="$WORK/state-base" \
    "$BASE_BIN" mcp proxy --listen "127.0.0.1:${PORT[ours-base]}"
  URL[ours-base]=http://127.0.0.1:${PORT[ours-base]}/mcp
  TOOL[ours-base]=everything__echo
fi
if want supergateway; then
  PORT[supergateway]=$(free_port)
  start supergateway "$SG" --stdio "node $E stdio" --outputTransport streamableHttp --stateful \
    --port "${PORT[supergateway]}" --logLevel none
  URL[supergateway]=http://127.0.0.1:${PORT[supergateway]}/mcp
fi
if want mcp-proxy; then
  PORT[mcp-proxy]=$(free_port)
  # Never --tunnel: it opens a public tunnel.
  start mcp-proxy "$MP" --host 127.0.0.1 --port "${PORT[mcp-proxy]}" -- node "$E" stdio
  URL[mcp-proxy]=http://127.0.0.1:${PORT[mcp-proxy]}/mcp
fi
BRIDGES=()
for b in ours ours-base supergateway mcp-proxy; do
  want "$b" || continue
  wait_port "${PORT[$b]}" 20 "$b"
  BRIDGES+=("$b")
done
log "bridges up: ${BRIDGES[*]:-none}"

# 1. Latency, interleaved.
args=(-target "direct=stdio:node $E stdio" -n "$N" -warmup "$WARMUP" -rounds "$ROUNDS")
for b in "${BRIDGES[@]}"; do
  args+=(-target "$b=${URL[$b]}")
  [ -n "${TOOL[$b]:-}" ] && args+=(-target-tool "$b=${TOOL[$b]}")
done
[ -n "${OPENCLAW_MCP_TOKEN:-}" ] && args+=(-bearer-env OPENCLAW_MCP_TOKEN)
log "latency: ${#BRIDGES[@]} bridges + direct, $N calls each after $WARMUP, $ROUNDS rounds"
"$BENCH" "${args[@]}" | tee -a "$RESULTS" >&2

# 2. Load, one bridge at a time, memory sampled.
if [ "${NO_LOAD:-0}" != 1 ]; then
  for b in "${BRIDGES[@]}"; do
    c=$LOAD_C
    [ "$b" = supergateway ] && c=$SG_LOAD_C
    largs=(-target "$b=${URL[$b]}" -c "$c" -n "$LOAD_N" -warmup 1 -phase load -rss "$b=${PID[$b]}")
    [ -n "${TOOL[$b]:-}" ] && largs+=(-target-tool "$b=${TOOL[$b]}")
    [ -n "${OPENCLAW_MCP_TOKEN:-}" ] && largs+=(-bearer-env OPENCLAW_MCP_TOKEN)
    perfpid=
    if [ "${PERF:-0}" = 1 ] && [ "$b" = ours ]; then
      perf record -F 999 -g -p "${PID[$b]}" -o "$WORK/$b.perf.data" 2>"$WORK/$b.perf.log" &
      perfpid=$!
    fi
    log "load: $b, $c sessions × $LOAD_N calls"
    "$BENCH" "${largs[@]}" | tee -a "$RESULTS" >&2 || log "load on $b had errors (see the line above)"
    if [ -n "$perfpid" ]; then
      kill -INT "$perfpid" && wait "$perfpid" || true
      perf report -i "$WORK/$b.perf.data" --stdio --no-children --sort symbol -g none --percent-limit 0.7 2>/dev/null \
        | sed -e 's/[ -]*$//' >"$WORK/$b.perf.txt" || true
      log "CPU profile of $b under load: $WORK/$b.perf.txt (perf report -i $WORK/$b.perf.data)"
    fi
  done
fi

LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
log "uptime after: $(uptime)"
{
  echo "Commit $OURS_COMMIT${BASE_COMMIT:+ (ours-base: $BASE_COMMIT)}, $(date -u '+%Y-%m-%d %H:%M') UTC, $(nproc) cores, load average $LOAD_BEFORE before, $LOAD_AFTER after;"
  echo "node $(node --version), N=$N after WARMUP=$WARMUP in $ROUNDS rounds; load ${LOAD_C}×${LOAD_N} (supergateway ${SG_LOAD_C}×${LOAD_N})."
  echo
  "$BENCH" -table -direct direct -ours ours "$RESULTS"
} | tee "$OUT"
log "report: $OUT; raw results: $RESULTS"
