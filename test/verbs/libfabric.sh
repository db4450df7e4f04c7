#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# libfabric 1.17 (Debian's libfabric-bin, unmodified) over the verbs shim, the drop-in librdmacm
# and two uroced on net_memif (issue 16):
#   1. fi_info -p verbs lists uroce0's MSG (rdma_cm), DGRAM (UD) and RDM (ofi_rxd over UD)
#      endpoints.
#   2. fi_pingpong -p verbs -e rdm -c (libfabric's data integrity check on every message),
#      server on daemon A, client on daemon B, 64 B, 4000 B, 64 KiB and 1 MiB (ofi_rxd segments
#      the large ones over UD): both sides exit 0 and print their result line.
# fi_pingpong's out-of-band TCP connection needs a kernel route to the server's address, so the
# tools run in a private network namespace whose loopback carries both daemons' IPv4 addresses
# (the RoCE traffic itself goes through uroced and memif).
# Usage: libfabric.sh PATH/TO/uroced VERBS_SHIM_DIR RDMACM_SHIM_DIR [RUNS]
set -uo pipefail

USAGE="usage: $0 UROCED VERBS_SHIM_DIR RDMACM_SHIM_DIR [RUNS]"
UROCED=${1:?$USAGE}
SHIM=${2:?$USAGE}
CMSHIM=${3:?$USAGE}
RUNS=${4:-1}
for t in fi_info fi_pingpong ip timeout; do
  command -v $t >/dev/null || { echo "FAIL: '$t' not found (scripts/install-deps.sh installs it)"; exit 1; }
done
NAME=fab IP_NET=10.88.0
# shellcheck source=two_uroced.sh
. "$(dirname "$0")/two_uroced.sh"

NS=uroce-fab-$ID
ip netns add "$NS" || { fail "ip netns add $NS"; exit 1; }
trap 'ip netns del "$NS" 2>/dev/null; cleanup' EXIT
ip -n "$NS" link set lo up
ip -n "$NS" addr add "$IP_NET.1/32" dev lo
ip -n "$NS" addr add "$IP_NET.2/32" dev lo
fab_on() {  # fab_on SOCK CMD...: an app on both shims, in the namespace, run in $WORK
  local sock=$1
  shift
  cd "$WORK" && ip netns exec "$NS" env LD_LIBRARY_PATH="$CMSHIM:$SHIM" UROCE_SOCKET="$sock" \
    nice -n "${APP_NICE:-10}" "$@"
}

# --- 1. discovery
out=$(fab_on "$SOCK_A" timeout 60 fi_info -p verbs 2>&1)
if grep -q "domain: uroce0$" <<<"$out" && grep -q "FI_EP_MSG" <<<"$out" &&
  grep -q "FI_EP_DGRAM" <<<"$out" && grep -q "FI_EP_RDM" <<<"$out"; then
  pass "fi_info -p verbs: uroce0 with MSG, DGRAM and RDM endpoints"
else
  fail "fi_info -p verbs does not list uroce0's MSG, DGRAM and RDM endpoints"
  echo "$out" | sed 's/^/  fi_info: /' | head -40
fi

# --- 2. RDM pingpong with data checks
PORT=$((40000 + (ID % 20000)))
pingpong() {  # pingpong SIZE ITERS
  local size=$1 iters=$2 rc_c=1 rc_s
  PORT=$((PORT + 1))
  fab_on "$SOCK_A" timeout 120 fi_pingpong -p verbs -e rdm -c -S "$size" -I "$iters" -B "$PORT" \
    >"$WORK/server.log" 2>&1 &
  PID_S=$!
  # The client retries its control connection until the server listens (fi_pingpong does not).
  for _ in $(seq 60); do
    fab_on "$SOCK_B" timeout 120 fi_pingpong -p verbs -e rdm -c -S "$size" -I "$iters" \
      -P "$PORT" "$IP_NET.1" >"$WORK/client.log" 2>&1
    rc_c=$?
    grep -q "Connection refused" "$WORK/client.log" || break
    kill -0 "$PID_S" 2>/dev/null || break
    sleep 0.5
  done
  wait "$PID_S"
  rc_s=$?
  PID_S=""
  # A result line per size: "4k  100  =100  800k  0.52s ..." (sent, then acknowledged).
  local lines_c lines_s
  lines_c=$(grep -cE "^[0-9.]+[kmg]? +$iters +=$iters " "$WORK/client.log")
  lines_s=$(grep -cE "^[0-9.]+[kmg]? +$iters +=$iters " "$WORK/server.log")
  if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && [ "$lines_c" -ge 1 ] && [ "$lines_c" = "$lines_s" ]; then
    pass "fi_pingpong -e rdm -c -S $size -I $iters: $(grep -E "^[0-9.]+[kmg]? +$iters " "$WORK/client.log" | tr -s ' ')"
  else
    fail "fi_pingpong -e rdm -c -S $size: client exit $rc_c, server exit $rc_s, result lines $lines_c / $lines_s"
    sed 's/^/  server: /' "$WORK/server.log" | tail -15
    sed 's/^/  client: /' "$WORK/client.log" | tail -15
  fi
}
for _ in $(seq "$RUNS"); do
  pingpong 64 100
  pingpong 4000 100
  pingpong 65536 50
  pingpong 1048576 10
done

kill -0 "$PID_A" 2>/dev/null && kill -0 "$PID_B" 2>/dev/null || fail "a daemon died"
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
