// SPDX-License-Identifier: BSD-3-Clause
// ARP: replies byte for byte against frames written by hand from RFC 826, every drop reason,
// and the resolution state machine (retries with backoff, expiry, refresh, bounded table)
// driven by a fake clock. scapy and tshark check the frames independently (check_frames.py).
#include "port/arp.h"

#include <gtest/gtest.h>

#include <vector>

#include "hex.h"

namespace uroce::port {
namespace {

using test::hex;
using test::to_hex;

const uint8_t kOurMac[6] = {0x02, 0, 0, 0, 0, 0x02};
constexpr uint64_t kSec = 1'000'000'000ull;

// Request from 02:00:00:00:00:01 / 10.77.0.1 asking for 10.77.0.2 (RFC 826 layout).
const std::string kRequest =
    "ff ff ff ff ff ff 02 00 00 00 00 01 08 06"  // Ethernet: broadcast, ARP
    " 00 01 08 00 06 04 00 01"                   // Ethernet/IPv4, hlen 6, plen 4, request
    " 02 00 00 00 00 01 0a 4d 00 01"             // sender MAC, IP
    " 00 00 00 00 00 00 0a 4d 00 02";            // target MAC (unknown), IP

const std::string kReply =
    "02 00 00 00 00 01 02 00 00 00 00 02 08 06"
    " 00 01 08 00 06 04 00 02"
    " 02 00 00 00 00 02 0a 4d 00 02"
    " 02 00 00 00 00 01 0a 4d 00 01"
    " 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00";  // padding to 60 bytes

Arp make_arp(const NeighParams &p = {}) {
  std::vector<Ipv4If> a(2);
  const uint8_t a0[4] = {10, 77, 0, 2}, a1[4] = {172, 16, 5, 9};
  std::memcpy(a[0].addr, a0, 4);
  a[0].prefix = 24;
  std::memcpy(a[1].addr, a1, 4);
  a[1].prefix = 16;
  return Arp(kOurMac, a, p);
}

uint64_t drops(const Arp &arp, ArpDrop d) {
  return arp.counters().drops[static_cast<size_t>(d)];
}

TEST(Arp, AnswersRequestForOurAddress) {
  Arp arp = make_arp();
  const auto req = hex(kRequest);
  uint8_t out[128];
  const size_t n = arp.input(req.data(), req.size(), 5 * kSec, out, sizeof out);
  const auto want = hex(kReply);
  ASSERT_EQ(n, want.size());
  EXPECT_EQ(to_hex(out, n), to_hex(want.data(), want.size()));
  EXPECT_EQ(arp.counters().rx_requests_for_us, 1u);
  EXPECT_EQ(arp.counters().tx_replies, 1u);
  // The requester was learnt, unconfirmed (stale): resolving it gives its MAC and a refresh.
  const uint8_t peer[4] = {10, 77, 0, 1};
  ASSERT_NE(arp.table().find(peer), nullptr);
  EXPECT_EQ(arp.table().find(peer)->state, NeighState::kStale);
}

TEST(Arp, AnswersWithSecondAddressAndPaddedRequest) {
  Arp arp = make_arp();
  auto req = hex(kRequest);
  req[38] = 172, req[39] = 16, req[40] = 5, req[41] = 9;  // target 172.16.5.9
  req.resize(60, 0);                                      // Ethernet padding is fine
  uint8_t out[128];
  const size_t n = arp.input(req.data(), req.size(), 0, out, sizeof out);
  ASSERT_EQ(n, Arp::kFrameLen);
  const uint8_t spa[4] = {172, 16, 5, 9};
  EXPECT_EQ(0, std::memcmp(out + 28, spa, 4));
}

TEST(Arp, ProbeFromZeroAddressIsAnswered) {
  // RFC 5227 probe: sender IP 0.0.0.0. We answer (defend) with target IP 0, learn nothing.
  Arp arp = make_arp();
  auto req = hex(kRequest);
  req[28] = req[29] = req[30] = req[31] = 0;
  uint8_t out[128];
  const size_t n = arp.input(req.data(), req.size(), 0, out, sizeof out);
  ASSERT_EQ(n, Arp::kFrameLen);
  const uint8_t zero[4] = {};
  EXPECT_EQ(0, std::memcmp(out + 38, zero, 4));
  EXPECT_EQ(arp.table().used(), 0u);
}

TEST(Arp, IgnoresRequestsForOthers) {
  Arp arp = make_arp();
  auto req = hex(kRequest);
  req[41] = 3;  // 10.77.0.3
  uint8_t out[128];
  EXPECT_EQ(arp.input(req.data(), req.size(), 0, out, sizeof out), 0u);
  EXPECT_EQ(arp.counters().rx_not_for_us, 1u);
  EXPECT_EQ(arp.table().used(), 0u);  // nothing is created for strangers
}

TEST(Arp, DropsByReason) {
  Arp arp = make_arp();
  const auto good = hex(kRequest);
  uint8_t out[128];
  struct Case {
    size_t off;
    uint8_t val;
    ArpDrop why;
  };
  const Case cases[] = {
      {15, 6, ArpDrop::kBadHwType},      {16, 0x86, ArpDrop::kBadProtoType},
      {18, 8, ArpDrop::kBadAddrLengths}, {19, 16, ArpDrop::kBadAddrLengths},
      {21, 3, ArpDrop::kBadOpcode},      {22, 0x01, ArpDrop::kBadSenderMac},
      {28, 224, ArpDrop::kBadSenderIp},  {28, 127, ArpDrop::kBadSenderIp},
  };
  for (const Case &c : cases) {
    auto f = good;
    f[c.off] = c.val;
    const uint64_t before = drops(arp, c.why);
    EXPECT_EQ(arp.input(f.data(), f.size(), 0, out, sizeof out), 0u) << "offset " << c.off;
    EXPECT_EQ(drops(arp, c.why), before + 1) << arp_drop_str(c.why);
  }
  EXPECT_EQ(arp.input(good.data(), good.size() - 1, 0, out, sizeof out), 0u);
  EXPECT_EQ(drops(arp, ArpDrop::kTruncated), 1u);
  auto zero_mac = good;
  std::memset(zero_mac.data() + 22, 0, 6);
  EXPECT_EQ(arp.input(zero_mac.data(), zero_mac.size(), 0, out, sizeof out), 0u);
  EXPECT_EQ(drops(arp, ArpDrop::kBadSenderMac), 2u);
  auto looped = good;
  std::memcpy(looped.data() + 22, kOurMac, 6);
  EXPECT_EQ(arp.input(looped.data(), looped.size(), 0, out, sizeof out), 0u);
  EXPECT_EQ(drops(arp, ArpDrop::kLoopedBack), 1u);
  EXPECT_EQ(arp.counters().tx_replies, 0u);
}

TEST(Arp, ConflictCountedAndNoBufferCounted) {
  Arp arp = make_arp();
  auto f = hex(kRequest);
  f[31] = 2;  // sender claims 10.77.0.2, our address
  f[41] = 2;
  uint8_t out[128];
  arp.input(f.data(), f.size(), 0, out, sizeof out);
  EXPECT_EQ(arp.counters().conflicts, 1u);
  const auto req = hex(kRequest);
  EXPECT_EQ(arp.input(req.data(), req.size(), 0, out, 20), 0u);  // too small for a reply
  EXPECT_EQ(arp.counters().tx_no_buffer, 1u);
}

TEST(Arp, Gratuitous) {
  Arp arp = make_arp();
  uint8_t out[128];
  const size_t n = arp.build_gratuitous(0, out, sizeof out);
  const auto want =
      hex("ff ff ff ff ff ff 02 00 00 00 00 02 08 06"
          " 00 01 08 00 06 04 00 01"
          " 02 00 00 00 00 02 0a 4d 00 02"
          " 00 00 00 00 00 00 0a 4d 00 02"
          " 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00");
  ASSERT_EQ(n, want.size());
  EXPECT_EQ(to_hex(out, n), to_hex(want.data(), want.size()));
  EXPECT_EQ(arp.build_gratuitous(2, out, sizeof out), 0u);
  EXPECT_EQ(arp.counters().tx_gratuitous, 1u);
}

// Reply from 10.77.0.1 (MAC 02:00:00:00:00:LL) to us.
std::vector<uint8_t> reply_from_peer(uint8_t ll = 1) {
  auto f =
      hex("02 00 00 00 00 02 02 00 00 00 00 01 08 06"
          " 00 01 08 00 06 04 00 02"
          " 02 00 00 00 00 01 0a 4d 00 01"
          " 02 00 00 00 00 02 0a 4d 00 02");
  f[11] = ll;
  f[27] = ll;
  return f;
}

TEST(Arp, ResolveRetriesThenFailsThenRetriesWhenUsedAgain) {
  NeighParams p;
  p.retrans_ns = 100;
  p.max_probes = 3;
  p.retry_ns = 1000;
  Arp arp = make_arp(p);
  const uint8_t peer[4] = {10, 77, 0, 1};
  uint8_t mac[6], out[128];
  size_t n = 0;
  EXPECT_EQ(arp.resolve(peer, 0, mac, out, sizeof out, &n), Resolve::kPending);
  const auto want =
      hex("ff ff ff ff ff ff 02 00 00 00 00 02 08 06"
          " 00 01 08 00 06 04 00 01"
          " 02 00 00 00 00 02 0a 4d 00 02"  // source: the address in the peer's subnet
          " 00 00 00 00 00 00 0a 4d 00 01"
          " 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00");
  ASSERT_EQ(n, want.size());
  EXPECT_EQ(to_hex(out, n), to_hex(want.data(), want.size()));
  // Asking again while a probe is outstanding sends nothing.
  EXPECT_EQ(arp.resolve(peer, 10, mac, out, sizeof out, &n), Resolve::kPending);
  EXPECT_EQ(n, 0u);
  // Retransmissions every retrans_ns (as Linux's retrans_time), 3 probes, then failed.
  EXPECT_EQ(arp.poll(99, out, sizeof out), 0u);
  EXPECT_EQ(arp.poll(100, out, sizeof out), Arp::kFrameLen);
  EXPECT_EQ(arp.poll(100, out, sizeof out), 0u);  // one per entry per due time
  EXPECT_EQ(arp.poll(199, out, sizeof out), 0u);
  EXPECT_EQ(arp.poll(200, out, sizeof out), Arp::kFrameLen);
  EXPECT_EQ(arp.counters().tx_requests, 3u);
  EXPECT_EQ(arp.poll(299, out, sizeof out), 0u);
  EXPECT_EQ(arp.table().find(peer)->state, NeighState::kIncomplete);
  EXPECT_EQ(arp.poll(300, out, sizeof out), 0u);  // third interval over: failed, no 4th probe
  EXPECT_EQ(arp.table().find(peer)->state, NeighState::kFailed);
  EXPECT_EQ(arp.table().failures(), 1u);
  EXPECT_EQ(arp.table().failures_answer_ignored(), 0u);  // nobody answered
  // Used again within retry_ns of the failure: failed at once, no probe.
  EXPECT_EQ(arp.resolve(peer, 800, mac, out, sizeof out, &n), Resolve::kFailed);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(arp.resolve(peer, 1299, mac, out, sizeof out, &n), Resolve::kFailed);
  // Used again later: a new resolution starts (broadcast request at once).
  EXPECT_EQ(arp.resolve(peer, 1300, mac, out, sizeof out, &n), Resolve::kPending);
  EXPECT_EQ(n, Arp::kFrameLen);
  EXPECT_EQ(out[0], 0xff);
  EXPECT_EQ(arp.table().find(peer)->state, NeighState::kIncomplete);
  // This time the peer answers the first retransmission.
  EXPECT_EQ(arp.poll(1400, out, sizeof out), Arp::kFrameLen);
  const auto rep = reply_from_peer();
  arp.input(rep.data(), rep.size(), 1450, out, sizeof out);
  EXPECT_EQ(arp.resolve(peer, 1460, mac, out, sizeof out, &n), Resolve::kResolved);
  EXPECT_EQ(arp.table().failures(), 1u);
}

TEST(Arp, ReplyThatResolvesNothingIsCountedByReason) {
  Arp arp = make_arp();
  uint8_t out[128];
  auto rep = reply_from_peer();  // 10.77.0.1: never asked for
  arp.input(rep.data(), rep.size(), 0, out, sizeof out);
  rep[31] = 2;  // sender IP 10.77.0.2: ours
  arp.input(rep.data(), rep.size(), 0, out, sizeof out);
  rep[28] = rep[29] = rep[30] = rep[31] = 0;  // sender IP 0.0.0.0
  arp.input(rep.data(), rep.size(), 0, out, sizeof out);
  const auto &c = arp.counters();
  EXPECT_EQ(c.rx_replies, 3u);
  EXPECT_EQ(c.reply_ignored[static_cast<size_t>(ArpIgnore::kNoEntry)], 1u);
  EXPECT_EQ(c.reply_ignored[static_cast<size_t>(ArpIgnore::kLocalSender)], 1u);
  EXPECT_EQ(c.reply_ignored[static_cast<size_t>(ArpIgnore::kZeroSender)], 1u);
  EXPECT_EQ(c.conflicts, 1u);
  EXPECT_STREQ(arp_ignore_str(ArpIgnore::kNoEntry), "no_entry");
}

TEST(Arp, OwnAddressResolvesToOwnMacWithoutProbe) {
  Arp arp = make_arp();
  const uint8_t ours[2][4] = {{10, 77, 0, 2}, {172, 16, 5, 9}};
  for (const auto &ip : ours) {
    uint8_t mac[6] = {}, out[128];
    size_t n = 99;
    EXPECT_EQ(arp.resolve(ip, 0, mac, out, sizeof out, &n), Resolve::kResolved);
    EXPECT_EQ(n, 0u);
    EXPECT_EQ(0, std::memcmp(mac, kOurMac, 6));
    EXPECT_EQ(arp.table().find(ip), nullptr);  // no entry, no probe
  }
  EXPECT_EQ(arp.counters().tx_requests, 0u);
  uint8_t frame[128];
  EXPECT_EQ(arp.poll(10 * kSec, frame, sizeof frame), 0u);
}

TEST(Arp, ResolveCompletesOnReplyThenExpiresAndRefreshes) {
  NeighParams p;
  p.retrans_ns = 100;
  p.reachable_ns = 10'000;
  p.gc_stale_ns = 50'000;
  Arp arp = make_arp(p);
  const uint8_t peer[4] = {10, 77, 0, 1};
  uint8_t mac[6], out[128];
  size_t n = 0;
  ASSERT_EQ(arp.resolve(peer, 0, mac, out, sizeof out, &n), Resolve::kPending);
  const auto rep = reply_from_peer();
  EXPECT_EQ(arp.input(rep.data(), rep.size(), 50, out, sizeof out), 0u);
  EXPECT_EQ(arp.counters().rx_replies, 1u);
  ASSERT_EQ(arp.resolve(peer, 60, mac, out, sizeof out, &n), Resolve::kResolved);
  EXPECT_EQ(n, 0u);
  const uint8_t peer_mac[6] = {0x02, 0, 0, 0, 0, 0x01};
  EXPECT_EQ(0, std::memcmp(mac, peer_mac, 6));
  // Reachable until 50 + 10000; then stale: still usable, and a unicast refresh goes out.
  EXPECT_EQ(arp.poll(10'049, out, sizeof out), 0u);
  EXPECT_EQ(arp.table().find(peer)->state, NeighState::kReachable);
  EXPECT_EQ(arp.poll(10'050, out, sizeof out), 0u);
  EXPECT_EQ(arp.table().find(peer)->state, NeighState::kStale);
  ASSERT_EQ(arp.resolve(peer, 10'100, mac, out, sizeof out, &n), Resolve::kResolved);
  ASSERT_EQ(n, Arp::kFrameLen);
  EXPECT_EQ(0, std::memcmp(out, peer_mac, 6));  // unicast probe to the known MAC
  EXPECT_EQ(arp.table().find(peer)->state, NeighState::kProbe);
  // A reply with a new MAC confirms and replaces it.
  const auto rep2 = reply_from_peer(0x77);
  arp.input(rep2.data(), rep2.size(), 10'150, out, sizeof out);
  ASSERT_EQ(arp.resolve(peer, 10'200, mac, out, sizeof out, &n), Resolve::kResolved);
  EXPECT_EQ(mac[5], 0x77);
  EXPECT_EQ(arp.table().find(peer)->state, NeighState::kReachable);
}

TEST(Arp, UnsolicitedReplyCreatesNothing) {
  Arp arp = make_arp();
  const auto rep = reply_from_peer();
  uint8_t out[128];
  arp.input(rep.data(), rep.size(), 0, out, sizeof out);
  EXPECT_EQ(arp.table().used(), 0u);
}

TEST(Arp, StaleEntriesAreCollected) {
  NeighParams p;
  p.gc_stale_ns = 1000;
  Arp arp = make_arp(p);
  const auto req = hex(kRequest);
  uint8_t out[128];
  arp.input(req.data(), req.size(), 0, out, sizeof out);  // learns 10.77.0.1 (stale)
  EXPECT_EQ(arp.table().used(), 1u);
  EXPECT_EQ(arp.poll(999, out, sizeof out), 0u);
  EXPECT_EQ(arp.table().used(), 1u);
  EXPECT_EQ(arp.poll(1000, out, sizeof out), 0u);
  EXPECT_EQ(arp.table().used(), 0u);
}

TEST(Arp, BoundedTable) {
  NeighParams p;
  p.capacity = 2;
  Arp arp = make_arp(p);
  uint8_t mac[6], out[128];
  size_t n;
  const uint8_t a[4] = {10, 77, 0, 10}, b[4] = {10, 77, 0, 11}, c[4] = {10, 77, 0, 12};
  EXPECT_EQ(arp.resolve(a, 0, mac, out, sizeof out, &n), Resolve::kPending);
  EXPECT_EQ(arp.resolve(b, 0, mac, out, sizeof out, &n), Resolve::kPending);
  // Both entries are being resolved: nothing may be evicted.
  EXPECT_EQ(arp.resolve(c, 0, mac, out, sizeof out, &n), Resolve::kTableFull);
  EXPECT_EQ(n, 0u);
  // A stale entry can be replaced: learn one via a request (evicts nothing yet: full) ...
  auto req = hex(kRequest);
  arp.input(req.data(), req.size(), 0, out, sizeof out);
  EXPECT_EQ(drops(arp, ArpDrop::kTableFull), 1u);
  EXPECT_EQ(arp.table().used(), 2u);
}

TEST(Arp, FullTableEvictsLeastRecentlyUsedStaleEntry) {
  NeighParams p;
  p.capacity = 2;
  Arp arp = make_arp(p);
  uint8_t mac[6], out[128];
  size_t n;
  auto req = hex(kRequest);
  arp.input(req.data(), req.size(), 0, out, sizeof out);  // learns 10.77.0.1 at t=0 (stale)
  req[27] = 0x05;                                         // sender 02:00:00:00:00:05 ...
  req[31] = 5;                                            // ... 10.77.0.5, learnt at t=10
  arp.input(req.data(), req.size(), 10, out, sizeof out);
  EXPECT_EQ(arp.table().used(), 2u);
  const uint8_t fresh[4] = {10, 77, 0, 9}, first[4] = {10, 77, 0, 1}, second[4] = {10, 77, 0, 5};
  EXPECT_EQ(arp.resolve(fresh, 20, mac, out, sizeof out, &n), Resolve::kPending);
  EXPECT_EQ(n, Arp::kFrameLen);
  EXPECT_EQ(arp.table().evictions(), 1u);
  EXPECT_EQ(arp.table().find(first), nullptr);  // the least recently used one went
  EXPECT_NE(arp.table().find(second), nullptr);
}

TEST(Arp, NoSourceAddress) {
  Arp arp(kOurMac, {}, {});
  const uint8_t peer[4] = {10, 77, 0, 1};
  uint8_t mac[6], out[128];
  size_t n;
  EXPECT_EQ(arp.resolve(peer, 0, mac, out, sizeof out, &n), Resolve::kNoSource);
}

}  // namespace
}  // namespace uroce::port
