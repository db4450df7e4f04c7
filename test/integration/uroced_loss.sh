#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Integration test: RC transfers between two uroced over a lossy path.
#
#   uroce-loss-PID-a: uroced A on net_af_packet over veth ul<PID>a     (10.78.0.1, lcore 0)
#   uroce-loss-PID-b: uroced B on net_af_packet over veth ul<PID>b     (10.78.0.2, lcore 1)
#   uroce-loss-PID-m: the path: the other ends of both veths; nftables (netdev family, ingress
#                     hook) drops / duplicates frames at random and forwards the rest to the
#                     other veth ("fwd to"), in each direction.
# This kernel has no sch_netem, and a drop at the sending veth's egress hook is not a loss
# for af_packet: the kernel keeps the frame in the PACKET_TX_RING and sends it again on the
# next sendto(). Dropping in the middle namespace loses the frame for real.
#
# Run 1: 2 % loss in each direction. Run 2: 1 % loss and 1 % duplicates in each direction.
# Each run: verbs_app bulk (one RC pair; RC WRITE, READ and SEND of 64 KiB and 1 MiB messages,
# 8 (64 KiB) or 2 (1 MiB) in flight, every message's pattern checked where it lands) must
# complete, and the QP counters read with uroce-stat while the QPs still exist must show the
# recovery: retransmits and sequence NAKs on the requester (A), duplicates on the responder
# (B); the nft counters show the drops (and duplicates) really happened.
# Both daemons capture (daemon.pcap): after SIGTERM (exit 0) every capture must pass
# uroce-pcap-check (every RoCE frame parses, every ICRC valid) and tshark (no malformed frame,
# no expert info, BTH fields as our parse): check_capture.py --daemon. Frames dropped on the
# path are in the sender's capture only.
# Needs root, nft (nftables) and tshark. Every wait is bounded; everything it creates (namespaces,
# veths, processes, files, DPDK runtime directories) is removed on exit.
# Usage: uroced_loss.sh UROCED UROCE_STAT VERBS_APP UROCE_PCAP_CHECK CHECK_CAPTURE_PY
set -uo pipefail

UROCED=${1:?usage: $0 UROCED UROCE_STAT VERBS_APP UROCE_PCAP_CHECK CHECK_CAPTURE_PY}
STAT=${2:?}
APP=${3:?}
PCAP_CHECK=${4:?}
CHECK_CAPTURE=${5:?}
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
need_root "network namespaces, veths, nftables"
need_tools ip nft tshark python3 timeout

# Captures of ~40k frames each: on tmpfs, so a busy disk never stalls the poll loop.
SHM=/dev/shm
[ -d "$SHM" ] && [ -w "$SHM" ] || SHM=/tmp
WORK=$(mktemp -d "$SHM/uroce-loss-XXXXXX")
pass() { echo "ok: [${SECONDS}s] $*"; }  # with the time since the start

# --- namespaces, veths (netns_pair.sh), the lossy path
# shellcheck source=netns_pair.sh
. "$(dirname "$0")/netns_pair.sh"
netns_pair loss ul

path() {  # path LOSS_PER_MILLE DUP_PER_MILLE: (re)writes the nft rules of the middle namespace
  local dup_a="" dup_b=""
  if [ "$2" -gt 0 ]; then
    dup_a="numgen random mod 1000 < $2 counter dup to \"$MB\""
    dup_b="numgen random mod 1000 < $2 counter dup to \"$MA\""
  fi
  ip netns exec "$NS_M" nft -f - <<EOF
table netdev uroce_path
delete table netdev uroce_path
table netdev uroce_path {
  chain a_to_b {
    type filter hook ingress device "$MA" priority 0;
    numgen random mod 1000 < $1 counter drop
    $dup_a
    fwd to "$MB"
  }
  chain b_to_a {
    type filter hook ingress device "$MB" priority 0;
    numgen random mod 1000 < $1 counter drop
    $dup_b
    fwd to "$MA"
  }
}
EOF
}
nft_counts() {  # nft_counts CHAIN: "DROPPED DUPLICATED" packets since the rules were written
  ip netns exec "$NS_M" nft list chain netdev uroce_path "$1" |
    awk '/counter/ { n = $0; sub(/.*packets /, "", n); sub(/ .*/, "", n);
                     if ($0 ~ /drop/) d = n; else if ($0 ~ / dup /) u = n }
         END { print (d == "" ? 0 : d), (u == "" ? 0 : u) }'
}
path 20 0 || { echo "FAIL: nft rules (nftables with netdev ingress, numgen, fwd needed)"; exit 1; }

netns_conf a "$VA" 10.78.0.1 "workers = 0" "pcap = $WORK/uroced-a.pcap"
netns_conf b "$VB" 10.78.0.2 "workers = 1" "pcap = $WORK/uroced-b.pcap"
netns_start_daemons
pass "two uroced on af_packet behind a lossy path (pids $PID_A, $PID_B)"

stat() { netns_stat "$@"; }

# run NAME N_64K N_1M: one verbs_app bulk run; checks its result and the recovery counters.
run() {
  local name=$1 rv="$WORK/rv-$1"
  mkdir "$rv"
  timeout 240 "$APP" bulk "$WORK/uroced-a.sock" "$WORK/uroced-b.sock" "$2" "$3" "$rv" \
    >"$WORK/app-$name.log" 2>&1 &
  PID_APP=$!
  for _ in $(seq 2400); do  # the transfers: up to 240 s (a few seconds normally)
    [ -e "$rv/done" ] && break
    kill -0 "$PID_APP" 2>/dev/null || break
    sleep 0.1
  done
  if [ -e "$rv/done" ]; then
    local qa qb
    read -r qa qb <"$rv/done"
    local retx=$(stat a "qp.$qa.retransmits") tmo=$(stat a "qp.$qa.timeouts")
    local nrcv=$(stat a "qp.$qa.seq_naks_rcvd") nsnt=$(stat b "qp.$qb.seq_naks_sent")
    local dups=$(stat b "qp.$qb.dup_requests") st=$(stat a "qp.$qa.state")
    echo "  $name: A qp $qa: retransmits=$retx timeouts=$tmo seq_naks_rcvd=$nrcv state=$st;" \
      "B qp $qb: seq_naks_sent=$nsnt dup_requests=$dups"
    [ "${retx:-0}" -gt 0 ] && pass "$name: the requester went back $retx times" \
      || fail "$name: qp.$qa.retransmits='$retx', expected > 0"
    [ "${nrcv:-0}" -gt 0 ] && [ "${nsnt:-0}" -gt 0 ] &&
      pass "$name: $nsnt sequence NAKs sent by B, $nrcv received by A" ||
      fail "$name: sequence NAKs sent '$nsnt' / received '$nrcv', expected > 0"
    [ "${dups:-0}" -gt 0 ] && pass "$name: the responder saw $dups duplicate requests" \
      || fail "$name: qp.$qb.dup_requests='$dups', expected > 0"
    [ "$st" = 3 ] && pass "$name: the requester's QP is still RTS" || fail "$name: qp.$qa.state='$st'"
    : >"$rv/release"
  else
    fail "$name: verbs_app bulk did not finish its transfers"
  fi
  wait "$PID_APP"
  local rc=$?
  PID_APP=""
  sed 's/^/  app: /' "$WORK/app-$name.log"
  if [ $rc -eq 0 ] && grep -q "^0 failure(s)" "$WORK/app-$name.log"; then
    pass "$name: RC WRITE / READ / SEND of $(( 3 * ($2 + $3) )) messages complete, data intact"
  else
    fail "$name: verbs_app bulk exit $rc"
  fi
}

# --- run 1: 2 % loss each way
run loss2 32 2
read -r d_ab _ < <(nft_counts a_to_b)
read -r d_ba _ < <(nft_counts b_to_a)
[ "${d_ab:-0}" -gt 0 ] && [ "${d_ba:-0}" -gt 0 ] && pass "loss2: the path dropped $d_ab frames A->B, $d_ba B->A" \
  || fail "loss2: nft drop counters A->B '$d_ab' B->A '$d_ba'"

# --- run 2: 1 % loss and 1 % duplicates each way
path 10 10 || fail "nft rules for run 2"
run lossdup 32 1
read -r d_ab u_ab < <(nft_counts a_to_b)
read -r d_ba u_ba < <(nft_counts b_to_a)
[ "${d_ab:-0}" -gt 0 ] && [ "${u_ab:-0}" -gt 0 ] && [ "${d_ba:-0}" -gt 0 ] && [ "${u_ba:-0}" -gt 0 ] &&
  pass "lossdup: the path dropped $d_ab / duplicated $u_ab frames A->B, dropped $d_ba / duplicated $u_ba B->A" ||
  fail "lossdup: nft counters A->B drop '$d_ab' dup '$u_ab', B->A drop '$d_ba' dup '$u_ba'"

kill -0 "$PID_A" 2>/dev/null && kill -0 "$PID_B" 2>/dev/null || fail "a daemon died"
for d in a b; do
  v=$(stat $d daemon.qps)
  [ "$v" = 0 ] || fail "daemon $d: daemon.qps = '$v' after the apps closed everything"
done

# --- clean shutdown, then the captures
for d in a b; do stop_uroced $d '^capture:'; done
out=$(timeout 300 python3 "$CHECK_CAPTURE" --daemon "$PCAP_CHECK" "$(command -v tshark)" 5000 \
  "$WORK/uroced-a.pcap" "$WORK/uroced-b.pcap" 2>&1); rc=$?
echo "$out" | sed 's/^/  /'
[ $rc -eq 0 ] && pass "captures: uroce-pcap-check and tshark accept every frame" \
  || fail "captures: check_capture.py --daemon exit $rc"

echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
