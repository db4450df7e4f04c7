#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# uroce-perf's command line without a daemon: --help, --version, and every class of bad flag
# (exit 2 with a message naming the flag). A client whose daemon socket does not exist fails
# at run time (exit 1). Needs no root.
# uroce-perf-plot's usage errors (exit 2) and files that are not uroce-perf JSON (exit 1).
# Usage: uroce_perf_cli.sh PATH/TO/uroce-perf PATH/TO/uroce-perf-plot
set -uo pipefail
PERF=${1:?usage: $0 UROCE_PERF UROCE_PERF_PLOT}
PLOT=${2:?usage: $0 UROCE_PERF UROCE_PERF_PLOT}
WORK=$(mktemp -d /tmp/uroce-perf-cli-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
FAILS=0
expect() {  # expect NAME WANT_RC PATTERN -- command...
  local name=$1 want=$2 pat=$3; shift 4
  local out rc
  out=$(timeout 30 "$@" 2>&1); rc=$?
  if [ "$rc" -eq "$want" ] && grep -qE -- "$pat" <<<"$out"; then
    echo "ok: $name"
  else
    echo "FAIL: $name: exit $rc (want $want), output:"; echo "$out"; FAILS=$((FAILS + 1))
  fi
}
expect "--help lists the tests and the flags" 0 "write_bw read_bw send_bw atomic_bw write_lat" -- "$PERF" --help
expect "--help names --loopback" 0 "--loopback" -- "$PERF" --help
expect "--version" 0 "^uroce-perf [0-9]+\.[0-9]+\.[0-9]+$" -- "$PERF" --version
expect "no test" 2 "no test given" -- "$PERF"
expect "no test, only flags" 2 "no test given" -- "$PERF" -s 64
expect "unknown test" 2 "unknown test 'write_bandwidth'" -- "$PERF" write_bandwidth
expect "unknown short option" 2 "unknown option '-z'" -- "$PERF" write_bw -z
expect "unknown long option" 2 "unknown option '--bogus'" -- "$PERF" write_bw --bogus
expect "missing value" 2 "option '-s' needs a value" -- "$PERF" write_bw -s
expect "size 0" 2 "invalid value '0' for -s/--size" -- "$PERF" write_bw -s 0
expect "size too big" 2 "invalid value '8388609' for -s/--size" -- "$PERF" write_bw -s 8388609
expect "size not a number" 2 "invalid value '64k' for -s/--size" -- "$PERF" write_bw -s 64k
expect "negative iterations" 2 "invalid value '-5' for -n/--iters" -- "$PERF" write_bw -n -5
expect "iterations below perftest's minimum" 2 "invalid value '4' for -n/--iters: 5 \.\. 100000000" -- "$PERF" write_bw -n 4
expect "QPs out of range" 2 "invalid value '0' for -q/--qp" -- "$PERF" write_bw -q 0
expect "tx depth out of range" 2 "invalid value '16385' for -t/--tx-depth" -- "$PERF" write_bw -t 16385
expect "bad MTU" 2 "invalid value '1500' for -m/--mtu" -- "$PERF" write_bw -m 1500
expect "bad port" 2 "invalid value '70000' for -p/--port" -- "$PERF" write_bw -p 70000
expect "bad connection type" 2 "invalid value 'XRC' for -c/--connection: RC, UC or UD" -- "$PERF" send_bw -c XRC
expect "UC with READ (perftest refuses)" 2 "UC connection not possible in READ/ATOMIC" -- "$PERF" read_bw -c UC
expect "UC with atomics (perftest refuses)" 2 "UC connection not possible in READ/ATOMIC" -- "$PERF" atomic_lat -c UC
expect "UD with WRITE (perftest refuses)" 2 "UD connection only possible in SEND" -- "$PERF" write_bw -c UD
expect "-b on a latency test" 2 "bidirectional is only available in BW tests" -- "$PERF" send_lat -b
expect "--use_srq on a WRITE test" 2 "SRQ is only available in SEND tests" -- "$PERF" write_bw --use_srq
expect "--use_srq with fewer receives than QPs" 2 "SRQ depth \(-r\) must be at least the number of QPs" -- "$PERF" send_bw --use_srq -q 8 -r 4
expect "-R is refused until the connection manager exists" 2 "rdma_cm not supported yet" -- "$PERF" write_bw -R
expect "--rdma_cm likewise" 2 "rdma_cm not supported yet" -- "$PERF" send_lat --rdma_cm --loopback
expect "--progress on a latency test" 2 "--progress is supported by the bw tests only" -- "$PERF" write_lat --progress
expect "--out_json_file without a name" 2 "invalid value '' for --out_json_file" -- "$PERF" write_bw --out_json_file=
expect "--out_csv_file needs a value" 2 "option '--out_csv_file' needs a value" -- "$PERF" write_bw --out_csv_file
expect "--help names the new flags" 0 "--out_json_file=F.*" -- "$PERF" --help
expect "bad atomic type" 2 "CMP_AND_SWAP or FETCH_AND_ADD" -- "$PERF" atomic_bw -A ADD
expect "atomic size" 2 "atomic tests move 8 bytes" -- "$PERF" atomic_bw -s 64
expect "-a with -s" 2 "-a and -s exclude each other" -- "$PERF" write_bw -a -s 64
expect "-D with -n" 2 "-D and -n exclude each other" -- "$PERF" write_bw -D 2 -n 100
expect "-D on a latency test" 2 "-D is supported by the bw tests only" -- "$PERF" write_lat -D 2
expect "several QPs on a latency test" 2 "latency tests use one QP" -- "$PERF" send_lat -q 2
expect "-e on a latency test is accepted (no daemon: exit 1)" 1 "cannot open uroced's control socket" -- \
  "$PERF" write_lat -e --loopback -d "$WORK/none.sock"
expect "cq-mod above tx depth" 2 "must not exceed the tx depth" -- "$PERF" write_bw -t 16 -Q 32
expect "post list out of range" 2 "invalid value '0' for -l/--post_list" -- "$PERF" write_bw -l 0
expect "post list on a latency test" 2 "-l/--post_list is supported by the bw tests only" -- "$PERF" write_lat -l 4
expect "cq-mod not a multiple of the post list" 2 "must be a multiple of -l/--post_list" -- "$PERF" write_bw -l 4 -Q 6
expect "post list above tx depth" 2 "-l/--post_list must not exceed the tx depth" -- "$PERF" write_bw -l 32 -t 16
expect "iterations not whole lists" 2 "-n/--iters must be a multiple of -l/--post_list" -- "$PERF" write_bw -l 4 -n 10
expect "--loopback with a server" 2 "--loopback runs both sides here" -- "$PERF" write_bw --loopback host
expect "two servers" 2 "unexpected argument 'b'" -- "$PERF" write_bw a b
expect "-T and a test" 2 "the test is given twice" -- "$PERF" write_bw -T read_bw
expect "-T works (then fails to reach uroced: exit 1)" 1 "cannot open uroced's control socket $WORK/none.sock" -- \
  "$PERF" -T write_bw --loopback -d "$WORK/none.sock"
expect "ib_ prefix accepted (no daemon: exit 1)" 1 "cannot open uroced's control socket" -- \
  "$PERF" ib_send_lat --loopback --socket "$WORK/none.sock"
expect "plot: no file" 2 "the following arguments are required: json" -- "$PLOT"
expect "plot: bad format" 2 "invalid choice: 'gif'" -- "$PLOT" -f gif x.json
expect "plot: a missing file" 1 "uroce-perf-plot: $WORK/none.json: .*No such file" -- "$PLOT" "$WORK/none.json"
echo '{"test_info": {}, "results": {}}' >"$WORK/perftest.json"
expect "plot: perftest's own JSON (no rows)" 1 "not uroce-perf JSON" -- "$PLOT" "$WORK/perftest.json"
echo 'not json' >"$WORK/bad.json"
expect "plot: not JSON" 1 "uroce-perf-plot: $WORK/bad.json: Expecting value" -- "$PLOT" "$WORK/bad.json"
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
