#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The uroced measurement of doc/perf.md (issue: "small RDMA WRITE message rate through uroced
# on memif, one worker lcore: >= 50 % of the raw memif packet rate, same run").
#
#   bench/run-uroced.sh [--builddir DIR] [--seconds N] [--sizes "2 64"] [--qps N]
#                       [--tx-depth N] [--cq-mod N] [--post-list N] [--runs N] [--no-events]
#                       [--idle-sleep US] [--profile DIR] [--skip-raw] [--stats]
#                       [--client-cpu N] [--client-batch]
#
# Per run, on the same two memif ports (A: memif server on lcore 0, B: memif client on lcore
# 1, the same uroced configuration files, EAL --no-huge -m 256):
#   1. raw baseline: uroce-rawpkt --role tx with A's configuration sends 64-byte L2 frames,
#      uroce-rawpkt --role rx with B's counts them for N seconds;
#   2. uroced A and uroced B, then for each size uroce-perf write_bw -D N: server on B, client
#      on A (RC WRITEs A -> B, ACKs B -> A).
# Two figures per case: packets (messages) per wall second, and per CPU second of the busier
# of the two data-path threads (raw: the tx / rx polling threads, CLOCK_THREAD_CPUTIME_ID;
# uroced: the daemons' main threads, utime + stime from /proc over the client's whole run).
# The machine has 2 cores: the raw run uses both, the uroced run has two polling daemons
# plus the busy-polling uroce-perf client on them, so the wall-clock rate understates what
# one lcore does; the CPU-time rate measures the work per message. Both ratios are printed;
# PASS/MISS is judged on the wall-clock ratio, and only when the raw receiver had >= 80 % of
# its core (else "invalid": the machine was busy with other jobs and the baseline starved).
# Nothing is asserted: the script fails only if a step fails.
# The client sleeps on its CQ's completion event when it cannot post (uroce-perf -e), so that
# the two daemons have the two cores nearly to themselves; --no-events makes it busy-poll.
# --idle-sleep sets daemon.idle_sleep_us (default 50: a daemon naps only after 1024 idle
# iterations, never while traffic flows).
# --profile DIR: `perf record -F 4000 -g` on each daemon and the client during each client run,
# into DIR/perf-{a,b,client}-RUN-SIZE.data (perf report -i FILE --no-children --sort symbol).
# --skip-raw: no raw baseline (for profiling only; the table then has no ratios).
# --stats: after each client run, uroce-stat's frame, ACK, CQ event and doorbell counters of
# both daemons (cumulative over the run's sizes).
# --post-list N: the client posts lists of N WRs, one post call each (uroce-perf -l, perftest's
# --post_list); default 1.
# The client's own CPU seconds (bash's time) are printed with the daemons'.
# --client-cpu N: run the uroce-perf client and server pinned to CPU N (taskset), e.g. 1 = the
# responder B's lcore, so that the requester A has lcore 0 to itself as the raw sender has
# (default: not pinned; the scheduler spreads the client over both CPUs).
# --client-batch: run the uroce-perf processes as SCHED_BATCH (chrt --batch 0): a woken client
# then waits for the end of the running daemon's time slice instead of preempting it (each
# preemption costs the daemon a context switch, expensive in this VM: doc/perf.md).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$here/build
SECS=5
SIZES="2 64"
QPS=4
TXD=2048
CQMOD=256
PLIST=1
RUNS=1
EVENTS=-e
IDLE=50
PROFILE=""
SKIPRAW=0
STATS=0
BATCH=0
CLIENTCPU=
while [ $# -gt 0 ]; do
  case "$1" in
    --builddir) BUILD=$(cd "$2" && pwd); shift ;;
    --seconds) SECS=$2; shift ;;
    --sizes) SIZES=$2; shift ;;
    --qps) QPS=$2; shift ;;
    --tx-depth) TXD=$2; shift ;;
    --cq-mod) CQMOD=$2; shift ;;
    --post-list) PLIST=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --no-events) EVENTS="" ;;
    --idle-sleep) IDLE=$2; shift ;;
    --profile) mkdir -p "$2" && PROFILE=$(cd "$2" && pwd); shift ;;
    --skip-raw) SKIPRAW=1 ;;
    --stats) STATS=1 ;;
    --client-batch) BATCH=1 ;;
    --client-cpu) CLIENTCPU=$2; shift ;;
    -h|--help) sed -n '3,43p' "$0"; exit 0 ;;
    *) echo "run-uroced.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
UROCED=$BUILD/apps/uroced/uroced
PERF=$BUILD/apps/uroce-perf/uroce-perf
RAW=$BUILD/bench/rawpkt/uroce-rawpkt
STAT=$BUILD/apps/uroce-stat/uroce-stat
for b in "$UROCED" "$PERF" "$RAW"; do
  [ -x "$b" ] || { echo "run-uroced.sh: $b is not built (ninja -C $BUILD)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "run-uroced.sh: needs root (DPDK, memif sockets)" >&2; exit 1; }

ID=$$
WORK=$(mktemp -d /tmp/uroce-bench-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null
  done
  PIDS=()
  rm -rf /var/run/dpdk/uroce-bench-$ID-*
}
trap 'cleanup; rm -rf "$WORK"' EXIT
die() { echo "run-uroced.sh: $*" >&2; for f in "$WORK"/*.log; do echo "--- $f" >&2; tail -5 "$f" >&2; done; exit 1; }

conf() {  # conf NAME ROLE LCORE IP
  cat >"$WORK/$1.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-bench-$ID-$1 --log-level=*:notice
[daemon]
socket = $WORK/$1.sock
workers = $3
mbufs = 8191
idle_sleep_us = $IDLE
[port p0]
device = net_memif0,role=$2,socket=$WORK/memif.sock,id=0
ipv4 = $4/24
EOF
}
conf a server 0 10.83.0.1
conf b client 1 10.83.0.2
HZ=$(getconf CLK_TCK)
cpu_of() {  # cpu_of PID -> CPU seconds (utime + stime) of its main thread
  awk -v hz="$HZ" '{ sub(/^.*\) /, ""); print ($12 + $13) / hz }' "/proc/$1/task/$1/stat"
}
start_daemon() {  # start_daemon NAME -> pid in DPID
  env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/$1.conf" >"$WORK/uroced-$1.log" 2>&1 &
  DPID=$!
  PIDS+=("$DPID")
  for _ in $(seq 600); do
    grep -q "uroced: running" "$WORK/uroced-$1.log" 2>/dev/null && return 0
    kill -0 "$DPID" 2>/dev/null || break
    sleep 0.1
  done
  die "uroced $1 did not come up"
}
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$2"; }

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git -C "$here" rev-parse --short HEAD 2>/dev/null)$(git -C "$here" diff --quiet 2>/dev/null || echo '+dirty')"
RESULTS=()
for run in $(seq "$RUNS"); do
  # --- 1. raw memif baseline
  if [ "$SKIPRAW" = 0 ]; then
  # The sender runs 4 s longer than the receiver's window and stops by itself; the receiver
  # drains until it stopped.
  rm -f "$WORK/memif.sock"
  "$RAW" -c "$WORK/a.conf" --role tx --seconds $((SECS + 6)) >"$WORK/raw-tx.log" 2>&1 &
  TXPID=$!
  PIDS+=("$TXPID")
  for _ in $(seq 600); do  # the memif server listens once its port started
    grep -q "waiting for the link" "$WORK/raw-tx.log" 2>/dev/null && break
    kill -0 "$TXPID" 2>/dev/null || die "uroce-rawpkt tx failed"
    sleep 0.1
  done
  rx=$(timeout $((SECS + 90)) "$RAW" -c "$WORK/b.conf" --role rx --seconds "$SECS" 2>"$WORK/raw-rx.log") \
    || die "uroce-rawpkt rx failed"
  wait "$TXPID" || die "uroce-rawpkt tx failed"
  PIDS=()
  tx=$(grep '^rawpkt role' "$WORK/raw-tx.log")
  rm -rf /var/run/dpdk/uroce-bench-$ID-*
  raw_pps=$(field pps "$rx")
  # The baseline is valid only if its receiver had its core (>= 80 % of the window on CPU):
  # on a machine shared with other jobs it is starved and the ratio means nothing.
  raw_share=$(awk -v c="$(field cpu_seconds "$rx")" -v s="$(field seconds "$rx")" \
    'BEGIN { printf "%.0f", (s > 0 ? 100 * c / s : 0) }')
  # per CPU second of the busier side: the smaller of the two per-side rates (each over its own
  # window: the sender runs longer than the receiver counts)
  raw_cpu=$(awk -v a="$(field pps_per_cpu_second "$rx")" -v b="$(field pps_per_cpu_second "$tx")" \
    'BEGIN { printf "%.0f", (a < b ? a : b) }')
  echo "run $run raw: rx: $rx"
  echo "run $run raw: tx: $tx"
  else
    raw_pps=0; raw_cpu=0; raw_share=0
  fi

  # --- 2. uroced A and B, uroce-perf write_bw A -> B
  rm -f "$WORK/memif.sock"
  start_daemon a; PA=$DPID
  start_daemon b; PB=$DPID
  PORT=$((20000 + (ID + run) % 20000))
  PIN=()
  [ -n "$CLIENTCPU" ] && PIN=(taskset -c "$CLIENTCPU")
  [ "$BATCH" = 1 ] && PIN+=(chrt --batch 0)
  for size in $SIZES; do
    timeout $((SECS + 120)) "${PIN[@]}" "$PERF" write_bw -d "$WORK/b.sock" -p "$PORT" >"$WORK/perf-server.log" 2>&1 &
    SPID=$!
    PP=()
    if [ -n "$PROFILE" ]; then
      for d in a b; do
        pid=$PA; [ $d = b ] && pid=$PB
        perf record -q -F 4000 -g -p "$pid" -o "$PROFILE/perf-$d-$run-$size.data" \
          >"$WORK/perf-rec-$d.log" 2>&1 &
        PP+=($!)
      done
    fi
    ca0=$(cpu_of "$PA"); cb0=$(cpu_of "$PB"); t0=$(date +%s.%N)
    # bash's time: the client's user + system CPU seconds (it shares the two cores)
    TIMEFORMAT='%U %S'
    LIST=()  # -l only when asked: a uroce-perf without it can be measured too
    [ "$PLIST" != 1 ] && LIST=(-l "$PLIST")
    PREC=()
    [ -n "$PROFILE" ] && PREC=(perf record -q -F 4000 -g -o "$PROFILE/perf-client-$run-$size.data" --)
    { time timeout $((SECS + 120)) "${PIN[@]}" "${PREC[@]}" "$PERF" write_bw -d "$WORK/a.sock" -p "$PORT" \
        -s "$size" -q "$QPS" -t "$TXD" -Q "$CQMOD" "${LIST[@]}" -D "$SECS" $EVENTS 127.0.0.1 \
        >"$WORK/client.out" 2>&1; } 2>"$WORK/client-time" \
      || die "uroce-perf client failed: $(cat "$WORK/client.out")"
    out=$(cat "$WORK/client.out")
    ca1=$(cpu_of "$PA"); cb1=$(cpu_of "$PB"); t1=$(date +%s.%N)
    for p in "${PP[@]}"; do kill -INT "$p"; wait "$p"; done
    wait "$SPID" || die "uroce-perf server failed: $(cat "$WORK/perf-server.log")"
    row=$(awk '/#bytes +#iterations/ { getline; print; exit }' <<<"$out")
    echo "run $run uroce-perf write_bw -s $size -q $QPS -t $TXD -Q $CQMOD -l $PLIST -D $SECS $EVENTS:$row"
    read -r _ iters _ _ mpps <<<"$row"
    msgs=$((iters * QPS))
    # msg/s wall, CPU s of A and B, msgs per CPU s of the busier daemon
    read -r wm ca cb cr <<<"$(awk -v m="$msgs" -v mpps="$mpps" -v a0="$ca0" -v a1="$ca1" \
      -v b0="$cb0" -v b1="$cb1" 'BEGIN {
        ca = a1 - a0; cb = b1 - b0; c = (ca > cb ? ca : cb)
        printf "%.0f %.2f %.2f %.0f", mpps * 1e6, ca, cb, (c > 0 ? m / c : 0) }')"
    cc=$(awk '{ printf "%.2f", $1 + $2 }' "$WORK/client-time")
    echo "run $run uroced CPU seconds: A $ca, B $cb, client $cc, over $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s of the client run; $msgs messages"
    if [ "$STATS" = 1 ]; then  # frames each way (ACK coalescing), per daemon, cumulative
      for d in a b; do
        echo "run $run uroced $d: $("$STAT" -s "$WORK/$d.sock" engine.tx_pkts engine.rx_pkts \
          engine.tx_acks cq_events doorbells 2>&1 | tr '\n' ' ')"
      done
    fi
    RESULTS+=("$run $size $raw_pps $raw_cpu $wm $cr $raw_share")
  done
  cleanup
done

echo
echo "| run | size | raw pps (wall) | raw rx on CPU | raw pps / CPU s | WRITE msg/s (wall) | WRITE msg / CPU s | ratio wall | ratio CPU | 50 % |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for l in "${RESULTS[@]}"; do
  read -r run size rp rc wm cr share <<<"$l"
  awk -v run="$run" -v size="$size" -v rp="$rp" -v rc="$rc" -v wm="$wm" -v cr="$cr" \
    -v share="$share" 'BEGIN {
    rw = rp > 0 ? 100 * wm / rp : 0; rcpu = rc > 0 ? 100 * cr / rc : 0
    v = share < 80 ? "invalid (raw baseline starved)" : (rw >= 50 ? "PASS" : "MISS")
    printf "| %s | %s B | %.0f | %s %% | %.0f | %.0f | %.0f | %.1f %% | %.1f %% | %s |\n", run, size,
      rp, share, rc, wm, cr, rw, rcpu, v }'
done
