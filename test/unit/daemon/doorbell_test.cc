// SPDX-License-Identifier: BSD-3-Clause
// Doorbells straight to the owner (lib/daemon/bridge_doorbell.cc, doc/ipc.md "Doorbells"): an
// in-process Daemon over two engines (worker 0 and worker 1, sharing one ObjectTables), each run
// by its own thread as uroced's lcores run them; worker 1's port loops its frames back into its
// own engine. Main's thread also serves the control socket; lib/client sessions talk to it.
//   WorkerQpRunsWithMainPaused: with main's thread paused (it runs nothing: no doorbell, no
//     control, no engine), a SEND and an RDMA WRITE between two QPs of worker 1 complete,
//     data checked; afterwards main has read no doorbell at all.
//   HostileDoorbellRings: doorbells an app writes into its rings naming another session's QP,
//     its own QP of the other worker, an SRQ outside ring 0, a bad kind or a garbage QPN are
//     refused and counted per worker, touching nothing; a doorbell ring whose producer index
//     the app broke gets that context IBV_EVENT_DEVICE_FATAL once (twice broken: still once);
//     the other session's QPs keep working and get no event.
//   SleepingWorkerWokenByItsOwnRing: worker 1 sleeps when idle (IdleGate, threshold 0, a 60 s
//     cap) and main is paused: each post to a QP of worker 1 wakes worker 1 through that
//     ring's eventfd (its Sleeper counts doorbell wake-ups), and the SENDs / WRITEs complete.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../../support/fake_port_view.h"
#include "../../support/loop_port.h"
#include "client/client.h"
#include "ctl/server.h"
#include "daemon/daemon.h"
#include "daemon/lcore.h"
#include "daemon/sleeper.h"
#include "transport/engine.h"
#include "transport/verbs_types.h"

namespace uroce {
namespace {

using namespace std::chrono_literals;
using namespace transport;

constexpr size_t kBufBytes = 64 * 1024;
constexpr uint32_t kRc = 2, kRts = 3;
constexpr auto kWait = 10s;  // bounded waits: a starved process still completes in time

// Every frame the engine sends is queued and handed back to it by pump() (its own thread).
struct LoopPort : test::LoopQueue {
  void tx_commit(TxBuf b, uint32_t n) noexcept { push(b.data, n); }
};
using test::SteadyClock;

const wire::Gid kOwnGid = test::kLoopGid;
// Every GID resolves to the port's own MAC: all traffic loops back.
struct FakePort : test::LoopPortView {
  FakePort() { std::memcpy(peer_mac, mac(), 6); }
};

using Eng = Engine<LoopPort, SteadyClock, RingQueues>;

struct Env {
  SteadyClock clock;
  ObjectTables tables{64, 1024, 256, 0};
  LoopPort port[2];
  std::unique_ptr<Eng> eng[2];
  FakePort pv;
  std::unique_ptr<daemon::Daemon> dmn;
  std::unique_ptr<ctl::Server> server;
  std::atomic<bool> stop{false};
  std::atomic<bool> pause_main{false};
  std::atomic<bool> main_paused{false};
  std::thread main_thr, worker_thr;
  std::string path;
  // Sleeping worker 1 (sleepy): its Sleeper and idle policy; main's Sleeper only watches.
  daemon::Sleeper sleeper[2];
  bool sleepy;

  // What IdleGate asks of worker 1's loop (daemon/sleeper.h).
  struct WorkerLoop {
    Env *e;
    unsigned pass() {
      uint32_t work = e->dmn->serve_commands(1);
      work += e->dmn->bridge_in(1);
      work += e->eng[1]->poll();
      work += e->port[1].pump(*e->eng[1]);
      work += e->dmn->bridge_out(1);
      return work;
    }
    void arm(bool on) { e->dmn->arm_doorbells(1, on); }
    unsigned recheck() { return pass(); }
    uint64_t now() const { return e->clock.now_ns(); }
    uint64_t deadline(bool *nap) {
      *nap = e->eng[1]->active_qps() != 0 || !e->port[1].empty() || e->dmn->pending(1);
      return e->eng[1]->next_timer_ns();
    }
  };

  explicit Env(bool sleepy_worker = false) : sleepy(sleepy_worker) {
    for (unsigned w = 0; w < 2; ++w) {
      EngineConfig c;
      c.max_qp = 64;
      c.tables = &tables;
      c.qpn_base = daemon::worker_qpn_base(w, c.qpn_base);
      eng[w] = std::make_unique<Eng>(port[w], clock, c);
    }
    dmn = std::make_unique<daemon::Daemon>(
        std::vector<daemon::DaemonEngine *>{eng[0].get(), eng[1].get()}, pv);
    path = "/tmp/uroce-doorbell-test-" + std::to_string(getpid()) + ".sock";
    auto srv = ctl::Server::listen(path.c_str());
    EXPECT_TRUE(srv) << path;
    server = std::move(srv.value());
    daemon::Daemon::register_types(server->types());
    if (sleepy) dmn->set_sleepers({&sleeper[0], &sleeper[1]});
    // Main (worker 0): the control socket, its doorbell rings, its engine. Paused: nothing.
    main_thr = std::thread([this] {
      while (!stop.load(std::memory_order_acquire)) {
        if (pause_main.load(std::memory_order_acquire)) {
          main_paused.store(true, std::memory_order_release);
          std::this_thread::sleep_for(100us);
          continue;
        }
        main_paused.store(false, std::memory_order_release);
        uint32_t work = dmn->bridge_in(0);
        work += eng[0]->poll();
        work += port[0].pump(*eng[0]);
        work += dmn->bridge_out(0);
        if (server->poll(0, *dmn) <= 0 && work == 0) std::this_thread::sleep_for(20us);
      }
    });
    // Worker 1: main's commands, its doorbell rings, its engine, its loop port.
    worker_thr = std::thread([this] {
      if (sleepy) {
        daemon::IdleParams ip;
        ip.threshold_ns = 0;
        ip.nap_min_ns = 20'000;
        ip.max_sleep_ns = 60'000'000'000;  // far beyond every bounded wait of the tests
        daemon::IdleGate gate(&sleeper[1], ip);
        WorkerLoop l{this};
        while (!stop.load(std::memory_order_acquire))
          gate.after_pass(l.pass(), l.now(), l);
        return;
      }
      while (!stop.load(std::memory_order_acquire)) {
        uint32_t work = dmn->serve_commands(1);
        work += dmn->bridge_in(1);
        work += eng[1]->poll();
        work += port[1].pump(*eng[1]);
        work += dmn->bridge_out(1);
        if (work == 0) std::this_thread::sleep_for(20us);
      }
    });
  }
  ~Env() {
    // Main paused, this thread is the control thread: the sessions go while worker 1 still
    // runs the commands (run_on).
    EXPECT_TRUE(pause());
    dmn->close_all();
    stop = true;
    sleeper[1].signal();
    main_thr.join();
    worker_thr.join();
    server.reset();
    dmn.reset();
    unlink(path.c_str());
  }
  // Main runs nothing until resume(); returns once it has stopped (bounded).
  bool pause() {
    pause_main = true;
    const auto end = std::chrono::steady_clock::now() + kWait;
    while (!main_paused.load(std::memory_order_acquire))
      if (std::chrono::steady_clock::now() > end)
        return false;
      else
        std::this_thread::sleep_for(100us);
    return true;
  }
  void resume() { pause_main = false; }
};

// One lib/client session with a PD, a 64 KiB MR and QPs, each on its own new CQ so that the
// daemon places it on the least loaded worker (or on its CQ's worker when `cq` is given).
struct Session {
  std::unique_ptr<client::Context> ctx;
  client::Buffer buf;
  client::Mr mr;
  uint32_t pd = 0;
  std::vector<std::unique_ptr<client::Cq>> cqs;

  void open(const Env &env, const char *name) {
    ASSERT_EQ(client::Context::open(env.path.c_str(), name, &ctx, 10'000), 0);
    ASSERT_EQ(ctx->doorbell_rings(), 2u);
    ASSERT_EQ(ctx->alloc_pd(&pd), 0);
    ASSERT_EQ(client::Buffer::create(kBufBytes, &buf), 0);
    ASSERT_EQ(ctx->reg_mr(pd, buf, 0, kBufBytes,
                          kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead, &mr),
              0);
  }
  client::Cq *new_cq() {
    std::unique_ptr<client::Cq> c;
    EXPECT_EQ(ctx->create_cq(64, &c), 0);
    cqs.push_back(std::move(c));
    return cqs.back().get();
  }
  std::unique_ptr<client::Qp> new_qp(client::Cq *cq) {
    ctl::CreateQpPayload a{};
    a.pd = pd;
    a.qp_type = kRc;
    a.send_cq = cq->handle;
    a.recv_cq = cq->handle;
    a.max_send_wr = 16;
    a.max_recv_wr = 16;
    a.max_send_sge = 1;
    a.max_recv_sge = 1;
    std::unique_ptr<client::Qp> q;
    EXPECT_EQ(ctx->create_qp(a, &q), 0);
    return q;
  }
  // RESET -> INIT -> RTR -> RTS, connected to dest_qpn at this port's own GID.
  void connect(client::Qp &q, uint32_t dest_qpn) {
    ctl::QpAttrPayload m{};
    m.qp_state = 1;
    m.port_num = 1;
    m.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead;
    ASSERT_EQ(ctx->modify_qp(q, m, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
    m = {};
    m.qp_state = 2;
    m.path_mtu = 3;
    m.dest_qp_num = dest_qpn;
    m.rq_psn = 1;
    std::memcpy(m.ah_attr.dgid, kOwnGid.raw, 16);
    m.ah_attr.is_global = 1;
    m.ah_attr.hop_limit = 64;
    m.ah_attr.port_num = 1;
    m.max_dest_rd_atomic = 1;
    m.min_rnr_timer = 1;
    ASSERT_EQ(ctx->modify_qp(q, m,
                             kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                 kQpMaxDestRdAtomic | kQpMinRnrTimer),
              0);
    m = {};
    m.qp_state = kRts;
    m.sq_psn = 1;
    m.timeout = 16;
    m.retry_cnt = 7;
    m.rnr_retry = 7;
    m.max_rd_atomic = 1;
    ASSERT_EQ(
        ctx->modify_qp(
            q, m, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic),
        0);
  }
  // Waits for `n` CQEs on cq (bounded); appends them to out.
  bool wait_cqes(client::Cq &cq, size_t n, std::vector<abi::Cqe> *out) {
    const auto end = std::chrono::steady_clock::now() + kWait;
    while (out->size() < n && std::chrono::steady_clock::now() < end) {
      abi::Cqe c[4];
      const int k = ctx->poll_cq(cq, c, 4);
      for (int i = 0; i < k; ++i)
        out->push_back(c[i]);
      if (k == 0) std::this_thread::sleep_for(50us);
    }
    return out->size() >= n;
  }
  uint64_t stat(const std::string &name) {
    std::vector<ctl::StatEntry> v;
    EXPECT_EQ(ctx->stats(&v), 0);
    for (const auto &e : v)
      if (name == e.name) return e.value;
    ADD_FAILURE() << "no counter " << name;
    return ~uint64_t{0};
  }
};

// Two QPs of worker 1 connected to each other (after a filler QP that takes worker 0).
struct Pair {
  client::Cq *cq = nullptr;
  std::unique_ptr<client::Qp> filler, a, b;
  void make(Session &s) {
    filler = s.new_qp(s.new_cq());
    cq = s.new_cq();
    a = s.new_qp(cq);
    b = s.new_qp(cq);
    ASSERT_TRUE(filler && a && b);
    ASSERT_EQ(abi::doorbell_ring(filler->qpn, 2), 0u);
    ASSERT_EQ(abi::doorbell_ring(a->qpn, 2), 1u) << std::hex << a->qpn;
    ASSERT_EQ(abi::doorbell_ring(b->qpn, 2), 1u) << std::hex << b->qpn;
    s.connect(*a, b->qpn);
    s.connect(*b, a->qpn);
  }
  // a SENDs 64 B into b's receive and WRITEs 128 B into the MR; true when the three CQEs are
  // successful and the bytes arrived.
  void exchange(Session &s, uint64_t id) {
    uint8_t *m = s.buf.data();
    for (int i = 0; i < 64; ++i)
      m[i] = static_cast<uint8_t>(id + i);
    for (int i = 0; i < 128; ++i)
      m[1024 + i] = static_cast<uint8_t>(3 * id + i);
    const abi::Sge rs{s.mr.addr + 4096, 64, s.mr.lkey};
    client::RecvWr rw;
    rw.wr_id = id << 8 | 1;
    rw.sg_list = &rs;
    rw.num_sge = 1;
    ASSERT_EQ(s.ctx->post_recv(*b, rw), 0);
    const abi::Sge ss{s.mr.addr, 64, s.mr.lkey};
    client::SendWr sw;
    sw.wr_id = id << 8 | 2;
    sw.opcode = static_cast<uint8_t>(WrOpcode::kSend);
    sw.send_flags = kSendSignaled;
    sw.sg_list = &ss;
    sw.num_sge = 1;
    ASSERT_EQ(s.ctx->post_send(*a, sw), 0);
    const abi::Sge ws{s.mr.addr + 1024, 128, s.mr.lkey};
    sw.wr_id = id << 8 | 3;
    sw.opcode = static_cast<uint8_t>(WrOpcode::kRdmaWrite);
    sw.sg_list = &ws;
    sw.remote_addr = s.mr.addr + 8192;
    sw.rkey = s.mr.rkey;
    ASSERT_EQ(s.ctx->post_send(*a, sw), 0);
    std::vector<abi::Cqe> c;
    ASSERT_TRUE(s.wait_cqes(*cq, 3, &c)) << "only " << c.size() << " of 3 completions";
    for (const abi::Cqe &e : c) {
      EXPECT_EQ(e.status, 0u) << "wr_id " << std::hex << e.wr_id;
      EXPECT_EQ(e.wr_id >> 8, id);
    }
    EXPECT_EQ(std::memcmp(m + 4096, m, 64), 0) << "SEND payload";
    EXPECT_EQ(std::memcmp(m + 8192, m + 1024, 128), 0) << "WRITE payload";
  }
  void destroy(Session &s) {
    for (client::Qp *q : {a.get(), b.get(), filler.get()})
      if (q) {
        EXPECT_EQ(s.ctx->destroy_qp(*q), 0);
      }
  }
};

TEST(Doorbell, WorkerQpRunsWithMainPaused) {
  Env env;
  Session s;
  ASSERT_NO_FATAL_FAILURE(s.open(env, "doorbell-owner"));
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.make(s));
  ASSERT_TRUE(env.pause());
  // Main runs nothing now: the doorbells of a and b must reach worker 1 on their own.
  p.exchange(s, 1);
  p.exchange(s, 2);
  env.resume();
  EXPECT_EQ(s.stat("worker.0.doorbells"), 0u) << "main read a doorbell of worker 1's QPs";
  EXPECT_GE(s.stat("worker.1.doorbells"), 2u);
  EXPECT_EQ(s.stat("bridge.bad_doorbells"), 0u);
  p.destroy(s);
}

TEST(Doorbell, SleepingWorkerWokenByItsOwnRing) {
  Env env(true);
  Session s;
  ASSERT_NO_FATAL_FAILURE(s.open(env, "doorbell-sleep"));
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.make(s));
  ASSERT_TRUE(env.pause());
  const daemon::IdleCounters &c = env.sleeper[1].counters();
  const auto doorbell = static_cast<unsigned>(daemon::WakeSource::kDoorbell);
  // (The counters are worker 1's; read here as a hint only: a stale value costs a wait.)
  uint64_t seen = 0;
  for (uint64_t id = 1; id <= 3; ++id) {
    // Worker 1 has gone to sleep again since the last exchange (or is about to).
    const auto end = std::chrono::steady_clock::now() + kWait;
    while (c.sleeps == seen && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(2ms);
    seen = c.sleeps;
    p.exchange(s, id);
  }
  EXPECT_GE(c.wakeups[doorbell], 1u) << "worker 1 was never woken by its doorbell ring";
  env.resume();
  EXPECT_EQ(s.stat("worker.0.doorbells"), 0u);
  p.destroy(s);
}

TEST(Doorbell, HostileDoorbellRings) {
  Env env;
  Session v, e;  // victim, evil
  ASSERT_NO_FATAL_FAILURE(v.open(env, "victim"));
  ASSERT_NO_FATAL_FAILURE(e.open(env, "evil"));
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.make(v));
  p.exchange(v, 1);
  // The evil session's own QPs: one on each worker (each on a new CQ: the least loaded).
  std::unique_ptr<client::Qp> own[2];
  for (int i = 0; i < 6 && !(own[0] && own[1]); ++i) {
    auto q = e.new_qp(e.new_cq());
    ASSERT_TRUE(q);
    auto &slot = own[abi::doorbell_ring(q->qpn, 2)];
    if (!slot) slot = std::move(q);
  }
  ASSERT_TRUE(own[0] && own[1]);
  const uint64_t bad0 = e.stat("worker.0.bad_doorbells"), bad1 = e.stat("worker.1.bad_doorbells");
  // Ring 1 (worker 1): 5 refused, 1 accepted (its own QP of worker 1, RQ).
  shm::RingProducer &r1 = e.ctx->doorbell_ring_for_test(1);
  const abi::Doorbell hostile1[] = {
      {p.a->qpn, abi::kDoorbellSq},                  // another session's QP on this worker
      {own[0]->qpn, abi::kDoorbellSq},               // its own QP, but of worker 0
      {abi::kSrqDoorbellBit | 1, abi::kDoorbellRq},  // an SRQ: ring 0 only
      {own[1]->qpn, 7},                              // no such kind
      {0x00ffffff, abi::kDoorbellSq},                // no such QP
      {own[1]->qpn, abi::kDoorbellRq},               // fine
  };
  for (const abi::Doorbell &d : hostile1)
    ASSERT_EQ(r1.try_push(d), shm::RingError::kOk);
  // Ring 0 (main): worker 1's QP of the other session, and its own QP of worker 1 (never
  // forwarded: the wrong ring).
  shm::RingProducer &r0 = e.ctx->doorbell_ring_for_test(0);
  ASSERT_EQ(r0.try_push(abi::Doorbell{p.b->qpn, abi::kDoorbellSq}), shm::RingError::kOk);
  ASSERT_EQ(r0.try_push(abi::Doorbell{own[1]->qpn, abi::kDoorbellSq}), shm::RingError::kOk);
  const auto end = std::chrono::steady_clock::now() + kWait;
  while (!(r0.all_taken() && r1.all_taken()) && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(100us);
  ASSERT_TRUE(r0.all_taken() && r1.all_taken()) << "the daemon did not read the doorbells";
  EXPECT_EQ(e.stat("worker.1.bad_doorbells") - bad1, 5u);
  EXPECT_EQ(e.stat("worker.0.bad_doorbells") - bad0, 2u);
  p.exchange(v, 2);  // the victim's QPs work

  // A broken producer index in ring 1: DEVICE_FATAL (8) to the evil context, once.
  std::atomic_ref<uint64_t>(r1.header()->prod)
      .store(r1.index() + 3 * r1.capacity(), std::memory_order_release);
  ASSERT_EQ(e.ctx->wait_async_event(10'000), 1) << "no DEVICE_FATAL";
  std::vector<ctl::AsyncEventEntry> ev;
  ASSERT_EQ(e.ctx->get_async_events(&ev), 0);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].event_type, 8u);
  // Ring 0 broken too: counted, no second event for the same context.
  std::atomic_ref<uint64_t>(r0.header()->prod)
      .store(r0.index() + 3 * r0.capacity(), std::memory_order_release);
  const auto end2 = std::chrono::steady_clock::now() + kWait;
  while (e.stat("bridge.corrupt_rings") < 2 && std::chrono::steady_clock::now() < end2)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(e.stat("bridge.corrupt_rings"), 2u);
  EXPECT_EQ(e.ctx->wait_async_event(100), 0) << "a second DEVICE_FATAL";
  ASSERT_EQ(e.ctx->get_async_events(&ev), 0);
  EXPECT_TRUE(ev.empty());
  // The victim: its QPs still work, in RTS, and it got no event.
  p.exchange(v, 3);
  ASSERT_EQ(v.ctx->get_async_events(&ev), 0);
  EXPECT_TRUE(ev.empty());
  for (client::Qp *q : {p.a.get(), p.b.get()}) {
    ctl::QueryQpReply qr{};
    ASSERT_EQ(v.ctx->query_qp(*q, &qr), 0);
    EXPECT_EQ(qr.attr.qp_state, kRts);
  }
  for (auto &q : own)
    EXPECT_EQ(e.ctx->destroy_qp(*q), 0);
  p.destroy(v);
}

}  // namespace
}  // namespace uroce
