#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Quota isolation (issue 19 item 3, doc/security.md "Quotas"): does a hostile app slow another
# app's transfers? Two uroced joined by net_memif (A: memif server, lcore 0; B: memif client,
# lcore 1; A with small per-app quotas). Per run, uroce-perf write_bw -D SECS (RC WRITE A -> B,
# server on B, client on A) twice, back to back:
#   1. undisturbed;
#   2. while test/integration/quota_app on A opens CQs / QPs / MRs in a loop until refused and
#      floods control requests without reading the replies.
# Prints both BW averages and their ratio per run, then the median ratio. Nothing is asserted.
# The machine has 2 cores: the hostile app's own CPU use competes with the daemons and the
# client whatever uroced does; --hostile-cpu N pins it (taskset) to show the daemon-side cost.
#
#   bench/quota_isolation.sh [--builddir DIR] [--seconds N] [--runs N] [--size BYTES]
#                            [--hostile-cpu N]
set -uo pipefail

BUILD=build SECS=10 RUNS=3 SIZE=65536 HCPU=""
while [ $# -gt 0 ]; do
  case $1 in
    --builddir) BUILD=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --hostile-cpu) HCPU=$2; shift 2 ;;
    *) echo "usage: $0 [--builddir DIR] [--seconds N] [--runs N] [--size B] [--hostile-cpu N]"; exit 2 ;;
  esac
done
UROCED=$BUILD/apps/uroced/uroced
PERF=$BUILD/apps/uroce-perf/uroce-perf
QAPP=$BUILD/test/integration/quota_app
for f in "$UROCED" "$PERF" "$QAPP"; do [ -x "$f" ] || { echo "missing $f (build first)"; exit 2; }; done

ID=$$
WORK=$(mktemp -d /tmp/uroce-qiso-XXXXXX)
PORT=$((20000 + ID % 20000))
PID_A="" PID_B=""
cleanup() {
  for p in $PID_A $PID_B; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "/var/run/dpdk/uroce-qiso-$ID-a" "/var/run/dpdk/uroce-qiso-$ID-b" "$WORK"
}
trap cleanup EXIT

conf() {  # conf NAME ROLE LCORE IP [EXTRA]
  cat >"$WORK/$1.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-qiso-$ID-$1 --log-level=*:notice
[daemon]
socket = $WORK/$1.sock
workers = $3
idle_sleep_us = 50
${5:-}
[port p0]
device = net_memif0,role=$2,socket=$WORK/memif.sock,id=0
ipv4 = $4/24
EOF
}
conf a server 0 10.81.0.1 "quota_qps = 24
quota_cqs = 8
quota_mrs = 40
quota_mr_bytes = 33554432
quota_ctl_outstanding = 4"
conf b client 1 10.81.0.2
start() {  # start NAME -> pid in STARTED
  env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/$1.conf" >"$WORK/$1.log" 2>&1 &
  STARTED=$!
  for _ in $(seq 600); do
    grep -qs "uroced: running" "$WORK/$1.log" && return 0
    sleep 0.1
  done
  echo "uroced $1 did not start"; tail "$WORK/$1.log"; exit 1
}
start a; PID_A=$STARTED
start b; PID_B=$STARTED

bw() {  # bw TAG -> BW average in MB/s (client's CSV)
  timeout $((SECS + 60)) "$PERF" write_bw -d "$WORK/b.sock" -p "$PORT" >"$WORK/srv-$1.log" 2>&1 &
  local srv=$!
  sleep 1
  timeout $((SECS + 60)) "$PERF" write_bw -d "$WORK/a.sock" -p "$PORT" -s "$SIZE" -D "$SECS" \
    --out_csv_file="$WORK/$1.csv" 127.0.0.1 >"$WORK/cli-$1.log" 2>&1
  wait "$srv"
  awk -F, 'NR == 2 { print $8 }' "$WORK/$1.csv" 2>/dev/null
}

echo "machine: $(nproc) CPUs, $(uname -r); uroce-perf write_bw -s $SIZE -D $SECS, $RUNS runs"
ratios=()
for r in $(seq "$RUNS"); do
  base=$(bw "base-$r")
  PIN=()
  [ -n "$HCPU" ] && PIN=(taskset -c "$HCPU")
  "${PIN[@]}" "$QAPP" "$WORK/a.sock" $((SECS + 5)) >"$WORK/hostile-$r.log" 2>&1 &
  hp=$!
  sleep 2
  under=$(bw "attack-$r")
  wait "$hp"
  hostile=$(grep '^rounds=' "$WORK/hostile-$r.log")
  ratio=$(awk -v a="$under" -v b="$base" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "nan" }')
  ratios+=("$ratio")
  echo "run $r: undisturbed $base MB/s, under attack $under MB/s, ratio $ratio ($hostile)"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { print "median ratio:", v[int((NR + 1) / 2)] }'
echo "quota refusals on A:"
"$BUILD/apps/uroce-stat/uroce-stat" -s "$WORK/a.sock" 2>/dev/null | grep '^quota\.' | sed 's/^/  /'
