#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The verbs-shim measurement of doc/perf.md (issue 5: "ib_write_bw and ib_send_bw message rate
# at 64 B and bandwidth at 64 KB, and ib_write_lat at 8 B, over uroced on memif, beside the raw
# memif baseline and kernel TCP ping-pong over loopback measured in the same run. Goal:
# ib_write_lat <= 1/5 of the TCP ping-pong latency").
#
#   bench/run-verbs.sh [--builddir DIR] [--seconds N] [--lat-iters N] [--nice N] [--idle-sleep US]
#                      [--poll adaptive|busy] [--skip-raw]
#
# In one run, in this order:
#   1. raw memif baseline: uroce-rawpkt --role tx / --role rx (64-byte L2 frames, the same EAL
#      and memif setup as uroced: A memif server on lcore 0, B memif client on lcore 1);
#   2. kernel TCP ping-pong over loopback, 8 B (bench/tcp_pingpong, blocking sockets with
#      TCP_NODELAY), one-way = RTT / 2 as perftest reports latency;
#   3. uroced A and B on memif, and the UNMODIFIED perftest tools over the shim
#      (LD_LIBRARY_PATH=build/drivers/verbs), server on B, client on A, -d DEV -x 1:
#      ib_write_bw -s 64 -D N, ib_send_bw -s 64 -D N (message rate), ib_write_bw -s 65536 -D N,
#      ib_send_bw -s 65536 -D N (bandwidth), ib_write_lat -s 8 -n ITERS and ib_send_lat -s 8
#      -n ITERS (latency); and
#      uroce-perf write_lat -s 8 (lib/client, no shim) on the same daemons for comparison.
# Prints every tool's result row, then one summary table with the PASS/MISS verdict of the
# latency goal (t_typical of ib_write_lat against the TCP median, both one-way).
# The perftest processes busy-poll: on a 2-core machine they share the cores with the two
# polling daemons; --nice N (default 0) runs them niced. Nothing is asserted: the script fails
# only if a step fails.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$here/build
SECS=5
LAT_ITERS=5000
NICE=0
IDLE=50
POLL=adaptive
SKIP_RAW=0
while [ $# -gt 0 ]; do
  case "$1" in
    --builddir) BUILD=$(cd "$2" && pwd); shift ;;
    --seconds) SECS=$2; shift ;;
    --lat-iters) LAT_ITERS=$2; shift ;;
    --nice) NICE=$2; shift ;;
    --idle-sleep) IDLE=$2; shift ;;
    --poll) POLL=$2; shift ;;
    --skip-raw) SKIP_RAW=1 ;;
    -h|--help) sed -n '3,26p' "$0"; exit 0 ;;
    *) echo "run-verbs.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
UROCED=$BUILD/apps/uroced/uroced
RAW=$BUILD/bench/rawpkt/uroce-rawpkt
PERF=$BUILD/apps/uroce-perf/uroce-perf
TCP=$BUILD/bench/tcp_pingpong/tcp_pingpong
SHIM=$BUILD/drivers/verbs
for b in "$UROCED" "$RAW" "$PERF" "$TCP" "$SHIM/libibverbs.so.1"; do
  [ -e "$b" ] || { echo "run-verbs.sh: $b is not built (ninja -C $BUILD)" >&2; exit 1; }
done
for t in ib_write_bw ib_send_bw ib_write_lat ib_send_lat ss; do
  command -v $t >/dev/null || { echo "run-verbs.sh: '$t' not found (scripts/install-deps.sh)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "run-verbs.sh: needs root (DPDK, memif sockets)" >&2; exit 1; }

ID=$$
WORK=$(mktemp -d /tmp/uroce-bench-verbs-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null
  done
  PIDS=()
  rm -rf /var/run/dpdk/uroce-bench-verbs-$ID-*
}
trap 'cleanup; rm -rf "$WORK"' EXIT
die() { echo "run-verbs.sh: $*" >&2; for f in "$WORK"/*.log; do echo "--- $f" >&2; tail -5 "$f" >&2; done; exit 1; }

conf() {  # conf NAME ROLE LCORE IP [ibdev]
  cat >"$WORK/$1.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-bench-verbs-$ID-$1 --log-level=*:notice
[daemon]
socket = $WORK/$1.sock
workers = $3
mbufs = 8191
idle_sleep_us = $IDLE
poll = $POLL
[port p0]
device = net_memif0,role=$2,socket=$WORK/memif.sock,id=0
ipv4 = $4/24
ibdev = $5
EOF
}
conf a server 0 10.85.0.1 uroce_a
conf b client 1 10.85.0.2 uroce_b
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$2"; }
start_daemon() {  # start_daemon NAME
  env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/$1.conf" >"$WORK/uroced-$1.log" 2>&1 &
  PIDS+=("$!")
  for _ in $(seq 600); do
    grep -q "uroced: running" "$WORK/uroced-$1.log" 2>/dev/null && return 0
    kill -0 "$!" 2>/dev/null || break
    sleep 0.1
  done
  die "uroced $1 did not come up"
}
on() {  # on NAME CMD...: an app on the shim, on daemon NAME
  local n=$1
  shift
  env LD_LIBRARY_PATH="$SHIM" UROCE_SOCKET="$WORK/$n.sock" nice -n "$NICE" "$@"
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git -C "$here" rev-parse --short HEAD 2>/dev/null)$(git -C "$here" diff --quiet 2>/dev/null || echo '+dirty')"
echo "perftest $(dpkg-query -W -f='${Version}' perftest 2>/dev/null), apps niced $NICE, daemon idle_sleep_us $IDLE, poll $POLL"

# --- 1. raw memif baseline (64 B frames)
raw_pps=0
if [ "$SKIP_RAW" = 0 ]; then
"$RAW" -c "$WORK/a.conf" --role tx --seconds $((SECS + 4)) >"$WORK/raw-tx.log" 2>&1 &
TXPID=$!
PIDS+=("$TXPID")
rx=$(timeout $((SECS + 90)) "$RAW" -c "$WORK/b.conf" --role rx --seconds "$SECS" 2>"$WORK/raw-rx.log") \
  || die "uroce-rawpkt rx failed"
wait "$TXPID" || die "uroce-rawpkt tx failed"
PIDS=()
rm -rf /var/run/dpdk/uroce-bench-verbs-$ID-*
raw_pps=$(field pps "$rx")
echo "raw memif: $rx"
fi

# --- 2. kernel TCP ping-pong over loopback (8 B)
tcp=$("$TCP" --size 8 --iters "$LAT_ITERS" --warmup 1000) || die "tcp_pingpong failed"
echo "$tcp"
tcp_med=$(field median_us "$(grep '^tcp_pingpong' <<<"$tcp")")

# --- 3. uroced A and B, perftest over the shim
start_daemon a
start_daemon b
for _ in $(seq 100); do
  on a timeout 30 ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE && break
  sleep 0.2
done
PORT=$((20000 + ID % 20000))
run() {  # run TOOL ARGS... -> the result row in ROW
  PORT=$((PORT + 1))
  on b timeout $((SECS + 180)) "$1" -d uroce_b -x 1 -p "$PORT" "${@:2}" >"$WORK/server.log" 2>&1 &
  local spid=$!
  for _ in $(seq 200); do
    ss -ltnH "sport = :$PORT" 2>/dev/null | grep -q . && break
    sleep 0.1
  done
  local out
  out=$(on a timeout $((SECS + 180)) "$1" -d uroce_a -x 1 -p "$PORT" "${@:2}" 127.0.0.1 2>&1) \
    || die "$* client failed: $out"
  wait "$spid" || die "$* server failed: $(cat "$WORK/server.log")"
  ROW=$(awk '/^ *#bytes/ { t = 1; next } t && $1 ~ /^[0-9]+$/ { print; exit }' <<<"$out" | tr -s ' \t' ' ')
  echo "$*:$ROW"
}
run ib_write_bw -s 64 -D "$SECS" -F;    read -r _ _ _ _ wr64_mpps <<<"$ROW"
run ib_send_bw -s 64 -D "$SECS" -F;     read -r _ _ _ _ sd64_mpps <<<"$ROW"
run ib_write_bw -s 65536 -D "$SECS" -F; read -r _ _ _ wr64k_mbs _ <<<"$ROW"
run ib_send_bw -s 65536 -D "$SECS" -F;  read -r _ _ _ sd64k_mbs _ <<<"$ROW"
run ib_write_lat -s 8 -n "$LAT_ITERS" -F
read -r _ _ lat_min _ lat_typ lat_avg _ lat_p99 _ <<<"$ROW"
run ib_send_lat -s 8 -n "$LAT_ITERS" -F
read -r _ _ slat_min _ slat_typ _ <<<"$ROW"
# The same latency test on lib/client without the shim (uroce-perf, same daemons), to tell the
# shim's share from the daemons' and the scheduler's.
PORT=$((PORT + 1))
nice -n "$NICE" timeout $((SECS + 180)) "$PERF" write_lat -d "$WORK/b.sock" -p "$PORT" >"$WORK/perf-server.log" 2>&1 &
SPID=$!
out=$(nice -n "$NICE" timeout $((SECS + 180)) "$PERF" write_lat -d "$WORK/a.sock" -p "$PORT" -s 8 \
  -n "$LAT_ITERS" 127.0.0.1 2>&1) || die "uroce-perf write_lat failed: $out"
wait "$SPID" || die "uroce-perf server failed: $(cat "$WORK/perf-server.log")"
ROW=$(awk '/^ *#bytes/ { t = 1; next } t && $1 ~ /^[0-9]+$/ { print; exit }' <<<"$out" | tr -s ' \t' ' ')
echo "uroce-perf write_lat -s 8 -n $LAT_ITERS:$ROW"
read -r _ _ cl_min _ cl_typ _ <<<"$ROW"
cleanup

echo
echo "| measurement | result |"
echo "|---|---:|"
awk -v raw="$raw_pps" -v w="$wr64_mpps" -v s="$sd64_mpps" -v wk="$wr64k_mbs" -v sk="$sd64k_mbs" \
    -v tmin="$lat_min" -v ttyp="$lat_typ" -v tavg="$lat_avg" -v t99="$lat_p99" -v tcp="$tcp_med" \
    -v cmin="$cl_min" -v ctyp="$cl_typ" -v smin="$slat_min" -v styp="$slat_typ" 'BEGIN {
  printf "| raw memif, 64 B frames | %.3f Mpps |\n", raw / 1e6
  printf "| ib_write_bw 64 B message rate | %.4f Mpps (%.1f %% of raw) |\n", w, (raw > 0 ? 100 * w * 1e6 / raw : 0)
  printf "| ib_send_bw 64 B message rate | %.4f Mpps (%.1f %% of raw) |\n", s, (raw > 0 ? 100 * s * 1e6 / raw : 0)
  printf "| ib_write_bw 64 KB bandwidth | %.1f MB/s (%.2f Gb/s) |\n", wk, wk * 8 / 1000
  printf "| ib_send_bw 64 KB bandwidth | %.1f MB/s (%.2f Gb/s) |\n", sk, sk * 8 / 1000
  printf "| ib_write_lat 8 B (t_min / t_typical / t_avg / 99 %%) | %.2f / %.2f / %.2f / %.2f us |\n", tmin, ttyp, tavg, t99
  printf "| ib_send_lat 8 B (t_min / t_typical) | %.2f / %.2f us |\n", smin, styp
  printf "| uroce-perf write_lat 8 B, lib/client without the shim (t_min / t_typical) | %.2f / %.2f us |\n", cmin, ctyp
  printf "| TCP ping-pong 8 B over loopback, median one-way | %.2f us |\n", tcp
  r = tcp > 0 ? ttyp / tcp : 0
  printf "| goal: ib_write_lat t_typical <= TCP / 5 (= %.2f us) | %.2f x TCP: %s |\n", tcp / 5, r, ((r > 0 && r <= 0.2) ? "PASS" : "MISS")
}'
