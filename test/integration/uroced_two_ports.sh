#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Integration test: one uroced with two ports, each its own verbs device (doc/uroced.md, Ports
# and devices). The two ports are the two ends of one memif link inside the same process
# (p0 memif server, p1 memif client on one memif socket), so every RoCE frame between the
# devices crosses the link between the ports.
#   1. uroced opens one control socket per device: daemon.socket for p0, daemon.socket.uroce1
#      for p1 (the default for a second port).
#   2. verbs_app run SOCK0 SOCK1: an app on device uroce0 and an app on uroce1, RC SEND / WRITE /
#      READ / atomics, UD SEND, UC WRITE, SRQ, events, corrupt WQEs (data checked).
#   3. uroce-stat on each socket: both ports received RoCE frames, nothing dropped, every
#      object closed again.
#   4. With the verbs shim (4th argument: its build directory): ibv_devices lists uroce0 and
#      uroce1 from the two sockets (UROCE_SOCKET=SOCK0:SOCK1).
#   5. SIGTERM: exit 0, both sockets removed.
# Needs root (as the other integration tests). Bounded waits; processes stopped by PID.
# Usage: uroced_two_ports.sh UROCED UROCE_STAT VERBS_APP [SHIM_DIR]
set -uo pipefail

UROCED=${1:?usage: $0 UROCED UROCE_STAT VERBS_APP [SHIM_DIR]}
STAT=${2:?usage: $0 UROCED UROCE_STAT VERBS_APP [SHIM_DIR]}
APP=${3:?usage: $0 UROCED UROCE_STAT VERBS_APP [SHIM_DIR]}
SHIM=${4:-}
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
need_root "like the other integration tests"

ID=$$
WORK=$(mktemp -d /tmp/uroce-2ports-XXXXXX)
PREFIX=uroce-2ports-$ID
PID_D=""
cleanup() {
  [ -n "$PID_D" ] && stop_pid "$PID_D" TERM >/dev/null 2>&1
  rm -rf "/var/run/dpdk/$PREFIX"
  [ "$FAILS" -ne 0 ] && { echo "--- uroced log"; tail -40 "$WORK/uroced.log" 2>/dev/null; }
  rm -rf "$WORK"
}
trap cleanup EXIT

SOCK0=$WORK/uroced.sock
SOCK1=$WORK/uroced.sock.uroce1
cat >"$WORK/uroced.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=$PREFIX --log-level=*:notice
[daemon]
socket = $SOCK0
workers = 0
mbufs = 4095
idle_sleep_us = 50
[port p0]
device = net_memif0,role=server,socket=$WORK/memif.sock,id=0
ipv4 = 10.86.0.1/24
[port p1]
device = net_memif1,role=client,socket=$WORK/memif.sock,id=0
ipv4 = 10.86.0.2/24
EOF
start_uroced "$UROCED" "$WORK/uroced.conf" "$WORK/uroced.log"; rc=$?
PID_D=$UROCED_PID
[ $rc -eq 0 ] || { fail "uroced did not come up: $(tail -5 "$WORK/uroced.log")"; exit 1; }
pass "uroced with two memif ports joined to each other, pid $PID_D"

# --- 1. one control socket per device
if grep -qx "uroced: control socket $SOCK0" "$WORK/uroced.log" &&
   grep -qx "uroced: control socket $SOCK1 (device uroce1, port p1)" "$WORK/uroced.log" &&
   [ -S "$SOCK0" ] && [ -S "$SOCK1" ]; then
  pass "control sockets: $SOCK0 (uroce0), $SOCK1 (uroce1)"
else
  fail "expected control sockets $SOCK0 and $SOCK1: $(grep 'control socket' "$WORK/uroced.log")"
fi

stat() {  # stat SOCK KEY -> value (empty if absent)
  timeout 30 "$STAT" -s "$1" "$2" 2>/dev/null | awk -v k="$2" '$1 == k { print $2 }'
}

# --- 2. an app on each device (verbs_app waits for the path: ARP over the memif link)
verbs_app_run "$APP" "$SOCK0" "$SOCK1" "verbs_app run between device uroce0 (port p0) and uroce1 (port p1): every operation"

# --- 3. counters: the traffic crossed the link both ways, as RoCE, to each port's engine
for p in p0 p1; do
  for s in "$SOCK0" "$SOCK1"; do  # every device reports every port
    v=$(stat "$s" "port.$p.rx_roce")
    [ "${v:-0}" -gt 10 ] || fail "port.$p.rx_roce = '$v' on $s, expected > 10"
  done
  v=$(stat "$SOCK0" "port.$p.drop.roce_no_transport_engine_yet")
  [ -z "$v" ] || fail "port $p dropped $v RoCE frames for lack of an engine"
  v=$(stat "$SOCK0" "port.$p.tx_dropped"); [ "${v:-0}" = 0 ] || fail "port.$p.tx_dropped = '$v'"
done
[ "$FAILS" -eq 0 ] && pass "both ports received RoCE frames, none dropped for lack of an engine"
for s in "$SOCK0" "$SOCK1"; do
  for k in daemon.qps daemon.mrs daemon.cqs daemon.pds; do
    v=$(stat "$s" $k); [ "$v" = 0 ] || fail "$k = '$v' on $s after the apps closed everything"
  done
done

# --- 4. the verbs shim sees two devices
if [ -n "$SHIM" ]; then
  need_tools ibv_devices
  # ibv_devices is not built with ASan: with an ASan-built shim (UROCE_ASAN_RUNTIME, set by
  # meson in sanitized builds) the runtime has to be preloaded into it, without leak checking.
  pre=()
  [ -n "${UROCE_ASAN_RUNTIME:-}" ] && pre=(env LD_PRELOAD="$UROCE_ASAN_RUNTIME" ASAN_OPTIONS=detect_leaks=0)
  out=$(LD_LIBRARY_PATH=$SHIM UROCE_SOCKET=$SOCK0:$SOCK1 timeout 60 "${pre[@]}" ibv_devices 2>&1)
  if grep -q "uroce0" <<<"$out" && grep -q "uroce1" <<<"$out"; then
    pass "ibv_devices through the shim lists uroce0 and uroce1"
  else
    fail "ibv_devices: $out"
  fi
else
  echo "note: no shim directory given (the build has no verbs shim): ibv_devices not run"
fi

stop_pid "$PID_D" TERM; rc=$?
PID_D=""
if [ $rc -eq 0 ] && grep -q "uroced: stopped" "$WORK/uroced.log"; then
  pass "uroced: SIGTERM, exit 0"
else
  fail "uroced: exit $rc"
fi
if [ -e "$SOCK0" ] || [ -e "$SOCK1" ]; then fail "a control socket is left behind"; fi
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
