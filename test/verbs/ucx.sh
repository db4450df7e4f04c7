#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX 1.13 (Debian's ucx-utils, unmodified) over the verbs shim and two uroced on net_memif,
# started with uroce-run --dev-nodes (doc/verbs.md, "Running programs: uroce-run"):
#   1. ucx_info -d lists rc_verbs and ud_verbs on uroce0:1 with --dev-nodes, and no uroce device
#      without (UCX skips a device without a /dev/infiniband/<dev_name> character device).
#   2. ucx_perftest, UCP, server on daemon B and client on daemon A, only UCX_TLS and
#      UCX_NET_DEVICES set: tag_bw and ucp_put_bw (RMA emulated over UD) over ud_verbs (UD
#      receives need the RoCE L3 type in ibv_wc.sl), tag_bw and ucp_put_bw over
#      rc_verbs,ud_verbs, 64 KB messages. Every run
#      must exit 0 on both sides (no hang at exit) and print its "Final:" line.
#   3. ucx_perftest, UCT (one transport, no UCP): put_bw (zcopy: RDMA WRITE), get (zcopy: RDMA
#      READ), put_lat (short: inline WRITE), am_bw (bcopy: SEND) over rc_verbs, and am_bw over
#      ud_verbs. A UCT server takes the client's -d, so both daemons name their device uroce0
#      here (IBDEV_B).
# Usage: ucx.sh PATH/TO/uroced SHIM_DIR PATH/TO/uroce-run [RUNS]
set -uo pipefail

USAGE="usage: $0 UROCED SHIM_DIR UROCE_RUN [RUNS]"
UROCED=${1:?$USAGE}
SHIM=${2:?$USAGE}
RUN=${3:?$USAGE}
RUNS=${4:-3}
for t in ucx_info ucx_perftest unshare timeout ss; do
  command -v $t >/dev/null || { echo "FAIL: '$t' not found (scripts/install-deps.sh installs it)"; exit 1; }
done
NAME=ucx IP_NET=10.86.0 IBDEV_B=uroce0
# shellcheck source=two_uroced.sh
. "$(dirname "$0")/two_uroced.sh"

# --- 1. device discovery
out=$(on "$SOCK_A" timeout 60 "$RUN" --dev-nodes -- ucx_info -d 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -qE "Transport: rc_verbs" <<<"$out" && grep -qE "Transport: ud_verbs" <<<"$out" &&
   grep -qE "Device: uroce0:1" <<<"$out"; then
  pass "ucx_info -d under uroce-run --dev-nodes: rc_verbs and ud_verbs on uroce0:1"
else
  fail "ucx_info -d under uroce-run --dev-nodes: exit $rc"
  echo "$out" | sed 's/^/  ucx_info: /'
fi
out=$(on "$SOCK_A" timeout 60 ucx_info -d 2>&1)
if ! grep -q "Device: uroce" <<<"$out"; then
  pass "ucx_info -d without the device nodes: no uroce device (UCX 1.13's check)"
else
  fail "ucx_info -d found a uroce device without /dev/infiniband nodes: the check changed?"
fi

# --- 2. UCP perftests between the daemons
PORT=$((30000 + (ID % 20000)))
# pair LABEL ENV CLIENT_ARGS...: ucx_perftest server on B, client on A, both under `env ENV`
# (words), the client with CLIENT_ARGS (a UCT server learns the test from the client). Both must
# exit 0 and the client print a "Final:" row of 2000 iterations.
pair() {
  local label=$1 envs=$2 up=0 rc_c=1 rc_s
  shift 2
  PORT=$((PORT + 1))
  # shellcheck disable=SC2086  # ENV is words
  on "$SOCK_B" env $envs timeout 90 "$RUN" --dev-nodes -- ucx_perftest -p "$PORT" \
    >"$WORK/server.log" 2>&1 &
  PID_S=$!
  for _ in $(seq 200); do
    if ss -ltnH "sport = :$PORT" 2>/dev/null | grep -q .; then up=1; break; fi
    kill -0 "$PID_S" 2>/dev/null || break
    sleep 0.1
  done
  if [ $up -eq 1 ]; then
    # shellcheck disable=SC2086
    on "$SOCK_A" env $envs timeout 90 "$RUN" --dev-nodes -- ucx_perftest -p "$PORT" "$@" \
      127.0.0.1 >"$WORK/client.log" 2>&1
    rc_c=$?
  fi
  wait "$PID_S"; rc_s=$?
  PID_S=""
  if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && grep -qE "^Final: +2000 " "$WORK/client.log"; then
    pass "$label: $(grep -E '^Final:' "$WORK/client.log" | tr -s ' ')"
  else
    fail "$label: client exit $rc_c, server exit $rc_s (listening: $up)"
    sed 's/^/  server: /' "$WORK/server.log" | tail -20
    sed 's/^/  client: /' "$WORK/client.log" | tail -20
  fi
}
perf() {  # perf TLS TEST: UCP, 2000 x 64 KB
  pair "ucx_perftest $2 over $1" "UCX_TLS=$1,self UCX_NET_DEVICES=uroce0:1" \
    -t "$2" -n 2000 -s 65536
}
for _ in $(seq "$RUNS"); do
  perf ud_verbs tag_bw
  perf ud_verbs ucp_put_bw
  perf rc_verbs,ud_verbs tag_bw
  perf rc_verbs,ud_verbs ucp_put_bw
done

# --- 3. UCT perftests between the daemons (the server learns the test from the client)
uct() {  # uct TL TEST DATA_LAYOUT SIZE
  pair "UCT $2 -D $3 -s $4 over $1" "" -x "$1" -d uroce0:1 -t "$2" -D "$3" -s "$4" -n 2000
}
uct rc_verbs put_bw zcopy 65536
uct rc_verbs get zcopy 65536
uct rc_verbs put_lat short 64
uct rc_verbs am_bw bcopy 4096
uct ud_verbs am_bw bcopy 1000

kill -0 "$PID_A" 2>/dev/null && kill -0 "$PID_B" 2>/dev/null || fail "a daemon died"
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
