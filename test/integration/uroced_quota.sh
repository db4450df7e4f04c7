#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Integration test: per-app quotas (issue 19 item 3, doc/security.md "Quotas").
# Two uroced joined by net_memif (A: memif server, lcore 0; B: memif client, lcore 1); A with
# small quotas (below). While verbs_app bulk moves RC WRITE / READ / SEND traffic from a
# context on A to one on B (every message's data checked), quota_app on A opens PDs, AHs (to
# B's address), CQs, QPs and MRs in a loop until refused and floods control requests without reading the replies.
# Checked: quota_app saw ENOMEM for each object kind and EAGAIN for the flood, and every reply
# of the flood arrived (exit 0); the bulk transfers complete with their data intact; daemon A
# answers uroce-stat while the flood runs, counts the refusals (quota.refused.*) and holds no
# object of either app afterwards. The throughput ratio (the victim's rate under attack over
# its undisturbed rate) is measured by bench/quota_isolation.sh, not here: a shared two-core
# machine makes a timed ratio flaky (doc/security.md, Quotas).
# Needs root (DPDK EAL); every wait is bounded; everything it creates is removed on exit.
# Usage: uroced_quota.sh UROCED UROCE_STAT VERBS_APP QUOTA_APP
set -uo pipefail

UROCED=${1:?usage: $0 UROCED UROCE_STAT VERBS_APP QUOTA_APP}
STAT=${2:?}
VAPP=${3:?}
QAPP=${4:?}
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
need_root "DPDK EAL"
need_tools timeout

ID=$$
WORK=$(mktemp -d /tmp/uroce-quota-XXXXXX)
PID_A="" PID_B="" PID_Q=""
pass() { echo "ok: [${SECONDS}s] $*"; }
cleanup() {
  [ -n "$PID_Q" ] && stop_pid "$PID_Q" KILL >/dev/null 2>&1
  [ -n "$PID_A" ] && stop_pid "$PID_A" TERM >/dev/null 2>&1
  [ -n "$PID_B" ] && stop_pid "$PID_B" TERM >/dev/null 2>&1
  rm -rf "/var/run/dpdk/uroce-quota-$ID-a" "/var/run/dpdk/uroce-quota-$ID-b"
  if [ "$FAILS" -ne 0 ]; then
    for d in a b; do echo "--- uroced $d log"; tail -30 "$WORK/uroced-$d.log" 2>/dev/null; done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

conf() {  # conf NAME ROLE LCORE IP [QUOTA LINES]
  cat >"$WORK/uroced-$1.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-quota-$ID-$1 --log-level=*:notice
[daemon]
socket = $WORK/uroced-$1.sock
workers = $3
mbufs = 4095
idle_sleep_us = 50
${5:-}
[port p0]
device = net_memif0,role=$2,socket=$WORK/memif.sock,id=0
ipv4 = $4/24
EOF
}
# A: each app may hold 24 QPs, 8 CQs, 40 MRs, 32 MiB of MRs, 4 unread replies, 4 PDs, 16 AHs.
conf a server 0 10.80.0.1 "quota_qps = 24
quota_cqs = 8
quota_pds = 4
quota_ahs = 16
quota_mrs = 40
quota_mr_bytes = 33554432
quota_ctl_outstanding = 4"
conf b client 1 10.80.0.2
start_uroced "$UROCED" "$WORK/uroced-a.conf" "$WORK/uroced-a.log"; rc=$?; PID_A=$UROCED_PID
[ $rc -eq 0 ] || { fail "uroced a did not come up"; exit 1; }
start_uroced "$UROCED" "$WORK/uroced-b.conf" "$WORK/uroced-b.log"; rc=$?; PID_B=$UROCED_PID
[ $rc -eq 0 ] || { fail "uroced b did not come up"; exit 1; }
env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/uroced-a.conf" --check 2>&1 |
  grep -q "quota per app: qps=24 cqs=8 srqs=64 mrs=40 mr_bytes=33554432 ctl_outstanding=4 event_fds=256 pds=4 ahs=16" &&
  pass "uroced a's configuration has the quotas (--check)" || fail "uroced --check does not show the quotas"

stat() {  # stat NAME KEY -> value (empty if absent)
  timeout 30 "$STAT" -s "$WORK/uroced-$1.sock" "$2" 2>/dev/null | awk -v k="$2" '$1 == k { print $2 }'
}

# The hostile app for the whole bulk run (and at least 20 s).
timeout 300 "$QAPP" "$WORK/uroced-a.sock" 20 10.80.0.2 >"$WORK/quota.log" 2>&1 &
PID_Q=$!
sleep 2
timeout 300 "$VAPP" bulk "$WORK/uroced-a.sock" "$WORK/uroced-b.sock" 32 2 >"$WORK/bulk.log" 2>&1
rc=$?
sed 's/^/  bulk: /' "$WORK/bulk.log"
if [ $rc -eq 0 ] && grep -q "^0 failure(s)" "$WORK/bulk.log"; then
  pass "the other app's RC WRITE / READ / SEND transfers completed, data intact, during the attack"
else
  fail "verbs_app bulk exit $rc"
fi
kill -0 "$PID_Q" 2>/dev/null && still=1 || still=0
v=$(stat a daemon.sessions)
[ -n "$v" ] && pass "uroced a answers uroce-stat during the attack (sessions $v, attack running: $still)" ||
  fail "uroced a does not answer uroce-stat"
wait "$PID_Q"
rc=$?
PID_Q=""
sed 's/^/  hostile: /' "$WORK/quota.log"
if [ $rc -eq 0 ] && grep -q "^0 failure(s)" "$WORK/quota.log"; then
  pass "the hostile app got ENOMEM for PDs, AHs, CQs, QPs and MRs and EAGAIN for its flood, every reply arrived"
else
  fail "quota_app exit $rc"
fi
for k in qps cqs mr_bytes ctl_outstanding pds ahs; do
  v=$(stat a "quota.refused.$k")
  [ "${v:-0}" -gt 0 ] && pass "quota.refused.$k = $v" || fail "quota.refused.$k = '$v', expected > 0"
done
for k in qps cqs mrs pds ahs; do
  v=$(stat a "daemon.$k")
  [ "$v" = 0 ] || fail "daemon a: daemon.$k = '$v' after both apps ended"
done
for d in a b; do stop_uroced $d 'stopped'; done
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
