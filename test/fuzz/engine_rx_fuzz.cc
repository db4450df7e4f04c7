// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: arbitrary RoCE frames into the transport engine (lib/transport), with RC, UC and
// UD QPs in RTS, QPs in RTR / INIT / ERR, an SRQ, MRs with remote access, posted receives and
// outstanding requests, and a fake clock that moves so that timers fire. The setup and the input
// layout are described in engine_rx_fuzz.h. One engine per process, put back before every input
// by EngineCore::reset() into the state a newly built one has (the same QPNs, keys and PSNs,
// proven by the transport_reset test), so that an input reproduces alone.
//
// Checked: no crash and no sanitizer report (every MR is an exact-size heap block, so a placement
// or READ / atomic outside an MR is an ASan report); the engine never takes a second TX buffer
// before committing / aborting the first; every frame it transmits fits its buffer and parses
// with lib/wire's parse_frame (ICRC and UDP checksum verified), from the engine to the peer;
// every completion names one of our QPs and has a valid status and opcode; the read-only MR
// (remote read, no local write) is unchanged at the end.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "engine_rx_fuzz.h"
#include "frame_fixup.h"
#include "fuzz_util.h"
#include "transport/engine.h"
#include "wire/hdr.h"
#include "wire/icrc.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce::fuzz {
namespace {

using namespace engine_rx;
using namespace transport;

constexpr uint32_t kTxCap = 2048;  // MTU 1024 + headers
constexpr size_t kMaxRecords = 64;
constexpr int kDrainRounds = 256;

struct FuzzClock {
  uint64_t t = 1'000'000;
  uint64_t now_ns() const noexcept { return t; }
};

// One TX buffer, checked on every commit.
struct CheckPort {
  std::unique_ptr<uint8_t[]> buf{new uint8_t[kTxCap]};
  bool out = false;
  bool refuse_some = false;
  uint32_t allocs = 0;
  uint64_t committed = 0;

  TxBuf tx_alloc() noexcept {
    FUZZ_CHECK(!out);
    if (refuse_some && ++allocs % 3 == 0) return TxBuf{};
    out = true;
    return TxBuf{buf.get(), kTxCap, nullptr};
  }
  void tx_commit(TxBuf b, uint32_t len) noexcept {
    FUZZ_CHECK(out && b.data == buf.get());
    FUZZ_CHECK(len <= kTxCap);
    out = false;
    ++committed;
    // An exact-size copy: the parser reading past the frame would be an ASan report.
    std::unique_ptr<uint8_t[]> f(new uint8_t[len]);
    std::memcpy(f.get(), b.data, len);
    wire::ParsedPacket p;
    const wire::ParseError e = wire::parse_frame(f.get(), len, &p);
    if (e != wire::ParseError::kOk) {
      std::fprintf(stderr, "engine sent a frame that does not parse: %s (len %u)\n",
                   wire::parse_error_str(e), len);
      std::abort();
    }
    FUZZ_CHECK(std::memcmp(p.eth()->src(), kEngMac, 6) == 0);
    FUZZ_CHECK(std::memcmp(p.eth()->dst(), kPeerMac, 6) == 0);
    FUZZ_CHECK(p.sgid() == wire::Gid::from_ipv4(kEngIp));
    FUZZ_CHECK(p.dgid() == wire::Gid::from_ipv4(kPeerIp));
    if (!(p.op->mask & wire::kMaskCnp)) {
      const uint32_t dq = p.bth()->dest_qp();
      FUZZ_CHECK(dq >= kPeerQpnBase && dq < kPeerQpnBase + kNumQps);
    }
  }
  void tx_abort(TxBuf b) noexcept {
    FUZZ_CHECK(out && b.data == buf.get());
    out = false;
  }
};

using Eng = Engine<CheckPort, FuzzClock>;

wire::PathInfo eng_to_peer() {
  wire::PathInfo p;
  std::memcpy(p.smac, kEngMac, 6);
  std::memcpy(p.dmac, kPeerMac, 6);
  p.sgid = wire::Gid::from_ipv4(kEngIp);
  p.dgid = wire::Gid::from_ipv4(kPeerIp);
  return p;
}

struct Setup {
  CheckPort port;
  FuzzClock clock;
  std::unique_ptr<Eng> eng;
  std::unique_ptr<uint8_t[]> mem[kNumMrs];
  std::unique_ptr<uint8_t[]> init[kNumMrs];  // what each MR holds at the start of an input
  uint32_t key[kNumMrs] = {};
  uint32_t qpn[kNumQps] = {};
  uint32_t unknown_qpn = 0;  // same prefix, names no QP
  uint32_t pd = 0, cq = 0, srq = 0, ah = 0;

  Setup() {
    EngineConfig c;
    c.max_qp = 8;
    c.max_mr = 8;
    c.max_pd = 2;
    c.max_cq = 2;
    c.max_srq = 2;
    c.max_ah = 2;
    c.max_cqe = 1024;
    c.qpn_base = kQpnBase;
    c.seed = 1;  // reproducible keys and QPNs
    eng = std::make_unique<Eng>(port, clock, c);
    for (uint32_t i = 0; i < kNumMrs; ++i) {
      mem[i].reset(new uint8_t[kMrLen[i]]);
      init[i].reset(new uint8_t[kMrLen[i]]);
      for (uint32_t b = 0; b < kMrLen[i]; ++b)
        init[i][b] = static_cast<uint8_t>(b * 7 + i);
    }
  }

  // The engine as newly built, then the objects, states and requests engine_rx_fuzz.h lists.
  void begin(bool refuse_some) {
    FUZZ_CHECK(eng->reset() == 0);
    clock = FuzzClock{};
    port.out = false;
    port.refuse_some = refuse_some;
    port.allocs = 0;
    port.committed = 0;
    pd = eng->create_pd();
    // 26 WQEs are posted in all and nothing else completes: no input can fill it.
    cq = eng->create_cq(64);
    FUZZ_CHECK(pd != 0 && cq != 0);
    const uint32_t access[kNumMrs] = {
        kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic,
        kAccessRemoteRead, kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteAtomic,
        kAccessLocalWrite};
    for (uint32_t i = 0; i < kNumMrs; ++i) {
      std::memcpy(mem[i].get(), init[i].get(), kMrLen[i]);
      uint32_t rkey = 0;
      FUZZ_CHECK(eng->reg_mr(pd, mem[i].get(), kMrVa[i], kMrLen[i], access[i], &key[i], &rkey) ==
                 0);
    }
    srq = eng->create_srq(pd, 16, 4);
    FUZZ_CHECK(srq != 0);
    AhAttr aa;
    aa.path = eng_to_peer();
    ah = eng->create_ah(pd, aa);
    FUZZ_CHECK(ah != 0);

    const QpType types[kNumQps] = {QpType::kRc, QpType::kRc, QpType::kUc, QpType::kUd,
                                   QpType::kRc, QpType::kRc, QpType::kRc};
    for (uint32_t i = 0; i < kNumQps; ++i) {
      QpInitAttr ia;
      ia.qp_type = types[i];
      ia.pd = pd;
      ia.send_cq = cq;
      ia.recv_cq = cq;
      ia.srq = i == 1 ? srq : 0;
      ia.cap = QpCap{16, 16, 4, 4, 64};
      qpn[i] = eng->create_qp(ia);
      FUZZ_CHECK(qpn[i] != 0 && (qpn[i] >> 16) == (kQpnBase >> 16));
    }
    unknown_qpn = qpn[0] ^ 0x8000;
    while (std::find(qpn, qpn + kNumQps, unknown_qpn) != qpn + kNumQps)
      ++unknown_qpn;
    for (uint32_t i = 0; i < kNumQps; ++i)
      bring_up(i, types[i]);

    // Receives: the RQs of QPs 0, 2, 3, 6 and the SRQ (QP 4 has none: SENDs to it get RNR NAKs).
    for (const uint32_t i : {0u, 2u, 3u, 6u}) {
      if (i == 3) {
        FUZZ_CHECK(eng->post_recv(qpn[i], recv(0x300, {{0, 0, 40 + kMtu}})) == 0);
        FUZZ_CHECK(eng->post_recv(qpn[i], recv(0x301, {{3, 0, 100}})) == 0);
        continue;
      }
      post_recvs(i, [&](const RecvWr &wr) { return eng->post_recv(qpn[i], wr); });
    }
    post_recvs(1, [&](const RecvWr &wr) { return eng->post_srq_recv(srq, wr); });

    // Requests in flight.
    post(0, send_wr(0x1000, WrOpcode::kSend, {{0, 0, 100}}));
    SendWr w = send_wr(0x1001, WrOpcode::kRdmaWrite, {{0, 100, 2000}});
    w.remote_addr = 0x5000;
    w.rkey = 0x77;
    post(0, w);
    w = send_wr(0x1002, WrOpcode::kSendWithImm, {{0, 0, 10}});
    w.imm_data_be = 0x01020304;
    post(0, w);
    w = send_wr(0x1003, WrOpcode::kAtomicCmpAndSwp, {{0, 8, 8}});
    w.remote_addr = 0x6000;
    w.rkey = 0x78;
    w.compare_add = 1;
    w.swap = 2;
    post(0, w);
    w = send_wr(0x1100, WrOpcode::kRdmaRead, {{0, 1024, 1500}});
    w.remote_addr = 0x7000;
    w.rkey = 0x79;
    post(1, w);
    w = send_wr(0x1101, WrOpcode::kAtomicFetchAndAdd, {{2, 0, 8}});
    w.remote_addr = 0x8000;
    w.rkey = 0x7A;
    w.compare_add = 5;
    post(1, w);
    post(2, send_wr(0x1200, WrOpcode::kSend, {{0, 0, 50}}));
    w = send_wr(0x1300, WrOpcode::kSend, {{0, 0, 60}});
    w.ah = ah;
    w.remote_qpn = kPeerQpnBase + 3;
    w.remote_qkey = kUdQkey;
    post(3, w);
    // Every request goes out (a refused buffer only delays: poll until quiet, bounded).
    for (int i = 0; i < 16; ++i)
      if (eng->poll() == 0 && i > 4) break;
  }

  struct S {
    uint32_t mr, off, len;
  };
  RecvWr recv(uint64_t id, std::initializer_list<S> sges) const {
    RecvWr wr;
    wr.wr_id = id;
    for (const S &s : sges)
      wr.sg_list[wr.num_sge++] = Sge{kMrVa[s.mr] + s.off, s.len, key[s.mr]};
    return wr;
  }
  SendWr send_wr(uint64_t id, WrOpcode op, std::initializer_list<S> sges) const {
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = op;
    wr.send_flags = kSendSignaled;
    for (const S &s : sges)
      wr.sg_list[wr.num_sge++] = Sge{kMrVa[s.mr] + s.off, s.len, key[s.mr]};
    return wr;
  }
  void post(uint32_t i, const SendWr &wr) { FUZZ_CHECK(eng->post_send(qpn[i], wr) == 0); }
  template <class PostFn>
  void post_recvs(uint32_t i, PostFn &&fn) {
    const uint64_t base = 0x2000 + i * 0x10;
    FUZZ_CHECK(fn(recv(base + 0, {{0, 0, 512}})) == 0);
    FUZZ_CHECK(fn(recv(base + 1, {{0, 512, 1024}, {3, 0, 100}})) == 0);
    FUZZ_CHECK(fn(recv(base + 2, {{3, 10, 90}})) == 0);
    FUZZ_CHECK(fn(recv(base + 3, {{0, 2048, 2048}})) == 0);
  }

  void bring_up(uint32_t i, QpType t) {
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.port_num = 1;
    a.pkey_index = 0;
    a.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    a.qkey = kUdQkey;
    uint32_t m = kQpState | kQpPkeyIndex | kQpPort;
    m |= t == QpType::kUd ? kQpQkey : kQpAccessFlags;
    FUZZ_CHECK(eng->modify_qp(qpn[i], a, m) == 0);
    if (i == 5) return;  // stays in INIT
    a.qp_state = QpState::kRtr;
    m = kQpState;
    if (t != QpType::kUd) {
      a.ah = eng_to_peer();
      a.path_mtu = Mtu::k1024;
      a.dest_qp_num = kPeerQpnBase + i;
      a.rq_psn = kRqPsn;
      a.max_dest_rd_atomic = 4;
      a.min_rnr_timer = 1;
      m |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
      if (t == QpType::kRc) m |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
    }
    FUZZ_CHECK(eng->modify_qp(qpn[i], a, m) == 0);
    if (i == 4) return;  // stays in RTR
    a.qp_state = QpState::kRts;
    a.sq_psn = kSqPsn;
    a.timeout = 8;  // 1 ms
    a.retry_cnt = 2;
    a.rnr_retry = 2;
    a.max_rd_atomic = 4;
    m = kQpState | kQpSqPsn;
    if (t == QpType::kRc) m |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
    FUZZ_CHECK(eng->modify_qp(qpn[i], a, m) == 0);
    if (i == 6) {
      a.qp_state = QpState::kErr;
      FUZZ_CHECK(eng->modify_qp(qpn[i], a, kQpState) == 0);
    }
  }

  Wc wc[32];  // (a member: not built again on every call)
  void check_completions() {
    uint32_t n;
    while ((n = eng->poll_cq(cq, wc, 32)) > 0) {
      for (uint32_t k = 0; k < n; ++k) {
        const Wc &c = wc[k];
        FUZZ_CHECK(static_cast<uint32_t>(c.status) <= static_cast<uint32_t>(WcStatus::kGeneralErr));
        const uint32_t op = static_cast<uint32_t>(c.opcode);
        FUZZ_CHECK(op <= static_cast<uint32_t>(WcOpcode::kLocalInv) ||
                   c.opcode == WcOpcode::kRecv || c.opcode == WcOpcode::kRecvRdmaWithImm);
        FUZZ_CHECK(std::find(qpn, qpn + kNumQps, c.qp_num) != qpn + kNumQps);
        if (c.status == WcStatus::kSuccess && op >= 128) {
          // A successful receive fits the buffers posted for it.
          FUZZ_CHECK(c.byte_len <= 40 + 4096);
        }
      }
    }
    AsyncEventRecord ev;
    for (int k = 0; k < 64 && eng->poll_async_event(&ev); ++k) {
    }
  }

  void poll() {
    eng->poll();
    check_completions();
  }
};

void steer(Setup &s, uint8_t mode, uint8_t qp_sel, int8_t psn_delta, uint8_t mr_sel,
           uint16_t va_off, uint8_t *f, size_t len) {
  wire::ParsedPacket p;
  (void)wire::parse_frame(f, len, &p, 0);
  if (p.bth_off == 0 || p.bth_off + wire::Bth::kSize > len) return;
  auto *bth = wire::hdr_at<wire::Bth>(f + p.bth_off);
  const uint32_t qi = qp_sel % 8u;
  if (mode & kSteerQpn) bth->set_dest_qp(qi < kNumQps ? s.qpn[qi] : s.unknown_qpn);
  const wire::OpcodeInfo &op = wire::opcode_info(bth->opcode());
  if (mode & kSteerPsn) {
    QpAttr a;
    QpInitAttr ia;
    if (s.eng->query_qp(bth->dest_qp(), &a, &ia) == 0) {
      const uint32_t base = op.any(wire::kMaskResp) ? a.sq_psn : a.rq_psn;
      bth->set_ack_psn(bth->ack_req(),
                       (base + static_cast<uint32_t>(int32_t{psn_delta})) & wire::kPsnMask);
    }
  }
  if ((mode & kSteerKey) && op.valid()) {
    const uint32_t m = mr_sel % kNumMrs;
    const uint64_t va = kMrVa[m] + va_off - 64;
    if (op.any(wire::kMaskReth) && p.bth_off + op.off_reth + wire::Reth::kSize <= len) {
      auto *r = wire::hdr_at<wire::Reth>(f + p.bth_off + op.off_reth);
      r->set(va, s.key[m], r->dma_len());
    } else if (op.any(wire::kMaskAtomicEth) &&
               p.bth_off + op.off_atomic_eth + wire::AtomicEth::kSize <= len) {
      auto *a = wire::hdr_at<wire::AtomicEth>(f + p.bth_off + op.off_atomic_eth);
      a->set(va, s.key[m], a->swap_add(), a->compare());
    }
  }
}

void fix_icrc(uint8_t *f, size_t len) {
  wire::ParsedPacket shape;
  (void)wire::parse_frame(f, len, &shape, 0);
  const bool roce_shape =
      shape.frame_len != 0 && shape.frame_len <= len &&
      shape.frame_len >= shape.l3_off + wire::icrc_masked_len(shape.ipv6) + wire::kIcrcSize;
  if (!roce_shape) return;
  const_cast<wire::UdpHdr *>(shape.udp())->set_checksum(0);
  wire::rewrite_icrc(f, shape);
}

void run_one(const uint8_t *data, size_t size) {
  static Setup *const setup = new Setup;  // lives as long as the process (reachable: no leak)
  Setup &s = *setup;
  ByteReader in(data, size);
  s.begin(in.u8() & 1);
  for (size_t r = 0; r < kMaxRecords && in.remaining() >= kRecordHeader; ++r) {
    const uint8_t mode = in.u8();
    const uint8_t qp_sel = in.u8();
    const int8_t psn_delta = static_cast<int8_t>(in.u8());
    const uint8_t mr_sel = in.u8();
    const uint16_t va_off = in.u16();
    const uint8_t tick = in.u8();
    const uint16_t want = in.u16();  // (read before remaining(): the order matters)
    const size_t len = std::min<size_t>(want, in.remaining());
    if (mode & kPollBefore) {
      s.clock.t += uint64_t{1} << (tick % 28);
      s.poll();
    }
    if (len == 0) continue;
    // Exactly `len` bytes on the heap: the engine reading past the frame is an ASan report.
    std::unique_ptr<uint8_t[]> f(new uint8_t[len]);
    std::memcpy(f.get(), in.rest(), len);
    in = ByteReader(in.rest() + len, in.remaining() - len);
    if (mode & kFixLengths) fix_lengths(f.get(), len);
    if (mode & (kSteerQpn | kSteerPsn | kSteerKey))
      steer(s, mode, qp_sel, psn_delta, mr_sel, va_off, f.get(), len);
    if (mode & kFixIpCsum) fix_ipv4_checksum(f.get(), len);
    if (mode & kFixIcrc) fix_icrc(f.get(), len);
    s.eng->rx(f.get(), static_cast<uint32_t>(len));
    f.reset();  // the engine must not keep the pointer
    if (mode & kPollAfter) s.poll();
    s.check_completions();
  }
  // Let the timers run out: retransmissions, RNR waits, ACK timeouts.
  for (int i = 0; i < kDrainRounds; ++i) {
    s.poll();
    const uint64_t next = s.eng->next_timer_ns();
    if (next == UINT64_MAX && s.eng->active_qps() == 0) break;
    s.clock.t = next != UINT64_MAX && next > s.clock.t ? next : s.clock.t + 1000;
  }
  s.check_completions();
  // MR 1 allows remote read only and no local write: nothing may have changed it.
  FUZZ_CHECK(std::memcmp(s.mem[1].get(), s.init[1].get(), kMrLen[1]) == 0);
}

}  // namespace
}  // namespace uroce::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uroce::fuzz::run_one(data, size);
  return 0;
}
