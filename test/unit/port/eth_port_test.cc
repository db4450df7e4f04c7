// SPDX-License-Identifier: BSD-3-Clause
// EthPort on a real DPDK ethdev: net_ring0, whose TX queue feeds its own RX queue, so every
// frame sent comes back. The EAL runs with --no-huge -m 256 --no-pci and a per-process
// file prefix.
#include "port/eth_port.h"

#include <gtest/gtest.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_mempool.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hex.h"
#include "port/port_queue.h"
#include "wire/packet.h"

namespace uroce::port {
namespace {

rte_mempool *g_pool = nullptr;

class EalEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    config::Config cfg;
    cfg.eal_args = {"--no-huge",
                    "-m",
                    "256",
                    "--no-pci",
                    "--log-level=*:error",
                    "--file-prefix=uroce-ethport-test-" + std::to_string(getpid())};
    config::PortConfig pc;
    pc.name = "r0";
    pc.device = "net_ring0";
    cfg.ports.push_back(pc);
    eal_ = std::make_unique<Eal>(eal_argv(cfg, "eth_port_test"));
    g_pool = create_pool("test_pool", 1023, data_room_for(pc));
  }
  void TearDown() override {
    free_pool(g_pool);
    const std::string runtime_dir = rte_eal_get_runtime_dir();
    eal_.reset();
    // rte_eal_cleanup leaves the runtime directory (a few MB of tmpfs) behind.
    std::error_code ec;
    std::filesystem::remove_all(runtime_dir, ec);
  }

 private:
  std::unique_ptr<Eal> eal_;
};

const ::testing::Environment *const g_env =
    ::testing::AddGlobalTestEnvironment(new EalEnv);  // gtest takes ownership

// A fresh net_ring vdev per call: EthPort closes its ethdev when it goes, which releases a vdev.
config::PortConfig ring_config() {
  static int next = 10;
  config::PortConfig pc;
  pc.name = "r0";
  pc.device = "net_ring" + std::to_string(next++);
  const int r = rte_eal_hotplug_add("vdev", pc.device.c_str(), "");
  EXPECT_EQ(r, 0) << "hotplug " << pc.device;
  config::Ipv4Prefix a;
  a.addr[0] = 10, a.addr[1] = 77, a.addr[2] = 0, a.addr[3] = 2;
  a.len = 24;
  pc.ipv4.push_back(a);
  config::Ipv6Prefix b;
  EXPECT_TRUE(config::parse_ipv6("fd00:77::2", b.addr));
  b.len = 64;
  pc.ipv6.push_back(b);
  return pc;
}

void send(EthPort &p, const std::vector<uint8_t> &f) {
  transport::TxBuf b = p.tx_alloc();
  ASSERT_NE(b.data, nullptr);
  ASSERT_GE(b.cap, f.size());
  std::memcpy(b.data, f.data(), f.size());
  p.tx_commit(b, static_cast<uint32_t>(f.size()));
}

// Puts `f` on the ring's TX queue directly (not through EthPort, which would loop a frame to
// its own MAC back without the ring): it arrives on the RX queue as from the wire.
void send_through_ring(EthPort &p, const std::vector<uint8_t> &f) {
  rte_mbuf *m = rte_pktmbuf_alloc(g_pool);
  ASSERT_NE(m, nullptr);
  char *d = rte_pktmbuf_append(m, static_cast<uint16_t>(f.size()));
  ASSERT_NE(d, nullptr);
  std::memcpy(d, f.data(), f.size());
  ASSERT_EQ(rte_eth_tx_burst(p.port_id(), 0, &m, 1), 1u);
}

// Receives until `want` frames came in or 100 empty polls passed (net_ring is synchronous:
// frames are there as soon as tx_burst returned).
template <class H>
unsigned receive(EthPort &p, H &&h, unsigned want) {
  unsigned got = 0;
  for (int empty = 0; got < want && empty < 100;) {
    const unsigned n = p.rx_burst(0, h, 1000);
    got += n;
    empty += n == 0;
  }
  return got;
}

// Every frame received went exactly one way: ARP, ND, accepted by the engine, or a drop reason.
void expect_accounted(const EthPort &p) {
  const PortCounters &c = p.counters();
  uint64_t n = c.rx_arp + c.rx_nd + c.rx_roce;
  for (uint64_t d : c.rx_drops)
    n += d;
  EXPECT_EQ(n, c.rx_packets);
}

std::vector<uint8_t> arp_request_for_us() {
  return test::hex(
      "ff ff ff ff ff ff 02 00 00 00 00 01 08 06 00 01 08 00 06 04 00 01"
      " 02 00 00 00 00 01 0a 4d 00 01 00 00 00 00 00 00 0a 4d 00 02");
}

std::vector<uint8_t> roce_to(const uint8_t *mac) {
  wire::PathInfo path;
  std::memcpy(path.dmac, mac, 6);
  const uint8_t peer[6] = {0x02, 0, 0, 0, 0, 1};
  std::memcpy(path.smac, peer, 6);
  path.sgid = wire::Gid::from_ipv4(10, 77, 0, 1);
  path.dgid = wire::Gid::from_ipv4(10, 77, 0, 2);
  wire::PacketDesc d;
  d.path = &path;
  d.f.opcode = wire::op::kRcSendOnly;
  d.payload_len = 16;
  std::vector<uint8_t> buf(256);
  const uint8_t payload[16] = {1, 2, 3};
  const wire::BuildResult r = wire::build_frame(buf.data(), buf.size(), d, payload);
  EXPECT_TRUE(r.ok());
  buf.resize(r.frame_len);
  return buf;
}

TEST(EthPort, SetupAndGids) {
  config::DaemonConfig dc;
  EthPort p(ring_config(), dc, g_pool, 1);
  EXPECT_EQ(p.name(), "r0");
  EXPECT_EQ(p.mtu(), 1500);
  ASSERT_EQ(p.gids().size(), 3u);
  EXPECT_EQ(p.gids()[0].gid, wire::Gid::link_local_from_mac(p.mac()));
  EXPECT_EQ(p.gids()[1].gid, wire::Gid::from_ipv4(10, 77, 0, 2));
  EXPECT_FALSE(p.promiscuous());
  EXPECT_NE(p.link_status(), "unknown");
}

TEST(EthPort, AnswersArpThroughTheRing) {
  config::DaemonConfig dc;
  EthPort p(ring_config(), dc, g_pool, 1);
  send(p, arp_request_for_us());
  p.flush();
  EXPECT_EQ(p.counters().tx_packets, 1u);
  EXPECT_EQ(p.counters().tx_bytes, 42u);
  // The request comes back in, the ARP module answers through the TX batch.
  ASSERT_EQ(receive(p, NoEngine{}, 1), 1u);
  EXPECT_EQ(p.counters().rx_arp, 1u);
  EXPECT_EQ(p.arp().counters().tx_replies, 1u);
  p.flush();
  EXPECT_EQ(p.counters().tx_packets, 2u);
  EXPECT_EQ(p.counters().tx_bytes, 42u + 60u);
  // The reply (to 02:..:01) comes back too and is not for us.
  ASSERT_EQ(receive(p, NoEngine{}, 1), 1u);
  EXPECT_EQ(p.counters().rx_drops[static_cast<size_t>(RxDrop::kNotForUs)], 1u);
  EXPECT_EQ(p.counters().rx_packets, 2u);
  EXPECT_EQ(p.counters().rx_bytes, 42u + 60u);
  expect_accounted(p);
}

TEST(EthPort, RoceFramesGoToTheHandler) {
  config::DaemonConfig dc;
  EthPort p(ring_config(), dc, g_pool, 1);
  const auto f = roce_to(p.mac());
  send_through_ring(p, f);
  ASSERT_EQ(receive(p, NoEngine{}, 1), 1u);
  EXPECT_EQ(p.counters().rx_drops[static_cast<size_t>(RxDrop::kNoEngine)], 1u);

  std::vector<uint8_t> seen;
  auto accept = [&](const uint8_t *frame, uint32_t len) noexcept {
    seen.assign(frame, frame + len);
    return true;
  };
  send_through_ring(p, f);
  ASSERT_EQ(receive(p, accept, 1), 1u);
  EXPECT_EQ(seen, f);
  EXPECT_EQ(p.counters().rx_roce, 1u);

  auto refuse = [](const uint8_t *, uint32_t) noexcept { return false; };
  send_through_ring(p, f);
  ASSERT_EQ(receive(p, refuse, 1), 1u);
  EXPECT_EQ(p.counters().rx_drops[static_cast<size_t>(RxDrop::kEngineRefused)], 1u);
  expect_accounted(p);
}

TEST(EthPort, FramesToOwnMacLoopBackWithoutLeavingThePort) {
  config::DaemonConfig dc;
  EthPort p(ring_config(), dc, g_pool, 1);
  const auto f = roce_to(p.mac());
  std::vector<std::vector<uint8_t>> seen;
  auto accept = [&](const uint8_t *frame, uint32_t len) noexcept {
    seen.emplace_back(frame, frame + len);
    return true;
  };
  // 100 frames to our own MAC: none reaches the ring (tx_packets stays 0), one rx_burst on the
  // TX queue's number receives all of them, in order.
  for (int i = 0; i < 100; ++i) {
    auto g = f;
    g[54] = static_cast<uint8_t>(i);  // the first payload byte (the handler does not parse)
    send(p, g);
  }
  p.flush();
  EXPECT_EQ(p.counters().tx_packets, 0u);
  EXPECT_EQ(p.counters().tx_loopback, 100u);
  EXPECT_EQ(p.rx_burst(0, accept, 1000), 100u);
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(seen[i][54], static_cast<uint8_t>(i));
  EXPECT_EQ(p.counters().rx_roce, 100u);
  EXPECT_EQ(p.counters().rx_packets, 100u);
  EXPECT_EQ(p.counters().rx_bytes, 100u * f.size());
  EXPECT_EQ(p.rx_burst(0, accept, 1000), 0u);  // nothing came through the ring

  // What the handler sends to us while a burst is dispatched arrives on the next call only.
  seen.clear();
  int replies = 0;
  auto reply = [&](const uint8_t *frame, uint32_t len) noexcept {
    seen.emplace_back(frame, frame + len);
    if (replies < 3) {
      ++replies;
      send(p, f);
    }
    return true;
  };
  send(p, f);
  EXPECT_EQ(p.rx_burst(0, reply, 1000), 1u);
  EXPECT_EQ(p.rx_burst(0, reply, 1000), 1u);
  EXPECT_EQ(p.rx_burst(0, reply, 1000), 1u);
  EXPECT_EQ(p.rx_burst(0, reply, 1000), 1u);
  EXPECT_EQ(p.rx_burst(0, reply, 1000), 0u);
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_EQ(p.counters().tx_loopback, 104u);
  EXPECT_EQ(p.counters().tx_loopback_full, 0u);
  EXPECT_EQ(p.counters().tx_loopback_dropped, 0u);
  // Frames to another MAC still leave through the ring.
  const uint8_t other[6] = {0x02, 0, 0, 0, 0, 9};
  send(p, roce_to(other));
  p.flush();
  EXPECT_EQ(p.counters().tx_packets, 1u);
  EXPECT_EQ(p.counters().tx_loopback, 104u);
  ASSERT_EQ(receive(p, NoEngine{}, 1), 1u);
  EXPECT_EQ(p.counters().rx_drops[static_cast<size_t>(RxDrop::kNotForUs)], 1u);
  // Frames left in the queue when the port stops go back to the pool.
  // (The port keeps a few TX mbufs taken from the pool in a stash: they count as free.)
  const auto free_mbufs = [&p] { return rte_mempool_avail_count(g_pool) + p.tx_mbufs_held(); };
  const unsigned before = free_mbufs();
  send(p, f);
  send(p, f);
  EXPECT_EQ(free_mbufs(), before - 2);
  p.stop();
  EXPECT_GE(rte_mempool_avail_count(g_pool), before);
  expect_accounted(p);
}

// The TX queue refusing frames (net_ring's ring full: nobody receives) is back-pressure, not
// loss: the refused frames stay in the port's backlog and go first, in commit order, once the
// ring has room; a full backlog makes tx_alloc refuse; only stop() drops (tx_dropped).
TEST(EthPort, TxQueueRefusalIsKeptInOrderAndBackPressuresTxAlloc) {
  config::PortConfig pc = ring_config();
  rte_mempool *pool = create_pool("bp_pool", 4095, data_room_for(pc));
  ASSERT_NE(pool, nullptr);
  {
    config::DaemonConfig dc;
    EthPort p(pc, dc, pool, 1);
    const uint8_t other[6] = {0x02, 0, 0, 0, 0, 9};
    const auto f = roce_to(other);
    auto commit = [&](uint32_t seq) {
      transport::TxBuf b = p.tx_alloc();
      if (b.data == nullptr) return false;
      std::memcpy(b.data, f.data(), f.size());
      std::memcpy(b.data + 54, &seq, 4);  // the payload carries the commit order
      p.tx_commit(b, static_cast<uint32_t>(f.size()));
      return true;
    };
    uint32_t committed = 0;
    while (commit(committed)) {
      ++committed;
      ASSERT_LT(committed, 4000u) << "tx_alloc never refused: refused frames were dropped";
    }
    // The ring took what fits; the backlog holds the rest; nothing was dropped.
    const PortCounters &c = p.counters();
    EXPECT_EQ(p.tx_pending(), EthPort::kTxBacklog);
    EXPECT_EQ(c.tx_packets + EthPort::kTxBacklog, committed);
    EXPECT_GT(c.tx_packets, 0u);
    EXPECT_EQ(c.tx_dropped, 0u);
    // Every frame the ring did not take at its first offer was deferred, once.
    EXPECT_GE(c.tx_deferred, EthPort::kTxBacklog);
    EXPECT_LE(c.tx_deferred, committed);
    EXPECT_EQ(c.tx_backpressure, 1u);
    EXPECT_EQ(c.tx_alloc_fail, 0u);
    const uint64_t deferred = c.tx_deferred;
    p.flush();  // still refused: kept, not counted again
    EXPECT_EQ(p.tx_pending(), EthPort::kTxBacklog);
    EXPECT_EQ(c.tx_dropped, 0u);
    EXPECT_EQ(c.tx_deferred, deferred);

    // Receive from the ring, flushing between bursts: every frame arrives once, in order.
    std::vector<uint32_t> got;
    for (int idle = 0; got.size() < committed && idle < 100;) {
      rte_mbuf *m[32];
      const uint16_t n = rte_eth_rx_burst(p.port_id(), 0, m, 32);
      for (uint16_t i = 0; i < n; ++i) {
        uint32_t seq = 0;
        std::memcpy(&seq, rte_pktmbuf_mtod(m[i], const uint8_t *) + 54, 4);
        got.push_back(seq);
        rte_pktmbuf_free(m[i]);
      }
      p.flush();
      idle = n == 0 ? idle + 1 : 0;
    }
    ASSERT_EQ(got.size(), committed);
    for (uint32_t i = 0; i < committed; ++i)
      ASSERT_EQ(got[i], i) << "frame " << i << " out of order, lost or duplicated";
    EXPECT_EQ(p.tx_pending(), 0u);
    EXPECT_EQ(c.tx_packets, committed);
    EXPECT_EQ(c.tx_bytes, uint64_t{committed} * f.size());
    EXPECT_EQ(c.tx_dropped, 0u);
    EXPECT_TRUE(commit(0));  // room again: tx_alloc hands out buffers
    p.flush();

    // Stopping with a refused backlog is the one place frames are dropped, and counted.
    uint32_t more = 0;
    while (commit(more))
      ASSERT_LT(++more, 4000u);
    EXPECT_EQ(p.tx_pending(), EthPort::kTxBacklog);
    p.stop();
    EXPECT_EQ(c.tx_dropped, EthPort::kTxBacklog);
    EXPECT_EQ(p.tx_pending(), 0u);
  }
  free_pool(pool);
}

// A worker's PortQueue behaves the same way on its own queue (here queue 0 of a net_ring
// port whose EthPort sends nothing).
TEST(PortQueue, TxQueueRefusalIsKeptInOrderAndBackPressuresTxAlloc) {
  config::PortConfig pc = ring_config();
  rte_mempool *pool = create_pool("bpq_pool", 4095, data_room_for(pc));
  ASSERT_NE(pool, nullptr);
  {
    config::DaemonConfig dc;
    EthPort p(pc, dc, pool, 1);
    PortQueue q(p.port_id(), 0, pool, p.mac());
    const uint8_t other[6] = {0x02, 0, 0, 0, 0, 9};
    const auto f = roce_to(other);
    auto commit = [&](uint32_t seq) {
      transport::TxBuf b = q.tx_alloc();
      if (b.data == nullptr) return false;
      std::memcpy(b.data, f.data(), f.size());
      std::memcpy(b.data + 54, &seq, 4);
      q.tx_commit(b, static_cast<uint32_t>(f.size()));
      return true;
    };
    uint32_t committed = 0;
    while (commit(committed)) {
      ++committed;
      ASSERT_LT(committed, 4000u) << "tx_alloc never refused: refused frames were dropped";
    }
    const QueueCounters &c = q.counters();
    EXPECT_EQ(q.tx_pending(), PortQueue::kTxBacklog);
    EXPECT_EQ(c.tx_packets + PortQueue::kTxBacklog, committed);
    EXPECT_EQ(c.tx_dropped, 0u);
    EXPECT_GE(c.tx_deferred, PortQueue::kTxBacklog);
    EXPECT_LE(c.tx_deferred, committed);
    EXPECT_EQ(c.tx_backpressure, 1u);
    std::vector<uint32_t> got;
    for (int idle = 0; got.size() < committed && idle < 100;) {
      rte_mbuf *m[32];
      const uint16_t n = q.rx(m);
      for (uint16_t i = 0; i < n; ++i) {
        uint32_t seq = 0;
        std::memcpy(&seq, rte_pktmbuf_mtod(m[i], const uint8_t *) + 54, 4);
        got.push_back(seq);
        rte_pktmbuf_free(m[i]);
      }
      q.flush();
      idle = n == 0 ? idle + 1 : 0;
    }
    ASSERT_EQ(got.size(), committed);
    for (uint32_t i = 0; i < committed; ++i)
      ASSERT_EQ(got[i], i) << "frame " << i << " out of order, lost or duplicated";
    EXPECT_EQ(c.tx_packets, committed);
    EXPECT_EQ(c.tx_dropped, 0u);
    // Teardown drops what is left, counted.
    uint32_t more = 0;
    while (commit(more))
      ASSERT_LT(++more, 4000u);
    q.drop_pending();
    EXPECT_EQ(c.tx_dropped, PortQueue::kTxBacklog);
    EXPECT_EQ(q.tx_pending(), 0u);
    p.stop();
  }
  free_pool(pool);
}

// A worker's queue with capture: every committed frame and every frame received from the queue
// is copied once into the capture ring (a looped-back frame only when committed), in order, with
// non-decreasing stamps of the capture clock.
TEST(PortQueue, CapturesEveryFrameOnceIntoItsRing) {
  config::DaemonConfig dc;
  EthPort p(ring_config(), dc, g_pool, 1);
  PortQueue q(p.port_id(), 0, g_pool, p.mac());
  util::CaptureRing ring(util::CaptureRing::kMinBytes);
  const CaptureClock clock;
  q.set_capture(&ring, &clock);
  const uint8_t other[6] = {0x02, 0, 0, 0, 0, 9};
  const auto out = roce_to(other);
  const auto self = roce_to(p.mac());
  auto commit = [&](const std::vector<uint8_t> &f, uint8_t seq) {
    transport::TxBuf b = q.tx_alloc();
    ASSERT_NE(b.data, nullptr);
    std::memcpy(b.data, f.data(), f.size());
    b.data[54] = seq;
    q.tx_commit(b, static_cast<uint32_t>(f.size()));
  };
  const uint64_t t0 = clock.now_ns();
  for (uint8_t i = 0; i < 5; ++i)
    commit(out, i);
  commit(self, 100);
  commit(self, 101);
  q.flush();
  unsigned got = 0;
  for (int idle = 0; got < 7 && idle < 100;) {
    rte_mbuf *m[PortQueue::kBurst];
    const uint16_t n = q.rx(m);
    for (uint16_t i = 0; i < n; ++i)
      rte_pktmbuf_free(m[i]);
    got += n;
    idle = n == 0 ? idle + 1 : 0;
  }
  ASSERT_EQ(got, 7u);  // 2 looped back, 5 through net_ring
  std::vector<uint8_t> seqs;
  uint64_t last = t0;
  ring.drain([&](const uint8_t *f, uint32_t len, uint64_t ts) {
    EXPECT_EQ(len, out.size());
    EXPECT_GE(ts, last);
    last = ts;
    seqs.push_back(f[54]);
  });
  const std::vector<uint8_t> want = {0, 1, 2, 3, 4, 100, 101, 0, 1, 2, 3, 4};
  EXPECT_EQ(seqs, want);
  EXPECT_LE(last, clock.now_ns());
  EXPECT_EQ(q.capture_dropped(), 0u);
  // Off: nothing more is captured.
  q.set_capture(nullptr, nullptr);
  commit(out, 9);
  q.flush();
  EXPECT_EQ(ring.drain([](const uint8_t *, uint32_t, uint64_t) {}), 0u);
  q.drop_pending();
  p.stop();
}

TEST(EthPort, OwnAddressesResolveToOwnMac) {
  config::DaemonConfig dc;
  EthPort p(ring_config(), dc, g_pool, 1);
  uint8_t mac[6] = {};
  const uint8_t ip4[4] = {10, 77, 0, 2};
  EXPECT_EQ(p.resolve_ipv4(ip4, 1000, mac), Resolve::kResolved);
  EXPECT_EQ(0, std::memcmp(mac, p.mac(), 6));
  std::memset(mac, 0, 6);
  EXPECT_EQ(p.resolve_ipv6(p.gids()[0].gid.raw, 1000, mac), Resolve::kResolved);
  EXPECT_EQ(0, std::memcmp(mac, p.mac(), 6));
  p.flush();
  EXPECT_EQ(p.counters().tx_packets, 0u);  // no ARP request, no NS
  EXPECT_EQ(p.arp().counters().tx_requests, 0u);
}

TEST(EthPort, TxBackPressureAbortAndTooLong) {
  config::DaemonConfig dc;
  EthPort p(ring_config(), dc, g_pool, 1);
  // Let the RX queue's descriptors settle: count what is free now.
  const unsigned avail = rte_mempool_avail_count(g_pool);
  std::vector<transport::TxBuf> held;
  for (;;) {
    transport::TxBuf b = p.tx_alloc();
    if (b.data == nullptr) break;
    held.push_back(b);
    ASSERT_LE(held.size(), 4096u);
  }
  EXPECT_EQ(held.size(), avail);
  EXPECT_EQ(p.counters().tx_alloc_fail, 1u);
  for (transport::TxBuf &b : held)
    p.tx_abort(b);
  EXPECT_EQ(rte_mempool_avail_count(g_pool), avail);
  transport::TxBuf b = p.tx_alloc();
  ASSERT_NE(b.data, nullptr);
  p.tx_commit(b, b.cap + 1);
  EXPECT_EQ(p.counters().tx_too_long, 1u);
  // The rest of the burst this buffer came from waits in the port's stash.
  EXPECT_EQ(rte_mempool_avail_count(g_pool) + p.tx_mbufs_held(), avail);
  p.flush();
  EXPECT_EQ(p.counters().tx_packets, 0u);
}

TEST(EthPort, AnnounceAndCapture) {
  config::DaemonConfig dc;
  EthPort p(ring_config(), dc, g_pool, 1);
  char path[] = "/tmp/uroce-ethport-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  util::PcapWriter w;
  ASSERT_TRUE(w.open(path));
  p.set_capture(&w);
  // 1 gratuitous ARP + unsolicited NA for the link-local and fd00:77::2.
  EXPECT_EQ(p.announce(), 3u);
  p.flush();
  EXPECT_EQ(p.counters().tx_packets, 3u);
  ASSERT_EQ(receive(p, NoEngine{}, 3), 3u);
  // Our own frames come back: the modules recognise them.
  EXPECT_EQ(p.arp().counters().drops[static_cast<size_t>(ArpDrop::kLoopedBack)], 1u);
  EXPECT_EQ(p.nd().counters().drops[static_cast<size_t>(NdDrop::kLoopedBack)], 2u);
  p.set_capture(nullptr);
  EXPECT_EQ(w.frames(), 6u);  // 3 sent + 3 received
  expect_accounted(p);
  EXPECT_TRUE(w.close());
  unlink(path);
}

TEST(EthPort, ResolveSendsRequest) {
  config::DaemonConfig dc;
  EthPort p(ring_config(), dc, g_pool, 1);
  const uint8_t peer[4] = {10, 77, 0, 1};
  uint8_t mac[6];
  EXPECT_EQ(p.resolve_ipv4(peer, 0, mac), Resolve::kPending);
  p.flush();
  EXPECT_EQ(p.counters().tx_packets, 1u);
  EXPECT_EQ(p.arp().counters().tx_requests, 1u);
  uint8_t peer6[16];
  ASSERT_TRUE(config::parse_ipv6("fd00:77::1", peer6));
  EXPECT_EQ(p.resolve_ipv6(peer6, 0, mac), Resolve::kPending);
  p.flush();
  EXPECT_EQ(p.counters().tx_packets, 2u);
  // Timers: the retransmission is due after retrans_ns (1 s by default).
  p.timers(999'999'999);
  p.flush();
  EXPECT_EQ(p.counters().tx_packets, 2u);
  p.timers(1'000'000'000);
  p.flush();
  EXPECT_EQ(p.counters().tx_packets, 4u);
}

TEST(EthPort, TooManyQueuesIsAClearError) {
  config::DaemonConfig dc;
  try {
    EthPort p(ring_config(), dc, g_pool, 1000);
    ADD_FAILURE() << "no error";
  } catch (const PortError &e) {
    EXPECT_NE(std::string(e.what()).find("queues wanted"), std::string::npos) << e.what();
  }
}

TEST(EthPort, UnknownDeviceIsAClearError) {
  config::PortConfig pc = ring_config();
  pc.device = "net_ring7";  // never created
  config::DaemonConfig dc;
  try {
    EthPort p(pc, dc, g_pool, 1);
    ADD_FAILURE() << "no error";
  } catch (const PortError &e) {
    EXPECT_NE(std::string(e.what()).find("no ethdev named 'net_ring7'"), std::string::npos)
        << e.what();
  }
}

TEST(EalArgs, BuiltFromConfig) {
  config::Config cfg;
  cfg.eal_args = {"--no-huge"};
  cfg.daemon.workers = {3, 1};
  config::PortConfig a, b;
  a.name = "a";
  a.device = "net_memif0,role=server";
  b.name = "b";
  b.device = "03:00.0";
  cfg.ports = {a, b};
  const std::vector<std::string> want = {
      "x", "--no-huge", "-l", "1,3", "--vdev=net_memif0,role=server", "-a", "03:00.0"};
  EXPECT_EQ(eal_argv(cfg, "x"), want);
  EXPECT_EQ(ethdev_name(a), "net_memif0");
  EXPECT_EQ(ethdev_name(b), "0000:03:00.0");
  cfg.eal_args = {"-l0", "--no-pci"};
  EXPECT_THROW(eal_argv(cfg, "x"), PortError);  // PCI port with --no-pci
  cfg.ports = {a};
  EXPECT_EQ(eal_argv(cfg, "x").size(), 4u);  // -l0 given: no -l added
}

TEST(EalArgs, DataRoom) {
  config::PortConfig p;
  p.name = "p";
  p.device = "net_ring0";
  EXPECT_EQ(data_room_for(p), RTE_MBUF_DEFAULT_BUF_SIZE);
  p.mtu = 4200;
  EXPECT_GE(data_room_for(p), RTE_PKTMBUF_HEADROOM + 4200 + 14 + 4);
  p.mtu = 1500;
  p.device = "net_af_packet0,iface=veth0,blocksz=8192,framesz=8192";
  EXPECT_EQ(data_room_for(p), 8192 + RTE_PKTMBUF_HEADROOM);  // FACTS: framesz <= data room
}

}  // namespace
}  // namespace uroce::port

namespace uroce::port {
namespace {

// TscClock's fixed-point scaling follows CLOCK_MONOTONIC (same interval, read back to back:
// no speed assumption) and never goes backwards.
TEST(TscClock, TracksMonotonicClock) {
  const TscClock clk;
  auto mono = [] {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
  };
  const uint64_t m0 = mono(), c0 = clk.now_ns();
  uint64_t prev = c0;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t c = clk.now_ns();
    ASSERT_GE(c, prev);
    prev = c;
  }
  const timespec nap{0, 200'000'000};  // a preemption of up to 10 ms between reads is tolerated
  nanosleep(&nap, nullptr);
  const uint64_t c1 = clk.now_ns(), m1 = mono();
  const double dc = static_cast<double>(c1 - c0), dm = static_cast<double>(m1 - m0);
  EXPECT_GT(dc, dm * 0.95);
  EXPECT_LT(dc, dm * 1.05);
}

}  // namespace
}  // namespace uroce::port
