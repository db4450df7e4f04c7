// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: what an app writes into shared memory, as lib/daemon (Daemon::bridge_in ->
// doorbells) and the engine over the app's rings (transport::RingQueues: the requester's
// copy of SQ slots, the responder's take of RQ / SRQ slots, CQEs into the CQ ring) consume it:
// arbitrary bytes in the WQE slots of a QP's send and receive rings and of an SRQ, arbitrary
// ring indices the app owns (the SQ / RQ / SRQ producer index, the CQ consumer index, the
// doorbell ring's producer index), and doorbells naming any QPN.
//
// Set up once per process: a Daemon (lib/daemon) over one Engine (keys and QPNs from a fixed
// seed) whose port checks that every frame parses and loops the ones addressed to the
// bystander QPs (and to the input's QP) back into the engine, dropping the rest; its control
// server on a Unix socket in /tmp (name with the PID). Everything runs on the fuzzer's thread:
// one pass of the daemon's loop (bridge, engine, loop port, control server) runs whenever the
// client waits for a reply (ctl::set_client_wait_hook) and in every wait below, each pass
// moving the engine's clock by 4 us, so an input runs the same way every time and every wait
// is bounded by a number of passes (10^6, 4 s of engine time). A bystander session
// (its own lib/client Context): PD, 64 KiB MR, CQ, SRQ, an AH, and two RC QPs A <-> B in RTS
// connected to each other through the loop port.
// The fuzzed session (another Context): a PD, a 64 KiB MR (MW_BIND), an AH (to this port's own
// GID, so UD sends can reach the bystander QPs), a CQ, a type 2 window and an SRQ (max_wr 128,
// max_sge 3), kept from input to input as a new session would have them: the MR zeroed, the CQ,
// the SRQ and the doorbell ring empty, the window unbound. Made anew after an input that could
// have changed them: one that rewrote the doorbell ring's index closes the session; a
// rewritten CQ index or CQ_ERR: a new CQ; an SRQ record, index or doorbell: a new SRQ; a
// BIND_MW, LOCAL_INV or SEND_WITH_INV: a new window. Per input a new QP in RTS of the type the
// setup byte says; then records. Input:
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
//     1 v counted from where the ring stood when the input began (0 in a new ring), 2 current +
//     ring size + (v & 255) (more entries than the ring holds), 3 current - 1 - (v & 255)
//     (behind); bit 7: then a raw doorbell for that ring (SQ / RQ / SRQ).
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
// queue's slots are released only when their WRs complete) to the end within 10^6 passes, a
// rewritten CQ index or not (unless the doorbell ring's index was rewritten: then the daemon may
// never hear of the WQEs); a rewritten SQ / RQ, once rung, ends with the daemon's consumer index at
// the producer index, or the QP in ERR; a rewritten SRQ ends consumed or with IBV_EVENT_SRQ_ERR for
// it; a producer index left more than the ring's size ahead always ends with the QP in ERR
// (SRQ_ERR). Except: a receive ring is read only when a message needs a receive WQE or the QP is in
// ERR (the engine's receive queue is the ring, as rxe's), so RQ / SRQ rings are not waited for. A
// ring record with bit 7 waits for that before the input goes on, and when it rewrote an empty ring
// for the first time, the daemon took at most a ring's worth from the new value (more claimed:
// the QP in ERR / SRQ_ERR); the session's async events name only its own objects.
// After every input (its QP destroyed) the bystander session is untouched: no byte of its MR
// differs from what its own check wrote, its rings' indices stand where its last check left them
// (no CQE, no WQE taken), it has no async event, A and B are in RTS. And it still works: A's SEND
// to B and WRITE into B's MR complete with success within 10^6 passes, B gets the SEND, and all of
// the above holds again.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../support/fake_port_view.h"
#include "../support/loop_port.h"
#include "client/client.h"
#include "ctl/client.h"
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
// The engine's clock moves kStepNs per pass of the daemon's loop; a wait gives up after
// kMaxPasses (4 s of engine time: the bystander's RC timeout is 268 ms).
constexpr uint64_t kStepNs = 4096;
constexpr uint64_t kMaxPasses = 1'000'000;
// A wait for room in a ring ends (unmet) after 25'000 passes (100 ms of engine time), or
// sooner once the daemon has done nothing for kIdlePasses passes in a row (1 ms, far beyond
// the input's QP's 8 us timeout): it would do nothing more without a new doorbell or frame.
constexpr uint64_t kRoomPasses = 25'000;
constexpr uint32_t kIdlePasses = 256;

// Frames the engine sends: each must parse; a frame for one of the QPNs in `deliver` is queued
// and handed back to the engine by pump() (the bystander QPs talk to each other through it),
// the rest are dropped (no peer).
struct LoopPort : test::LoopQueue {
  uint32_t deliver[3] = {};  // 0: none

  void tx_commit(TxBuf b, uint32_t n) noexcept {
    FUZZ_CHECK(n <= kFrameCap);
    wire::ParsedPacket p;
    FUZZ_CHECK(wire::parse_frame(b.data, n, &p) == wire::ParseError::kOk);
    const uint32_t dqp = p.bth()->dest_qp();
    bool loop = false;
    for (const uint32_t d : deliver)
      loop |= dqp != 0 && d == dqp;
    if (loop) push(b.data, n);
  }
};
using test::StepClock;

const wire::Gid kOwnGid = test::kLoopGid;
using FakePort = test::LoopPortView;

using Eng = Engine<LoopPort, StepClock, RingQueues>;

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

  // The context, a PD, the MR and the AH.
  void open_base(const std::string &path, const char *name) {
    FUZZ_CHECK(client::Context::open(path.c_str(), name, &ctx, 10'000) == 0);
    FUZZ_CHECK(ctx->alloc_pd(&pd) == 0);
    FUZZ_CHECK(client::Buffer::create(kBufBytes, &buf) == 0);
    FUZZ_CHECK(
        ctx->reg_mr(pd, buf, 0, kBufBytes,
                    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessMwBind,
                    &mr) == 0);
    ctl::CreateAhPayload a{};
    a.pd = pd;
    std::memcpy(a.attr.dgid, kOwnGid.raw, 16);
    a.attr.is_global = 1;
    a.attr.hop_limit = 64;
    a.attr.port_num = 1;
    FUZZ_CHECK(ctx->create_ah(pd, a.attr, &ah) == 0);
  }
  void new_srq() {
    const ctl::CreateSrqPayload sa{pd, 128, 3, 0};
    FUZZ_CHECK(ctx->create_srq(sa, &srq) == 0);
  }
  // All of it (the bystander).
  void open(const std::string &path, const char *name) {
    open_base(path, name);
    FUZZ_CHECK(ctx->alloc_mw(pd, 2, &mw) == 0);
    FUZZ_CHECK(ctx->create_cq(1024, &cq) == 0);
    new_srq();
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

// Where the bystander's rings stand (prod, cons, taken, notify of each): nothing but its own
// check may move them.
struct RingSnap {
  uint64_t v[6][4] = {};
  bool operator==(const RingSnap &) const = default;
};

struct Env {
  LoopPort port;
  StepClock clock{1'000'000'000};
  std::unique_ptr<Eng> eng;
  FakePort pv;
  std::unique_ptr<daemon::Daemon> dmn;
  std::unique_ptr<ctl::Server> server;
  std::string path;
  // The bystander session: A <-> B (RC), through the loop port.
  Session by;
  std::unique_ptr<client::Qp> a, b;
  uint64_t by_wr = 0;
  std::vector<uint8_t> by_shadow;  // what the bystander's MR must hold
  RingSnap by_rings;
  // The fuzzed session: its context, PD, MR, AH and CQ last from input to input; opened again
  // only after an input broke its doorbell ring (a new CQ after one rewrote the CQ's index).
  Session fz;

  Env() {
    EngineConfig c;
    c.max_qp = 64;
    c.seed = 0x77716566;  // keys and QPNs the same in every run
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
    ctl::set_client_wait_hook([](void *p) { static_cast<Env *>(p)->pump(); }, this);
    by.open(path, "wqe_fuzz_bystander");
    // RC timeout 16 (268 ms), 7 retries: the loop port drops nothing it delivers, so only a
    // full loop queue could need a retry.
    a = by.new_qp(kRc);
    b = by.new_qp(kRc);
    port.deliver[0] = a->qpn;
    port.deliver[1] = b->qpn;
    by.to_rtr(*a, kRc, b->qpn);
    by.to_rtr(*b, kRc, a->qpn);
    by.to_rts(*a, kRc, 16, 7);
    by.to_rts(*b, kRc, 16, 7);
    // A pattern in the MR whose bytes at 4096 (B's receive) and 8192 (A's WRITE) already are
    // the 64 bytes at 0 that the check sends: the check changes nothing, anything else does.
    by_shadow.resize(kBufBytes);
    for (size_t i = 0; i < kBufBytes; ++i)
      by_shadow[i] = static_cast<uint8_t>(i * 131 + (i >> 8) + 7);
    std::memcpy(by_shadow.data() + 4096, by_shadow.data(), 64);
    std::memcpy(by_shadow.data() + 8192, by_shadow.data(), 64);
    std::memcpy(by.buf.data(), by_shadow.data(), kBufBytes);
    by_rings = rings();
  }
  // The process ends after the fuzzer: nothing to tear down.

  // One pass of the daemon's loop (uroced's main lcore: bridge, engine, control server), with
  // the loop port between the engine's sends and its receives. `serve`: the control server too
  // (an epoll_wait; not needed while no request is pending).
  uint32_t pump(bool serve = true) {
    clock.advance(kStepNs);
    uint32_t work = dmn->bridge_in();
    work += eng->poll();
    work += port.pump(*eng);
    work += dmn->bridge_out();
    if (serve) {
      const int served = server->poll(0, *dmn);
      if (served > 0) work += static_cast<uint32_t>(served);
    }
    return work;
  }

  // Passes until cond() holds, at most `max`, or until the daemon stays idle (no doorbell read,
  // frame sent or delivered, CQE or event moved, no active QP) for kIdlePasses in a row.
  template <class F>
  bool pump_until(F &&cond, uint64_t max) {
    uint32_t idle = 0;
    for (uint64_t i = 0; i < max && !cond() && idle < kIdlePasses; ++i) {
      const bool busy = pump(false) != 0 || !port.empty() || dmn->pending(0);
      idle = busy ? 0 : idle + 1;
    }
    return cond();
  }

  RingSnap rings() const {
    RingSnap r;
    const abi::RingHeader *h[6] = {a->sq.header(), a->rq.header(),        b->sq.header(),
                                   b->rq.header(), by.srq->ring.header(), by.cq->ring.header()};
    for (int i = 0; i < 6; ++i) {
      r.v[i][0] = idx(const_cast<uint64_t &>(h[i]->prod)).load(std::memory_order_acquire);
      r.v[i][1] = idx(const_cast<uint64_t &>(h[i]->cons)).load(std::memory_order_acquire);
      r.v[i][2] = idx(const_cast<uint64_t &>(h[i]->taken)).load(std::memory_order_acquire);
      r.v[i][3] = std::atomic_ref<uint32_t>(const_cast<uint32_t &>(h[i]->notify))
                      .load(std::memory_order_acquire);
    }
    return r;
  }

  // The bystander session is untouched: its MR holds what its own check wrote, its rings'
  // indices are where the last check left them (no CQE, no WQE taken), no async event, A and B
  // in RTS. And it still works: A's SEND to B and WRITE into B's part of the MR complete with
  // success, B gets the SEND, and all of the above holds again afterwards. In process (the
  // engine's QP state, the async eventfd): no control round trip.
  void check_bystander() {
    const auto untouched = [&](const char *when) {
      const bool mr = std::memcmp(by.buf.data(), by_shadow.data(), kBufBytes) == 0;
      const bool rg = rings() == by_rings;
      const int ev = by.ctx->wait_async_event(0);
      bool rts = true;
      for (client::Qp *q : {a.get(), b.get()}) {
        QpAttr qa;
        FUZZ_CHECK(eng->query_qp(q->qpn, &qa, nullptr) == 0);
        rts &= static_cast<uint32_t>(qa.qp_state) == kRts;
      }
      if (!mr || !rg || ev != 0 || !rts)
        std::fprintf(stderr, "wqe_fuzz: bystander %s: MR %s, rings %s, async event %d, RTS %d\n",
                     when, mr ? "same" : "WRITTEN", rg ? "same" : "MOVED", ev, rts);
      FUZZ_CHECK(mr && rg && ev == 0 && rts);
    };
    untouched("after the input");
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
    for (uint64_t pass = 0; seen != 7 && pass < kMaxPasses; ++pass) {
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
      if (n == 0) pump(false);
    }
    if (seen != 7) {
      std::fprintf(stderr, "wqe_fuzz: the bystander's SEND / WRITE did not complete\n");
      std::abort();
    }
    // The SEND's and the WRITE's last ACK may still be on their way (B's CQE comes first): let
    // the engine go quiet so the rings stand still until the next check.
    for (uint64_t i = 0; i < kMaxPasses && (pump(false) != 0 || !port.empty()); ++i) {
    }
    by_rings = rings();
    untouched("after its check");
  }
};

Env &env() {
  static Env *e = new Env();  // never destroyed: the process ends after the fuzzer
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

// The daemon's count of refused doorbells (uroce-stat's bridge.bad_doorbells), read in
// process: the daemon runs on this thread.
uint64_t bad_doorbells(Env &e) {
  return e.dmn->counters().bad_doorbells;
}

// Pushes a doorbell into the session's ring (bounded wait while the daemon empties it); false
// if the ring stays full or its handle is corrupt (its index was rewritten).
bool push_doorbell(Env &e, Session &s, uint32_t qpn, uint32_t kind) {
  shm::RingProducer &db = s.ctx->doorbell_ring_for_test();
  shm::RingError r = db.try_push(abi::Doorbell{qpn, kind});
  if (r == shm::RingError::kFull && e.pump_until([&] { return db.free_slots() != 0; }, kRoomPasses))
    r = db.try_push(abi::Doorbell{qpn, kind});
  return r == shm::RingError::kOk;
}

void run_one(const uint8_t *data, size_t size) {
  Env &e = env();
  ByteReader in(data, size);
  const uint8_t setup = in.u8();
  const uint32_t type = (setup & 3) == 1 ? kUc : (setup & 3) == 2 ? kUd : kRc;
  Session &s = e.fz;
  if (!s.ctx) s.open_base(e.path, "wqe_fuzz");
  if (!s.cq) FUZZ_CHECK(s.ctx->create_cq(1024, &s.cq) == 0);
  std::memset(s.buf.data(), 0, kBufBytes);  // as a new MR's
  if (s.mw == 0) FUZZ_CHECK(s.ctx->alloc_mw(s.pd, 2, &s.mw) == 0);
  if (!s.srq) s.new_srq();
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
    if (which == 0) return push_doorbell(e, s, qp.qpn, abi::kDoorbellSq);
    if (which == 1) return push_doorbell(e, s, qp.qpn, abi::kDoorbellRq);
    return push_doorbell(e, s, kSrqBit | srq.handle, abi::kDoorbellRq);
  };
  // Waits (bounded) for `n` free slots of a ring the input left alone; a rewritten one is not
  // waited for (the daemon may have stopped reading it).
  auto wait_free = [&](shm::RingProducer &r, unsigned which, size_t n) {
    if (r.free_slots() >= n || tampered[which] || tampered[4]) return r.free_slots() >= n;
    return e.pump_until([&] { return r.free_slots() >= n; }, kRoomPasses);
  };
  // Where each ring stood when the input began (empty: the CQ and the doorbell ring are those
  // of the last input, the others new, at 0): an absolute index the input writes counts from
  // there, as it would in a new session.
  uint64_t base[5];
  for (unsigned w = 0; w < 5; ++w)
    base[w] = idx(*ring_ref(w).index).load(std::memory_order_relaxed);
  bool srq_err = false, cq_err = false, db_fatal = false;
  // The SRQ and the window are kept for the next input unless this one could change them: an
  // SRQ record, index or doorbell; a BIND_MW, LOCAL_INV or SEND_WITH_INV (the only WQEs that
  // change a window; the input's QP hears no other QP's frames that could).
  bool srq_touched = false, mw_touched = false;
  // Asked of the engine directly (the daemon's query_qp does the same, a round trip away).
  auto qp_state = [&] {
    QpAttr qa;
    FUZZ_CHECK(e.eng->query_qp(qp.qpn, &qa, nullptr) == 0);
    return static_cast<uint32_t>(qa.qp_state);
  };
  // The session's async events name its own objects only; SRQ_ERR is noted. The daemon signals
  // the session's async eventfd whenever it queues one: asked only then.
  auto poll_events = [&] {
    if (s.ctx->wait_async_event(0) != 1) return;
    std::vector<ctl::AsyncEventEntry> events;
    FUZZ_CHECK(s.ctx->get_async_events(&events) == 0);
    for (const auto &ev : events) {
      FUZZ_CHECK(ev.handle != e.a->qpn && ev.handle != e.b->qpn);
      // A broken SQ / RQ index: QP_FATAL names the fuzzed QP (the engine's pull_sq / take).
      if (ev.event_type == static_cast<uint32_t>(AsyncEvent::kQpFatal))
        FUZZ_CHECK(ev.handle == qp.qpn);
      // DEVICE_FATAL only for a broken doorbell ring (Daemon::doorbells).
      if (ev.event_type == static_cast<uint32_t>(AsyncEvent::kDeviceFatal)) {
        FUZZ_CHECK(tampered[4]);
        db_fatal = true;
      }
      if (ev.event_type == static_cast<uint32_t>(AsyncEvent::kCqErr)) cq_err = true;
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
  // kMaxPasses of the daemon's loop: far more than it needs (a few passes).
  auto wait_until = [&](auto &&cond, const char *what) {
    for (uint64_t pass = 0;; ++pass) {
      poll_events();
      check_cqes(s, e);
      if (cond()) break;
      if (pass >= kMaxPasses) {
        std::fprintf(
            stderr, "wqe_fuzz: %s within %llu passes (rewritten: SQ %d RQ %d SRQ %d CQ %d DB %d)\n",
            what, static_cast<unsigned long long>(kMaxPasses), tampered[0], tampered[1],
            tampered[2], tampered[3], tampered[4]);
        std::abort();
      }
      e.pump(false);
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
    e.pump(false);  // the daemon's loop runs once between records, as if beside the app
    const uint8_t kind = in.u8();
    const unsigned cls = kind & 3;
    if (cls == 2) {  // ring index
      const unsigned which = ((kind >> 2) & 7) > 4 ? 0 : (kind >> 2) & 7;
      srq_touched |= which == 2;
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
                          : how == 1 ? base[which] + v
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
      srq_touched |= qpn == (kSrqBit | srq.handle);
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
        bad_before = bad_doorbells(e);
      }
      if (push_doorbell(e, s, qpn, dkind) && counted) {
        wait_until(db_empty, "the daemon left doorbells in the ring");
        const bool foreign =
            whom == 1 || whom == 2 || whom == 4 || (whom == 3 && dkind == abi::kDoorbellSq);
        FUZZ_CHECK(bad_doorbells(e) == bad_before + (foreign ? 1 : 0));
      }
      check_cqes(s, e);
      continue;
    }
    const bool recv = cls == 1;
    const bool to_srq = recv && (kind & 8);
    const uint32_t n = to_srq ? srs : recv ? rs : ss;
    srq_touched |= to_srq;
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
      mw_touched |= h.opcode == static_cast<uint8_t>(WrOpcode::kBindMw) ||
                    h.opcode == static_cast<uint8_t>(WrOpcode::kLocalInv) ||
                    h.opcode == static_cast<uint8_t>(WrOpcode::kSendWithInv);
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
  e.port.deliver[2] = 0;
  if (srq_touched) FUZZ_CHECK(s.ctx->destroy_srq(srq) == 0);
  if (mw_touched) {
    FUZZ_CHECK(s.ctx->dealloc_mw(s.mw) == 0);
    s.mw = 0;
  }
  // What the teardown left: the engine goes quiet, the last CQEs and events are checked (and
  // so drained), the doorbell ring is read to the end.
  shm::RingProducer &db = s.ctx->doorbell_ring_for_test();
  wait_until(
      [&] {
        return e.pump(false) == 0 && e.port.empty() &&
               (tampered[4] || db.free_slots() == db.capacity());
      },
      "the daemon did not go quiet after the input");
  poll_events();
  check_cqes(s, e);
  q = nullptr;
  if (srq_touched) s.srq = nullptr;
  if (tampered[4] || db_fatal) {
    // A broken doorbell ring is the session's for good: a new one for the next input. The
    // daemon sees the hang-up and frees what is left (the CQ, the MR, the AH, the PD).
    s.srq = nullptr;
    s.cq = nullptr;
    s.ctx = nullptr;
    s = Session{};
    for (uint64_t pass = 0; e.server->client_count() > 1; ++pass) {
      FUZZ_CHECK(pass < kMaxPasses);
      e.pump();
    }
  } else if (tampered[3] || cq_err) {
    FUZZ_CHECK(s.ctx->destroy_cq(*s.cq) == 0);  // a CQ whose index was rewritten: a new one
    s.cq = nullptr;
  }
  e.check_bystander();
}

}  // namespace
}  // namespace uroce::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uroce::fuzz::run_one(data, size);
  return 0;
}
