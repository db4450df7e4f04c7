// SPDX-License-Identifier: BSD-3-Clause
#include "port/rx_intr.h"

#include <rte_ethdev.h>
#include <rte_log.h>

namespace uroce::port {

int rx_intr_fd(uint16_t port_id, uint16_t queue) noexcept {
  // ethdev logs an error for every PMD without interrupts: not an error here.
  const uint32_t level = rte_log_get_global_level();
  rte_log_set_global_level(RTE_LOG_CRIT);
  const int fd = rte_eth_dev_rx_intr_ctl_q_get_fd(port_id, queue);
  rte_log_set_global_level(level);
  return fd >= 0 ? fd : -1;
}

void rx_intr_set(uint16_t port_id, uint16_t queue, bool on) noexcept {
  if (on)
    (void)rte_eth_dev_rx_intr_enable(port_id, queue);
  else
    (void)rte_eth_dev_rx_intr_disable(port_id, queue);
}

bool link_up(uint16_t port_id) noexcept {
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(port_id, &link) != 0) return true;  // unknown: assume traffic
  return link.link_status != RTE_ETH_LINK_DOWN;
}

}  // namespace uroce::port
