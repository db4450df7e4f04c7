#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Integration test of the drop-in librdmacm (drivers/rdmacm, doc/cm.md) with UNMODIFIED
# rdmacm-utils binaries over the verbs shim and two uroced joined by net_memif (QP 1 and the
# CM in each daemon, lib/daemon/cm_service.cc):
#   1. rping: server on daemon A, client on daemon B, -C 100 -v: both exit 0, each prints its
#      100 pings with the rotating pattern (data verified by rping itself with -V).
#   2. ucmatose: server on A, client on B (one connection, 10 SENDs each way): both exit 0.
#   2b. udaddy: RDMA_PS_UDP (SIDR_REQ / SIDR_REP), UD messages both ways: both exit 0.
#   3. A client connecting to a port nobody listens on is rejected at once (REJ reason 8:
#      RDMA_CM_EVENT_REJECTED, not a timeout).
#   2c. rdma_server / rdma_client (synchronous ids: rdma_create_ep, rdma_get_request).
#   2d. cmtime -c 20 (connection setup and teardown, every step timed).
#   4. perftest's ib_write_bw -R, ib_send_lat -R and ib_read_bw -R (the connection through
#      rdma_cm).
#   5. The daemons counted the CM MADs and no bad ones.
# Every wait is bounded; every process started is stopped by PID.
# Usage: cm_apps.sh PATH/TO/uroced VERBS_SHIM_DIR RDMACM_SHIM_DIR PATH/TO/uroce-stat
set -uo pipefail

USAGE="usage: $0 UROCED VERBS_SHIM_DIR RDMACM_SHIM_DIR UROCE_STAT"
UROCED=${1:?$USAGE}
SHIM=${2:?$USAGE}
CMSHIM=${3:?$USAGE}
STAT=${4:?$USAGE}
for t in rping ucmatose udaddy rdma_server rdma_client cmtime ib_write_bw ib_send_lat ib_read_bw timeout; do
  command -v $t >/dev/null || { echo "FAIL: '$t' not found (scripts/install-deps.sh installs it)"; exit 1; }
done
[ -e "$CMSHIM/librdmacm.so.1" ] || { echo "FAIL: no librdmacm.so.1 in $CMSHIM"; exit 1; }
NAME=cm IP_NET=10.86.0
# shellcheck source=two_uroced.sh
. "$(dirname "$0")/two_uroced.sh"
IP_A=$IP_NET.1
# shellcheck source=cm_common.sh
. "$(dirname "$0")/cm_common.sh"

# --- 1. rping
cm_on "$SOCK_A" timeout 60 rping -s -a "$IP_A" -p 7174 -C 100 -v -V >"$WORK/rping-s.log" 2>&1 &
PID_S=$!
sleep 1
cm_on "$SOCK_B" timeout 60 rping -c -a "$IP_A" -p 7174 -C 100 -v -V >"$WORK/rping-c.log" 2>&1
rc_c=$?
wait "$PID_S"
rc_s=$?
PID_S=""
nc=$(grep -c "^ping data: rdma-ping-" "$WORK/rping-c.log")
ns=$(grep -c "^server ping data: rdma-ping-" "$WORK/rping-s.log")
if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && [ "$nc" -eq 100 ] && [ "$ns" -eq 100 ] &&
   grep -q "^ping data: rdma-ping-9: JKLMNOPQRSTUVWXYZ" "$WORK/rping-c.log" &&
   grep -q "^ping data: rdma-ping-99: " "$WORK/rping-c.log"; then
  pass "rping -C 100 -v -V: server on A, client on B, 100 pings each side"
else
  fail "rping: client rc=$rc_c ($nc pings), server rc=$rc_s ($ns pings)"
  tail -n 8 "$WORK/rping-c.log" "$WORK/rping-s.log"
fi

# --- 2. ucmatose
cm_on "$SOCK_A" timeout 60 ucmatose -b "$IP_A" -p 7175 >"$WORK/ucma-s.log" 2>&1 &
PID_S=$!
sleep 1
cm_on "$SOCK_B" timeout 60 ucmatose -s "$IP_A" -p 7175 >"$WORK/ucma-c.log" 2>&1
rc_c=$?
wait "$PID_S"
rc_s=$?
PID_S=""
if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && grep -q "^test complete" "$WORK/ucma-c.log" &&
   grep -q "^test complete" "$WORK/ucma-s.log"; then
  pass "ucmatose: server on A, client on B, test complete on both"
else
  fail "ucmatose: client rc=$rc_c, server rc=$rc_s"
  tail -n 8 "$WORK/ucma-c.log" "$WORK/ucma-s.log"
fi

# --- 2b. udaddy: RDMA_PS_UDP, the QPN and Q_Key through SIDR, then UD SENDs both ways
cm_on "$SOCK_A" timeout 60 udaddy -b "$IP_A" >"$WORK/udaddy-s.log" 2>&1 &
PID_S=$!
sleep 1
cm_on "$SOCK_B" timeout 60 udaddy -s "$IP_A" >"$WORK/udaddy-c.log" 2>&1
rc_c=$?
wait "$PID_S"
rc_s=$?
PID_S=""
if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && grep -q "^test complete" "$WORK/udaddy-c.log" &&
   grep -q "^test complete" "$WORK/udaddy-s.log"; then
  pass "udaddy (SIDR): server on A, client on B, test complete on both"
else
  fail "udaddy: client rc=$rc_c, server rc=$rc_s"
  tail -n 8 "$WORK/udaddy-c.log" "$WORK/udaddy-s.log"
fi

# --- 2c. rdma_server / rdma_client: synchronous ids (no event channel), rdma_create_ep,
# rdma_get_request, the QP's own CQs and completion channels, rdma_get_send_comp / _recv_comp.
cm_on "$SOCK_A" timeout 60 rdma_server -s "$IP_A" -p 7176 >"$WORK/rdma-s.log" 2>&1 &
PID_S=$!
sleep 1
cm_on "$SOCK_B" timeout 60 rdma_client -s "$IP_A" -p 7176 >"$WORK/rdma-c.log" 2>&1
rc_c=$?
wait "$PID_S"
rc_s=$?
PID_S=""
if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && grep -q "^rdma_client: end 0" "$WORK/rdma-c.log" &&
   grep -q "^rdma_server: end 0" "$WORK/rdma-s.log"; then
  pass "rdma_server / rdma_client (rdma_create_ep, rdma_get_request): end 0 on both"
else
  fail "rdma_server / rdma_client: client rc=$rc_c, server rc=$rc_s"
  tail -n 8 "$WORK/rdma-c.log" "$WORK/rdma-s.log"
fi

# --- 2d. cmtime: 20 connections set up and torn down at once, each step timed
cmtime_check "$IP_A" 7177 20 "cmtime -c 20"

# --- 3. nobody listens: rejected at once (reason 8, invalid service id)
rejected_check "$IP_A" 7179 "connect to a port nobody listens on"

# --- 4. perftest over rdma_cm (-R): the server binds any address, the client resolves A's.
for t in "ib_write_bw -s 65536 -n 200" "ib_send_lat -s 64 -n 200" "ib_read_bw -s 65536 -n 200"; do
  set -- $t
  tool=$1
  shift
  cm_on "$SOCK_A" timeout 90 "$tool" -R -d uroce0 -p 18600 "$@" >"$WORK/$tool-s.log" 2>&1 &
  PID_S=$!
  # until the server listens (an id in A's CM; bounded), then 2 s for perftest's setup
  for _ in $(seq 150); do
    env -u LD_LIBRARY_PATH "$STAT" -s "$SOCK_A" cm.ids 2>/dev/null | awk '$1 == "cm.ids" && $2 > 0 {f = 1} END {exit !f}' && break
    sleep 0.2
  done
  sleep 2
  cm_on "$SOCK_B" timeout 90 "$tool" -R -d uroce_b -p 18600 "$@" "$IP_A" >"$WORK/$tool-c.log" 2>&1
  rc_c=$?
  wait "$PID_S"
  rc_s=$?
  PID_S=""
  if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && grep -qE "^ +[0-9]+ +[0-9]+ " "$WORK/$tool-c.log"; then
    pass "$tool -R $*: server on A, client on B: $(grep -E "^ +[0-9]+ +[0-9]+ " "$WORK/$tool-c.log" | head -1 | tr -s ' ')"
  else
    fail "$tool -R: client rc=$rc_c, server rc=$rc_s"
    tail -n 8 "$WORK/$tool-c.log" "$WORK/$tool-s.log"
  fi
done

# --- 5. the daemons' CM counters
for s in A B; do
  sock=SOCK_$s
  out=$(env -u LD_LIBRARY_PATH "$STAT" -s "${!sock}" 2>&1)
  rx=$(awk '$1 == "cm.rx_mads" {print $2}' <<<"$out")
  bad=$(awk '$1 == "cm.rx_bad_mads" {print $2}' <<<"$out")
  drops=$(awk '$1 ~ /^cm.gsi_drop_/ {s += $2} END {print s + 0}' <<<"$out")
  if [ "${rx:-0}" -gt 0 ] && [ "${bad:-1}" -eq 0 ] && [ "$drops" -eq 0 ]; then
    pass "daemon $s: cm.rx_mads=$rx, no bad MADs, no QP 1 drops"
  else
    fail "daemon $s: cm.rx_mads=${rx:-?} cm.rx_bad_mads=${bad:-?} gsi drops=$drops"
  fi
done
kill -0 "$PID_A" 2>/dev/null && kill -0 "$PID_B" 2>/dev/null || fail "a daemon died"
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
