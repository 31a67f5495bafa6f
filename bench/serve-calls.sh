#!/usr/bin/env bash
# Per-call figures of `openclaw mcp serve`, ours beside the real OpenClaw 2026.9.6, in one run
# against the same real Gateway: events_poll, tools/list and conversations_list, both servers
# spawned at once and called in interleaved rounds, through the raw Go JSON-RPC client
# (ocinterop calls, which also reports each server tree's RSS max over the run) and through the
# MCP TypeScript SDK's Client over StdioClientTransport (bench/serve-calls.mjs). Prints Markdown
# rows and the load average before and after. By hand, outside CI: needs root (see interop.sh).
# Env: N (calls of each request per server, default 700: 2,100 calls per server with the Go
# client), NODE_N (default 300), ROUNDS (default 10), PEERS_DIR (default $REPO/.peers), OC_*.
. "$(dirname "$0")/lib-openclaw.sh"

oc_require_root
oc_install
oc_build_helper
oc_build_ours
trap oc_down EXIT
oc_up
oc_identity

N=${N:-700}
NODE_N=${NODE_N:-300}
ROUNDS=${ROUNDS:-10}
SDK=${PEERS_DIR:-$REPO/.peers}/npm/node_modules/@modelcontextprotocol/sdk
[ -d "$SDK" ] || { echo "no TypeScript SDK at $SDK (set PEERS_DIR)" >&2; exit 2; }
log "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
in_ns env OPENCLAW_DEVICE_IDENTITY="$OPENCLAW_DEVICE_IDENTITY" "$OCI" calls \
  -real "$REAL_SERVE" -ours "$(ours_serve)" -n "$N" -rounds "$ROUNDS" -json "$WORK/serve-calls.json"
in_ns env OPENCLAW_DEVICE_IDENTITY="$OPENCLAW_DEVICE_IDENTITY" node "$REPO/bench/serve-calls.mjs" \
  "$SDK" "$NODE_N" "$ROUNDS" "$REAL_SERVE" "$(ours_serve)"
log "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
