#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Neighbour resolution that recovers (issue 20; doc/uroced.md, Neighbours): uroced on a veth
# between two namespaces of its own, the Linux peer's ARP replies and Neighbor Advertisements
# blocked by nftables (its output hook) for a while, then allowed.
#   1. IPv4, no answer: modify_qp to RTR gives EHOSTUNREACH when the resolution fails (3 probes,
#      3 s), counted as neigh_failures.no_answer, the entry listed as failed; create_ah at once
#      after it: EHOSTUNREACH without a new resolution (at most one per second). Answers
#      allowed, 1 s later: the failed entry is resolved again and modify_qp / create_ah succeed.
#   2. IPv6 global, late answer: modify_qp starts while the peer is blocked; it is unblocked
#      1 s later; modify_qp waits (port.neigh_wait_ms) and succeeds, after a retransmission.
#   3. IPv6 link-local, the issue's failure: uroced learns the peer from the peer's NS (stale);
#      modify_qp uses that MAC and re-probes with unicast NS, which Linux answers without the
#      TLLA option; the entry must become reachable (it used to fail after 3 answered NS).
# Needs root; every wait is bounded; everything it creates is removed on exit.
# Usage: uroced_neigh.sh PATH/TO/uroced PATH/TO/uroce-stat PATH/TO/verbs_app
set -uo pipefail

UROCED=${1:?usage: $0 UROCED UROCE_STAT VERBS_APP}
STAT=${2:?usage: $0 UROCED UROCE_STAT VERBS_APP}
APP=${3:?usage: $0 UROCED UROCE_STAT VERBS_APP}
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
need_root "network namespaces, veth interfaces and nftables"
need_tools ip nft ndisc6 timeout

ID=$$
NS_D=uroce-neigh-$ID-d
NS_P=uroce-neigh-$ID-p
VD=ung${ID}d  # interface names stay under 16 characters
VP=ung${ID}p
WORK=$(mktemp -d /tmp/uroce-neigh-XXXXXX)
PID=""

cleanup() {
  [ -n "$PID" ] && stop_pid "$PID" TERM >/dev/null 2>&1
  ip netns del "$NS_D" 2>/dev/null
  ip netns del "$NS_P" 2>/dev/null
  rm -rf "/var/run/dpdk/uroce-neigh-$ID"
  if [ "$FAILS" -ne 0 ]; then
    echo "--- uroced log"; cat "$WORK/uroced.log" 2>/dev/null
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

ip netns add "$NS_D" || { echo "FAIL: ip netns add"; exit 1; }
ip netns add "$NS_P" || { echo "FAIL: ip netns add"; exit 1; }
ip link add "$VD" type veth peer name "$VP" || { echo "FAIL: ip link add veth"; exit 1; }
ip link set "$VD" netns "$NS_D"
ip link set "$VP" netns "$NS_P"
ip netns exec "$NS_D" sysctl -qw "net.ipv6.conf.$VD.disable_ipv6=1"  # the kernel stays out
ip -n "$NS_D" link set "$VD" up
ip -n "$NS_P" link set lo up
ip netns exec "$NS_P" sysctl -qw "net.ipv6.conf.$VP.accept_dad=0"
ip -n "$NS_P" link set "$VP" up
ip -n "$NS_P" addr add 10.78.0.1/24 dev "$VP"
ip -n "$NS_P" -6 addr add fd00:78::1/64 dev "$VP" nodad
link_local() {  # fe80:: + modified EUI-64 of the MAC
  local m0 m1 m2 m3 m4 m5
  IFS=: read -r m0 m1 m2 m3 m4 m5 <<<"$1"
  printf 'fe80::%x:%x:%x:%x' $(( (0x$m0 ^ 2) << 8 | 0x$m1 )) $(( 0x$m2 << 8 | 0xff )) \
    $(( 0xfe << 8 | 0x$m3 )) $(( 0x$m4 << 8 | 0x$m5 ))
}
MAC=$(ip -n "$NS_D" -o link show "$VD" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
LMAC=$(ip -n "$NS_P" -o link show "$VP" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
[ -n "$MAC" ] && [ -n "$LMAC" ] || { echo "FAIL: cannot read the veth MACs"; exit 1; }
LL=$(link_local "$MAC")
LLP=$(link_local "$LMAC")

cat >"$WORK/uroced.conf" <<EOF2
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-neigh-$ID --log-level=*:notice
[daemon]
socket = $WORK/uroced.sock
idle_sleep_us = 100
[port p0]
device = net_af_packet0,iface=$VD
ipv4 = 10.78.0.2/24
ipv6 = fd00:78::2/64
EOF2
ip netns exec "$NS_D" env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/uroced.conf" \
  >"$WORK/uroced.log" 2>&1 &
PID=$!
for _ in $(seq 600); do  # up to 60 s (the EAL loads every PMD of the driver directory)
  grep -q "uroced: running" "$WORK/uroced.log" 2>/dev/null && break
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
grep -q "uroced: running" "$WORK/uroced.log" || { fail "uroced did not come up within 60 s"; exit 1; }
pass "uroced running (pid $PID), MAC $MAC"
SOCK=$WORK/uroced.sock

block() {  # the peer's ARP replies and Neighbor Advertisements are dropped on output
  ip netns exec "$NS_P" nft -f - <<EOF2
table arp uroce_block {
  chain out { type filter hook output priority 0; arp operation reply drop; }
}
table ip6 uroce_block {
  chain out { type filter hook output priority 0; icmpv6 type nd-neighbor-advert drop; }
}
EOF2
}
unblock() {
  ip netns exec "$NS_P" nft delete table arp uroce_block
  ip netns exec "$NS_P" nft delete table ip6 uroce_block
}
stat_of() { timeout 30 "$STAT" -s "$SOCK" "$1" | awk -v n="$1" '$1 == n { print $2 }'; }
resolve() {  # resolve SGID DEST ok|unreachable: verbs_app's modify_qp to RTR and create_ah
  timeout 60 "$APP" resolve "$SOCK" "$1" "$2" "$3" 2>&1
}

# --- 1. IPv4: no answer, then answers
block || { fail "nft: cannot install the blocking rules"; exit 1; }
out=$(resolve 1 10.78.0.1 unreachable); rc=$?
[ $rc -eq 0 ] && pass "blocked peer: $(grep -h "modify_qp RTR" <<<"$out"); $(grep -h create_ah <<<"$out")" \
  || fail "blocked peer 10.78.0.1: exit $rc: $out"
nt=$(timeout 30 "$STAT" -s "$SOCK" neigh arp. 2>&1)
echo "$nt" | sed 's/^/  uroce-stat: /'
grep -qE "^port\.p0\.neigh_failures\.no_answer [1-9]" <<<"$nt" && pass "failure counted as no answer" \
  || fail "neigh_failures.no_answer not counted"
grep -qE "^port\.p0\.neigh\.10\.78\.0\.1 .* failed$" <<<"$nt" && pass "10.78.0.1 listed as failed" \
  || fail "10.78.0.1 not listed as failed"
req1=$(stat_of port.p0.arp.tx_requests)
[ "${req1:-0}" -eq 3 ] && pass "3 ARP requests, then none for create_ah (retry rate)" \
  || fail "ARP requests after one failed resolution and an immediate create_ah: '$req1' (want 3)"
unblock
sleep 1.2  # past the failed entry's retry time (1 s)
out=$(resolve 1 10.78.0.1 ok); rc=$?
[ $rc -eq 0 ] && pass "peer answers again: $(grep -h "modify_qp RTR" <<<"$out"); $(grep -h create_ah <<<"$out")" \
  || fail "after unblocking, 10.78.0.1: exit $rc: $out"
grep -qiE "^port\.p0\.neigh\.10\.78\.0\.1 $LMAC reachable$" <<<"$(timeout 30 "$STAT" -s "$SOCK" .neigh.)" \
  && pass "10.78.0.1 reachable at $LMAC" || fail "10.78.0.1 not reachable after recovery"

# --- 2. IPv6 global: the answer comes late, modify_qp waits for it
block
ns0=$(stat_of port.p0.nd.tx_ns)
resolve 2 fd00:78::1 ok >"$WORK/late.out" &
APID=$!
sleep 1
unblock
wait "$APID"; rc=$?
ns1=$(stat_of port.p0.nd.tx_ns)
if [ $rc -eq 0 ] && [ $((ns1 - ns0)) -ge 2 ]; then
  pass "late answer: $(grep -h "modify_qp RTR" "$WORK/late.out"), after $((ns1 - ns0)) NS"
else
  fail "late answer for fd00:78::1: exit $rc, $((ns1 - ns0)) NS: $(cat "$WORK/late.out")"
fi

# --- 3. link-local, learnt stale from the peer's NS, refreshed by unicast NS (issue 20)
out=$(ip netns exec "$NS_P" timeout 30 ndisc6 -r 3 -w 1000 "$LL" "$VP" 2>&1) ||
  fail "ndisc6 $LL: $out"
nt=$(timeout 30 "$STAT" -s "$SOCK" ".neigh.$LLP")
grep -qiE "^port\.p0\.neigh\.$LLP $LMAC stale$" <<<"$nt" && pass "learnt the peer from its NS: stale" \
  || fail "the peer's NS did not leave a stale entry: '$nt'"
f0=$(stat_of port.p0.neigh_failures)
out=$(resolve 0 "$LLP" ok); rc=$?
[ $rc -eq 0 ] && pass "stale entry used: $(grep -h "modify_qp RTR" <<<"$out")" || fail "resolving $LLP: exit $rc: $out"
state=""
for _ in $(seq 40); do  # the answer to the unicast NS: well within 4 s
  state=$(timeout 30 "$STAT" -s "$SOCK" ".neigh.$LLP" | awk '{ print $3 }')
  [ "$state" = reachable ] && break
  sleep 0.1
done
[ "$state" = reachable ] && pass "Linux's NA without TLLA confirmed the stale entry" \
  || fail "$LLP after the unicast NS: '$state' (want reachable)"
sleep 3.5  # a whole probe episode: the entry must not fail
f1=$(stat_of port.p0.neigh_failures)
[ "$f1" = "$f0" ] && pass "no failure after the refresh (neigh_failures $f1)" \
  || fail "neigh_failures went from $f0 to $f1"
nt=$(timeout 30 "$STAT" -s "$SOCK" na_ignored reply_ignored neigh_failures)
echo "$nt" | sed 's/^/  uroce-stat: /'
grep -qE "^port\.p0\.nd\.na_ignored\.no_tlla 0$" <<<"$nt" && pass "no NA ignored for a missing TLLA" \
  || fail "NAs ignored for a missing TLLA"

stop_pid "$PID" TERM; rc=$?
PID=""
[ $rc -eq 0 ] && pass "SIGTERM: clean exit 0" || fail "SIGTERM: exit $rc"
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
