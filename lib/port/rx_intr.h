// SPDX-License-Identifier: BSD-3-Clause
// RX interrupts of an ethdev queue, for an lcore that sleeps when idle (doc/uroced.md, Sleeping
// when idle, which lists what each PMD provides). A queue has an interrupt when the port was
// configured with intr_conf.rxq (EthPort asks for it; a PMD that refuses is configured without)
// and the PMD exposes an event fd for it (rte_eth_dev_rx_intr_ctl_q_get_fd): net_tap (its
// queue's tap fd), virtio-user, vhost. net_memif, net_af_xdp, net_af_packet, net_null and
// net_ring (DPDK 22.11) have none: their queues are polled, and an idle lcore naps instead.
#pragma once

#include <cstdint>

namespace uroce::port {

// The queue's interrupt fd, to watch edge-triggered (the PMD reads the queue itself), or -1.
int rx_intr_fd(uint16_t port_id, uint16_t queue) noexcept;
// Before sleeping (on) / after waking (off). PMDs whose fd is always live (net_tap) answer
// ENOTSUP, which is fine.
void rx_intr_set(uint16_t port_id, uint16_t queue, bool on) noexcept;
// Whether the link is up now (a port whose link is down receives nothing: no nap for it).
bool link_up(uint16_t port_id) noexcept;

}  // namespace uroce::port
