// SPDX-License-Identifier: BSD-3-Clause
// The daemon's view of an Ethernet port (PortView over port::EthPort) and the port's counters
// as uroce-stat entries and as uroced's exit report.
#pragma once

#include <vector>

#include "config/config.h"
#include "daemon/daemon.h"
#include "daemon/poll_loop.h"
#include "port/eth_port.h"

namespace uroce::daemon {

// The daemon's control-plane view of ports[0]. resolve() runs the loop while it waits for
// ARP / ND (port/neigh_wait.h), at most the port's neigh_wait_ms.
class EthPortView final : public PortView {
 public:
  EthPortView(port::EthPort &p, const config::PortConfig &pc, MainLoop &loop)
      : p_(p), pc_(pc), loop_(loop) {}
  const uint8_t *mac() const noexcept override { return p_.mac(); }
  uint32_t eth_mtu() const noexcept override { return p_.mtu(); }
  transport::Mtu ib_mtu() const noexcept override;
  size_t gid_count() const noexcept override { return p_.gids().size(); }
  wire::Gid gid(size_t i) const noexcept override { return p_.gids()[i].gid; }
  uint8_t dscp() const noexcept override { return pc_.dscp; }
  const char *ibdev_name() const noexcept override { return pc_.ibdev.c_str(); }
  bool link_up() const noexcept override {
    try {
      return p_.link_status() != "down";
    } catch (...) {
      return false;
    }
  }
  int resolve(const wire::Gid &dgid, uint8_t mac_out[6]) noexcept override;

 private:
  port::EthPort &p_;
  const config::PortConfig &pc_;
  MainLoop &loop_;
};

// port.NAME.* entries of kStats (uroce-stat).
void add_port_stats(const port::EthPort &p, std::vector<ctl::StatEntry> &v);
// The port's counters on stdout (uroced at exit).
void print_port_counters(const port::EthPort &p);

}  // namespace uroce::daemon
