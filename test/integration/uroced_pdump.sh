#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Live capture with DPDK's own tool: dpdk-dumpcap (Debian dpdk-dev) attaches to a running
# uroced as a DPDK secondary process through rte_pdump (doc/uroced.md, Capture).
#   1. two uroced on net_memif, on hugepages (a secondary cannot attach to a --no-huge
#      primary); the test adds the 2 MB pages it needs and gives them back at the end;
#   2. dpdk-dumpcap on A's port while verbs_app runs every operation between A and B;
#   3. the pcapng passes uroce-pcap-check (every RoCE frame parses, every ICRC valid) and
#      tshark (RoCE dissected, no malformed frame), and holds frames both ways;
#   4. uroced keeps running and stops cleanly after the capture detached.
# Both daemons run DCQCN ([cc] algorithm = dcqcn): every verbs_app operation goes through the
# reaction point and the pacer (unthrottled here: nothing marks CE on memif).
# Usage: uroced_pdump.sh UROCED VERBS_APP UROCE_PCAP_CHECK   (needs root)
set -uo pipefail
USAGE="usage: $0 UROCED VERBS_APP UROCE_PCAP_CHECK"
UROCED=${1:?$USAGE}
APP=${2:?$USAGE}
PCAP_CHECK=${3:?$USAGE}
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
need_root "it reserves hugepages and starts DPDK processes"
need_tools dpdk-dumpcap tshark

ID=$$
WORK=$(mktemp -d /tmp/uroce-pdump-XXXXXX)
PID_A="" PID_B="" PID_C=""
HP=/proc/sys/vm/nr_hugepages
HP_OLD=$(cat $HP)
HP_ADDED=0
MOUNTED=0
cleanup() {
  [ -n "$PID_C" ] && stop_pid "$PID_C" KILL >/dev/null 2>&1
  [ -n "$PID_A" ] && stop_pid "$PID_A" TERM >/dev/null 2>&1
  [ -n "$PID_B" ] && stop_pid "$PID_B" TERM >/dev/null 2>&1
  rm -rf "/var/run/dpdk/uroce-pdump-$ID-a" "/var/run/dpdk/uroce-pdump-$ID-b"
  [ "$MOUNTED" = 1 ] && umount "$WORK/huge"
  # Give back the pages this test added (others may have added pages meanwhile: subtract).
  [ "$HP_ADDED" -gt 0 ] && echo $(($(cat $HP) - HP_ADDED)) >$HP
  if [ "$FAILS" -ne 0 ]; then
    for n in a b; do echo "--- uroced $n log"; tail -20 "$WORK/uroced-$n.log" 2>/dev/null; done
    echo "--- dpdk-dumpcap log"; tail -20 "$WORK/dumpcap.log" 2>/dev/null
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# --- 1. hugepages and the two daemons
# A hugetlbfs of our own (--huge-dir), unmounted at the end: nothing global is mounted.
mkdir "$WORK/huge"
mount -t hugetlbfs -o pagesize=2M nodev "$WORK/huge" || { fail "cannot mount hugetlbfs"; exit 1; }
MOUNTED=1
want=384  # 768 MB: two daemons' pools and rings, and dumpcap's copy pool
echo $((HP_OLD + want)) >$HP
HP_ADDED=$(($(cat $HP) - HP_OLD))
[ "$HP_ADDED" -ge 256 ] || { fail "could only reserve $HP_ADDED hugepages"; exit 1; }

start() {  # start NAME ROLE LCORE IP
  cat >"$WORK/uroced-$1.conf" <<EOC
[eal]
args = -m 256 --huge-dir=$WORK/huge --iova-mode=va --no-pci --file-prefix=uroce-pdump-$ID-$1 --log-level=*:notice
[daemon]
socket = $WORK/uroced-$1.sock
workers = $3
mbufs = 4095
idle_sleep_us = 50
[port p0]
device = net_memif0,role=$2,socket=$WORK/memif.sock,id=0
ipv4 = $4/24
ecn = on
[cc]
algorithm = dcqcn
EOC
  start_uroced "$UROCED" "$WORK/uroced-$1.conf" "$WORK/uroced-$1.log"; local rc=$?
  eval "PID_${1^^}=$UROCED_PID"
  return $rc
}
start a server 0 10.87.0.1 || { fail "uroced A did not come up: $(tail -3 "$WORK/uroced-a.log")"; exit 1; }
start b client 1 10.87.0.2 || { fail "uroced B did not come up: $(tail -3 "$WORK/uroced-b.log")"; exit 1; }
grep -q "dpdk-dumpcap unavailable" "$WORK/uroced-a.log" && fail "uroced A: rte_pdump not initialised"
pass "two uroced on memif and hugepages (pids $PID_A, $PID_B)"

# --- 2. dpdk-dumpcap on A's port 0 while verbs_app runs
timeout 300 stdbuf -oL dpdk-dumpcap --file-prefix="uroce-pdump-$ID-a" -i 0 -w "$WORK/a.pcapng" \
  >"$WORK/dumpcap.log" 2>&1 &
PID_C=$!
up=0
for _ in $(seq 300); do
  grep -q "Capturing on" "$WORK/dumpcap.log" 2>/dev/null && { up=1; break; }
  kill -0 "$PID_C" 2>/dev/null || break
  sleep 0.1
done
[ $up -eq 1 ] && pass "dpdk-dumpcap attached to uroced A" ||
  { fail "dpdk-dumpcap did not attach: $(tail -3 "$WORK/dumpcap.log")"; exit 1; }
verbs_app_run "$APP" "$WORK/uroced-a.sock" "$WORK/uroced-b.sock" \
  "verbs_app run between A and B while dpdk-dumpcap captures"
sleep 0.5  # the last ACKs
kill -INT "$PID_C"
stop_pid "$PID_C" INT 30 >/dev/null; PID_C=""

# --- 3. the capture
out=$("$PCAP_CHECK" -q --expect-roce "$WORK/a.pcapng" 2>&1); rc=$?
echo "$out" | tail -3 | sed 's/^/  pcap-check: /'
[ $rc -eq 0 ] && pass "uroce-pcap-check: every RoCE frame of the dumpcap capture is valid" ||
  fail "uroce-pcap-check exit $rc"
macs=$(tshark -r "$WORK/a.pcapng" -Y 'udp.dstport == 4791' -T fields -e eth.src 2>/dev/null | sort -u | wc -l)
bad=$(tshark -r "$WORK/a.pcapng" -Y '_ws.malformed || _ws.expert.severity >= error' 2>/dev/null | wc -l)
bth=$(tshark -r "$WORK/a.pcapng" -Y 'infiniband.bth' 2>/dev/null | wc -l)
if [ "$macs" -eq 2 ] && [ "$bad" -eq 0 ] && [ "$bth" -gt 0 ]; then
  pass "tshark: $bth RoCE frames dissected (BTH), sent and received (2 source MACs), none malformed"
else
  fail "tshark: $bth BTH frames, $macs source MACs (want 2), $bad malformed / error frames"
fi

# --- 4. the daemons survived the secondary and stop cleanly
for n in A B; do
  eval "pid=\$PID_$n"
  stop_pid "$pid" TERM; rc=$?
  eval "PID_$n=''"
  [ $rc -eq 0 ] && pass "uroced $n: SIGTERM, exit 0" || fail "uroced $n: exit $rc"
done
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
