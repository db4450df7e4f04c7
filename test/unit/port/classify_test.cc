// SPDX-License-Identifier: BSD-3-Clause
// Frame classification: every class and every drop reason, on frames built with lib/wire.
#include "port/classify.h"

#include <gtest/gtest.h>

#include <vector>

#include "wire/packet.h"

namespace uroce::port {
namespace {

const uint8_t kMac[6] = {0x02, 0, 0, 0, 0, 0x02};
const uint8_t kPeer[6] = {0x02, 0, 0, 0, 0, 0x01};

std::vector<uint8_t> roce(bool ipv6, bool vlan = false) {
  wire::PathInfo path;
  std::memcpy(path.dmac, kMac, 6);
  std::memcpy(path.smac, kPeer, 6);
  path.vlan = vlan;
  path.vlan_id = 7;
  if (ipv6) {
    uint8_t a[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    path.sgid = wire::Gid::from_bytes(a);
    a[15] = 2;
    path.dgid = wire::Gid::from_bytes(a);
  } else {
    path.sgid = wire::Gid::from_ipv4(10, 0, 0, 1);
    path.dgid = wire::Gid::from_ipv4(10, 0, 0, 2);
  }
  wire::PacketDesc d;
  d.path = &path;
  d.f.opcode = wire::op::kRcSendOnly;
  d.payload_len = 8;
  std::vector<uint8_t> buf(256);
  const uint8_t payload[8] = {};
  const wire::BuildResult r = wire::build_frame(buf.data(), buf.size(), d, payload);
  EXPECT_TRUE(r.ok());
  buf.resize(r.frame_len);
  return buf;
}

Classified run(const std::vector<uint8_t> &f) {
  return classify(f.data(), f.size(), kMac);
}

void expect_drop(const std::vector<uint8_t> &f, RxDrop why) {
  const Classified c = run(f);
  EXPECT_EQ(c.cls, FrameClass::kDrop);
  EXPECT_EQ(c.drop, why) << "got " << rx_drop_str(c.drop) << ", want " << rx_drop_str(why);
}

TEST(Classify, RoceFrames) {
  EXPECT_EQ(run(roce(false)).cls, FrameClass::kRoce);
  EXPECT_EQ(run(roce(true)).cls, FrameClass::kRoce);
  EXPECT_EQ(run(roce(false, true)).cls, FrameClass::kRoce);
  EXPECT_EQ(run(roce(true, true)).cls, FrameClass::kRoce);
}

TEST(Classify, ArpAndNd) {
  std::vector<uint8_t> arp(42, 0);
  std::memset(arp.data(), 0xFF, 6);
  arp[12] = 0x08, arp[13] = 0x06;
  EXPECT_EQ(run(arp).cls, FrameClass::kArp);
  std::memcpy(arp.data(), kMac, 6);  // unicast ARP to us
  EXPECT_EQ(run(arp).cls, FrameClass::kArp);
  arp[0] = 0x33, arp[1] = 0x33;  // ARP to an IPv6 group: nonsense
  expect_drop(arp, RxDrop::kNotForUs);

  auto nd = roce(true);
  nd[14 + 6] = 58;  // next header ICMPv6
  EXPECT_EQ(run(nd).cls, FrameClass::kNd);
  nd[0] = 0x33, nd[1] = 0x33, nd[2] = 0xff;  // to a solicited-node group
  EXPECT_EQ(run(nd).cls, FrameClass::kNd);
}

TEST(Classify, Drops) {
  expect_drop(std::vector<uint8_t>(13, 0), RxDrop::kRunt);
  auto f = roce(false);
  f[5] = 0x99;  // unicast to another MAC
  expect_drop(f, RxDrop::kNotForUs);
  f = roce(false);
  f[0] = 0x01, f[1] = 0x00, f[2] = 0x5e;  // IPv4 multicast MAC
  expect_drop(f, RxDrop::kNotForUs);
  f = roce(false);
  f[12] = 0x88, f[13] = 0xcc;  // LLDP
  expect_drop(f, RxDrop::kEtherType);
  f = roce(false);
  f[14 + 9] = 1;  // ICMP
  expect_drop(f, RxDrop::kIpv4NotRoce);
  f = roce(false);
  f[14 + 20 + 2] = 0x00, f[14 + 20 + 3] = 53;  // UDP to port 53
  expect_drop(f, RxDrop::kIpv4NotRoce);
  f = roce(true);
  f[14 + 6] = 6;  // TCP
  expect_drop(f, RxDrop::kIpv6NotRoce);
  f = roce(true);
  f[14 + 40 + 3] = 0x01;  // UDP to port 4609
  expect_drop(f, RxDrop::kIpv6NotRoce);
  f = roce(false);
  f.resize(14 + 20 + 4);  // UDP header cut
  expect_drop(f, RxDrop::kIpTruncated);
  f = roce(true);
  f.resize(14 + 30);
  expect_drop(f, RxDrop::kIpTruncated);
  f = roce(false);
  std::memset(f.data(), 0xFF, 6);  // IPv4 to broadcast
  expect_drop(f, RxDrop::kBroadcastNotArp);
  f = roce(false, true);
  f[18 + 9] = 1;  // VLAN-tagged ICMP
  expect_drop(f, RxDrop::kVlanNotRoce);
  f = roce(false, true);
  f[16] = 0x08, f[17] = 0x06;  // VLAN-tagged ARP: unsupported
  expect_drop(f, RxDrop::kVlanNotRoce);
  f = roce(true);
  f[0] = 0x33, f[1] = 0x33;  // RoCE to a multicast group
  expect_drop(f, RxDrop::kNotForUs);
}

TEST(Classify, DropNamesAreDistinct) {
  for (size_t i = 0; i < static_cast<size_t>(RxDrop::kCount); ++i)
    for (size_t j = i + 1; j < static_cast<size_t>(RxDrop::kCount); ++j)
      EXPECT_STRNE(rx_drop_str(static_cast<RxDrop>(i)), rx_drop_str(static_cast<RxDrop>(j)));
  EXPECT_STREQ(rx_drop_str(RxDrop::kNoEngine), "roce_no_transport_engine_yet");
}

}  // namespace
}  // namespace uroce::port
