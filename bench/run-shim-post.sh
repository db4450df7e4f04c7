#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The verbs shim's own post / poll cost (doc/perf.md, "Verbs shim: post and poll"): the same
# bench binary (bench/shim_post/shim_post_bench) over two uroced on memif, run alternately with
# this tree's shim and a baseline shim (another build of drivers/verbs), on the same daemons.
#
#   bench/run-shim-post.sh --baseline SHIMDIR [--builddir DIR] [--runs N] [--rounds N] [--batch B]
#
# SHIMDIR holds the baseline's libibverbs.so.1, e.g. built from an older commit:
#   git archive OLD | tar -x -C /tmp/base && cd /tmp/base && meson setup build &&
#   ninja -C build drivers/verbs/libibverbs.so.1.14.44        # then SHIMDIR=/tmp/base/build/drivers/verbs
# Prints one line per run (baseline and new interleaved, N each, the order swapped every run)
# and the medians.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$here/build
BASE=
RUNS=5
ROUNDS=3000
BATCH=32
while [ $# -gt 0 ]; do
  case "$1" in
    --builddir) BUILD=$(cd "$2" && pwd); shift ;;
    --baseline) BASE=$(cd "$2" && pwd); shift ;;
    --runs) RUNS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --batch) BATCH=$2; shift ;;
    -h|--help) sed -n '3,12p' "$0"; exit 0 ;;
    *) echo "run-shim-post.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
UROCED=$BUILD/apps/uroced/uroced
BENCH=$BUILD/bench/shim_post/shim_post_bench
SHIM=$BUILD/drivers/verbs
[ -n "$BASE" ] && [ -e "$BASE/libibverbs.so.1" ] || { echo "run-shim-post.sh: --baseline SHIMDIR with a libibverbs.so.1" >&2; exit 2; }
for b in "$UROCED" "$BENCH" "$SHIM/libibverbs.so.1"; do
  [ -e "$b" ] || { echo "run-shim-post.sh: $b is not built (ninja -C $BUILD)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "run-shim-post.sh: needs root (DPDK, memif sockets)" >&2; exit 1; }

ID=$$
WORK=$(mktemp -d /tmp/uroce-bench-shimpost-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null
  done
  PIDS=()
  rm -rf /var/run/dpdk/uroce-bench-shimpost-$ID-*
}
trap 'cleanup; rm -rf "$WORK"' EXIT
die() { echo "run-shim-post.sh: $*" >&2; for f in "$WORK"/*.log; do echo "--- $f" >&2; tail -5 "$f" >&2; done; exit 1; }

conf() {  # conf NAME ROLE LCORE IP ibdev
  cat >"$WORK/$1.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-bench-shimpost-$ID-$1 --log-level=*:notice
[daemon]
socket = $WORK/$1.sock
workers = $3
mbufs = 8191
idle_sleep_us = 50
[port p0]
device = net_memif0,role=$2,socket=$WORK/memif.sock,id=0
ipv4 = $4/24
ibdev = $5
EOF
}
conf a server 0 10.86.0.1 uroce_a
conf b client 1 10.86.0.2 uroce_b
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

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git -C "$here" rev-parse --short HEAD 2>/dev/null)$(git -C "$here" diff --quiet 2>/dev/null || echo '+dirty'); baseline shim $BASE"
start_daemon a
start_daemon b
for _ in $(seq 100); do
  env LD_LIBRARY_PATH="$SHIM" UROCE_SOCKET="$WORK/a.sock" timeout 30 ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE && break
  sleep 0.2
done
one() {  # one LABEL SHIMDIR
  local out
  out=$(env LD_LIBRARY_PATH="$2" UROCE_SOCKET="$WORK/a.sock:$WORK/b.sock" timeout 600 \
    "$BENCH" --rounds "$ROUNDS" --batch "$BATCH" 2>&1) || die "$1: $out"
  echo "$1 $out" | tee -a "$WORK/results"
}
for r in $(seq "$RUNS"); do  # interleaved, the order swapped every run
  if [ $((r % 2)) = 1 ]; then
    one baseline "$BASE"
    one new "$SHIM"
  else
    one new "$SHIM"
    one baseline "$BASE"
  fi
done
echo
echo "medians of $RUNS runs (ns per WR / per completion):"
for who in baseline new; do
  for f in post1_ns chain_ns wr_api_ns poll_cq_ns cq_ex_ns cqes_per_poll; do
    v=$(grep "^$who " "$WORK/results" | sed -n "s/.* $f=\([0-9.]*\).*/\1/p" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    printf '%s %s=%s ' "$who" "$f" "$v"
  done
  echo
done
echo "median over the runs of new / baseline of the same pair (< 1: the new shim is cheaper):"
for f in post1_ns chain_ns wr_api_ns poll_cq_ns cq_ex_ns; do
  paste <(grep "^baseline " "$WORK/results" | sed -n "s/.* $f=\([0-9.]*\).*/\1/p") \
        <(grep "^new " "$WORK/results" | sed -n "s/.* $f=\([0-9.]*\).*/\1/p") |
    awk '{print $2 / $1}' | sort -g | awk -v f="$f" '{a[NR]=$1} END {printf "%s %.2f  ", f, a[int((NR+1)/2)]}'
done
echo
