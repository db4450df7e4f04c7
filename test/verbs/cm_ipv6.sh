#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Integration test of the drop-in librdmacm over IPv6 (doc/cm.md), with UNMODIFIED rdmacm-utils
# binaries over the verbs shim and two uroced in network namespaces (netns_pair.sh: each on
# net_af_packet, a middle namespace forwarding between the veths; the kernel's IPv6 is off on
# every veth, so only uroced answers neighbour discovery). Each daemon has an IPv4 address, a
# global IPv6 address (fd00:86::1 / ::2) and its link-local GID (fe80:: + EUI-64 of its MAC).
#   1. rping -C 10 -v -V over the global IPv6 addresses: the REQ carries IPv6 GIDs and
#      rdma_cm's header with IP version 6; 10 pings each side.
#   2. rping over the link-local addresses with a scope id (fe80::...%1).
#   3. ucmatose (rdma_getaddrinfo with AF_INET6, 10 SENDs each way) and udaddy (SIDR_REQ with
#      an IPv6 header) over IPv6.
#   4. A listener bound to :: (rping -s -a ::) takes an IPv6 and an IPv4 client.
#   5. cmtime -c 10 over IPv6.
#   6. A connect to an IPv6 port nobody listens on: RDMA_CM_EVENT_REJECTED at once; one to the
#      port of a listener bound to the IPv6 address, over IPv4: REJECTED with reason 28.
#   7. cm_addr_check (cm_addr_check.c) over the global and the link-local address and with a
#      listener on ::: what rdma_get_local_addr / rdma_get_peer_addr / the path record report
#      on both sides; and rdma_migrate_id (the client's DISCONNECTED on its second channel).
#   8. The daemons' CM counters: MADs received, none bad, no QP 1 drops, no MAD without route.
# Every wait is bounded; every process started is stopped by PID; the namespaces are removed.
# Usage: cm_ipv6.sh PATH/TO/uroced VERBS_SHIM_DIR RDMACM_SHIM_DIR PATH/TO/uroce-stat
#        PATH/TO/cm_addr_check
set -uo pipefail

USAGE="usage: $0 UROCED VERBS_SHIM_DIR RDMACM_SHIM_DIR UROCE_STAT CM_ADDR_CHECK"
UROCED=${1:?$USAGE}
SHIM=${2:?$USAGE}
CMSHIM=${3:?$USAGE}
STAT=${4:?$USAGE}
CHECK=${5:?$USAGE}
# shellcheck source=../integration/common.sh
. "$(dirname "$0")/../integration/common.sh"
need_root "network namespaces and veth interfaces"
need_tools ip nft rping ucmatose udaddy cmtime timeout
[ -e "$CMSHIM/librdmacm.so.1" ] || { echo "FAIL: no librdmacm.so.1 in $CMSHIM"; exit 1; }
[ -e "$SHIM/libibverbs.so.1" ] || { echo "FAIL: no libibverbs.so.1 in $SHIM"; exit 1; }

WORK=$(mktemp -d /tmp/uroce-cm6-XXXXXX)
PID_S=""
netns_cleanup_hook() { [ -n "$PID_S" ] && stop_pid "$PID_S" KILL >/dev/null 2>&1; }
# shellcheck source=../integration/netns_pair.sh
. "$(dirname "$0")/../integration/netns_pair.sh"
netns_pair cm6 c6

# The middle namespace forwards every frame between the two veths (no loss).
ip netns exec "$NS_M" nft -f - <<EON || { echo "FAIL: nft rules (netdev ingress, fwd)"; exit 1; }
table netdev uroce_cm6 {
  chain a_to_b { type filter hook ingress device "$MA" priority 0; fwd to "$MB"; }
  chain b_to_a { type filter hook ingress device "$MB" priority 0; fwd to "$MA"; }
}
EON

V6_A=fd00:86::1 V6_B=fd00:86::2 IP_A=10.86.6.1
netns_conf a "$VA" "$IP_A" "workers = 0"
netns_conf b "$VB" 10.86.6.2 "workers = 1"
echo "ipv6 = $V6_A/64" >>"$WORK/uroced-a.conf"
echo "ipv6 = $V6_B/64" >>"$WORK/uroced-b.conf"
echo "ibdev = uroce_b" >>"$WORK/uroced-b.conf"
netns_start_daemons
# At nice -5, every thread (the apps run at +10), as two_uroced.sh starts them: on two shared
# cores a starved daemon misses its ND resolution window and rdma-core's ACK timeouts.
for t in /proc/"$PID_A"/task/* /proc/"$PID_B"/task/*; do renice -n -5 -p "${t##*/}" >/dev/null; done
SOCK_A=$WORK/uroced-a.sock SOCK_B=$WORK/uroced-b.sock
pass "two uroced on af_packet in namespaces (pids $PID_A, $PID_B)"

# The link-local GIDs (GID 0: fe80:: + the modified EUI-64 of the MAC), as the daemons print them.
ll_of() { sed -n 's/^port p0: gid 0 \(fe80:[0-9a-f:]*\) .*/\1/p' "$WORK/uroced-$1.log"; }
LL_A=$(ll_of a) LL_B=$(ll_of b)
[ -n "$LL_A" ] && [ -n "$LL_B" ] || { fail "no link-local GID in the daemons' logs"; exit 1; }

# shellcheck source=cm_common.sh
. "$(dirname "$0")/cm_common.sh"

# rping_pair TAG SERVER_ADDR CLIENT_ADDR PORT: server on A, client on B, -C 10 -v -V.
rping_pair() {
  local tag=$1 sa=$2 ca=$3 port=$4
  cm_on "$SOCK_A" timeout 60 rping -s -a "$sa" -p "$port" -C 10 -v -V >"$WORK/rping-$tag-s.log" 2>&1 &
  PID_S=$!
  sleep 1
  cm_on "$SOCK_B" timeout 60 rping -c -a "$ca" -p "$port" -C 10 -v -V >"$WORK/rping-$tag-c.log" 2>&1
  local rc_c=$?
  wait "$PID_S"
  local rc_s=$?
  PID_S=""
  local nc ns
  nc=$(grep -c "^ping data: rdma-ping-" "$WORK/rping-$tag-c.log")
  ns=$(grep -c "^server ping data: rdma-ping-" "$WORK/rping-$tag-s.log")
  if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && [ "$nc" -eq 10 ] && [ "$ns" -eq 10 ]; then
    pass "rping $tag: server -a $sa on A, client -a $ca on B, 10 pings each side"
  else
    fail "rping $tag: client rc=$rc_c ($nc pings), server rc=$rc_s ($ns pings)"
    tail -n 8 "$WORK/rping-$tag-c.log" "$WORK/rping-$tag-s.log"
  fi
}

# --- 1. rping over the global IPv6 addresses
rping_pair global "$V6_A" "$V6_A" 7184
# --- 2. rping over the link-local addresses, with a scope id
rping_pair link-local "$LL_A%1" "$LL_A%1" 7185

# --- 3. ucmatose and udaddy over IPv6 (their addresses through rdma_getaddrinfo / getaddrinfo)
pair() {  # pair TAG "SERVER CMD" "CLIENT CMD" PATTERN: both exit 0 and print PATTERN
  local tag=$1
  cm_on "$SOCK_A" timeout 60 $2 >"$WORK/$tag-s.log" 2>&1 &
  PID_S=$!
  sleep 1
  cm_on "$SOCK_B" timeout 60 $3 >"$WORK/$tag-c.log" 2>&1
  local rc_c=$?
  wait "$PID_S"
  local rc_s=$?
  PID_S=""
  if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && grep -q "$4" "$WORK/$tag-c.log" &&
     grep -q "$4" "$WORK/$tag-s.log"; then
    pass "$tag: '$2' on A, '$3' on B: both exit 0"
  else
    fail "$tag: client rc=$rc_c, server rc=$rc_s"
    tail -n 8 "$WORK/$tag-c.log" "$WORK/$tag-s.log"
  fi
}
pair ucmatose "ucmatose -b $V6_A -p 7186" "ucmatose -s $V6_A -p 7186" "^test complete"
pair udaddy "udaddy -b $V6_A" "udaddy -s $V6_A" "^test complete"  # (udaddy's -p is a port space)
pair udaddy-ll "udaddy -b $LL_A%1" "udaddy -s $LL_A%1" "^test complete"

# --- 4. a listener on :: takes an IPv6 client and then an IPv4 one (no AF_ONLY, as the kernel)
cm_on "$SOCK_A" timeout 60 rping -s -P -a :: -p 7189 -C 2 -v >"$WORK/rping-any-s.log" 2>&1 &
PID_S=$!
sleep 1
cm_on "$SOCK_B" timeout 60 rping -c -a "$V6_A" -p 7189 -C 2 -v >"$WORK/rping-any-c6.log" 2>&1
rc6=$?
cm_on "$SOCK_B" timeout 60 rping -c -a "$IP_A" -p 7189 -C 2 -v >"$WORK/rping-any-c4.log" 2>&1
rc4=$?
alive=0
kill -0 "$PID_S" 2>/dev/null && alive=1
for p in $(pgrep -P "$PID_S") "$PID_S"; do kill -TERM "$p" 2>/dev/null; done  # persistent (-P)
wait "$PID_S" 2>/dev/null
PID_S=""
n6=$(grep -c '^ping data' "$WORK/rping-any-c6.log") n4=$(grep -c '^ping data' "$WORK/rping-any-c4.log")
if [ $rc6 -eq 0 ] && [ $rc4 -eq 0 ] && [ "$n6" -eq 2 ] && [ "$n4" -eq 2 ] && [ $alive -eq 1 ]; then
  pass "rping -s -P -a ::: an IPv6 client and then an IPv4 one, 2 pings each"
else
  fail "listener on ::: IPv6 client rc=$rc6 ($n6 pings), IPv4 client rc=$rc4 ($n4 pings), server alive=$alive"
  tail -n 5 "$WORK/rping-any-c6.log" "$WORK/rping-any-c4.log" "$WORK/rping-any-s.log"
fi

# --- 5. cmtime -c 10 over IPv6
cmtime_check "$V6_A" 7190 10 "cmtime -c 10 over IPv6"

# --- 6. nobody listens on an IPv6 port: rejected at once
rejected_check "$V6_A" 7191 "IPv6 connect to a port nobody listens on"

# --- 6b. a listener bound to the IPv6 address refuses a client of its port over IPv4 (REJ 28,
# as the kernel: its rdma_cm matches the REQ's header against the bound address)
cm_on "$SOCK_A" timeout 60 rping -s -a "$V6_A" -p 7196 -C 1 -v >"$WORK/rping-af-s.log" 2>&1 &
PID_S=$!
sleep 1
cm_on "$SOCK_B" timeout 30 rping -c -a "$IP_A" -p 7196 -C 1 -v >"$WORK/rping-af-c.log" 2>&1
rc=$?
alive=0
kill -0 "$PID_S" 2>/dev/null && alive=1
for p in $(pgrep -P "$PID_S") "$PID_S"; do kill -TERM "$p" 2>/dev/null; done
wait "$PID_S" 2>/dev/null
PID_S=""
mism=$(netns_stat a cm.req_addr_mismatch)
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "RDMA_CM_EVENT_REJECTED, error 28" "$WORK/rping-af-c.log" &&
   [ $alive -eq 1 ] && [ "${mism:-0}" -ge 1 ]; then
  pass "listener on $V6_A, client to $IP_A on its port: REJECTED (28), listener still up, cm.req_addr_mismatch=$mism"
else
  fail "listener on $V6_A, IPv4 client: rc=$rc, listener alive=$alive, mismatch=${mism:-?}, $(tail -2 "$WORK/rping-af-c.log")"
fi

# --- 7. cm_addr_check: the addresses and path record the library reports
# addr_check TAG SERVER_ADDR CLIENT_ADDR PORT CLIENT_MODE
addr_check() {
  cm_on "$SOCK_A" timeout 60 "$CHECK" server "$2" "$4" >"$WORK/check-$1-s.log" 2>&1 &
  PID_S=$!
  for _ in $(seq 100); do grep -q "server listening" "$WORK/check-$1-s.log" && break; sleep 0.1; done
  cm_on "$SOCK_B" timeout 60 "$CHECK" "$5" "$3" "$4" >"$WORK/check-$1-c.log" 2>&1
  local rc_c=$?
  wait "$PID_S"
  local rc_s=$?
  PID_S=""
  # What the server sees as its peer is what the client reports as its local address.
  local cl sp
  cl=$(sed -n 's/^client local \([^%]*\)%.* port \([0-9]*\)/\1 \2/p' "$WORK/check-$1-c.log")
  sp=$(sed -n 's/^server peer \([^%]*\)%.* port \([0-9]*\)/\1 \2/p' "$WORK/check-$1-s.log")
  if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && [ -n "$cl" ] && [ "$cl" = "$sp" ]; then
    pass "cm_addr_check server $2, $5 $3: client local = server peer = $cl"
  else
    fail "cm_addr_check server $2, $5 $3: client rc=$rc_c, server rc=$rc_s, client local '$cl', server peer '$sp'"
    cat "$WORK/check-$1-c.log" "$WORK/check-$1-s.log"
  fi
}
addr_check global "$V6_A" "$V6_A" 7192 client
addr_check link-local "$LL_A%1" "$LL_A%1" 7193 client
addr_check any "::" "$V6_A" 7194 client  # a listener on :: reports ::, as the kernel
# rdma_migrate_id: the DISCONNECTED comes on the second channel, nothing on the first
addr_check migrate "$V6_A" "$V6_A" 7195 client-migrate

# --- 8. the daemons' CM counters
for s in a b; do
  rx=$(netns_stat "$s" cm.rx_mads)
  bad=$(netns_stat "$s" cm.rx_bad_mads)
  noroute=$(netns_stat "$s" cm.gsi_tx_no_route)
  drops=$(timeout 30 "$STAT" -s "$WORK/uroced-$s.sock" 2>/dev/null | awk '$1 ~ /^cm.gsi_drop_/ {t += $2} END {print t + 0}')
  if [ "${rx:-0}" -gt 0 ] && [ "${bad:-1}" -eq 0 ] && [ "$drops" -eq 0 ] && [ "${noroute:-1}" -eq 0 ]; then
    pass "daemon $s: cm.rx_mads=$rx, no bad MADs, no QP 1 drops, no MAD without a route"
  else
    fail "daemon $s: cm.rx_mads=${rx:-?} rx_bad_mads=${bad:-?} gsi drops=$drops tx_no_route=${noroute:-?}"
  fi
done
kill -0 "$PID_A" 2>/dev/null && kill -0 "$PID_B" 2>/dev/null || fail "a daemon died"
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
