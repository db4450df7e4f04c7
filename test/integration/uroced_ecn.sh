#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Integration test: DCQCN against a real marking bottleneck (issue 21, doc/congestion.md).
#
#   uroce-ecn-PID-s1: uroced S1 on net_af_packet over veth ue<PID>s1 (10.79.0.1)  sender
#   uroce-ecn-PID-s2: uroced S2 on net_af_packet over veth ue<PID>s2 (10.79.0.2)  sender
#   uroce-ecn-PID-r:  uroced R  on net_af_packet over veth ue<PID>r  (10.79.0.3)  receiver
#   uroce-ecn-PID-m:  the switch: the other ends of the three veths. nftables (netdev ingress)
#       forwards every frame from S1 / S2 to R and R's frames by destination ("fwd to", "dup to"
#       for ARP). R's port is the bottleneck: tc tbf on its egress veth at SHAPE_MBIT with a queue
#       of QUEUE_KB (this kernel has no red / netem qdisc, doc/congestion.md). The congestion
#       point is a phantom queue (HULL): one nft limit shared by both senders' chains marks CE
#       (`ip ecn set ce`, IPv4 checksum kept, the ICRC masks ECN) on every ECT(0) RoCE frame
#       above MARK_MBIT, a rate below the shaped one.
#
# Two verbs_app bulk transfers, S1 -> R and S2 -> R (one RC pair each: WRITE, READ, SEND of
# 64 KiB and 1 MiB messages, every message checked where it lands; S2 joins once S1 received a
# CNP), twice: with `[cc] algorithm = dcqcn` (parameters scaled to this slow bottleneck, below)
# on every daemon, then with `none`. The queue holds one sender's window but not two: without a
# reaction the two windows overflow it.
# Then a fairness phase: both senders stream 64 KiB WRITEs (verbs_app stream) at the same
# time; over a window of FAIR_PKTS packets delivered to R (R's expected PSNs: retransmissions do
# not count) each sender's share is measured.
# Asserted from counters only (uroce-stat while the QPs exist, nft and tc counters), never from
# elapsed time:
#   dcqcn: frames were marked (nft), R saw CE and sent CNPs, S1 and S2 each received CNPs and
#          cut their rate; the shaper dropped at most DROP_MAX frames; S1's line rate is its
#          link speed; S1's CC counters read through DPDK telemetry match uroce-stat's; both
#          transfers complete with data intact; in the fairness window each sender's share is
#          within SHARE_MIN..1000-SHARE_MIN per mille; R's capture (daemon.pcap) passes
#          uroce-pcap-check and tshark (check_capture.py --daemon), holds as many CNPs as R's
#          port.p0.cc.cnp_sent, dissected as infiniband opcode 0x81 with DSCP 48, ECN 00, P_Key
#          0xFFFF, and at least port.p0.cc.ce_seen CE-marked frames;
#   none:  marks and CNPs too, but no cut: the shaper drops more than DROP_MAX and more than
#          CONTRAST times the dcqcn run, the senders go back; both transfers still complete.
#   both:  the per-port CC totals (port.p0.cc.*) of each daemon are at least its QPs' counters
#          while they exist and equal their sum over every QP it had once they are destroyed;
#          (dcqcn) DPDK telemetry's /uroce/cc,p0 equals uroce-stat's on S1 and R.
# UROCE_ECN_DEBUG=1 prints the queue, drops, rates and retransmits every ~0.1 s.
# Needs root, nft, tc (iproute2), tshark and dpdk-telemetry.py. Every wait is bounded; everything it creates (namespaces,
# veths, processes, files, DPDK runtime directories) is removed on exit.
# Usage: uroced_ecn.sh UROCED UROCE_STAT VERBS_APP UROCE_PCAP_CHECK CHECK_CAPTURE_PY
set -uo pipefail

UROCED=${1:?usage: $0 UROCED UROCE_STAT VERBS_APP UROCE_PCAP_CHECK CHECK_CAPTURE_PY}
STAT=${2:?}
APP=${3:?}
PCAP_CHECK=${4:?}
CHECK_CAPTURE=${5:?}
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
need_root "network namespaces, veths, nftables, tc"
need_tools ip nft tc timeout tshark python3

SHAPE_MBIT=${UROCE_ECN_SHAPE_MBIT:-20}
MARK_MBIT=${UROCE_ECN_MARK_MBIT:-16}
QUEUE_KB=${UROCE_ECN_QUEUE_KB:-160}
# 1 % of the ~20,000 data frames: runs of the dcqcn half dropped 20, 66 and 168 (the drops come
# at flow starts and after the READ phase, doc/congestion.md); none dropped 334 to 1,136.
DROP_MAX=${UROCE_ECN_DROP_MAX:-200}
CONTRAST=3
N64K=${UROCE_ECN_N64K:-64}
N1M=${UROCE_ECN_N1M:-2}
# The fairness window (doc/congestion.md): FAIR_WARM packets after both streams received CNPs,
# then FAIR_PKTS packets (1 KiB each) delivered to R; each sender's share must lie within
# SHARE_MIN..1000-SHARE_MIN per mille.
FAIR_WARM=${UROCE_ECN_FAIR_WARM:-1000}
FAIR_PKTS=${UROCE_ECN_FAIR_PKTS:-6000}
SHARE_MIN=${UROCE_ECN_SHARE_MIN:-300}

# DCQCN scaled to a bottleneck of a few tens of Mb/s whose queue delay is tens of ms (the
# ConnectX defaults assume 25-100 Gb/s and a few microseconds of RTT, doc/congestion.md): the
# first CNP sets 10 Mb/s instead of halving 100 Gb/s a dozen times; the target is clamped on
# every cut; α, cuts and CNPs run on 1 ms periods instead of 1-4 us (with α decaying every
# microsecond, a CNP per millisecond finds α near 0 and cuts nothing); the rate grows by 1 Mb/s
# per 5 ms.
CC_PARAMS="rate_to_set_on_first_cnp = 10
clamp_tgt_rate = on
rpg_time_reset = 5000
rpg_threshold = 5
rpg_ai_rate = 1
rpg_hai_rate = 1
dce_tcp_rtt = 1000
rate_reduce_monitor_period = 1000
min_time_between_cnps = 1000"

ID=$$
P=uroce-ecn-$ID
NS_M=$P-m
SHM=/dev/shm
[ -d "$SHM" ] && [ -w "$SHM" ] || SHM=/tmp
WORK=$(mktemp -d "$SHM/uroce-ecn-XXXXXX")
NODES="s1 s2 r"
PID_S1="" PID_S2="" PID_R="" PID_APP1="" PID_APP2=""
pass() { echo "ok: [${SECONDS}s] $*"; }

stop_daemons() {
  local d v
  for d in $NODES; do
    v="PID_${d^^}"
    [ -n "${!v}" ] && stop_pid "${!v}" TERM >/dev/null 2>&1
    eval "$v="
  done
}
cleanup() {
  [ -n "$PID_APP1" ] && stop_pid "$PID_APP1" KILL >/dev/null 2>&1
  [ -n "$PID_APP2" ] && stop_pid "$PID_APP2" KILL >/dev/null 2>&1
  stop_daemons
  for d in $NODES m; do ip netns del "$P-$d" 2>/dev/null; done
  for d in $NODES; do rm -rf "/var/run/dpdk/$P-$d"; done
  if [ "$FAILS" -ne 0 ]; then
    for d in $NODES; do echo "--- uroced $d log"; tail -20 "$WORK/uroced-$d.log" 2>/dev/null; done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# --- namespaces, veths, the switch
ip netns add "$NS_M" || { echo "FAIL: ip netns add $NS_M"; exit 1; }
ip netns exec "$NS_M" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
for d in $NODES; do
  ip netns add "$P-$d" || { echo "FAIL: ip netns add $P-$d"; exit 1; }
  ip link add "ue$ID$d" netns "$P-$d" type veth peer name "ue${ID}m$d" netns "$NS_M" ||
    { echo "FAIL: veth"; exit 1; }
  # No kernel traffic on the segment: no IPv6 (link-local, MLD), no IPv4 address.
  ip netns exec "$P-$d" sysctl -qw "net.ipv6.conf.ue$ID$d.disable_ipv6=1"
  ip netns exec "$NS_M" sysctl -qw "net.ipv6.conf.ue${ID}m$d.disable_ipv6=1"
  ip -n "$P-$d" link set "ue$ID$d" up
  ip -n "$NS_M" link set "ue${ID}m$d" up
done
MS1=ue${ID}ms1 MS2=ue${ID}ms2 MR=ue${ID}mr

# The marker: frames per second above which ECT(0) RoCE frames from either sender get CE. In
# packets, not bytes: a byte-mode nft limit's bucket holds one second of its rate plus the burst
# (kernel nft_limit.c: tokens_max = unit * (rate + burst) / rate), a phantom queue one second
# deep; a packet-mode bucket holds the burst only. The data frames are full (1024 B payload,
# 1082 B on the wire), so frames stand for bytes.
MARK_PPS=$((MARK_MBIT * 1000000 / 8 / 1082))
ip netns exec "$NS_M" nft -f - <<EOF || { echo "FAIL: nft rules (netdev ingress, named limit, ip ecn set, fwd)"; exit 1; }
table netdev uroce_ecn {
  limit phantom { rate over $MARK_PPS/second burst 16 packets }
  chain from_s1 {
    type filter hook ingress device "$MS1" priority 0;
    udp dport 4791 counter
    ip ecn ect0 counter
    ip ecn ect0 udp dport 4791 limit name "phantom" counter ip ecn set ce
    fwd to "$MR"
  }
  chain from_s2 {
    type filter hook ingress device "$MS2" priority 0;
    udp dport 4791 counter
    ip ecn ect0 counter
    ip ecn ect0 udp dport 4791 limit name "phantom" counter ip ecn set ce
    fwd to "$MR"
  }
  chain from_r {
    type filter hook ingress device "$MR" priority 0;
    ip daddr 10.79.0.1 fwd to "$MS1"
    ip daddr 10.79.0.2 fwd to "$MS2"
    dup to "$MS1"
    fwd to "$MS2"
  }
}
EOF
# The bottleneck: R's link, shaped. tbf drops what exceeds its queue (tc -s: "dropped N").
shaper() {
  ip netns exec "$NS_M" tc qdisc del dev "$MR" root 2>/dev/null
  ip netns exec "$NS_M" tc qdisc add dev "$MR" root tbf rate "${SHAPE_MBIT}mbit" \
    burst 16kb limit "${QUEUE_KB}kb"
}
shaper || { echo "FAIL: tc tbf on $MR"; exit 1; }
marks() {  # CE marks since the rules were written (both chains)
  ip netns exec "$NS_M" nft list table netdev uroce_ecn |
    awk '/ecn set ce/ { n = $0; sub(/.*packets /, "", n); sub(/ .*/, "", n); s += n } END { print s + 0 }'
}
backlog() {  # bytes in the shaper's queue now
  ip netns exec "$NS_M" tc -s qdisc show dev "$MR" |
    awk '/backlog/ { n = $2; sub(/b$/, "", n); m = 1
      if (n ~ /K$/) m = 1024; else if (n ~ /M$/) m = 1048576
      sub(/[KM]$/, "", n); print int(n * m); exit }'  # tc prints 130Kb for 133120 B
}
shaper_drops() {
  ip netns exec "$NS_M" tc -s qdisc show dev "$MR" |
    awk '/dropped/ { n = $0; sub(/.*dropped /, "", n); sub(/,.*/, "", n); print n; exit }'
}
pass "switch: S1, S2 -> R through tbf ${SHAPE_MBIT} Mb/s (queue ${QUEUE_KB} KB), CE above ${MARK_MBIT} Mb/s"

conf() {  # conf NODE LCORE IP ALGORITHM [PCAP]
  cat >"$WORK/uroced-$1.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=$P-$1 --log-level=*:notice
[daemon]
socket = $WORK/uroced-$1.sock
workers = $2
idle_sleep_us = 50
$([ -n "${5:-}" ] && echo "pcap = $5")
[port p0]
device = net_af_packet0,iface=ue$ID$1,framecnt=2048
ipv4 = $3/24
[cc]
algorithm = $4
$([ "$4" = dcqcn ] && echo "$CC_PARAMS")
EOF
}
start_all() {  # start_all ALGORITHM
  local d ok=1
  conf s1 0 10.79.0.1 "$1"
  conf s2 1 10.79.0.2 "$1"
  # R captures in the dcqcn run: CE-marked frames in, CNPs out (checked after the run).
  conf r 1 10.79.0.3 "$1" "$([ "$1" = dcqcn ] && echo "$WORK/r-dcqcn.pcap")"
  for d in $NODES; do
    ip netns exec "$P-$d" env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/uroced-$d.conf" \
      >"$WORK/uroced-$d.log" 2>&1 &
    eval "PID_${d^^}=$!"
  done
  for _ in $(seq 1200); do  # up to 120 s (the EAL loads every PMD of the driver directory)
    ok=1
    for d in $NODES; do grep -q "uroced: running" "$WORK/uroced-$d.log" || ok=0; done
    [ $ok = 1 ] && break
    sleep 0.1
  done
  [ $ok = 1 ] || { fail "$1: the daemons did not come up within 120 s"; exit 1; }
  pass "$1: three uroced up (pids $PID_S1 $PID_S2 $PID_R)"
  if [ "$1" = dcqcn ]; then  # af_packet reports 10 Gb/s: the RP's line rate (doc/congestion.md)
    grep -q "port p0: dcqcn line rate 10000 Mb/s (link speed)" "$WORK/uroced-s1.log" &&
      pass "dcqcn: S1's line rate is its link speed, 10000 Mb/s" ||
      fail "dcqcn: S1 did not log 'dcqcn line rate 10000 Mb/s (link speed)'"
  fi
}

stat() {  # stat NODE KEY -> value (empty if absent)
  timeout 30 "$STAT" -s "$WORK/uroced-$1.sock" "$2" 2>/dev/null | awk -v k="$2" '$1 == k { print $2 }'
}

sum_stat() {  # sum_stat NODE SUFFIX -> the sum of every qp.*.SUFFIX counter
  timeout 30 "$STAT" -s "$WORK/uroced-$1.sock" "$2" 2>/dev/null |
    awk -v k=".$2" 'substr($1, length($1) - length(k) + 1) == k { s += $2 } END { print s + 0 }'
}

port_cc() {  # port_cc NODE -> "KEY VALUE" per port.p0.cc.* counter (KEY without the prefix)
  timeout 30 "$STAT" -s "$WORK/uroced-$1.sock" port.p0.cc. 2>/dev/null |
    awk '$1 ~ /^port\.p0\.cc\./ { k = $1; sub(/^port\.p0\.cc\./, "", k); print k, $2 }'
}

# cc_expect WHAT LINES KEY OP WANT: LINES (port_cc's) must give KEY a value OP (-eq, -ge) WANT.
cc_expect() {
  local got
  got=$(awk -v k="$3" '$1 == k { print $2 }' <<<"$2")
  [ -n "$got" ] && [ "$got" "$4" "$5" ] && return 0
  fail "$1: port.p0.cc.$3 = '$got', expected $4 $5"
  return 1
}

# check_port_cc WHEN OP: the per-port CC totals of the three daemons against what their QPs
# counted (TOT_* below: the sums over every QP each daemon had, read while each existed and was
# idle). While QPs exist OP is -ge; once they are gone -eq, and nothing is throttled.
check_port_cc() {
  local when=$1 op=$2 i lines ok=1
  for i in 1 2; do
    lines=$(port_cc "s$i")
    eval "PCC_S$i=\$lines"
    cc_expect "$when S$i" "$lines" cnp_rcvd "$op" "$(eval echo "\$TOT_CNPR_$i")" || ok=0
    cc_expect "$when S$i" "$lines" cnps_handled "$op" "$(eval echo "\$TOT_HANDLED_$i")" || ok=0
    cc_expect "$when S$i" "$lines" rate_cuts "$op" "$(eval echo "\$TOT_CUTS_$i")" || ok=0
    [ "$op" = -eq ] && { cc_expect "$when S$i" "$lines" throttled_qps -eq 0 || ok=0; }
    [ "$op" = -eq ] && { cc_expect "$when S$i" "$lines" throttled_rate_sum_mbps -eq 0 || ok=0; }
  done
  lines=$(port_cc r)
  PCC_R=$lines
  cc_expect "$when R" "$lines" ce_seen "$op" "$TOT_CE" || ok=0
  cc_expect "$when R" "$lines" cnp_sent "$op" "$TOT_CNPS" || ok=0
  [ "$op" = -eq ] && { cc_expect "$when R" "$lines" throttled_qps -eq 0 || ok=0; }
  [ $ok = 1 ] && pass "$when: port.p0.cc.* $op the QPs' counters: S1 cnp_rcvd" \
    "$(awk '$1 == "cnp_rcvd" { print $2 }' <<<"$PCC_S1") (QPs $TOT_CNPR_1), S2 cnp_rcvd" \
    "$(awk '$1 == "cnp_rcvd" { print $2 }' <<<"$PCC_S2") (QPs $TOT_CNPR_2), R ce_seen" \
    "$(awk '$1 == "ce_seen" { print $2 }' <<<"$PCC_R") (QPs $TOT_CE) cnp_sent" \
    "$(awk '$1 == "cnp_sent" { print $2 }' <<<"$PCC_R") (QPs $TOT_CNPS)"
}

# tel_cc NODE LINES: DPDK telemetry's /uroce/cc,p0 (lib/telemetry) equals LINES (port_cc's, read
# while nothing changes: no QP left).
tel_cc() {
  command -v dpdk-telemetry.py >/dev/null || { fail "dpdk-telemetry.py not found (dpdk-dev)"; return; }
  printf '/uroce/cc,p0\n' | timeout 60 dpdk-telemetry.py -f "$P-$1" >"$WORK/tel-cc.log" 2>&1
  if python3 - "$WORK/tel-cc.log" "$2" <<'PY'
import json, sys
q = None
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{") and "/uroce/cc" in line:
        q = json.loads(line)["/uroce/cc"]
assert q is not None, "no /uroce/cc reply"
want = {k: int(v) for k, v in (l.split() for l in sys.argv[2].splitlines())}
assert len(want) == 10, want
assert q == want, (q, want)
PY
  then
    pass "$1: telemetry /uroce/cc,p0 equals uroce-stat's port.p0.cc.* (10 counters)"
  else
    fail "$1: telemetry /uroce/cc,p0"
    sed 's/^/  telemetry: /' "$WORK/tel-cc.log"
  fi
}

# qp_cc NODE QPN SIDE: adds the QP's counters to the totals (SIDE i: sender Si; r: receiver).
qp_cc() {
  local v
  if [ "$3" = r ]; then
    v=$(stat r "qp.$2.ce_seen") TOT_CE=$((TOT_CE + ${v:-0}))
    v=$(stat r "qp.$2.cnp_sent") TOT_CNPS=$((TOT_CNPS + ${v:-0}))
    return
  fi
  v=$(stat "s$3" "qp.$2.cnp_rcvd"); eval "TOT_CNPR_$3=\$((TOT_CNPR_$3 + ${v:-0}))"
  v=$(stat "s$3" "qp.$2.cc_cnps_handled"); eval "TOT_HANDLED_$3=\$((TOT_HANDLED_$3 + ${v:-0}))"
  v=$(stat "s$3" "qp.$2.cc_rate_cuts"); eval "TOT_CUTS_$3=\$((TOT_CUTS_$3 + ${v:-0}))"
}

psn_pair() {  # R's resp_psn of the two stream QPs (FQB_1, FQB_2): "P1 P2"
  timeout 30 "$STAT" -s "$WORK/uroced-r.sock" resp_psn 2>/dev/null |
    awk -v a="qp.$FQB_1.resp_psn" -v b="qp.$FQB_2.resp_psn" \
      '$1 == a { x = $2 } $1 == b { y = $2 } END { print x + 0, y + 0 }'
}
psn_delta() { echo $((($2 - $1 + 16777216) % 16777216)); }

# fairness ALGORITHM: S1 and S2 stream 64 KiB WRITEs into R at the same time (verbs_app stream;
# S2 joins once S1 received a CNP, as in the bulk phase). After FAIR_WARM packets delivered
# since both received CNPs, the window: until R's two QPs advanced their expected PSN by
# FAIR_PKTS together (1 KiB per PSN: delivered data, retransmissions excluded). Sets FD_1, FD_2
# (packets of each in the window), SHARE_1 (S1's share, per mille), JAIN (per mille), FAIR_DROPS
# (shaper drops in the window).
fairness() {
  local alg=$1 i dir qa qb v p0 p1 d0 n1 n2 ok=1
  FD_1=0 FD_2=0 SHARE_1=0 JAIN=0 FAIR_DROPS=0
  for i in 1 2; do
    dir="$WORK/fs-$alg-$i"
    mkdir "$dir"
    timeout 300 "$APP" stream "$WORK/uroced-s$i.sock" "$WORK/uroced-r.sock" "$dir" \
      >"$WORK/stream-$alg-$i.log" 2>&1 &
    eval "PID_APP$i=$!"
    for _ in $(seq 600); do
      [ -s "$dir/qpns" ] && break
      kill -0 "$(eval echo "\$PID_APP$i")" 2>/dev/null || break
      sleep 0.1
    done
    [ -s "$dir/qpns" ] || { fail "$alg: stream S$i -> R did not connect"; return 1; }
    read -r qa qb <"$dir/qpns"
    eval "FQA_$i=$qa FQB_$i=$qb"
    for _ in $(seq 600); do
      v=$(stat "s$i" "qp.$qa.cnp_rcvd")
      [ "${v:-0}" -gt 0 ] && break
      kill -0 "$(eval echo "\$PID_APP$i")" 2>/dev/null || break
      sleep 0.1
    done
    [ "${v:-0}" -gt 0 ] || { fail "$alg: stream S$i received no CNP within 60 s"; ok=0; }
  done
  if [ $ok = 1 ]; then
    read -r n1 n2 < <(psn_pair)
    for _ in $(seq 600); do  # warm-up: FAIR_WARM packets (bounded: 60 s and a few)
      read -r p0 p1 < <(psn_pair)
      [ $(($(psn_delta "$n1" "$p0") + $(psn_delta "$n2" "$p1"))) -ge "$FAIR_WARM" ] && break
      sleep 0.1
    done
    read -r n1 n2 < <(psn_pair)
    d0=$(shaper_drops)
    FD_1=0 FD_2=0
    for _ in $(seq 600); do  # the window: FAIR_PKTS packets (bounded: 120 s and a few)
      kill -0 "$PID_APP1" 2>/dev/null && kill -0 "$PID_APP2" 2>/dev/null || break
      sleep 0.2
      read -r p0 p1 < <(psn_pair)
      FD_1=$(psn_delta "$n1" "$p0") FD_2=$(psn_delta "$n2" "$p1")
      [ $((FD_1 + FD_2)) -ge "$FAIR_PKTS" ] && break
    done
    FAIR_DROPS=$(($(shaper_drops) - d0))
    # What the reaction points allow at the window's end (0: unthrottled or none).
    FAIR_RATES="$(stat s1 port.p0.cc.throttled_rate_sum_mbps) / $(stat s2 port.p0.cc.throttled_rate_sum_mbps)"
    if [ $((FD_1 + FD_2)) -ge "$FAIR_PKTS" ]; then
      SHARE_1=$((1000 * FD_1 / (FD_1 + FD_2)))
      JAIN=$(awk -v a="$FD_1" -v b="$FD_2" 'BEGIN { printf "%d", 1000 * (a + b) ^ 2 / (2 * (a * a + b * b)) }')
      echo "  $alg: fairness window: S1 $FD_1 packets, S2 $FD_2 (S1's share $SHARE_1 per mille," \
        "Jain $JAIN per mille), shaper drops $FAIR_DROPS; throttled rates S1 / S2 at its end" \
        "$FAIR_RATES Mb/s"
    else
      fail "$alg: the fairness window did not fill ($FD_1 + $FD_2 < $FAIR_PKTS packets)"
      SHARE_1=0 JAIN=0
    fi
  fi
  for i in 1 2; do : >"$WORK/fs-$alg-$i/stop"; done
  for i in 1 2; do
    dir="$WORK/fs-$alg-$i"
    for _ in $(seq 600); do
      [ -e "$dir/done" ] && break
      kill -0 "$(eval echo "\$PID_APP$i")" 2>/dev/null || break
      sleep 0.1
    done
    if [ -e "$dir/done" ]; then
      read -r qa qb v <"$dir/done"
      qp_cc "s$i" "$qa" "$i"
      qp_cc r "$qb" r
    else
      fail "$alg: stream S$i -> R did not stop"
    fi
  done
  check_port_cc "$alg, streams running" -ge
  for i in 1 2; do : >"$WORK/fs-$alg-$i/release"; done
  for i in 1 2; do
    local pid_var="PID_APP$i" rc
    wait "${!pid_var}"
    rc=$?
    eval "$pid_var="
    if [ $rc -eq 0 ] && grep -q "^0 failure(s)" "$WORK/stream-$alg-$i.log"; then
      pass "$alg: stream S$i -> R: $(grep -o "RC WRITE [0-9]* x" "$WORK/stream-$alg-$i.log") 64 KiB, data intact"
    else
      fail "$alg: verbs_app stream S$i -> R exit $rc"
      sed 's/^/  app: /' "$WORK/stream-$alg-$i.log"
    fi
  done
}

# run ALGORITHM: both bulk transfers at once, then the fairness streams; sets DROPS, RETX,
# MARKS, per sender CUTS_i and CNPR_i (the bulk QPs'), R's CE_SEEN and CNP_SENT (its two bulk
# QPs), the fairness numbers (fairness), and checks the per-port CC totals.
run() {
  local alg=$1 i d rv qa qb
  TOT_CNPR_1=0 TOT_CNPR_2=0 TOT_HANDLED_1=0 TOT_HANDLED_2=0 TOT_CUTS_1=0 TOT_CUTS_2=0
  TOT_CE=0 TOT_CNPS=0
  start_all "$alg"
  shaper || fail "$alg: tc tbf"  # a fresh tbf: its drop counter starts at 0
  local marks0
  marks0=$(marks)
  QMAX=0
  for i in 1 2; do
    rv="$WORK/rv-$alg-$i"
    mkdir "$rv"
    timeout 300 "$APP" bulk "$WORK/uroced-s$i.sock" "$WORK/uroced-r.sock" "$N64K" "$N1M" "$rv" \
      >"$WORK/app-$alg-$i.log" 2>&1 &
    eval "PID_APP$i=$!"
    [ $i = 2 ] && break
    # S2 joins once S1 has received a CNP (in both runs): S1's first window is in the queue
    # before any CNP can come back, two first windows at once would overflow it whatever the
    # algorithm (doc/congestion.md, flows starting together).
    for _ in $(seq 600); do
      [ "$(sum_stat s1 cnp_rcvd)" -gt 0 ] && break
      kill -0 "$PID_APP1" 2>/dev/null || break
      sleep 0.1
    done
    [ "$(sum_stat s1 cnp_rcvd)" -gt 0 ] || fail "$alg: S1 received no CNP within 60 s"
    echo "  $alg: S2 joins: shaper drops so far $(shaper_drops), queue $(backlog) B"
  done
  for _ in $(seq 3000); do  # the transfers: up to 300 s (seconds normally)
    [ -e "$WORK/rv-$alg-1/done" ] && [ -e "$WORK/rv-$alg-2/done" ] && break
    kill -0 "$PID_APP1" 2>/dev/null || kill -0 "$PID_APP2" 2>/dev/null || break
    q=$(backlog)
    [ -n "${UROCE_ECN_DEBUG:-}" ] && echo "  trace: q=$q drops=$(shaper_drops) s1=$(timeout 5 "$STAT" -s "$WORK/uroced-s1.sock" cc_rate_mbps retransmits | awk '{printf "%s ", $2}') s2=$(timeout 5 "$STAT" -s "$WORK/uroced-s2.sock" cc_rate_mbps retransmits| awk '{printf "%s ", $2}')"
    [ "${q:-0}" -gt "$QMAX" ] && QMAX=$q
    sleep 0.1
  done
  RETX=0 CE_SEEN=0 CNP_SENT=0
  for i in 1 2; do
    rv="$WORK/rv-$alg-$i"
    if [ ! -e "$rv/done" ]; then
      fail "$alg: verbs_app bulk S$i -> R did not finish its transfers"
      eval "CUTS_$i=0 CNPR_$i=0"
      continue
    fi
    read -r qa qb <"$rv/done"
    local retx tmo cnpr cuts handled ce cnps rate
    retx=$(stat "s$i" "qp.$qa.retransmits") tmo=$(stat "s$i" "qp.$qa.timeouts")
    cnpr=$(stat "s$i" "qp.$qa.cnp_rcvd") cuts=$(stat "s$i" "qp.$qa.cc_rate_cuts")
    handled=$(stat "s$i" "qp.$qa.cc_cnps_handled") rate=$(stat "s$i" "qp.$qa.cc_rate_mbps")
    ce=$(stat r "qp.$qb.ce_seen") cnps=$(stat r "qp.$qb.cnp_sent")
    echo "  $alg S$i qp $qa: retransmits=${retx:-?} timeouts=${tmo:-?} cnp_rcvd=${cnpr:-?}" \
      "cc_cnps_handled=${handled:--} cc_rate_cuts=${cuts:--} cc_rate_mbps=${rate:--};" \
      "R qp $qb: ce_seen=${ce:-?} cnp_sent=${cnps:-?}"
    RETX=$((RETX + ${retx:-0})) CE_SEEN=$((CE_SEEN + ${ce:-0})) CNP_SENT=$((CNP_SENT + ${cnps:-0}))
    eval "CUTS_$i=${cuts:-0} CNPR_$i=${cnpr:-0}"
    qp_cc "s$i" "$qa" "$i"
    qp_cc r "$qb" r
    # The same CC counters through DPDK telemetry (/uroce/qp,QPN; lib/telemetry).
    if [ "$alg" = dcqcn ] && [ "$i" = 1 ] && command -v dpdk-telemetry.py >/dev/null; then
      printf '/uroce/qp,%s\n' "$qa" | timeout 60 dpdk-telemetry.py -f "$P-s1" >"$WORK/tel.log" 2>&1
      if python3 - "$WORK/tel.log" "$cuts" "$cnpr" "$handled" <<'PY'
import json, sys
q = None
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{") and "/uroce/qp" in line:
        q = json.loads(line)["/uroce/qp"]
assert q is not None, "no /uroce/qp reply"
assert q["cc_rate_cuts"] == int(sys.argv[2]), (q["cc_rate_cuts"], sys.argv[2])
assert q["cnp_rcvd"] == int(sys.argv[3]), (q["cnp_rcvd"], sys.argv[3])
assert q["cc_cnps_handled"] == int(sys.argv[4]), (q["cc_cnps_handled"], sys.argv[4])
for k in ("cc_throttled", "cc_rate_mbps", "cc_target_mbps", "cc_rate_increases", "cc_releases"):
    assert k in q, k
PY
      then
        pass "$alg: telemetry /uroce/qp,$qa has the CC counters uroce-stat shows"
      else
        fail "$alg: telemetry /uroce/qp,$qa"
        sed 's/^/  telemetry: /' "$WORK/tel.log"
      fi
    fi
  done
  # Per-port totals (port.p0.cc.*) while the bulk QPs exist, then once they are gone.
  check_port_cc "$alg, bulk QPs open" -ge
  for i in 1 2; do [ -d "$WORK/rv-$alg-$i" ] && : >"$WORK/rv-$alg-$i/release"; done
  for i in 1 2; do
    local pid_var="PID_APP$i" rc
    wait "${!pid_var}"
    rc=$?
    eval "$pid_var="
    sed 's/^/  app: /' "$WORK/app-$alg-$i.log" | grep -v "^  app: ok: RC QPs"
    if [ $rc -eq 0 ] && grep -q "^0 failure(s)" "$WORK/app-$alg-$i.log"; then
      pass "$alg: S$i -> R: every WRITE / READ / SEND completed, data intact"
    else
      fail "$alg: verbs_app bulk S$i -> R exit $rc"
    fi
  done
  check_port_cc "$alg, bulk QPs destroyed" -eq
  BULK_DROPS=$(shaper_drops)
  # Both senders at once on a steady load: their shares of the bottleneck.
  fairness "$alg"
  check_port_cc "$alg, every QP destroyed" -eq
  if [ "$alg" = dcqcn ]; then
    tel_cc s1 "$PCC_S1"
    tel_cc r "$PCC_R"
  fi
  if [ -n "${UROCE_ECN_DEBUG:-}" ]; then
    ip -n "$NS_M" -s link; ip netns exec "$NS_M" tc -s qdisc show dev "$MR"; ip netns exec "$NS_M" nft list ruleset
    for d in $NODES; do ip -n "$P-$d" -s link; timeout 30 "$STAT" -s "$WORK/uroced-$d.sock" | grep -E "^port|^engine" | grep -v " 0$"; done
  fi
  DROPS=$(shaper_drops)
  MARKS=$(($(marks) - marks0))
  echo "  $alg: CE marks $MARKS, shaper drops $DROPS ($BULK_DROPS in the bulk phase), largest queue sampled $QMAX B, sender retransmits $RETX," \
    "R: ce_seen $CE_SEEN cnp_sent $CNP_SENT (bulk QPs); R's port totals: ce_seen $TOT_CE cnp_sent $TOT_CNPS"
  for d in $NODES; do kill -0 "$(eval echo "\$PID_${d^^}")" 2>/dev/null || fail "$alg: uroced $d died"; done
  stop_daemons
}

# --- run 1: DCQCN
run dcqcn
D_DROPS=$BULK_DROPS
[ "$MARKS" -gt 0 ] && pass "dcqcn: the switch marked $MARKS frames CE" || fail "dcqcn: no CE marks"
[ "$CE_SEEN" -gt 0 ] && [ "$CNP_SENT" -gt 0 ] &&
  pass "dcqcn: R saw $CE_SEEN CE frames and sent $CNP_SENT CNPs" ||
  fail "dcqcn: R ce_seen $CE_SEEN cnp_sent $CNP_SENT, expected > 0"
for i in 1 2; do
  c=CUTS_$i n=CNPR_$i
  [ "${!n}" -gt 0 ] && [ "${!c}" -gt 0 ] &&
    pass "dcqcn: S$i received ${!n} CNPs and cut its rate ${!c} times" ||
    fail "dcqcn: S$i cnp_rcvd ${!n} cc_rate_cuts ${!c}, expected > 0"
done
[ "${BULK_DROPS:-999999}" -le "$DROP_MAX" ] &&
  pass "dcqcn: the shaper dropped $BULK_DROPS frames in the bulk phase (<= $DROP_MAX)" ||
  fail "dcqcn: the shaper dropped '$BULK_DROPS' frames in the bulk phase, expected <= $DROP_MAX"
# Fairness: each sender's share of the packets R received in the window.
[ "$SHARE_1" -ge "$SHARE_MIN" ] && [ "$SHARE_1" -le $((1000 - SHARE_MIN)) ] &&
  pass "dcqcn: fair shares: S1 $FD_1 / S2 $FD_2 packets (S1 $SHARE_1 per mille, Jain $JAIN per mille)" ||
  fail "dcqcn: S1's share $SHARE_1 per mille ($FD_1 / $FD_2 packets), expected $SHARE_MIN-$((1000 - SHARE_MIN))"
D_RETX=$RETX
# R's capture: every frame valid (uroce-pcap-check), tshark dissects all, every CNP R sent is in
# it (as many as port.p0.cc.cnp_sent) as ConnectX sends it (DSCP 48, ECN 00, P_Key 0xFFFF), and
# at least as many CE-marked frames as R's port.p0.cc.ce_seen.
R_CNPS=$(awk '$1 == "cnp_sent" { print $2 }' <<<"$PCC_R")
R_CE=$(awk '$1 == "ce_seen" { print $2 }' <<<"$PCC_R")
out=$(timeout 300 python3 "$CHECK_CAPTURE" --daemon --cnps "${R_CNPS:-0}" --cnp-dscp 48 \
  --min-ce "${R_CE:-1}" "$PCAP_CHECK" "$(command -v tshark)" 10000 "$WORK/r-dcqcn.pcap" 2>&1); rc=$?
echo "$out" | sed 's/^/  /'
[ $rc -eq 0 ] && pass "dcqcn: R's capture: uroce-pcap-check and tshark accept every frame, the $R_CNPS CNPs of port.p0.cc.cnp_sent, >= $R_CE CE frames" ||
  fail "dcqcn: R's capture: check_capture.py --daemon exit $rc"
rm -f "$WORK/r-dcqcn.pcap"

# --- run 2: none, the same traffic
run none
[ "$MARKS" -gt 0 ] && [ "$CNP_SENT" -gt 0 ] &&
  pass "none: $MARKS frames marked, R sent $CNP_SENT CNPs (ignored by the senders)" ||
  fail "none: marks $MARKS cnp_sent $CNP_SENT, expected > 0"
[ "${BULK_DROPS:-0}" -gt "$DROP_MAX" ] && [ "${BULK_DROPS:-0}" -gt $((CONTRAST * D_DROPS)) ] &&
  pass "none: the shaper dropped $BULK_DROPS frames in the bulk phase (dcqcn: $D_DROPS)" ||
  fail "none: the shaper dropped '$BULK_DROPS' frames in the bulk phase, expected > $DROP_MAX and > $CONTRAST x $D_DROPS"
# Rewinds are not compared: a go-back-N episode resends a window whatever its cause, and on a
# loaded machine a starved daemon adds timeouts to either run.
[ "$RETX" -gt 0 ] && pass "none: the senders went back $RETX times (dcqcn: $D_RETX)" ||
  fail "none: no go-back-N after $DROPS drops"

echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
