#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# DCQCN's cost without congestion (issue 21, doc/congestion.md, doc/perf.md): the message rate
# of 64 B RC WRITEs (uroce-perf write_bw -s 64) between two uroced joined by net_memif (A:
# server, lcore 0; B: client, lcore 1), with `[cc] algorithm = dcqcn` on both daemons and with
# `none`, in one run, alternating (dcqcn, none, dcqcn, none, ...) so both see the same machine.
# Nothing marks CE on memif: with dcqcn every QP stays unthrottled and pays the `qp.paced` test.
# Prints each run's MsgRate and BW, then both medians and their ratio. Nothing is asserted.
#
#   bench/run-dcqcn.sh [--builddir DIR] [--seconds N] [--runs N] [--size BYTES]
set -uo pipefail

BUILD=build SECS=10 RUNS=3 SIZE=64
while [ $# -gt 0 ]; do
  case $1 in
    --builddir) BUILD=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    *) echo "usage: $0 [--builddir DIR] [--seconds N] [--runs N] [--size B]"; exit 2 ;;
  esac
done
UROCED=$BUILD/apps/uroced/uroced
PERF=$BUILD/apps/uroce-perf/uroce-perf
for f in "$UROCED" "$PERF"; do [ -x "$f" ] || { echo "missing $f (build first)"; exit 2; }; done

ID=$$
WORK=$(mktemp -d /tmp/uroce-dcqcn-bench-XXXXXX)
PORT=$((20000 + ID % 20000))
PID_A="" PID_B=""
stop() {
  for p in $PID_A $PID_B; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  PID_A="" PID_B=""
}
cleanup() {
  stop
  rm -rf "/var/run/dpdk/uroce-dcb-$ID-a" "/var/run/dpdk/uroce-dcb-$ID-b" "$WORK"
}
trap cleanup EXIT

conf() {  # conf NAME ROLE LCORE IP ALGORITHM
  cat >"$WORK/$1.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-dcb-$ID-$1 --log-level=*:notice
[daemon]
socket = $WORK/$1.sock
workers = $3
idle_sleep_us = 50
[port p0]
device = net_memif0,role=$2,socket=$WORK/memif.sock,id=0
ipv4 = $4/24
[cc]
algorithm = $5
EOF
}
start() {  # start NAME -> pid in STARTED
  env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/$1.conf" >"$WORK/$1.log" 2>&1 &
  STARTED=$!
  for _ in $(seq 600); do
    grep -qs "uroced: running" "$WORK/$1.log" && return 0
    sleep 0.1
  done
  echo "uroced $1 did not start"; tail "$WORK/$1.log"; exit 1
}

rate() {  # rate ALGORITHM TAG -> "MsgRate(Mpps) BW(MB/s)" of one write_bw run
  conf a server 0 10.82.0.1 "$1"
  conf b client 1 10.82.0.2 "$1"
  start a; PID_A=$STARTED
  start b; PID_B=$STARTED
  timeout $((SECS + 60)) "$PERF" write_bw -d "$WORK/b.sock" -p "$PORT" >"$WORK/srv-$2.log" 2>&1 &
  local srv=$!
  sleep 1
  timeout $((SECS + 60)) "$PERF" write_bw -d "$WORK/a.sock" -p "$PORT" -s "$SIZE" -D "$SECS" \
    --out_csv_file="$WORK/$2.csv" 127.0.0.1 >"$WORK/cli-$2.log" 2>&1
  wait "$srv"
  stop
  awk -F, 'NR == 2 { print $9, $8 }' "$WORK/$2.csv" 2>/dev/null
}

echo "machine: $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg);" \
  "uroce-perf write_bw -s $SIZE -D $SECS over memif, $RUNS runs each, alternating"
d_rates=() n_rates=()
for r in $(seq "$RUNS"); do
  read -r dm db < <(rate dcqcn "dcqcn-$r")
  read -r nm nb < <(rate none "none-$r")
  echo "run $r: dcqcn ${dm:-?} Mpps (${db:-?} MB/s), none ${nm:-?} Mpps (${nb:-?} MB/s)"
  [ -n "${dm:-}" ] && d_rates+=("$dm")  # a failed run (no CSV) is left out of the median
  [ -n "${nm:-}" ] && n_rates+=("$nm")
done
med() { [ $# -gt 0 ] || { echo 0; return; }; printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
dmed=$(med "${d_rates[@]}") nmed=$(med "${n_rates[@]}")
echo "median: dcqcn $dmed Mpps, none $nmed Mpps, ratio" \
  "$(awk -v a="$dmed" -v b="$nmed" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "nan" }')"
