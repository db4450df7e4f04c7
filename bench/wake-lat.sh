#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Wake-up latency of uroced (issue 17, doc/perf.md "Wake latency"): uroce-perf write_lat and
# send_lat (8 B, RC) between two uroced, in poll adaptive and busy, over net_tap (RX interrupts:
# a Linux bridge between the two taps in a namespace of its own) and over net_memif (no RX
# interrupt in DPDK 22.11: the adaptive daemon naps), with the same-run baseline of kernel TCP
# ping-pong over loopback (bench/tcp_pingpong, one-way = RTT / 2). For each run it also prints
# the receiving daemon's (B's) idle counters: how it was woken (wake_rx, naps, wake_timeout).
# Default priorities; the daemons on lcore 0 each (as the sample config).
# Usage: bench/wake-lat.sh [--build DIR] [--iters N] [--links "tap memif"] [--modes "adaptive busy"]
# Needs root (namespace, taps). Every process it starts is stopped by PID; everything it creates
# is removed on exit.
set -uo pipefail

BUILD=build
ITERS=3000
LINKS="tap memif"
MODES="adaptive busy"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2;;
    --iters) ITERS=$2; shift 2;;
    --links) LINKS=$2; shift 2;;
    --modes) MODES=$2; shift 2;;
    *) echo "usage: $0 [--build DIR] [--iters N] [--links \"tap memif\"] [--modes \"adaptive busy\"]"; exit 2;;
  esac
done
UROCED=$BUILD/apps/uroced/uroced
STAT=$BUILD/apps/uroce-stat/uroce-stat
PERF=$BUILD/apps/uroce-perf/uroce-perf
TCP=$BUILD/bench/tcp_pingpong/tcp_pingpong
for f in "$UROCED" "$STAT" "$PERF" "$TCP"; do
  [ -x "$f" ] || { echo "$f: not built (ninja -C $BUILD)"; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "needs root (network namespace, taps)"; exit 1; }

ID=$$
NS=uroce-wl-$ID
BR=uwlb$ID
WORK=$(mktemp -d /tmp/uroce-wake-lat-XXXXXX)
PIDS=()
die() { echo "wake-lat: $*" >&2; exit 1; }
stop_all() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null
  done
  PIDS=()
  rm -rf /var/run/dpdk/uroce-wl-$ID-*
}
cleanup() {
  stop_all
  ip netns del "$NS" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "machine: $(nproc) vCPU, $(uname -r), $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git -C "$(dirname "$0")" log -1 --format='%h %s' 2>/dev/null)"

# --- baseline: kernel TCP ping-pong over loopback, 8 B
tcp=$("$TCP" --size 8 --iters "$ITERS" --warmup 1000) || die "tcp_pingpong failed"
tcp_med=$(sed -n 's/.*median_us=\([0-9.]*\).*/\1/p' <<<"$tcp")
echo "baseline: $(grep '^tcp_pingpong' <<<"$tcp")"

# start LINK MODE: daemons A (10.83.0.1) and B (10.83.0.2), waits for both to run
start() {
  local link=$1 mode=$2 d dev ip
  for d in a b; do
    if [ "$link" = tap ]; then
      dev="net_tap0,iface=uwl$ID$d"
    else
      local role=server; [ $d = b ] && role=client
      dev="net_memif0,role=$role,socket=$WORK/memif-$mode.sock,id=0"
    fi
    ip=10.83.0.1; [ $d = b ] && ip=10.83.0.2
    cat >"$WORK/$d.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-wl-$ID-$d --log-level=*:notice
[daemon]
socket = $WORK/$d.sock
poll = $mode
[port p0]
device = $dev
mtu = 1500
ipv4 = $ip/24
EOF
    if [ "$link" = tap ]; then
      ip netns exec "$NS" env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/$d.conf" \
        >"$WORK/$d.log" 2>&1 &
    else
      env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/$d.conf" >"$WORK/$d.log" 2>&1 &
    fi
    PIDS+=($!)
    for _ in $(seq 600); do
      grep -q "uroced: running" "$WORK/$d.log" && break
      kill -0 "${PIDS[-1]}" 2>/dev/null || die "uroced $d ($link, $mode) exited: $(tail -3 "$WORK/$d.log")"
      sleep 0.1
    done
    grep -q "uroced: running" "$WORK/$d.log" || die "uroced $d did not come up"
  done
  if [ "$link" = tap ]; then
    # The taps' kernel side carries the ports' MACs, which a bridge would keep for itself.
    ip -n "$NS" link set "uwl${ID}a" address 02:00:00:83:00:0a
    ip -n "$NS" link set "uwl${ID}b" address 02:00:00:83:00:0b
    ip -n "$NS" link set "uwl${ID}a" master "$BR"
    ip -n "$NS" link set "uwl${ID}b" master "$BR"
  fi
}

ctr() {  # ctr KEY: B's worker.0.KEY
  timeout 30 "$STAT" -s "$WORK/b.sock" "worker.0.$1" 2>/dev/null | awk '{ print $2 }'
}

# lat TEST [-e]: t_typical of TEST -s 8 (server on B, client on A; -e: both apps sleep on their
# CQ's completion channel instead of spinning); prints "t_typical wake_rx naps timeouts"
PORT=18700
lat() {
  PORT=$((PORT + 1))
  local ev=${2:-}
  local r0 n0 t0 out row
  r0=$(ctr wake_rx); n0=$(ctr naps); t0=$(ctr wake_timeout)
  timeout 300 "$PERF" "$1" $ev -d "$WORK/b.sock" -s 8 -n "$ITERS" -p "$PORT" >"$WORK/srv.log" 2>&1 &
  local srv=$!
  sleep 1
  out=$(timeout 300 "$PERF" "$1" $ev -d "$WORK/a.sock" -s 8 -n "$ITERS" -p "$PORT" 127.0.0.1 2>&1)
  wait "$srv"
  row=$(awk '$1 == "8" && NF >= 9 { print $5 }' <<<"$out")
  [ -n "$row" ] || { echo "$1 failed: $(tail -3 <<<"$out")" >&2; row=failed; }
  echo "$row $(( $(ctr wake_rx) - r0 )) $(( $(ctr naps) - n0 )) $(( $(ctr wake_timeout) - t0 ))"
}

ip netns add "$NS" || die "ip netns add"
ip netns exec "$NS" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 net.ipv6.conf.all.disable_ipv6=1
ip -n "$NS" link set lo up
ip -n "$NS" link add "$BR" type bridge && ip -n "$NS" link set "$BR" up || die "bridge"

printf '\n| link | poll | test | t_typical (us) | x TCP one-way | B: wake_rx | B: naps | B: wake_timeout |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for link in $LINKS; do
  for mode in $MODES; do
    start "$link" "$mode"
    for t in write_lat send_lat "send_lat -e"; do
      # shellcheck disable=SC2086
      read -r typ rx naps to <<<"$(lat $t)"
      ratio=$(awk -v a="$typ" -v b="$tcp_med" 'BEGIN { if (a + 0 > 0) printf "%.1f", a / b; else print "-" }')
      printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$link" "$mode" "$t" "$typ" "$ratio" "$rx" "$naps" "$to"
    done
    stop_all
  done
done
echo
echo "baseline TCP one-way median: $tcp_med us; load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
