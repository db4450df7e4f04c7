// SPDX-License-Identifier: BSD-3-Clause
// lib/daemon path_from_ah_attr: how an address vector (modify_qp with IBV_QP_AV, create_ah)
// becomes the path the engine sends on. Pins what the interop suite found against Linux rxe
// (doc/interop.md): the TTL / hop limit is always 64, as Linux sends it, whatever the AV's
// hop_limit (ibv_rc_pingpong asks for 1).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "daemon/daemon.h"
#include "port/arp.h"
#include "port/neigh_wait.h"
#include "wire/packet.h"

namespace uroce::daemon {
namespace {

class FakePort : public PortView {
 public:
  FakePort() {
    gids_[0] = wire::Gid::link_local_from_mac(mac_);
    gids_[1] = wire::Gid::from_ipv4(10, 77, 0, 2);
    const uint8_t v6[16] = {0xfd, 0, 0, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    gids_[2] = wire::Gid::from_bytes(v6);
  }
  const uint8_t *mac() const noexcept override { return mac_; }
  uint32_t eth_mtu() const noexcept override { return 1500; }
  transport::Mtu ib_mtu() const noexcept override { return transport::Mtu::k1024; }
  size_t gid_count() const noexcept override { return 3; }
  wire::Gid gid(size_t i) const noexcept override { return gids_[i]; }
  uint8_t dscp() const noexcept override { return 26; }
  bool link_up() const noexcept override { return true; }
  const char *ibdev_name() const noexcept override { return "uroce0"; }
  int resolve(const wire::Gid &dgid, uint8_t mac_out[6]) noexcept override {
    ++resolves;
    last = dgid;
    if (!reachable) return EHOSTUNREACH;
    std::memcpy(mac_out, peer_mac, 6);
    return 0;
  }

  uint8_t mac_[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
  uint8_t peer_mac[6] = {0x52, 0x54, 0x0a, 0x4d, 0x00, 0x0b};
  wire::Gid gids_[3];
  bool reachable = true;
  int resolves = 0;
  wire::Gid last;
};

ctl::AhAttrPayload av_to(const wire::Gid &dgid, uint8_t sgid_index, uint8_t hop_limit) {
  ctl::AhAttrPayload a{};
  std::memcpy(a.dgid, dgid.raw, 16);
  a.sgid_index = sgid_index;
  a.hop_limit = hop_limit;
  a.is_global = 1;
  a.port_num = 1;
  return a;
}

TEST(PathFromAh, HopLimitIsAlways64AsLinuxSendsIt) {
  EXPECT_EQ(wire::kRoceHopLimit, 64);
  FakePort port;
  const wire::Gid guest = wire::Gid::from_ipv4(10, 77, 0, 11);
  for (int hl : {0, 1, 2, 63, 64, 65, 128, 255}) {
    wire::PathInfo p;
    p.hop_limit = 7;
    ASSERT_EQ(path_from_ah_attr(port, av_to(guest, 1, static_cast<uint8_t>(hl)), &p), 0) << hl;
    EXPECT_EQ(p.hop_limit, 64) << "AV hop_limit " << hl;
  }
  // IPv6 too (Linux: ip6_dst_hoplimit of the route, 64 by default).
  const uint8_t v6[16] = {0xfd, 0, 0, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b};
  wire::PathInfo p;
  ASSERT_EQ(path_from_ah_attr(port, av_to(wire::Gid::from_bytes(v6), 2, 1), &p), 0);
  EXPECT_EQ(p.hop_limit, 64);
}

TEST(PathFromAh, FramesBuiltFromThePathCarryTtl64) {
  // The header builder writes the path's hop limit: an AV with hop_limit 1 (ibv_rc_pingpong)
  // gives IPv4 TTL 64 on the wire, as rxe sends.
  FakePort port;
  wire::PathInfo p;
  ASSERT_EQ(path_from_ah_attr(port, av_to(wire::Gid::from_ipv4(10, 77, 0, 11), 1, 1), &p), 0);
  wire::PacketDesc d;
  d.path = &p;
  d.f.opcode = 0x04;  // RC SEND only
  d.f.dest_qp = 0x11;
  d.f.psn = 0xffffc0;
  d.payload_len = 16;
  uint8_t frame[256] = {};
  const uint8_t payload[16] = {};
  const wire::BuildResult r = wire::build_frame(frame, sizeof frame, d, payload);
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE(r.ipv6);
  EXPECT_EQ(frame[12], 0x08);
  EXPECT_EQ(frame[13], 0x00);
  EXPECT_EQ(frame[14 + 8], 64);  // IPv4 TTL
}

TEST(PathFromAh, ResolvesTheDestinationAndTakesTheRestFromThePortAndTheAv) {
  FakePort port;
  const wire::Gid guest = wire::Gid::from_ipv4(10, 77, 0, 11);
  ctl::AhAttrPayload a = av_to(guest, 1, 1);
  a.flow_label = 0xfff12345;  // 20 bits kept
  wire::PathInfo p;
  ASSERT_EQ(path_from_ah_attr(port, a, &p), 0);
  EXPECT_EQ(port.resolves, 1);
  EXPECT_EQ(std::memcmp(port.last.raw, guest.raw, 16), 0);
  EXPECT_EQ(std::memcmp(p.dmac, port.peer_mac, 6), 0);
  EXPECT_EQ(std::memcmp(p.smac, port.mac_, 6), 0);
  EXPECT_EQ(std::memcmp(p.sgid.raw, port.gids_[1].raw, 16), 0);
  EXPECT_EQ(std::memcmp(p.dgid.raw, guest.raw, 16), 0);
  EXPECT_EQ(p.dscp, 26);  // traffic_class 0: the port's DSCP
  EXPECT_EQ(p.flow_label, 0x12345u);
  a.traffic_class = 46 << 2;
  ASSERT_EQ(path_from_ah_attr(port, a, &p), 0);
  EXPECT_EQ(p.dscp, 46);
}

TEST(PathFromAh, Errors) {
  FakePort port;
  const wire::Gid guest = wire::Gid::from_ipv4(10, 77, 0, 11);
  wire::PathInfo p;
  ctl::AhAttrPayload a = av_to(guest, 1, 64);
  a.is_global = 0;  // RoCE needs a GRH
  EXPECT_EQ(path_from_ah_attr(port, a, &p), -EINVAL);
  a = av_to(guest, 1, 64);
  a.port_num = 2;
  EXPECT_EQ(path_from_ah_attr(port, a, &p), -EINVAL);
  EXPECT_EQ(path_from_ah_attr(port, av_to(guest, 3, 64), &p), -EINVAL);  // no GID 3
  EXPECT_EQ(path_from_ah_attr(port, av_to(guest, 2, 64), &p), -EINVAL);  // IPv6 sgid, IPv4 dgid
  EXPECT_EQ(port.resolves, 0);
  port.reachable = false;
  EXPECT_EQ(path_from_ah_attr(port, av_to(guest, 1, 64), &p), -EHOSTUNREACH);
  EXPECT_EQ(port.resolves, 1);
}

// A PortView as uroced's: ARP through port::Arp, the bounded wait of port/neigh_wait.h, a fake
// clock that the loop's step() advances by 1 ms, and a peer that answers when `answering`.
class ArpPort : public FakePort {
 public:
  ArpPort() : arp_(mac_, std::span<const port::Ipv4If>(&addr_, 1)) {}
  int resolve(const wire::Gid &dgid, uint8_t mac_out[6]) noexcept override {
    ++resolves;
    const port::Resolve r = port::wait_resolution(
        [this] { return now; },
        [&](uint64_t t) {
          size_t n = 0;
          const port::Resolve x = arp_.resolve(dgid.ipv4(), t, mac_out, out_, sizeof out_, &n);
          sent(n);
          return x;
        },
        [this] {
          now += 1'000'000;
          unsigned work = 0;
          for (size_t n; (n = arp_.poll(now, out_, sizeof out_)) != 0; ++work)
            sent(n);
          return work;
        },
        [] {}, 4'000'000'000ull);
    return r == port::Resolve::kResolved ? 0 : EHOSTUNREACH;
  }
  // A request went out: the peer (10.77.0.11, peer_mac) replies if it is answering.
  void sent(size_t n) noexcept {
    if (n == 0) return;
    ++requests;
    if (!answering && now < answer_from) return;
    uint8_t f[60] = {};
    std::memcpy(f, mac_, 6);
    std::memcpy(f + 6, peer_mac, 6);
    f[12] = 0x08, f[13] = 0x06, f[15] = 1, f[16] = 0x08, f[18] = 6, f[19] = 4, f[21] = 2;
    std::memcpy(f + 22, peer_mac, 6);
    const uint8_t spa[4] = {10, 77, 0, 11}, tpa[4] = {10, 77, 0, 2};
    std::memcpy(f + 28, spa, 4);
    std::memcpy(f + 32, mac_, 6);
    std::memcpy(f + 38, tpa, 4);
    uint8_t reply[64];
    arp_.input(f, sizeof f, now, reply, sizeof reply);
  }

  port::Ipv4If addr_{{10, 77, 0, 2}, 24};
  port::Arp arp_;
  uint8_t out_[128];
  uint64_t now = 0;
  bool answering = false;
  uint64_t answer_from = UINT64_MAX;  // or answers from this time on
  int requests = 0;
};

// Issue 20: one missed resolution used to answer EHOSTUNREACH for that neighbour until the
// failure was forgotten; now it is retried when used again (at most once a second).
TEST(PathFromAh, FailedNeighbourIsResolvedAgainWhenUsedLater) {
  ArpPort port;
  const wire::Gid guest = wire::Gid::from_ipv4(10, 77, 0, 11);
  wire::PathInfo p;
  EXPECT_EQ(path_from_ah_attr(port, av_to(guest, 1, 64), &p), -EHOSTUNREACH);
  EXPECT_EQ(port.now, 3'000'000'000ull);  // waited for the whole resolution: 3 probes, 1 s apart
  EXPECT_EQ(port.requests, 3);
  port.answering = true;
  EXPECT_EQ(path_from_ah_attr(port, av_to(guest, 1, 64), &p), -EHOSTUNREACH);  // < 1 s later
  EXPECT_EQ(port.requests, 3);
  port.now += 1'000'000'000ull;
  ASSERT_EQ(path_from_ah_attr(port, av_to(guest, 1, 64), &p), 0);
  EXPECT_EQ(port.requests, 4);
  EXPECT_EQ(std::memcmp(p.dmac, port.peer_mac, 6), 0);
}

// The peer answers only from 1.5 s on (the third request, at 2 s): the call waits for it.
TEST(PathFromAh, WaitsForALateAnswer) {
  ArpPort port;
  port.answer_from = 1'500'000'000ull;
  const wire::Gid guest = wire::Gid::from_ipv4(10, 77, 0, 11);
  wire::PathInfo p;
  ASSERT_EQ(path_from_ah_attr(port, av_to(guest, 1, 64), &p), 0);
  EXPECT_EQ(port.now, 2'000'000'000ull);
  EXPECT_EQ(port.requests, 3);
  EXPECT_EQ(std::memcmp(p.dmac, port.peer_mac, 6), 0);
}

}  // namespace
}  // namespace uroce::daemon
