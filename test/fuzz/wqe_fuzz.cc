// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: arbitrary bytes in the app-shared WQE slots of a QP's send and receive rings, as
// lib/daemon's bridge (Daemon::bridge_in -> drain_sq / drain_rq) copies, validates and posts
// them to the transport engine.
//
// Set up once per process: a Daemon (lib/daemon) over one Engine with a port that checks and
// drops every frame, its control server on a Unix socket in /tmp (name with the PID), served by
// a thread that also runs the bridge and the engine; a lib/client Context with a PD, a 64 KiB MR,
// a CQ and a bystander RC QP in RTS with receives posted. Per input: a new RC QP in RTS, then
// records:
//   kind u8 (bit 0: receive ring, else send ring; bit 1: point every SGE slot at the MR: its
//   lkey, its base + addr % its size; bit 2: send opcode := (kind >> 4) % 11; bit 3 with bit 0:
//   the SRQ's ring instead of the RQ), then one slot of the ring's slot size.
// A send slot goes in with Context::post_send_raw; a receive slot is written into the RQ (SRQ)
// and rung with a valid post_recv (post_srq_recv) behind it. Then the rings are waited for
// (bounded) and the QP and a new SRQ (max_wr 128, max_sge 3) made for the input are destroyed.
// Checked: no crash / sanitizer report in the daemon, the engine or the client; no CQE names the
// bystander QP, every CQE has a valid status and opcode; the bystander QP is still
// in RTS; the daemon consumes every slot (no hang) within 5 s.
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

constexpr uint32_t kTxCap = 9216;
constexpr size_t kMaxRecords = 24;
constexpr size_t kBufBytes = 64 * 1024;

// Frames the engine sends: each must parse; then dropped (no peer).
struct DropPort {
  std::unique_ptr<uint8_t[]> buf{new uint8_t[kTxCap]};
  TxBuf tx_alloc() noexcept { return TxBuf{buf.get(), kTxCap, nullptr}; }
  void tx_commit(TxBuf b, uint32_t len) noexcept {
    FUZZ_CHECK(len <= kTxCap);
    wire::ParsedPacket p;
    FUZZ_CHECK(wire::parse_frame(b.data, len, &p) == wire::ParseError::kOk);
  }
  void tx_abort(TxBuf) noexcept {}
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
  Mtu ib_mtu() const noexcept override { return Mtu::k1024; }
  size_t gid_count() const noexcept override { return 1; }
  wire::Gid gid(size_t) const noexcept override { return wire::Gid::from_ipv4(10, 9, 0, 1); }
  uint8_t dscp() const noexcept override { return 0; }
  const char *ibdev_name() const noexcept override { return "uroce0"; }
  bool link_up() const noexcept override { return true; }
  int resolve(const wire::Gid &, uint8_t mac_out[6]) noexcept override {
    static const uint8_t peer[6] = {0x02, 0, 0, 0, 0x09, 0x02};
    std::memcpy(mac_out, peer, 6);
    return 0;
  }

 private:
  uint8_t mac_[6] = {0x02, 0, 0, 0, 0x09, 0x01};
};

using Eng = Engine<DropPort, SteadyClock>;

// ibv_qp_attr_mask bits (transport/verbs_types.h has the same values).
constexpr uint32_t kRts = 3;

struct Env {
  DropPort port;
  SteadyClock clock;
  std::unique_ptr<Eng> eng;
  FakePort pv;
  std::unique_ptr<daemon::Daemon> dmn;
  std::unique_ptr<ctl::Server> server;
  std::atomic<bool> stop{false};
  std::thread thr;
  std::string path;
  std::unique_ptr<client::Context> ctx;
  client::Buffer buf;
  client::Mr mr;
  uint32_t pd = 0;
  std::unique_ptr<client::Cq> cq;
  std::unique_ptr<client::Qp> bystander;

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
    server = std::move(srv.value());
    daemon::Daemon::register_types(server->types());
    thr = std::thread([this] {
      while (!stop.load(std::memory_order_relaxed)) {
        uint32_t work = dmn->bridge_in();
        work += eng->poll();
        work += dmn->bridge_out();
        const int served = server->poll(0, *dmn);
        if (work == 0 && served <= 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    });
    FUZZ_CHECK(client::Context::open(path.c_str(), "wqe_fuzz", &ctx, 10'000) == 0);
    unlink(path.c_str());  // connected: the socket file is no longer needed
    FUZZ_CHECK(ctx->alloc_pd(&pd) == 0);
    FUZZ_CHECK(client::Buffer::create(kBufBytes, &buf) == 0);
    FUZZ_CHECK(ctx->reg_mr(pd, buf, 0, kBufBytes,
                           kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead, &mr) == 0);
    FUZZ_CHECK(ctx->create_cq(1024, &cq) == 0);
    bystander = make_rts_qp();
    const abi::Sge sge{mr.addr, 256, mr.lkey};
    client::RecvWr rw;
    rw.wr_id = 0xB0;
    rw.sg_list = &sge;
    rw.num_sge = 1;
    FUZZ_CHECK(ctx->post_recv(*bystander, rw) == 0);
  }
  // The process ends after the fuzzer: the thread is stopped by exit(); nothing to tear down.

  std::unique_ptr<client::Qp> make_rts_qp() {
    ctl::CreateQpPayload a{};
    a.pd = pd;
    a.qp_type = 2;  // RC
    a.send_cq = cq->handle;
    a.recv_cq = cq->handle;
    a.max_send_wr = 16;
    a.max_recv_wr = 16;
    a.max_send_sge = 4;
    a.max_recv_sge = 3;
    a.max_inline_data = 64;
    std::unique_ptr<client::Qp> q;
    FUZZ_CHECK(ctx->create_qp(a, &q) == 0);
    ctl::QpAttrPayload m{};
    m.qp_state = 1;
    m.port_num = 1;
    m.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead;
    FUZZ_CHECK(ctx->modify_qp(*q, m, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags) == 0);
    m = {};
    m.qp_state = 2;
    m.path_mtu = 3;
    m.dest_qp_num = 0x123;
    m.rq_psn = 1;
    const wire::Gid dg = wire::Gid::from_ipv4(10, 9, 0, 2);
    std::memcpy(m.ah_attr.dgid, dg.raw, 16);
    m.ah_attr.is_global = 1;
    m.ah_attr.hop_limit = 64;
    m.ah_attr.port_num = 1;
    m.max_dest_rd_atomic = 1;
    m.min_rnr_timer = 1;
    FUZZ_CHECK(ctx->modify_qp(*q, m,
                              kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                  kQpMaxDestRdAtomic | kQpMinRnrTimer) == 0);
    m = {};
    m.qp_state = kRts;
    m.sq_psn = 1;
    m.timeout = 1;
    m.retry_cnt = 0;
    m.rnr_retry = 0;
    m.max_rd_atomic = 1;
    FUZZ_CHECK(ctx->modify_qp(*q, m,
                              kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry |
                                  kQpMaxQpRdAtomic) == 0);
    return q;
  }

  // Completions of the input's QP (or of earlier inputs' destroyed QPs, flushed late): never of
  // the bystander.
  void check_cqes() {
    abi::Cqe c[16];
    int n;
    while ((n = ctx->poll_cq(*cq, c, 16)) > 0) {
      for (int i = 0; i < n; ++i) {
        FUZZ_CHECK(c[i].qp_num != bystander->qpn);
        FUZZ_CHECK(c[i].status <= static_cast<uint32_t>(WcStatus::kGeneralErr));
        FUZZ_CHECK(c[i].opcode <= static_cast<uint32_t>(WcOpcode::kLocalInv) ||
                   c[i].opcode == static_cast<uint32_t>(WcOpcode::kRecv) ||
                   c[i].opcode == static_cast<uint32_t>(WcOpcode::kRecvRdmaWithImm));
      }
    }
  }
};

Env &env() {
  static Env *e = new Env();  // never destroyed: its thread runs until the process exits
  return *e;
}

bool ring_drained(client::Qp &q, client::Srq &srq) {
  return q.sq.free_slots() == q.sq.capacity() && q.rq.free_slots() == q.rq.capacity() &&
         srq.ring.free_slots() == srq.ring.capacity();
}

void run_one(const uint8_t *data, size_t size) {
  Env &e = env();
  std::unique_ptr<client::Qp> q = e.make_rts_qp();
  const ctl::CreateSrqPayload sa{e.pd, 128, 3, 0};
  std::unique_ptr<client::Srq> srq;
  FUZZ_CHECK(e.ctx->create_srq(sa, &srq) == 0);
  ByteReader in(data, size);
  const uint32_t ss = q->caps.sq.slot_size, rs = q->caps.rq.slot_size;
  const uint32_t srs = srq->caps.ring.slot_size;
  std::vector<uint8_t> slot(std::max({ss, rs, srs}));
  for (size_t r = 0; r < kMaxRecords && in.remaining() > 0; ++r) {
    const uint8_t kind = in.u8();
    const bool recv = kind & 1;
    const bool to_srq = recv && (kind & 8);
    const uint32_t n = to_srq ? srs : recv ? rs : ss;
    std::fill(slot.begin(), slot.end(), 0);
    in.bytes(slot.data(), n);
    const size_t sge_off = recv ? sizeof(abi::RecvWqeHeader) : sizeof(abi::SendWqeHeader);
    for (size_t off = sge_off; (kind & 2) && off + sizeof(abi::Sge) <= n; off += sizeof(abi::Sge)) {
      abi::Sge s;
      std::memcpy(&s, slot.data() + off, sizeof s);
      s.addr = e.mr.addr + s.addr % kBufBytes;
      s.lkey = e.mr.lkey;
      std::memcpy(slot.data() + off, &s, sizeof s);
    }
    if (!recv && (kind & 4)) slot[8] = static_cast<uint8_t>((kind >> 4) % 11);
    // Wait (bounded) for a free slot: the daemon consumes asynchronously.
    client::Qp &qp = *q;
    for (int i = 0; i < 2000 && (recv ? qp.rq.free_slots() < 2 : qp.sq.free_slots() < 1); ++i)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (to_srq) {
      for (int i = 0; i < 2000 && srq->ring.free_slots() < 2; ++i)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (srq->ring.free_slots() < 2) break;
      FUZZ_CHECK(srq->ring.reserve(1) == 1);
      std::memcpy(srq->ring.slot(0), slot.data(), srs);
      srq->ring.commit(1);
      const abi::Sge sge{e.mr.addr, 64, e.mr.lkey};
      client::RecvWr rw;
      rw.wr_id = 0xC0 + r;
      rw.sg_list = &sge;
      rw.num_sge = 1;
      const int rc = e.ctx->post_srq_recv(*srq, rw);
      FUZZ_CHECK(rc == 0 || rc == ENOMEM);
    } else if (recv) {
      if (qp.rq.free_slots() < 2) break;
      // The raw slot, then a valid receive behind it that rings the doorbell.
      FUZZ_CHECK(qp.rq.reserve(1) == 1);
      std::memcpy(qp.rq.slot(0), slot.data(), rs);
      qp.rq.commit(1);
      const abi::Sge sge{e.mr.addr, 64, e.mr.lkey};
      client::RecvWr rw;
      rw.wr_id = 0xA0 + r;
      rw.sg_list = &sge;
      rw.num_sge = 1;
      const int rc = e.ctx->post_recv(qp, rw);
      FUZZ_CHECK(rc == 0 || rc == ENOMEM);
    } else {
      const int rc = e.ctx->post_send_raw(qp, slot.data());
      FUZZ_CHECK(rc == 0 || rc == ENOMEM);
    }
    e.check_cqes();
  }
  // Every slot is consumed (no hang); no CQE names the bystander.
  bool drained = false;
  // 5 s of wall-clock time: far more than the daemon needs (~1 ms), so that a loaded CI machine
  // does not make a slow pass look like a hang.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!(drained = ring_drained(*q, *srq)) && std::chrono::steady_clock::now() < deadline) {
    e.check_cqes();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (!drained) {
    std::fprintf(stderr, "wqe_fuzz: the daemon left WQEs in the rings for 5 s\n");
    std::abort();
  }
  e.check_cqes();
  FUZZ_CHECK(e.ctx->destroy_qp(*q) == 0);
  FUZZ_CHECK(e.ctx->destroy_srq(*srq) == 0);
  std::vector<ctl::AsyncEventEntry> events;  // SRQ_ERR for bad SRQ WQEs: read and dropped
  FUZZ_CHECK(e.ctx->get_async_events(&events) == 0);
  e.check_cqes();
  ctl::QueryQpReply qr{};
  FUZZ_CHECK(e.ctx->query_qp(*e.bystander, &qr) == 0);
  FUZZ_CHECK(qr.attr.qp_state == kRts);
}

}  // namespace
}  // namespace uroce::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uroce::fuzz::run_one(data, size);
  return 0;
}
