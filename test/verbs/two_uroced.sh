# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the verbs integration scripts (shim_tools.sh, perftest.sh, verbs_semantics.sh): starts two uroced
# joined by net_memif and sets SOCK_A / SOCK_B (devices uroce0 on A, uroce_b on B), WORK (a
# scratch directory), fail / pass / stop_pid / on, and an EXIT trap that stops both daemons by
# PID and prints their logs when something failed.
# Before sourcing: UROCED (the daemon binary), SHIM (the shim's directory), NAME (a short tag:
# DPDK file prefixes and the scratch directory carry it and $$). IP_NET (e.g. 10.83.0) optional;
# IBDEV_B (default uroce_b) names B's device.
# uroced itself never sees the shim (env -u LD_LIBRARY_PATH -u LD_PRELOAD).

# shellcheck source=../integration/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../integration/common.sh"
need_root "like the other integration tests"
[ -e "$SHIM/libibverbs.so.1" ] || { echo "FAIL: no libibverbs.so.1 in $SHIM"; exit 1; }

ID=$$
WORK=$(mktemp -d "/tmp/uroce-$NAME-XXXXXX")
PID_A="" PID_B="" PID_S=""
IP_NET=${IP_NET:-10.83.0}

cleanup() {
  [ -n "$PID_S" ] && stop_pid "$PID_S" KILL >/dev/null 2>&1
  [ -n "$PID_A" ] && stop_pid "$PID_A" TERM 20 >/dev/null 2>&1
  [ -n "$PID_B" ] && stop_pid "$PID_B" TERM 20 >/dev/null 2>&1
  rm -rf "/var/run/dpdk/uroce-$NAME-$ID-a" "/var/run/dpdk/uroce-$NAME-$ID-b"
  if [ "$FAILS" -ne 0 ]; then
    for f in a b; do echo "--- uroced $f log"; tail -20 "$WORK/uroced-$f.log" 2>/dev/null; done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# Daemon A: memif server, lcore 0, device uroce0. Daemon B: memif client, lcore 1, uroce_b.
start_uroced() {  # start_uroced NAME ROLE LCORE IP [--set ...]
  local n=$1 role=$2 lcore=$3 ip=$4
  shift 4
  cat >"$WORK/uroced-$n.conf" <<EOC
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-$NAME-$ID-$n --log-level=*:notice
[daemon]
socket = $WORK/uroced-$n.sock
workers = $lcore
mbufs = 4095
idle_sleep_us = ${IDLE_SLEEP_US:-50}
poll = ${UROCE_POLL:-adaptive}
[port p0]
device = net_memif0,role=$role,socket=$WORK/memif.sock,id=0
ipv4 = $ip/24
EOC
  # At nice -5 (the apps run at +10): the unmodified tools keep rdma-core's 67 ms ACK timeout
  # x 7 retries, which a daemon waiting for one of two shared cores can exceed (doc/verbs.md);
  # a deployment gives uroced its own cores.
  nice -n "${DAEMON_NICE:--5}" env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/uroced-$n.conf" "$@" \
    >"$WORK/uroced-$n.log" 2>&1 &
  eval "PID_${n^^}=$!"
}
wait_running() {  # wait_running NAME PID: up to 60 s
  for _ in $(seq 600); do
    grep -q "uroced: running" "$WORK/uroced-$1.log" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
start_uroced a server 0 "$IP_NET.1"
wait_running a "$PID_A" || { fail "uroced A did not come up: $(tail -5 "$WORK/uroced-a.log")"; exit 1; }
start_uroced b client 1 "$IP_NET.2" --set port.p0.ibdev="${IBDEV_B:-uroce_b}"
wait_running b "$PID_B" || { fail "uroced B did not come up: $(tail -5 "$WORK/uroced-b.log")"; exit 1; }
SOCK_A=$WORK/uroced-a.sock
SOCK_B=$WORK/uroced-b.sock
pass "two uroced on net_memif (pids $PID_A, $PID_B)"

# An app on the shim. Niced: the verbs apps busy-poll, and on two shared cores they must not
# starve the daemons (an RC ACK timeout of 4.096 us x 2^14 = 67 ms, 7 retries, is all the slack).
on() {  # on SOCK CMD...
  local sock=$1
  shift
  env LD_LIBRARY_PATH="$SHIM" UROCE_SOCKET="$sock" nice -n "${APP_NICE:-10}" "$@"
}

# The memif link comes up once both daemons run: wait (bounded) until A's port is ACTIVE.
wait_active() {
  # ibv_devinfo is not built with ASan: with an ASan-built shim (UROCE_ASAN_RUNTIME, set by
  # meson in sanitized builds) the runtime has to be preloaded into it, without leak checking.
  local pre=()
  [ -n "${UROCE_ASAN_RUNTIME:-}" ] && pre=(env LD_PRELOAD="$UROCE_ASAN_RUNTIME" ASAN_OPTIONS=detect_leaks=0)
  for _ in $(seq 100); do
    on "$SOCK_A" "${pre[@]}" timeout 30 ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE && return 0
    sleep 0.2
  done
  return 1
}
wait_active || fail "port A never became ACTIVE"
