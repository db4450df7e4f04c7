#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Integration test: two uroced instances joined by net_memif (A: memif server, B: memif client,
# distinct --file-prefix, --no-huge -m 256), and apps on lib/client talking to both:
#   1. verbs_app run: RC SEND / WRITE (data checked) / WRITE_WITH_IMM / READ / atomics, UD SEND,
#      UC WRITE, completion events, corrupt WQEs failing only their own QP.
#      verbs_app requester / responder: two app processes, one on each daemon (RC WRITE,
#      READ, SEND, data checked by both).
#      verbs_app fuzz: seeded random WQEs (mostly malformed in some rounds, mostly valid in
#      others): exactly one completion each, no byte outside the MRs changes, daemons alive.
#   2. uroce-stat on both daemons: counters present, traffic counted, per-QP counters.
#   3. verbs_app hold (RDMA WRITEs in a loop) is SIGKILLed mid-transfer while another
#      verbs_app run is under way (which must pass): both daemons free everything the victim
#      owned (uroce-stat: no QP, MR, CQ or PD left, the session closed), and a new run works.
#   3a. verbs_app placement on A: QPs over the workers (a QP whose CQs are bound to
#      two workers), RC SEND / WRITE between two QPs of A through its own port.
#   4. SIGTERM stops both daemons with exit 0.
#   5. Both daemons captured everything (daemon.pcap): every capture passes uroce-pcap-check
#      (every RoCE frame parses, every ICRC valid) and tshark (no malformed frame, no expert
#      info, the BTH fields of our own parse): check_capture.py --daemon. With WORKERS=2 the
#      captures hold every lane's frames: check_capture.py --lanes (every frame the engines
#      committed and every frame the peer sent is in the capture, frames of worker-1 QPs both
#      ways).
# Needs root (as the other integration tests; CI runs as root). Every wait is bounded; every
# process it starts is stopped by PID on exit; its files and DPDK runtime directories go too.
# Usage: uroced_pair.sh UROCED UROCE_STAT VERBS_APP UROCE_PCAP_CHECK CHECK_CAPTURE_PY [WORKERS]
# WORKERS=2: both daemons run two worker lcores (0 and 1; net_memif with two queue pairs), QPs
# are placed on both workers, and the test also checks that frames crossed between lcores
# (worker.*.handoff_out / handoff_in, forwarded doorbells) and nothing was misrouted.
set -uo pipefail

USAGE="usage: $0 UROCED UROCE_STAT VERBS_APP UROCE_PCAP_CHECK CHECK_CAPTURE_PY [WORKERS]"
UROCED=${1:?$USAGE}
STAT=${2:?$USAGE}
APP=${3:?$USAGE}
PCAP_CHECK=${4:?$USAGE}
CHECK_CAPTURE=${5:?$USAGE}
WORKERS=${6:-1}
case "$WORKERS" in 1|2) ;; *) echo "FAIL: WORKERS must be 1 or 2"; exit 1;; esac
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
need_root "like the other integration tests"
need_tools timeout tshark python3

# RC local ACK timeout 268 ms for every verbs_app QP: seven retries then ride out ~1.9 s of a
# daemon starved of CPU (both daemons capture and busy-poll on two shared cores).
export UROCE_TEST_ACK_TIMEOUT=16

ID=$$
# The captures go to tmpfs, so a busy disk never stalls a poll loop.
SHM=/dev/shm
[ -d "$SHM" ] && [ -w "$SHM" ] || SHM=/tmp
WORK=$(mktemp -d "$SHM/uroce-pair-XXXXXX")
PID_A="" PID_B="" PID_V="" PID_C=""

cleanup() {
  [ -n "$PID_V" ] && stop_pid "$PID_V" KILL >/dev/null 2>&1
  [ -n "$PID_C" ] && stop_pid "$PID_C" KILL >/dev/null 2>&1
  [ -n "$PID_A" ] && stop_pid "$PID_A" TERM >/dev/null 2>&1
  [ -n "$PID_B" ] && stop_pid "$PID_B" TERM >/dev/null 2>&1
  rm -rf "/var/run/dpdk/uroce-pair-$ID-a" "/var/run/dpdk/uroce-pair-$ID-b"
  if [ "$FAILS" -ne 0 ]; then
    for f in a b; do echo "--- uroced $f log"; tail -40 "$WORK/uroced-$f.log" 2>/dev/null; done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# Daemon A: memif server, lcore 0. Daemon B: memif client, lcore 1. Both nap when idle.
# With WORKERS=2 both run lcores 0 (main + worker 0) and 1 (worker 1).
# Both capture (on tmpfs); with two workers, worker 1's frames reach the file through its
# capture ring (doc/uroced.md, Capture).
conf() {  # conf NAME ROLE LCORE IP
  local lcores=$3
  [ "$WORKERS" = 2 ] && lcores=0,1
  cat >"$WORK/uroced-$1.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-pair-$ID-$1 --log-level=*:notice
[daemon]
socket = $WORK/uroced-$1.sock
workers = $lcores
mbufs = 4095
idle_sleep_us = 50
pcap = $WORK/uroced-$1.pcap
[port p0]
device = net_memif0,role=$2,socket=$WORK/memif.sock,id=0
ipv4 = $4/24
EOF
  # A runs DCQCN (nothing marks CE on memif: its QPs stay unthrottled); B runs none.
  [ "$1" = a ] && printf '[cc]\nalgorithm = dcqcn\n' >>"$WORK/uroced-$1.conf"
  return 0
}
conf a server 0 10.79.0.1
conf b client 1 10.79.0.2

start() {  # start NAME -> sets PID_<NAME>
  env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/uroced-$1.conf" \
    >"$WORK/uroced-$1.log" 2>&1 &
  eval "PID_${1^^}=$!"
}
wait_running() {  # wait_running NAME PID: up to 60 s (the EAL loads every PMD)
  for _ in $(seq 600); do
    grep -q "uroced: running" "$WORK/uroced-$1.log" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
start a
wait_running a "$PID_A" || { fail "uroced A did not come up: $(tail -5 "$WORK/uroced-a.log")"; exit 1; }
start b
wait_running b "$PID_B" || { fail "uroced B did not come up: $(tail -5 "$WORK/uroced-b.log")"; exit 1; }
pass "two uroced on net_memif (pids $PID_A, $PID_B)"
SOCK_A=$WORK/uroced-a.sock
SOCK_B=$WORK/uroced-b.sock

stat() {  # stat NAME KEY -> value (empty if absent)
  timeout 30 "$STAT" -s "$WORK/uroced-$1.sock" "$2" 2>/dev/null | awk -v k="$2" '$1 == k { print $2 }'
}

# --- 0. a second uroced on a live control socket refuses to start (exit 1)
out=$(timeout 120 env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/uroced-a.conf" \
  --set "eal.args=--no-huge -m 256 --no-pci --file-prefix=uroce-pair-$ID-c --log-level=*:notice" \
  --set port.p0.device=net_ring0 --set daemon.workers=1 --set daemon.pcap= 2>&1); rc=$?
rm -rf "/var/run/dpdk/uroce-pair-$ID-c"
if [ $rc -eq 1 ] && grep -q "cannot listen on control socket '$SOCK_A': Address already in use" <<<"$out"; then
  pass "a second uroced on A's socket: exit 1, $(grep "cannot listen" <<<"$out")"
else
  fail "a second uroced on A's socket: exit $rc: $(tail -3 <<<"$out")"
fi

# --- 1. the verbs operations (memif link-up and ARP happen on the first modify_qp)
verbs_app_run "$APP" "$SOCK_A" "$SOCK_B" "verbs_app run: every operation between the two daemons"

# --- 1a. two apps in two processes, one on each daemon (rendezvous through files)
mkdir "$WORK/rv"
timeout 300 "$APP" responder "$SOCK_B" "$WORK/rv" >"$WORK/responder.log" 2>&1 &
PID_R=$!
timeout 300 "$APP" requester "$SOCK_A" "$WORK/rv" >"$WORK/requester.log" 2>&1; rc_q=$?
wait "$PID_R"; rc_r=$?
if [ $rc_q -eq 0 ] && [ $rc_r -eq 0 ]; then
  pass "two app processes: RC WRITE, READ, SEND between them (data checked on both sides)"
else
  fail "two app processes: requester exit $rc_q, responder exit $rc_r"
  sed 's/^/  requester: /' "$WORK/requester.log"; sed 's/^/  responder: /' "$WORK/responder.log"
fi

# --- 1b. random WQEs (seeded; UROCE_SEED reproduces a run)
SEED=${UROCE_SEED:-$(( $(date +%s) % 100000 ))}
out=$(timeout 300 "$APP" fuzz "$SOCK_A" "$SOCK_B" "$SEED" 30 2>&1); rc=$?
echo "$out" | grep -v "^ok: RC SEND" | sed 's/^/  app: /'
if [ $rc -eq 0 ] && grep -q "^0 failure(s)" <<<"$out"; then
  pass "verbs_app fuzz (UROCE_SEED=$SEED): one completion per WQE, nothing outside the MRs touched, daemons alive"
else
  fail "verbs_app fuzz (UROCE_SEED=$SEED): exit $rc"
fi
kill -0 "$PID_A" 2>/dev/null && kill -0 "$PID_B" 2>/dev/null || fail "a daemon died during the fuzz run"

# --- 2. uroce-stat
all=$(timeout 30 "$STAT" -s "$SOCK_A" 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q "^engine.tx_pkts " <<<"$all" && grep -q "^port.p0.rx_roce " <<<"$all"; then
  pass "uroce-stat A: $(wc -l <<<"$all") counters"
else
  fail "uroce-stat A: exit $rc: $all"
fi
# Lower bounds from the run: A's 100000-byte WRITE alone is 98 packets at path MTU 1024 (B
# receives them), B's 50000-byte READ response is 49 packets (A receives them).
check_min() {  # check_min DAEMON KEY MIN
  local v; v=$(stat "$1" "$2")
  [ "${v:-0}" -ge "$3" ] && pass "daemon $1: $2=$v (>= $3)" || fail "daemon $1: $2='${v:-}', expected >= $3"
}
check_min a engine.tx_pkts 98
check_min b port.p0.rx_roce 98
check_min b engine.tx_pkts 49
check_min a port.p0.rx_roce 49
check_min a bridge.send_wqes 10
check_min b bridge.recv_wqes 8
bw=$(stat a bridge.bad_wqes)
[ "${bw:-0}" -ge 2 ] && pass "daemon a: bridge.bad_wqes=$bw (run: 2; the rest from the fuzz run)" \
  || fail "daemon a bridge.bad_wqes = '$bw', expected >= 2 (bad opcode, too many SGEs)"
for d in a b; do
  for k in daemon.qps daemon.mrs daemon.cqs daemon.pds; do
    v=$(stat $d $k)
    [ "$v" = 0 ] || fail "daemon $d: $k = '$v' after the app closed everything"
  done
done

# --- 3. an app killed mid-transfer
"$APP" hold "$SOCK_A" "$SOCK_B" >"$WORK/victim.log" 2>&1 &
PID_V=$!
for _ in $(seq 600); do
  grep -q transferring "$WORK/victim.log" && break
  kill -0 "$PID_V" 2>/dev/null || break
  sleep 0.1
done
if grep -q transferring "$WORK/victim.log"; then
  pass "victim app transferring: $(cat "$WORK/victim.log")"
  qa=$(stat a daemon.qps); qb=$(stat b daemon.qps)
  [ "$qa" = 1 ] && [ "$qb" = 1 ] && pass "while it runs: one QP on each daemon" \
    || fail "while the victim runs: daemon.qps A='$qa' B='$qb', expected 1 and 1"
  vq=$(sed -n 's/.*qp \([0-9]*\) -> .*/\1/p' "$WORK/victim.log")
  t1=$(stat a "qp.$vq.tx_pkts"); sleep 0.5; t2=$(stat a "qp.$vq.tx_pkts")
  [ "${t2:-0}" -gt "${t1:-0}" ] && pass "victim's qp $vq is sending (tx_pkts $t1 -> $t2)" \
    || fail "victim's qp $vq tx_pkts '$t1' -> '$t2'"
  # Per-QP DCQCN counters (doc/congestion.md): A's QP at line rate, no CNP, no cut.
  cc=$(for k in cc_throttled cc_rate_mbps cc_target_mbps cc_cnps_handled cc_rate_cuts; do
         printf '%s ' "$(stat a "qp.$vq.$k")"; done)
  [ "$cc" = "0 100000 100000 0 0 " ] && pass "victim's qp $vq CC counters: $cc" \
    || fail "victim's qp $vq CC counters (throttled rate target cnps cuts) = '$cc'"
  # Another app starts its whole run now; the victim dies while it is under way.
  timeout 300 "$APP" run "$SOCK_A" "$SOCK_B" >"$WORK/concurrent.log" 2>&1 &
  PID_C=$!
  for _ in $(seq 300); do  # until the concurrent app has its QPs connected (up to 30 s)
    grep -q "RC QPs connected" "$WORK/concurrent.log" && break
    sleep 0.1
  done
  kill -KILL "$PID_V"
  wait "$PID_V" 2>/dev/null
  PID_V=""
  wait "$PID_C"; rc=$?
  PID_C=""
  if [ $rc -eq 0 ] && grep -q "^0 failure(s)" "$WORK/concurrent.log"; then
    pass "an app running while the victim was killed completed every operation"
  else
    fail "concurrent app: exit $rc"; sed 's/^/  app: /' "$WORK/concurrent.log"
  fi
  ok=0
  for _ in $(seq 100); do  # up to 10 s for both daemons to notice
    if [ "$(stat a daemon.qps)" = 0 ] && [ "$(stat b daemon.qps)" = 0 ] &&
       [ "$(stat a daemon.mrs)" = 0 ] && [ "$(stat b daemon.mrs)" = 0 ]; then ok=1; break; fi
    sleep 0.1
  done
  if [ $ok = 1 ]; then
    pass "after SIGKILL: both daemons freed the victim's QPs and MRs"
  else
    fail "after SIGKILL: daemon.qps A='$(stat a daemon.qps)' B='$(stat b daemon.qps)' mrs A='$(stat a daemon.mrs)' B='$(stat b daemon.mrs)'"
  fi
  for d in a b; do
    for k in daemon.cqs daemon.pds; do
      v=$(stat $d $k); [ "$v" = 0 ] || fail "daemon $d: $k = '$v' after the victim died"
    done
    s=$(stat $d daemon.sessions)
    [ "$s" = 1 ] && pass "daemon $d: only uroce-stat's own session left" || fail "daemon $d: daemon.sessions = '$s'"
  done
  out=$(timeout 300 "$APP" run "$SOCK_A" "$SOCK_B" 2>&1); rc=$?
  if [ $rc -eq 0 ] && grep -q "^0 failure(s)" <<<"$out"; then
    pass "another app works after the kill"
  else
    fail "verbs_app run after the kill: exit $rc"; echo "$out" | sed 's/^/  app: /'
  fi
else
  fail "victim app did not start transferring: $(cat "$WORK/victim.log")"
fi

# --- 3a. placement over the workers, and two QPs of one daemon talking through its own port
out=$(timeout 120 "$APP" placement "$SOCK_A" "$WORKERS" 2>&1); rc=$?
echo "$out" | sed 's/^/  app: /'
if [ $rc -eq 0 ] && grep -q "^0 failure(s)" <<<"$out"; then
  pass "verbs_app placement ($WORKERS worker(s)): QPN owners, split CQs, same-port RC SEND / WRITE"
else
  fail "verbs_app placement: exit $rc"
fi

# --- 3b. two workers: traffic crossed between the lcores of each daemon
if [ "$WORKERS" = 2 ]; then
  total_out=0 total_in=0
  for d in a b; do
    ws=$(stat $d daemon.workers)
    [ "$ws" = 2 ] && pass "daemon $d: daemon.workers=2" || fail "daemon $d: daemon.workers='$ws'"
    for w in 0 1; do
      o=$(stat $d worker.$w.handoff_out); i=$(stat $d worker.$w.handoff_in)
      m=$(stat $d worker.$w.misrouted); r=$(stat $d worker.$w.queue_rx_packets)
      total_out=$((total_out + ${o:-0})); total_in=$((total_in + ${i:-0}))
      [ "${m:-x}" = 0 ] || fail "daemon $d worker $w: misrouted='$m'"
      [ "${r:-0}" -gt 0 ] && pass "daemon $d worker $w: its queue received $r frames" \
        || fail "daemon $d worker $w: queue_rx_packets='$r'"
      t=$(stat $d worker.$w.tx_pkts)
      [ "${t:-0}" -gt 0 ] && pass "daemon $d worker $w: its engine sent $t packets (QPs on it)" \
        || fail "daemon $d worker $w: engine tx_pkts='$t' (no QP placed on it?)"
    done
  done
  [ "$total_out" -gt 0 ] && [ "$total_in" -gt 0 ] \
    && pass "frames handed between lcores: handoff_out=$total_out handoff_in=$total_in" \
    || fail "no cross-lcore hand-off: handoff_out=$total_out handoff_in=$total_in"
  # Doorbells go straight to the owner: worker 1 reads its own doorbell rings (doc/ipc.md).
  f=$(( $(stat a worker.1.doorbells) + $(stat b worker.1.doorbells) ))
  [ "$f" -gt 0 ] && pass "doorbells read by worker 1 itself: $f" || fail "worker 1 read no doorbell"
  # verbs_app placement: q8's 3 receives on a CQ of the other worker (doc/ipc.md).
  cf=$(stat a bridge.cqes_forwarded)
  [ "${cf:-0}" -ge 3 ] && pass "CQEs forwarded to their CQ's worker: $cf" \
    || fail "bridge.cqes_forwarded = '${cf:-}', expected >= 3"
fi

# --- 4. clean shutdown
for d in a b; do stop_uroced $d '^bridge counters'; done

# --- 5. the captures (written and closed at exit)
out=$(timeout 300 python3 "$CHECK_CAPTURE" --daemon "$PCAP_CHECK" "$(command -v tshark)" 1000 \
  "$WORK/uroced-a.pcap" "$WORK/uroced-b.pcap" 2>&1); rc=$?
echo "$out" | sed 's/^/  /'
[ $rc -eq 0 ] && pass "captures: uroce-pcap-check and tshark accept every frame" \
  || fail "captures: check_capture.py --daemon exit $rc"
if [ "$WORKERS" = 2 ]; then
  out=$(timeout 300 python3 "$CHECK_CAPTURE" --lanes \
    10.79.0.1 "$WORK/uroced-a.pcap" "$WORK/uroced-a.log" \
    10.79.0.2 "$WORK/uroced-b.pcap" "$WORK/uroced-b.log" 2>&1); rc=$?
  echo "$out" | sed 's/^/  /'
  [ $rc -eq 0 ] && pass "captures hold every lane's frames (worker 1's both ways)" \
    || fail "captures: check_capture.py --lanes exit $rc"
fi

echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
