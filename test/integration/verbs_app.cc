// SPDX-License-Identifier: BSD-3-Clause
// The integration tests' app: talks to two uroced instances through lib/client and checks that
// verbs operations between them work end to end (test/integration/uroced_pair.sh runs it).
//
//   verbs_app run SOCK_A SOCK_B    one context on each daemon (A requester, B responder):
//                                  RC SEND (1 and many packets), RC WRITE (data checked),
//                                  WRITE_WITH_IMM, READ, FETCH_ADD / CMP_SWP, UD SEND, UC
//                                  WRITE, completion events, SRQ, query_qp, corrupt WQEs (bad
//                                  opcode, bad lkey, too many SGEs) fail only their own QP.
//   verbs_app fuzz SOCK_A SOCK_B SEED ROUNDS   random (mostly malformed) WQEs: exactly one
//                                  completion each, no byte outside the MRs changes.
//   verbs_app responder SOCK DIR / verbs_app requester SOCK DIR   two processes, one app on
//                                  each daemon, meeting through files in DIR: RC WRITE
//                                  100000 B, READ 40000 B, SEND 3000 B, data checked by both.
//   verbs_app hold SOCK_A SOCK_B   an RC pair, then RDMA WRITEs forever (the script SIGKILLs it
//                                  and checks the daemons freed everything); prints
//                                  "transferring" after the first completed WRITE.
//   verbs_app bulk SOCK_A SOCK_B N_64K N_1M [DIR]   one RC pair; RC WRITE, READ and SEND of
//                                  N_64K 64 KiB and N_1M 1 MiB messages each (8 / 2 in flight),
//                                  every message a distinct pattern checked where it lands
//                                  (B for WRITE / SEND, A for READ). Then prints the QPNs and,
//                                  with DIR, creates DIR/done and waits (up to 60 s) for
//                                  DIR/release before destroying the QPs (the loss test reads
//                                  their counters with uroce-stat meanwhile).
//   verbs_app stream SOCK_A SOCK_B DIR   one RC pair, "QPN_A QPN_B" in DIR/qpns, then 64 KiB
//                                  WRITEs (8 in flight, each checked in B) until DIR/stop
//                                  exists; then "QPN_A QPN_B MESSAGES" in DIR/done, and waits
//                                  (up to 60 s) for DIR/release before destroying the QPs.
//   verbs_app victim SOCK_A SOCK_B DIR   the attacker test's legitimate app (uroced_attack.sh):
//                                  one RC pair (random initial PSN), writes "QPN_A QPN_B" to
//                                  DIR/qpns, then rounds until DIR/stop (at most 600 s): WRITE
//                                  8 x 64 KiB of a new pattern into B, READ 8 x 64 KiB back,
//                                  and check every word of both 1 MiB MRs against what the
//                                  app itself wrote (a word may hold the round's or the last
//                                  round's value, nothing else). A failed completion ends the
//                                  rounds: its status must be an IBTA error, and the MRs are
//                                  checked once more. Prints "victim: N rounds, status S",
//                                  writes it to DIR/result, destroys the QPs at DIR/stop.
//   verbs_app resolve SOCK SGID_INDEX DGID ok|unreachable   modify_qp to RTR towards DGID
//                                  (an IPv4 address is taken as its IPv4-mapped GID) and
//                                  create_ah for it must both succeed, or both fail with
//                                  EHOSTUNREACH; prints the time each took.
// Every wait is bounded (a generous 30 s: two busy-polling daemons share two cores with us).
// UROCE_TEST_ACK_TIMEOUT=N sets the RC local ACK timeout exponent (default 14, 67 ms).
// Exit 0 when every check passed; each failure prints "FAIL: ...".
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "transport/verbs_types.h"
#include "util/csprng.h"

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
// ibv_qp_attr_mask values: kQpState, kQpAccessFlags, ... (transport/verbs_types.h)
using enum uroce::transport::QpAttrMask;
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

void open_side(Side &s, const char *name, const char *sock, size_t buf_bytes = kBufBytes) {
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
  REQUIRE(Buffer::create(buf_bytes, &s.buf) == 0, "%s: buffer", name);
  rc = s.ctx->reg_mr(s.pd, s.buf, 0, buf_bytes,
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

std::unique_ptr<Qp> make_qp(Side &s, uint32_t type, uint32_t srq = 0) {
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
  a.srq = srq;
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
  uint32_t mask = kQpState | kQpPkeyIndex | kQpPort;
  if (type == kUd) {
    a.qkey = 0x11111111;
    mask |= kQpQkey;
  } else {
    a.qp_access_flags = kRemoteWrite | kRemoteRead | kRemoteAtomic;
    mask |= kQpAccessFlags;
  }
  const int rc = s.ctx->modify_qp(q, a, mask);
  REQUIRE(rc == 0, "%s: modify_qp INIT: %s", s.name, std::strerror(rc));
}

// The RC local ACK timeout exponent (4.096 us << timeout): 14 (67 ms), or UROCE_TEST_ACK_TIMEOUT
// (1-30) from the environment; a test on a loaded machine raises it so that a daemon starved
// of CPU for a while does not exhaust retry_cnt (seven timeouts without progress).
uint8_t default_ack_timeout() {
  const char *e = std::getenv("UROCE_TEST_ACK_TIMEOUT");
  const long v = e != nullptr ? std::strtol(e, nullptr, 10) : 0;
  return v >= 1 && v <= 30 ? static_cast<uint8_t>(v) : 14;
}

// The initial PSN of every connection (both directions); `victim` draws a random one.
uint32_t g_psn = 0x100;

// timeout: the RC local ACK timeout exponent (4.096 us << timeout).
void to_rtr_rts(Side &s, Qp &q, uint32_t type, const Side &peer, uint32_t peer_qpn,
                uint8_t timeout = default_ack_timeout()) {
  uroce::ctl::QpAttrPayload a{};
  a.qp_state = 2;
  uint32_t mask = kQpState;
  if (type != kUd) {
    a.path_mtu = 3;  // 1024
    a.dest_qp_num = peer_qpn;
    a.rq_psn = g_psn;
    std::memcpy(a.ah_attr.dgid, peer.gid, 16);
    a.ah_attr.sgid_index = kGidIndex;
    a.ah_attr.is_global = 1;
    a.ah_attr.hop_limit = 64;
    a.ah_attr.port_num = 1;
    mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    if (type == kRc) {
      a.max_dest_rd_atomic = 16;
      a.min_rnr_timer = 1;
      mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
    }
  }
  int rc = s.ctx->modify_qp(q, a, mask);
  REQUIRE(rc == 0, "%s: modify_qp RTR: %s", s.name, std::strerror(rc));
  a = {};
  a.qp_state = 3;
  a.sq_psn = g_psn;
  mask = kQpState | kQpSqPsn;
  if (type == kRc) {
    a.timeout = timeout;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  }
  rc = s.ctx->modify_qp(q, a, mask);
  REQUIRE(rc == 0, "%s: modify_qp RTS: %s", s.name, std::strerror(rc));
}

struct Pair {
  std::unique_ptr<Qp> a, b;
};

Pair connect_pair(Side &A, Side &B, uint32_t type, uint32_t b_srq = 0,
                  uint8_t timeout = default_ack_timeout()) {
  Pair p;
  p.a = make_qp(A, type);
  p.b = make_qp(B, type, b_srq);
  to_init(A, *p.a, type);
  to_init(B, *p.b, type);
  to_rtr_rts(A, *p.a, type, B, p.b->qpn, timeout);
  to_rtr_rts(B, *p.b, type, A, p.a->qpn, timeout);
  return p;
}

void fill(uint8_t *p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i)
    p[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
}

// UD and UC drop a message that finds no receive WQE (no RNR NAK as in RC). The receiver's
// engine reads its RQ ring in place (transport::RingQueues): a receive WQE is there for the
// responder as soon as post_recv published it, so there is nothing to wait for (before, the
// daemon copied WQEs into the engine's own queue, and the sender had to wait until every
// posted receive was taken: the ring's `taken` index, which now moves only when a message
// arrives).
void wait_rq_taken(Qp &) {}

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

void test_srq_and_query(Side &A, Side &B) {
  uroce::ctl::CreateSrqPayload sa{B.pd, 64, 1, 2};  // srq_limit 2: event below 2 WQEs
  std::unique_ptr<uroce::client::Srq> srq;
  int rc = B.ctx->create_srq(sa, &srq);
  REQUIRE(rc == 0, "create_srq: %s", std::strerror(rc));
  Pair p = connect_pair(A, B, kRc, srq->handle);
  uroce::ctl::QueryQpReply qr{};
  rc = B.ctx->query_qp(*p.b, &qr);
  CHECK(rc == 0 && qr.attr.qp_state == 3 && qr.attr.dest_qp_num == p.a->qpn &&
            qr.init.srq == srq->handle && qr.attr.ah_attr.sgid_index == kGidIndex &&
            std::memcmp(qr.attr.ah_attr.dgid, A.gid, 16) == 0,
        "query_qp: rc %d state %u dest %u srq %u sgid_index %u", rc, qr.attr.qp_state,
        qr.attr.dest_qp_num, qr.init.srq, qr.attr.ah_attr.sgid_index);
  for (uint32_t i = 0; i < 3; ++i) {
    const Sge sge{B.mr.addr + 0xe0000 + i * 4096, 4096, B.mr.lkey};
    RecvWr wr;
    wr.wr_id = 1500 + i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    CHECK(B.ctx->post_srq_recv(*srq, wr) == 0, "post_srq_recv");
  }
  for (uint32_t i = 0; i < 3; ++i) {
    fill(A.buf.data() + 0x70000 + i * 4096, 1000 + i, 40 + i);
    CHECK(post(A, *p.a, 1510 + i, kWrSend, 0x70000 + i * 4096, 1000 + i) == 0, "post SEND");
  }
  for (uint32_t i = 0; i < 3; ++i) {
    expect_cqe(A, 1510 + i, 0, kWcSend, "SEND to an SRQ QP (requester)");
    Cqe c{};
    expect_cqe(B, 1500 + i, 0, kWcRecv, "SEND to an SRQ QP (responder)", &c);
    CHECK(c.byte_len == 1000 + i && c.qp_num == p.b->qpn &&
              std::memcmp(B.buf.data() + 0xe0000 + i * 4096, A.buf.data() + 0x70000 + i * 4096,
                          1000 + i) == 0,
          "SRQ receive %u: byte_len %u qp %u / data", i, c.byte_len, c.qp_num);
  }
  // The SRQ went from 3 WQEs to 0: IBV_EVENT_SRQ_LIMIT_REACHED (15), once, for this SRQ.
  CHECK(B.ctx->wait_async_event(kWaitMs) == 1, "no async event within %d ms", kWaitMs);
  std::vector<uroce::ctl::AsyncEventEntry> ev;
  uint32_t lost = 1;
  rc = B.ctx->get_async_events(&ev, &lost);
  CHECK(rc == 0 && ev.size() == 1 && ev[0].event_type == 15 && ev[0].handle == srq->handle &&
            lost == 0,
        "async events: rc %d, %zu event(s), first type %u handle %u, lost %u", rc, ev.size(),
        ev.empty() ? 0u : ev[0].event_type, ev.empty() ? 0u : ev[0].handle, lost);
  CHECK(A.ctx->get_async_events(&ev) == 0 && ev.empty(), "A got %zu async event(s)", ev.size());
  CHECK(A.ctx->destroy_qp(*p.a) == 0 && B.ctx->destroy_qp(*p.b) == 0, "destroy SRQ QPs");
  CHECK(B.ctx->destroy_srq(*srq) == 0, "destroy_srq");
  std::printf("ok: query_qp; RC SEND into an SRQ (3 messages, data checked); SRQ limit event\n");
}

// Errors that belong to no QP's send queue are reported as async events: a malformed SRQ WQE
// (IBV_EVENT_SRQ_ERR, 14) and a CQ ring whose consumer index the app broke (CQ_ERR, 0).
void test_async_errors(Side &A, Side &B) {
  uroce::ctl::CreateSrqPayload sa{B.pd, 16, 1, 0};
  std::unique_ptr<uroce::client::Srq> srq;
  int rc = B.ctx->create_srq(sa, &srq);
  REQUIRE(rc == 0, "create_srq: %s", std::strerror(rc));
  REQUIRE(srq->ring.reserve(1) == 1, "srq ring");
  uroce::abi::RecvWqeHeader bad{4242, 200, 0};  // 200 SGEs in a 64-byte slot
  std::memcpy(srq->ring.slot(0), &bad, sizeof bad);
  srq->ring.commit(1);
  const Sge sge{B.mr.addr, 64, B.mr.lkey};
  RecvWr wr;
  wr.wr_id = 4243;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  CHECK(B.ctx->post_srq_recv(*srq, wr) == 0, "post_srq_recv");  // rings the doorbell
  // The responder reads an SRQ's ring when a message needs a WQE (the engine's queue is the
  // ring, as rxe's): a SEND to a QP on the SRQ finds the bad WQE (SRQ_ERR) and lands in the
  // next one.
  {
    Pair p = connect_pair(A, B, kRc, srq->handle);
    CHECK(post(A, *p.a, 4244, kWrSend, 0, 64) == 0, "post SEND to the SRQ QP");
    expect_cqe(A, 4244, 0, kWcSend, "SEND to the SRQ QP (requester)");
    expect_cqe(B, 4243, 0, kWcRecv, "SEND to the SRQ QP (the WQE after the bad one)");
    std::vector<uroce::ctl::AsyncEventEntry> ev;
    CHECK(B.ctx->wait_async_event(kWaitMs) == 1, "no SRQ error event within %d ms", kWaitMs);
    CHECK(B.ctx->get_async_events(&ev) == 0 && ev.size() == 1 && ev[0].event_type == 14 &&
              ev[0].handle == srq->handle,
          "SRQ error event: %zu event(s), type %u handle %u", ev.size(),
          ev.empty() ? 0u : ev[0].event_type, ev.empty() ? 0u : ev[0].handle);
    CHECK(A.ctx->destroy_qp(*p.a) == 0 && B.ctx->destroy_qp(*p.b) == 0, "destroy SRQ QPs");
  }
  CHECK(B.ctx->destroy_srq(*srq) == 0, "destroy_srq");
  std::vector<uroce::ctl::AsyncEventEntry> ev;

  std::unique_ptr<Cq> cq2;
  REQUIRE(A.ctx->create_cq(16, &cq2) == 0, "create_cq");
  uroce::ctl::CreateQpPayload qa{};
  qa.pd = A.pd;
  qa.qp_type = kRc;
  qa.send_cq = cq2->handle;
  qa.recv_cq = cq2->handle;
  qa.max_send_wr = 8;
  qa.max_recv_wr = 8;
  qa.max_send_sge = 1;
  qa.max_recv_sge = 1;
  std::unique_ptr<Qp> a2;
  REQUIRE(A.ctx->create_qp(qa, &a2) == 0, "create_qp on cq2");
  auto b2 = make_qp(B, kRc);
  to_init(A, *a2, kRc);
  to_init(B, *b2, kRc);
  to_rtr_rts(A, *a2, kRc, B, b2->qpn);
  to_rtr_rts(B, *b2, kRc, A, a2->qpn);
  // The app "consumes" far beyond what the daemon produced.
  std::atomic_ref<uint64_t>(cq2->ring.header()->cons).store(1000000, std::memory_order_release);
  CHECK(post_recv(B, *b2, 4300, 0x10000, 4096) == 0, "post_recv");
  CHECK(post(A, *a2, 4301, kWrSend, 0, 64) == 0, "post SEND");
  CHECK(A.ctx->wait_async_event(kWaitMs) == 1, "no CQ error event within %d ms", kWaitMs);
  CHECK(A.ctx->get_async_events(&ev) == 0 && !ev.empty() && ev[0].event_type == 0 &&
            ev[0].handle == cq2->handle,
        "CQ error event: %zu event(s), type %u handle %u", ev.size(),
        ev.empty() ? 99u : ev[0].event_type, ev.empty() ? 0u : ev[0].handle);
  expect_cqe(B, 4300, 0, kWcRecv, "SEND whose sender's CQ is broken (responder)");
  CHECK(A.ctx->destroy_qp(*a2) == 0 && B.ctx->destroy_qp(*b2) == 0, "destroy");
  CHECK(A.ctx->destroy_cq(*cq2) == 0, "destroy_cq");

  // An SQ whose producer index the app moved more than a ring ahead: no WQE to complete, so
  // the QP goes to ERR and the app gets QP_FATAL (1) naming it; its peer and A's other QPs are
  // untouched.
  auto a3 = make_qp(A, kRc);
  auto b3 = make_qp(B, kRc);
  to_init(A, *a3, kRc);
  to_init(B, *b3, kRc);
  to_rtr_rts(A, *a3, kRc, B, b3->qpn);
  to_rtr_rts(B, *b3, kRc, A, a3->qpn);
  std::atomic_ref<uint64_t>(a3->sq.header()->prod)
      .store(3 * uint64_t{a3->sq.capacity()}, std::memory_order_release);
  bool rung = false;
  for (int i = 0; i < 1000 && !rung; ++i) {
    // Into the ring of a3's worker (any other ring refuses it: doc/ipc.md, Doorbells).
    rung =
        A.ctx->doorbell_ring_for_test(uroce::abi::doorbell_ring(a3->qpn, A.ctx->doorbell_rings()))
            .try_push(uroce::abi::Doorbell{a3->qpn, uroce::abi::kDoorbellSq}) ==
        uroce::shm::RingError::kOk;
    if (!rung) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(rung, "doorbell for the broken SQ");
  CHECK(A.ctx->wait_async_event(kWaitMs) == 1, "no QP_FATAL event within %d ms", kWaitMs);
  CHECK(A.ctx->get_async_events(&ev) == 0 && ev.size() == 1 && ev[0].event_type == 1 &&
            ev[0].handle == a3->qpn,
        "QP_FATAL event: %zu event(s), type %u handle %u (QP %u)", ev.size(),
        ev.empty() ? 99u : ev[0].event_type, ev.empty() ? 0u : ev[0].handle, a3->qpn);
  uroce::ctl::QueryQpReply q3{};
  CHECK(A.ctx->query_qp(*a3, &q3) == 0 && q3.attr.qp_state == 6, "broken SQ: QP state %u, want ERR",
        q3.attr.qp_state);
  CHECK(B.ctx->query_qp(*b3, &q3) == 0 && q3.attr.qp_state == 3, "its peer: state %u, want RTS",
        q3.attr.qp_state);
  CHECK(A.ctx->destroy_qp(*a3) == 0 && B.ctx->destroy_qp(*b3) == 0, "destroy");
  std::printf(
      "ok: async events: SRQ_ERR for a malformed SRQ WQE, CQ_ERR for a broken CQ ring, QP_FATAL "
      "for a broken SQ index\n");
}

// A context whose doorbell ring's producer index the app moved more than a ring ahead: the
// daemon can no longer hear its doorbells, so that context alone gets IBV_EVENT_DEVICE_FATAL
// (8), once; A's context on the same daemon keeps working (the tests after this one).
void test_broken_doorbell_ring(const char *sock, Side &A) {
  std::unique_ptr<Context> x;
  int rc = Context::open(sock, "broken-db", &x);
  REQUIRE(rc == 0, "open a third context: %s", std::strerror(rc));
  uroce::shm::RingProducer &db = x->doorbell_ring_for_test();
  std::atomic_ref<uint64_t>(db.header()->prod)
      .store(db.index() + 3 * db.capacity(), std::memory_order_release);
  CHECK(x->wait_async_event(kWaitMs) == 1, "no DEVICE_FATAL event within %d ms", kWaitMs);
  std::vector<uroce::ctl::AsyncEventEntry> ev;
  CHECK(x->get_async_events(&ev) == 0 && ev.size() == 1 && ev[0].event_type == 8,
        "DEVICE_FATAL event: %zu event(s), type %u", ev.size(),
        ev.empty() ? 99u : ev[0].event_type);
  CHECK(x->wait_async_event(100) == 0, "a second event for the same broken ring");
  CHECK(A.ctx->get_async_events(&ev) == 0 && ev.empty(), "A got %zu event(s) too", ev.size());
  std::printf("ok: DEVICE_FATAL for a broken doorbell ring, to its context only\n");
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

// Random WQEs (valid and invalid fields mixed, seeded) on fresh RC pairs: every WQE completes
// exactly once (all are posted signaled; invalid ones with an error, later ones of a failed QP
// flushed), nothing outside the registered ranges changes (canaries around the MRs on both
// sides), both daemons keep serving, and a good pair works afterwards.
struct Lcg {
  uint64_t x;
  uint32_t next() {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(x >> 33);
  }
  uint32_t below(uint32_t n) { return n ? next() % n : 0; }
};

int fuzz(const char *sa, const char *sb, uint64_t seed, int rounds) {
  Side A, B;
  open_side(A, "A", sa);
  open_side(B, "B", sb);
  // Second MRs covering only the middle of the buffers: [kLo, kHi). Canaries everywhere else.
  constexpr size_t kLo = 0x40000, kHi = 0xc0000;
  Mr ma, mb;
  REQUIRE(A.ctx->reg_mr(A.pd, A.buf, kLo, kHi - kLo, 15, &ma) == 0, "reg_mr A");
  REQUIRE(B.ctx->reg_mr(B.pd, B.buf, kLo, kHi - kLo, 15, &mb) == 0, "reg_mr B");
  REQUIRE(A.ctx->dereg_mr(A.mr) == 0 && B.ctx->dereg_mr(B.mr) == 0, "dereg full MRs");
  std::memset(A.buf.data(), 0xa5, kBufBytes);
  std::memset(B.buf.data(), 0x5a, kBufBytes);
  Lcg rng{seed};
  std::printf("fuzz seed %lu, %d rounds\n", static_cast<unsigned long>(seed), rounds);
  uint64_t posted = 0, completed = 0, errors = 0;
  uint32_t odds = 6;  // a field is malformed with probability 1/odds (per round, below)
  auto bad = [&]() { return rng.below(odds) == 0; };
  auto addr_in = [&](const Mr &m, uint32_t len) -> uint64_t {
    if (!bad()) return m.addr + rng.below(static_cast<uint32_t>(m.length - len)) / 8 * 8;
    switch (rng.below(4)) {
      case 0:
        return m.addr + m.length - rng.below(64);  // runs past the end
      case 1:
        return m.addr - 1 - rng.below(4096);  // before the start
      case 2:
        return (uint64_t{rng.next()} << 32) | rng.next();  // anywhere
      default:
        return m.addr + rng.below(static_cast<uint32_t>(m.length - len));  // unaligned
    }
  };
  for (int round = 0; round < rounds; ++round) {
    odds = round % 3 == 0 ? 6 : 300;  // some rounds mostly malformed, others mostly valid
    Pair p = connect_pair(A, B, kRc);
    // Receives on B (more than the SENDs of a round, or RNR retries would never end).
    for (int i = 0; i < 40; ++i) {
      Sge sg[3];
      const uint32_t n = 1 + rng.below(3);
      for (uint32_t j = 0; j < n; ++j) {
        const uint32_t len = rng.below(8192);
        sg[j] = {addr_in(mb, len), len, bad() ? rng.next() : mb.lkey};
      }
      RecvWr wr;
      wr.wr_id = 0x90000 + i;
      wr.sg_list = sg;
      wr.num_sge = n;
      CHECK(B.ctx->post_recv(*p.b, wr) == 0, "fuzz post_recv");
    }
    const int nw = 16 + static_cast<int>(rng.below(16));
    for (int i = 0; i < nw; ++i) {
      alignas(64) uint8_t slot[128];
      for (auto &b : slot)
        b = static_cast<uint8_t>(rng.next());
      uroce::abi::SendWqeHeader h{};
      h.wr_id = (static_cast<uint64_t>(round) << 32) | static_cast<uint32_t>(i);
      h.opcode = bad() ? static_cast<uint8_t>(rng.next()) : static_cast<uint8_t>(rng.below(7));
      const bool atomic = h.opcode == kWrCmpSwp || h.opcode == kWrFetchAdd;
      const bool may_inline = h.opcode <= kWrSendImm;  // WRITE(_IMM), SEND(_IMM)
      h.send_flags =
          kSignaled | (bad() ? rng.next() : (may_inline && !rng.below(4) ? kInline : 0u));
      h.reserved = bad() ? 1 : 0;
      const uint32_t len = rng.below(6000);
      if (h.send_flags & kInline) {
        h.inline_len = static_cast<uint16_t>(bad() ? rng.below(70000) : rng.below(65));
      } else {
        h.num_sge = bad() ? rng.next() : atomic ? 1 : rng.below(5);
        const uint32_t n = h.num_sge < 4 ? h.num_sge : 4;
        for (uint32_t j = 0; j < n; ++j) {
          const uint32_t l = atomic ? 8 : len / (n + 1);
          const Sge sg{addr_in(ma, l), l, bad() ? rng.next() : ma.lkey};
          std::memcpy(slot + sizeof h + j * sizeof sg, &sg, sizeof sg);
        }
      }
      h.remote_addr = addr_in(mb, len);
      h.rkey = bad() ? rng.next() : mb.rkey;
      h.compare_add = rng.next();
      h.swap = rng.next();
      std::memcpy(slot, &h, sizeof h);
      if (A.ctx->post_send_raw(*p.a, slot) == 0) ++posted;
    }
    // Every WQE completes exactly once (bounded wait per completion).
    Cqe c{};
    for (int i = 0; i < nw; ++i) {
      if (!wait_cqe(A, &c)) {
        CHECK(false, "fuzz round %d: %d of %d completions", round, i, nw);
        break;
      }
      CHECK((c.wr_id >> 32) == static_cast<uint64_t>(round), "fuzz: completion of another round");
      ++completed;
      if (c.status) ++errors;
    }
    CHECK(A.ctx->destroy_qp(*p.a) == 0 && B.ctx->destroy_qp(*p.b) == 0, "fuzz destroy");
    while (B.ctx->poll_cq(*B.cq, &c, 1) == 1) {
    }
    CHECK(A.ctx->poll_cq(*A.cq, &c, 1) == 0, "fuzz: extra completion wr_id %lu",
          static_cast<unsigned long>(c.wr_id));
  }
  for (size_t i = 0; i < kBufBytes; ++i) {
    if (i == kLo) i = kHi;
    if (A.buf.data()[i] != 0xa5 || B.buf.data()[i] != 0x5a) {
      CHECK(false, "byte %zu outside the MRs changed (A %02x B %02x)", i, A.buf.data()[i],
            B.buf.data()[i]);
      break;
    }
  }
  std::printf("fuzz: %lu WQEs posted, %lu completions (%lu errors), canaries intact: %s\n",
              static_cast<unsigned long>(posted), static_cast<unsigned long>(completed),
              static_cast<unsigned long>(errors), g_fails ? "no" : "yes");
  CHECK(posted == completed, "posted %lu, completed %lu", static_cast<unsigned long>(posted),
        static_cast<unsigned long>(completed));
  // Full-buffer MRs again, and a good pair still works.
  REQUIRE(A.ctx->reg_mr(A.pd, A.buf, 0, kBufBytes, 15, &A.mr) == 0, "reg_mr");
  REQUIRE(B.ctx->reg_mr(B.pd, B.buf, 0, kBufBytes, 15, &B.mr) == 0, "reg_mr");
  Pair good = connect_pair(A, B, kRc);
  test_rc_send(A, B, good);
  std::printf("%d failure(s)\n", g_fails);
  return g_fails ? 1 : 0;
}

// ---- two processes: a requester app on one daemon, a responder app on the other ----
// They exchange (QPN, GID, MR address, rkey) through files in DIR (written to a temporary
// name, then renamed), and the responder says "ready" once its QP is in RTS.
struct PeerInfo {
  uint32_t qpn = 0;
  uint8_t gid[16] = {};
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

void publish(const std::string &dir, const char *name, const Side &s, const Qp &q) {
  const std::string tmp = dir + "/" + name + ".tmp", fin = dir + "/" + name;
  FILE *f = std::fopen(tmp.c_str(), "w");
  REQUIRE(f != nullptr, "cannot write %s", tmp.c_str());
  std::fprintf(f, "%u %lu %u", q.qpn, static_cast<unsigned long>(s.mr.addr), s.mr.rkey);
  for (uint8_t b : s.gid)
    std::fprintf(f, " %u", b);
  std::fprintf(f, "\n");
  std::fclose(f);
  REQUIRE(std::rename(tmp.c_str(), fin.c_str()) == 0, "rename %s", fin.c_str());
}

bool wait_file(const std::string &path) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(2 * kWaitMs);
  while (access(path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

PeerInfo read_peer(const std::string &dir, const char *name) {
  const std::string path = dir + "/" + name;
  REQUIRE(wait_file(path), "no %s within %d ms", path.c_str(), 2 * kWaitMs);
  FILE *f = std::fopen(path.c_str(), "r");
  REQUIRE(f != nullptr, "cannot read %s", path.c_str());
  PeerInfo p;
  unsigned long addr = 0;
  int n = std::fscanf(f, "%u %lu %u", &p.qpn, &addr, &p.rkey);
  for (int i = 0; i < 16 && n >= 3; ++i) {
    unsigned b = 0;
    n += std::fscanf(f, "%u", &b) == 1 ? 0 : -100;
    p.gid[i] = static_cast<uint8_t>(b);
  }
  std::fclose(f);
  REQUIRE(n == 3, "malformed %s", path.c_str());
  p.addr = addr;
  return p;
}

constexpr uint32_t kXWrite = 100000, kXRead = 40000, kXSend = 3000;

int responder(const char *sock, const std::string &dir) {
  Side B;
  open_side(B, "responder", sock);
  auto q = make_qp(B, kRc);
  to_init(B, *q, kRc);
  fill(B.buf.data() + 0x80000, kXRead, 77);  // what the requester READs
  std::memset(B.buf.data() + 0x40000, 0, kXWrite);
  CHECK(post_recv(B, *q, 1, 0x10000, 8192) == 0, "post_recv");
  publish(dir, "responder.info", B, *q);
  const PeerInfo peer = read_peer(dir, "requester.info");
  Side P;
  std::memcpy(P.gid, peer.gid, 16);
  to_rtr_rts(B, *q, kRc, P, peer.qpn);
  FILE *f = std::fopen((dir + "/responder.ready").c_str(), "w");
  REQUIRE(f != nullptr, "ready file");
  std::fclose(f);
  // The SEND comes after the WRITE on the same RC QP: when it is received, the WRITE is placed.
  Cqe c{};
  expect_cqe(B, 1, 0, kWcRecv, "SEND from the other app", &c);
  std::vector<uint8_t> want(kXWrite);
  fill(want.data(), kXSend, 78);
  CHECK(c.byte_len == kXSend && std::memcmp(B.buf.data() + 0x10000, want.data(), kXSend) == 0,
        "SEND from the other app: byte_len %u / data", c.byte_len);
  fill(want.data(), kXWrite, 79);
  CHECK(std::memcmp(B.buf.data() + 0x40000, want.data(), kXWrite) == 0,
        "WRITE from the other app: data differs");
  CHECK(B.ctx->destroy_qp(*q) == 0, "destroy_qp");
  std::printf("responder: %d failure(s)\n", g_fails);
  return g_fails ? 1 : 0;
}

int requester(const char *sock, const std::string &dir) {
  Side A;
  open_side(A, "requester", sock);
  auto q = make_qp(A, kRc);
  to_init(A, *q, kRc);
  publish(dir, "requester.info", A, *q);
  const PeerInfo peer = read_peer(dir, "responder.info");
  Side P;
  std::memcpy(P.gid, peer.gid, 16);
  to_rtr_rts(A, *q, kRc, P, peer.qpn);
  REQUIRE(wait_file(dir + "/responder.ready"), "responder not ready");
  fill(A.buf.data() + 0x20000, kXWrite, 79);
  CHECK(post(A, *q, 1, kWrWrite, 0x20000, kXWrite, peer.addr + 0x40000, peer.rkey) == 0, "WRITE");
  expect_cqe(A, 1, 0, kWcWrite, "WRITE to the other app");
  std::memset(A.buf.data() + 0x60000, 0, kXRead);
  CHECK(post(A, *q, 2, kWrRead, 0x60000, kXRead, peer.addr + 0x80000, peer.rkey) == 0, "READ");
  expect_cqe(A, 2, 0, kWcRead, "READ from the other app");
  std::vector<uint8_t> want(kXRead);
  fill(want.data(), kXRead, 77);
  CHECK(std::memcmp(A.buf.data() + 0x60000, want.data(), kXRead) == 0, "READ data differs");
  fill(A.buf.data(), kXSend, 78);
  CHECK(post(A, *q, 3, kWrSend, 0, kXSend) == 0, "SEND");
  expect_cqe(A, 3, 0, kWcSend, "SEND to the other app");
  CHECK(A.ctx->destroy_qp(*q) == 0, "destroy_qp");
  std::printf("requester: %d failure(s)\n", g_fails);
  return g_fails ? 1 : 0;
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
  test_srq_and_query(A, B);
  test_async_errors(A, B);
  test_broken_doorbell_ring(sa, A);
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

// QP placement over worker lcores (doc/uroced.md, Threading), on one daemon with no other QP:
// two QPs on two CQs go to different workers when there are two (QPN bits 16..23 name the
// owner), a QP on an already-bound CQ follows it, and a QP whose send and receive CQs are bound
// to different workers is accepted (on its send CQ's worker; doc/ipc.md "A CQ has one
// producer"). Then the two QPs are
// connected to each other through the daemon's own port (same-port loopback): RC SEND one way
// and RDMA WRITE the other, data checked; with two workers every frame crosses lcores. Last, an
// SRQ bound to the second QP's worker gets its limit armed by modify_srq (SRQ_LIMIT_REACHED).
int placement(const char *sock, int workers) {
  Side S;
  open_side(S, "S", sock);
  std::unique_ptr<Cq> cq2;
  REQUIRE(S.ctx->create_cq(1024, &cq2) == 0, "create_cq 2");
  auto q1 = make_qp(S, kRc);
  uroce::ctl::CreateQpPayload a{};
  a.pd = S.pd;
  a.qp_type = kRc;
  a.send_cq = cq2->handle;
  a.recv_cq = cq2->handle;
  a.max_send_wr = 64;
  a.max_recv_wr = 64;
  a.max_send_sge = 4;
  a.max_recv_sge = 3;
  std::unique_ptr<Qp> q2;
  REQUIRE(S.ctx->create_qp(a, &q2) == 0, "create_qp on cq2");
  const uint32_t w1 = q1->qpn >> 16, w2 = q2->qpn >> 16;
  if (workers == 2)
    CHECK(w1 != w2 && w1 < 2 && w2 < 2, "QPs %u and %u on workers %u and %u: expected both",
          q1->qpn, q2->qpn, w1, w2);
  else
    CHECK(w1 == 0 && w2 == 0, "one worker: QPs %u and %u", q1->qpn, q2->qpn);
  auto q4 = make_qp(S, kRc);  // on the CQ q1 bound
  CHECK((q4->qpn >> 16) == w1, "QP %u on q1's CQ is on worker %u, not %u", q4->qpn, q4->qpn >> 16,
        w1);
  a.send_cq = S.cq->handle;  // bound to w1's worker; recv CQ bound to w2's
  std::unique_ptr<Qp> q3;
  const int rc = S.ctx->create_qp(a, &q3);
  CHECK(rc == 0, "QP over two CQs (%d worker(s)): %s", workers, std::strerror(rc));
  if (q3) {
    CHECK((q3->qpn >> 16) == w1, "QP %u over split CQs on worker %u, expected its send CQ's %u",
          q3->qpn, q3->qpn >> 16, w1);
    CHECK(S.ctx->destroy_qp(*q3) == 0, "destroy q3");
  }
  CHECK(S.ctx->destroy_qp(*q4) == 0, "destroy q4");
  std::printf("ok: placement: QPs %u (worker %u) and %u (worker %u)%s\n", q1->qpn, w1, q2->qpn, w2,
              workers == 2 ? ", split CQs accepted" : "");

  to_init(S, *q1, kRc);
  to_init(S, *q2, kRc);
  to_rtr_rts(S, *q1, kRc, S, q2->qpn);
  to_rtr_rts(S, *q2, kRc, S, q1->qpn);
  auto poll2 = [&](Cqe *c) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
    while (std::chrono::steady_clock::now() < end) {
      if (S.ctx->poll_cq(*cq2, c, 1) == 1) return true;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return false;
  };
  constexpr uint32_t kLen = 20000;  // 20 packets at path MTU 1024
  fill(S.buf.data(), kLen, 77);
  std::memset(S.buf.data() + 0x40000, 0, kLen);
  CHECK(post_recv(S, *q2, 11, 0x40000, kLen) == 0, "post_recv q2");
  CHECK(post(S, *q1, 12, kWrSend, 0, kLen) == 0, "post SEND q1");
  expect_cqe(S, 12, 0, kWcSend, "loopback SEND (requester)");
  Cqe c{};
  CHECK(poll2(&c) && c.wr_id == 11 && c.status == 0 && c.opcode == kWcRecv && c.byte_len == kLen,
        "loopback SEND (responder): wr_id %lu status %u opcode %u len %u",
        static_cast<unsigned long>(c.wr_id), c.status, c.opcode, c.byte_len);
  CHECK(std::memcmp(S.buf.data() + 0x40000, S.buf.data(), kLen) == 0, "loopback SEND data");
  fill(S.buf.data() + 0x80000, kLen, 78);
  std::memset(S.buf.data() + 0xc0000, 0, kLen);
  CHECK(post(S, *q2, 13, kWrWrite, 0x80000, kLen, S.mr.addr + 0xc0000, S.mr.rkey) == 0,
        "post WRITE q2");
  c = Cqe{};
  CHECK(poll2(&c) && c.wr_id == 13 && c.status == 0, "loopback WRITE: wr_id %lu status %u",
        static_cast<unsigned long>(c.wr_id), c.status);
  CHECK(std::memcmp(S.buf.data() + 0xc0000, S.buf.data() + 0x80000, kLen) == 0,
        "loopback WRITE data");
  std::printf("ok: RC SEND and WRITE between QPs %u and %u over the same port (data checked)\n",
              q1->qpn, q2->qpn);

  // An SRQ whose limit is armed after creation (modify_srq, kModifySrq) and which is bound to
  // w2's worker (its first QP is on cq2): the arming must reach that worker's engine (the SRQ
  // exists in every engine), or SRQ_LIMIT_REACHED never comes.
  uroce::ctl::CreateSrqPayload sp{S.pd, 16, 1, 0};
  std::unique_ptr<uroce::client::Srq> srq;
  REQUIRE(S.ctx->create_srq(sp, &srq) == 0, "create_srq");
  a.send_cq = cq2->handle;
  a.srq = srq->handle;
  std::unique_ptr<Qp> q5;
  REQUIRE(S.ctx->create_qp(a, &q5) == 0, "create_qp on cq2 with the SRQ");
  CHECK((q5->qpn >> 16) == w2, "SRQ QP %u on worker %u, expected cq2's %u", q5->qpn, q5->qpn >> 16,
        w2);
  auto q6 = make_qp(S, kRc);
  to_init(S, *q5, kRc);
  to_init(S, *q6, kRc);
  to_rtr_rts(S, *q5, kRc, S, q6->qpn);
  to_rtr_rts(S, *q6, kRc, S, q5->qpn);
  for (uint32_t i = 0; i < 3; ++i) {
    const Sge sge{S.mr.addr + 0xe0000 + i * 4096, 4096, S.mr.lkey};
    RecvWr wr;
    wr.wr_id = 20 + i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    CHECK(S.ctx->post_srq_recv(*srq, wr) == 0, "post_srq_recv");
  }
  CHECK(S.ctx->modify_srq(*srq, 1u << 20) == EINVAL, "modify_srq above the SRQ's depth: EINVAL");
  CHECK(S.ctx->modify_srq(*srq, 2) == 0, "modify_srq limit 2");
  for (uint32_t i = 0; i < 2; ++i) {  // 3 -> 1 WQEs: below the limit
    CHECK(post(S, *q6, 30 + i, kWrSend, 0, 64) == 0, "post SEND q6");
    expect_cqe(S, 30 + i, 0, kWcSend, "SEND to the SRQ QP (requester)");
    c = Cqe{};
    CHECK(poll2(&c) && c.wr_id == 20 + i && c.status == 0 && c.opcode == kWcRecv,
          "SRQ receive %u: wr_id %lu status %u", i, static_cast<unsigned long>(c.wr_id), c.status);
  }
  std::vector<uroce::ctl::AsyncEventEntry> ev;
  CHECK(S.ctx->wait_async_event(kWaitMs) == 1, "no async event within %d ms", kWaitMs);
  CHECK(S.ctx->get_async_events(&ev) == 0 && ev.size() == 1 && ev[0].event_type == 15 &&
            ev[0].handle == srq->handle,
        "SRQ limit armed by modify_srq: %zu event(s), type %u handle %u", ev.size(),
        ev.empty() ? 0u : ev[0].event_type, ev.empty() ? 0u : ev[0].handle);
  std::printf("ok: modify_srq arms the limit of an SRQ on worker %u: SRQ_LIMIT_REACHED\n", w2);
  CHECK(S.ctx->destroy_qp(*q5) == 0 && S.ctx->destroy_qp(*q6) == 0, "destroy SRQ QPs");
  CHECK(S.ctx->destroy_srq(*srq) == 0, "destroy_srq");

  // A CQ stays on the worker of its first QP: cq3 is bound to w2 by q7 (whose receive CQ is
  // cq2) and completes a SEND there; once q7 is gone, a QP q8 on cq3 and on S.cq (bound to w1 by
  // q1) is accepted and placed on w2 (cq3's), and its receive completions reach S.cq through
  // the forward ring of S.cq on w2 (with two workers), in order with q8's SENDs on cq3.
  std::unique_ptr<Cq> cq3;
  REQUIRE(S.ctx->create_cq(64, &cq3) == 0, "create_cq 3");
  auto poll_on = [&](Cq &cq, Cqe *out) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
    while (std::chrono::steady_clock::now() < end) {
      if (S.ctx->poll_cq(cq, out, 1) == 1) return true;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return false;
  };
  auto send_on_cq3 = [&](Qp &from, Qp &to, uint64_t wr, const char *what) {
    to_init(S, from, kRc);
    to_init(S, to, kRc);
    to_rtr_rts(S, from, kRc, S, to.qpn);
    to_rtr_rts(S, to, kRc, S, from.qpn);
    CHECK(post_recv(S, to, wr + 1, 0x40000, 64) == 0, "%s: post_recv", what);
    CHECK(post(S, from, wr, kWrSend, 0, 64) == 0, "%s: post SEND", what);
    Cqe sc{};
    CHECK(poll_on(*cq3, &sc) && sc.wr_id == wr && sc.status == 0 && sc.opcode == kWcSend,
          "%s: SEND completion on cq3: wr_id %lu status %u", what,
          static_cast<unsigned long>(sc.wr_id), sc.status);
    expect_cqe(S, wr + 1, 0, kWcRecv, what);
  };
  a.send_cq = cq3->handle;
  a.recv_cq = cq2->handle;
  a.srq = 0;
  std::unique_ptr<Qp> q7;
  REQUIRE(S.ctx->create_qp(a, &q7) == 0, "create_qp on cq3 + cq2");
  CHECK((q7->qpn >> 16) == w2, "QP %u on cq3 + cq2 on worker %u, expected cq2's %u", q7->qpn,
        q7->qpn >> 16, w2);
  auto q10 = make_qp(S, kRc);
  send_on_cq3(*q7, *q10, 40, "cq3 on its first worker");
  CHECK(S.ctx->destroy_qp(*q7) == 0 && S.ctx->destroy_qp(*q10) == 0, "destroy q7, q10");
  a.recv_cq = S.cq->handle;  // bound to w1 (q1)
  std::unique_ptr<Qp> q8;
  const int rc8 = S.ctx->create_qp(a, &q8);
  CHECK(rc8 == 0, "QP on cq3 (its QPs gone) + S.cq: %s", std::strerror(rc8));
  if (q8) {
    CHECK((q8->qpn >> 16) == w2, "QP %u on cq3 + S.cq on worker %u, expected cq3's %u", q8->qpn,
          q8->qpn >> 16, w2);
    auto q11 = make_qp(S, kRc);
    send_on_cq3(*q8, *q11, 42, "cq3 again");
    // q11 -> q8: q8's receive completions go to S.cq, owned by w1.
    for (uint64_t i = 0; i < 3; ++i) {
      CHECK(post_recv(S, *q8, 50 + i, 0x40000 + 4096 * i, 64) == 0, "q8 post_recv");
      CHECK(post(S, *q11, 60 + i, kWrSend, 0, 64) == 0, "q11 post SEND");
      // Both on S.cq, in either order (q8's comes from the other worker's forward ring).
      bool sent = false, got = false;
      for (int k = 0; k < 2; ++k) {
        Cqe x{};
        CHECK(poll_on(*S.cq, &x), "S.cq: completion %d of SEND %lu q11 -> q8", k,
              static_cast<unsigned long>(60 + i));
        if (x.wr_id == 60 + i && x.status == 0 && x.opcode == kWcSend) sent = true;
        if (x.wr_id == 50 + i && x.status == 0 && x.opcode == kWcRecv && x.qp_num == q8->qpn &&
            x.byte_len == 64)
          got = true;
      }
      CHECK(sent && got, "SEND q11 -> q8 %lu: send completion %d, q8's receive on S.cq %d",
            static_cast<unsigned long>(60 + i), sent, got);
    }
    CHECK(S.ctx->destroy_qp(*q8) == 0 && S.ctx->destroy_qp(*q11) == 0, "destroy q8, q11");
  }
  CHECK(S.ctx->destroy_cq(*cq3) == 0, "destroy cq3");
  if (rc8 == 0)
    std::printf("ok: cq3 stays on worker %u; q8's receives reach S.cq (worker %u)\n", w2, w1);

  CHECK(S.ctx->destroy_qp(*q1) == 0 && S.ctx->destroy_qp(*q2) == 0, "destroy QPs");
  CHECK(S.ctx->destroy_cq(*cq2) == 0, "destroy cq2");
  std::printf("%d failure(s)\n", g_fails);
  return g_fails ? 1 : 0;
}

// ---- bulk transfers: many multi-packet messages on one RC pair (the loss test) ----
// Every 8-byte word of message m holds a hash of (m, word index): a message that lands in the
// wrong place, twice, partly, or not at all (the slot still holds message m - 8) shows.
uint64_t pattern_word(uint64_t seed, uint64_t k) {
  uint64_t z = (seed << 32 ^ k) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
void fill_pattern(uint8_t *p, size_t n, uint64_t seed) {
  for (size_t k = 0; k < n / 8; ++k) {
    const uint64_t w = pattern_word(seed, k);
    std::memcpy(p + 8 * k, &w, 8);
  }
}
// Returns the offset of the first wrong word, or n when all are right.
size_t check_pattern(const uint8_t *p, size_t n, uint64_t seed) {
  for (size_t k = 0; k < n / 8; ++k) {
    uint64_t w;
    std::memcpy(&w, p + 8 * k, 8);
    if (w != pattern_word(seed, k)) return 8 * k;
  }
  return n;
}

constexpr size_t kBulkBuf = 8u << 20;  // eight 1 MiB slots per side
constexpr int kBulkWaitMs = 60'000;    // one message, lossy path, two busy daemons

// Runs `n` messages of `len` bytes of one kind (kWrWrite, kWrRead or kWrSend) A -> B with up
// to `depth` in flight, checking each where it lands. With `stop`, runs until that file exists
// (then lets the messages in flight complete); *sent gets the number of messages. Returns
// false on the first failure.
bool bulk_run(Side &A, Side &B, Pair &p, uint8_t op, uint32_t len, uint32_t n, uint32_t tag,
              const std::string *stop = nullptr, uint32_t *sent = nullptr) {
  if (stop != nullptr) n = UINT32_MAX;
  // Up to 8 messages and 2 MiB in flight: a loss makes go-back-N resend what was in flight
  // after it, so a larger window mostly adds retransmissions (and capture volume).
  const uint32_t depth =
      static_cast<uint32_t>(std::max<size_t>(1, std::min<size_t>(8, (2u << 20) / len)));
  const char *what = op == kWrWrite ? "WRITE" : op == kWrRead ? "READ" : "SEND";
  auto seed = [&](uint32_t i) { return (uint64_t{tag} << 24) | i; };
  auto slot = [&](uint32_t i) { return uint64_t{i % depth} * len; };
  const auto t0 = std::chrono::steady_clock::now();
  uint32_t posted = 0, done = 0;
  while (done < n) {
    while (posted < n && posted - done < depth) {
      const uint64_t off = slot(posted);
      int rc;
      if (op == kWrRead) {  // B holds what A reads
        fill_pattern(B.buf.data() + off, len, seed(posted));
        rc = post(A, *p.a, posted, kWrRead, off, len, B.mr.addr + off, B.mr.rkey);
      } else {
        fill_pattern(A.buf.data() + off, len, seed(posted));
        if (op == kWrSend) {
          rc = post_recv(B, *p.b, posted, off, len);
          if (rc) {
            CHECK(false, "bulk %s: post_recv %u: %s", what, posted, std::strerror(rc));
            return false;
          }
        }
        rc = post(A, *p.a, posted, op, off, len, B.mr.addr + off, B.mr.rkey);
      }
      if (rc) {
        CHECK(false, "bulk %s: post %u: %s", what, posted, std::strerror(rc));
        return false;
      }
      ++posted;
    }
    Cqe c{};
    if (!wait_cqe(A, &c, kBulkWaitMs)) {
      CHECK(false, "bulk %s %u B: no completion for message %u within %d ms", what, len, done,
            kBulkWaitMs);
      return false;
    }
    const uint32_t want_op = op == kWrWrite ? kWcWrite : op == kWrRead ? kWcRead : kWcSend;
    if (c.status != 0 || c.wr_id != done || c.opcode != want_op) {
      CHECK(false, "bulk %s %u B: completion wr_id %lu status %u opcode %u, expected %u 0 %u", what,
            len, static_cast<unsigned long>(c.wr_id), c.status, c.opcode, done, want_op);
      return false;
    }
    const uint8_t *landed = (op == kWrRead ? A.buf.data() : B.buf.data()) + slot(done);
    if (op == kWrSend) {
      Cqe r{};
      if (!wait_cqe(B, &r, kBulkWaitMs) || r.status != 0 || r.wr_id != done || r.byte_len != len) {
        CHECK(false,
              "bulk SEND %u B: receive completion wr_id %lu status %u byte_len %u "
              "(expected %u 0 %u)",
              len, static_cast<unsigned long>(r.wr_id), r.status, r.byte_len, done, len);
        return false;
      }
    }
    const size_t bad = check_pattern(landed, len, seed(done));
    if (bad != len) {
      CHECK(false, "bulk %s %u B: message %u differs at byte %zu (on %s)", what, len, done, bad,
            op == kWrRead ? "A" : "B");
      return false;
    }
    ++done;
    if (stop != nullptr && n == UINT32_MAX && access(stop->c_str(), F_OK) == 0) n = posted;
  }
  if (sent != nullptr) *sent = n;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("ok: RC %s %u x %u B, every message checked (%.2f s, %.1f MB/s)\n", what, n, len, s,
              n * static_cast<double>(len) / 1e6 / (s > 0 ? s : 1));
  return true;
}

int bulk(const char *sa, const char *sb, uint32_t n64k, uint32_t n1m, const char *dir) {
  Side A, B;
  open_side(A, "A", sa, kBulkBuf);
  open_side(B, "B", sb, kBulkBuf);
  // Local ACK timeout 268 ms (16): seven retries ride out ~1.9 s without progress, e.g. a
  // daemon starved of CPU on a loaded two-core machine while its RX ring overflows.
  Pair p = connect_pair(A, B, kRc, 0, 16);
  std::printf("ok: RC QPs connected: A %u <-> B %u\n", p.a->qpn, p.b->qpn);
  uint32_t tag = 1;
  for (uint8_t op : {kWrWrite, kWrRead, kWrSend}) {
    if (!bulk_run(A, B, p, op, 64 << 10, n64k, tag++)) break;
    if (!bulk_run(A, B, p, op, 1 << 20, n1m, tag++)) break;
  }
  std::printf("transfers done: A qp %u, B qp %u\n", p.a->qpn, p.b->qpn);
  if (dir != nullptr) {
    const std::string d = dir;
    FILE *f = std::fopen((d + "/done").c_str(), "w");
    REQUIRE(f != nullptr, "cannot create %s/done", dir);
    std::fprintf(f, "%u %u\n", p.a->qpn, p.b->qpn);
    std::fclose(f);
    CHECK(wait_file(d + "/release"), "no %s/release within %d ms", dir, 2 * kWaitMs);
  }
  CHECK(A.ctx->destroy_qp(*p.a) == 0 && B.ctx->destroy_qp(*p.b) == 0, "destroy RC QPs");
  std::printf("%d failure(s)\n", g_fails);
  return g_fails ? 1 : 0;
}

// ---- a steady load: 64 KiB WRITEs on one RC pair until DIR/stop (the ECN fairness test) ----
int stream(const char *sa, const char *sb, const char *dir) {
  Side A, B;
  open_side(A, "A", sa, kBulkBuf);
  open_side(B, "B", sb, kBulkBuf);
  Pair p = connect_pair(A, B, kRc, 0, 16);  // ACK timeout 268 ms, as bulk
  const std::string d = dir;
  FILE *f = std::fopen((d + "/qpns").c_str(), "w");
  REQUIRE(f != nullptr, "cannot create %s/qpns", dir);
  std::fprintf(f, "%u %u\n", p.a->qpn, p.b->qpn);
  std::fclose(f);
  std::printf("ok: RC QPs connected: A %u <-> B %u\n", p.a->qpn, p.b->qpn);
  const std::string stop = d + "/stop";
  uint32_t sent = 0;
  bulk_run(A, B, p, kWrWrite, 64 << 10, 0, 1, &stop, &sent);
  f = std::fopen((d + "/done").c_str(), "w");
  REQUIRE(f != nullptr, "cannot create %s/done", dir);
  std::fprintf(f, "%u %u %u\n", p.a->qpn, p.b->qpn, sent);
  std::fclose(f);
  CHECK(wait_file(d + "/release"), "no %s/release within %d ms", dir, 2 * kWaitMs);
  CHECK(A.ctx->destroy_qp(*p.a) == 0 && B.ctx->destroy_qp(*p.b) == 0, "destroy RC QPs");
  std::printf("%d failure(s)\n", g_fails);
  return g_fails ? 1 : 0;
}

// ---- neighbour resolution by the daemon (modify_qp to RTR, create_ah) ----
int resolve(const char *sock, uint32_t sgid_index, const char *dest, bool expect_ok) {
  Side S;
  open_side(S, "app", sock, 1 << 16);
  uroce::ctl::AhAttrPayload ah{};
  in_addr v4{};
  if (inet_pton(AF_INET, dest, &v4) == 1) {
    ah.dgid[10] = ah.dgid[11] = 0xff;
    std::memcpy(ah.dgid + 12, &v4, 4);
  } else {
    REQUIRE(inet_pton(AF_INET6, dest, ah.dgid) == 1, "not an IPv4 or IPv6 address: %s", dest);
  }
  ah.sgid_index = static_cast<uint8_t>(sgid_index);
  ah.is_global = 1;
  ah.hop_limit = 64;
  ah.port_num = 1;
  const int want = expect_ok ? 0 : EHOSTUNREACH;
  auto q = make_qp(S, kRc);
  to_init(S, *q, kRc);
  uroce::ctl::QpAttrPayload a{};
  a.qp_state = 2;
  a.path_mtu = 3;
  a.dest_qp_num = 0x123;
  a.rq_psn = 1;
  a.ah_attr = ah;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  auto t0 = std::chrono::steady_clock::now();
  int rc = S.ctx->modify_qp(
      *q, a,
      kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer);
  auto ms = [&] {
    return static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count());
  };
  const long rtr_ms = ms();
  CHECK(rc == want, "modify_qp RTR towards %s: %s (%d), expected %s", dest, std::strerror(rc), rc,
        want ? std::strerror(want) : "success");
  std::printf("modify_qp RTR towards %s (sgid %u): %s after %ld ms\n", dest, sgid_index,
              rc ? std::strerror(rc) : "ok", rtr_ms);
  t0 = std::chrono::steady_clock::now();
  uint32_t ahh = 0;
  rc = S.ctx->create_ah(S.pd, ah, &ahh);
  const long ah_ms = ms();
  CHECK(rc == want, "create_ah for %s: %s (%d), expected %s", dest, std::strerror(rc), rc,
        want ? std::strerror(want) : "success");
  std::printf("create_ah for %s: %s after %ld ms\n", dest, rc ? std::strerror(rc) : "ok", ah_ms);
  if (rc == 0) CHECK(S.ctx->destroy_ah(ahh) == 0, "destroy_ah");
  CHECK(S.ctx->destroy_qp(*q) == 0, "destroy_qp");
  std::printf("%d failure(s)\n", g_fails);
  return g_fails ? 1 : 0;
}

}  // namespace

// ---- the attacker test's legitimate app (uroced_attack.sh) ----
// The IBTA completion statuses an attack may legitimately end a connection with.
bool ibta_error(uint32_t st) {
  switch (st) {
    case 5:   // WR_FLUSH_ERR
    case 7:   // BAD_RESP_ERR
    case 9:   // REM_INV_REQ_ERR
    case 10:  // REM_ACCESS_ERR
    case 11:  // REM_OP_ERR
    case 12:  // RETRY_EXC_ERR
    case 13:  // RNR_RETRY_EXC_ERR
      return true;
    default:
      return false;
  }
}

// Counts the words of p[0, n) that are neither pattern_word(s1, k) nor (s0 == ~0: zero /
// otherwise pattern_word(s0, k)); prints the first.
size_t foreign_words(const char *what, const uint8_t *p, size_t n, uint64_t s1, uint64_t s0) {
  size_t bad = 0;
  for (size_t k = 0; k < n / 8; ++k) {
    uint64_t w;
    std::memcpy(&w, p + 8 * k, 8);
    const uint64_t old = s0 == ~uint64_t{0} ? 0 : pattern_word(s0, k);
    if (w == pattern_word(s1, k) || w == old) continue;
    if (bad++ == 0)
      std::printf("FAIL: %s: word %zu = %016llx: neither %016llx nor %016llx\n", what, k,
                  static_cast<unsigned long long>(w),
                  static_cast<unsigned long long>(pattern_word(s1, k)),
                  static_cast<unsigned long long>(old));
  }
  return bad;
}

int victim(const char *sa, const char *sb, const char *dir) {
  constexpr size_t kHalf = 512 << 10, kMsg = 64 << 10, kMsgs = kHalf / kMsg;
  constexpr uint64_t kReadSeed = 0xB0B, kZero = ~uint64_t{0};
  Side A, B;
  open_side(A, "A", sa, 2 * kHalf);
  open_side(B, "B", sb, 2 * kHalf);
  g_psn = uroce::util::Csprng().next_u32() & 0xffffff;
  Pair p = connect_pair(A, B, kRc, 0, 14);  // ACK timeout 67 ms: an error shows within ~4 s
  fill_pattern(B.buf.data() + kHalf, kHalf, kReadSeed);
  const std::string d = dir;
  if (FILE *f = std::fopen((d + "/qpns").c_str(), "w")) {
    std::fprintf(f, "%u %u\n", p.a->qpn, p.b->qpn);
    std::fclose(f);
  }
  std::printf("victim: RC A %u <-> B %u, initial PSN %06x\n", p.a->qpn, p.b->qpn, g_psn);
  const auto t_end = std::chrono::steady_clock::now() + std::chrono::seconds(600);
  uint32_t rounds = 0, status = 0;
  size_t foreign = 0;
  uint64_t prev = kZero;  // what B's WRITE half held before this round
  while (status == 0 && access((d + "/stop").c_str(), F_OK) != 0 &&
         std::chrono::steady_clock::now() < t_end) {
    const uint64_t seed = 0x1000 + rounds;
    fill_pattern(A.buf.data(), kHalf, seed);
    std::memset(A.buf.data() + kHalf, 0, kHalf);
    // One WR at a time (WRITEs, then READs): a failure leaves every WR before it complete and
    // none after it started.
    for (size_t i = 0; i < 2 * kMsgs && status == 0; ++i) {
      const bool rd = i >= kMsgs;
      const uint64_t off = (i % kMsgs) * kMsg;
      const int rc =
          rd ? post(A, *p.a, i, kWrRead, kHalf + off, kMsg, B.mr.addr + kHalf + off, B.mr.rkey)
             : post(A, *p.a, i, kWrWrite, off, kMsg, B.mr.addr + off, B.mr.rkey);
      if (rc) {
        CHECK(false, "victim: round %u: post %zu: %s", rounds, i, std::strerror(rc));
        status = ~0u;
        break;
      }
      Cqe c{};
      if (!wait_cqe(A, &c, kWaitMs)) {
        CHECK(false, "victim: round %u: no completion within %d ms", rounds, kWaitMs);
        status = ~0u;
        break;
      }
      status = c.status;
    }
    // B's WRITE half: this round's pattern, or (after a failure) word by word the last one.
    const bool ok = status == 0;
    foreign += foreign_words("B's MR (WRITE target)", B.buf.data(), kHalf, seed, ok ? seed : prev);
    foreign +=
        foreign_words("B's MR (READ source)", B.buf.data() + kHalf, kHalf, kReadSeed, kReadSeed);
    foreign += foreign_words("A's MR (WRITE source)", A.buf.data(), kHalf, seed, seed);
    foreign += foreign_words("A's MR (READ target)", A.buf.data() + kHalf, kHalf, kReadSeed,
                             ok ? kReadSeed : kZero);
    if (foreign) break;
    if (ok) {
      prev = seed;
      ++rounds;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // quiet gaps on the wire
    }
  }
  CHECK(foreign == 0, "victim: %zu words of the MRs differ from what the app wrote", foreign);
  CHECK(status == 0 || ibta_error(status), "victim: completion status %u is no IBTA error", status);
  CHECK(rounds > 0, "victim: no round completed");
  std::printf("victim: %u rounds, status %u, MRs checked word by word after each\n", rounds,
              status);
  if (FILE *f = std::fopen((d + "/result").c_str(), "w")) {
    std::fprintf(f, "%u %u\n", rounds, status);
    std::fclose(f);
  }
  // The QPs stay until DIR/stop (the script reads their state and counters meanwhile).
  CHECK(wait_file(d + "/stop"), "no %s/stop within %d ms", dir, 2 * kWaitMs);
  CHECK(A.ctx->destroy_qp(*p.a) == 0 && B.ctx->destroy_qp(*p.b) == 0, "destroy RC QPs");
  std::printf("%d failure(s)\n", g_fails);
  return g_fails ? 1 : 0;
}

int main(int argc, char **argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc == 4 && std::strcmp(argv[1], "run") == 0) return run(argv[2], argv[3]);
  if (argc == 4 && std::strcmp(argv[1], "hold") == 0) return hold(argv[2], argv[3]);
  if (argc == 4 && std::strcmp(argv[1], "responder") == 0) return responder(argv[2], argv[3]);
  if (argc == 4 && std::strcmp(argv[1], "requester") == 0) return requester(argv[2], argv[3]);
  if (argc == 4 && std::strcmp(argv[1], "placement") == 0)
    return placement(argv[2], std::atoi(argv[3]));
  if (argc == 5 && std::strcmp(argv[1], "victim") == 0) return victim(argv[2], argv[3], argv[4]);
  if ((argc == 6 || argc == 7) && std::strcmp(argv[1], "bulk") == 0)
    return bulk(argv[2], argv[3], static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 0)),
                static_cast<uint32_t>(std::strtoul(argv[5], nullptr, 0)),
                argc == 7 ? argv[6] : nullptr);
  if (argc == 5 && std::strcmp(argv[1], "stream") == 0) return stream(argv[2], argv[3], argv[4]);
  if (argc == 6 && std::strcmp(argv[1], "resolve") == 0 &&
      (std::strcmp(argv[5], "ok") == 0 || std::strcmp(argv[5], "unreachable") == 0))
    return resolve(argv[2], static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 0)), argv[4],
                   std::strcmp(argv[5], "ok") == 0);
  if (argc == 6 && std::strcmp(argv[1], "fuzz") == 0)
    return fuzz(argv[2], argv[3], std::strtoull(argv[4], nullptr, 0), std::atoi(argv[5]));
  std::fprintf(stderr,
               "usage: verbs_app run|hold SOCK_A SOCK_B | fuzz SOCK_A SOCK_B SEED ROUNDS |\n"
               "                 responder|requester SOCK DIR | placement SOCK WORKERS |\n"
               "                 bulk SOCK_A SOCK_B N_64K N_1M [DIR] | stream SOCK_A SOCK_B DIR |\n"
               "                 victim SOCK_A SOCK_B DIR |\n"
               "                 resolve SOCK SGID_INDEX DGID ok|unreachable\n");
  return 2;
}
