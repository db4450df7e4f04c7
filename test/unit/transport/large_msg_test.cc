// SPDX-License-Identifier: BSD-3-Clause
// Messages up to the IBTA maximum between two engines over the fake link: an RC RDMA WRITE, an
// RC SEND and an RC RDMA READ of exactly 1 GiB (262,144 packets each at MTU 4096) with every
// byte checked, a WRITE and a SEND of exactly 2^31 bytes (the engine's kMaxMsgSize, rxe's
// max_msg_sz), and the boundary: a message of 2^31 + 1 bytes is refused at post time with EINVAL
// (rxe validate_send_wr: "message length too long", -EINVAL), and one whose SGE lengths sum past
// 2^32 (the 32-bit wrap a naive sum would hit) is refused too.
//
// Size: UROCE_LARGE_MSG_BYTES (decimal, a multiple of 8) replaces 1 GiB, e.g. 67108864 for the
// ASan / UBSan stage (test/unit/transport/meson.build registers that variant when the build has
// a sanitizer); with it set below 1 GiB the two 2^31 cases are skipped by design, as it needs 4 GiB
// of buffers. Buffers are mmap(MAP_NORESERVE) and filled with a cheap position-dependent
// pattern (each 8-byte word is a function of its index and a per-test salt).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "harness.h"
#include "wire/packet.h"

namespace uroce::transport::testing {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kVaA = 0x100000000000ull;
constexpr uint64_t kVaB = 0x200000000000ull;

uint64_t message_bytes() {
  const char *s = std::getenv("UROCE_LARGE_MSG_BYTES");
  if (s == nullptr || *s == 0) return kGiB;
  const uint64_t v = std::strtoull(s, nullptr, 10);
  if (v == 0 || v % 8 || v > kGiB) {
    ADD_FAILURE() << "UROCE_LARGE_MSG_BYTES=" << s << ": want a multiple of 8 in (0, 2^30]";
    return kGiB;
  }
  return v;
}

// An anonymous mapping registered with one engine.
class Region {
 public:
  Region(Net &net, size_t node, uint64_t len, uint64_t va) : len_(len), va_(va) {
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      ADD_FAILURE() << "mmap " << len << " bytes failed: " << std::strerror(errno);
      return;
    }
    mem_ = static_cast<uint8_t *>(p);
    uint32_t rkey = 0;
    EXPECT_EQ(net.e(node).reg_mr(net.node(node).pd, mem_, va, len, kAllAccess, &key_, &rkey), 0);
  }
  ~Region() {
    if (mem_) munmap(mem_, len_);
  }
  Region(const Region &) = delete;
  Region &operator=(const Region &) = delete;
  bool ok() const { return mem_ != nullptr && key_ != 0; }
  uint8_t *mem() { return mem_; }
  uint64_t va() const { return va_; }
  uint32_t key() const { return key_; }
  Sge sge(uint64_t off, uint32_t len) const { return Sge{va_ + off, len, key_}; }

 private:
  uint64_t len_;
  uint64_t va_;
  uint8_t *mem_ = nullptr;
  uint32_t key_ = 0;
};

inline uint64_t word_at(uint64_t i, uint64_t salt) {
  return (i + 1) * 0x9E3779B97F4A7C15ull ^ salt;
}

void fill_words(uint8_t *p, uint64_t len, uint64_t salt) {
  auto *w = reinterpret_cast<uint64_t *>(p);
  for (uint64_t i = 0; i < len / 8; ++i)
    w[i] = word_at(i, salt);
}

// Index of the first 8-byte word that differs from the pattern, or UINT64_MAX.
uint64_t first_bad_word(const uint8_t *p, uint64_t len, uint64_t salt) {
  const auto *w = reinterpret_cast<const uint64_t *>(p);
  for (uint64_t i = 0; i < len / 8; ++i)
    if (w[i] != word_at(i, salt)) return i;
  return UINT64_MAX;
}

class LargeMsg : public ::testing::Test {
 protected:
  void SetUp() override {
    net = std::make_unique<Net>(11, 2);
    RcParams p;
    p.mtu = Mtu::k4096;
    auto [x, y] = net->connect(0, 1, p);
    qa = x;
    qb = y;
  }
  // Runs until node i has n completions (bounded by the harness' step limit).
  std::vector<Wc> wait(size_t i, size_t n) {
    std::vector<Wc> wc;
    EXPECT_TRUE(net->wait_wc(i, wc, n));
    return wc;
  }
  static uint64_t packets(uint64_t len) { return (len + 4095) / 4096; }

  std::unique_ptr<Net> net;
  uint32_t qa = 0, qb = 0;
};

TEST_F(LargeMsg, RdmaWrite) {
  const uint64_t len = message_bytes();
  Region a(*net, 0, len, kVaA), b(*net, 1, len, kVaB);
  ASSERT_TRUE(a.ok() && b.ok());
  fill_words(a.mem(), len, 0xA1);
  SendWr w;
  w.wr_id = 1;
  w.opcode = WrOpcode::kRdmaWrite;
  w.send_flags = kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = a.sge(0, static_cast<uint32_t>(len));
  w.remote_addr = b.va();
  w.rkey = b.key();
  ASSERT_EQ(net->e(0).post_send(qa, w), 0);
  auto wc = wait(0, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess) << wc_status_str(wc[0].status);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(wc[0].byte_len, len);
  EXPECT_EQ(first_bad_word(b.mem(), len, 0xA1), UINT64_MAX);
  EXPECT_EQ(net->e(0).qp_counters(qa)->tx_pkts, packets(len));  // no loss: no retransmission
  EXPECT_EQ(net->e(0).qp_counters(qa)->retransmits, 0u);
  QpAttr at;
  ASSERT_EQ(net->e(1).query_qp(qb, &at, nullptr), 0);
  EXPECT_EQ(at.rq_psn, (RcParams{}.psn_a + packets(len)) & 0xFFFFFF);
}

TEST_F(LargeMsg, Send) {
  const uint64_t len = message_bytes();
  Region a(*net, 0, len, kVaA), b(*net, 1, len + 4096, kVaB);
  ASSERT_TRUE(a.ok() && b.ok());
  fill_words(a.mem(), len, 0xB2);
  RecvWr r;
  r.wr_id = 9;
  r.num_sge = 1;
  r.sg_list[0] = b.sge(0, static_cast<uint32_t>(len + 4096));
  ASSERT_EQ(net->e(1).post_recv(qb, r), 0);
  SendWr w;
  w.wr_id = 2;
  w.opcode = WrOpcode::kSend;
  w.send_flags = kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = a.sge(0, static_cast<uint32_t>(len));
  ASSERT_EQ(net->e(0).post_send(qa, w), 0);
  auto wa = wait(0, 1);
  auto wb = wait(1, 1);
  ASSERT_EQ(wa.size(), 1u);
  ASSERT_EQ(wb.size(), 1u);
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess) << wc_status_str(wa[0].status);
  EXPECT_EQ(wb[0].status, WcStatus::kSuccess) << wc_status_str(wb[0].status);
  EXPECT_EQ(wb[0].wr_id, 9u);
  EXPECT_EQ(wb[0].byte_len, len);
  EXPECT_EQ(first_bad_word(b.mem(), len, 0xB2), UINT64_MAX);
  for (uint64_t i = len; i < len + 4096; ++i)  // nothing past the message
    ASSERT_EQ(b.mem()[i], 0) << i;
  EXPECT_EQ(net->e(0).qp_counters(qa)->tx_pkts, packets(len));
}

TEST_F(LargeMsg, RdmaRead) {
  const uint64_t len = message_bytes();
  Region a(*net, 0, len, kVaA), b(*net, 1, len, kVaB);
  ASSERT_TRUE(a.ok() && b.ok());
  fill_words(b.mem(), len, 0xC3);
  SendWr w;
  w.wr_id = 3;
  w.opcode = WrOpcode::kRdmaRead;
  w.send_flags = kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = a.sge(0, static_cast<uint32_t>(len));
  w.remote_addr = b.va();
  w.rkey = b.key();
  ASSERT_EQ(net->e(0).post_send(qa, w), 0);
  auto wc = wait(0, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess) << wc_status_str(wc[0].status);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(wc[0].byte_len, len);
  EXPECT_EQ(first_bad_word(a.mem(), len, 0xC3), UINT64_MAX);
  EXPECT_EQ(net->e(0).qp_counters(qa)->tx_pkts, 1u);            // one request
  EXPECT_EQ(net->e(1).qp_counters(qb)->tx_pkts, packets(len));  // its responses
  EXPECT_EQ(net->e(0).qp_counters(qa)->retransmits, 0u);
}

// 2^31 is the largest message (IBTA max message size, rxe max_msg_sz = 0x80000000): a WRITE of
// exactly that many bytes goes through, with the RETH DMA length 0x80000000.
TEST_F(LargeMsg, WriteOfExactly2To31Bytes) {
  if (message_bytes() < kGiB) GTEST_SKIP() << "UROCE_LARGE_MSG_BYTES set: the 4 GiB case is off";
  const uint64_t len = 1ull << 31;
  Region a(*net, 0, len, kVaA), b(*net, 1, len, kVaB);
  ASSERT_TRUE(a.ok() && b.ok());
  fill_words(a.mem(), len, 0xD4);
  SendWr w;
  w.wr_id = 4;
  w.opcode = WrOpcode::kRdmaWriteWithImm;
  w.send_flags = kSendSignaled;
  w.num_sge = 2;  // two SGEs of 1 GiB: the sum crosses 2^31 - 1 into 2^31 exactly
  w.sg_list[0] = a.sge(0, static_cast<uint32_t>(kGiB));
  w.sg_list[1] = a.sge(kGiB, static_cast<uint32_t>(kGiB));
  w.remote_addr = b.va();
  w.rkey = b.key();
  w.imm_data_be = 0x11223344;
  ASSERT_EQ(net->e(1).post_recv(qb, RecvWr{}), 0);  // WRITE_WITH_IMM consumes a receive WQE
  ASSERT_EQ(net->e(0).post_send(qa, w), 0);
  auto wa = wait(0, 1);
  auto wb = wait(1, 1);
  ASSERT_EQ(wa.size(), 1u);
  ASSERT_EQ(wb.size(), 1u);
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess) << wc_status_str(wa[0].status);
  EXPECT_EQ(wa[0].byte_len, len);
  EXPECT_EQ(wb[0].status, WcStatus::kSuccess) << wc_status_str(wb[0].status);
  EXPECT_EQ(wb[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(wb[0].byte_len, len);
  EXPECT_EQ(wb[0].imm_data, 0x11223344u);
  EXPECT_EQ(first_bad_word(b.mem(), len, 0xD4), UINT64_MAX);
  EXPECT_EQ(net->e(0).qp_counters(qa)->tx_pkts, packets(len));
}

// A SEND of exactly 2^31 bytes into a receive WQE of exactly 2^31 bytes split over two SGEs
// (the placement crosses from the first SGE into the second at 2^30).
TEST_F(LargeMsg, SendOfExactly2To31Bytes) {
  if (message_bytes() < kGiB) GTEST_SKIP() << "UROCE_LARGE_MSG_BYTES set: the 4 GiB case is off";
  const uint64_t len = 1ull << 31;
  Region a(*net, 0, len, kVaA), b(*net, 1, len, kVaB);
  ASSERT_TRUE(a.ok() && b.ok());
  fill_words(a.mem(), len, 0xE5);
  RecvWr r;
  r.wr_id = 8;
  r.num_sge = 2;
  r.sg_list[0] = b.sge(0, static_cast<uint32_t>(kGiB));
  r.sg_list[1] = b.sge(kGiB, static_cast<uint32_t>(kGiB));
  ASSERT_EQ(net->e(1).post_recv(qb, r), 0);
  SendWr w;
  w.wr_id = 5;
  w.opcode = WrOpcode::kSend;
  w.send_flags = kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = a.sge(0, 0x80000000u);
  ASSERT_EQ(net->e(0).post_send(qa, w), 0);
  auto wa = wait(0, 1);
  auto wb = wait(1, 1);
  ASSERT_EQ(wa.size(), 1u);
  ASSERT_EQ(wb.size(), 1u);
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess) << wc_status_str(wa[0].status);
  EXPECT_EQ(wb[0].status, WcStatus::kSuccess) << wc_status_str(wb[0].status);
  EXPECT_EQ(wb[0].byte_len, len);
  EXPECT_EQ(first_bad_word(b.mem(), len, 0xE5), UINT64_MAX);
}

// One byte more than 2^31 is refused when posted, whatever the opcode or SGE split, and
// nothing is sent; the QP stays usable.
TEST_F(LargeMsg, MoreThan2To31BytesIsEinvalAtPost) {
  // The SGEs are never dereferenced: post_send refuses before looking at memory.
  const uint32_t key = 0x100;
  struct Case {
    WrOpcode op;
    std::vector<uint32_t> sges;
  } cases[] = {
      {WrOpcode::kSend, {0x80000001u}},
      {WrOpcode::kSendWithImm, {0x80000000u, 1}},
      {WrOpcode::kRdmaWrite, {0x40000000u, 0x40000000u, 1}},
      {WrOpcode::kRdmaWriteWithImm, {0xFFFFFFFFu}},
      {WrOpcode::kRdmaRead, {0x80000001u}},
      // 2^32 + 1 in total: a 32-bit sum would wrap to 1 and pass
      {WrOpcode::kRdmaWrite, {0xFFFFFFFFu, 2}},
      {WrOpcode::kSend, {0x80000000u, 0x80000000u, 1}},
  };
  const uint32_t q = qa;
  for (const Case &c : cases) {
    SendWr w;
    w.opcode = c.op;
    w.send_flags = kSendSignaled;
    w.num_sge = static_cast<uint32_t>(c.sges.size());
    for (size_t i = 0; i < c.sges.size(); ++i)
      w.sg_list[i] = Sge{kVaA + i * 0x100000000ull, c.sges[i], key};
    w.remote_addr = kVaB;
    w.rkey = key;
    EXPECT_EQ(net->e(0).post_send(q, w), EINVAL)
        << "opcode " << static_cast<int>(c.op) << " with " << c.sges.size() << " SGEs";
  }
  EXPECT_EQ(net->e(0).qp_counters(q)->tx_pkts, 0u);
  // exactly 2^31 is accepted (and fails later on the bogus key, locally, with nothing sent)
  SendWr w;
  w.wr_id = 77;
  w.opcode = WrOpcode::kRdmaWrite;
  w.send_flags = kSendSignaled;
  w.num_sge = 2;
  w.sg_list[0] = Sge{kVaA, 0x7FFFFFFFu, key};
  w.sg_list[1] = Sge{kVaA + 0x7FFFFFFFu, 1, key};
  w.remote_addr = kVaB;
  w.rkey = key;
  ASSERT_EQ(net->e(0).post_send(q, w), 0);
  auto wc = wait(0, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 77u);
  EXPECT_EQ(wc[0].status, WcStatus::kLocProtErr);
  EXPECT_EQ(wc[0].byte_len, 0x80000000u);
  EXPECT_EQ(net->e(0).qp_counters(q)->tx_pkts, 0u);
}

// The receive side of the limit, with frames crafted as a peer that does not check might send
// them: a WRITE FIRST whose RETH DMA length is 2^31 + 1 is an invalid request (rxe_resp.c
// check_length: reth_len > 2^31 -> RESPST_ERR_LENGTH -> RC class C, NAK invalid request); with
// exactly 2^31 the length check passes and the R_Key check (a 64 KiB region) fails instead:
// NAK remote access error. Either way the responder enters ERR and writes nothing.
TEST_F(LargeMsg, IncomingWriteLongerThan2To31IsInvalidRequest) {
  Region b(*net, 1, 1 << 16, kVaB);
  ASSERT_TRUE(b.ok());
  std::vector<uint8_t> syndromes;
  test::Faults f;
  f.filter = [&](const uint8_t *fr, uint32_t len) {
    wire::ParsedPacket p;
    if (wire::parse_frame(fr, len, &p, 0) == wire::ParseError::kOk &&
        p.bth()->opcode() == wire::op::kRcAck)
      syndromes.push_back(p.aeth()->syndrome());
    return test::Action::kPass;
  };
  net->link.set_faults(*net->node(1).ep, *net->node(0).ep, f);
  const wire::PathInfo path = net->path(0, 1);
  for (const uint32_t dma_len : {0x80000001u, 0x80000000u}) {
    SCOPED_TRACE(dma_len);
    RcParams rp;
    rp.mtu = Mtu::k4096;
    auto [x, y] = net->connect(0, 1, rp);
    (void)x;
    wire::PacketDesc d;
    d.path = &path;
    d.f.opcode = wire::op::kRcWriteFirst;
    d.f.dest_qp = y;
    d.f.psn = rp.psn_a;  // the responder's ePSN
    d.f.va = b.va();
    d.f.rkey = b.key();
    d.f.dma_len = dma_len;
    d.payload_len = 4096;
    std::vector<uint8_t> frame(9216), payload(4096, 0xEE);
    const wire::BuildResult r = wire::build_frame(frame.data(), frame.size(), d, payload.data());
    ASSERT_TRUE(r.ok());
    syndromes.clear();
    net->e(1).rx(frame.data(), r.frame_len);
    net->settle();
    QpAttr at;
    ASSERT_EQ(net->e(1).query_qp(y, &at, nullptr), 0);
    EXPECT_EQ(at.qp_state, QpState::kErr);
    ASSERT_EQ(syndromes.size(), 1u);
    EXPECT_EQ(syndromes[0], dma_len > 0x80000000u ? 0x61 : 0x62);  // invalid request / access
    for (uint32_t i = 0; i < 4096; ++i)
      ASSERT_EQ(b.mem()[i], 0) << i;
  }
}

}  // namespace
}  // namespace uroce::transport::testing
