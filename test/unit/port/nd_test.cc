// SPDX-License-Identifier: BSD-3-Clause
// IPv6 neighbour discovery: a Neighbor Solicitation captured from Linux 6.x (ndisc6 on a veth)
// answered with the exact Neighbor Advertisement (whose checksum tshark reported correct),
// every RFC 4861 validation rule, DAD defence, and resolution with a fake clock.
#include "port/nd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "config/config.h"
#include "hex.h"
#include "wire/gid.h"

namespace uroce::port {
namespace {

using test::hex;
using test::to_hex;

const uint8_t kOurMac[6] = {0x52, 0xb8, 0x2d, 0x95, 0x25, 0x38};
constexpr size_t kIcmpOff = 14 + 40;

// Linux NS: from fe80::9c2d:ff:fe2f:ed47 (9e:2d:00:2f:ed:47) to ff02::1:ff00:2, target
// fd00:77::2, hop limit 255, SLLA option.
const std::string kLinuxNs =
    "33 33 ff 00 00 02 9e 2d 00 2f ed 47 86 dd"
    " 60 0e 0d c0 00 20 3a ff"
    " fe 80 00 00 00 00 00 00 9c 2d 00 ff fe 2f ed 47"
    " ff 02 00 00 00 00 00 00 00 00 00 01 ff 00 00 02"
    " 87 00 69 59 00 00 00 00"
    " fd 00 00 77 00 00 00 00 00 00 00 00 00 00 00 02"
    " 01 01 9e 2d 00 2f ed 47";

// Our answer: to the SLLA, from the target, S and O set, TLLA = our MAC.
const std::string kOurNa =
    "9e 2d 00 2f ed 47 52 b8 2d 95 25 38 86 dd"
    " 60 00 00 00 00 20 3a ff"
    " fd 00 00 77 00 00 00 00 00 00 00 00 00 00 00 02"
    " fe 80 00 00 00 00 00 00 9c 2d 00 ff fe 2f ed 47"
    " 88 00 ee 04 60 00 00 00"
    " fd 00 00 77 00 00 00 00 00 00 00 00 00 00 00 02"
    " 02 01 52 b8 2d 95 25 38";

// Independent ICMPv6 checksum (RFC 8200 8.1), recomputed in place.
void fix_checksum(std::vector<uint8_t> &f) {
  const size_t plen = size_t{f[18]} << 8 | f[19];
  f[kIcmpOff + 2] = f[kIcmpOff + 3] = 0;
  uint64_t sum = 0;
  for (size_t i = 22; i < 54; i += 2)
    sum += uint32_t{f[i]} << 8 | f[i + 1];
  sum += plen + 58;
  for (size_t i = 0; i < plen; i += 2)
    sum += uint32_t{f[kIcmpOff + i]} << 8 | (i + 1 < plen ? f[kIcmpOff + i + 1] : 0);
  while (sum >> 16)
    sum = (sum & 0xFFFF) + (sum >> 16);
  const uint16_t c = static_cast<uint16_t>(~sum);
  f[kIcmpOff + 2] = static_cast<uint8_t>(c >> 8);
  f[kIcmpOff + 3] = static_cast<uint8_t>(c);
}

Nd make_nd(const NeighParams &p = {}) {
  std::vector<Ipv6If> a(2);
  EXPECT_TRUE(config::parse_ipv6("fd00:77::2", a[0].addr));
  a[0].prefix = 64;
  EXPECT_TRUE(config::parse_ipv6("fd00:99::5", a[1].addr));
  a[1].prefix = 64;
  return Nd(kOurMac, a, p);
}

uint64_t drops(const Nd &nd, NdDrop d) {
  return nd.counters().drops[static_cast<size_t>(d)];
}

TEST(Nd, AnswersLinuxSolicitation) {
  Nd nd = make_nd();
  const auto ns = hex(kLinuxNs);
  uint8_t out[128];
  const size_t n = nd.input(ns.data(), ns.size(), 0, out, sizeof out);
  const auto want = hex(kOurNa);
  ASSERT_EQ(n, want.size());
  EXPECT_EQ(to_hex(out, n), to_hex(want.data(), want.size()));
  EXPECT_EQ(nd.counters().rx_ns_for_us, 1u);
  EXPECT_EQ(nd.counters().tx_na, 1u);
  // The soliciting node was learnt (stale) from its SLLA.
  ASSERT_NE(nd.table().find(ns.data() + 22), nullptr);
  EXPECT_EQ(nd.table().find(ns.data() + 22)->state, NeighState::kStale);
  // Our own checksum agrees with the independent one.
  std::vector<uint8_t> copy(out, out + n);
  fix_checksum(copy);
  EXPECT_EQ(to_hex(copy.data(), n), to_hex(out, n));
}

TEST(Nd, AnswersForLinkLocal) {
  Nd nd = make_nd();
  auto ns = hex(kLinuxNs);
  uint8_t ll[16];
  ASSERT_TRUE(config::parse_ipv6("fe80::50b8:2dff:fe95:2538", ll));  // from our MAC
  std::memcpy(ns.data() + kIcmpOff + 8, ll, 16);
  uint8_t group[16];
  Nd::solicited_node(ll, group);
  std::memcpy(ns.data() + 38, group, 16);
  fix_checksum(ns);
  uint8_t out[128];
  ASSERT_EQ(nd.input(ns.data(), ns.size(), 0, out, sizeof out), Nd::kNaLen);
  EXPECT_EQ(0, std::memcmp(out + 22, ll, 16));  // NA source = the target
  EXPECT_EQ(nd.num_addrs(), 3u);
  EXPECT_EQ(0, std::memcmp(nd.addr(0), ll, 16));
}

TEST(Nd, SolicitedNodeGroup) {
  uint8_t a[16], g[16], want[16], mac[6];
  ASSERT_TRUE(config::parse_ipv6("fd00:77::12:3456", a));
  ASSERT_TRUE(config::parse_ipv6("ff02::1:ff12:3456", want));
  Nd::solicited_node(a, g);
  EXPECT_EQ(0, std::memcmp(g, want, 16));
  Nd::multicast_mac(g, mac);
  const uint8_t mwant[6] = {0x33, 0x33, 0xff, 0x12, 0x34, 0x56};
  EXPECT_EQ(0, std::memcmp(mac, mwant, 6));
}

TEST(Nd, ValidationDrops) {
  Nd nd = make_nd();
  const auto good = hex(kLinuxNs);
  ASSERT_EQ(good.size(), 86u);  // also tells the compiler the frame is not empty
  uint8_t out[128];
  auto expect_drop = [&](std::vector<uint8_t> f, NdDrop why, bool fix = true) {
    if (fix) fix_checksum(f);
    const uint64_t before = drops(nd, why);
    EXPECT_EQ(nd.input(f.data(), f.size(), 0, out, sizeof out), 0u) << nd_drop_str(why);
    EXPECT_EQ(drops(nd, why), before + 1) << nd_drop_str(why);
  };
  {
    auto f = good;
    f[kIcmpOff + 5] ^= 1;  // payload changed, checksum not
    expect_drop(f, NdDrop::kBadChecksum, false);
  }
  {
    auto f = good;
    f[21] = 254;  // hop limit
    expect_drop(f, NdDrop::kBadHopLimit);
  }
  {
    auto f = good;
    f[kIcmpOff + 1] = 1;  // code
    expect_drop(f, NdDrop::kBadCode);
  }
  {
    auto f = good;
    f[kIcmpOff + 25] = 0;  // option length 0
    expect_drop(f, NdDrop::kBadOption);
  }
  {
    auto f = good;
    f[kIcmpOff + 25] = 2;  // option claims 16 bytes, only 8 there
    expect_drop(f, NdDrop::kBadOption);
  }
  {
    auto f = good;
    f[kIcmpOff + 8] = 0xff;  // target multicast
    expect_drop(f, NdDrop::kMulticastTarget);
  }
  {
    auto f = good;  // ND message of 20 bytes (payload length 20)
    f.resize(kIcmpOff + 20);
    f[19] = 20;
    expect_drop(f, NdDrop::kBadLength);
  }
  {
    auto f = good;  // DAD: source ::, but with an SLLA option
    std::fill(f.begin() + 22, f.begin() + 38, uint8_t{0});
    expect_drop(f, NdDrop::kDadWithSlla);
  }
  {
    auto f = good;  // DAD to a unicast destination
    std::fill(f.begin() + 22, f.begin() + 38, uint8_t{0});
    std::memcpy(f.data() + 38, f.data() + kIcmpOff + 8, 16);
    f.resize(f.size() - 8);
    f[19] = 24;
    expect_drop(f, NdDrop::kDadNotSolicited);
  }
  {
    auto f = good;
    f[22] = 0xff;  // multicast source
    expect_drop(f, NdDrop::kBadSourceIp);
  }
  {
    auto f = good;
    std::memcpy(f.data() + 6, kOurMac, 6);
    expect_drop(f, NdDrop::kLoopedBack);
  }
  {
    auto f = good;
    f[53] = 0x03;  // ff02::1:ff00:3: not a group of ours
    expect_drop(f, NdDrop::kNotForUs);
  }
  {
    auto f = good;
    f[20] = 0;  // next header hop-by-hop
    expect_drop(f, NdDrop::kNotIcmpv6, false);
  }
  {
    auto f = good;
    f[14] = 0x40;
    expect_drop(f, NdDrop::kBadIpHeader, false);
  }
  {
    auto f = good;
    f.resize(f.size() - 1);  // payload length says 32, 31 present
    expect_drop(f, NdDrop::kTruncated, false);
  }
  EXPECT_EQ(nd.counters().tx_na, 0u);
}

TEST(Nd, OtherIcmpv6CountedNotAnswered) {
  Nd nd = make_nd();
  auto f = hex(kLinuxNs);
  f[kIcmpOff] = 128;  // echo request
  fix_checksum(f);
  uint8_t out[128];
  EXPECT_EQ(nd.input(f.data(), f.size(), 0, out, sizeof out), 0u);
  EXPECT_EQ(nd.counters().rx_other_icmpv6, 1u);
}

TEST(Nd, NsForAnotherTarget) {
  Nd nd = make_nd();
  auto f = hex(kLinuxNs);
  f[kIcmpOff + 8 + 15] = 3;  // target fd00:77::3 ...
  f[53] = 0x03;              // ... to its group ff02::1:ff00:3, which we do not listen to
  fix_checksum(f);
  uint8_t out[128];
  EXPECT_EQ(nd.input(f.data(), f.size(), 0, out, sizeof out), 0u);
  EXPECT_EQ(drops(nd, NdDrop::kNotForUs), 1u);
  // Unicast to our address, for another target: valid, not answered.
  auto g = hex(kLinuxNs);
  g[kIcmpOff + 8 + 15] = 3;
  uint8_t ours[16];
  ASSERT_TRUE(config::parse_ipv6("fd00:77::2", ours));
  std::memcpy(g.data() + 38, ours, 16);
  fix_checksum(g);
  EXPECT_EQ(nd.input(g.data(), g.size(), 0, out, sizeof out), 0u);
  EXPECT_EQ(nd.counters().rx_ns_not_for_us, 1u);
}

TEST(Nd, DefendsAgainstDad) {
  Nd nd = make_nd();
  auto f = hex(kLinuxNs);
  std::memset(f.data() + 22, 0, 16);  // source ::
  f.resize(f.size() - 8);             // no SLLA
  f[19] = 24;
  fix_checksum(f);
  uint8_t out[128];
  const size_t n = nd.input(f.data(), f.size(), 0, out, sizeof out);
  ASSERT_EQ(n, Nd::kNaLen);
  const uint8_t all_nodes_mac[6] = {0x33, 0x33, 0, 0, 0, 1};
  EXPECT_EQ(0, std::memcmp(out, all_nodes_mac, 6));
  uint8_t all_nodes[16];
  ASSERT_TRUE(config::parse_ipv6("ff02::1", all_nodes));
  EXPECT_EQ(0, std::memcmp(out + 38, all_nodes, 16));
  EXPECT_EQ(out[kIcmpOff + 4], 0x20);  // O only, not S
  EXPECT_EQ(nd.counters().conflicts, 1u);
}

std::vector<uint8_t> na_from_peer(const char *target, uint8_t flags, uint8_t mac_last,
                                  const char *dst = "fd00:77::2") {
  std::vector<uint8_t> f = hex(kOurNa);  // reuse the layout, swap the roles
  const uint8_t peer_mac[6] = {0x9e, 0x2d, 0x00, 0x2f, 0xed, mac_last};
  std::memcpy(f.data(), kOurMac, 6);
  std::memcpy(f.data() + 6, peer_mac, 6);
  EXPECT_TRUE(config::parse_ipv6(target, f.data() + 22));
  EXPECT_TRUE(config::parse_ipv6(dst, f.data() + 38));
  f[kIcmpOff + 4] = flags;
  EXPECT_TRUE(config::parse_ipv6(target, f.data() + kIcmpOff + 8));
  std::memcpy(f.data() + kIcmpOff + 26, peer_mac, 6);
  fix_checksum(f);
  return f;
}

TEST(Nd, OwnAddressesResolveToOwnMacWithoutSolicitation) {
  Nd nd = make_nd();
  uint8_t global[16];
  ASSERT_TRUE(config::parse_ipv6("fd00:77::2", global));
  const wire::Gid ll = wire::Gid::link_local_from_mac(kOurMac);
  for (const uint8_t *ip : {static_cast<const uint8_t *>(global), ll.raw}) {
    uint8_t mac[6] = {}, out[128];
    size_t n = 99;
    EXPECT_EQ(nd.resolve(ip, 0, mac, out, sizeof out, &n), Resolve::kResolved);
    EXPECT_EQ(n, 0u);
    EXPECT_EQ(0, std::memcmp(mac, kOurMac, 6));
    EXPECT_EQ(nd.table().find(ip), nullptr);
  }
  EXPECT_EQ(nd.counters().tx_ns, 0u);
}

TEST(Nd, ResolveWithSolicitationThenAdvertisement) {
  NeighParams p;
  p.retrans_ns = 100;
  Nd nd = make_nd(p);
  uint8_t peer[16], mac[6], out[128];
  ASSERT_TRUE(config::parse_ipv6("fd00:77::1", peer));
  size_t n = 0;
  ASSERT_EQ(nd.resolve(peer, 0, mac, out, sizeof out, &n), Resolve::kPending);
  ASSERT_EQ(n, Nd::kNsLen);
  // NS: to 33:33:ff:00:00:01 / ff02::1:ff00:1, from fd00:77::2 (same prefix), SLLA = our MAC.
  const auto want =
      hex("33 33 ff 00 00 01 52 b8 2d 95 25 38 86 dd"
          " 60 00 00 00 00 20 3a ff"
          " fd 00 00 77 00 00 00 00 00 00 00 00 00 00 00 02"
          " ff 02 00 00 00 00 00 00 00 00 00 01 ff 00 00 01"
          " 87 00 00 00 00 00 00 00"
          " fd 00 00 77 00 00 00 00 00 00 00 00 00 00 00 01"
          " 01 01 52 b8 2d 95 25 38");
  std::vector<uint8_t> got(out, out + n);
  std::vector<uint8_t> want_fixed = want;
  fix_checksum(want_fixed);  // the checksum is the independent one's
  EXPECT_EQ(to_hex(got.data(), n), to_hex(want_fixed.data(), n));
  // A solicited NA resolves it.
  const auto na = na_from_peer("fd00:77::1", 0x60, 0x47);
  EXPECT_EQ(nd.input(na.data(), na.size(), 50, out, sizeof out), 0u);
  EXPECT_EQ(nd.counters().rx_na, 1u);
  ASSERT_EQ(nd.resolve(peer, 60, mac, out, sizeof out, &n), Resolve::kResolved);
  EXPECT_EQ(mac[5], 0x47);
  EXPECT_EQ(nd.table().find(peer)->state, NeighState::kReachable);
}

TEST(Nd, StaleEntryRefreshedWithUnicastSolicitation) {
  NeighParams p;
  p.retrans_ns = 100;
  Nd nd = make_nd(p);
  const auto ns = hex(kLinuxNs);
  uint8_t out[128], mac[6];
  nd.input(ns.data(), ns.size(), 0, out, sizeof out);  // learns fe80::9c2d:ff:fe2f:ed47 (stale)
  const uint8_t *peer = ns.data() + 22;
  size_t n = 0;
  ASSERT_EQ(nd.resolve(peer, 10, mac, out, sizeof out, &n), Resolve::kResolved);
  const uint8_t peer_mac[6] = {0x9e, 0x2d, 0x00, 0x2f, 0xed, 0x47};
  EXPECT_EQ(0, std::memcmp(mac, peer_mac, 6));
  ASSERT_EQ(n, Nd::kNsLen);  // refresh: unicast NS to the known MAC and the address itself
  EXPECT_EQ(0, std::memcmp(out, peer_mac, 6));
  EXPECT_EQ(0, std::memcmp(out + 38, peer, 16));
  uint8_t ll[16];
  ASSERT_TRUE(config::parse_ipv6("fe80::50b8:2dff:fe95:2538", ll));
  EXPECT_EQ(0, std::memcmp(out + 22, ll, 16));
  EXPECT_EQ(nd.table().find(peer)->state, NeighState::kProbe);
  // Unanswered unicast probes end in failure.
  // (poll() is called until it returns 0, as the daemon does.)
  EXPECT_EQ(nd.poll(110, out, sizeof out), Nd::kNsLen);
  EXPECT_EQ(0, std::memcmp(out, peer_mac, 6));
  EXPECT_EQ(nd.poll(110, out, sizeof out), 0u);
  EXPECT_EQ(nd.poll(210, out, sizeof out), Nd::kNsLen);
  EXPECT_EQ(nd.poll(210, out, sizeof out), 0u);
  EXPECT_EQ(nd.poll(309, out, sizeof out), 0u);
  EXPECT_EQ(nd.table().find(peer)->state, NeighState::kProbe);
  EXPECT_EQ(nd.poll(310, out, sizeof out), 0u);
  EXPECT_EQ(nd.table().find(peer)->state, NeighState::kFailed);
  EXPECT_EQ(nd.resolve(peer, 320, mac, out, sizeof out, &n), Resolve::kFailed);  // MAC dropped
}

TEST(Nd, RetransmitsThenFails) {
  NeighParams p;
  p.retrans_ns = 100;
  p.max_probes = 2;
  Nd nd = make_nd(p);
  uint8_t peer[16], mac[6], out[128];
  ASSERT_TRUE(config::parse_ipv6("fe80::1", peer));
  size_t n = 0;
  ASSERT_EQ(nd.resolve(peer, 0, mac, out, sizeof out, &n), Resolve::kPending);
  uint8_t ll[16];
  ASSERT_TRUE(config::parse_ipv6("fe80::50b8:2dff:fe95:2538", ll));
  EXPECT_EQ(0, std::memcmp(out + 22, ll, 16));  // link-local target: link-local source
  EXPECT_EQ(nd.poll(100, out, sizeof out), Nd::kNsLen);
  EXPECT_EQ(nd.poll(199, out, sizeof out), 0u);
  EXPECT_EQ(nd.poll(200, out, sizeof out), 0u);
  EXPECT_EQ(nd.resolve(peer, 201, mac, out, sizeof out, &n), Resolve::kFailed);
  EXPECT_EQ(nd.counters().tx_ns, 2u);
}

// The NA Linux sends for a unicast NS (ndisc_recv_ns: the TLLA option only when the NS went to a
// multicast address): S set, O clear, no option; to `dst`.
std::vector<uint8_t> na_without_tlla(const char *target, uint8_t flags, const char *dst) {
  std::vector<uint8_t> f = na_from_peer(target, flags, 0x47, dst);
  f.resize(f.size() - 8);
  f[19] = 24;  // payload length: the 24-byte NA alone
  fix_checksum(f);
  return f;
}

uint64_t ignored(const Nd &nd, NdIgnore i) {
  return nd.counters().na_ignored[static_cast<size_t>(i)];
}

// Issue 20: a stale entry (learnt from the peer's NS) refreshed with unicast NS; Linux answers
// every one with an NA without the TLLA option. These answers confirm the MAC we have; they used
// to be ignored (tx_ns 3, rx_na 3, then neigh_failures 1 and the entry gone).
TEST(Nd, UnicastRefreshAnsweredWithoutTllaConfirms) {
  NeighParams p;
  p.retrans_ns = 100;
  Nd nd = make_nd(p);
  const auto ns = hex(kLinuxNs);
  uint8_t out[128], mac[6];
  nd.input(ns.data(), ns.size(), 0, out, sizeof out);  // learns fe80::9c2d:ff:fe2f:ed47 (stale)
  const uint8_t *peer = ns.data() + 22;
  size_t n = 0;
  ASSERT_EQ(nd.resolve(peer, 10, mac, out, sizeof out, &n), Resolve::kResolved);
  ASSERT_EQ(nd.table().find(peer)->state, NeighState::kProbe);
  const auto na = na_without_tlla("fe80::9c2d:ff:fe2f:ed47", 0x40, "fe80::50b8:2dff:fe95:2538");
  EXPECT_EQ(nd.input(na.data(), na.size(), 20, out, sizeof out), 0u);
  EXPECT_EQ(nd.counters().rx_na, 1u);
  EXPECT_EQ(nd.table().find(peer)->state, NeighState::kReachable);
  const uint8_t peer_mac[6] = {0x9e, 0x2d, 0x00, 0x2f, 0xed, 0x47};
  EXPECT_EQ(0, std::memcmp(nd.table().find(peer)->mac, peer_mac, 6));
  for (uint64_t t = 100; t <= 1000; t += 100)
    EXPECT_EQ(nd.poll(t, out, sizeof out), 0u);  // no further probe, no failure
  EXPECT_EQ(nd.counters().tx_ns, 1u);
  EXPECT_EQ(nd.table().failures(), 0u);
  ASSERT_EQ(nd.resolve(peer, 1000, mac, out, sizeof out, &n), Resolve::kResolved);
  EXPECT_EQ(n, 0u);
}

// Without TLLA while we have no MAC (RFC 4861 7.2.5: discarded); the failure that follows is
// counted as "answer ignored", not "no answer".
TEST(Nd, AdvertisementWithoutTllaWhileIncompleteIsIgnored) {
  NeighParams p;
  p.retrans_ns = 100;
  Nd nd = make_nd(p);
  uint8_t peer[16], mac[6], out[128];
  ASSERT_TRUE(config::parse_ipv6("fd00:77::1", peer));
  size_t n = 0;
  ASSERT_EQ(nd.resolve(peer, 0, mac, out, sizeof out, &n), Resolve::kPending);
  const auto na = na_without_tlla("fd00:77::1", 0x40, "fd00:77::2");
  nd.input(na.data(), na.size(), 10, out, sizeof out);
  EXPECT_EQ(ignored(nd, NdIgnore::kNoTlla), 1u);
  EXPECT_EQ(nd.table().find(peer)->state, NeighState::kIncomplete);
  for (uint64_t t : {100, 200, 300})
    while (nd.poll(t, out, sizeof out) != 0) {
    }
  EXPECT_EQ(nd.counters().tx_ns, 3u);
  EXPECT_EQ(nd.table().find(peer)->state, NeighState::kFailed);
  EXPECT_EQ(nd.table().failures(), 1u);
  EXPECT_EQ(nd.table().failures_answer_ignored(), 1u);
}

TEST(Nd, AdvertisementForAnotherTargetIsIgnored) {
  NeighParams p;
  p.retrans_ns = 100;
  Nd nd = make_nd(p);
  uint8_t peer[16], mac[6], out[128];
  ASSERT_TRUE(config::parse_ipv6("fd00:77::1", peer));
  size_t n = 0;
  ASSERT_EQ(nd.resolve(peer, 0, mac, out, sizeof out, &n), Resolve::kPending);
  const auto na = na_from_peer("fd00:77::3", 0x60, 0x47);  // answers for another address
  nd.input(na.data(), na.size(), 10, out, sizeof out);
  EXPECT_EQ(ignored(nd, NdIgnore::kNoEntry), 1u);
  EXPECT_EQ(nd.table().find(peer)->state, NeighState::kIncomplete);
  EXPECT_EQ(nd.table().used(), 1u);  // nothing created for fd00:77::3
}

// O clear with another MAC: not taken; the reachable entry becomes stale (RFC 4861 7.2.5).
TEST(Nd, AdvertisementWithoutOverrideKeepsTheMac) {
  NeighParams p;
  p.retrans_ns = 100;
  Nd nd = make_nd(p);
  uint8_t peer[16], mac[6], out[128];
  ASSERT_TRUE(config::parse_ipv6("fd00:77::1", peer));
  size_t n = 0;
  ASSERT_EQ(nd.resolve(peer, 0, mac, out, sizeof out, &n), Resolve::kPending);
  const auto na = na_from_peer("fd00:77::1", 0x40, 0x47);  // S, no O: first MAC is taken
  nd.input(na.data(), na.size(), 10, out, sizeof out);
  ASSERT_EQ(nd.table().find(peer)->state, NeighState::kReachable);
  const auto other = na_from_peer("fd00:77::1", 0x40, 0x99);  // S, no O, another MAC
  nd.input(other.data(), other.size(), 20, out, sizeof out);
  EXPECT_EQ(ignored(nd, NdIgnore::kOverrideClear), 1u);
  EXPECT_EQ(nd.table().find(peer)->state, NeighState::kStale);
  EXPECT_EQ(nd.table().find(peer)->mac[5], 0x47);
  // An unsolicited NA with the MAC we have does not confirm a probe.
  ASSERT_EQ(nd.resolve(peer, 30, mac, out, sizeof out, &n), Resolve::kResolved);
  ASSERT_EQ(nd.table().find(peer)->state, NeighState::kProbe);
  const auto unsol = na_from_peer("fd00:77::1", 0x20, 0x47);
  nd.input(unsol.data(), unsol.size(), 40, out, sizeof out);
  EXPECT_EQ(ignored(nd, NdIgnore::kNotSolicited), 1u);
  EXPECT_EQ(nd.table().find(peer)->state, NeighState::kProbe);
  // With O set, the new MAC replaces the old one.
  const auto ovr = na_from_peer("fd00:77::1", 0x60, 0x99);
  nd.input(ovr.data(), ovr.size(), 50, out, sizeof out);
  EXPECT_EQ(nd.table().find(peer)->state, NeighState::kReachable);
  EXPECT_EQ(nd.table().find(peer)->mac[5], 0x99);
  EXPECT_STREQ(nd_ignore_str(NdIgnore::kNoTlla), "no_tlla");
}

TEST(Nd, AdvertisementRules) {
  Nd nd = make_nd();
  uint8_t out[128];
  // Solicited NA to a multicast address: invalid.
  auto bad = na_from_peer("fd00:77::1", 0x60, 0x47, "ff02::1");
  EXPECT_EQ(nd.input(bad.data(), bad.size(), 0, out, sizeof out), 0u);
  EXPECT_EQ(drops(nd, NdDrop::kSolicitedToMcast), 1u);
  // Unsolicited NA for an unknown node: valid, creates nothing.
  auto unsol = na_from_peer("fd00:77::1", 0x20, 0x47, "ff02::1");
  nd.input(unsol.data(), unsol.size(), 0, out, sizeof out);
  EXPECT_EQ(nd.table().used(), 0u);
  // Someone advertises our address: conflict.
  auto mine = na_from_peer("fd00:77::2", 0x20, 0x47, "ff02::1");
  nd.input(mine.data(), mine.size(), 0, out, sizeof out);
  EXPECT_EQ(nd.counters().conflicts, 1u);
}

TEST(Nd, UnsolicitedAdvertisement) {
  Nd nd = make_nd();
  uint8_t out[128];
  const size_t n = nd.build_unsolicited_na(1, out, sizeof out);
  auto want =
      hex("33 33 00 00 00 01 52 b8 2d 95 25 38 86 dd"
          " 60 00 00 00 00 20 3a ff"
          " fd 00 00 77 00 00 00 00 00 00 00 00 00 00 00 02"
          " ff 02 00 00 00 00 00 00 00 00 00 00 00 00 00 01"
          " 88 00 00 00 20 00 00 00"
          " fd 00 00 77 00 00 00 00 00 00 00 00 00 00 00 02"
          " 02 01 52 b8 2d 95 25 38");
  fix_checksum(want);
  ASSERT_EQ(n, want.size());
  EXPECT_EQ(to_hex(out, n), to_hex(want.data(), n));
  EXPECT_EQ(nd.build_unsolicited_na(3, out, sizeof out), 0u);
}

}  // namespace
}  // namespace uroce::port
