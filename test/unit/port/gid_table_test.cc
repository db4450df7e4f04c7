// SPDX-License-Identifier: BSD-3-Clause
// The GID table in rxe's order. Expected GIDs written out by hand from RFC 4291 (modified
// EUI-64: flip the U/L bit of the first MAC byte, insert ff:fe in the middle) and RFC 4291
// 2.5.5.2 (IPv4-mapped).
#include "port/gid_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "config/config.h"

namespace uroce::port {
namespace {

wire::Gid gid(const char *text) {
  wire::Gid g;
  EXPECT_TRUE(config::parse_ipv6(text, g.raw)) << text;
  return g;
}

TEST(GidTable, RxeOrder) {
  const uint8_t mac[6] = {0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
  const uint8_t a1[4] = {10, 0, 0, 1}, a2[4] = {192, 168, 1, 7};
  uint8_t b1[16];
  ASSERT_TRUE(config::parse_ipv6("fd00:77::2", b1));
  const uint8_t *v4[] = {a1, a2};
  const uint8_t *v6[] = {b1};
  size_t dropped = 99;
  const GidTable t = GidTable::build(mac, v4, v6, &dropped);
  EXPECT_EQ(dropped, 0u);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].gid, gid("fe80::5054:00ff:fe12:3456"));
  EXPECT_EQ(t[1].gid, gid("::ffff:10.0.0.1"));
  EXPECT_EQ(t[2].gid, gid("::ffff:192.168.1.7"));
  EXPECT_EQ(t[3].gid, gid("fd00:77::2"));
  for (size_t i = 0; i < t.size(); ++i)
    EXPECT_EQ(t[i].type, GidType::kRoceV2);
  EXPECT_TRUE(t[1].gid.is_v4mapped());
  EXPECT_FALSE(t[0].gid.is_v4mapped());
  EXPECT_EQ(t.find(gid("::ffff:192.168.1.7")), 2);
  EXPECT_EQ(t.find(gid("::ffff:192.168.1.8")), -1);
  EXPECT_EQ(t.get(4), nullptr);
  EXPECT_NE(t.get(3), nullptr);
}

TEST(GidTable, LocallyAdministeredMacAndDuplicates) {
  // 02:xx: the U/L bit flips to 0.
  const uint8_t mac[6] = {0x02, 0x00, 0x00, 0xAA, 0xBB, 0xCC};
  uint8_t ll[16];
  ASSERT_TRUE(config::parse_ipv6("fe80::ff:feaa:bbcc", ll));
  const uint8_t a1[4] = {10, 0, 0, 1};
  const uint8_t *v4[] = {a1, a1};
  const uint8_t *v6[] = {ll};
  const GidTable t = GidTable::build(mac, v4, v6);
  ASSERT_EQ(t.size(), 2u);  // the link-local and the repeated IPv4 are not added twice
  EXPECT_EQ(t[0].gid, gid("fe80::ff:feaa:bbcc"));
  EXPECT_EQ(t[1].gid, gid("::ffff:10.0.0.1"));
}

TEST(GidTable, OnlyLinkLocalWithoutAddresses) {
  const uint8_t mac[6] = {0x00, 0x1b, 0x21, 0x01, 0x02, 0x03};
  const GidTable t = GidTable::build(mac, {}, {});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].gid, gid("fe80::21b:21ff:fe01:203"));
}

TEST(GidTable, BoundedSize) {
  const uint8_t mac[6] = {0x02, 0, 0, 0, 0, 1};
  std::vector<std::array<uint8_t, 4>> addrs(GidTable::kMaxEntries + 5);
  std::vector<const uint8_t *> ptrs;
  for (size_t i = 0; i < addrs.size(); ++i) {
    addrs[i] = {10, static_cast<uint8_t>(i >> 16), static_cast<uint8_t>(i >> 8),
                static_cast<uint8_t>(i)};
    ptrs.push_back(addrs[i].data());
  }
  size_t dropped = 0;
  const GidTable t = GidTable::build(mac, ptrs, {}, &dropped);
  EXPECT_EQ(t.size(), GidTable::kMaxEntries);
  EXPECT_EQ(dropped, 6u);  // 1 link-local + 1023 addresses fit
}

}  // namespace
}  // namespace uroce::port
