#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Integration test of uroced on a veth pair between two network namespaces of its own:
#   uroce-itest-PID-d: the veth end uroced drives with net_af_packet (kernel IPv6 off, no IP)
#   uroce-itest-PID-p: the other end, a Linux peer with 10.77.0.1/24 and fd00:77::1/64
# Checks: uroced resolves the Linux side: an app's modify_qp to RTR and create_ah towards the
# Linux host's IPv4-mapped, global IPv6 and link-local GIDs succeed (uroced sends an ARP
# request / Neighbor Solicitation, the kernel answers; the kernel's neighbour table then holds
# uroced's MAC, learnt from the request, and uroce-stat shows uroced's entries with the Linux
# veth's MAC), and an address nobody answers gives EHOSTUNREACH (doc/uroced.md, Neighbours).
# uroced answers ARP (arping, and the kernel's neighbour entry after ping) and IPv6
# neighbour discovery for its global and link-local addresses (ndisc6, ip -6 neigh), does not
# answer for other addresses, stops cleanly on SIGTERM with its counters, and its pcap capture
# (gratuitous ARP, replies, its own requests) dissects in tshark without malformed frames or
# expert warnings.
# Also: a PMD-refused MTU, a bad --set value and a foreign libibverbs each end with their exit
# code and message. Needs root; every wait is bounded; everything it creates is removed on exit.
# Usage: uroced_netns.sh PATH/TO/uroced PATH/TO/uroce-stat PATH/TO/verbs_app
set -uo pipefail

UROCED=${1:?usage: $0 UROCED UROCE_STAT VERBS_APP}
STAT=${2:?usage: $0 UROCED UROCE_STAT VERBS_APP}
APP=${3:?usage: $0 UROCED UROCE_STAT VERBS_APP}
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
need_root "network namespaces and veth interfaces"
need_tools ip arping ndisc6 ping tshark timeout

ID=$$
NS_D=uroce-itest-$ID-d
NS_P=uroce-itest-$ID-p
VD=uit${ID}d  # interface names stay under 16 characters
VP=uit${ID}p
WORK=$(mktemp -d /tmp/uroce-itest-XXXXXX)
PID=""

stop_uroced() {  # stop_uroced SIGNAL: signal our uroced, wait up to 20 s, then SIGKILL
  [ -n "$PID" ] || return 0
  kill -"$1" "$PID" 2>/dev/null
  for _ in $(seq 200); do
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$PID" 2>/dev/null; then
    fail "uroced (pid $PID) still running 20 s after SIG$1: killing it"
    kill -KILL "$PID" 2>/dev/null
  fi
  wait "$PID"
  local rc=$?
  PID=""
  return $rc
}

cleanup() {
  stop_uroced TERM >/dev/null 2>&1
  ip netns del "$NS_D" 2>/dev/null
  ip netns del "$NS_P" 2>/dev/null
  # DPDK leaves its runtime directory (a few MB on tmpfs) behind: remove our two prefixes.
  rm -rf "/var/run/dpdk/uroce-itest-$ID" "/var/run/dpdk/uroce-itest-$ID-mtu" \
    "/var/run/dpdk/uroce-itest-$ID-tap"
  if [ "$FAILS" -ne 0 ]; then
    echo "--- uroced log"; cat "$WORK/uroced.log" 2>/dev/null
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# --- namespaces and veth
ip netns add "$NS_D" || { echo "FAIL: ip netns add"; exit 1; }
ip netns add "$NS_P" || { echo "FAIL: ip netns add"; exit 1; }
ip link add "$VD" type veth peer name "$VP" || { echo "FAIL: ip link add veth"; exit 1; }
ip link set "$VD" netns "$NS_D"
ip link set "$VP" netns "$NS_P"
# The kernel must not answer for uroced: no IPv6 (no link-local), no IPv4 on uroced's end.
ip netns exec "$NS_D" sysctl -qw "net.ipv6.conf.$VD.disable_ipv6=1"
# Jumbo frames: uroced runs with MTU 4200 (IB MTU 4096) over af_packet with 8 KB frame slots.
ip -n "$NS_D" link set "$VD" mtu 4200 up
ip -n "$NS_P" link set lo up
# The Linux side's link-local address is usable at once (uroced resolves it below).
ip netns exec "$NS_P" sysctl -qw "net.ipv6.conf.$VP.accept_dad=0"
ip -n "$NS_P" link set "$VP" mtu 4200 up
ip -n "$NS_P" addr add 10.77.0.1/24 dev "$VP"
ip -n "$NS_P" -6 addr add fd00:77::1/64 dev "$VP" nodad
MAC=$(ip -n "$NS_D" -o link show "$VD" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
[ -n "$MAC" ] || { echo "FAIL: cannot read the MAC of $VD"; exit 1; }
# fe80:: + modified EUI-64 of the MAC (flip bit 1 of the first byte, insert ff:fe).
link_local() {  # fe80:: + modified EUI-64 of the MAC (flip bit 1 of the first byte, insert ff:fe)
  local m0 m1 m2 m3 m4 m5
  IFS=: read -r m0 m1 m2 m3 m4 m5 <<<"$1"
  printf 'fe80::%x:%x:%x:%x' $(( (0x$m0 ^ 2) << 8 | 0x$m1 )) $(( 0x$m2 << 8 | 0xff )) \
    $(( 0xfe << 8 | 0x$m3 )) $(( 0x$m4 << 8 | 0x$m5 ))
}
LL=$(link_local "$MAC")
LMAC=$(ip -n "$NS_P" -o link show "$VP" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
[ -n "$LMAC" ] || { echo "FAIL: cannot read the MAC of $VP"; exit 1; }
LLP=$(link_local "$LMAC")

cat >"$WORK/uroced.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-itest-$ID --log-level=*:notice
[daemon]
pcap = $WORK/uroced.pcap
socket = $WORK/uroced.sock
idle_sleep_us = 100
[port p0]
device = net_af_packet0,iface=$VD,blocksz=8192,framesz=8192
mtu = 4200
ipv4 = 10.77.0.2/24
ipv6 = fd00:77::2/64
EOF

# --- refusals, before the real start (each exits before or right after EAL init)
out=$(ip netns exec "$NS_D" timeout 60 env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" \
  -c "$WORK/uroced.conf" --set port.p0.mtu=15x0 2>&1); rc=$?
if [ $rc -eq 2 ] && grep -q "key 'mtu'" <<<"$out" && grep -q "bad number" <<<"$out"; then
  pass "bad --set value: exit 2, '$out'"
else
  fail "bad --set value: exit $rc, output: $out"
fi
mkdir "$WORK/shim" && : >"$WORK/shim/libibverbs.so.1"
out=$(ip netns exec "$NS_D" timeout 60 env LD_LIBRARY_PATH="$WORK/shim" "$UROCED" \
  -c "$WORK/uroced.conf" 2>&1); rc=$?
if [ $rc -eq 3 ] && grep -q "refusing to start" <<<"$out"; then
  pass "foreign libibverbs on LD_LIBRARY_PATH: exit 3"
else
  fail "foreign libibverbs on LD_LIBRARY_PATH: exit $rc, output: $out"
fi
# af_packet's default framesz (2048) cannot carry a 4200-byte MTU: refused with a clear error.
out=$(ip netns exec "$NS_D" timeout 120 env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" \
  -c "$WORK/uroced.conf" --set "port.p0.device=net_af_packet0,iface=$VD" --set daemon.pcap= \
  --set "eal.args=--no-huge -m 256 --no-pci --file-prefix=uroce-itest-$ID-mtu" 2>&1); rc=$?
if [ $rc -eq 1 ] && grep -q "refuses MTU 4200" <<<"$out"; then
  pass "MTU refused by the PMD: exit 1, $(grep "MTU 4200" <<<"$out" | head -1)"
else
  fail "MTU 4200 on af_packet: exit $rc, output: $out"
fi

# net_tap (FACTS: 1522-byte maximum frame) refuses MTU 4200; its tap interface is created in
# our namespace and goes with it.
if [ -c /dev/net/tun ]; then
  out=$(ip netns exec "$NS_D" timeout 120 env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" \
    -c "$WORK/uroced.conf" --set "port.p0.device=net_tap0,iface=uit${ID}t" --set daemon.pcap= \
    --set "eal.args=--no-huge -m 256 --no-pci --file-prefix=uroce-itest-$ID-tap" 2>&1); rc=$?
  if [ $rc -eq 1 ] && grep -q "the PMD (net_tap) refuses MTU 4200" <<<"$out"; then
    pass "net_tap refuses MTU 4200: exit 1, $(grep "refuses MTU" <<<"$out" | head -1)"
  else
    fail "MTU 4200 on net_tap: exit $rc, output: $out"
  fi
else
  echo "note: /dev/net/tun absent, net_tap MTU check not run"
fi

# --- start uroced inside the namespace that holds its veth end
ip netns exec "$NS_D" env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/uroced.conf" \
  >"$WORK/uroced.log" 2>&1 &
PID=$!
for _ in $(seq 600); do  # up to 60 s (the EAL loads every PMD of the driver directory)
  grep -q "uroced: running" "$WORK/uroced.log" 2>/dev/null && break
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q "uroced: running" "$WORK/uroced.log"; then
  fail "uroced did not come up within 60 s"
  exit 1
fi
pass "uroced running (pid $PID), MAC $MAC, link-local $LL"
grep -q "mac $MAC" "$WORK/uroced.log" || fail "uroced reports another MAC than $VD's $MAC"
grep -q "mtu 4200 (IB MTU 4096)" "$WORK/uroced.log" || fail "uroced does not report MTU 4200 / IB MTU 4096"
grep -q "gid 0 $LL RoCE v2" "$WORK/uroced.log" || fail "GID 0 is not $LL"
grep -q "gid 1 ::ffff:10.77.0.2 RoCE v2" "$WORK/uroced.log" || fail "GID 1 is not ::ffff:10.77.0.2"
grep -q "gid 2 fd00:77::2 RoCE v2" "$WORK/uroced.log" || fail "GID 2 is not fd00:77::2"

peer() { ip netns exec "$NS_P" timeout 30 "$@"; }

# --- uroced resolves the Linux side (before anything else makes the kernel learn uroced's MAC)
SOCK=$WORK/uroced.sock
before4=$(ip -n "$NS_P" neigh show 10.77.0.2 dev "$VP")
before6=$(ip -n "$NS_P" -6 neigh show fd00:77::2 dev "$VP")
[ -z "$before4$before6" ] || fail "the kernel knew uroced's MAC before uroced asked: '$before4' '$before6'"
# GID index: 0 link-local, 1 ::ffff:10.77.0.2, 2 fd00:77::2 (checked above).
for target in "1 10.77.0.1" "2 fd00:77::1" "0 $LLP"; do
  read -r sgid dest <<<"$target"
  out=$(timeout 60 "$APP" resolve "$SOCK" "$sgid" "$dest" ok 2>&1); rc=$?
  if [ $rc -eq 0 ]; then
    pass "uroced resolved $dest: $(grep -h "modify_qp RTR" <<<"$out"); $(grep -h create_ah <<<"$out")"
  else
    fail "uroced resolving $dest: exit $rc: $out"
  fi
done
# The kernel learnt uroced's MAC from uroced's ARP request and NS (it had no entry before).
neigh=$(ip -n "$NS_P" neigh show 10.77.0.2 dev "$VP")
grep -qi "lladdr $MAC" <<<"$neigh" && pass "Linux saw uroced's ARP request: $neigh" \
  || fail "no neighbour entry from uroced's ARP request: '$neigh'"
neigh=$(ip -n "$NS_P" -6 neigh show dev "$VP")
grep -qi "fd00:77::2 lladdr $MAC" <<<"$neigh" && grep -qi "$LL lladdr $MAC" <<<"$neigh" &&
  pass "Linux saw uroced's Neighbor Solicitations: $(tr '\n' ';' <<<"$neigh")" ||
  fail "no IPv6 neighbour entries from uroced's NS: '$neigh'"
# uroced's neighbour table holds the Linux veth's MAC for the three addresses.
nt=$(timeout 30 "$STAT" -s "$SOCK" .neigh arp.tx_requests nd.tx_ns 2>&1)
echo "$nt" | sed 's/^/  uroce-stat: /'
for ip in 10.77.0.1 fd00:77::1 "$LLP"; do
  grep -qiE "^port\.p0\.neigh\.$ip $LMAC (reachable|stale|probe)$" <<<"$nt" &&
    pass "uroced's neighbour entry for $ip holds $LMAC" || fail "uroced's neighbour entry for $ip: not $LMAC"
done
grep -qE "^port\.p0\.arp\.tx_requests [1-9]" <<<"$nt" && grep -qE "^port\.p0\.nd\.tx_ns [1-9]" <<<"$nt" &&
  pass "uroce-stat counts uroced's ARP requests and NS" || fail "port.p0.arp.tx_requests / nd.tx_ns not counted"
# Nobody answers for 10.77.0.9: EHOSTUNREACH after three probes (0, 1, 2 s; failed 1 s after
# the last), within port.neigh_wait_ms (4 s; the check keeps a wide margin for a loaded machine).
out=$(timeout 60 "$APP" resolve "$SOCK" 1 10.77.0.9 unreachable 2>&1); rc=$?
ms=$(sed -n 's/^modify_qp RTR .*: .* after \([0-9]*\) ms$/\1/p' <<<"$out")
if [ $rc -eq 0 ] && [ -n "$ms" ] && [ "$ms" -le 12000 ]; then
  pass "10.77.0.9 (nobody): $(grep -h "modify_qp RTR" <<<"$out"); $(grep -h create_ah <<<"$out")"
else
  fail "10.77.0.9 (nobody): exit $rc, '$ms' ms: $out"
fi
fails=$(timeout 30 "$STAT" -s "$SOCK" port.p0.neigh_failures | awk '$1 == "port.p0.neigh_failures" { print $2 }')
[ "${fails:-0}" -ge 1 ] && pass "port.p0.neigh_failures=$fails" || fail "port.p0.neigh_failures='$fails'"

# --- ARP
out=$(peer arping -c 3 -w 10 -I "$VP" 10.77.0.2 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -qi "reply from 10.77.0.2 \[$MAC\]" <<<"$out"; then
  pass "arping 10.77.0.2: $(grep -ci "reply from" <<<"$out") replies from $MAC"
else
  fail "arping 10.77.0.2: exit $rc: $out"
fi
out=$(peer arping -c 2 -w 3 -I "$VP" 10.77.0.9 2>&1); rc=$?
if [ $rc -ne 0 ] && ! grep -qi "reply from" <<<"$out"; then
  pass "arping 10.77.0.9 (not uroced's): no reply"
else
  fail "arping 10.77.0.9 got an answer: $out"
fi
# The kernel resolves uroced through ARP; uroced does not answer ICMP echo, so ping itself
# fails, but the neighbour entry must hold uroced's MAC.
peer ping -c 3 -W 1 10.77.0.2 >/dev/null 2>&1
# A 4028-byte IPv4 packet (4042-byte frame): must arrive whole (checked in the capture).
peer ping -c 1 -W 1 -s 4000 -M do 10.77.0.2 >/dev/null 2>&1
neigh=$(ip -n "$NS_P" neigh show 10.77.0.2 dev "$VP")
if grep -qiE "lladdr $MAC (REACHABLE|STALE|DELAY|PROBE)" <<<"$neigh"; then
  pass "ip neigh: $neigh"
else
  fail "ip neigh for 10.77.0.2: '$neigh'"
fi

# --- IPv6 ND: global and link-local
for target in fd00:77::2 "$LL"; do
  out=$(peer ndisc6 -r 3 -w 1000 "$target" "$VP" 2>&1); rc=$?
  if [ $rc -eq 0 ] && grep -qi "Target link-layer address: $MAC" <<<"$out"; then
    pass "ndisc6 $target: $MAC"
  else
    fail "ndisc6 $target: exit $rc: $out"
  fi
done
out=$(peer ndisc6 -r 2 -w 500 fd00:77::9 "$VP" 2>&1); rc=$?
if [ $rc -ne 0 ]; then pass "ndisc6 fd00:77::9 (not uroced's): no answer"; else fail "ndisc6 fd00:77::9 answered: $out"; fi
peer ping -6 -c 3 -W 1 fd00:77::2 >/dev/null 2>&1
neigh=$(ip -n "$NS_P" -6 neigh show fd00:77::2 dev "$VP")
if grep -qiE "lladdr $MAC (REACHABLE|STALE|DELAY|PROBE)" <<<"$neigh"; then
  pass "ip -6 neigh: $neigh"
else
  fail "ip -6 neigh for fd00:77::2: '$neigh'"
fi

# --- clean shutdown and counters
stop_uroced TERM; rc=$?
if [ $rc -eq 0 ] && grep -q "uroced: stopped" "$WORK/uroced.log"; then
  pass "SIGTERM: clean exit 0"
else
  fail "SIGTERM: exit $rc"
fi
arp_replies=$(sed -n 's/.* arp: .*tx_replies=\([0-9]*\).*/\1/p' "$WORK/uroced.log")
nd_na=$(sed -n 's/.* nd: .*tx_na=\([0-9]*\).*/\1/p' "$WORK/uroced.log")
garp=$(sed -n 's/.* arp: .*tx_gratuitous=\([0-9]*\).*/\1/p' "$WORK/uroced.log")
[ "${arp_replies:-0}" -ge 3 ] && pass "uroced sent $arp_replies ARP replies" || fail "ARP replies counted: '${arp_replies:-}'"
[ "${nd_na:-0}" -ge 2 ] && pass "uroced sent $nd_na solicited NAs" || fail "NAs counted: '${nd_na:-}'"
[ "${garp:-0}" -eq 1 ] && pass "one gratuitous ARP at start" || fail "gratuitous ARP counted: '${garp:-}'"
grep -q "drop ipv4_not_roce=" "$WORK/uroced.log" && pass "ICMP echo counted as dropped (ipv4_not_roce)" \
  || fail "the pings were not counted as ipv4_not_roce drops"

# --- the capture, dissected by tshark
PCAP=$WORK/uroced.pcap
if [ ! -s "$PCAP" ]; then
  fail "no capture written"
else
  n=$(tshark -r "$PCAP" 2>/dev/null | wc -l)
  bad=$(tshark -r "$PCAP" -Y "_ws.malformed" 2>/dev/null)
  [ -z "$bad" ] && pass "tshark: $n frames, none malformed" || fail "tshark: malformed frames: $bad"
  warn=$(tshark -r "$PCAP" -Y "eth.src == $MAC && _ws.expert.severity >= 6291456" 2>/dev/null)
  [ -z "$warn" ] && pass "tshark: no expert warning on uroced's frames" || fail "tshark expert warnings: $warn"
  list=$(tshark -r "$PCAP" -Y "eth.src == $MAC" 2>/dev/null)
  grep -q "ARP Announcement for 10.77.0.2" <<<"$list" && pass "capture: gratuitous ARP" || fail "capture lacks the gratuitous ARP: $list"
  grep -qi "10.77.0.2 is at $MAC" <<<"$list" && pass "capture: ARP replies" || fail "capture lacks ARP replies"
  grep -qiE "Neighbor Advertisement fd00:77::2 \(sol, ovr\) is at $MAC" <<<"$list" && pass "capture: solicited NA" \
    || fail "capture lacks a solicited NA"
  grep -q "Who has 10.77.0.1? Tell 10.77.0.2" <<<"$list" && pass "capture: uroced's ARP request" \
    || fail "capture lacks uroced's ARP request for 10.77.0.1"
  grep -q "Neighbor Solicitation for fd00:77::1 from $MAC" <<<"$list" && pass "capture: uroced's NS" \
    || fail "capture lacks uroced's NS for fd00:77::1"
  big=$(tshark -r "$PCAP" -Y "eth.dst == $MAC && frame.len == 4042 && icmp.type == 8" 2>/dev/null | wc -l)
  [ "$big" -ge 1 ] && pass "capture: the 4042-byte frame arrived whole" || fail "no 4042-byte frame received"
  good=$(tshark -r "$PCAP" -Y "eth.src == $MAC && icmpv6.checksum.status == 1" 2>/dev/null | wc -l)
  all=$(tshark -r "$PCAP" -Y "eth.src == $MAC && icmpv6" 2>/dev/null | wc -l)
  [ "$good" -eq "$all" ] && [ "$all" -gt 0 ] && pass "capture: $all ICMPv6 frames from uroced, checksums good" \
    || fail "ICMPv6 checksums: $good good of $all"
fi

# --- SIGINT stops it cleanly too (second run, no capture)
ip netns exec "$NS_D" env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/uroced.conf" \
  --set daemon.pcap= >"$WORK/uroced2.log" 2>&1 &
PID=$!
for _ in $(seq 600); do
  grep -q "uroced: running" "$WORK/uroced2.log" 2>/dev/null && break
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
if grep -q "uroced: running" "$WORK/uroced2.log"; then
  stop_uroced INT; rc=$?
  if [ $rc -eq 0 ] && grep -q "uroced: stopped" "$WORK/uroced2.log"; then
    pass "SIGINT: clean exit 0"
  else
    fail "SIGINT: exit $rc: $(tail -5 "$WORK/uroced2.log")"
  fi
else
  fail "second start did not come up: $(tail -5 "$WORK/uroced2.log")"
fi

echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
