#!/usr/bin/env bash
# make interop: our `openclaw mcp serve` against the REAL OpenClaw 2026.9.6 Gateway.
# By hand, outside CI: needs root (loopback-only network namespace) and ~1 GB (installed on first
# use into $OC_DIR, default ~/.cache/openclaw-real). Steps:
#   1. install OpenClaw if missing; namespace up; Gateway first boot; seed; Gateway up;
#   2. bin/openclaw mcp serve --url ws://127.0.0.1:18789 --token … under a go-sdk client
#      (internal/e2e/ocinterop check), with OPENCLAW_DEVICE_IDENTITY=<our key file>:
#      all 9 tools answer; the seeded conversations; events_wait woken by a chat.send made
#      during the wait; approvals raised by approver.mjs with our key are listed and resolved;
#      exit 0 after stdin EOF; a refused connection and a wrong token end in exit 1 with
#      "MCP server failed to start" after initialize was answered (ocinterop failcase);
#   3. (DIFF=1, default) the same request script against the real `openclaw mcp serve` and ours,
#      raw responses compared; informational, it does not change the exit status;
#   4. everything started is stopped, the namespace deleted.
# Prints PASS/FAIL per check; exits 1 when a check failed.
# Env: OURS_BIN (default bin/openclaw, built unless BUILD=0), OURS=real (dry run: the real server
# in place of ours), OPENCLAW_DEVICE_IDENTITY, OC_DIR, OC_PEERS, OC_NETNS, DIFF, TIMEOUT.
# See docs/interop.md.
. "$(dirname "$0")/lib-openclaw.sh"

oc_require_root
oc_install
oc_build_helper
[ "${OURS:-}" = real ] || oc_build_ours
trap oc_down EXIT
oc_up
oc_identity

SERVE=$(ours_serve)
log "checks: $SERVE"
: >"$WORK/serve-under-test.stderr"
status=0
in_ns env OPENCLAW_DEVICE_IDENTITY="$OPENCLAW_DEVICE_IDENTITY" "$OCI" check \
  -serve "$SERVE" -stderr "$WORK/serve-under-test.stderr" -timeout "${TIMEOUT:-30s}" \
  -gw-call "$OC_PEERS/gw-call.sh" -raw "$WORK/serve-under-test.transcript.jsonl" \
  -approver "$OC_PEERS/approver.mjs" -identity "$OPENCLAW_DEVICE_IDENTITY" -gw-url "$GW_URL" | tee "$WORK/interop-checks.txt" || status=$?
log "server stderr: $WORK/serve-under-test.stderr; stdio transcript: $WORK/serve-under-test.transcript.jsonl"

# Failure behaviour (docs/protocol-facts.md, Failure and shutdown): initialize answered, Gateway tools unanswered,
# "MCP server failed to start: …" on stderr, exit 1.
SERVE_BIN=${SERVE%% --url*}
log "failure cases: refused connection, wrong token"
in_ns env OPENCLAW_DEVICE_IDENTITY="$OPENCLAW_DEVICE_IDENTITY" "$OCI" failcase -name "refused connection: exit 1" \
  -serve "$SERVE_BIN --url ws://127.0.0.1:1 --token $OC_TOKEN" -stderr "$WORK/serve-under-test.stderr" \
  | tee -a "$WORK/interop-checks.txt" || status=1
in_ns env OPENCLAW_DEVICE_IDENTITY="$OPENCLAW_DEVICE_IDENTITY" "$OCI" failcase -name "wrong token: exit 1" \
  -serve "$SERVE_BIN --url $GW_URL --token wrong-token" -stderr "$WORK/serve-under-test.stderr" \
  | tee -a "$WORK/interop-checks.txt" || status=1

if [ "${DIFF:-1}" = 1 ]; then
  log "raw comparison with the real openclaw mcp serve (informational; exchanges in $WORK/diff/)"
  rm -rf "$WORK/diff"
  in_ns env OPENCLAW_DEVICE_IDENTITY="$OPENCLAW_DEVICE_IDENTITY" "$OCI" diff \
    -a "$REAL_SERVE" -b "$SERVE" -out "$WORK/diff" | tee "$WORK/interop-diff.txt" || true
  log "the same failure cases against the real openclaw mcp serve (informational)"
  in_ns "$OCI" failcase -name "real, refused connection" -serve "openclaw mcp serve --url ws://127.0.0.1:1 --token $OC_TOKEN" \
    | tee -a "$WORK/interop-diff.txt" || true
  in_ns "$OCI" failcase -name "real, wrong token" -serve "openclaw mcp serve --url $GW_URL --token wrong-token" \
    | tee -a "$WORK/interop-diff.txt" || true
fi

if [ "$status" = 0 ]; then log "interop: PASS"; else log "interop: FAIL"; fi
exit "$status"
