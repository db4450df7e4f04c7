// SPDX-License-Identifier: BSD-3-Clause
// Per-app quotas (lib/daemon/quota.{h,cc}, ctl::ServerOptions::max_outstanding): an in-process
// Daemon over one engine whose port drops every frame, its control server on a Unix socket
// served by a thread, and lib/client sessions. Each object kind refuses exactly at its quota
// with ENOMEM and counts the refusal (quota.refused.KIND, session.N.quota_refused); freeing an
// object makes room again; another session's quota is its own (QPs, CQs, SRQs, MRs, MR bytes,
// event fds, PDs, AHs). An app that sends control requests without reading the replies gets
// exactly max_outstanding replies, is not disconnected, and is served again once it has read
// them; meanwhile another app is served. An app over its message rate is slowed to it, alone.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "ctl/server.h"
#include "ctl/socket.h"
#include "daemon/daemon.h"
#include "transport/engine.h"

namespace uroce {
namespace {

using namespace std::chrono_literals;

struct NullPort {  // every frame is dropped
  uint8_t buf[9216];
  transport::TxBuf tx_alloc() noexcept { return transport::TxBuf{buf, sizeof buf, nullptr}; }
  void tx_commit(transport::TxBuf, uint32_t) noexcept {}
  void tx_abort(transport::TxBuf) noexcept {}
};

struct SteadyClock {
  uint64_t now_ns() const noexcept {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }
};

class FakePort : public daemon::PortView {
 public:
  const uint8_t *mac() const noexcept override { return mac_; }
  uint32_t eth_mtu() const noexcept override { return 1500; }
  transport::Mtu ib_mtu() const noexcept override { return transport::Mtu::k1024; }
  size_t gid_count() const noexcept override { return 1; }
  wire::Gid gid(size_t) const noexcept override { return wire::Gid::from_ipv4(10, 9, 0, 1); }
  uint8_t dscp() const noexcept override { return 0; }
  const char *ibdev_name() const noexcept override { return "uroce0"; }
  bool link_up() const noexcept override { return true; }
  int resolve(const wire::Gid &, uint8_t mac_out[6]) noexcept override {
    std::memcpy(mac_out, mac_, 6);
    return 0;
  }

 private:
  uint8_t mac_[6] = {0x02, 0, 0, 0, 0x09, 0x01};
};

using Eng = transport::Engine<NullPort, SteadyClock, transport::RingQueues>;

constexpr uint32_t kOutstanding = 3;
constexpr uint32_t kRateBurst = 8;

struct Env {
  NullPort port;
  SteadyClock clock;
  std::unique_ptr<Eng> eng;
  FakePort pv;
  std::unique_ptr<daemon::Daemon> dmn;
  std::unique_ptr<ctl::Server> server;
  std::atomic<bool> stop{false};
  std::thread thr;
  std::string path;

  explicit Env(const daemon::Quota &q) {
    eng = std::make_unique<Eng>(port, clock);
    daemon::DaemonOptions o;
    o.quota = q;
    dmn = std::make_unique<daemon::Daemon>(*eng, pv, o);
    path = "/tmp/uroce-quota-test-" + std::to_string(getpid()) + ".sock";
    ctl::ServerOptions so;
    so.max_outstanding = q.ctl_outstanding;
    so.max_rate = q.ctl_rate;
    so.rate_burst = kRateBurst;
    auto srv = ctl::Server::listen(path.c_str(), so);
    EXPECT_TRUE(srv) << path;
    server = std::move(srv.value());
    daemon::Daemon::register_types(server->types());
    thr = std::thread([this] {
      while (!stop.load(std::memory_order_relaxed)) {
        uint32_t work = dmn->bridge_in();
        work += eng->poll();
        work += dmn->bridge_out();
        if (server->poll(0, *dmn) <= 0 && work == 0) std::this_thread::sleep_for(20us);
      }
    });
  }
  ~Env() {
    stop = true;
    thr.join();
    dmn->close_all();
    server.reset();
  }
  // One counter of the daemon, read through a session (kStats).
  static uint64_t stat(client::Context &c, const std::string &name) {
    std::vector<ctl::StatEntry> v;
    EXPECT_EQ(c.stats(&v), 0);
    for (const auto &e : v)
      if (name == e.name) return e.value;
    ADD_FAILURE() << "no counter " << name;
    return ~uint64_t{0};
  }
};

daemon::Quota small_quota() {
  daemon::Quota q;
  q.qps = 3;
  q.cqs = 4;
  q.srqs = 2;
  q.mrs = 3;
  q.mr_bytes = 5 * 4096;
  q.ctl_outstanding = kOutstanding;
  q.event_fds = 4;
  return q;
}

std::unique_ptr<client::Context> open_ctx(const Env &env, const char *name) {
  std::unique_ptr<client::Context> c;
  EXPECT_EQ(client::Context::open(env.path.c_str(), name, &c, 10'000), 0);
  return c;
}

std::unique_ptr<client::Qp> new_qp(client::Context &c, uint32_t pd, uint32_t cq, int *rc) {
  ctl::CreateQpPayload a{};
  a.pd = pd;
  a.qp_type = 2;  // RC
  a.send_cq = cq;
  a.recv_cq = cq;
  a.max_send_wr = 4;
  a.max_recv_wr = 4;
  a.max_send_sge = 1;
  a.max_recv_sge = 1;
  std::unique_ptr<client::Qp> q;
  *rc = c.create_qp(a, &q);
  return q;
}

TEST(Quota, EveryObjectKindRefusesAtItsQuota) {
  Env env(small_quota());
  auto a = open_ctx(env, "quota_a");
  auto b = open_ctx(env, "quota_b");
  ASSERT_TRUE(a && b);
  uint32_t pd = 0;
  ASSERT_EQ(a->alloc_pd(&pd), 0);

  // CQs: 4, the 5th is refused (cqs and event_fds are both 4: counted as cqs).
  std::vector<std::unique_ptr<client::Cq>> cqs(4);
  for (auto &c : cqs)
    ASSERT_EQ(a->create_cq(16, &c), 0);
  std::unique_ptr<client::Cq> extra;
  EXPECT_EQ(a->create_cq(16, &extra), ENOMEM);
  EXPECT_EQ(Env::stat(*a, "quota.refused.cqs"), 1u);

  // QPs: 3.
  int rc = 0;
  std::vector<std::unique_ptr<client::Qp>> qps;
  for (int i = 0; i < 3; ++i) {
    qps.push_back(new_qp(*a, pd, cqs[0]->handle, &rc));
    ASSERT_EQ(rc, 0);
  }
  EXPECT_EQ(new_qp(*a, pd, cqs[0]->handle, &rc), nullptr);
  EXPECT_EQ(rc, ENOMEM);
  EXPECT_EQ(Env::stat(*a, "quota.refused.qps"), 1u);
  ASSERT_EQ(a->destroy_qp(*qps.back()), 0);  // room again
  qps.back() = new_qp(*a, pd, cqs[0]->handle, &rc);
  EXPECT_EQ(rc, 0);

  // SRQs: 2.
  const ctl::CreateSrqPayload sa{pd, 16, 1, 0};
  std::unique_ptr<client::Srq> s1, s2, s3;
  ASSERT_EQ(a->create_srq(sa, &s1), 0);
  ASSERT_EQ(a->create_srq(sa, &s2), 0);
  EXPECT_EQ(a->create_srq(sa, &s3), ENOMEM);
  EXPECT_EQ(Env::stat(*a, "quota.refused.srqs"), 1u);

  // MR bytes: 5 pages. 4 + 1 fit, one more page does not; then MRs: 3.
  client::Buffer buf;
  ASSERT_EQ(client::Buffer::create(8 * 4096, &buf), 0);
  client::Mr m1, m2, m3, m4;
  ASSERT_EQ(a->reg_mr(pd, buf, 0, 4 * 4096, 1, &m1), 0);
  EXPECT_EQ(a->reg_mr(pd, buf, 0, 2 * 4096, 1, &m2), ENOMEM);
  EXPECT_EQ(Env::stat(*a, "quota.refused.mr_bytes"), 1u);
  // One byte straddling a page boundary maps two pages: over too.
  EXPECT_EQ(a->reg_mr(pd, buf, 4095, 2, 1, &m2), ENOMEM);
  EXPECT_EQ(Env::stat(*a, "quota.refused.mr_bytes"), 2u);
  ASSERT_EQ(a->reg_mr(pd, buf, 4096, 100, 1, &m2), 0);
  ASSERT_EQ(a->dereg_mr(m1), 0);  // the bytes come back
  ASSERT_EQ(a->reg_mr(pd, buf, 0, 4096, 1, &m1), 0);
  ASSERT_EQ(a->reg_mr(pd, buf, 0, 4096, 1, &m3), 0);
  EXPECT_EQ(a->reg_mr(pd, buf, 0, 4096, 1, &m4), ENOMEM);  // 4th MR
  EXPECT_EQ(Env::stat(*a, "quota.refused.mrs"), 1u);

  // The refusals are a's: b has its own quota, and its own count.
  uint32_t pdb = 0;
  ASSERT_EQ(b->alloc_pd(&pdb), 0);
  std::unique_ptr<client::Cq> cqb;
  ASSERT_EQ(b->create_cq(16, &cqb), 0);
  std::vector<std::unique_ptr<client::Qp>> qpb;
  for (int i = 0; i < 3; ++i) {
    qpb.push_back(new_qp(*b, pdb, cqb->handle, &rc));
    EXPECT_EQ(rc, 0);
  }
  std::vector<ctl::StatEntry> v;
  ASSERT_EQ(a->stats(&v), 0);
  uint64_t refused_a = 0, refused_b = 0, mr_bytes_a = 0;
  const std::string pa = "session." + std::to_string(a->server_info().session_id) + ".";
  const std::string pb = "session." + std::to_string(b->server_info().session_id) + ".";
  for (const auto &e : v) {
    if (pa + "quota_refused" == e.name) refused_a = e.value;
    if (pb + "quota_refused" == e.name) refused_b = e.value;
    if (pa + "mr_bytes" == e.name) mr_bytes_a = e.value;
  }
  EXPECT_EQ(refused_a, 6u);  // cq, qp, srq, 2 x mr_bytes, mr
  EXPECT_EQ(refused_b, 0u);
  EXPECT_EQ(mr_bytes_a, 3u * 4096);

  for (auto &q : qpb)
    EXPECT_EQ(b->destroy_qp(*q), 0);
  for (auto &q : qps)
    EXPECT_EQ(a->destroy_qp(*q), 0);
}

// Memory windows count against the MR quota (no quota of their own), with the MRs.
TEST(Quota, MemoryWindowsCountAsMrs) {
  Env env(small_quota());  // mrs = 3
  auto a = open_ctx(env, "quota_mw");
  ASSERT_TRUE(a);
  uint32_t pd = 0;
  ASSERT_EQ(a->alloc_pd(&pd), 0);
  client::Buffer buf;
  ASSERT_EQ(client::Buffer::create(4096, &buf), 0);
  client::Mr m;
  ASSERT_EQ(a->reg_mr(pd, buf, 0, 4096, 1, &m), 0);
  uint32_t w1 = 0, w2 = 0, w3 = 0;
  EXPECT_EQ(a->alloc_mw(pd, 3, &w1), EINVAL);  // types 1 and 2 only
  EXPECT_EQ(a->alloc_mw(pd + 100, 1, &w1), EINVAL);
  ASSERT_EQ(a->alloc_mw(pd, 1, &w1), 0);
  ASSERT_EQ(a->alloc_mw(pd, 2, &w2), 0);
  EXPECT_NE(w1 >> 8, w2 >> 8);
  EXPECT_EQ(a->alloc_mw(pd, 2, &w3), ENOMEM);  // 1 MR + 2 windows
  EXPECT_EQ(Env::stat(*a, "quota.refused.mrs"), 1u);
  EXPECT_EQ(a->dealloc_pd(pd), EBUSY);
  EXPECT_EQ(a->dealloc_mw(w1 ^ 0x100), EINVAL);  // another id: not this session's window
  ASSERT_EQ(a->dealloc_mw(w1 ^ 0x5), 0);         // any tag names it
  EXPECT_EQ(a->dealloc_mw(w1), EINVAL);
  ASSERT_EQ(a->alloc_mw(pd, 2, &w3), 0);  // room again
  ASSERT_EQ(a->dealloc_mw(w2), 0);
  ASSERT_EQ(a->dealloc_mw(w3), 0);
  ASSERT_EQ(a->dereg_mr(m), 0);
  EXPECT_EQ(a->dealloc_pd(pd), 0);
}

TEST(Quota, PdsAndAhsRefuseAtTheirQuota) {
  daemon::Quota q = small_quota();
  q.pds = 2;
  q.ahs = 3;
  Env env(q);
  auto a = open_ctx(env, "quota_pd");
  auto b = open_ctx(env, "quota_pd_b");
  ASSERT_TRUE(a && b);
  uint32_t pd1 = 0, pd2 = 0, pd3 = 0;
  ASSERT_EQ(a->alloc_pd(&pd1), 0);
  ASSERT_EQ(a->alloc_pd(&pd2), 0);
  EXPECT_EQ(a->alloc_pd(&pd3), ENOMEM);
  EXPECT_EQ(Env::stat(*a, "quota.refused.pds"), 1u);
  ASSERT_EQ(a->dealloc_pd(pd2), 0);  // room again
  ASSERT_EQ(a->alloc_pd(&pd2), 0);

  ctl::AhAttrPayload av{};
  const wire::Gid peer = wire::Gid::from_ipv4(10, 9, 0, 2);
  std::memcpy(av.dgid, peer.raw, 16);
  av.is_global = 1;
  av.port_num = 1;
  uint32_t ah[4] = {};
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(a->create_ah(i == 2 ? pd2 : pd1, av, &ah[i]), 0);  // counted per app, any PD
  EXPECT_EQ(a->create_ah(pd1, av, &ah[3]), ENOMEM);
  EXPECT_EQ(Env::stat(*a, "quota.refused.ahs"), 1u);
  ASSERT_EQ(a->destroy_ah(ah[0]), 0);
  ASSERT_EQ(a->create_ah(pd1, av, &ah[0]), 0);

  // b's quota is its own.
  uint32_t pdb[2] = {}, ahb = 0;
  ASSERT_EQ(b->alloc_pd(&pdb[0]), 0);
  ASSERT_EQ(b->alloc_pd(&pdb[1]), 0);
  ASSERT_EQ(b->create_ah(pdb[0], av, &ahb), 0);
  EXPECT_EQ(Env::stat(*b, "quota.refused.pds"), 1u);  // daemon-wide: a's one refusal
  EXPECT_EQ(
      Env::stat(*b, "session." + std::to_string(b->server_info().session_id) + ".quota_refused"),
      0u);
  for (uint32_t h : {ah[0], ah[1], ah[2]})
    EXPECT_EQ(a->destroy_ah(h), 0);
  EXPECT_EQ(b->destroy_ah(ahb), 0);
}

TEST(Quota, EventFdsBoundCqsBelowTheCqQuota) {
  daemon::Quota q = small_quota();
  q.event_fds = 2;
  Env env(q);
  auto a = open_ctx(env, "quota_ev");
  std::unique_ptr<client::Cq> c1, c2, c3;
  ASSERT_EQ(a->create_cq(8, &c1), 0);
  ASSERT_EQ(a->create_cq(8, &c2), 0);
  EXPECT_EQ(a->create_cq(8, &c3), ENOMEM);
  EXPECT_EQ(Env::stat(*a, "quota.refused.event_fds"), 1u);
  EXPECT_EQ(Env::stat(*a, "quota.refused.cqs"), 0u);
}

// Reads every reply waiting on `fd` without blocking; returns how many.
int drain_replies(int fd, const ctl::TypeTable &types) {
  auto m = std::make_unique<ctl::Message>();
  int n = 0;
  while (ctl::recv_message(fd, types, m.get()) == ctl::CtlError::kOk) {
    EXPECT_EQ(m->hdr.type, ctl::kQueryDevice | ctl::kReplyBit);
    EXPECT_EQ(m->hdr.status, 0);
    m->clear();
    ++n;
  }
  return n;
}

TEST(Quota, UnreadRepliesStopTheServerReadingThatAppOnly) {
  Env env(small_quota());
  auto hostile = open_ctx(env, "quota_flood");
  auto other = open_ctx(env, "quota_other");
  ASSERT_TRUE(hostile && other);
  ctl::TypeTable types = ctl::TypeTable::defaults();
  daemon::Daemon::register_types(types);
  const int fd = hostile->ctl_fd();
  ASSERT_EQ(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK), 0);  // reads below never wait
  // 8 requests, no reads (the kernel queues 10 at most per socket).
  constexpr int kSent = 8;
  for (int i = 0; i < kSent; ++i)
    ASSERT_EQ(ctl::send_message(fd, ctl::make_header(ctl::kQueryDevice, 1000 + i), nullptr, 0,
                                nullptr, 0),
              ctl::CtlError::kOk);
  // The other app is served meanwhile (its calls are synchronous); the flood is throttled.
  for (int i = 0; i < 50; ++i) {
    ctl::DeviceAttrPayload d{};
    ASSERT_EQ(other->query_device(&d), 0);
  }
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (Env::stat(*other, "quota.refused.ctl_outstanding") == 0 &&
         std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(Env::stat(*other, "quota.refused.ctl_outstanding"), 1u);  // once, so far
  std::this_thread::sleep_for(20ms);  // room for a wrong extra reply to arrive
  EXPECT_EQ(drain_replies(fd, types), static_cast<int>(kOutstanding));
  // Having read them, it is served again: the rest arrive (throttled again after 3 more).
  int got = static_cast<int>(kOutstanding);
  while (got < kSent && std::chrono::steady_clock::now() < end) {
    got += drain_replies(fd, types);
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(got, kSent);
  // 8 = 3 + 3 + 2: throttled once more after the second 3.
  EXPECT_EQ(Env::stat(*other, "quota.refused.ctl_outstanding"), 2u);
  EXPECT_EQ(Env::stat(*other, "daemon.sessions"), 2u);  // not disconnected
  ctl::DeviceAttrPayload d{};
  EXPECT_EQ(hostile->query_device(&d), 0);  // and its ordinary calls work again
}

TEST(Quota, MessageRateSlowsThatAppOnly) {
  daemon::Quota q = small_quota();
  q.ctl_rate = 20;  // per second, after a burst of kRateBurst
  Env env(q);
  auto hostile = open_ctx(env, "quota_rate");
  auto other = open_ctx(env, "quota_rate_other");
  ASSERT_TRUE(hostile && other);
  // 18 synchronous requests: even with a full bucket at the first, the 10 past the burst are
  // spaced 50 ms apart, so they take 0.5 s or more however fast (or slow) the machine is (a
  // lower bound: load can only lengthen it); none fails.
  constexpr int kCalls = 18;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) {
    ctl::DeviceAttrPayload d{};
    ASSERT_EQ(hostile->query_device(&d), 0) << i;
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(1000 * (kCalls - kRateBurst) / 20 - 50));
  // other: hello + these 2 + stats, within its own burst: never slowed.
  for (int i = 0; i < 2; ++i) {
    ctl::DeviceAttrPayload d{};
    ASSERT_EQ(other->query_device(&d), 0);
  }
  std::vector<ctl::StatEntry> v;
  ASSERT_EQ(other->stats(&v), 0);
  uint64_t refused = 0, refused_h = ~uint64_t{0}, refused_o = ~uint64_t{0};
  const std::string ph = "session." + std::to_string(hostile->server_info().session_id) + ".";
  const std::string po = "session." + std::to_string(other->server_info().session_id) + ".";
  for (const auto &e : v) {
    if (std::string("quota.refused.ctl_rate") == e.name) refused = e.value;
    if (ph + "quota_refused" == e.name) refused_h = e.value;
    if (po + "quota_refused" == e.name) refused_o = e.value;
  }
  EXPECT_GE(refused, 1u);
  EXPECT_LE(refused, static_cast<uint64_t>(kCalls));  // at most once per request it sent
  EXPECT_EQ(refused_h, refused);
  EXPECT_EQ(refused_o, 0u);
  EXPECT_EQ(Env::stat(*other, "daemon.sessions"), 2u);  // slowed, not disconnected
}

}  // namespace
}  // namespace uroce
