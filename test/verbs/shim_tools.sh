#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Integration test of the verbs shim (drivers/verbs, doc/verbs.md) with UNMODIFIED rdma-core
# binaries from Debian's ibverbs-utils, over two uroced joined by net_memif:
#   1. ibv_devinfo -v on each daemon: device name (default and configured), port ACTIVE,
#      RoCE v2 GIDs with the IPv4-mapped one at index 1; ibv_devinfo -l over a socket list with
#      an absent daemon in it (listed: the two live ones only).
#   2. ibv_rc_pingpong -g 1 -c (data checked) server on daemon B, client on daemon A: sizes 1,
#      4096 and 65536, event mode (-e), the ibv_wr_* API (-N), both.
#   3. ibv_ud_pingpong -g 1 -c: sizes 1 and 1024 (the port's IB MTU), event mode.
#   4. shim_mr_check (test/verbs/shim_mr_check.c) on daemon A: MR remapping semantics through the
#      verbs API with RDMA WRITE / READ over same-port loopback, unsupported memory and verbs.
#   5. shim_hooks_check (test/verbs/shim_hooks_check.c) on daemon A: the MR path under UCX-like
#      memory hooks (a 4-argument mremap; mmap / munmap / mprotect / madvise counted).
# Each run must exit 0 on both sides and print its own "N bytes in T seconds" and
# "N iters in T seconds" lines. Every wait is bounded; every process started is stopped by PID.
# Usage: shim_tools.sh PATH/TO/uroced SHIM_DIR (the directory holding libibverbs.so.1)
#        PATH/TO/shim_mr_check PATH/TO/shim_hooks_check
set -uo pipefail

USAGE="usage: $0 UROCED SHIM_DIR SHIM_MR_CHECK SHIM_HOOKS_CHECK"
UROCED=${1:?$USAGE}
SHIM=${2:?$USAGE}
MRCHECK=${3:?$USAGE}
HOOKSCHECK=${4:?$USAGE}
for t in ibv_devinfo ibv_rc_pingpong ibv_ud_pingpong timeout ss; do
  command -v $t >/dev/null || { echo "FAIL: '$t' not found (scripts/install-deps.sh installs it)"; exit 1; }
done
# Two uroced on net_memif: A (uroce0, the default device name), B (uroce_b, port.p0.ibdev);
# SOCK_A / SOCK_B, WORK, fail / pass / stop_pid, `on SOCK CMD...` (an app on the shim, niced),
# wait_active, and the EXIT trap that stops them by PID.
NAME=shim IP_NET=10.81.0
# shellcheck source=two_uroced.sh
. "$(dirname "$0")/two_uroced.sh"

# --- 1. ibv_devinfo (two_uroced.sh waited for A's port to be ACTIVE)
out=$(on "$SOCK_A" timeout 30 ibv_devinfo -v 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -qP "^hca_id:\turoce0$" <<<"$out" && grep -q "state:.*PORT_ACTIVE (4)" <<<"$out" &&
   grep -q "link_layer:.*Ethernet" <<<"$out" && grep -qP "GID\[\s*0\]:\s+fe80:.*RoCE v2" <<<"$out" &&
   grep -qP "GID\[\s*1\]:\s+::ffff:10\.81\.0\.1, RoCE v2" <<<"$out" &&
   grep -q "transport:.*InfiniBand (0)" <<<"$out" && grep -q "active_mtu:.*1024 (3)" <<<"$out"; then
  pass "ibv_devinfo -v on A: uroce0, PORT_ACTIVE, GID 1 = ::ffff:10.81.0.1 RoCE v2"
else
  fail "ibv_devinfo -v on A: exit $rc"
  echo "$out" | sed 's/^/  devinfo: /'
fi
out=$(on "$SOCK_B" timeout 30 ibv_devinfo -v 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -qP "^hca_id:\turoce_b$" <<<"$out" &&
   grep -qP "GID\[\s*1\]:\s+::ffff:10\.81\.0\.2, RoCE v2" <<<"$out"; then
  pass "ibv_devinfo -v on B: uroce_b (port.p0.ibdev), GID 1 = ::ffff:10.81.0.2"
else
  fail "ibv_devinfo -v on B: exit $rc"
  echo "$out" | sed 's/^/  devinfo: /'
fi
out=$(on "$SOCK_A:$WORK/absent.sock:$SOCK_B" timeout 30 ibv_devinfo -l 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q "2 HCAs found" <<<"$out" && grep -qP "^\s+uroce0$" <<<"$out" &&
   grep -qP "^\s+uroce_b$" <<<"$out"; then
  pass "ibv_devinfo -l with UROCE_SOCKET=A:absent:B lists uroce0 and uroce_b"
else
  fail "ibv_devinfo -l over a socket list: exit $rc: $out"
fi

# --- 2./3. pingpong: server on B, client on A (127.0.0.1 for the out-of-band TCP exchange)
PORT=$((20000 + (ID % 20000)))
pingpong() {  # pingpong TOOL ARGS...: one server/client run; checks both sides
  local tool=$1
  shift
  PORT=$((PORT + 1))
  on "$SOCK_B" timeout 60 "$tool" -p "$PORT" "$@" >"$WORK/server.log" 2>&1 &
  PID_S=$!
  local up=0
  for _ in $(seq 100); do
    if ss -ltnH "sport = :$PORT" 2>/dev/null | grep -q .; then up=1; break; fi
    kill -0 "$PID_S" 2>/dev/null || break
    sleep 0.1
  done
  local rc_c=1 rc_s
  if [ $up -eq 1 ]; then
    on "$SOCK_A" timeout 60 "$tool" -p "$PORT" "$@" 127.0.0.1 >"$WORK/client.log" 2>&1
    rc_c=$?
  fi
  wait "$PID_S"; rc_s=$?
  PID_S=""
  if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] &&
     grep -qE "^[0-9]+ bytes in [0-9.]+ seconds = " "$WORK/server.log" &&
     grep -qE "^[0-9]+ bytes in [0-9.]+ seconds = " "$WORK/client.log" &&
     grep -qE "^[0-9]+ iters in [0-9.]+ seconds = " "$WORK/client.log"; then
    pass "$tool $*: $(grep -E "bytes in" "$WORK/client.log")"
  else
    fail "$tool $*: client exit $rc_c, server exit $rc_s (server listening: $up)"
    sed 's/^/  server: /' "$WORK/server.log"
    sed 's/^/  client: /' "$WORK/client.log"
  fi
}

pingpong ibv_rc_pingpong -g 1 -c -n 200 -s 1
pingpong ibv_rc_pingpong -g 1 -c -n 200 -s 4096
pingpong ibv_rc_pingpong -g 1 -c -n 100 -s 65536
pingpong ibv_rc_pingpong -g 1 -c -n 200 -s 4096 -e
pingpong ibv_rc_pingpong -g 1 -c -n 200 -s 4096 -N
pingpong ibv_rc_pingpong -g 1 -c -n 100 -s 65536 -e -N
pingpong ibv_ud_pingpong -g 1 -c -n 200 -s 1
pingpong ibv_ud_pingpong -g 1 -c -n 200 -s 1024
pingpong ibv_ud_pingpong -g 1 -c -n 200 -s 1024 -e

# --- 4. MR semantics through the verbs API (one process, RC over A's own address)
out=$(on "$SOCK_A" timeout 120 "$MRCHECK" 2>&1); rc=$?
echo "$out" | sed 's/^/  mr_check: /'
if [ $rc -eq 0 ] && grep -q "^0 failure(s)" <<<"$out"; then
  pass "shim_mr_check: MR remapping semantics through the verbs API"
else
  fail "shim_mr_check: exit $rc"
fi

# --- 5. the MR path under UCX-like memory hooks (one process, RC over A's own address)
out=$(on "$SOCK_A" timeout 120 "$HOOKSCHECK" 2>&1); rc=$?
echo "$out" | sed 's/^/  hooks_check: /'
if [ $rc -eq 0 ] && grep -q "^0 failure(s)" <<<"$out"; then
  pass "shim_hooks_check: ibv_reg_mr / RDMA / dereg under UCX-like memory hooks"
else
  fail "shim_hooks_check: exit $rc"
fi

kill -0 "$PID_A" 2>/dev/null && kill -0 "$PID_B" 2>/dev/null || fail "a daemon died"
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
