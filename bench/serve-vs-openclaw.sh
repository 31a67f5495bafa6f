#!/usr/bin/env bash
# Side-by-side measurement, in ONE run against the same real OpenClaw 2026.9.6 Gateway, of the
# real `openclaw mcp serve` and ours: spawn → initialize, RSS of the whole process tree after
# tools/list, first conversations_list, median/p99 over N sequential conversations_list and
# events_poll calls (through go-sdk's client, and through a minimal raw JSON-RPC client in a
# second spawn), exit latency after stdin EOF, and the Gateway's own sessions.list round trip
# (the floor of any bridge's conversations_list). Prints a Markdown table with the ratios
# ours / OpenClaw and the targets (startup ≤ 1/100, RSS ≤ 30 MB, per-call
# medians ≤ 1/3). By hand, outside CI: needs root and ~1 GB (see bench/interop.sh).
# Env: N (50 calls per op per run), RUNS (3 per server, alternating which goes first),
# OUT (Markdown report file, default $OC_DIR/run/serve-vs-openclaw.md), OURS_BIN, BUILD,
# OURS=real (dry run), OPENCLAW_DEVICE_IDENTITY, OC_DIR, OC_PEERS, OC_NETNS. See docs/interop.md.
. "$(dirname "$0")/lib-openclaw.sh"

oc_require_root
oc_install
oc_build_helper
[ "${OURS:-}" = real ] || oc_build_ours
trap oc_down EXIT
oc_up
oc_identity

OUT=${OUT:-$WORK/serve-vs-openclaw.md}
OURS_LABEL=ours
[ "${OURS:-}" = real ] && OURS_LABEL="OpenClaw (as ours, dry run)"
log "measuring: N=${N:-50} RUNS=${RUNS:-3}; server stderr in $WORK/{real,ours}.stderr"
rm -f "$WORK/real.stderr" "$WORK/ours.stderr"
in_ns env OPENCLAW_DEVICE_IDENTITY="$OPENCLAW_DEVICE_IDENTITY" "$OCI" bench \
  -real "$REAL_SERVE" -ours "$(ours_serve)" -ours-label "$OURS_LABEL" \
  -n "${N:-50}" -runs "${RUNS:-3}" -md "$OUT" -json "${OUT%.md}.json" -stderr-dir "$WORK" \
  -floor-url "$GW_URL" -floor-token "$OC_TOKEN" -floor-identity "$OPENCLAW_DEVICE_IDENTITY"
log "report: $OUT"
