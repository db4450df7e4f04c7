// SPDX-License-Identifier: BSD-3-Clause
// The integration tests' app: talks to two uroced instances through lib/client and checks that
// verbs operations between them work end to end (test/integration/uroced_pair.sh runs it).
//
//   verbs_app run SOCK_A SOCK_B    one context on each daemon (A requester, B responder):
//                                  RC SEND (1 and many packets), RC WRITE (data checked),
//                                  WRITE_WITH_IMM, READ, FETCH_ADD / CMP_SWP, UD SEND, UC
//                                  WRITE, completion events, then corrupt WQEs (bad opcode,
//                                  bad lkey, too many SGEs) fail only their own QP.
//   verbs_app hold SOCK_A SOCK_B   an RC pair, then RDMA WRITEs forever (the script SIGKILLs it
//                                  and checks the daemons freed everything); prints
//                                  "transferring" after the first completed WRITE.
// Every wait is bounded (a generous 30 s: two busy-polling daemons share two cores with us).
// Exit 0 when every check passed; each failure prints "FAIL: ...".
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "client/client.h"

using uroce::abi::Cqe;
using uroce::abi::Sge;
using uroce::client::Buffer;
using uroce::client::Context;
using uroce::client::Cq;
using uroce::client::Mr;
using uroce::client::Qp;
using uroce::client::RecvWr;
using uroce::client::SendWr;

namespace {

// ibv_* numeric values
enum : uint8_t {
  kWrWrite = 0,
  kWrWriteImm = 1,
  kWrSend = 2,
  kWrSendImm = 3,
  kWrRead = 4,
  kWrCmpSwp = 5,
  kWrFetchAdd = 6
};
enum : uint32_t { kSignaled = 2, kInline = 8 };
enum : uint32_t {
  kWcSend = 0,
  kWcWrite = 1,
  kWcRead = 2,
  kWcCmpSwp = 3,
  kWcFetchAdd = 4,
  kWcRecv = 128,
  kWcRecvImm = 129
};
enum : uint32_t { kRc = 2, kUc = 3, kUd = 4 };
enum : uint32_t { kLocalWrite = 1, kRemoteWrite = 2, kRemoteRead = 4, kRemoteAtomic = 8 };
enum : uint32_t {
  kMaskState = 1,
  kMaskAccess = 1 << 3,
  kMaskPkey = 1 << 4,
  kMaskPort = 1 << 5,
  kMaskQkey = 1 << 6,
  kMaskAv = 1 << 7,
  kMaskPathMtu = 1 << 8,
  kMaskTimeout = 1 << 9,
  kMaskRetry = 1 << 10,
  kMaskRnrRetry = 1 << 11,
  kMaskRqPsn = 1 << 12,
  kMaskMaxRdAtomic = 1 << 13,
  kMaskMinRnr = 1 << 15,
  kMaskSqPsn = 1 << 16,
  kMaskMaxDestRdAtomic = 1 << 17,
  kMaskDestQpn = 1 << 20
};
constexpr uint32_t kGidIndex = 1;  // ::ffff:IPv4, the first IPv4 address of the port
constexpr size_t kBufBytes = 1 << 20;
constexpr int kWaitMs = 30'000;

int g_fails = 0;
#define CHECK(cond, ...)                                \
  do {                                                  \
    if (!(cond)) {                                      \
      std::printf("FAIL: %s:%d: ", __FILE__, __LINE__); \
      std::printf(__VA_ARGS__);                         \
      std::printf("\n");                                \
      ++g_fails;                                        \
    }                                                   \
  } while (0)
#define REQUIRE(cond, ...)                              \
  do {                                                  \
    if (!(cond)) {                                      \
      std::printf("FAIL: %s:%d: ", __FILE__, __LINE__); \
      std::printf(__VA_ARGS__);                         \
      std::printf("\n");                                \
      std::exit(1);                                     \
    }                                                   \
  } while (0)

struct Side {
  const char *name = "";
  std::unique_ptr<Context> ctx;
  uint32_t pd = 0;
  Buffer buf;
  Mr mr;
  std::unique_ptr<Cq> cq;
  uint8_t gid[16] = {};
};

void open_side(Side &s, const char *name, const char *sock) {
  s.name = name;
  int rc = Context::open(sock, name, &s.ctx);
  REQUIRE(rc == 0, "%s: open %s: %s", name, sock, std::strerror(rc));
  uroce::ctl::DeviceAttrPayload dev{};
  REQUIRE(s.ctx->query_device(&dev) == 0 && dev.max_qp > 0, "%s: query_device", name);
  uroce::ctl::PortAttrPayload pa{};
  REQUIRE(s.ctx->query_port(1, &pa) == 0 && pa.gid_tbl_len > kGidIndex, "%s: query_port", name);
  REQUIRE(s.ctx->query_gid(1, kGidIndex, s.gid) == 0, "%s: query_gid", name);
  REQUIRE(s.gid[10] == 0xff && s.gid[11] == 0xff, "%s: GID %u is not IPv4-mapped", name, kGidIndex);
  REQUIRE(s.ctx->alloc_pd(&s.pd) == 0, "%s: alloc_pd", name);
  REQUIRE(Buffer::create(kBufBytes, &s.buf) == 0, "%s: buffer", name);
  rc = s.ctx->reg_mr(s.pd, s.buf, 0, kBufBytes,
                     kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic, &s.mr);
  REQUIRE(rc == 0, "%s: reg_mr: %s", name, std::strerror(rc));
  rc = s.ctx->create_cq(1024, &s.cq);
  REQUIRE(rc == 0, "%s: create_cq: %s", name, std::strerror(rc));
}

// Waits (bounded) for one completion.
bool wait_cqe(Side &s, Cqe *out, int ms = kWaitMs) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    if (s.ctx->poll_cq(*s.cq, out, 1) == 1) return true;
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Waits for a completion and checks it.
void expect_cqe(Side &s, uint64_t wr_id, uint32_t status, uint32_t opcode, const char *what,
                Cqe *got = nullptr) {
  Cqe c{};
  if (!wait_cqe(s, &c)) {
    CHECK(false, "%s: no completion on %s within %d ms", what, s.name, kWaitMs);
    return;
  }
  CHECK(c.wr_id == wr_id && c.status == status && c.opcode == opcode,
        "%s: completion on %s: wr_id %lu status %u opcode %u (expected %lu %u %u)", what, s.name,
        static_cast<unsigned long>(c.wr_id), c.status, c.opcode, static_cast<unsigned long>(wr_id),
        status, opcode);
  if (got) *got = c;
}

std::unique_ptr<Qp> make_qp(Side &s, uint32_t type) {
  uroce::ctl::CreateQpPayload a{};
  a.pd = s.pd;
  a.qp_type = type;
  a.send_cq = s.cq->handle;
  a.recv_cq = s.cq->handle;
  a.max_send_wr = 64;
  a.max_recv_wr = 64;
  a.max_send_sge = 4;
  a.max_recv_sge = 3;
  a.max_inline_data = 64;
  std::unique_ptr<Qp> q;
  const int rc = s.ctx->create_qp(a, &q);
  REQUIRE(rc == 0, "%s: create_qp type %u: %s", s.name, type, std::strerror(rc));
  return q;
}

void to_init(Side &s, Qp &q, uint32_t type) {
  uroce::ctl::QpAttrPayload a{};
  a.qp_state = 1;
  a.pkey_index = 0;
  a.port_num = 1;
  uint32_t mask = kMaskState | kMaskPkey | kMaskPort;
  if (type == kUd) {
    a.qkey = 0x11111111;
    mask |= kMaskQkey;
  } else {
    a.qp_access_flags = kRemoteWrite | kRemoteRead | kRemoteAtomic;
    mask |= kMaskAccess;
  }
  const int rc = s.ctx->modify_qp(q, a, mask);
  REQUIRE(rc == 0, "%s: modify_qp INIT: %s", s.name, std::strerror(rc));
}

void to_rtr_rts(Side &s, Qp &q, uint32_t type, const Side &peer, uint32_t peer_qpn) {
  uroce::ctl::QpAttrPayload a{};
  a.qp_state = 2;
  uint32_t mask = kMaskState;
  if (type != kUd) {
    a.path_mtu = 3;  // 1024
    a.dest_qp_num = peer_qpn;
    a.rq_psn = 0x100;
    std::memcpy(a.ah_attr.dgid, peer.gid, 16);
    a.ah_attr.sgid_index = kGidIndex;
    a.ah_attr.is_global = 1;
    a.ah_attr.hop_limit = 64;
    a.ah_attr.port_num = 1;
    mask |= kMaskAv | kMaskPathMtu | kMaskDestQpn | kMaskRqPsn;
    if (type == kRc) {
      a.max_dest_rd_atomic = 16;
      a.min_rnr_timer = 1;
      mask |= kMaskMaxDestRdAtomic | kMaskMinRnr;
    }
  }
  int rc = s.ctx->modify_qp(q, a, mask);
  REQUIRE(rc == 0, "%s: modify_qp RTR: %s", s.name, std::strerror(rc));
  a = {};
  a.qp_state = 3;
  a.sq_psn = 0x100;
  mask = kMaskState | kMaskSqPsn;
  if (type == kRc) {
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    mask |= kMaskTimeout | kMaskRetry | kMaskRnrRetry | kMaskMaxRdAtomic;
  }
  rc = s.ctx->modify_qp(q, a, mask);
  REQUIRE(rc == 0, "%s: modify_qp RTS: %s", s.name, std::strerror(rc));
}

struct Pair {
  std::unique_ptr<Qp> a, b;
};

Pair connect_pair(Side &A, Side &B, uint32_t type) {
  Pair p;
  p.a = make_qp(A, type);
  p.b = make_qp(B, type);
  to_init(A, *p.a, type);
  to_init(B, *p.b, type);
  to_rtr_rts(A, *p.a, type, B, p.b->qpn);
  to_rtr_rts(B, *p.b, type, A, p.a->qpn);
  return p;
}

void fill(uint8_t *p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i)
    p[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
}

// UD and UC drop a message that finds no receive WQE (no RNR NAK as in RC): before sending,
// wait until the receiver's daemon has taken every posted receive WQE from the ring.
void wait_rq_taken(Qp &q) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  while (q.rq.free_slots() != q.rq.capacity()) {
    REQUIRE(std::chrono::steady_clock::now() < end, "receive WQEs of qp %u not taken", q.qpn);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

int post_recv(Side &s, Qp &q, uint64_t wr_id, uint64_t off, uint32_t len) {
  const Sge sge{s.mr.addr + off, len, s.mr.lkey};
  RecvWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return s.ctx->post_recv(q, wr);
}

int post(Side &s, Qp &q, uint64_t wr_id, uint8_t op, uint64_t off, uint32_t len, uint64_t raddr = 0,
         uint32_t rkey = 0, uint32_t flags = kSignaled) {
  const Sge sge{s.mr.addr + off, len, s.mr.lkey};
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = raddr;
  wr.rkey = rkey;
  return s.ctx->post_send(q, wr);
}

// ---- the checks ----

void test_rc_send(Side &A, Side &B, Pair &p) {
  for (uint32_t len : {100u, 10000u}) {  // one packet; ten packets (path MTU 1024)
    std::memset(B.buf.data() + 0x10000, 0, len);
    fill(A.buf.data(), len, len);
    CHECK(post_recv(B, *p.b, 500 + len, 0x10000, 16384) == 0, "post_recv");
    CHECK(post(A, *p.a, 600 + len, kWrSend, 0, len) == 0, "post SEND");
    expect_cqe(A, 600 + len, 0, kWcSend, "RC SEND (requester)");
    Cqe c{};
    expect_cqe(B, 500 + len, 0, kWcRecv, "RC SEND (responder)", &c);
    CHECK(c.byte_len == len, "RC SEND byte_len %u, expected %u", c.byte_len, len);
    CHECK(c.qp_num == p.b->qpn, "RC SEND qp_num %u", c.qp_num);
    CHECK(std::memcmp(A.buf.data(), B.buf.data() + 0x10000, len) == 0, "RC SEND data differs");
  }
  // Inline send
  const char msg[] = "inline hello through the SQ ring";
  std::memcpy(A.buf.data() + 0x200, msg, sizeof msg);
  CHECK(post_recv(B, *p.b, 700, 0x10000, 4096) == 0, "post_recv");
  CHECK(post(A, *p.a, 701, kWrSend, 0x200, sizeof msg, 0, 0, kSignaled | kInline) == 0,
        "post inline SEND");
  expect_cqe(A, 701, 0, kWcSend, "inline SEND (requester)");
  Cqe c{};
  expect_cqe(B, 700, 0, kWcRecv, "inline SEND (responder)", &c);
  CHECK(c.byte_len == sizeof msg && std::memcmp(B.buf.data() + 0x10000, msg, sizeof msg) == 0,
        "inline SEND data / length (%u)", c.byte_len);
  std::printf("ok: RC SEND (100 B, 10000 B, inline) A qp %u -> B qp %u\n", p.a->qpn, p.b->qpn);
}

void test_rc_write(Side &A, Side &B, Pair &p) {
  const uint32_t len = 100000;
  fill(A.buf.data() + 0x20000, len, 3);
  std::memset(B.buf.data() + 0x40000, 0, len + 16);
  CHECK(post(A, *p.a, 800, kWrWrite, 0x20000, len, B.mr.addr + 0x40000, B.mr.rkey) == 0,
        "post WRITE");
  expect_cqe(A, 800, 0, kWcWrite, "RC WRITE");
  // The requester's completion means the responder acknowledged: the bytes are placed.
  CHECK(std::memcmp(A.buf.data() + 0x20000, B.buf.data() + 0x40000, len) == 0,
        "RC WRITE data differs");
  const uint8_t zero[16] = {};
  CHECK(std::memcmp(B.buf.data() + 0x40000 + len, zero, 16) == 0, "RC WRITE wrote past its end");
  // WRITE_WITH_IMM consumes a receive and reports the immediate.
  CHECK(post_recv(B, *p.b, 801, 0x10000, 64) == 0, "post_recv");
  const Sge sge{A.mr.addr + 0x20000, 3000, A.mr.lkey};
  SendWr wr;
  wr.wr_id = 802;
  wr.opcode = kWrWriteImm;
  wr.send_flags = kSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.imm_data = 0x78563412;
  wr.remote_addr = B.mr.addr + 0x80000;
  wr.rkey = B.mr.rkey;
  CHECK(A.ctx->post_send(*p.a, wr) == 0, "post WRITE_WITH_IMM");
  expect_cqe(A, 802, 0, kWcWrite, "WRITE_WITH_IMM (requester)");
  Cqe c{};
  expect_cqe(B, 801, 0, kWcRecvImm, "WRITE_WITH_IMM (responder)", &c);
  CHECK(c.imm_data == 0x78563412 && (c.wc_flags & 2) != 0, "imm_data %x wc_flags %x", c.imm_data,
        c.wc_flags);
  CHECK(std::memcmp(A.buf.data() + 0x20000, B.buf.data() + 0x80000, 3000) == 0,
        "WRITE_WITH_IMM data differs");
  std::printf("ok: RC WRITE %u B (data checked), WRITE_WITH_IMM\n", len);
}

void test_rc_read(Side &A, Side &B, Pair &p) {
  const uint32_t len = 50000;
  fill(B.buf.data() + 0xa0000, len, 9);
  std::memset(A.buf.data() + 0x30000, 0, len);
  CHECK(post(A, *p.a, 900, kWrRead, 0x30000, len, B.mr.addr + 0xa0000, B.mr.rkey) == 0,
        "post READ");
  expect_cqe(A, 900, 0, kWcRead, "RC READ");
  CHECK(std::memcmp(A.buf.data() + 0x30000, B.buf.data() + 0xa0000, len) == 0,
        "RC READ data differs");
  std::printf("ok: RC READ %u B (data checked)\n", len);
}

void test_atomics(Side &A, Side &B, Pair &p) {
  uint64_t *target = reinterpret_cast<uint64_t *>(B.buf.data() + 0xf0000);
  uint64_t *result = reinterpret_cast<uint64_t *>(A.buf.data() + 0xf0000);
  *target = 100;
  auto atomic = [&](uint64_t id, uint8_t op, uint64_t cmp_add, uint64_t swap) {
    *result = 0xdeadbeef;
    const Sge sge{A.mr.addr + 0xf0000, 8, A.mr.lkey};
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = op;
    wr.send_flags = kSignaled;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.remote_addr = B.mr.addr + 0xf0000;
    wr.rkey = B.mr.rkey;
    wr.compare_add = cmp_add;
    wr.swap = swap;
    CHECK(A.ctx->post_send(*p.a, wr) == 0, "post atomic");
    expect_cqe(A, id, 0, op == kWrFetchAdd ? kWcFetchAdd : kWcCmpSwp, "atomic");
    return *result;
  };
  uint64_t old = atomic(1000, kWrFetchAdd, 5, 0);
  CHECK(old == 100 && *target == 105, "FETCH_ADD: old %lu now %lu", old, *target);
  old = atomic(1001, kWrCmpSwp, 105, 7);
  CHECK(old == 105 && *target == 7, "CMP_SWP (equal): old %lu now %lu", old, *target);
  old = atomic(1002, kWrCmpSwp, 1, 9);
  CHECK(old == 7 && *target == 7, "CMP_SWP (different): old %lu now %lu", old, *target);
  std::printf("ok: FETCH_ADD, CMP_SWP (equal and not)\n");
}

void test_ud(Side &A, Side &B) {
  auto qa = make_qp(A, kUd);
  auto qb = make_qp(B, kUd);
  to_init(A, *qa, kUd);
  to_init(B, *qb, kUd);
  to_rtr_rts(A, *qa, kUd, B, 0);
  to_rtr_rts(B, *qb, kUd, A, 0);
  uroce::ctl::AhAttrPayload ah{};
  std::memcpy(ah.dgid, B.gid, 16);
  ah.sgid_index = kGidIndex;
  ah.is_global = 1;
  ah.hop_limit = 64;
  ah.port_num = 1;
  uint32_t ahh = 0;
  int rc = A.ctx->create_ah(A.pd, ah, &ahh);
  CHECK(rc == 0, "create_ah: %s", std::strerror(rc));
  const uint32_t len = 700;
  fill(A.buf.data() + 0x5000, len, 21);
  std::memset(B.buf.data() + 0xc0000, 0, 40 + len);
  CHECK(post_recv(B, *qb, 1100, 0xc0000, 40 + 1024) == 0, "UD post_recv");
  wait_rq_taken(*qb);
  const Sge sge{A.mr.addr + 0x5000, len, A.mr.lkey};
  SendWr wr;
  wr.wr_id = 1101;
  wr.opcode = kWrSend;
  wr.send_flags = kSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.ah = ahh;
  wr.remote_qpn = qb->qpn;
  wr.remote_qkey = 0x11111111;
  CHECK(A.ctx->post_send(*qa, wr) == 0, "UD post_send");
  expect_cqe(A, 1101, 0, kWcSend, "UD SEND (sender)");
  Cqe c{};
  expect_cqe(B, 1100, 0, kWcRecv, "UD SEND (receiver)", &c);
  CHECK(c.byte_len == 40 + len, "UD byte_len %u (expected GRH + %u)", c.byte_len, len);
  CHECK(c.src_qp == qa->qpn, "UD src_qp %u, expected %u", c.src_qp, qa->qpn);
  CHECK(std::memcmp(B.buf.data() + 0xc0000 + 40, A.buf.data() + 0x5000, len) == 0,
        "UD payload differs");
  CHECK(A.ctx->destroy_ah(ahh) == 0, "destroy_ah");
  CHECK(A.ctx->destroy_qp(*qa) == 0 && B.ctx->destroy_qp(*qb) == 0, "destroy UD QPs");
  std::printf("ok: UD SEND %u B (GRH + payload checked, src_qp %u)\n", len, c.src_qp);
}

void test_uc(Side &A, Side &B) {
  Pair p = connect_pair(A, B, kUc);
  const uint32_t len = 5000;
  fill(A.buf.data() + 0x60000, len, 33);
  std::memset(B.buf.data() + 0xd0000, 0, len);
  CHECK(post_recv(B, *p.b, 1200, 0x10000, 64) == 0, "UC post_recv");
  wait_rq_taken(*p.b);
  const Sge sge{A.mr.addr + 0x60000, len, A.mr.lkey};
  SendWr wr;
  wr.wr_id = 1201;
  wr.opcode = kWrWriteImm;
  wr.send_flags = kSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.imm_data = 0x01020304;
  wr.remote_addr = B.mr.addr + 0xd0000;
  wr.rkey = B.mr.rkey;
  CHECK(A.ctx->post_send(*p.a, wr) == 0, "UC post WRITE_WITH_IMM");
  expect_cqe(A, 1201, 0, kWcWrite, "UC WRITE (requester)");
  Cqe c{};
  expect_cqe(B, 1200, 0, kWcRecvImm, "UC WRITE (responder)", &c);
  CHECK(c.byte_len == len && c.imm_data == 0x01020304, "UC byte_len %u imm %x", c.byte_len,
        c.imm_data);
  CHECK(std::memcmp(B.buf.data() + 0xd0000, A.buf.data() + 0x60000, len) == 0,
        "UC WRITE data differs");
  CHECK(A.ctx->destroy_qp(*p.a) == 0 && B.ctx->destroy_qp(*p.b) == 0, "destroy UC QPs");
  std::printf("ok: UC WRITE_WITH_IMM %u B (data checked)\n", len);
}

void test_events(Side &A, Side &B, Pair &p) {
  // Arm, then nothing pending: no event; a completion then writes the eventfd.
  B.ctx->req_notify_cq(*B.cq, false);
  Cqe c{};
  CHECK(B.ctx->poll_cq(*B.cq, &c, 1) == 0, "unexpected completion pending");
  CHECK(post_recv(B, *p.b, 1300, 0x10000, 4096) == 0, "post_recv");
  CHECK(post(A, *p.a, 1301, kWrSend, 0, 64) == 0, "post SEND");
  CHECK(B.ctx->wait_cq_event(*B.cq, kWaitMs) == 1, "no completion event within %d ms", kWaitMs);
  expect_cqe(B, 1300, 0, kWcRecv, "event-driven receive");
  expect_cqe(A, 1301, 0, kWcSend, "SEND for the event");
  std::printf("ok: completion event through the eventfd\n");
}

// Corrupt WQEs complete with an error on their own QP only; other QPs keep working.
void test_corrupt(Side &A, Side &B, Pair &good) {
  Pair p = connect_pair(A, B, kRc);
  alignas(64) uint8_t slot[1024] = {};
  uroce::abi::SendWqeHeader h{};
  h.wr_id = 1400;
  h.opcode = 0x55;  // no such opcode
  h.send_flags = kSignaled;
  std::memcpy(slot, &h, sizeof h);
  CHECK(A.ctx->post_send_raw(*p.a, slot) == 0, "post raw");
  Cqe c{};
  CHECK(wait_cqe(A, &c) && c.wr_id == 1400 && c.status == 2 /* LOC_QP_OP_ERR */ &&
            c.qp_num == p.a->qpn,
        "bad opcode: wr_id %lu status %u qp %u", static_cast<unsigned long>(c.wr_id), c.status,
        c.qp_num);
  // The QP is in ERR now: the next (valid) WQE is flushed.
  CHECK(post(A, *p.a, 1401, kWrSend, 0, 64) == 0, "post after error");
  CHECK(wait_cqe(A, &c) && c.wr_id == 1401 && c.status == 5 /* WR_FLUSH_ERR */,
        "after error: wr_id %lu status %u", static_cast<unsigned long>(c.wr_id), c.status);

  // A second QP: an SGE with a foreign lkey, then one beyond its MR; then too many SGEs.
  Pair q = connect_pair(A, B, kRc);
  const Sge bad{A.mr.addr, 64, A.mr.lkey ^ 0x5a5a00};
  SendWr wr;
  wr.wr_id = 1402;
  wr.opcode = kWrWrite;
  wr.send_flags = kSignaled;
  wr.sg_list = &bad;
  wr.num_sge = 1;
  wr.remote_addr = B.mr.addr;
  wr.rkey = B.mr.rkey;
  CHECK(A.ctx->post_send(*q.a, wr) == 0, "post bad lkey");
  CHECK(wait_cqe(A, &c) && c.wr_id == 1402 && c.status == 4 /* LOC_PROT_ERR */,
        "bad lkey: wr_id %lu status %u", static_cast<unsigned long>(c.wr_id), c.status);
  Pair r = connect_pair(A, B, kRc);
  const Sge outside{A.mr.addr + kBufBytes - 16, 64, A.mr.lkey};
  wr.wr_id = 1403;
  wr.sg_list = &outside;
  CHECK(A.ctx->post_send(*r.a, wr) == 0, "post SGE beyond MR");
  CHECK(wait_cqe(A, &c) && c.wr_id == 1403 && c.status == 4,
        "SGE beyond the MR: wr_id %lu status %u", static_cast<unsigned long>(c.wr_id), c.status);
  Pair t = connect_pair(A, B, kRc);
  h = {};
  h.wr_id = 1404;
  h.opcode = kWrSend;
  h.send_flags = kSignaled;
  h.num_sge = 200;  // more than the 128-byte slot class holds
  std::memcpy(slot, &h, sizeof h);
  CHECK(A.ctx->post_send_raw(*t.a, slot) == 0, "post raw");
  CHECK(wait_cqe(A, &c) && c.wr_id == 1404 && c.status == 1 /* LOC_LEN_ERR */,
        "too many SGEs: wr_id %lu status %u", static_cast<unsigned long>(c.wr_id), c.status);
  for (Pair *x : {&p, &q, &r, &t}) {
    CHECK(A.ctx->destroy_qp(*x->a) == 0 && B.ctx->destroy_qp(*x->b) == 0, "destroy");
  }
  // Drain whatever B's QPs flushed (nothing was posted there) and check the good pair.
  while (B.ctx->poll_cq(*B.cq, &c, 1) == 1) {
  }
  while (A.ctx->poll_cq(*A.cq, &c, 1) == 1) {
  }
  test_rc_send(A, B, good);
  std::printf(
      "ok: corrupt WQEs (bad opcode, bad lkey, SGE beyond MR, too many SGEs) fail "
      "their QP only\n");
}

int run(const char *sa, const char *sb) {
  Side A, B;
  open_side(A, "A", sa);
  open_side(B, "B", sb);
  Pair p = connect_pair(A, B, kRc);
  std::printf("ok: RC QPs connected: A %u <-> B %u\n", p.a->qpn, p.b->qpn);
  test_rc_send(A, B, p);
  test_rc_write(A, B, p);
  test_rc_read(A, B, p);
  test_atomics(A, B, p);
  test_ud(A, B);
  test_uc(A, B);
  test_events(A, B, p);
  test_corrupt(A, B, p);
  CHECK(A.ctx->destroy_qp(*p.a) == 0 && B.ctx->destroy_qp(*p.b) == 0, "destroy RC QPs");
  CHECK(A.ctx->dereg_mr(A.mr) == 0 && B.ctx->dereg_mr(B.mr) == 0, "dereg_mr");
  CHECK(A.ctx->destroy_cq(*A.cq) == 0 && B.ctx->destroy_cq(*B.cq) == 0, "destroy_cq");
  CHECK(A.ctx->dealloc_pd(A.pd) == 0 && B.ctx->dealloc_pd(B.pd) == 0, "dealloc_pd");
  std::printf("%d failure(s)\n", g_fails);
  return g_fails ? 1 : 0;
}

int hold(const char *sa, const char *sb) {
  Side A, B;
  open_side(A, "victim-A", sa);
  open_side(B, "victim-B", sb);
  Pair p = connect_pair(A, B, kRc);
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  for (uint64_t i = 1;; ++i) {
    REQUIRE(post(A, *p.a, i, kWrWrite, 0, 500000, B.mr.addr, B.mr.rkey) == 0, "post");
    Cqe c{};
    REQUIRE(wait_cqe(A, &c) && c.status == 0, "WRITE %lu did not complete",
            static_cast<unsigned long>(i));
    if (i == 1) std::printf("transferring (qp %u -> %u)\n", p.a->qpn, p.b->qpn);
  }
}

}  // namespace

int main(int argc, char **argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc == 4 && std::strcmp(argv[1], "run") == 0) return run(argv[2], argv[3]);
  if (argc == 4 && std::strcmp(argv[1], "hold") == 0) return hold(argv[2], argv[3]);
  std::fprintf(stderr, "usage: verbs_app run|hold SOCK_A SOCK_B\n");
  return 2;
}
