#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Integration test of uroce-perf (doc/uroce-perf.md): the result tables are parsed and checked
# for sane values (no timing assertion: the machine is shared), with --check verifying data.
#   1. one uroced on net_null (no-rx: only same-port loopback works): every test with
#      --loopback (server and client in one process, over one uroced), several QPs, -a, -D;
#      1b. UC / UD, -b, --use_srq, -e in the latency tests; 1c. --out_json / --out_csv_file
#      compared with the table, --progress; 1d. uroce-perf-plot on the JSON files of 1c: PNG
#      and SVG charts with the expected labels and series.
#   2. two uroced joined by net_memif, the server process on one, the client on the other,
#      meeting over TCP: write_bw with 2 QPs, send_lat, write_bw -b, send_bw -c UD -b.
#   3. a send_bw client SIGKILLed mid-run: its server exits 1 within 15 s.
# Needs root (as the other integration tests). Bounded waits; processes stopped by PID.
# Usage: uroce_perf.sh PATH/TO/uroced PATH/TO/uroce-perf PATH/TO/uroce-perf-plot
set -uo pipefail
UROCED=${1:?usage: $0 UROCED UROCE_PERF UROCE_PERF_PLOT}
PERF=${2:?usage: $0 UROCED UROCE_PERF UROCE_PERF_PLOT}
PLOT=${3:?usage: $0 UROCED UROCE_PERF UROCE_PERF_PLOT}
HERE=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" != 0 ]; then
  echo "FAIL: this test needs root (like the other integration tests); CI runs as root"
  exit 1
fi
ID=$$
WORK=$(mktemp -d /tmp/uroce-perf-test-XXXXXX)
PIDS=()
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }
cleanup() {
  for p in "${PIDS[@]}"; do
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  rm -rf /var/run/dpdk/uroce-perf-test-$ID-*
  if [ "$FAILS" -ne 0 ]; then
    for f in "$WORK"/*.log; do echo "--- $f"; tail -20 "$f"; done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

daemon() {  # daemon NAME LCORE DEVICE IP -> starts uroced NAME, its socket is $WORK/NAME.sock
  cat >"$WORK/$1.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-perf-test-$ID-$1 --log-level=*:notice
[daemon]
socket = $WORK/$1.sock
workers = $2
mbufs = 8191
idle_sleep_us = 50
[port p0]
device = $3
ipv4 = $4/24
EOF
  env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/$1.conf" >"$WORK/uroced-$1.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  for _ in $(seq 600); do
    grep -q "uroced: running" "$WORK/uroced-$1.log" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  fail "uroced $1 did not come up: $(tail -5 "$WORK/uroced-$1.log")"
  exit 1
}

# check_bw NAME ITERS ROWS -- command: runs it; every result row must have #iterations ==
# ITERS (or > 0 when ITERS is '-'), BW average = MsgRate x size, BW peak >= BW average, MsgRate > 0; ROWS
# rows; exit 0 and "Data check : PASS".
check_bw() {
  local name=$1 iters=$2 rows=$3; shift 4
  local out rc
  out=$(timeout 120 "$@" 2>&1); rc=$?
  LAST_OUT=$out
  local bad
  bad=$(awk -v it="$iters" -v rows="$rows" '
    /#bytes +#iterations +BW peak/ { table = 1; div = /Gb\/sec/ ? 1e9 / 8 : 1048576; next }
    table && /^ *[0-9]+ +[0-9]+ / {
      n++
      if ((it != "-" && $2 != it) || (it == "-" && $2 <= 0)) print "iterations " $2 " (asked " it ")"
      # BW average = MsgRate x size, within the rounding of the printed values (no timing)
      want = $5 * 1e6 * $1 / div; tol = 0.006 + 0.5 * $1 / div + 0.001 * want
      if ($4 < 0 || $4 - want > tol || want - $4 > tol) print "BW average " $4 ", MsgRate x size " want
      if ($3 + 0.01 < $4) print "peak " $3 " below average " $4
      if ($5 <= 0) print "MsgRate " $5
    }
    END { if (n != rows) print n " result rows, expected " rows }' <<<"$out")
  if [ $rc -eq 0 ] && [ -z "$bad" ] && grep -q "Data check      : PASS" <<<"$out"; then
    pass "$name: $(grep -A"$rows" '#bytes' <<<"$out" | tail -1 | tr -s ' \t' ' ')"
  else
    fail "$name: exit $rc; $bad"; echo "$out" | tail -30 | sed 's/^/  /'
  fi
}
# check_lat NAME ITERS -- command: one row, #iterations == ITERS, 0 < t_min <= t_typical <=
# t_max, t_min <= t_avg <= t_max, t_min <= 99% <= 99.9% <= t_max.
check_lat() {
  local name=$1 iters=$2; shift 3
  local out rc
  out=$(timeout 120 "$@" 2>&1); rc=$?
  LAST_OUT=$out
  local bad
  bad=$(awk -v it="$iters" '
    /#bytes #iterations +t_min/ { table = 1; next }
    table && /^ *[0-9]+ +[0-9]+ / {
      n++
      if ($2 != it) print "iterations " $2 " (asked " it ")"
      if (!($3 > 0 && $3 <= $5 && $5 <= $4)) print "t_min/t_typical/t_max " $3 "/" $5 "/" $4
      if (!($3 <= $6 && $6 <= $4)) print "t_avg " $6
      if (!($3 <= $8 && $8 <= $9 && $9 <= $4)) print "percentiles " $8 " " $9
    }
    END { if (n != 1) print n " result rows" }' <<<"$out")
  if [ $rc -eq 0 ] && [ -z "$bad" ] && grep -q "Data check      : PASS" <<<"$out"; then
    pass "$name: $(grep -A1 '#bytes' <<<"$out" | tail -1 | tr -s ' \t' ' ')"
  else
    fail "$name: exit $rc; $bad"; echo "$out" | tail -30 | sed 's/^/  /'
  fi
}

# --- 1. loopback: one uroced whose port loses everything it sends
daemon lo 0 "net_null0,no-rx=1" 10.81.0.1
S=$WORK/lo.sock
check_bw "write_bw --loopback -q 3 -s 64" 1000 1 -- "$PERF" write_bw --loopback -d "$S" -q 3 -s 64 -n 1000 -t 64 -Q 16 --check
check_bw "write_bw --loopback 4000 B (4 packets)" 200 1 -- "$PERF" write_bw --loopback -d "$S" -s 4000 -n 200 --check
check_bw "read_bw --loopback -q 2" 300 1 -- "$PERF" read_bw --loopback -d "$S" -q 2 -s 3000 -n 300 --check
check_bw "send_bw --loopback -q 2" 1000 1 -- "$PERF" send_bw --loopback -d "$S" -q 2 -s 200 -n 1000 -r 64 --check
check_bw "atomic_bw --loopback" 1000 1 -- "$PERF" atomic_bw --loopback -d "$S" -n 1000 --check
check_bw "atomic_bw CMP_AND_SWAP --loopback" 500 1 -- "$PERF" atomic_bw --loopback -d "$S" -n 500 -A CMP_AND_SWAP --check
check_bw "write_bw -a --loopback (2 .. 8 MB)" 5 23 -- "$PERF" write_bw --loopback -d "$S" -a -n 5 -t 4 -Q 1 --check
check_bw "write_bw -D 1 --report_gbits --loopback" - 1 -- "$PERF" write_bw --loopback -d "$S" -s 512 -D 1 --report_gbits --check
check_bw "write_bw -l 8 (post lists) --loopback -q 2" 1000 1 -- "$PERF" write_bw --loopback -d "$S" -q 2 -s 64 -n 1000 -t 64 -l 8 -Q 40 --check
check_bw "send_bw -l 4 (post lists) -e --loopback" 1000 1 -- "$PERF" send_bw --loopback -d "$S" -s 100 -n 1000 -t 32 -l 4 -r 64 -e --check
check_bw "write_bw -e (completion events) --loopback -q 2" 1000 1 -- "$PERF" write_bw --loopback -d "$S" -q 2 -s 64 -n 1000 -t 128 -Q 32 -e --check
for t in write_lat read_lat send_lat atomic_lat; do
  check_lat "$t --loopback" 100 -- "$PERF" $t --loopback -d "$S" -n 100 --check
done
check_lat "write_lat --loopback 5000 B (5 packets)" 50 -- "$PERF" write_lat --loopback -d "$S" -s 5000 -n 50 --check
out=$(timeout 60 "$PERF" write_bw --report_gbits --loopback -d "$S" -n 5 2>&1)
grep -q "BW peak\[Gb/sec\]    BW average\[Gb/sec\]" <<<"$out" || fail "--report_gbits header: $out"

# --- 1b. perftest's matrix: UC / UD, -b, SRQ, -e in the latency tests (all with --check)
check_bw "write_bw -c UC -q 2 --loopback" 500 1 -- "$PERF" write_bw -c UC --loopback -d "$S" -q 2 -s 1000 -n 500 --check
check_bw "send_bw -c UC -q 2 --loopback" 1000 1 -- "$PERF" send_bw -c UC --loopback -d "$S" -q 2 -s 300 -n 1000 --check
check_bw "send_bw -c UD -q 2 --loopback" 1000 1 -- "$PERF" send_bw -c UD --loopback -d "$S" -q 2 -s 200 -n 1000 --check
check_bw "send_bw -c UD -s 4096 (lowered to the MTU) --loopback" 100 1 -- "$PERF" send_bw -c UD --loopback -d "$S" -s 4096 -n 100 --check
grep -q "Max msg size in UD is MTU 1024" <<<"$LAST_OUT" && grep -qE "^ 1024 +100 " <<<"$LAST_OUT" \
  && pass "UD: -s above the MTU runs at the MTU, as perftest" || fail "UD size clamp: $LAST_OUT"
check_bw "send_bw -c UD -a --loopback (2 .. MTU)" 20 10 -- "$PERF" send_bw -c UD --loopback -d "$S" -a -n 20 --check
grep -qE "\(UD: the server received [0-9]+ of [0-9]+ messages" <<<"$LAST_OUT" \
  && pass "UD: the client reports what the server received" || fail "UD received line: $LAST_OUT"
for t in "write_bw -q 2 -s 1000 -n 500" "read_bw -q 2 -s 3000 -n 300" "atomic_bw -n 500" \
         "atomic_bw -n 500 -A CMP_AND_SWAP" "send_bw -q 2 -s 200 -n 500 -r 64" \
         "send_bw -c UD -s 200 -n 500" "send_bw -c UC -s 300 -n 500" "write_bw -c UC -s 64 -n 500"; do
  set -- $t
  check_bw "$t -b --loopback" "$(sed 's/.*-n \([0-9]*\).*/\1/' <<<"$t")" 1 -- "$PERF" $t -b --loopback -d "$S" --check
done
check_bw "write_bw -b -D 1 --loopback" - 1 -- "$PERF" write_bw -b -D 1 -s 256 --loopback -d "$S" --check
check_bw "send_bw --use_srq -q 4 --loopback" 1000 1 -- "$PERF" send_bw --use_srq --loopback -d "$S" -q 4 -s 100 -n 1000 -r 64 --check
check_bw "send_bw --use_srq -b -q 2 --loopback" 500 1 -- "$PERF" send_bw --use_srq -b --loopback -d "$S" -q 2 -s 100 -n 500 -r 64 --check
check_lat "send_lat --use_srq --loopback" 100 -- "$PERF" send_lat --use_srq --loopback -d "$S" -n 100 --check
for t in write_lat read_lat send_lat atomic_lat; do
  check_lat "$t -e --loopback" 100 -- "$PERF" $t -e --loopback -d "$S" -n 100 --check
  grep -q "Use events      : ON" <<<"$LAST_OUT" || fail "$t -e: the header does not say events are on"
done
check_lat "send_lat -c UD --loopback" 100 -- "$PERF" send_lat -c UD --loopback -d "$S" -n 100 --check
check_lat "write_lat -c UC --loopback" 100 -- "$PERF" write_lat -c UC --loopback -d "$S" -n 100 --check

# --- 1c. JSON / CSV: the files hold what the table printed; --progress; -R
J=$WORK/out.json
check_bw "write_bw -a --out_json_file --out_csv_file" 5 23 -- "$PERF" write_bw --loopback -d "$S" -a -n 5 -t 4 -Q 1 --check --out_json_file="$J" --out_csv_file="$WORK/out.csv"
python3 "$HERE/check_json.py" bw "$J" "$WORK/out.csv" <<<"$LAST_OUT" && pass "write_bw JSON / CSV match the table (23 rows, perftest keys)" || fail "write_bw JSON / CSV"
cp "$J" "$WORK/write_bw.json"
check_lat "send_lat --out_json (default file name) --out_csv_file" 200 -- bash -c "cd '$WORK' && '$(realpath "$PERF")' send_lat --loopback -d '$S' -n 200 --check --out_json --out_csv_file=lat.csv"
python3 "$HERE/check_json.py" lat "$WORK/perftest_out.json" "$WORK/lat.csv" <<<"$LAST_OUT" && pass "send_lat JSON / CSV match the table" || fail "send_lat JSON / CSV"
check_bw "send_bw -c UD -a --out_json_file" 50 10 -- "$PERF" send_bw -c UD --loopback -d "$S" -a -n 50 --out_json_file="$WORK/send_bw_ud.json" --check
out=$(timeout 60 "$PERF" write_bw --loopback -d "$S" -n 5 --out_json_file="$WORK/no/such/dir/x.json" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "cannot write $WORK/no/such/dir/x.json" <<<"$out" && pass "an unwritable JSON file: exit 1" || fail "unwritable JSON: exit $rc: $out"
check_bw "write_bw -D 3 --progress" - 1 -- "$PERF" write_bw --loopback -d "$S" -s 1024 -D 3 --progress --check
n=$(grep -cE "^ progress: [0-9]+ s  [0-9.]+ MB/sec  [0-9.]+ Mpps  [0-9]+ messages$" <<<"$LAST_OUT")
[ "$n" -ge 2 ] && [ "$n" -le 3 ] && pass "--progress: $n lines in 3 s" || fail "--progress: $n lines: $LAST_OUT"
out=$(timeout 60 "$PERF" write_bw --loopback -d "$S" -n 5 2>&1)
grep -q "progress:" <<<"$out" && fail "progress lines without --progress"

# --- 1d. charts from the JSON files above (real output: 23 + 10 sizes, one latency run)
cp "$WORK/perftest_out.json" "$WORK/send_lat.json"
out=$(timeout 120 "$PLOT" -o "$WORK/chart" "$WORK/write_bw.json" "$WORK/send_bw_ud.json" "$WORK/send_lat.json" 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(wc -l <<<"$out")" -eq 4 ]; then pass "uroce-perf-plot: $(tr '\n' ' ' <<<"$out")"; else fail "uroce-perf-plot: exit $rc: $out"; fi
for f in chart-bw.png chart-lat.png; do
  python3 "$HERE/check_chart.py" "$WORK/$f" >/dev/null && pass "$f is a PNG" || fail "$f: $(python3 "$HERE/check_chart.py" "$WORK/$f" 2>&1)"
done
python3 "$HERE/check_chart.py" "$WORK/chart-bw.svg" "Message size [bytes]" "Bandwidth (average) [MB/sec]" \
  "Message rate [Mpps]" "write_bw RC" "send_bw UD" && pass "chart-bw.svg: axes and both series" || fail "chart-bw.svg"
python3 "$HERE/check_chart.py" "$WORK/chart-lat.svg" "Latency [usec]" "Percentile" "send_lat RC p50" \
  "send_lat RC p99" "send_lat RC p99.9" "send_lat RC 2 B" && pass "chart-lat.svg: axes and the percentile series" || fail "chart-lat.svg"

# --- 2. two uroced on net_memif, server and client in two processes over TCP
daemon a 0 "net_memif0,role=server,socket=$WORK/memif.sock,id=0" 10.82.0.1
daemon b 1 "net_memif0,role=client,socket=$WORK/memif.sock,id=0" 10.82.0.2
PORT=$((20000 + ID % 20000))
for t in "write_bw -q 2 -s 1000 -n 1000" "send_lat -s 64 -n 100" "write_bw -b -q 2 -s 2000 -n 500" \
         "send_bw -c UD -b -s 500 -n 500"; do
  set -- $t
  timeout 120 "$PERF" $t -d "$WORK/a.sock" -p $PORT >"$WORK/server.log" 2>&1 &
  SPID=$!
  if [ "$1" != send_lat ]; then
    check_bw "two processes, two uroced on memif: $t" "$(sed 's/.*-n \([0-9]*\).*/\1/' <<<"$t")" 1 -- "$PERF" $t -d "$WORK/b.sock" -p $PORT --check 127.0.0.1
  else
    check_lat "two processes, two uroced on memif: $t" 100 -- "$PERF" $t -d "$WORK/b.sock" -p $PORT --check 127.0.0.1
  fi
  wait $SPID; rc=$?
  [ $rc -eq 0 ] && grep -q "Waiting for client to connect" "$WORK/server.log" \
    && pass "server process ($1): exit 0" || fail "server process ($1): exit $rc"
done
# --- 3. a client killed mid-run: the server notices (exit 1) instead of waiting
timeout 120 "$PERF" send_bw -d "$WORK/a.sock" -p $PORT >"$WORK/server-kill.log" 2>&1 &
SPID=$!
"$PERF" send_bw -d "$WORK/b.sock" -p $PORT -s 64 -D 60 127.0.0.1 >"$WORK/client-kill.log" 2>&1 &
CPID=$!
for _ in $(seq 300); do grep -q "#bytes" "$WORK/client-kill.log" && break; sleep 0.1; done
sleep 1
kill -KILL $CPID; wait $CPID 2>/dev/null
for _ in $(seq 150); do kill -0 $SPID 2>/dev/null || break; sleep 0.1; done
if kill -0 $SPID 2>/dev/null; then
  fail "the server still runs 15 s after its client was killed"; kill -KILL $SPID
  wait $SPID 2>/dev/null
else
  wait $SPID; rc=$?
  [ $rc -eq 1 ] && grep -q "went away" "$WORK/server-kill.log" \
    && pass "client SIGKILLed mid-run: the server exits 1 ($(grep -o 'the client went away[a-z ]*' "$WORK/server-kill.log" | head -1))" \
    || fail "client killed: server exit $rc: $(tail -2 "$WORK/server-kill.log")"
fi
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
