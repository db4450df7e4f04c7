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
# UROCE_SOAK_SECONDS, if set, overrides SECONDS: the 10-minute run from meson is
#   UROCE_SOAK_SECONDS=600 meson test -C build --suite soak --timeout-multiplier 3
set -uo pipefail

UROCED=${1:?usage: $0 UROCED UROCE_STAT SOAK_APP [SECONDS] [NQP]}
STAT=${2:?}
APP=${3:?}
SECS=${UROCE_SOAK_SECONDS:-${4:-60}}  # the 10-minute run: UROCE_SOAK_SECONDS=600
NQP=${5:-64}
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
need_root "network namespaces, veths, nftables, tc"
need_tools ip nft tc timeout

WORK=$(mktemp -d /tmp/uroce-soak-XXXXXX)
PID_MON=""
pass() { echo "ok: [${SECONDS}s] $*"; }
netns_cleanup_hook() { [ -n "$PID_MON" ] && kill "$PID_MON" 2>/dev/null; }

# shellcheck source=netns_pair.sh
. "$(dirname "$0")/netns_pair.sh"
netns_pair soak us
XA=us$$xa YA=us$$ya XB=us$$xb YB=us$$yb  # the detours
ip -n "$NS_M" link add "$XA" type veth peer name "$YA" || { echo "FAIL: veth"; exit 1; }
ip -n "$NS_M" link add "$XB" type veth peer name "$YB" || { echo "FAIL: veth"; exit 1; }
netns_link "$XA" "$YA" "$XB" "$YB"
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

netns_conf a "$VA" 10.79.0.1 "workers = 0"
netns_conf b "$VB" 10.79.0.2 "workers = 1"
netns_start_daemons
pass "two uroced on af_packet behind a lossy, duplicating, reordering path (pids $PID_A, $PID_B)"

stat() { netns_stat "$@"; }
sample() {  # sample PID -> "RSS_KB FDS"
  local rss
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
  echo "${rss:-0} $(ls "/proc/$1/fd" 2>/dev/null | wc -l)"
}

timeout $((SECS + 300)) "$APP" "$WORK/uroced-a.sock" "$WORK/uroced-b.sock" "$SECS" "$NQP" "$$" \
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
