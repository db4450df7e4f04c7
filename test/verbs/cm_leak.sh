#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Leak test of the connection manager (issue 15): CYCLES connect / disconnect cycles between
# two uroced on net_memif through the drop-in librdmacm, then both daemons must be back where
# they started: their open file descriptors (/proc/PID/fd), app sessions, verbs objects
# (daemon.pds / mrs / cqs / qps / srqs / ahs) and CM state (cm.ids, cm.channels,
# cm.connections, after the time-wait).
#   1. a persistent cmtime server on A; cmtime clients on B, 50 connections each, until CYCLES
#      connections have been set up and torn down (each client a process of its own);
#   2. a persistent rping server (-P) on A; 10 rping clients (-C 1) on B, each a process;
#   3. daemon B (only clients, all gone) is back at its baseline while A's servers still run,
#      and A's CM holds no more ids after the last client than after the first (no growth per
#      connection);
#   4. the servers stopped: both daemons at their baseline.
# CYCLES: default 100; meson's cm_leak runs 1,000 (about 20 s on 2 shared cores).
# Every wait is bounded; every process started is stopped by PID.
# Usage: cm_leak.sh UROCED VERBS_SHIM_DIR RDMACM_SHIM_DIR UROCE_STAT [CYCLES]
set -uo pipefail

USAGE="usage: $0 UROCED VERBS_SHIM_DIR RDMACM_SHIM_DIR UROCE_STAT [CYCLES]"
UROCED=${1:?$USAGE}
SHIM=${2:?$USAGE}
CMSHIM=${3:?$USAGE}
STAT=${4:?$USAGE}
CYCLES=${5:-100}
case $CYCLES in '' | *[!0-9]*) echo "$USAGE"; exit 2 ;; esac
for t in cmtime rping timeout; do
  command -v $t >/dev/null || { echo "FAIL: '$t' not found (scripts/install-deps.sh installs it)"; exit 1; }
done
[ -e "$CMSHIM/librdmacm.so.1" ] || { echo "FAIL: no librdmacm.so.1 in $CMSHIM"; exit 1; }
NAME=cmleak IP_NET=10.88.0
# shellcheck source=two_uroced.sh
. "$(dirname "$0")/two_uroced.sh"
IP_A=$IP_NET.1
PID_R=""
cm_on() {  # cm_on SOCK CMD...
  local sock=$1
  shift
  env LD_LIBRARY_PATH="$CMSHIM:$SHIM" UROCE_SOCKET="$sock" nice -n "${APP_NICE:-10}" "$@"
}
stop_app() {  # stop_app PID: the app under cm_on's env / nice / timeout, by PID
  local p
  for p in $(pgrep -P "$1") "$1"; do
    for c in $(pgrep -P "$p"); do kill -TERM "$c" 2>/dev/null; done
    kill -TERM "$p" 2>/dev/null
  done
  wait "$1" 2>/dev/null
}
# two_uroced.sh's EXIT trap stops the daemons (and PID_S); the rping server first.
OLD_TRAP=$(trap -p EXIT | sed "s/^trap -- '//; s/' EXIT\$//")
trap '[ -n "$PID_R" ] && stop_app "$PID_R"; '"$OLD_TRAP" EXIT

# state N: one line of what must come back, for daemon N (a or b)
state() {
  local pid sock out
  pid=PID_${1^^} sock=SOCK_${1^^}
  out=$(env -u LD_LIBRARY_PATH "$STAT" -s "${!sock}" daemon. cm. 2>&1)
  printf 'fds %s ' "$(ls "/proc/${!pid}/fd" | wc -l)"
  awk '$1 ~ /^daemon\.(sessions|pds|mrs|cqs|qps|srqs|ahs)$/ || $1 ~ /^cm\.(ids|channels|connections)$/ {printf "%s %s ", $1, $2}' <<<"$out"
}
# back_to N BASELINE: waits (bounded, 30 s: the time-wait is 1 s) for daemon N's state
back_to() {
  local now=""
  for _ in $(seq 150); do
    now=$(state "$1")
    [ "$now" = "$2" ] && return 0
    sleep 0.2
  done
  echo "daemon $1: baseline: $2"
  echo "daemon $1: now:      $now"
  return 1
}
BASE_A=$(state a) BASE_B=$(state b)
echo "baseline A: $BASE_A"
echo "baseline B: $BASE_B"
grep -q "cm.ids 0 " <<<"$BASE_A" && grep -q "daemon.qps 0 " <<<"$BASE_B" ||
  fail "the baseline lacks the counters (uroce-stat daemon. cm.): '$BASE_A'"

# --- 1. cmtime: CYCLES connections, 50 per client process
cm_on "$SOCK_A" cmtime -b "$IP_A" -p 7181 -c 50 >"$WORK/cmtime-s.log" 2>&1 &
PID_S=$!
sleep 1
done_conns=0 n=0 A_FIRST=""
while [ "$done_conns" -lt "$CYCLES" ]; do
  c=$((CYCLES - done_conns < 50 ? CYCLES - done_conns : 50))
  if ! cm_on "$SOCK_B" timeout 60 cmtime -s "$IP_A" -p 7181 -c "$c" >"$WORK/cmtime-c.log" 2>&1 ||
     ! grep -q "^disconnect" "$WORK/cmtime-c.log"; then
    fail "cmtime client $n ($c connections) failed after $done_conns connections"
    tail -n 12 "$WORK/cmtime-c.log"
    break
  fi
  done_conns=$((done_conns + c)) n=$((n + 1))
  [ -z "$A_FIRST" ] && { sleep 1.5; A_FIRST=$(state a); }  # after the time-wait
done
[ "$done_conns" -ge "$CYCLES" ] && pass "cmtime: $done_conns connections set up and torn down by $n client processes"

# --- 2. rping: 10 client processes against a persistent server
cm_on "$SOCK_A" rping -s -P -a "$IP_A" -p 7182 >"$WORK/rping-s.log" 2>&1 &
PID_R=$!
sleep 1
ok=0
for i in $(seq 10); do
  cm_on "$SOCK_B" timeout 30 rping -c -a "$IP_A" -p 7182 -C 1 -V >>"$WORK/rping-c.log" 2>&1 && ok=$((ok + 1))
done
[ "$ok" = 10 ] && pass "rping -C 1: 10 client processes against one rping -P server" ||
  fail "rping -C 1: $ok of 10 clients exited 0 ($(tail -3 "$WORK/rping-c.log" | tr '\n' ' '))"

# --- 3. B is back (its apps are gone); A's servers hold what they held after the first client
back_to b "$BASE_B" && pass "daemon B back at its baseline after $done_conns + 10 cycles: $BASE_B" ||
  fail "daemon B did not return to its baseline (a leak per connection on the active side)"
kill -0 "$PID_S" 2>/dev/null || fail "the cmtime server died"
stop_app "$PID_R"
PID_R=""
if [ -n "$A_FIRST" ]; then
  sleep 1.5
  A_LAST=$(state a)
  [ "$A_LAST" = "$A_FIRST" ] && pass "daemon A (cmtime server running): the same after the last client as after the first: $A_LAST" ||
    fail "daemon A grew while its server ran: after the first client '$A_FIRST', after the last '$A_LAST'"
fi

# --- 4. servers stopped: A back at its baseline too
stop_app "$PID_S"
PID_S=""
back_to a "$BASE_A" && pass "daemon A back at its baseline after its servers ended: $BASE_A" ||
  fail "daemon A did not return to its baseline"
kill -0 "$PID_A" 2>/dev/null && kill -0 "$PID_B" 2>/dev/null || fail "a daemon died"
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
