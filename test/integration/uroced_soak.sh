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
# The daemons run at nice -5, the app at +10 (UROCE_SOAK_DAEMON_NICE / _APP_NICE); the QPs use
# timeout 17 (UROCE_SOAK_TIMEOUT): a starved responder daemon fails WRs with RETRY_EXC_ERR.
# Checked: soak_app exits 0 with "0 failure(s)" (no lost, duplicated or unexpected completion,
# no data error, every opcode done, UD intact); both daemons alive and answering uroce-stat,
# daemon.qps 0 after the app; the nft counters show drops, duplicates and detours in both
# directions; the retransmit / duplicate counters of the daemons show recovery happened; the
# RSS (VmRSS) and the fd count of each uroced, sampled every 5 s, stay within +-5 % of their
# value at the end of the warm-up (the first third of the run, at least 20 s).
# Self-diagnosing (issue 19's stall): at the app's first FAIL line the monitor saves every
# counter of both daemons (uroce-stat) in DIAG; soak_app prints "slow pair N: qpn A X B Y ..."
# when a pair made no progress for 15 s; the monitor then dumps both QPs' counters and state
# (uroce-stat qp.X. / qp.Y.: PSNs, queue indices, timers, tokens) and the engines' counters,
# twice 10 s apart (at most 4 pairs), into DIAG (UROCE_SOAK_DIAG, default
# /tmp/uroce-soak-diag-PID, made only then and kept). With UROCE_SOAK_PCAP=DIR both uroced
# capture every frame (daemon.pcap) into a directory made in DIR and removed at exit; after a
# slow pair, DIAG keeps each capture's frames of the slow pairs' QPs from 20 s before the first
# report on (editcap, tshark). DIR should be a tmpfs (/dev/shm: about 1.1 GB per daemon and
# 200 s of soak): the capture is written on the poll loop, and a busy disk blocks it long
# enough to fail the soak by itself (doc/security.md, Soak).
# UROCE_SOAK_PAUSE_MS=MS (off by default): every 2 s, uroced A is stopped (SIGSTOP) for MS
# milliseconds and continued, as a daemon descheduled on a loaded machine is (issue 19's stall
# needed a pause longer than the QPs' 134-ms local ACK timeout right after a 16-packet burst).
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
PID_MON="" PID_DIAG=""
pass() { echo "ok: [${SECONDS}s] $*"; }
netns_cleanup_hook() {
  [ -n "$PID_MON" ] && kill "$PID_MON" 2>/dev/null
  [ -n "$PID_DIAG" ] && kill "$PID_DIAG" 2>/dev/null
  [ -n "${PID_STARVE:-}" ] && kill "$PID_STARVE" 2>/dev/null
  [ -n "${PID_PAUSE:-}" ] && kill "$PID_PAUSE" 2>/dev/null && kill -CONT "$PID_A" 2>/dev/null
  [ -n "${CAP:-}" ] && [ -z "${UROCE_SOAK_KEEP_PCAP:-}" ] && rm -rf "$CAP"
  return 0
}

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

DIAG=${UROCE_SOAK_DIAG:-/tmp/uroce-soak-diag-$$}
CAP=""
if [ -n "${UROCE_SOAK_PCAP:-}" ]; then
  need_tools tshark editcap
  CAP=$(mktemp -d "$UROCE_SOAK_PCAP/uroce-soak-pcap-XXXXXX") || { echo "FAIL: mktemp in $UROCE_SOAK_PCAP"; exit 1; }
  netns_conf a "$VA" 10.79.0.1 "workers = 0" "pcap = $CAP/a.pcap"
  netns_conf b "$VB" 10.79.0.2 "workers = 1" "pcap = $CAP/b.pcap"
else
  netns_conf a "$VA" 10.79.0.1 "workers = 0"
  netns_conf b "$VB" 10.79.0.2 "workers = 1"
fi
netns_start_daemons
# Every thread of both daemons at nice -5 and the app at +10, as two_uroced.sh and cm_ipv6 run
# theirs: on the two shared cores, daemons at nice 0 among a dozen other jobs were seen runnable
# but not scheduled for up to 1.7 s, longer than the QPs' retry budget (doc/security.md, Soak).
DAEMON_NICE=${UROCE_SOAK_DAEMON_NICE:--5}
for t in /proc/"$PID_A"/task/* /proc/"$PID_B"/task/*; do renice -n "$DAEMON_NICE" -p "${t##*/}" >/dev/null; done
pass "two uroced on af_packet behind a lossy, duplicating, reordering path (pids $PID_A, $PID_B, nice $DAEMON_NICE)"

stat() { netns_stat "$@"; }
sample() {  # sample PID -> "RSS_KB FDS"
  local rss
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
  echo "${rss:-0} $(ls "/proc/$1/fd" 2>/dev/null | wc -l)"
}

timeout $((SECS + 300)) nice -n "${UROCE_SOAK_APP_NICE:-10}" "$APP" "$WORK/uroced-a.sock" "$WORK/uroced-b.sock" "$SECS" "$NQP" "$$" \
  >"$WORK/app.log" 2>&1 &
PID_APP=$!
T0=$SECONDS
# diagnose: at the app's first FAIL line, every counter of both daemons (DIAG/first-fail.*);
# for each new "slow pair" line of the app, the two QPs' state now and 10 s later.
diagnose() {
  local line n qa qb k
  if [ ! -e "$DIAG/first-fail.a" ] && grep -q '^FAIL' "$WORK/app.log"; then
    mkdir -p "$DIAG"
    grep -m1 '^FAIL' "$WORK/app.log" >"$DIAG/first-fail"
    date -u +%s >"$DIAG/first-fail.time"
    for k in a b; do timeout 30 "$STAT" -s "$WORK/uroced-$k.sock" >"$DIAG/first-fail.$k" 2>&1; done
    echo "  diag: first failure: every counter of both daemons in $DIAG/first-fail.a and .b"
  fi
  while read -r line; do
    n=$(sed -E 's/^slow pair ([0-9]+):.*/\1/' <<<"$line")
    [ -e "$DIAG/pair-$n.1" ] && continue
    [ "$(cat "$DIAG"/pair-*.1 2>/dev/null | grep -c '^# A ')" -ge 4 ] && break  # 4 pairs: enough
    qa=$(sed -E 's/.*qpn A ([0-9]+) B.*/\1/' <<<"$line")
    qb=$(sed -E 's/.*qpn A [0-9]+ B ([0-9]+).*/\1/' <<<"$line")
    mkdir -p "$DIAG"
    echo "$(date -u +%s) $n $qa $qb" >>"$DIAG/slow"
    for k in 1 2; do
      {
        echo "# $(date -u +%T) $line"
        echo "# A (requester side) qp.$qa.*"
        timeout 30 "$STAT" -s "$WORK/uroced-a.sock" "qp.$qa."
        echo "# B (responder side) qp.$qb.*"
        timeout 30 "$STAT" -s "$WORK/uroced-b.sock" "qp.$qb."
        echo "# A engine / worker"
        timeout 30 "$STAT" -s "$WORK/uroced-a.sock" engine. worker.
        echo "# B engine / worker"
        timeout 30 "$STAT" -s "$WORK/uroced-b.sock" engine. worker.
      } >"$DIAG/pair-$n.$k" 2>&1
      [ $k = 1 ] && sleep 10
    done
    echo "  diag: pair $n slow (QPs $qa / $qb): state in $DIAG/pair-$n.1 and .2"
  done < <(grep '^slow pair' "$WORK/app.log")
}
( while sleep 5; do
    echo "$((SECONDS - T0)) $(sample "$PID_A") $(sample "$PID_B")"
  done >"$WORK/samples" ) &
PID_MON=$!
# Starvation: every 100 ms the run-queue wait of each daemon's polling thread (its main thread,
# /proc/PID/schedstat: ns spent runnable but not running, credited when it next runs); a line
# per wait longer than 100 ms, with the time, into WORK/starved (and DIAG after a failure).
( declare -A last
  while sleep 0.1; do
    for k in a b; do
      [ $k = a ] && p=$PID_A || p=$PID_B
      read -r _ w _ <"/proc/$p/schedstat" 2>/dev/null || continue
      if [ -n "${last[$k]:-}" ] && [ $((w - last[$k])) -gt 100000000 ]; then
        echo "$(date +%s.%N | cut -c1-14) $k $(((w - last[$k]) / 1000000))"
      fi
      last[$k]=$w
    done
  done >"$WORK/starved" ) &
PID_STARVE=$!
( while sleep 5; do diagnose; done >>"$WORK/diag.log" 2>&1 ) &
PID_DIAG=$!
PID_PAUSE=""
if [ -n "${UROCE_SOAK_PAUSE_MS:-}" ]; then
  ( while sleep 2; do
      kill -STOP "$PID_A" 2>/dev/null || break
      sleep "$(awk -v ms="$UROCE_SOAK_PAUSE_MS" 'BEGIN { printf "%.3f", ms / 1000 }')"
      kill -CONT "$PID_A"
    done ) &
  PID_PAUSE=$!
fi
wait "$PID_APP"
rc=$?
PID_APP=""
if [ -n "$PID_PAUSE" ]; then
  kill "$PID_PAUSE" 2>/dev/null
  wait "$PID_PAUSE" 2>/dev/null
  kill -CONT "$PID_A" 2>/dev/null
  PID_PAUSE=""
fi
kill "$PID_MON" "$PID_DIAG" "$PID_STARVE" 2>/dev/null
wait "$PID_MON" "$PID_DIAG" "$PID_STARVE" 2>/dev/null
PID_MON="" PID_DIAG="" PID_STARVE=""
sed 's/^/  app: /' "$WORK/app.log"
cat "$WORK/diag.log" 2>/dev/null
# The longest run-queue waits of the daemons' polling threads (the QPs' retry budget: 8 x 134 ms).
for k in a b; do
  echo "  uroced $k: runnable but not running for more than 100 ms $(awk -v k=$k '$2 == k' "$WORK/starved" | wc -l) times, longest $(awk -v k=$k '$2 == k && $3 > m { m = $3 } END { print m + 0 }' "$WORK/starved") ms"
done
if [ -e "$DIAG/first-fail" ]; then
  cp "$WORK/starved" "$DIAG/starved"
  echo "  diag: the daemons' run-queue waits over 100 ms (time, daemon, ms) in $DIAG/starved"
fi
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
# Losses the nft counters do not show: the veths' own drops (a full backlog of the receiving
# CPU, netdev_max_backlog) and the slow detours' htb drops.
for x in "$NS_A $VA" "$NS_B $VB" "$NS_M $MA" "$NS_M $MB" "$NS_M $XA" "$NS_M $YA" "$NS_M $XB" "$NS_M $YB"; do
  read -r ns dev <<<"$x"
  ip -n "$ns" -s link show dev "$dev" 2>/dev/null |
    awk -v d="$dev" '/RX:/ { getline; rx = $4 } /TX:/ { getline; tx = $4 } END { printf "  %s: rx dropped %s, tx dropped %s\n", d, rx, tx }'
done
for x in "$XA" "$XB"; do
  echo "  detour $x: $(ip netns exec "$NS_M" tc -s qdisc show dev "$x" | awk '/Sent/ { sub(/^ +/, ""); print; exit }')"
done

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
# The captures' slices of the slow pairs (the daemons are stopped: the files are complete).
if [ -s "$DIAG/slow" ] && [ -n "$CAP" ]; then
  read -r t0 _ < "$DIAG/slow"
  qps=$(awk '{ printf "%s%s, %s", (NR > 1 ? ", " : ""), $3, $4 }' "$DIAG/slow")
  filter="infiniband.bth.destqp in {$qps}"
  for d in a b; do
    editcap -A "$((t0 - 20))" "$CAP/$d.pcap" "$CAP/$d-late.pcap" &&
      timeout 600 tshark -r "$CAP/$d-late.pcap" -Y "$filter" -w "$DIAG/$d-slow-qps.pcap" ||
      echo "  diag: no slice of $d.pcap (editcap / tshark failed)"
    rm -f "$CAP/$d-late.pcap"
  done
  ls -l "$DIAG" | sed 's/^/  diag: /'
fi
# The captures' slices of the QPs whose WRs failed (the FAIL lines name both QPNs), from 30 s
# before the monitor saw the first failure to 5 s after.
if [ -s "$DIAG/first-fail.time" ] && [ -n "$CAP" ]; then
  t0=$(cat "$DIAG/first-fail.time")
  qps=$(sed -nE 's/^FAIL.*unexpected completion qp ([0-9]+) .*\(B qp ([0-9]+)\).*/\1 \2/p' \
    "$WORK/app.log" | tr ' ' '\n' | grep -v '^0$' | sort -un | paste -sd, -)
  if [ -n "$qps" ]; then
    for d in a b; do
      editcap -A "$((t0 - 30))" -B "$((t0 + 5))" "$CAP/$d.pcap" "$CAP/$d-fail.pcap" &&
        timeout 600 tshark -r "$CAP/$d-fail.pcap" -Y "infiniband.bth.destqp in {$qps}" \
          -w "$DIAG/$d-failed-qps.pcap" ||
        echo "  diag: no slice of $d.pcap (editcap / tshark failed)"
      rm -f "$CAP/$d-fail.pcap"
    done
    echo "  diag: frames of the failed QPs ($qps) around the first failure in $DIAG/{a,b}-failed-qps.pcap"
  fi
fi
[ -n "$CAP" ] && [ -n "${UROCE_SOAK_KEEP_PCAP:-}" ] && echo "  diag: whole captures kept in $CAP"
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
