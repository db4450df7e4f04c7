// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: what an app writes into shared memory, as lib/daemon (Daemon::bridge_in ->
// doorbells) and the engine over the app's rings (transport::RingQueues: the requester's
// copy of SQ slots, the responder's take of RQ / SRQ slots, CQEs into the CQ ring) consume it:
// arbitrary bytes in the WQE slots of a QP's send and receive rings and of an SRQ, arbitrary
// ring indices the app owns (the SQ / RQ / SRQ producer index, the CQ consumer index, the
// doorbell ring's producer index), and doorbells naming any QPN.
//
// Set up once per process: a Daemon (lib/daemon) over one Engine whose port checks that every
// frame parses and loops the ones addressed to the bystander QPs (and to the input's QP) back
// into the engine, dropping the rest; its control server on a Unix socket in /tmp (name with
// the PID), served by a thread that also runs the bridge and the engine. A bystander session
// (its own lib/client Context): PD, 64 KiB MR, CQ, SRQ, an AH, and two RC QPs A <-> B in RTS
// connected to each other through the loop port.
// Per input, a new session (Context) with a PD, a 64 KiB MR (MW_BIND), a type 2 window, a CQ, an AH
// (to this port's own GID, so UD sends can reach the bystander QPs), an SRQ (max_wr 128, max_sge 3)
// and a QP in RTS of the type the setup byte says; then records. Input:
//   setup u8: bits 0-1: the QP's type: 0 / 3 RC, 1 UC, 2 UD.
//   Records (at most 24), each a kind u8 whose bits 0-1 say what follows:
//   0 send slot: one SQ slot (the QP's slot size), put in with Context::post_send_raw. Bit 2:
//     every SGE slot points into the MR (its lkey, its base + addr % its size), a BIND_MW binds
//     the session's window to the MR and a LOCAL_INV names it (a tag t: the first tag XOR t); bit
//     3: opcode
//     := opcode % 11; bit 4: a UD selector u8 follows the slot: bits 0-1 ud_ah := the session's
//     AH, the bystander's AH (another session's PD), 0, or as is; bits 2-3 remote_qpn := A, B,
//     the QP itself, or as is; bit 4: remote_qkey := 0x11111111 (the QPs' Q_Key).
//   1 receive slot: one RQ slot, or with bit 3 one SRQ slot; bit 2: SGEs into the MR as above.
//     Written into the ring, then a valid post_recv (post_srq_recv) behind it rings.
//   2 ring index: then u64 v. Bits 2-4 the index: 0 SQ prod, 1 RQ prod, 2 SRQ prod, 3 CQ cons,
//     4 the doorbell ring's prod, 5-7 SQ prod; bits 5-6 its new value: 0 current + (int32) v,
//     1 v, 2 current + ring size + (v & 255) (more entries than the ring holds), 3 current - 1
//     - (v & 255) (behind); bit 7: then a raw doorbell for that ring (SQ / RQ / SRQ).
//   3 doorbell, pushed raw into the session's doorbell ring: then u32 qpn, u32 kind. Bits 2-4
//     whom it names: 0 the QP, 1 A, 2 B (another session's), 3 the SRQ, 4 the bystander's
//     SRQ, 5-7 qpn as is; bits 5-6 its kind: 0 SQ, 1 RQ, 2-3 kind as is. With a named object
//     and kind 0 / 1, the daemon must refuse it (bridge.bad_doorbells + 1) exactly when it is
//     not the session's own QP / SRQ.
// After the records: raw doorbells for every ring whose index was rewritten, so the daemon
// looks at the last value.
// Checked: no crash / sanitizer report in the daemon, the engine or the client; no CQE of the
// input's session names a bystander QP, every CQE has a valid status and opcode; a ring the
// input did not rewrite is consumed (read by the daemon: the header's `taken` index; a work
// queue's slots are released only when their WRs complete) to the end within 5 s, a rewritten
// CQ index or not (unless
// the doorbell ring's index was rewritten: then the daemon may never hear of the WQEs); a
// rewritten SQ / RQ, once rung, ends with the daemon's consumer index at the producer index, or
// the QP in ERR; a rewritten SRQ ends consumed or with IBV_EVENT_SRQ_ERR for it; a producer
// index left more than the ring's size ahead always ends with the QP in ERR (SRQ_ERR). Except:
// a receive ring is read only when a message needs a receive WQE or the QP is in ERR (the
// engine's receive queue is the ring, as rxe's), so RQ / SRQ rings are not waited for. A ring
// record with bit 7 waits for that before the input goes on, and when it rewrote an empty ring
// for the first time, the daemon took at most a ring's worth from the new value (more claimed:
// the QP in ERR / SRQ_ERR); the session's async events name
// only its own objects. After every input the bystander session is untouched and still works:
// A's SEND to B and WRITE into B's MR complete with success within 5 s, B gets the SEND, A and
// B are in RTS, and the bystander session has no async event.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/fake_port_view.h"
#include "../support/loop_port.h"
#include "client/client.h"
#include "ctl/server.h"
#include "daemon/daemon.h"
#include "fuzz_util.h"
#include "transport/engine.h"
#include "transport/verbs_types.h"
#include "wire/packet.h"

namespace uroce::fuzz {
namespace {

using namespace transport;

constexpr size_t kMaxRecords = 24;
constexpr size_t kBufBytes = 64 * 1024;
constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kSrqBit = 0x80000000u;  // Doorbell.qpn of an SRQ: bit | handle

// Frames the engine sends: each must parse; a frame for one of the QPNs in `deliver` is queued
// and handed back to the engine by pump() (the bystander QPs talk to each other through it),
// the rest are dropped (no peer). Used by the daemon thread only, except `deliver`.
struct LoopPort : test::LoopQueue {
  std::atomic<uint32_t> deliver[3] = {};  // 0: none

  void tx_commit(TxBuf b, uint32_t n) noexcept {
    FUZZ_CHECK(n <= kFrameCap);
    wire::ParsedPacket p;
    FUZZ_CHECK(wire::parse_frame(b.data, n, &p) == wire::ParseError::kOk);
    const uint32_t dqp = p.bth()->dest_qp();
    bool loop = false;
    for (const auto &d : deliver)
      loop |= dqp != 0 && d.load(std::memory_order_relaxed) == dqp;
    if (loop) push(b.data, n);
  }
};
using test::SteadyClock;

const wire::Gid kOwnGid = test::kLoopGid;
using FakePort = test::LoopPortView;

using Eng = Engine<LoopPort, SteadyClock, RingQueues>;

constexpr uint32_t kRts = 3, kErr = 6;
constexpr uint32_t kRc = 2, kUc = 3, kUd = 4;

std::atomic_ref<uint64_t> idx(uint64_t &v) {
  return std::atomic_ref<uint64_t>(v);
}

// One lib/client session and its objects.
struct Session {
  std::unique_ptr<client::Context> ctx;
  client::Buffer buf;
  client::Mr mr;
  uint32_t pd = 0;
  uint32_t ah = 0;
  uint32_t mw = 0;  // a type 2 window (its rkey at alloc; binds change the low 8 bits)
  std::unique_ptr<client::Cq> cq;
  std::unique_ptr<client::Srq> srq;

  void open(const std::string &path, const char *name) {
    FUZZ_CHECK(client::Context::open(path.c_str(), name, &ctx, 10'000) == 0);
    FUZZ_CHECK(ctx->alloc_pd(&pd) == 0);
    FUZZ_CHECK(client::Buffer::create(kBufBytes, &buf) == 0);
    FUZZ_CHECK(
        ctx->reg_mr(pd, buf, 0, kBufBytes,
                    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessMwBind,
                    &mr) == 0);
    FUZZ_CHECK(ctx->alloc_mw(pd, 2, &mw) == 0);
    FUZZ_CHECK(ctx->create_cq(1024, &cq) == 0);
    const ctl::CreateSrqPayload sa{pd, 128, 3, 0};
    FUZZ_CHECK(ctx->create_srq(sa, &srq) == 0);
    ctl::CreateAhPayload a{};
    a.pd = pd;
    std::memcpy(a.attr.dgid, kOwnGid.raw, 16);
    a.attr.is_global = 1;
    a.attr.hop_limit = 64;
    a.attr.port_num = 1;
    FUZZ_CHECK(ctx->create_ah(pd, a.attr, &ah) == 0);
  }

  std::unique_ptr<client::Qp> new_qp(uint32_t type) {
    ctl::CreateQpPayload a{};
    a.pd = pd;
    a.qp_type = type;
    a.send_cq = cq->handle;
    a.recv_cq = cq->handle;
    a.max_send_wr = 16;
    a.max_recv_wr = 16;
    a.max_send_sge = 4;
    a.max_recv_sge = 3;
    a.max_inline_data = 64;
    std::unique_ptr<client::Qp> q;
    FUZZ_CHECK(ctx->create_qp(a, &q) == 0);
    return q;
  }
  // RESET -> INIT -> RTR; RC / UC connected to dest_qpn at this port's own GID (frames to a
  // QPN the loop port does not deliver are dropped).
  void to_rtr(client::Qp &q, uint32_t type, uint32_t dest_qpn) {
    ctl::QpAttrPayload m{};
    m.qp_state = 1;
    m.port_num = 1;
    uint32_t mask = kQpState | kQpPkeyIndex | kQpPort;
    if (type == kUd) {
      m.qkey = kQkey;
      mask |= kQpQkey;
    } else {
      m.qp_access_flags = kAccessRemoteWrite | (type == kRc ? uint32_t{kAccessRemoteRead} : 0u);
      mask |= kQpAccessFlags;
    }
    FUZZ_CHECK(ctx->modify_qp(q, m, mask) == 0);
    m = {};
    m.qp_state = 2;
    mask = kQpState;
    if (type != kUd) {
      m.path_mtu = 3;
      m.dest_qp_num = dest_qpn;
      m.rq_psn = 1;
      std::memcpy(m.ah_attr.dgid, kOwnGid.raw, 16);
      m.ah_attr.is_global = 1;
      m.ah_attr.hop_limit = 64;
      m.ah_attr.port_num = 1;
      mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
      if (type == kRc) {
        m.max_dest_rd_atomic = 1;
        m.min_rnr_timer = 1;
        mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
      }
    }
    FUZZ_CHECK(ctx->modify_qp(q, m, mask) == 0);
  }
  void to_rts(client::Qp &q, uint32_t type, uint8_t timeout, uint8_t retry) {
    ctl::QpAttrPayload m{};
    m.qp_state = kRts;
    m.sq_psn = 1;
    uint32_t mask = kQpState | kQpSqPsn;
    if (type == kRc) {
      m.timeout = timeout;
      m.retry_cnt = retry;
      m.rnr_retry = retry;
      m.max_rd_atomic = 1;
      mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
    }
    FUZZ_CHECK(ctx->modify_qp(q, m, mask) == 0);
  }
};

struct Env {
  LoopPort port;
  SteadyClock clock;
  std::unique_ptr<Eng> eng;
  FakePort pv;
  std::unique_ptr<daemon::Daemon> dmn;
  std::unique_ptr<ctl::Server> server;
  std::atomic<bool> stop{false};
  std::thread thr;
  std::string path;
  // The bystander session: A <-> B (RC), through the loop port.
  Session by;
  std::unique_ptr<client::Qp> a, b;
  uint64_t by_wr = 0;

  Env() {
    EngineConfig c;
    c.max_qp = 64;
    eng = std::make_unique<Eng>(port, clock, c);
    dmn = std::make_unique<daemon::Daemon>(*eng, pv);
    path = "/tmp/uroce-wqefuzz-" + std::to_string(getpid()) + ".sock";
    auto srv = ctl::Server::listen(path.c_str());
    if (!srv) {
      std::fprintf(stderr, "wqe_fuzz: cannot listen on %s: %s\n", path.c_str(),
                   std::strerror(srv.error()));
      std::abort();
    }
    static std::string unlink_at_exit;
    unlink_at_exit = path;
    std::atexit([] { unlink(unlink_at_exit.c_str()); });
    server = std::move(srv.value());
    daemon::Daemon::register_types(server->types());
    thr = std::thread([this] {
      while (!stop.load(std::memory_order_relaxed)) {
        uint32_t work = dmn->bridge_in();
        work += eng->poll();
        work += port.pump(*eng);
        work += dmn->bridge_out();
        const int served = server->poll(0, *dmn);
        if (work == 0 && served <= 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    });
    by.open(path, "wqe_fuzz_bystander");
    // RC timeout 16 (268 ms), 7 retries: the loop port drops nothing it delivers, so only a
    // starved process could need a retry.
    a = by.new_qp(kRc);
    b = by.new_qp(kRc);
    port.deliver[0] = a->qpn;
    port.deliver[1] = b->qpn;
    by.to_rtr(*a, kRc, b->qpn);
    by.to_rtr(*b, kRc, a->qpn);
    by.to_rts(*a, kRc, 16, 7);
    by.to_rts(*b, kRc, 16, 7);
  }
  // The process ends after the fuzzer: the thread is stopped by exit(); nothing to tear down.

  // The bystander still works: A's SEND to B and WRITE into B's part of the MR complete with
  // success, B gets the SEND, both stay in RTS, the session has no async event.
  void check_bystander() {
    const uint64_t id = ++by_wr;
    const abi::Sge rs{by.mr.addr + 4096, 256, by.mr.lkey};
    client::RecvWr rw;
    rw.wr_id = id << 8 | 1;
    rw.sg_list = &rs;
    rw.num_sge = 1;
    FUZZ_CHECK(by.ctx->post_recv(*b, rw) == 0);
    const abi::Sge ss{by.mr.addr, 64, by.mr.lkey};
    client::SendWr sw;
    sw.wr_id = id << 8 | 2;
    sw.opcode = static_cast<uint8_t>(WrOpcode::kSend);
    sw.send_flags = kSendSignaled;
    sw.sg_list = &ss;
    sw.num_sge = 1;
    FUZZ_CHECK(by.ctx->post_send(*a, sw) == 0);
    sw.wr_id = id << 8 | 3;
    sw.opcode = static_cast<uint8_t>(WrOpcode::kRdmaWrite);
    sw.remote_addr = by.mr.addr + 8192;
    sw.rkey = by.mr.rkey;
    FUZZ_CHECK(by.ctx->post_send(*a, sw) == 0);
    int seen = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (seen != 7 && std::chrono::steady_clock::now() < deadline) {
      abi::Cqe c[4];
      const int n = by.ctx->poll_cq(*by.cq, c, 4);
      for (int i = 0; i < n; ++i) {
        if (c[i].status != 0 || c[i].wr_id >> 8 != id)
          std::fprintf(stderr, "wqe_fuzz: bystander CQE wr_id %#llx status %u qp %u\n",
                       static_cast<unsigned long long>(c[i].wr_id), c[i].status, c[i].qp_num);
        FUZZ_CHECK(c[i].status == 0);
        FUZZ_CHECK(c[i].wr_id >> 8 == id);
        const unsigned k = static_cast<unsigned>(c[i].wr_id & 0xff);
        FUZZ_CHECK(k >= 1 && k <= 3 && !(seen & (1 << (k - 1))));
        FUZZ_CHECK(c[i].qp_num == (k == 1 ? b->qpn : a->qpn));
        seen |= 1 << (k - 1);
      }
      if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (seen != 7) {
      std::fprintf(stderr, "wqe_fuzz: the bystander's SEND / WRITE did not complete in 5 s\n");
      std::abort();
    }
    std::vector<ctl::AsyncEventEntry> events;
    FUZZ_CHECK(by.ctx->get_async_events(&events) == 0);
    FUZZ_CHECK(events.empty());
    for (client::Qp *q : {a.get(), b.get()}) {
      ctl::QueryQpReply qr{};
      FUZZ_CHECK(by.ctx->query_qp(*q, &qr) == 0);
      FUZZ_CHECK(qr.attr.qp_state == kRts);
    }
  }
};

Env &env() {
  static Env *e = new Env();  // never destroyed: its thread runs until the process exits
  return *e;
}

// The index a ring record names, in the ring's shared header, and the ring's size.
struct RingRef {
  uint64_t *index = nullptr;
  uint64_t size = 0;
};

void check_cqes(Session &s, const Env &e) {
  abi::Cqe c[16];
  int n;
  while ((n = s.ctx->poll_cq(*s.cq, c, 16)) > 0) {
    for (int i = 0; i < n; ++i) {
      FUZZ_CHECK(c[i].qp_num != e.a->qpn && c[i].qp_num != e.b->qpn);
      FUZZ_CHECK(c[i].status <= static_cast<uint32_t>(WcStatus::kGeneralErr));
      FUZZ_CHECK(c[i].opcode <= static_cast<uint32_t>(WcOpcode::kLocalInv) ||
                 c[i].opcode == static_cast<uint32_t>(WcOpcode::kRecv) ||
                 c[i].opcode == static_cast<uint32_t>(WcOpcode::kRecvRdmaWithImm));
    }
  }
}

// A daemon counter (uroce-stat's name).
uint64_t stat(Session &s, const char *name) {
  std::vector<ctl::StatEntry> v;
  FUZZ_CHECK(s.ctx->stats(&v) == 0);
  for (const ctl::StatEntry &x : v)
    if (std::strncmp(x.name, name, sizeof x.name) == 0) return x.value;
  std::fprintf(stderr, "wqe_fuzz: no counter %s\n", name);
  std::abort();
}

// Pushes a doorbell into the session's ring (bounded wait while the daemon empties it); false
// if the ring stays full or its handle is corrupt (its index was rewritten).
bool push_doorbell(Session &s, uint32_t qpn, uint32_t kind) {
  shm::RingProducer &db = s.ctx->doorbell_ring_for_test();
  for (int i = 0; i < 2000; ++i) {
    const shm::RingError r = db.try_push(abi::Doorbell{qpn, kind});
    if (r == shm::RingError::kOk) return true;
    if (r != shm::RingError::kFull) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return false;
}

void run_one(const uint8_t *data, size_t size) {
  Env &e = env();
  ByteReader in(data, size);
  const uint8_t setup = in.u8();
  const uint32_t type = (setup & 3) == 1 ? kUc : (setup & 3) == 2 ? kUd : kRc;
  Session s;
  s.open(e.path, "wqe_fuzz");
  std::unique_ptr<client::Qp> q = s.new_qp(type);
  client::Qp &qp = *q;
  client::Srq &srq = *s.srq;
  e.port.deliver[2] = qp.qpn;
  s.to_rtr(qp, type, 0x123);
  s.to_rts(qp, type, 1, 0);
  const uint32_t ss = qp.caps.sq.slot_size, rs = qp.caps.rq.slot_size;
  const uint32_t srs = srq.caps.ring.slot_size;
  std::vector<uint8_t> slot(std::max({ss, rs, srs}));
  // Rings whose app-owned index the input rewrote (0 SQ, 1 RQ, 2 SRQ, 3 CQ, 4 doorbell ring).
  bool tampered[5] = {};
  auto ring_ref = [&](unsigned which) -> RingRef {
    switch (which) {
      case 1:
        return {&qp.rq.header()->prod, qp.rq.capacity()};
      case 2:
        return {&srq.ring.header()->prod, srq.ring.capacity()};
      case 3:
        return {&s.cq->ring.header()->cons, s.cq->ring.capacity()};
      case 4: {
        shm::RingProducer &db = s.ctx->doorbell_ring_for_test();
        return {&db.header()->prod, db.capacity()};
      }
      default:
        return {&qp.sq.header()->prod, qp.sq.capacity()};
    }
  };
  auto ring_bell = [&](unsigned which) {
    if (which == 0) return push_doorbell(s, qp.qpn, abi::kDoorbellSq);
    if (which == 1) return push_doorbell(s, qp.qpn, abi::kDoorbellRq);
    return push_doorbell(s, kSrqBit | srq.handle, abi::kDoorbellRq);
  };
  // Waits (bounded) for `n` free slots of a ring the input left alone; a rewritten one is not
  // waited for (the daemon may have stopped reading it).
  auto wait_free = [&](shm::RingProducer &r, unsigned which, size_t n) {
    for (int i = 0; i < 2000 && !tampered[which] && !tampered[4] && r.free_slots() < n; ++i)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    return r.free_slots() >= n;
  };
  bool srq_err = false;
  auto qp_state = [&] {
    ctl::QueryQpReply qr{};
    FUZZ_CHECK(s.ctx->query_qp(qp, &qr) == 0);
    return qr.attr.qp_state;
  };
  // The session's async events name its own objects only; SRQ_ERR is noted.
  auto poll_events = [&] {
    std::vector<ctl::AsyncEventEntry> events;
    FUZZ_CHECK(s.ctx->get_async_events(&events) == 0);
    for (const auto &ev : events) {
      FUZZ_CHECK(ev.handle != e.a->qpn && ev.handle != e.b->qpn);
      // A broken SQ / RQ index: QP_FATAL names the fuzzed QP (the engine's pull_sq / take).
      if (ev.event_type == static_cast<uint32_t>(AsyncEvent::kQpFatal))
        FUZZ_CHECK(ev.handle == qp.qpn);
      // DEVICE_FATAL only for a broken doorbell ring (Daemon::doorbells).
      if (ev.event_type == static_cast<uint32_t>(AsyncEvent::kDeviceFatal)) FUZZ_CHECK(tampered[4]);
      if (ev.event_type == static_cast<uint32_t>(AsyncEvent::kSrqErr)) {
        FUZZ_CHECK(ev.handle == srq.handle);
        srq_err = true;
      }
    }
  };
  auto header = [&](unsigned w) { return (w == 0 ? qp.sq : w == 1 ? qp.rq : srq.ring).header(); };
  auto consumed = [&](unsigned w) {
    abi::RingHeader *h = header(w);
    return idx(h->taken).load(std::memory_order_acquire) ==
           idx(h->prod).load(std::memory_order_acquire);
  };
  auto too_far = [&](unsigned w) {
    abi::RingHeader *h = header(w);
    return idx(h->prod).load(std::memory_order_acquire) -
               idx(h->cons).load(std::memory_order_acquire) >
           h->slot_count;
  };
  // Receive rings (w 1 RQ, 2 SRQ) are read when a message needs a WQE, as rxe's responder does
  // (the engine's queue is the ring): an RC / UC QP's receives and the unattached SRQ's are
  // used by nothing, a UD QP's only by its sends to itself. So a receive ring may keep its
  // WQEs for ever; what it holds is checked when it is read (a broken index then fails the QP
  // or the SRQ), and whenever the QP enters ERR (the flush reads it to the end).
  auto backlog = [&](unsigned w) { return w != 0; };
  // A rewritten SQ / RQ (w 0 / 1) that the daemon has looked at is consumed up to its producer
  // index, or the QP is in ERR; a rewritten SRQ (w 2) is consumed or has SRQ_ERR; or a receive
  // ring waits behind a full queue.
  auto ring_settled = [&](unsigned w) {
    if (w == 2) return consumed(2) || srq_err || backlog(2);
    return consumed(w) || qp_state() == kErr || backlog(w);
  };
  // 5 s of wall-clock time: far more than the daemon needs (~1 ms), so that a loaded CI machine
  // does not make a slow pass look like a hang.
  auto wait_until = [&](auto &&cond, const char *what) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
      poll_events();
      check_cqes(s, e);
      if (cond()) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        std::fprintf(stderr,
                     "wqe_fuzz: %s within 5 s (rewritten: SQ %d RQ %d SRQ %d CQ %d DB %d)\n", what,
                     tampered[0], tampered[1], tampered[2], tampered[3], tampered[4]);
        std::abort();
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  };
  // After the daemon has looked at a rewritten index: one left more than the ring's size ahead
  // can only have ended in ERR (SRQ_ERR).
  // failed: the QP in ERR (SRQ_ERR for the SRQ).
  auto failed = [&](unsigned w) { return w == 2 ? srq_err : qp_state() == kErr; };
  // idle: the ring was empty, never rewritten before, with consumer index cons_before, when
  // the input wrote nv: the daemon's cached producer index was its consumer index then, so
  // what it does next depends on nv alone.
  auto check_rewritten = [&](unsigned w, bool idle, uint64_t cons_before, uint64_t nv) {
    wait_until([&] { return ring_settled(w); },
               "the daemon neither consumed a rewritten ring nor failed its QP / SRQ");
    if (too_far(w) && !(backlog(w) && !consumed(w))) FUZZ_CHECK(failed(w));
    if (idle) {
      // One index value never lets the daemon take more than a ring's worth (a stale slot
      // twice); more than that claimed must fail the QP / SRQ.
      const uint64_t ring = header(w)->slot_count;
      const uint64_t taken = idx(header(w)->taken).load(std::memory_order_acquire) - cons_before;
      FUZZ_CHECK(taken <= ring);
      if (nv - cons_before > ring && !backlog(w)) FUZZ_CHECK(failed(w));
    }
  };
  for (size_t r = 0; r < kMaxRecords && in.remaining() > 0; ++r) {
    const uint8_t kind = in.u8();
    const unsigned cls = kind & 3;
    if (cls == 2) {  // ring index
      const unsigned which = ((kind >> 2) & 7) > 4 ? 0 : (kind >> 2) & 7;
      const unsigned how = (kind >> 5) & 3;
      const uint64_t v = in.u64();
      const RingRef rr = ring_ref(which);
      // Rung (bit 7), the daemon reads the index before the input goes on (unless the doorbell
      // ring is broken: then it hears nothing from this session). First it catches up with
      // what the ring holds.
      const bool bell = (kind & 0x80) && which < 3 && !tampered[4];
      bool idle = false;
      uint64_t cons_before = 0;
      if (bell && !tampered[which]) {  // a ring rewritten before may never settle unrung
        wait_until([&] { return consumed(which) || backlog(which) || failed(which); },
                   "the daemon neither consumed a ring nor failed its QP / SRQ");
        idle = consumed(which);
        cons_before = idx(header(which)->taken).load(std::memory_order_acquire);
      }
      const uint64_t cur = idx(*rr.index).load(std::memory_order_relaxed);
      const uint64_t nv = how == 0   ? cur + static_cast<uint64_t>(static_cast<int64_t>(
                                               static_cast<int32_t>(static_cast<uint32_t>(v))))
                          : how == 1 ? v
                          : how == 2 ? cur + rr.size + (v & 255)
                                     : cur - 1 - (v & 255);
      idx(*rr.index).store(nv, std::memory_order_release);
      tampered[which] = true;
      if (bell && ring_bell(which)) check_rewritten(which, idle, cons_before, nv);
      check_cqes(s, e);
      continue;
    }
    if (cls == 3) {  // raw doorbell
      uint32_t qpn = in.u32();
      uint32_t dkind = in.u32();
      switch ((kind >> 2) & 7) {
        case 0:
          qpn = qp.qpn;
          break;
        case 1:
          qpn = e.a->qpn;
          break;
        case 2:
          qpn = e.b->qpn;
          break;
        case 3:
          qpn = kSrqBit | srq.handle;
          break;
        case 4:
          qpn = kSrqBit | e.by.srq->handle;
          break;
        default:
          break;
      }
      const unsigned k = (kind >> 5) & 3;
      if (k < 2) dkind = k == 0 ? abi::kDoorbellSq : abi::kDoorbellRq;
      const unsigned whom = (kind >> 2) & 7;
      // A doorbell of a known kind naming a known object: the daemon refuses exactly those
      // that are not this session's own QP / SRQ (bridge.bad_doorbells + 1), with the ring
      // empty before and after so no other doorbell is counted meanwhile.
      shm::RingProducer &db = s.ctx->doorbell_ring_for_test();
      auto db_empty = [&] { return db.free_slots() == db.capacity(); };
      const bool counted = k < 2 && whom <= 4 && !tampered[4];
      uint64_t bad_before = 0;
      if (counted) {
        wait_until(db_empty, "the daemon left doorbells in the ring");
        bad_before = stat(s, "bridge.bad_doorbells");
      }
      if (push_doorbell(s, qpn, dkind) && counted) {
        wait_until(db_empty, "the daemon left doorbells in the ring");
        const bool foreign =
            whom == 1 || whom == 2 || whom == 4 || (whom == 3 && dkind == abi::kDoorbellSq);
        FUZZ_CHECK(stat(s, "bridge.bad_doorbells") == bad_before + (foreign ? 1 : 0));
      }
      check_cqes(s, e);
      continue;
    }
    const bool recv = cls == 1;
    const bool to_srq = recv && (kind & 8);
    const uint32_t n = to_srq ? srs : recv ? rs : ss;
    std::fill(slot.begin(), slot.end(), 0);
    in.bytes(slot.data(), n);
    const size_t sge_off = recv ? sizeof(abi::RecvWqeHeader) : sizeof(abi::SendWqeHeader);
    for (size_t off = sge_off; (kind & 4) && off + sizeof(abi::Sge) <= n; off += sizeof(abi::Sge)) {
      abi::Sge g;
      std::memcpy(&g, slot.data() + off, sizeof g);
      g.addr = s.mr.addr + g.addr % kBufBytes;
      g.lkey = s.mr.lkey;
      std::memcpy(slot.data() + off, &g, sizeof g);
    }
    if (!recv) {
      abi::SendWqeHeader h;
      std::memcpy(&h, slot.data(), sizeof h);
      if (kind & 8) h.opcode = static_cast<uint8_t>(h.opcode % 11);
      // Memory windows: a BIND_MW names the session's window and binds it to its MR (the
      // range inside it), a LOCAL_INV names the window. A tag t as written means the window's
      // first tag XOR t (the first tag is random: so inputs replay the same way).
      const auto win = [&](uint32_t t) { return s.mw ^ (t & 0xff); };
      if ((kind & 4) && h.opcode == static_cast<uint8_t>(WrOpcode::kBindMw)) {
        h.rkey = win(h.rkey);
        h.imm_data = win(h.imm_data);
        h.ud_ah = s.mr.lkey;
        h.remote_addr = s.mr.addr + h.remote_addr % kBufBytes;
      }
      if ((kind & 4) && h.opcode == static_cast<uint8_t>(WrOpcode::kLocalInv))
        h.imm_data = win(h.imm_data);
      if (kind & 0x10) {
        const uint8_t sel = in.u8();
        const uint32_t ahs[3] = {s.ah, e.by.ah, 0};
        if ((sel & 3) != 3) h.ud_ah = ahs[sel & 3];
        const uint32_t qpns[3] = {e.a->qpn, e.b->qpn, qp.qpn};
        if (((sel >> 2) & 3) != 3) h.remote_qpn = qpns[(sel >> 2) & 3];
        if (sel & 0x10) h.remote_qkey = kQkey;
      }
      std::memcpy(slot.data(), &h, sizeof h);
      if (!wait_free(qp.sq, 0, 1)) continue;
      const int rc = s.ctx->post_send_raw(qp, slot.data());
      FUZZ_CHECK(rc == 0 || rc == ENOMEM);
    } else {
      shm::RingProducer &ring = to_srq ? srq.ring : qp.rq;
      // The raw slot, then a valid receive behind it that rings the doorbell.
      if (!wait_free(ring, to_srq ? 2 : 1, 2)) continue;
      FUZZ_CHECK(ring.reserve(1) == 1);
      std::memcpy(ring.slot(0), slot.data(), n);
      ring.commit(1);
      const abi::Sge g{s.mr.addr, 64, s.mr.lkey};
      client::RecvWr rw;
      rw.wr_id = 0xA0 + r;
      rw.sg_list = &g;
      rw.num_sge = 1;
      const int rc = to_srq ? s.ctx->post_srq_recv(srq, rw) : s.ctx->post_recv(qp, rw);
      FUZZ_CHECK(rc == 0 || rc == ENOMEM);
    }
    check_cqes(s, e);
  }
  // The daemon looks at every rewritten index once more, after the input's last write.
  const bool hears = !tampered[4];
  for (unsigned w = 0; w < 3; ++w)
    if (tampered[w] && hears && ring_bell(w)) check_rewritten(w, false, 0, 0);
  // A ring the input left alone is consumed to the end (the app's view), unless the daemon
  // hears nothing from this session (doorbell ring rewritten). A rewritten CQ index changes
  // nothing here: the daemon takes and flushes WQEs whether or not it can deliver completions
  // (the engine's CQ holds far more than an input's WQEs).
  wait_until(
      [&] {
        if (!hears) return true;
        const bool sq = tampered[0] || qp.sq.all_taken();
        const bool rq = tampered[1] || qp.rq.all_taken() || backlog(1);
        const bool sr = tampered[2] || srq.ring.all_taken() || backlog(2);
        return sq && rq && sr;
      },
      "the daemon left WQEs in the rings");
  check_cqes(s, e);
  FUZZ_CHECK(s.ctx->destroy_qp(qp) == 0);
  q = nullptr;
  e.port.deliver[2] = 0;
  FUZZ_CHECK(s.ctx->destroy_srq(srq) == 0);
  FUZZ_CHECK(s.ctx->destroy_ah(s.ah) == 0);
  check_cqes(s, e);
  FUZZ_CHECK(s.ctx->destroy_cq(*s.cq) == 0);
  // The session closes with the Context (the daemon frees what is left).
  e.check_bystander();
}

}  // namespace
}  // namespace uroce::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uroce::fuzz::run_one(data, size);
  return 0;
}
