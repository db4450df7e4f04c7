# SPDX-License-Identifier: BSD-3-Clause
# Sourced (after common.sh) by the integration tests that put two uroced on net_af_packet
# behind a middle namespace: uroced_loss, uroced_soak, uroced_attack. One set-up, one cleanup.
#
#   netns_pair TAG SHORT      namespaces uroce-TAG-PID-{a,b,m} (NS_A, NS_B, NS_M); veths
#                             SHORT<PID>a in A <-> SHORT<PID>ma in M (VA, MA) and SHORT<PID>b in
#                             B <-> SHORT<PID>mb in M (VB, MB); IPv6 off (no kernel traffic on
#                             the segment), all up. Installs the EXIT trap (netns_pair_cleanup).
#                             Exits 1 (FAIL line) if a namespace or veth cannot be made.
#   netns_link NAME...        brings up (IPv6 off) more links already created in NS_M
#   netns_conf NAME IFACE IP [DAEMON_LINE...]
#                             writes $WORK/uroced-NAME.conf: EAL in memory without hugepages,
#                             file prefix uroce-TAG-PID-NAME, socket $WORK/uroced-NAME.sock,
#                             net_af_packet0 on IFACE (FRAMECNT, default 2048), ipv4 IP/24;
#                             extra [daemon] lines as given ("workers = 1", "pcap = ...")
#   netns_start_daemons       starts uroced A / B in their namespaces (PID_A, PID_B), waits up
#                             to 120 s for both to run; on failure: FAIL line and exit 1
#   netns_stat NAME KEY       one uroce-stat value of daemon NAME (empty if absent)
# The caller sets WORK (its own temporary directory), UROCED and STAT before netns_pair, and
# may define netns_cleanup_hook (run first at exit: stop its own extra processes). Cleanup
# stops PID_APP (KILL), PID_A / PID_B (TERM), deletes the namespaces (their veths go with
# them), the DPDK runtime directories and WORK, after showing the daemons' logs on failure.
# Names carry the PID, so concurrent runs never collide; every wait is bounded.

PID_A="" PID_B="" PID_APP=""
FRAMECNT=${FRAMECNT:-2048}

netns_pair_cleanup() {
  declare -F netns_cleanup_hook >/dev/null && netns_cleanup_hook
  [ -n "$PID_APP" ] && stop_pid "$PID_APP" KILL >/dev/null 2>&1
  [ -n "$PID_A" ] && stop_pid "$PID_A" TERM >/dev/null 2>&1
  [ -n "$PID_B" ] && stop_pid "$PID_B" TERM >/dev/null 2>&1
  local ns
  for ns in "$NS_A" "$NS_B" "$NS_M"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "/var/run/dpdk/$NS_A" "/var/run/dpdk/$NS_B"
  if [ "$FAILS" -ne 0 ]; then
    local d
    for d in a b; do echo "--- uroced $d log"; tail -30 "$WORK/uroced-$d.log" 2>/dev/null; done
  fi
  rm -rf "$WORK"
}

netns_link() {
  local dev
  for dev in "$@"; do
    ip netns exec "$NS_M" sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1"
    ip -n "$NS_M" link set "$dev" up
  done
}

netns_pair() {
  local id=$$ ns x dev
  NS_A=uroce-$1-$id-a NS_B=uroce-$1-$id-b NS_M=uroce-$1-$id-m
  VA=$2${id}a MA=$2${id}ma VB=$2${id}b MB=$2${id}mb  # interface names stay under 16 characters
  trap netns_pair_cleanup EXIT
  for ns in "$NS_A" "$NS_B" "$NS_M"; do
    ip netns add "$ns" || { echo "FAIL: ip netns add $ns"; exit 1; }
  done
  ip link add "$VA" netns "$NS_A" type veth peer name "$MA" netns "$NS_M" || { echo "FAIL: veth"; exit 1; }
  ip link add "$VB" netns "$NS_B" type veth peer name "$MB" netns "$NS_M" || { echo "FAIL: veth"; exit 1; }
  for x in "$NS_A $VA" "$NS_B $VB"; do
    read -r ns dev <<<"$x"
    ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1"
    ip -n "$ns" link set "$dev" up
  done
  netns_link "$MA" "$MB"
}

netns_conf() {
  local name=$1 iface=$2 ip=$3 line
  shift 3
  {
    echo "[eal]"
    echo "args = --no-huge -m 256 --no-pci --file-prefix=${NS_A%-a}-$name --log-level=*:notice"
    echo "[daemon]"
    echo "socket = $WORK/uroced-$name.sock"
    echo "idle_sleep_us = 50"
    for line in "$@"; do echo "$line"; done
    echo "[port p0]"
    echo "device = net_af_packet0,iface=$iface,framecnt=$FRAMECNT"
    echo "ipv4 = $ip/24"
  } >"$WORK/uroced-$name.conf"
}

netns_start_daemons() {
  ip netns exec "$NS_A" env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/uroced-a.conf" \
    >"$WORK/uroced-a.log" 2>&1 &
  PID_A=$!
  ip netns exec "$NS_B" env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/uroced-b.conf" \
    >"$WORK/uroced-b.log" 2>&1 &
  PID_B=$!
  for _ in $(seq 1200); do  # up to 120 s (the EAL loads every PMD of the driver directory)
    grep -q "uroced: running" "$WORK/uroced-a.log" && grep -q "uroced: running" "$WORK/uroced-b.log" && return 0
    kill -0 "$PID_A" 2>/dev/null && kill -0 "$PID_B" 2>/dev/null || break
    sleep 0.1
  done
  fail "the daemons did not come up within 120 s"
  exit 1
}

netns_stat() {
  timeout 30 "$STAT" -s "$WORK/uroced-$1.sock" "$2" 2>/dev/null | awk -v k="$2" '$1 == k { print $2 }'
}
