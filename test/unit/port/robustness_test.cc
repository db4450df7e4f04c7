// SPDX-License-Identifier: BSD-3-Clause
// Untrusted bytes: ARP, ND and the classifier are fed every truncation and many seeded random
// mutations of valid frames, each in a heap buffer of exactly its length (so the ASan build
// catches any read past it). Properties: every frame handed to a module is accounted exactly
// once (answered, ignored or dropped by one reason), a reply is always a whole frame of the
// fixed length that fits the buffer, and whatever uroce sends is accepted by another node's
// validator.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "config/config.h"
#include "hex.h"
#include "port/arp.h"
#include "port/classify.h"
#include "port/nd.h"

namespace uroce::port {
namespace {

using test::hex;

const uint8_t kMac[6] = {0x52, 0xb8, 0x2d, 0x95, 0x25, 0x38};
const uint8_t kPeerMac[6] = {0x9e, 0x2d, 0x00, 0x2f, 0xed, 0x47};

const char *kArpRequest =
    "ff ff ff ff ff ff 9e 2d 00 2f ed 47 08 06 00 01 08 00 06 04 00 01"
    " 9e 2d 00 2f ed 47 0a 4d 00 01 00 00 00 00 00 00 0a 4d 00 02";
const char *kArpReply =
    "52 b8 2d 95 25 38 9e 2d 00 2f ed 47 08 06 00 01 08 00 06 04 00 02"
    " 9e 2d 00 2f ed 47 0a 4d 00 01 52 b8 2d 95 25 38 0a 4d 00 02";
const char *kLinuxNs =
    "33 33 ff 00 00 02 9e 2d 00 2f ed 47 86 dd 60 0e 0d c0 00 20 3a ff"
    " fe 80 00 00 00 00 00 00 9c 2d 00 ff fe 2f ed 47"
    " ff 02 00 00 00 00 00 00 00 00 00 01 ff 00 00 02"
    " 87 00 69 59 00 00 00 00 fd 00 00 77 00 00 00 00 00 00 00 00 00 00 00 02"
    " 01 01 9e 2d 00 2f ed 47";

Arp make_arp(const uint8_t *mac) {
  Ipv4If a;
  const uint8_t ip[4] = {10, 77, 0, 2};
  std::memcpy(a.addr, ip, 4);
  a.prefix = 24;
  return Arp(mac, {&a, 1});
}

Nd make_nd(const uint8_t *mac) {
  Ipv6If a;
  EXPECT_TRUE(config::parse_ipv6("fd00:77::2", a.addr));
  return Nd(mac, {&a, 1});
}

uint64_t arp_accounted(const ArpCounters &c) {
  uint64_t n = c.rx_requests_for_us + c.rx_replies + c.rx_not_for_us;
  for (size_t i = 0; i < static_cast<size_t>(ArpDrop::kCount); ++i)
    if (static_cast<ArpDrop>(i) != ArpDrop::kTableFull) n += c.drops[i];  // an extra, not a verdict
  return n;
}

uint64_t nd_accounted(const NdCounters &c) {
  uint64_t n = c.rx_ns_for_us + c.rx_ns_not_for_us + c.rx_na + c.rx_other_icmpv6;
  for (size_t i = 0; i < static_cast<size_t>(NdDrop::kCount); ++i)
    if (static_cast<NdDrop>(i) != NdDrop::kTableFull) n += c.drops[i];
  return n;
}

// Mutations: flip 1-4 random bytes, sometimes cut or extend the frame.
std::vector<uint8_t> mutate(const std::vector<uint8_t> &seed, std::mt19937 &rng) {
  std::vector<uint8_t> f = seed;
  const int flips = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < flips; ++i)
    f[rng() % f.size()] = static_cast<uint8_t>(rng());
  switch (rng() % 8) {
    case 0:
      f.resize(rng() % f.size());
      break;
    case 1:
      f.resize(f.size() + rng() % 64, static_cast<uint8_t>(rng()));
      break;
    default:
      break;
  }
  return f;
}

TEST(Robustness, ArpEveryFrameAccountedOnce) {
  Arp arp = make_arp(kMac);
  Arp other = make_arp(kPeerMac);  // a second node validates what we send
  std::mt19937 rng(4791);
  const std::vector<std::vector<uint8_t>> seeds = {hex(kArpRequest), hex(kArpReply)};
  uint64_t fed = 0, replies = 0;
  auto feed = [&](const std::vector<uint8_t> &f) {
    // exact-size heap copy: ASan sees any read past the end
    auto *buf = new uint8_t[f.size() ? f.size() : 1];
    if (!f.empty()) std::memcpy(buf, f.data(), f.size());
    uint8_t out[Arp::kFrameLen + 8];
    std::memset(out, 0xEE, sizeof out);
    const size_t n = arp.input(buf, f.size(), fed, out, Arp::kFrameLen);
    delete[] buf;
    ++fed;
    ASSERT_TRUE(n == 0 || n == Arp::kFrameLen);
    ASSERT_EQ(out[Arp::kFrameLen], 0xEE);  // nothing written past cap
    if (n) {
      ++replies;
      uint8_t sink[128];
      other.input(out, n, fed, sink, sizeof sink);
      uint64_t bad = 0;
      for (size_t i = 0; i < static_cast<size_t>(ArpDrop::kCount); ++i)
        bad += other.counters().drops[i];
      ASSERT_EQ(bad, 0u) << "our reply was rejected";
    }
  };
  for (const auto &s : seeds) {
    for (size_t len = 0; len <= s.size(); ++len)
      feed(std::vector<uint8_t>(s.begin(), s.begin() + len));
    for (int i = 0; i < 20000; ++i)
      feed(mutate(s, rng));
  }
  EXPECT_EQ(arp.counters().rx, fed);
  EXPECT_EQ(arp_accounted(arp.counters()), fed);
  EXPECT_EQ(arp.counters().tx_replies, replies);
  EXPECT_GT(replies, 0u);
  EXPECT_LE(arp.table().used(), arp.table().capacity());
}

// Rewrites the ICMPv6 checksum so that mutations reach the checks behind it (only when the
// frame holds the IPv6 header and the payload its length field claims).
void fix_icmpv6_checksum(std::vector<uint8_t> &f) {
  if (f.size() < 58) return;
  const size_t plen = size_t{f[18]} << 8 | f[19];
  if (plen < 4 || 54 + plen > f.size()) return;
  f[56] = f[57] = 0;
  uint64_t sum = plen + 58;
  for (size_t i = 22; i < 54; i += 2)
    sum += uint32_t{f[i]} << 8 | f[i + 1];
  for (size_t i = 0; i < plen; i += 2)
    sum += uint32_t{f[54 + i]} << 8 | (i + 1 < plen ? f[54 + i + 1] : 0);
  while (sum >> 16)
    sum = (sum & 0xFFFF) + (sum >> 16);
  f[56] = static_cast<uint8_t>(~sum >> 8);
  f[57] = static_cast<uint8_t>(~sum);
}

TEST(Robustness, NdEveryFrameAccountedOnce) {
  Nd nd = make_nd(kMac);
  Nd other = make_nd(kPeerMac);
  std::mt19937 rng(58);
  const std::vector<uint8_t> seed = hex(kLinuxNs);
  uint64_t fed = 0, replies = 0;
  auto feed = [&](const std::vector<uint8_t> &f) {
    auto *buf = new uint8_t[f.size() ? f.size() : 1];
    if (!f.empty()) std::memcpy(buf, f.data(), f.size());
    uint8_t out[Nd::kNaLen + 8];
    std::memset(out, 0xEE, sizeof out);
    const size_t n = nd.input(buf, f.size(), fed, out, Nd::kNaLen);
    delete[] buf;
    ++fed;
    ASSERT_TRUE(n == 0 || n == Nd::kNaLen);
    ASSERT_EQ(out[Nd::kNaLen], 0xEE);
    if (n) {
      ++replies;
      // Another node accepts our NA: no drop (it may count a conflict if the target is its
      // own address, which it is not here, or ignore it).
      uint8_t sink[128];
      const NdCounters before = other.counters();
      other.input(out, n, fed, sink, sizeof sink);
      ASSERT_EQ(nd_accounted(other.counters()) - nd_accounted(before), 1u);
      for (size_t i = 0; i < static_cast<size_t>(NdDrop::kCount); ++i)
        if (other.counters().drops[i] != before.drops[i] &&
            static_cast<NdDrop>(i) != NdDrop::kNotForUs)
          ADD_FAILURE() << "our NA dropped as " << nd_drop_str(static_cast<NdDrop>(i));
    }
  };
  for (size_t len = 0; len <= seed.size(); ++len)
    feed(std::vector<uint8_t>(seed.begin(), seed.begin() + len));
  for (int i = 0; i < 40000; ++i) {
    std::vector<uint8_t> f = mutate(seed, rng);
    if (i % 2) fix_icmpv6_checksum(f);  // half of them get past the checksum
    feed(f);
  }
  EXPECT_EQ(nd.counters().rx, fed);
  EXPECT_EQ(nd_accounted(nd.counters()), fed);
  EXPECT_EQ(nd.counters().tx_na, replies);
  EXPECT_GT(replies, 0u);
  // The mutations reached the checks behind the checksum.
  EXPECT_GT(nd.counters().drops[static_cast<size_t>(NdDrop::kBadHopLimit)], 0u);
  EXPECT_GT(nd.counters().drops[static_cast<size_t>(NdDrop::kBadOption)], 0u);
  EXPECT_GT(nd.counters().rx_other_icmpv6, 0u);
}

TEST(Robustness, ClassifyNeverReadsPastTheFrame) {
  std::mt19937 rng(17);
  const std::vector<std::vector<uint8_t>> seeds = {hex(kArpRequest), hex(kLinuxNs)};
  size_t counts[4] = {};
  for (const auto &s : seeds)
    for (int i = 0; i < 20000; ++i) {
      std::vector<uint8_t> f = mutate(s, rng);
      auto *buf = new uint8_t[f.size() ? f.size() : 1];
      if (!f.empty()) std::memcpy(buf, f.data(), f.size());
      const Classified c = classify(buf, f.size(), kMac);
      delete[] buf;
      ++counts[static_cast<size_t>(c.cls)];
      if (c.cls == FrameClass::kDrop) {
        ASSERT_LT(c.drop, RxDrop::kCount);
      }
    }
  EXPECT_GT(counts[static_cast<size_t>(FrameClass::kArp)], 0u);
  EXPECT_GT(counts[static_cast<size_t>(FrameClass::kNd)], 0u);
  EXPECT_GT(counts[static_cast<size_t>(FrameClass::kDrop)], 0u);
}

}  // namespace
}  // namespace uroce::port
