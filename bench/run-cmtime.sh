#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Connection rate and setup latency of rdma_cm over uroce (issue 15, doc/perf.md): the
# unmodified cmtime between two uroced on memif through the drop-in librdmacm (server on A,
# client on B, -c CONNS connections at once, ROUNDS client runs), beside kernel TCP connection
# setup over loopback in the same run (python3: CONNS non-blocking connects to a listener,
# accepted, then closed: the baseline of "a connection" on this machine). With --rxe, the
# same cmtime rounds then run between two Linux rxe guests of the interop rig (test/interop/rig:
# qemu TCG, the kernel's rdma_cm on both sides, guest A server, guest B client), side by side.
#
#   bench/run-cmtime.sh [--builddir DIR] [--conns N] [--rounds N] [--rxe [--image DIR]]
#
# Prints cmtime's step table of every round, and one summary line per round: connect total
# (ms) and connections per second, against TCP's. Nothing is asserted; needs root (memif).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$here/build CONNS=100 ROUNDS=3 RXE=0 IMAGE=/tmp/uroce-interop-image
while [ $# -gt 0 ]; do
  case $1 in
    --builddir) BUILD=$2; shift 2 ;;
    --conns) CONNS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --rxe) RXE=1; shift ;;
    --image) IMAGE=$2; shift 2 ;;
    *) echo "usage: $0 [--builddir DIR] [--conns N] [--rounds N] [--rxe [--image DIR]]"; exit 2 ;;
  esac
done
case $CONNS$ROUNDS in '' | *[!0-9]*) echo "--conns and --rounds take numbers"; exit 2 ;; esac
UROCED=$BUILD/apps/uroced/uroced SHIM=$BUILD/drivers/verbs CMSHIM=$BUILD/drivers/rdmacm
NAME=cmbench IP_NET=10.89.0
# shellcheck source=../test/verbs/two_uroced.sh
. "$here/test/verbs/two_uroced.sh"
IP_A=$IP_NET.1
cm_on() {
  local sock=$1
  shift
  env LD_LIBRARY_PATH="$CMSHIM:$SHIM" UROCE_SOCKET="$sock" "$@"
}
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"

tcp_rate() {
  python3 - "$CONNS" <<'EOF'
import socket, sys, time
n = int(sys.argv[1])
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(n)
t0 = time.perf_counter()
cs = []
for _ in range(n):
    c = socket.socket(); c.connect(ls.getsockname()); cs.append(c)
acc = [ls.accept()[0] for _ in range(n)]
t1 = time.perf_counter()
for s in cs + acc: s.close()
t2 = time.perf_counter()
print(f"tcp loopback: {n} connects {1e3*(t1-t0):.2f} ms ({n/(t1-t0):.0f}/s), close {1e3*(t2-t1):.2f} ms")
EOF
}

cm_on "$SOCK_A" cmtime -b "$IP_A" -p 7190 -c "$CONNS" >"$WORK/cmtime-s.log" 2>&1 &
PID_S=$!
sleep 1
for r in $(seq "$ROUNDS"); do
  tcp_rate
  if cm_on "$SOCK_B" timeout 120 cmtime -s "$IP_A" -p 7190 -c "$CONNS" >"$WORK/cmtime-c.log" 2>&1; then
    sed -n '/^step/,$p' "$WORK/cmtime-c.log"
    awk -v n="$CONNS" -v r="$r" '$1 == "connect" {printf "round %d: uroce cmtime: %d connects %.2f ms (%.0f/s)\n", r, n, $3, n / ($3 / 1000)}' "$WORK/cmtime-c.log"
  else
    echo "round $r: cmtime client failed"
    tail -5 "$WORK/cmtime-c.log"
  fi
done
for s in A B; do  # retries and drops explain a slow connect
  sock=SOCK_$s
  echo "daemon $s: $(env -u LD_LIBRARY_PATH "$BUILD/apps/uroce-stat/uroce-stat" -s "${!sock}" cm. 2>&1 |
    awk '$2 != 0 {printf "%s %s  ", $1, $2}')"
done
for p in $(pgrep -P "$PID_S") "$PID_S"; do kill -TERM "$p" 2>/dev/null; done
wait "$PID_S" 2>/dev/null
PID_S=""

# --- the rxe half: two guests of the rig on one bridge, the kernel's rdma_cm on both
[ "$RXE" = 1 ] || exit 0
RIG=$here/test/interop/rig
[ -s "$IMAGE/vmlinux" ] || { echo "rxe: no guest image in $IMAGE (test/interop/rig/build-image.sh $IMAGE)"; exit 1; }
NS=uroce-cmtime-$$
GA=10.77.0.11 GB=10.77.0.12
bash "$RIG/netns.sh" up "$NS" 1500 2 >/dev/null || { echo "rxe: netns.sh up failed"; exit 1; }
trap 'bash "$RIG/netns.sh" down "$NS" >/dev/null 2>&1; cleanup' EXIT
cat >"$WORK/guest-a.sh" <<EOS
timeout 900 cmtime -b $GA -p 7190 -c $CONNS
EOS
cat >"$WORK/guest-b.sh" <<EOS
# wait (bounded) until the server listens: a REJ or an unreachable peer fails at once
for i in \$(seq 120); do cmtime -s $GA -p 7190 -c 1 >/dev/null 2>&1 && break; sleep 2; done
for r in \$(seq $ROUNDS); do echo "== round \$r"; timeout 300 cmtime -s $GA -p 7190 -c $CONNS; done
EOS
env -u LD_LIBRARY_PATH "$RIG/boot-guest.sh" -k "$IMAGE" -n "$NS" -t tap0 -a "$GA/24" \
  -s "$WORK/guest-a.sh" -T 1000 >"$WORK/guest-a.log" 2>&1 &
GPA=$!
env -u LD_LIBRARY_PATH "$RIG/boot-guest.sh" -k "$IMAGE" -n "$NS" -t tap1 -a "$GB/24" \
  -s "$WORK/guest-b.sh" -T 900 >"$WORK/guest-b.log" 2>&1
echo "rxe guests (qemu TCG, one vCPU each): guest B exit $?"
kill "$GPA" 2>/dev/null
wait "$GPA" 2>/dev/null
tr -d '\r' <"$WORK/guest-b.log" | awk -v n="$CONNS" '
  /^== round/ {r = $3; show = 0}
  /^step/ {show = 1}
  show {print}
  $1 == "connect" {printf "round %d: rxe cmtime: %d connects %.2f ms (%.0f/s)\n", r, n, $3, n / ($3 / 1000)}'
