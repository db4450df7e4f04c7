#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The guests' network: a network namespace with a bridge and one tap per guest, nothing in the
# host's own namespace. doc/interop.md, "The rig".
#
# Usage: netns.sh up NETNS [MTU] [NTAPS]   (MTU 1500, NTAPS 1)
#        netns.sh down NETNS
# "up" creates NETNS (name it after your PID: several runs can coexist) holding
#   br0   a Linux bridge, 10.77.0.1/24, STP off, forwarding at once
#   tapN  N = 0..NTAPS-1, persistent taps on br0, for boot-guest.sh -t tapN
# with MTU on every device (rxe's path MTU is the largest IB MTU that fits: 1500 gives 1024,
# 4200 gives 4096). A DPDK port joins through a veth whose one end is enslaved to br0.
# "down" deletes NETNS, and the bridge and taps with it.
set -euo pipefail

usage() {
  echo "usage: $0 up NETNS [MTU] [NTAPS] | down NETNS" >&2
  exit 2
}
[ $# -ge 2 ] || usage
action=$1 ns=$2 mtu=${3:-1500} ntaps=${4:-1}
command -v ip >/dev/null || { echo "netns.sh: 'ip' not found (iproute2)" >&2; exit 1; }
case $action in
  up)
    case $mtu$ntaps in '' | *[!0-9]*) usage ;; esac
    [ "$(id -u)" = 0 ] || { echo "netns.sh: needs root (network namespaces, taps)" >&2; exit 1; }
    if ip netns list | grep -qw "^$ns"; then
      echo "netns.sh: namespace $ns exists already (netns.sh down $ns removes it)" >&2
      exit 1
    fi
    ip netns add "$ns"
    n="ip -n $ns"
    $n link set lo up
    $n link add br0 mtu "$mtu" type bridge stp_state 0 forward_delay 0
    $n addr add 10.77.0.1/24 dev br0
    $n link set br0 up
    for i in $(seq 0 $((ntaps - 1))); do
      $n tuntap add dev "tap$i" mode tap
      $n link set "tap$i" mtu "$mtu" master br0 up
    done
    echo "netns $ns: br0 10.77.0.1/24, taps tap0..tap$((ntaps - 1)), mtu $mtu"
    ;;
  down)
    ip netns del "$ns"
    ;;
  *) usage ;;
esac
