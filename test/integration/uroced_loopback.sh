#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Integration test: same-port loopback (doc/uroced.md). ONE uroced whose only port is
# net_null with no-rx=1: every frame that leaves the port is lost and nothing ever comes in,
# so whatever works here went through the loopback path (a frame to the port's own MAC is
# handed back to the receive path instead of being sent).
#   1. verbs_app run SOCK SOCK: two contexts on the same daemon, RC SEND / WRITE / READ /
#      atomics, UD SEND, UC WRITE, SRQ, events, corrupt WQEs (data checked).
#   2. verbs_app requester / responder: two app processes on the same daemon (RC WRITE, READ,
#      SEND, data checked on both sides).
#   3. uroce-stat: port.p0.tx_loopback counts the traffic, port.p0.tx_packets only the start-up
#      announcements, nothing dropped; SIGTERM exits 0.
# Needs root (as the other integration tests). Bounded waits; processes stopped by PID.
# Usage: uroced_loopback.sh PATH/TO/uroced PATH/TO/uroce-stat PATH/TO/verbs_app
set -uo pipefail

UROCED=${1:?usage: $0 UROCED UROCE_STAT VERBS_APP}
STAT=${2:?usage: $0 UROCED UROCE_STAT VERBS_APP}
APP=${3:?usage: $0 UROCED UROCE_STAT VERBS_APP}
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
need_root "like the other integration tests"

ID=$$
WORK=$(mktemp -d /tmp/uroce-loopback-XXXXXX)
PREFIX=uroce-loopback-$ID
PID_D="" PID_R="" PID_W=""
cleanup() {
  [ -n "$PID_W" ] && kill "$PID_W" 2>/dev/null
  [ -n "$PID_R" ] && stop_pid "$PID_R" KILL >/dev/null 2>&1
  [ -n "$PID_D" ] && stop_pid "$PID_D" TERM >/dev/null 2>&1
  rm -rf "/var/run/dpdk/$PREFIX"
  [ "$FAILS" -ne 0 ] && { echo "--- uroced log"; tail -40 "$WORK/uroced.log" 2>/dev/null; }
  rm -rf "$WORK"
}
trap cleanup EXIT

SOCK=$WORK/uroced.sock
cat >"$WORK/uroced.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=$PREFIX --log-level=*:notice
[daemon]
socket = $SOCK
workers = 0
mbufs = 4095
idle_sleep_us = 50
[port p0]
device = net_null0,no-rx=1
ipv4 = 10.80.0.1/24
EOF
start_uroced "$UROCED" "$WORK/uroced.conf" "$WORK/uroced.log"; rc=$?
PID_D=$UROCED_PID
[ $rc -eq 0 ] || { fail "uroced did not come up: $(tail -5 "$WORK/uroced.log")"; exit 1; }
pass "uroced on net_null (no-rx: nothing sent comes back through the port), pid $PID_D"
# Its idle naps must not overrun by Linux's default 50 us timer slack (apps/uroced/main.cc).
slack=$(cat "/proc/$PID_D/timerslack_ns" 2>/dev/null)
[ "$slack" = 1000 ] && pass "uroced's timer slack is 1 us" || fail "uroced's timer slack is '$slack' ns, not 1000"

stat() {  # stat KEY -> value (empty if absent)
  timeout 30 "$STAT" -s "$SOCK" "$1" 2>/dev/null | awk -v k="$1" '$1 == k { print $2 }'
}

# --- 1. both contexts on the one daemon
verbs_app_run "$APP" "$SOCK" "$SOCK" "verbs_app run with both ends on one uroced: every operation"

# --- 2. two app processes on the one daemon, watched by uroce-stat --watch
timeout 300 "$STAT" -s "$SOCK" --watch 0.2 --count 1500 port.p0.tx_loopback >"$WORK/watch.log" 2>&1 &
PID_W=$!
blocks() { grep -c '^# t=' "$WORK/watch.log" 2>/dev/null; }
wait_blocks() {  # wait_blocks N: until the watch printed N blocks (at most 60 s)
  for _ in $(seq 600); do [ "$(blocks)" -ge "$1" ] && return 0; sleep 0.1; done
  return 1
}
wait_blocks 1 || fail "uroce-stat --watch printed nothing in 60 s"
mkdir "$WORK/rv"
timeout 300 "$APP" responder "$SOCK" "$WORK/rv" >"$WORK/responder.log" 2>&1 &
PID_R=$!
timeout 300 "$APP" requester "$SOCK" "$WORK/rv" >"$WORK/requester.log" 2>&1; rc_q=$?
wait "$PID_R"; rc_r=$?
PID_R=""
if [ $rc_q -eq 0 ] && [ $rc_r -eq 0 ]; then
  pass "two app processes on one uroced: RC WRITE, READ, SEND (data checked on both sides)"
else
  fail "two app processes: requester exit $rc_q, responder exit $rc_r"
  sed 's/^/  requester: /' "$WORK/requester.log"; sed 's/^/  responder: /' "$WORK/responder.log"
fi

# Two more blocks: one of them is sampled after the apps' traffic, so some rate is not 0.
wait_blocks $(($(blocks) + 2)) || fail "uroce-stat --watch stopped printing"
kill "$PID_W" 2>/dev/null; wait "$PID_W" 2>/dev/null
PID_W=""
# Every block: "# t=T s interval D s", then "port.p0.tx_loopback VALUE RATE/s" with RATE the
# change since the previous block over D (the interval is printed to the ms: 2 % + 2 slack).
if awk '
  /^# t=/ { dt = $5; blocks++; next }
  $1 == "port.p0.tx_loopback" {
    sub("/s$", "", $3); v = $2 + 0; r = $3 + 0
    if (seen) { want = (v - last) / dt; d = r - want; if (d < 0) d = -d
                if (d > 2 + want * 0.02) { print "bad rate", r, "want", want; bad = 1 }
                if (r > 0) moving++ }
    else if (r != 0) { print "first block rate", r; bad = 1 }
    last = v; seen = 1; next }
  NF == 3 && $3 ~ /^-?[0-9]+\/s$/ { next }  # the other port.p0.tx_loopback* counters
  { print "unexpected line:", $0; bad = 1 }
  END { if (blocks < 2 || !moving || bad) { print blocks, "blocks,", moving + 0, "moving"; exit 1 } }
' "$WORK/watch.log" >"$WORK/watch.check"; then
  pass "uroce-stat --watch: $(grep -c '^# t=' "$WORK/watch.log") blocks, every rate = change / interval"
else
  fail "uroce-stat --watch: $(cat "$WORK/watch.check")"
  head -20 "$WORK/watch.log" | sed 's/^/  watch: /'
fi

# --- 3. counters: the 100000-byte WRITE alone is 98 packets and the 50000-byte READ response
# 49 (path MTU 1024), each looped back; the port itself sent only the announcements.
lb=$(stat port.p0.tx_loopback)
[ "${lb:-0}" -ge 147 ] && pass "port.p0.tx_loopback=$lb (>= 147)" || fail "port.p0.tx_loopback='$lb', expected >= 147"
ann=$(sed -n 's/.*announced \([0-9]*\) address.*/\1/p' "$WORK/uroced.log")
tx=$(stat port.p0.tx_packets)
[ -n "$ann" ] && [ "$tx" = "$ann" ] && pass "port.p0.tx_packets=$tx (the $ann announcements only)" \
  || fail "port.p0.tx_packets='$tx', expected the $ann announcements only"
for k in port.p0.tx_loopback_dropped port.p0.tx_dropped; do
  v=$(stat $k)
  [ "${v:-0}" = 0 ] || fail "$k = '$v', expected 0"
done
rr=$(stat port.p0.rx_roce)
[ "${rr:-0}" = "$lb" ] && pass "port.p0.rx_roce=$rr: every looped-back frame reached the engine" \
  || fail "port.p0.rx_roce='$rr', tx_loopback='$lb'"
for k in daemon.qps daemon.mrs daemon.cqs daemon.pds; do
  v=$(stat $k); [ "$v" = 0 ] || fail "$k = '$v' after the apps closed everything"
done

# --- 4. the same counters through DPDK telemetry (Debian's dpdk-telemetry.py, /uroce/...)
if command -v dpdk-telemetry.py >/dev/null; then
  printf '/uroce/ports\n/uroce/port,p0\n/uroce/daemon\n/uroce/qp\n/uroce/port,nope\n' |
    timeout 60 dpdk-telemetry.py -f "$PREFIX" >"$WORK/telemetry.log" 2>&1
  if python3 - "$WORK/telemetry.log" "$lb" <<'PY'
import json, sys
replies = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        k = next(iter(r))
        replies.setdefault(k, []).append(r[k])
want_lb = int(sys.argv[2])
port = replies["/uroce/port"]
assert replies["/uroce/ports"] == [["p0"]], replies["/uroce/ports"]
assert port[0]["tx_loopback"] == want_lb, (port[0]["tx_loopback"], want_lb)
assert port[0]["rx_roce"] == want_lb, port[0]["rx_roce"]
assert port[1] is None, port[1]  # an unknown port: an error reply
assert replies["/uroce/daemon"][0]["qps"] == 0
assert replies["/uroce/qp"] == [None]  # /uroce/qp needs a QP number
PY
  then
    pass "dpdk-telemetry.py: /uroce/ports, /uroce/port,p0 (tx_loopback=$lb), /uroce/daemon, errors"
  else
    fail "dpdk-telemetry.py /uroce/... replies"
    sed 's/^/  telemetry: /' "$WORK/telemetry.log"
  fi
else
  fail "dpdk-telemetry.py not found (scripts/install-deps.sh installs dpdk-dev)"
fi

stop_pid "$PID_D" TERM; rc=$?
PID_D=""
if [ $rc -eq 0 ] && grep -q "uroced: stopped" "$WORK/uroced.log"; then
  pass "uroced: SIGTERM, exit 0"
else
  fail "uroced: exit $rc"
fi
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
