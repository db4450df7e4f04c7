#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# CPU an idle uroced burns (issue 17: "idle uroced with default settings <= 1 % of a core over
# 10 s"): one uroced, one memif port, no peer, no app, the [daemon] defaults unless --set says
# otherwise; the share of one core is (utime + stime) from /proc/PID/stat over SECS seconds,
# after a settle time. Several configurations in one run (same machine, same load):
#
#   bench/idle-cpu.sh [--uroced PATH] [--seconds N] [--settle N] [CONFIG]...
#
# CONFIG is a label followed by --set arguments joined with '+', e.g.
#   default  busy:daemon.poll=busy  nap20:daemon.idle_max_sleep_us=20
# (default: "default busy:daemon.poll=busy"). --uroced may be given several times, each binary
# runs the same CONFIGs (e.g. main's build as a baseline). Needs root (DPDK, memif socket).
# Prints one line per run and the load average before and after.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
UROCEDS=()
SECS=10
SETTLE=3
CONFIGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --uroced) UROCEDS+=("$2"); shift ;;
    --seconds) SECS=$2; shift ;;
    --settle) SETTLE=$2; shift ;;
    -h|--help) sed -n '3,16p' "$0"; exit 0 ;;
    -*) echo "idle-cpu.sh: unknown argument '$1'" >&2; exit 2 ;;
    *) CONFIGS+=("$1") ;;
  esac
  shift
done
[ ${#UROCEDS[@]} -gt 0 ] || UROCEDS=("$here/build/apps/uroced/uroced")
[ ${#CONFIGS[@]} -gt 0 ] || CONFIGS=(default busy:daemon.poll=busy)
[ "$(id -u)" = 0 ] || { echo "idle-cpu.sh: needs root (DPDK, memif socket)" >&2; exit 1; }
ID=$$
WORK=$(mktemp -d /tmp/uroce-idle-cpu-XXXXXX)
PID=
cleanup() {
  if [ -n "$PID" ]; then
    kill -TERM "$PID" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PID" 2>/dev/null; wait "$PID" 2>/dev/null
  fi
  PID=
  rm -rf /var/run/dpdk/uroce-idle-$ID
}
trap 'cleanup; rm -rf "$WORK"' EXIT
cat >"$WORK/u.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-idle-$ID --log-level=*:notice
[daemon]
socket = $WORK/u.sock
[port p0]
device = net_memif0,role=server,socket=$WORK/memif.sock,id=0
ipv4 = 10.86.0.1/24
EOF
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git -C "$here" rev-parse --short HEAD 2>/dev/null)$(git -C "$here" diff --quiet 2>/dev/null || echo '+dirty'); ${SECS} s per run after ${SETTLE} s"
for u in "${UROCEDS[@]}"; do
  for c in "${CONFIGS[@]}"; do
    label=${c%%:*}
    sets=()
    if [[ $c == *:* ]]; then
      IFS=+ read -ra kv <<<"${c#*:}"
      for x in "${kv[@]}"; do sets+=(--set "$x"); done
    fi
    env -u LD_LIBRARY_PATH -u LD_PRELOAD "$u" -c "$WORK/u.conf" "${sets[@]}" >"$WORK/u.log" 2>&1 &
    PID=$!
    for _ in $(seq 600); do
      grep -q "uroced: running" "$WORK/u.log" && break
      kill -0 "$PID" 2>/dev/null || { cat "$WORK/u.log" >&2; exit 1; }
      sleep 0.1
    done
    sleep "$SETTLE"
    t0=$(ticks "$PID"); s0=$(date +%s.%N)
    sleep "$SECS"
    t1=$(ticks "$PID"); s1=$(date +%s.%N)
    awk -v u="$u" -v l="$label" -v a="$t0" -v b="$t1" -v s0="$s0" -v s1="$s1" -v hz="$hz" \
      -v load="$(cut -d' ' -f1-3 /proc/loadavg)" \
      'BEGIN { printf "%s [%s]: %.2f %% of a core (%d ticks in %.1f s), load %s\n", u, l, 100 * (b - a) / hz / (s1 - s0), b - a, s1 - s0, load }'
    cleanup
  done
done
