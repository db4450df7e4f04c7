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
# Asserted from counters only (uroce-stat while the QPs exist, nft and tc counters), never from
# elapsed time:
#   dcqcn: frames were marked (nft), R saw CE and sent CNPs, S1 and S2 each received CNPs and
#          cut their rate; the shaper dropped at most DROP_MAX frames; S1's line rate is its
#          link speed; S1's CC counters read through DPDK telemetry match uroce-stat's; both
#          transfers complete with data intact;
#   none:  marks and CNPs too, but no cut: the shaper drops more than DROP_MAX and more than
#          CONTRAST times the dcqcn run, the senders go back; both transfers still complete.
# UROCE_ECN_DEBUG=1 prints the queue, drops, rates and retransmits every ~0.1 s.
# Needs root, nft and tc (iproute2). Every wait is bounded; everything it creates (namespaces,
# veths, processes, files, DPDK runtime directories) is removed on exit.
# Usage: uroced_ecn.sh UROCED UROCE_STAT VERBS_APP
set -uo pipefail

UROCED=${1:?usage: $0 UROCED UROCE_STAT VERBS_APP}
STAT=${2:?}
APP=${3:?}
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
need_root "network namespaces, veths, nftables, tc"
need_tools ip nft tc timeout

SHAPE_MBIT=${UROCE_ECN_SHAPE_MBIT:-20}
MARK_MBIT=${UROCE_ECN_MARK_MBIT:-16}
QUEUE_KB=${UROCE_ECN_QUEUE_KB:-160}
# 1 % of the ~20,000 data frames: runs of the dcqcn half dropped 20, 66 and 168 (the drops come
# at flow starts and after the READ phase, doc/congestion.md); none dropped 334 to 1,136.
DROP_MAX=${UROCE_ECN_DROP_MAX:-200}
CONTRAST=3
N64K=${UROCE_ECN_N64K:-64}
N1M=${UROCE_ECN_N1M:-2}

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
    awk '/backlog/ { n = $2; sub(/b$/, "", n); print n; exit }'
}
shaper_drops() {
  ip netns exec "$NS_M" tc -s qdisc show dev "$MR" |
    awk '/dropped/ { n = $0; sub(/.*dropped /, "", n); sub(/,.*/, "", n); print n; exit }'
}
pass "switch: S1, S2 -> R through tbf ${SHAPE_MBIT} Mb/s (queue ${QUEUE_KB} KB), CE above ${MARK_MBIT} Mb/s"

conf() {  # conf NODE LCORE IP ALGORITHM
  cat >"$WORK/uroced-$1.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=$P-$1 --log-level=*:notice
[daemon]
socket = $WORK/uroced-$1.sock
workers = $2
idle_sleep_us = 50
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
  conf r 1 10.79.0.3 "$1"
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

# run ALGORITHM: both bulk transfers at once; sets DROPS, RETX, MARKS, and per sender CUTS_i,
# CNPR_i; R's CE_SEEN and CNP_SENT (summed over its two QPs).
run() {
  local alg=$1 i d rv qa qb
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
    : >"$rv/release"
  done
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
  if [ -n "${UROCE_ECN_DEBUG:-}" ]; then
    ip -n "$NS_M" -s link; ip netns exec "$NS_M" tc -s qdisc show dev "$MR"; ip netns exec "$NS_M" nft list ruleset
    for d in $NODES; do ip -n "$P-$d" -s link; timeout 30 "$STAT" -s "$WORK/uroced-$d.sock" | grep -E "^port|^engine" | grep -v " 0$"; done
  fi
  DROPS=$(shaper_drops)
  MARKS=$(($(marks) - marks0))
  echo "  $alg: CE marks $MARKS, shaper drops $DROPS, largest queue sampled $QMAX B, sender retransmits $RETX," \
    "R: ce_seen $CE_SEEN cnp_sent $CNP_SENT"
  for d in $NODES; do kill -0 "$(eval echo "\$PID_${d^^}")" 2>/dev/null || fail "$alg: uroced $d died"; done
  stop_daemons
}

# --- run 1: DCQCN
run dcqcn
D_DROPS=$DROPS
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
[ "${DROPS:-999999}" -le "$DROP_MAX" ] && pass "dcqcn: the shaper dropped $DROPS frames (<= $DROP_MAX)" ||
  fail "dcqcn: the shaper dropped '$DROPS' frames, expected <= $DROP_MAX"
D_RETX=$RETX

# --- run 2: none, the same traffic
run none
[ "$MARKS" -gt 0 ] && [ "$CNP_SENT" -gt 0 ] &&
  pass "none: $MARKS frames marked, R sent $CNP_SENT CNPs (ignored by the senders)" ||
  fail "none: marks $MARKS cnp_sent $CNP_SENT, expected > 0"
[ "${DROPS:-0}" -gt "$DROP_MAX" ] && [ "${DROPS:-0}" -gt $((CONTRAST * D_DROPS)) ] &&
  pass "none: the shaper dropped $DROPS frames (dcqcn: $D_DROPS)" ||
  fail "none: the shaper dropped '$DROPS' frames, expected > $DROP_MAX and > $CONTRAST x $D_DROPS"
# Rewinds are not compared: a go-back-N episode resends a window whatever its cause, and on a
# loaded machine a starved daemon adds timeouts to either run.
[ "$RETX" -gt 0 ] && pass "none: the senders went back $RETX times (dcqcn: $D_RETX)" ||
  fail "none: no go-back-N after $DROPS drops"

echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
