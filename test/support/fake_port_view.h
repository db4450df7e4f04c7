// SPDX-License-Identifier: BSD-3-Clause
// A PortView for tests of lib/daemon's CM service: port n has MAC 02:00:00:00:00:n, GID 0 its
// link-local address, GID 1 10.0.0.n, and after add_global_v6() GID 2 fd00::n; it resolves only
// peer_gid (to peer_mac). LoopPortView is the port of an in-process daemon that talks to
// itself (test/support/loop_port.h): one GID, 10.9.0.1 (kLoopGid), MAC 02:00:00:00:09:01; it
// resolves its own GID to its MAC and any other to peer_mac.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "daemon/cm_service.h"

namespace uroce::test {

class FakePort : public daemon::PortView {
 public:
  explicit FakePort(uint8_t n) {
    mac_[5] = n;
    gids_[0] = wire::Gid::link_local_from_mac(mac_);
    gids_[1] = wire::Gid::from_ipv4(10, 0, 0, n);
  }
  const uint8_t *mac() const noexcept override { return mac_; }
  uint32_t eth_mtu() const noexcept override { return 1500; }
  transport::Mtu ib_mtu() const noexcept override { return transport::Mtu::k1024; }
  size_t gid_count() const noexcept override { return n_gids_; }
  wire::Gid gid(size_t i) const noexcept override { return gids_[i]; }
  uint8_t dscp() const noexcept override { return 0; }
  bool link_up() const noexcept override { return true; }
  const char *ibdev_name() const noexcept override { return "uroce0"; }
  int resolve(const wire::Gid &dgid, uint8_t mac_out[6]) noexcept override {
    if (!(dgid == peer_gid)) return EHOSTUNREACH;
    std::memcpy(mac_out, peer_mac, 6);
    return 0;
  }
  void add_global_v6() noexcept {
    gids_[2].raw[0] = 0xfd;
    gids_[2].raw[15] = mac_[5];
    n_gids_ = 3;
  }
  uint8_t mac_[6] = {0x02, 0, 0, 0, 0, 0};
  wire::Gid gids_[3];
  size_t n_gids_ = 2;
  wire::Gid peer_gid;
  uint8_t peer_mac[6] = {};
};

inline const wire::Gid kLoopGid = wire::Gid::from_ipv4(10, 9, 0, 1);

class LoopPortView : public daemon::PortView {
 public:
  const uint8_t *mac() const noexcept override { return mac_; }
  uint32_t eth_mtu() const noexcept override { return 1500; }
  transport::Mtu ib_mtu() const noexcept override { return transport::Mtu::k1024; }
  size_t gid_count() const noexcept override { return 1; }
  wire::Gid gid(size_t) const noexcept override { return kLoopGid; }
  uint8_t dscp() const noexcept override { return 0; }
  const char *ibdev_name() const noexcept override { return "uroce0"; }
  bool link_up() const noexcept override { return true; }
  int resolve(const wire::Gid &g, uint8_t mac_out[6]) noexcept override {
    std::memcpy(mac_out, g == kLoopGid ? mac_ : peer_mac, 6);
    return 0;
  }
  uint8_t peer_mac[6] = {0x02, 0, 0, 0, 0x09, 0x02};

 private:
  uint8_t mac_[6] = {0x02, 0, 0, 0, 0x09, 0x01};
};

}  // namespace uroce::test
