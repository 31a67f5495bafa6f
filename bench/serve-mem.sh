#!/usr/bin/env bash
# Resident memory of `openclaw mcp serve` over a 2,000-call run, two builds side by side in ONE
# run: OURS_REV (default HEAD) and BASE_REV (default main), each built from a clean `git archive`
# with the release's flags (CGO_ENABLED=0, -trimpath, -ldflags '-s -w'; the resident size
# depends on the binary's layout) into fresh files, so both start with the page cache a fresh
# build leaves. Both serve processes are spawned at once against our own Gateway (`openclaw
# gateway run --seed demo`, the OURS_REV build, loopback, state in memory) and called by the raw
# Go JSON-RPC client (internal/e2e/ocinterop calls) in ROUNDS interleaved rounds of
# tools/list, events_poll and conversations_list; after every round the VmRSS of each server's
# process tree is read from /proc, and the table's last row is the max of those samples.
# Prints the Markdown table, the commits and the load average before and after.
# By hand, not in CI; see docs/benchmarks.md for a recorded run. Only what it starts is stopped.
#
# Env: N (calls of each request per server, default 680: 2,040 calls), ROUNDS (40),
# OURS_REV (HEAD), BASE_REV (main), PORT (18961), WORK (default a new /tmp/serve-mem.XXXXXX).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${N:-680} ROUNDS=${ROUNDS:-40} PORT=${PORT:-18961}
OURS_REV=${OURS_REV:-HEAD} BASE_REV=${BASE_REV:-main}
WORK=${WORK:-$(mktemp -d /tmp/serve-mem.XXXXXX)}
log() { printf '== %s\n' "$*" >&2; }

build() { # build REV OUT
  rm -rf "$WORK/src-$2" && mkdir -p "$WORK/src-$2"
  (cd "$REPO" && git archive "$1") | tar -x -C "$WORK/src-$2"
  (cd "$WORK/src-$2" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$WORK/$2" ./cmd/openclaw)
  rm -rf "$WORK/src-$2"
}
OURS_COMMIT=$(cd "$REPO" && git rev-parse --short "$OURS_REV")
BASE_COMMIT=$(cd "$REPO" && git rev-parse --short "$BASE_REV")
log "building ocinterop (working tree), openclaw $OURS_COMMIT and $BASE_COMMIT into $WORK"
(cd "$REPO" && go build -o "$WORK/ocinterop" ./internal/e2e/ocinterop)
build "$OURS_REV" openclaw-ours
build "$BASE_REV" openclaw-base

# Our own state folder and config: nothing of the user's is read or written.
export HOME=$WORK/home OPENCLAW_STATE_DIR=$WORK/home/state
mkdir -p "$OPENCLAW_STATE_DIR"
umask 077
echo "serve-mem-$$-$RANDOM" >"$WORK/token"
"$WORK/openclaw-ours" gateway run --seed demo --port "$PORT" --state-dir none --token-file "$WORK/token" >"$WORK/gw.log" 2>&1 &
GW=$!
trap 'kill "$GW" 2>/dev/null || true; wait "$GW" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  grep -q '\[gateway\] ready' "$WORK/gw.log" && break
  kill -0 "$GW" 2>/dev/null || { cat "$WORK/gw.log" >&2; exit 1; }
  sleep 0.1
done
grep -q '\[gateway\] ready' "$WORK/gw.log" || { echo "the Gateway did not get ready: $WORK/gw.log" >&2; exit 1; }

serve() { echo "$WORK/$1 mcp serve --url ws://127.0.0.1:$PORT --token-file $WORK/token --audit-log $WORK/audit-$1.jsonl"; }
log "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$WORK/ocinterop" calls -real-label "ours@$BASE_COMMIT" -ours-label "ours@$OURS_COMMIT" \
  -real "$(serve openclaw-base)" -ours "$(serve openclaw-ours)" -n "$N" -rounds "$ROUNDS" -json "$WORK/serve-mem.json"
log "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
log "figures also in $WORK/serve-mem.json"
