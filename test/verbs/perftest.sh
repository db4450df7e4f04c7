#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Integration test of the verbs shim (drivers/verbs, doc/verbs.md) with UNMODIFIED perftest
# binaries (Debian's perftest package) over two uroced joined by net_memif: every RC test tool
# (ib_write_bw / _lat, ib_read_bw / _lat, ib_send_bw / _lat, ib_atomic_bw / _lat), server on
# daemon B, client on daemon A, `-d DEV -x 1` (GID index 1 = the IPv4-mapped RoCE v2 GID):
#   - the bw tests with -a (every size 2 B ... 8 MB), small iteration counts (-n);
#   - ib_write_bw, ib_send_bw and ib_read_bw with -q 4 (four QPs), -a too for write and send;
#   - event mode (-e: completion channel + ibv_get_cq_event) for send_bw, read_bw, send_lat
#     (perftest refuses -e with RDMA WRITE);
#   - both atomics (fetch&add and compare&swap, the latter on 2 QPs);
#   - the latency tests at 2 B and 4 KB;
#   - against a peer with more READ / atomic responder resources than ours (Linux rxe reports
#     max_qp_rd_atom 128): perftest 4.5 moves its QP to RTS with max_rd_atomic = the peer's
#     advertised out_reads. perftest_outreads_proxy.py relays the out-of-band exchange and
#     rewrites each side's out_reads to 128; ib_read_lat, ib_atomic_lat (one READ / atomic in
#     flight) and ib_read_bw / ib_atomic_bw with -t 16 (at most 16 in flight, our responder's
#     max_dest_rd_atomic) must then pass.
# Each run must exit 0 on both sides, print no error text, and the client (and, where perftest
# prints one, the server) must print its result table with one row per expected size, the
# expected iteration count and a non-zero bandwidth / latency.
# Every wait is bounded; every process started is stopped by PID.
# Usage: perftest.sh PATH/TO/uroced SHIM_DIR (the directory holding libibverbs.so.1)
set -uo pipefail

UROCED=${1:?usage: $0 UROCED SHIM_DIR}
SHIM=${2:?usage: $0 UROCED SHIM_DIR}
for t in ib_write_bw ib_write_lat ib_read_bw ib_read_lat ib_send_bw ib_send_lat ib_atomic_bw \
         ib_atomic_lat ibv_devinfo timeout ss python3; do
  command -v $t >/dev/null || { echo "FAIL: '$t' not found (scripts/install-deps.sh installs it)"; exit 1; }
done
NAME=perftest
# shellcheck source=two_uroced.sh
. "$(dirname "$0")/two_uroced.sh"

# check_table LOG KIND ITERS SIZES...: the result table of one side. KIND bw: rows
# "bytes iters peak avg msgrate" with avg > 0; KIND lat: rows "bytes iters t_min t_max ..."
# with t_min > 0. Exactly one row per size, in order. (The bw tests' MB/s column rounds to 0.00
# for 2-byte messages: either MB/s or Mpps must be non-zero.)
check_table() {
  local log=$1 kind=$2 iters=$3
  shift 3
  local want="$*"
  local got
  got=$(awk -v kind="$kind" -v iters="$iters" '
    /^ *#bytes/ { intable = 1; next }
    intable && /^-+$/ { intable = 0; next }
    intable && NF >= 5 && $1 ~ /^[0-9]+$/ {
      ok = ($2 == iters)
      if (kind == "bw") ok = ok && ($4 + 0 > 0 || $5 + 0 > 0)
      else ok = ok && ($3 + 0 > 0) && ($4 + 0 >= $3 + 0)
      printf "%s%s ", $1, ok ? "" : "!"
    }' "$log")
  [ "${got% }" = "$want" ] || { echo "  table rows '${got% }', expected '$want' (iterations $iters)"; return 1; }
}

ALL_SIZES=$(for i in $(seq 1 23); do printf "%d " $((1 << i)); done)
ALL_SIZES=${ALL_SIZES% }

# QP timeout -u 17 (4.096 us x 2^17 = 0.54 s, x 8 tries = 4.3 s without progress before
# RETRY_EXC_ERR) instead of perftest's 14 (67 ms, 0.5 s): on the loaded 2-core CI machine the
# daemons and the four polling tools share two cores, and runs with the default timeout ended
# in RETRY_EXC_ERR (status 12) at load ~12-18 (doc/verbs.md). The daemons' ports no longer drop
# the frames their TX ring refuses (TX back-pressure, doc/uroced.md), no frame is lost, and the
# default still fails now and then: see doc/verbs.md. PERFTEST_QP_TIMEOUT overrides it
# (PERFTEST_QP_TIMEOUT=14: perftest's default).
QP_ARGS=(-u "${PERFTEST_QP_TIMEOUT:-17}")
UROCE_STAT=$(dirname "$UROCED")/../uroce-stat/uroce-stat
# stats SOCK: the counters that tell a lost frame from a late one (printed on a failure).
stats() {
  [ -x "$UROCE_STAT" ] || return 0
  timeout 10 "$UROCE_STAT" -s "$1" 2>/dev/null |
    grep -E 'retransmits|timeouts|seq_naks|rnr_naks|tx_dropped|tx_deferred|tx_backpressure|tx_pending|tx_alloc_fail|engine\.(tx|rx)_pkts|engine\.drop|handoff_drop' |
    grep -vE ' 0$'
}
PORT=$((30000 + (ID % 20000)))
PROXY=$(dirname "$0")/perftest_outreads_proxy.py
OUT_READS=""  # set: the client reaches the server through the proxy, which claims OUT_READS
PID_P=""
# perftest KIND ITERS "SIZES" SERVER_TABLE TOOL ARGS...: one server/client run. SERVER_TABLE:
# what the server prints: "all" (ib_send_bw: the same table as the client), "last" (ib_write_bw,
# ib_read_bw, ib_atomic_bw: the row of the last size only), "none" (latency tests).
perftest() {
  local kind=$1 iters=$2 sizes=$3 stable=$4 tool=$5
  shift 5
  PORT=$((PORT + 1))
  rm -f "$WORK/server.log" "$WORK/client.log"
  : >"$WORK/client.log"
  on "$SOCK_B" timeout 120 "$tool" -d uroce_b -x 1 "${QP_ARGS[@]}" -p "$PORT" "$@" >"$WORK/server.log" 2>&1 &
  PID_S=$!
  local up=0
  for _ in $(seq 200); do
    if ss -ltnH "sport = :$PORT" 2>/dev/null | grep -q .; then up=1; break; fi
    kill -0 "$PID_S" 2>/dev/null || break
    sleep 0.1
  done
  local rc_c=1 rc_s
  local cport=$PORT rc_p=0
  if [ $up -eq 1 ] && [ -n "$OUT_READS" ]; then
    cport=$((PORT + 100))
    rm -f "$WORK/proxy.log"
    timeout 115 python3 "$PROXY" "$cport" "$PORT" "$OUT_READS" >"$WORK/proxy.log" 2>&1 &
    PID_P=$!
    up=0
    for _ in $(seq 100); do
      grep -q listening "$WORK/proxy.log" 2>/dev/null && { up=1; break; }
      kill -0 "$PID_P" 2>/dev/null || break
      sleep 0.1
    done
  fi
  if [ $up -eq 1 ]; then
    on "$SOCK_A" timeout 120 "$tool" -d uroce0 -x 1 "${QP_ARGS[@]}" -p "$cport" "$@" 127.0.0.1 >"$WORK/client.log" 2>&1
    rc_c=$?
  fi
  if [ -n "$PID_P" ]; then
    wait "$PID_P"; rc_p=$?
    PID_P=""
  fi
  wait "$PID_S"; rc_s=$?
  PID_S=""
  local why=""
  [ $up -eq 1 ] || why="server never listened; "
  [ $rc_c -eq 0 ] || why+="client exit $rc_c; "
  [ $rc_s -eq 0 ] || why+="server exit $rc_s; "
  if [ -n "$OUT_READS" ]; then
    # Each side's key record (one per QP) rewritten: both sides were told OUT_READS.
    grep -qE "^rewritten ([2-9]|[1-9][0-9]+)$" "$WORK/proxy.log" && [ $rc_p -eq 0 ] ||
      why+="proxy: exit $rc_p, $(tr '\n' ' ' <"$WORK/proxy.log"); "
  fi
  if grep -qiE "couldn't|failed|error|unable|not supported|invalid" "$WORK/client.log" "$WORK/server.log"; then
    why+="error text; "
  fi
  check_table "$WORK/client.log" "$kind" "$iters" $sizes || why+="client table; "
  if [ "$stable" = all ]; then
    check_table "$WORK/server.log" "$kind" "$iters" $sizes || why+="server table; "
  elif [ "$stable" = last ]; then
    check_table "$WORK/server.log" "$kind" "$iters" "${sizes##* }" || why+="server table; "
  fi
  if [ -z "$why" ]; then
    local last
    last=$(awk '/^ *#bytes/ { t = 1; next } t && $1 ~ /^[0-9]+$/ { l = $0 } END { print l }' "$WORK/client.log")
    pass "$tool $*: $(echo "$last" | tr -s ' \t' ' ')"
  else
    fail "$tool $*: $why"
    sed 's/^/  server: /' "$WORK/server.log"
    sed 's/^/  client: /' "$WORK/client.log"
    stats "$SOCK_A" | sed 's/^/  uroced A: /'
    stats "$SOCK_B" | sed 's/^/  uroced B: /'
  fi
}

START=$SECONDS
# bw tests, all sizes. Iterations: -n per QP; the table counts all QPs' iterations.
# (perftest refuses -e for ib_write_bw and ib_write_lat: "Events feature not available on WRITE
# verb"; event mode runs with send and read.)
perftest bw 10 "$ALL_SIZES" last ib_write_bw -a -n 10
perftest bw 40 "$ALL_SIZES" last ib_write_bw -a -n 10 -q 4
perftest bw 10 "$ALL_SIZES" last ib_read_bw -a -n 10
perftest bw 200 "65536" last ib_read_bw -n 50 -q 4 -e
perftest bw 10 "$ALL_SIZES" all ib_send_bw -a -n 10
perftest bw 40 "$ALL_SIZES" all ib_send_bw -a -n 10 -q 4
perftest bw 200 "4096" all ib_send_bw -n 200 -s 4096 -e
perftest bw 200 "8" last ib_atomic_bw -n 200
perftest bw 400 "8" last ib_atomic_bw -n 200 -A CMP_AND_SWAP -q 2
# latency tests
perftest lat 200 "2" none ib_write_lat -n 200
perftest lat 100 "4096" none ib_write_lat -n 100 -s 4096
perftest lat 200 "2" none ib_read_lat -n 200
perftest lat 100 "4096" none ib_read_lat -n 100 -s 4096
perftest lat 200 "2" none ib_send_lat -n 200
perftest lat 200 "2" none ib_send_lat -n 200 -e
perftest lat 200 "8" none ib_atomic_lat -n 200
perftest lat 200 "8" none ib_atomic_lat -n 200 -A CMP_AND_SWAP
# A peer advertising 128 outstanding READs / atomics (rxe's max_qp_rd_atom): both sides move
# their QPs to RTS with max_rd_atomic 128 (was EINVAL: "Failed to modify QP to RTS").
OUT_READS=128
perftest lat 200 "2" none ib_read_lat -n 200
perftest lat 200 "8" none ib_atomic_lat -n 200
perftest bw 200 "65536" last ib_read_bw -n 200 -t 16
perftest bw 200 "8" last ib_atomic_bw -n 200 -t 16
OUT_READS=""
echo "perftest runs took $((SECONDS - START)) s"
echo "daemon counters (non-zero; losses would show as retransmits / timeouts / tx_dropped):"
stats "$SOCK_A" | sed 's/^/  uroced A: /'
stats "$SOCK_B" | sed 's/^/  uroced B: /'

kill -0 "$PID_A" 2>/dev/null && kill -0 "$PID_B" 2>/dev/null || fail "a daemon died"
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
