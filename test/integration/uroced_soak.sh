#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Soak (issue 19, doc/security.md "Soak"): two uroced on af_packet behind a path that loses,
# duplicates and reorders frames; soak_app runs NQP RC pairs (every opcode, data verified
# continuously) and a UD pair for SECONDS; the daemons' RSS and open fds must stay flat.
#
#   uroce-soak-PID-a / -b: uroced A (10.79.0.1, lcore 0) / B (10.79.0.2, lcore 1) on
#                          net_af_packet over veths us<PID>a / us<PID>b.
#   uroce-soak-PID-m:      the path (nftables, netdev ingress), each direction:
#                            1 % dropped (numgen random mod 100 < 1 drop),
#                            1 % duplicated (dup to the far side),
#                            2 % sent through a detour: a veth pair inside this namespace whose
#                              egress is an htb class of 10 Mbit/s, so they arrive late
#                              (reordered behind the frames that took the direct path),
#                            the rest forwarded straight (fwd to).
# Checked: soak_app exits 0 with "0 failure(s)" (no lost, duplicated or unexpected completion,
# no data error, every opcode done, UD intact); both daemons alive and answering uroce-stat,
# daemon.qps 0 after the app; the nft counters show drops, duplicates and detours in both
# directions; the retransmit / duplicate counters of the daemons show recovery happened; the
# RSS (VmRSS) and the fd count of each uroced, sampled every 5 s, stay within +-5 % of their
# value at the end of the warm-up (the first third of the run, at least 20 s).
# Needs root and nft. Every wait is bounded; everything it creates is removed on exit.
# Usage: uroced_soak.sh UROCED UROCE_STAT SOAK_APP [SECONDS (60)] [NQP (64)]
set -uo pipefail

UROCED=${1:?usage: $0 UROCED UROCE_STAT SOAK_APP [SECONDS] [NQP]}
STAT=${2:?}
APP=${3:?}
SECS=${4:-60}
NQP=${5:-64}
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
need_root "network namespaces, veths, nftables, tc"
need_tools ip nft tc timeout

ID=$$
NS_A=uroce-soak-$ID-a
NS_B=uroce-soak-$ID-b
NS_M=uroce-soak-$ID-m
VA=us${ID}a MA=us${ID}ma VB=us${ID}b MB=us${ID}mb
XA=us${ID}xa YA=us${ID}ya XB=us${ID}xb YB=us${ID}yb  # the detours
WORK=$(mktemp -d /tmp/uroce-soak-XXXXXX)
PID_A="" PID_B="" PID_APP="" PID_MON=""
pass() { echo "ok: [${SECONDS}s] $*"; }

cleanup() {
  [ -n "$PID_MON" ] && kill "$PID_MON" 2>/dev/null
  [ -n "$PID_APP" ] && stop_pid "$PID_APP" KILL >/dev/null 2>&1
  [ -n "$PID_A" ] && stop_pid "$PID_A" TERM >/dev/null 2>&1
  [ -n "$PID_B" ] && stop_pid "$PID_B" TERM >/dev/null 2>&1
  for ns in "$NS_A" "$NS_B" "$NS_M"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "/var/run/dpdk/uroce-soak-$ID-a" "/var/run/dpdk/uroce-soak-$ID-b"
  if [ "$FAILS" -ne 0 ]; then
    for d in a b; do echo "--- uroced $d log"; tail -30 "$WORK/uroced-$d.log" 2>/dev/null; done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

for ns in "$NS_A" "$NS_B" "$NS_M"; do ip netns add "$ns" || { echo "FAIL: ip netns add $ns"; exit 1; }; done
ip link add "$VA" netns "$NS_A" type veth peer name "$MA" netns "$NS_M" || { echo "FAIL: veth"; exit 1; }
ip link add "$VB" netns "$NS_B" type veth peer name "$MB" netns "$NS_M" || { echo "FAIL: veth"; exit 1; }
ip -n "$NS_M" link add "$XA" type veth peer name "$YA" || { echo "FAIL: veth"; exit 1; }
ip -n "$NS_M" link add "$XB" type veth peer name "$YB" || { echo "FAIL: veth"; exit 1; }
for x in "$NS_A $VA" "$NS_B $VB" "$NS_M $MA" "$NS_M $MB" "$NS_M $XA" "$NS_M $YA" "$NS_M $XB" "$NS_M $YB"; do
  read -r ns dev <<<"$x"
  ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1"
  ip -n "$ns" link set "$dev" up
done
for x in "$XA" "$XB"; do  # the slow path: one htb class of 10 Mbit/s
  ip netns exec "$NS_M" tc qdisc add dev "$x" root handle 1: htb default 10 &&
    ip netns exec "$NS_M" tc class add dev "$x" parent 1: classid 1:10 htb rate 10mbit ||
    { echo "FAIL: tc htb on $x"; exit 1; }
done
ip netns exec "$NS_M" nft -f - <<EOF || { echo "FAIL: nft rules (netdev ingress, numgen, dup, fwd)"; exit 1; }
table netdev uroce_soak {
  chain a_to_b {
    type filter hook ingress device "$MA" priority 0;
    numgen random mod 100 < 1 counter drop
    numgen random mod 100 < 1 counter dup to "$MB"
    numgen random mod 100 < 2 counter fwd to "$XA"
    fwd to "$MB"
  }
  chain a_to_b_late {
    type filter hook ingress device "$YA" priority 0;
    fwd to "$MB"
  }
  chain b_to_a {
    type filter hook ingress device "$MB" priority 0;
    numgen random mod 100 < 1 counter drop
    numgen random mod 100 < 1 counter dup to "$MA"
    numgen random mod 100 < 2 counter fwd to "$XB"
    fwd to "$MA"
  }
  chain b_to_a_late {
    type filter hook ingress device "$YB" priority 0;
    fwd to "$MA"
  }
}
EOF
nft_counts() {  # nft_counts CHAIN: "DROPPED DUPLICATED DETOURED"
  ip netns exec "$NS_M" nft list chain netdev uroce_soak "$1" |
    awk '/counter/ { n = $0; sub(/.*packets /, "", n); sub(/ .*/, "", n);
                     if ($0 ~ / drop/) d = n; else if ($0 ~ / dup /) u = n; else if ($0 ~ /fwd/) f = n }
         END { print d + 0, u + 0, f + 0 }'
}

conf() {  # conf NAME LCORE IFACE IP
  cat >"$WORK/uroced-$1.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-soak-$ID-$1 --log-level=*:notice
[daemon]
socket = $WORK/uroced-$1.sock
workers = $2
idle_sleep_us = 50
[port p0]
device = net_af_packet0,iface=$3,framecnt=2048
ipv4 = $4/24
EOF
}
conf a 0 "$VA" 10.79.0.1
conf b 1 "$VB" 10.79.0.2
ip netns exec "$NS_A" env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/uroced-a.conf" \
  >"$WORK/uroced-a.log" 2>&1 &
PID_A=$!
ip netns exec "$NS_B" env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/uroced-b.conf" \
  >"$WORK/uroced-b.log" 2>&1 &
PID_B=$!
for _ in $(seq 1200); do
  grep -q "uroced: running" "$WORK/uroced-a.log" && grep -q "uroced: running" "$WORK/uroced-b.log" && break
  kill -0 "$PID_A" 2>/dev/null && kill -0 "$PID_B" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q "uroced: running" "$WORK/uroced-a.log" || ! grep -q "uroced: running" "$WORK/uroced-b.log"; then
  fail "the daemons did not come up within 120 s"
  exit 1
fi
pass "two uroced on af_packet behind a lossy, duplicating, reordering path (pids $PID_A, $PID_B)"

stat() {  # stat NAME KEY -> value (empty if absent)
  timeout 30 "$STAT" -s "$WORK/uroced-$1.sock" "$2" 2>/dev/null | awk -v k="$2" '$1 == k { print $2 }'
}
sample() {  # sample PID -> "RSS_KB FDS"
  local rss
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
  echo "${rss:-0} $(ls "/proc/$1/fd" 2>/dev/null | wc -l)"
}

timeout $((SECS + 300)) "$APP" "$WORK/uroced-a.sock" "$WORK/uroced-b.sock" "$SECS" "$NQP" "$ID" \
  >"$WORK/app.log" 2>&1 &
PID_APP=$!
T0=$SECONDS
( while sleep 5; do
    echo "$((SECONDS - T0)) $(sample "$PID_A") $(sample "$PID_B")"
  done >"$WORK/samples" ) &
PID_MON=$!
wait "$PID_APP"
rc=$?
PID_APP=""
kill "$PID_MON" 2>/dev/null
wait "$PID_MON" 2>/dev/null
PID_MON=""
sed 's/^/  app: /' "$WORK/app.log"
if [ $rc -eq 0 ] && grep -q "^0 failure(s)" "$WORK/app.log"; then
  pass "$NQP RC pairs with every opcode + UD for $SECS s: no lost / duplicated completion, no data error"
else
  fail "soak_app exit $rc"
fi

for c in a_to_b b_to_a; do
  read -r d u f < <(nft_counts $c)
  [ "${d:-0}" -gt 0 ] && [ "${u:-0}" -gt 0 ] && [ "${f:-0}" -gt 0 ] &&
    pass "$c: the path dropped $d, duplicated $u and delayed $f frames" ||
    fail "$c: nft counters drop '$d' dup '$u' detour '$f'"
done
kill -0 "$PID_A" 2>/dev/null && kill -0 "$PID_B" 2>/dev/null || fail "a daemon died"
for d in a b; do
  v=$(stat $d daemon.qps)
  [ "$v" = 0 ] && pass "daemon $d answers, no QP left" || fail "daemon $d: daemon.qps = '$v'"
done
echo "  B engine.drop.duplicate=$(stat b engine.drop.duplicate) A engine.drop.sequence=$(stat a engine.drop.sequence)"

# Memory and fds: flat after the warm-up (samples taken while soak_app ran).
warm=$(( SECS / 3 < 20 ? 20 : SECS / 3 ))
echo "  samples (t RSS_A_kB FDS_A RSS_B_kB FDS_B):"
sed 's/^/    /' "$WORK/samples"
awk -v warm="$warm" '
  $1 >= warm && n == 0 { for (i = 2; i <= 5; i++) base[i] = $i; n = 1; next }
  n {
    for (i = 2; i <= 5; i++) {
      d = base[i] ? ($i - base[i]) / base[i] : 0; if (d < 0) d = -d
      if (d > worst[i]) worst[i] = d
    }
    n++
  }
  END {
    if (n < 2) { print "FEW"; exit }
    split("rss_a fds_a rss_b fds_b", name, " ")
    for (i = 2; i <= 5; i++) printf "%s %.4f %d\n", name[i - 1], worst[i], base[i]
  }' "$WORK/samples" >"$WORK/flat"
if grep -q FEW "$WORK/flat"; then
  fail "too few samples after the warm-up ($warm s)"
else
  while read -r what worst base; do
    pct=$(awk -v w="$worst" 'BEGIN { printf "%.1f", w * 100 }')
    if awk -v w="$worst" 'BEGIN { exit !(w <= 0.05) }'; then
      pass "$what flat after ${warm}s: at most $pct % from $base"
    else
      fail "$what moved $pct % from $base after the warm-up"
    fi
  done <"$WORK/flat"
fi

for d in a b; do stop_uroced $d 'stopped'; done
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
