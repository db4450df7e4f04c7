#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# End-to-end test of RX interrupts (issue 17, doc/uroced.md "Sleeping when idle"): two uroced in
# adaptive mode (the default) on net_tap, whose queues have an interrupt fd, in a network
# namespace of their own where a Linux bridge joins the two tap interfaces:
#   1. both daemons start without "RX queue(s) without interrupts" (no nap is configured);
#   2. idle: each daemon sleeps (worker.W.sleeps grows) and never naps (worker.W.naps stays 0):
#      nothing it waits for needs polling;
#   3. traffic (verbs_app run: RC / UC / UD between the two, data checked) after both slept: each
#      daemon learnt of its peer's frames from the RX interrupt (worker.W.wake_rx grows) and still
#      never napped, so no frame waited for a nap's timeout;
#   4. SIGTERM stops both with exit 0.
# Counters only, no wall clock. Needs root and /dev/net/tun; every wait is bounded; the namespace
# (and with it the taps and the bridge) and the DPDK runtime directories are removed on exit.
# Usage: uroced_rx_intr.sh UROCED UROCE_STAT VERBS_APP [WORKERS]
# WORKERS=2: two worker lcores per daemon (net_tap with two queues, each with its interrupt fd).
set -uo pipefail

USAGE="usage: $0 UROCED UROCE_STAT VERBS_APP [WORKERS]"
UROCED=${1:?$USAGE}
STAT=${2:?$USAGE}
APP=${3:?$USAGE}
WORKERS=${4:-1}
case "$WORKERS" in 1|2) ;; *) echo "FAIL: WORKERS must be 1 or 2"; exit 1;; esac
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
need_root "a network namespace with tap interfaces and a bridge"
need_tools ip timeout
[ -c /dev/net/tun ] || { echo "FAIL: /dev/net/tun is absent (net_tap needs it)"; exit 1; }

export UROCE_TEST_ACK_TIMEOUT=16  # as uroced_pair: RC rides out a starved daemon
ID=$$
NS=uroce-rxi-$ID
BR=urib$ID  # interface names stay under 16 characters
WORK=$(mktemp -d /tmp/uroce-rxi-XXXXXX)
PID_A="" PID_B=""

cleanup() {
  [ -n "$PID_A" ] && stop_pid "$PID_A" TERM >/dev/null 2>&1
  [ -n "$PID_B" ] && stop_pid "$PID_B" TERM >/dev/null 2>&1
  ip netns del "$NS" 2>/dev/null
  rm -rf "/var/run/dpdk/uroce-rxi-$ID-a" "/var/run/dpdk/uroce-rxi-$ID-b"
  if [ "$FAILS" -ne 0 ]; then
    for f in a b; do echo "--- uroced $f log"; tail -30 "$WORK/uroced-$f.log" 2>/dev/null; done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

ip netns add "$NS" || { echo "FAIL: ip netns add"; exit 1; }
# No kernel IPv6 on the taps and the bridge: the link stays silent unless the daemons talk.
ip netns exec "$NS" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 net.ipv6.conf.all.disable_ipv6=1
ip -n "$NS" link set lo up
ip -n "$NS" link add "$BR" type bridge || { echo "FAIL: ip link add bridge"; exit 1; }

lcores=0
[ "$WORKERS" = 2 ] && lcores=0,1
conf() {  # conf NAME IP
  cat >"$WORK/uroced-$1.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-rxi-$ID-$1 --log-level=*:notice
[daemon]
socket = $WORK/uroced-$1.sock
workers = $lcores
[port p0]
device = net_tap0,iface=uri$ID$1
mtu = 1500
ipv4 = $2/24
EOF
}
conf a 10.82.0.1
conf b 10.82.0.2
for d in a b; do
  # The tap interface is created in the namespace uroced runs in.
  ip netns exec "$NS" env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/uroced-$d.conf" \
    >"$WORK/uroced-$d.log" 2>&1 &
  eval "PID_${d^^}=$!"
done
for d in a b; do
  pid_var="PID_${d^^}"
  up=0
  for _ in $(seq 600); do
    grep -q "uroced: running" "$WORK/uroced-$d.log" 2>/dev/null && { up=1; break; }
    kill -0 "${!pid_var}" 2>/dev/null || break
    sleep 0.1
  done
  [ $up = 1 ] || { fail "uroced $d did not come up: $(tail -5 "$WORK/uroced-$d.log")"; exit 1; }
done
pass "two uroced on net_tap (pids $PID_A, $PID_B, workers $lcores)"

# --- 1. every RX queue has an interrupt: no nap configured
for d in a b; do
  if grep -q "without interrupts" "$WORK/uroced-$d.log"; then
    fail "uroced $d: $(grep "without interrupts" "$WORK/uroced-$d.log")"
  elif grep -q "uroced: poll adaptive" "$WORK/uroced-$d.log"; then
    pass "uroced $d: adaptive, every RX queue with an interrupt"
  else
    fail "uroced $d: not in adaptive mode: $(grep "uroced: poll" "$WORK/uroced-$d.log")"
  fi
done

# The kernel side of a tap has the port's MAC; a bridge delivers frames for its ports' own MACs
# to the host instead of forwarding them, so the tap interfaces get other MACs first.
ip -n "$NS" link set "uri${ID}a" address 02:00:00:82:00:0a || fail "tap a: cannot set its MAC"
ip -n "$NS" link set "uri${ID}b" address 02:00:00:82:00:0b || fail "tap b: cannot set its MAC"
for d in a b; do
  ip -n "$NS" link set "uri$ID$d" master "$BR" || fail "tap $d: cannot join the bridge"
done
ip -n "$NS" link set "$BR" up

# sum KEY-SUFFIX NAME: the sum of worker.*.SUFFIX over the daemon's workers
sum() {
  timeout 30 "$STAT" -s "$WORK/uroced-$2.sock" 2>/dev/null |
    awk -v s="$1" '$1 ~ "^worker\\.[0-9]+\\." s "$" { t += $2; n++ } END { if (n) print t }'
}

# --- 2. idle: sleeps, no naps
declare -A S0 N0 R0
for d in a b; do
  S0[$d]=$(sum sleeps $d); N0[$d]=$(sum naps $d); R0[$d]=$(sum wake_rx $d)
  [ -n "${S0[$d]}" ] || { fail "uroced $d: no worker.*.sleeps counter"; exit 1; }
done
for d in a b; do
  s=${S0[$d]}
  for _ in $(seq 300); do  # each query wakes main once (control): sleeps grows by >= 1 a query
    s=$(sum sleeps $d)
    [ "$s" -ge $((S0[$d] + 10)) ] && break
    sleep 0.1
  done
  n=$(sum naps $d)
  if [ "$s" -ge $((S0[$d] + 10)) ] && [ "$n" = 0 ]; then
    pass "uroced $d idle: sleeps ${S0[$d]} -> $s, naps 0"
  else
    fail "uroced $d idle: sleeps ${S0[$d]} -> $s, naps $n (expected >= 10 more sleeps, no nap)"
  fi
done

# --- 3. traffic: woken by the RX interrupt, never by a nap
verbs_app_run "$APP" "$WORK/uroced-a.sock" "$WORK/uroced-b.sock" \
  "verbs_app run between the two daemons over the taps"
for d in a b; do
  r=$(sum wake_rx $d); n=$(sum naps $d); rx=$(timeout 30 "$STAT" -s "$WORK/uroced-$d.sock" \
    port.p0.rx_roce 2>/dev/null | awk '$1 == "port.p0.rx_roce" { print $2 }')
  if [ "${r:-0}" -gt "${R0[$d]}" ] && [ "$n" = 0 ] && [ "${rx:-0}" -gt 0 ]; then
    pass "uroced $d: wake_rx ${R0[$d]} -> $r, naps 0, rx_roce $rx"
  else
    fail "uroced $d: wake_rx ${R0[$d]} -> ${r:-?}, naps ${n:-?}, rx_roce ${rx:-?} (expected wake-ups by RX, no nap)"
  fi
done

# --- 4. SIGTERM
stop_uroced a "uroced: stopped"
stop_uroced b "uroced: stopped"

[ "$FAILS" -eq 0 ] && echo "all passed" || { echo "$FAILS failure(s)"; exit 1; }
