#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Quota isolation (issue 19 item 3, doc/security.md "Quotas"): does a hostile app slow another
# app's transfers? Two uroced joined by net_memif (A: memif server, lcore 0; B: memif client,
# lcore 1; A with small per-app quotas). Per run, uroce-perf write_bw -D SECS (RC WRITE A -> B,
# server on B, client on A) twice, back to back:
#   1. undisturbed;
#   2. while test/integration/quota_app on A opens CQs / QPs / MRs in a loop until refused and
#      floods control requests without reading the replies.
# The two are interleaved, their order alternating from run to run (odd runs: undisturbed
# first), so that a drift of the machine's load weighs on both alike.
# Per measurement it also records the CPU seconds (utime + stime, /proc and /usr/bin/time) of
# the victim's side: uroced A and B over the measurement, the uroce-perf client and server.
# Prints per run both BW averages, their ratio ("wall"), and the ratio of BW per victim
# CPU-second ("cpu": bytes moved per CPU-second the victim's processes got, under attack over
# undisturbed). On a shared machine the hostile process, like any other job, takes CPU from
# the scheduler whatever uroced does: that lowers the wall ratio but not the cpu one. What the
# hostile app costs inside uroced (its requests served on A's main lcore, which also runs A's
# data path) shows in both. Then the medians and the load average. Nothing is asserted.
# --hostile-cpu N pins the hostile app (taskset); --ctl-rate N sets A's quota_ctl_rate.
#
#   bench/quota_isolation.sh [--builddir DIR] [--seconds N] [--runs N] [--size BYTES]
#                            [--hostile-cpu N] [--ctl-rate N]
set -uo pipefail

BUILD=build SECS=10 RUNS=3 SIZE=65536 HCPU="" RATE=0
while [ $# -gt 0 ]; do
  case $1 in
    --builddir) BUILD=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --hostile-cpu) HCPU=$2; shift 2 ;;
    --ctl-rate) RATE=$2; shift 2 ;;
    *) echo "usage: $0 [--builddir DIR] [--seconds N] [--runs N] [--size B] [--hostile-cpu N] [--ctl-rate N]"; exit 2 ;;
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
quota_ctl_outstanding = 4
quota_pds = 4
quota_ahs = 16
quota_ctl_rate = $RATE"
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

ticks() {  # ticks PID...: utime + stime of the processes, in clock ticks
  local p t=0 u s
  for p in "$@"; do
    read -r u s < <(awk '{ print $14, $15 }' "/proc/$p/stat" 2>/dev/null) || continue
    t=$((t + u + s))
  done
  echo "$t"
}
HZ=$(getconf CLK_TCK)
bw() {  # bw TAG: "BW_MB/s VICTIM_CPU_SECONDS" into $WORK/TAG.res (daemons + client + server)
  local t0 t1 srv
  /usr/bin/time -f "%U %S" -o "$WORK/srv-$1.time" timeout $((SECS + 60)) "$PERF" write_bw \
    -d "$WORK/b.sock" -p "$PORT" >"$WORK/srv-$1.log" 2>&1 &
  srv=$!
  for _ in $(seq 300); do  # the server listens once its daemon session is set up (<= 30 s)
    ss -ltnH "sport = :$PORT" 2>/dev/null | grep -q . && break
    sleep 0.1
  done
  t0=$(ticks "$PID_A" "$PID_B")
  /usr/bin/time -f "%U %S" -o "$WORK/cli-$1.time" timeout $((SECS + 60)) "$PERF" write_bw \
    -d "$WORK/a.sock" -p "$PORT" -s "$SIZE" -D "$SECS" --out_csv_file="$WORK/$1.csv" 127.0.0.1 \
    >"$WORK/cli-$1.log" 2>&1
  t1=$(ticks "$PID_A" "$PID_B")
  wait "$srv"
  local mbs cpu
  mbs=$(awk -F, 'NR == 2 { print $8 }' "$WORK/$1.csv" 2>/dev/null)
  [ -n "$mbs" ] || { echo "  $1: no result:"; tail -n 3 "$WORK/cli-$1.log" "$WORK/srv-$1.log"; } >&2
  cpu=$(cat "$WORK/cli-$1.time" "$WORK/srv-$1.time" 2>/dev/null |
    awk -v d=$((t1 - t0)) -v hz="$HZ" '{ c += $1 + $2 } END { printf "%.2f", c + d / hz }')
  echo "${mbs:-0} $cpu" >"$WORK/$1.res"
}

attacked() {  # attacked TAG: as bw, with quota_app on A for the measurement's length
  local PIN=() hp
  [ -n "$HCPU" ] && PIN=(taskset -c "$HCPU")
  "${PIN[@]}" "$QAPP" "$WORK/a.sock" $((SECS + 5)) 10.81.0.2 >"$WORK/hostile-$1.log" 2>&1 &
  hp=$!
  sleep 2
  bw "$1"
  wait "$hp"
}

echo "machine: $(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "uroce-perf write_bw -s $SIZE -D $SECS, $RUNS interleaved runs, A's quota_ctl_rate $RATE"
wall=() cpur=()
for r in $(seq "$RUNS"); do
  if [ $((r % 2)) -eq 1 ]; then
    bw "base-$r"
    attacked "attack-$r"
  else
    attacked "attack-$r"
    bw "base-$r"
  fi
  read -r base bcpu <"$WORK/base-$r.res"
  read -r under ucpu <"$WORK/attack-$r.res"
  hostile=$(grep '^rounds=' "$WORK/hostile-attack-$r.log" | cut -d';' -f1)
  read -r w c < <(awk -v a="$under" -v b="$base" -v ac="$ucpu" -v bc="$bcpu" 'BEGIN {
    if (b > 0 && a > 0 && ac > 0 && bc > 0) printf "%.3f %.3f\n", a / b, (a / ac) / (b / bc)
    else print "nan nan" }')
  wall+=("$w") cpur+=("$c")
  echo "run $r: undisturbed $base MB/s ($bcpu victim CPU-s), under attack $under MB/s" \
    "($ucpu CPU-s): wall ratio $w, cpu ratio $c; hostile: $hostile"
done
med() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "median wall ratio: $(med "${wall[@]}"), median cpu ratio: $(med "${cpur[@]}");" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "quota refusals on A:"
"$BUILD/apps/uroce-stat/uroce-stat" -s "$WORK/a.sock" 2>/dev/null | grep '^quota\.' | sed 's/^/  /'
