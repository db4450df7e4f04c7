// SPDX-License-Identifier: BSD-3-Clause
// rxe_peer: the host side of the interop suite (test/interop/interop.sh) until the verbs shim
// runs the real rdma-core tools over uroced. It is an app on lib/client that speaks the
// out-of-band protocol and the data exchange of rdma-core's ibv_rc_pingpong, ibv_uc_pingpong
// and ibv_ud_pingpong (written from their documented behaviour), so that the *unmodified* tools
// in a Linux Soft-RoCE (rxe) guest talk to uroced over the wire.
//
//   rxe_peer {rc,uc,ud}-{client,server} -S SOCK [-H HOST] [-p PORT] [-n ITERS] [-s SIZE]
//            [-m MTU] [-g GID_INDEX] [-P PSN] [-t SECONDS]
//
// Out of band (TCP, default port 18515): the client connects and writes a 52-byte message
// "LLLL:QQQQQQ:PPPPPP:GGGG...G" (hex LID, QPN, PSN, and the 16 GID bytes in order as 32 hex
// digits; a NUL ends it), the server answers with its own (after moving its QP to RTR / RTS)
// and the client writes "done" (5 bytes with the NUL).
// Data: the tools receive into the same buffer they send from, so a pingpong peer echoes what
// it last received. The client sends first. Receive k (counted from 1) must hold:
//   as client: what we sent as message k (the guest echoed it);
//   as server: the guest's initial buffer (every byte 0x7b) for k = 1, else our message k - 1.
// UD receives carry the 40-byte GRH area first (for IPv4: the IPv4 header in its last 20
// bytes; for IPv6: the IPv6 header): its source address must be the guest's (and for IPv6
// the destination ours), and src_qp the guest's QPN.
//
// Every wait is bounded (-t, default 120 s). Exit 0 when every check passed; each failure
// prints "FAIL: ...".
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
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
#include "transport/verbs_types.h"

using uroce::abi::Cqe;
using uroce::abi::Sge;
using uroce::client::Buffer;
using uroce::client::Context;
using uroce::client::Cq;
using uroce::client::Mr;
using uroce::client::Qp;
using uroce::client::RecvWr;
using uroce::client::SendWr;
using Clock = std::chrono::steady_clock;

namespace {

// ibv_* numeric values
enum : uint8_t { kWrSend = 2 };
enum : uint32_t { kSignaled = 2 };
enum : uint32_t { kWcSend = 0, kWcRecv = 128 };
enum : uint32_t { kWcGrh = 1 };
enum : uint32_t { kRc = 2, kUc = 3, kUd = 4 };
enum : uint32_t { kLocalWrite = 1 };
// ibv_qp_attr_mask values: kQpState, kQpAccessFlags, ... (transport/verbs_types.h)
using enum uroce::transport::QpAttrMask;
constexpr uint32_t kUdQkey = 0x11111111;  // what ibv_ud_pingpong uses
constexpr uint32_t kGrhBytes = 40;
constexpr uint32_t kRecvSlots = 16;  // receives kept posted
constexpr uint64_t kSendWrId = 1ull << 32;
constexpr uint8_t kGuestInitialByte = 0x7b;  // the tools memset their buffer to this
constexpr uint32_t kRetryCnt = 7;            // RC retransmissions before RETRY_EXC_ERR
// interop.sh sums the numbers after this phrase into the datagrams rxe may drop uncounted.
constexpr const char *kTailNoQpNote = "retransmitted datagrams that may have reached no QP:";
constexpr size_t kMsgLen = sizeof "0000:000000:000000:00000000000000000000000000000000";

int g_fails = 0;
#define FAIL(...)             \
  do {                        \
    std::printf("FAIL: ");    \
    std::printf(__VA_ARGS__); \
    std::printf("\n");        \
    std::fflush(stdout);      \
    ++g_fails;                \
  } while (0)
#define REQUIRE(cond, ...) \
  do {                     \
    if (!(cond)) {         \
      FAIL(__VA_ARGS__);   \
      std::exit(1);        \
    }                      \
  } while (0)

struct Options {
  std::string mode;
  std::string sock;
  std::string host;
  int port = 18515;
  uint32_t iters = 20;
  uint32_t size = 4096;
  uint32_t mtu = 1024;
  uint32_t gid_index = 1;
  uint32_t psn = 0xffffc0;  // close below 2^24: the PSN wraps during a run
  int timeout_s = 120;
};

struct Dest {
  uint32_t lid = 0, qpn = 0, psn = 0;
  uint8_t gid[16] = {};
};

uint8_t pattern(uint32_t msg, uint32_t i) {
  return static_cast<uint8_t>((i * 31u + msg * 17u + (i >> 7) + 1u) & 0xffu);
}

uint32_t mtu_enum(uint32_t bytes) {
  switch (bytes) {
    case 256:
      return 1;
    case 512:
      return 2;
    case 1024:
      return 3;
    case 2048:
      return 4;
    case 4096:
      return 5;
    default:
      return 0;
  }
}

// ---- the out-of-band exchange ----

void format_msg(const Dest &d, char out[kMsgLen]) {
  char gid[33];
  for (int i = 0; i < 16; ++i)
    std::snprintf(gid + 2 * i, 3, "%02x", d.gid[i]);
  std::memset(out, 0, kMsgLen);
  std::snprintf(out, kMsgLen, "%04x:%06x:%06x:%s", d.lid, d.qpn & 0xffffff, d.psn & 0xffffff, gid);
}

bool parse_msg(const char *msg, Dest *d) {
  char gid[33] = {};
  unsigned lid, qpn, psn;
  if (std::sscanf(msg, "%x:%x:%x:%32s", &lid, &qpn, &psn, gid) != 4 || std::strlen(gid) != 32)
    return false;
  d->lid = lid;
  d->qpn = qpn;
  d->psn = psn;
  for (int i = 0; i < 16; ++i) {
    char byte[3] = {gid[2 * i], gid[2 * i + 1], 0};
    char *end = nullptr;
    d->gid[i] = static_cast<uint8_t>(std::strtoul(byte, &end, 16));
    if (end != byte + 2) return false;
  }
  return true;
}

int ms_left(Clock::time_point end) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// Reads exactly len bytes (or up to len when `partial` and the peer closes) before `end`.
ssize_t read_full(int fd, char *buf, size_t len, Clock::time_point end, bool partial) {
  size_t got = 0;
  while (got < len) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, ms_left(end));
    if (r <= 0) return partial && got > 0 ? static_cast<ssize_t>(got) : -1;
    const ssize_t n = ::read(fd, buf + got, len - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return partial && got > 0 ? static_cast<ssize_t>(got) : -1;
    got += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

bool write_full(int fd, const char *buf, size_t len) {
  size_t done = 0;
  while (done < len) {
    const ssize_t n = ::write(fd, buf + done, len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Client: connect (retrying until the guest's server listens), send ours, read theirs, "done".
Dest client_exchange(const Options &o, const Dest &mine, Clock::time_point end) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(o.port));
  REQUIRE(inet_pton(AF_INET, o.host.c_str(), &sa.sin_addr) == 1, "bad host address '%s'",
          o.host.c_str());
  int fd = -1;
  for (;;) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0, "socket: %s", std::strerror(errno));
    if (::connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) == 0) break;
    const int err = errno;
    ::close(fd);
    REQUIRE(ms_left(end) > 0, "cannot connect to %s:%d: %s", o.host.c_str(), o.port,
            std::strerror(err));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  char msg[kMsgLen];
  format_msg(mine, msg);
  REQUIRE(write_full(fd, msg, kMsgLen), "write of our address failed");
  REQUIRE(read_full(fd, msg, kMsgLen, end, false) == static_cast<ssize_t>(kMsgLen),
          "no %zu-byte address message from the server", kMsgLen);
  REQUIRE(write_full(fd, "done", sizeof "done"), "write of 'done' failed");
  ::close(fd);
  Dest peer;
  REQUIRE(parse_msg(msg, &peer), "unparsable address message '%.*s'", int(kMsgLen), msg);
  return peer;
}

// Server: accept one connection, read the client's message; connect() moves the QP to RTR /
// RTS before our answer is written (the client sends as soon as it has our message).
template <typename ConnectFn>
Dest server_exchange(const Options &o, const Dest &mine, Clock::time_point end, ConnectFn connect) {
  const int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(ls >= 0, "socket: %s", std::strerror(errno));
  const int one = 1;
  ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(o.port));
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  REQUIRE(::bind(ls, reinterpret_cast<sockaddr *>(&sa), sizeof sa) == 0, "bind port %d: %s", o.port,
          std::strerror(errno));
  REQUIRE(::listen(ls, 1) == 0, "listen: %s", std::strerror(errno));
  std::printf("listening on TCP port %d\n", o.port);
  std::fflush(stdout);
  pollfd p{ls, POLLIN, 0};
  REQUIRE(::poll(&p, 1, ms_left(end)) == 1, "no connection on port %d in time", o.port);
  const int fd = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(ls);
  REQUIRE(fd >= 0, "accept: %s", std::strerror(errno));
  char msg[kMsgLen];
  REQUIRE(read_full(fd, msg, kMsgLen, end, false) == static_cast<ssize_t>(kMsgLen),
          "no %zu-byte address message from the client", kMsgLen);
  Dest peer;
  REQUIRE(parse_msg(msg, &peer), "unparsable address message '%.*s'", int(kMsgLen), msg);
  connect(peer);
  format_msg(mine, msg);
  REQUIRE(write_full(fd, msg, kMsgLen), "write of our address failed");
  char tail[kMsgLen];
  const ssize_t n = read_full(fd, tail, kMsgLen, end, true);
  REQUIRE(n >= static_cast<ssize_t>(sizeof "done") && std::memcmp(tail, "done", 5) == 0,
          "the client did not answer 'done' (%zd bytes)", n);
  ::close(fd);
  return peer;
}

// ---- the verbs side, on lib/client ----

struct Peer {
  Options o;
  uint32_t type = kRc;
  bool ud = false;
  bool client = false;
  std::unique_ptr<Context> ctx;
  uint32_t pd = 0;
  Buffer buf;
  Mr mr;
  std::unique_ptr<Cq> cq;
  std::unique_ptr<Qp> qp;
  uint32_t ah = 0;
  uint32_t slot_bytes = 0;  // one receive slot (UD: GRH area + payload)
  uint64_t send_off = 0;    // the send buffer, after the receive slots
  Dest mine, peer;
};

void post_recv_slot(Peer &p, uint32_t slot) {
  const Sge sge{p.mr.addr + uint64_t{slot} * p.slot_bytes, p.slot_bytes, p.mr.lkey};
  RecvWr wr;
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  const int rc = p.ctx->post_recv(*p.qp, wr);
  REQUIRE(rc == 0, "post_recv: %s", std::strerror(rc));
}

void post_send_msg(Peer &p, uint32_t msg) {
  uint8_t *b = p.buf.data() + p.send_off;
  for (uint32_t i = 0; i < p.o.size; ++i)
    b[i] = pattern(msg, i);
  const Sge sge{p.mr.addr + p.send_off, p.o.size, p.mr.lkey};
  SendWr wr;
  wr.wr_id = kSendWrId | msg;
  wr.opcode = kWrSend;
  wr.send_flags = kSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (p.ud) {
    wr.ah = p.ah;
    wr.remote_qpn = p.peer.qpn;
    wr.remote_qkey = kUdQkey;
  }
  const int rc = p.ctx->post_send(*p.qp, wr);
  REQUIRE(rc == 0, "post_send: %s", std::strerror(rc));
}

void setup(Peer &p) {
  int rc = Context::open(p.o.sock.c_str(), "rxe_peer", &p.ctx);
  REQUIRE(rc == 0, "open %s: %s", p.o.sock.c_str(), std::strerror(rc));
  uroce::ctl::PortAttrPayload pa{};
  REQUIRE(p.ctx->query_port(1, &pa) == 0, "query_port");
  REQUIRE(pa.state == 4, "port 1 is not ACTIVE (state %u)", pa.state);
  REQUIRE(p.ctx->query_gid(1, p.o.gid_index, p.mine.gid) == 0, "query_gid %u", p.o.gid_index);
  const uint32_t port_mtu = 128u << pa.active_mtu;
  std::printf("uroced port: active MTU %u, Ethernet MTU %u\n", port_mtu, pa.eth_mtu);
  if (p.ud)
    REQUIRE(p.o.size <= port_mtu, "UD message size %u above the port MTU %u", p.o.size, port_mtu);
  REQUIRE(p.ctx->alloc_pd(&p.pd) == 0, "alloc_pd");
  p.slot_bytes = p.o.size + (p.ud ? kGrhBytes : 0);
  p.send_off = uint64_t{kRecvSlots} * p.slot_bytes;
  const size_t total = p.send_off + p.o.size;
  rc = Buffer::create(total, &p.buf);
  REQUIRE(rc == 0, "buffer of %zu bytes: %s", total, std::strerror(rc));
  rc = p.ctx->reg_mr(p.pd, p.buf, 0, total, kLocalWrite, &p.mr);  // as the tools: local only
  REQUIRE(rc == 0, "reg_mr: %s", std::strerror(rc));
  rc = p.ctx->create_cq(2 * kRecvSlots + 8, &p.cq);
  REQUIRE(rc == 0, "create_cq: %s", std::strerror(rc));
  uroce::ctl::CreateQpPayload qa{};
  qa.pd = p.pd;
  qa.qp_type = p.type;
  qa.send_cq = p.cq->handle;
  qa.recv_cq = p.cq->handle;
  qa.max_send_wr = 4;
  qa.max_recv_wr = kRecvSlots;
  qa.max_send_sge = 1;
  qa.max_recv_sge = 1;
  rc = p.ctx->create_qp(qa, &p.qp);
  REQUIRE(rc == 0, "create_qp: %s", std::strerror(rc));
  uroce::ctl::QpAttrPayload a{};
  a.qp_state = 1;  // INIT
  a.pkey_index = 0;
  a.port_num = 1;
  uint32_t mask = kQpState | kQpPkeyIndex | kQpPort;
  if (p.ud) {
    a.qkey = kUdQkey;
    mask |= kQpQkey;
  } else {
    a.qp_access_flags = 0;  // as ibv_rc_pingpong / ibv_uc_pingpong
    mask |= kQpAccessFlags;
  }
  rc = p.ctx->modify_qp(*p.qp, a, mask);
  REQUIRE(rc == 0, "modify_qp INIT: %s", std::strerror(rc));
  for (uint32_t s = 0; s < kRecvSlots; ++s)
    post_recv_slot(p, s);
  p.mine.lid = 0;
  p.mine.qpn = p.qp->qpn;
  p.mine.psn = p.o.psn & 0xffffff;
}

// RTR and RTS with ibv_rc_pingpong's attributes (UC: without the RC-only ones, as
// ibv_uc_pingpong; UD: RTR, RTS and an AH, as ibv_ud_pingpong).
void connect_qp(Peer &p, const Dest &peer) {
  p.peer = peer;
  char g[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, peer.gid, g, sizeof g);
  std::printf("remote address: LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", peer.lid, peer.qpn,
              peer.psn, g);
  REQUIRE(std::memcmp(peer.gid + 8, "\0\0\0\0\0\0\0\0", 8) != 0,
          "the guest sent an all-zero interface id (run the tool with -g 1)");
  uroce::ctl::AhAttrPayload av{};
  std::memcpy(av.dgid, peer.gid, 16);
  av.sgid_index = static_cast<uint8_t>(p.o.gid_index);
  av.hop_limit = 1;  // what the tools set
  av.is_global = 1;
  av.port_num = 1;
  uroce::ctl::QpAttrPayload a{};
  a.qp_state = 2;  // RTR
  uint32_t mask = kQpState;
  if (!p.ud) {
    a.path_mtu = mtu_enum(p.o.mtu);
    a.dest_qp_num = peer.qpn;
    a.rq_psn = peer.psn;
    a.ah_attr = av;
    mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    if (p.type == kRc) {
      a.max_dest_rd_atomic = 1;
      a.min_rnr_timer = 12;
      mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
    }
  }
  int rc = p.ctx->modify_qp(*p.qp, a, mask);
  REQUIRE(rc == 0, "modify_qp RTR: %s", std::strerror(rc));
  a = {};
  a.qp_state = 3;  // RTS
  a.sq_psn = p.mine.psn;
  mask = kQpState | kQpSqPsn;
  if (p.type == kRc) {
    // ibv_rc_pingpong uses 14 (67 ms); the local ACK timeout is not on the wire, and 17
    // (0.54 s, 4.3 s over 7 retries) survives a TCG guest stalled by a loaded host.
    a.timeout = 17;
    a.retry_cnt = kRetryCnt;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  }
  rc = p.ctx->modify_qp(*p.qp, a, mask);
  REQUIRE(rc == 0, "modify_qp RTS: %s", std::strerror(rc));
  if (p.ud) {
    rc = p.ctx->create_ah(p.pd, av, &p.ah);
    REQUIRE(rc == 0, "create_ah: %s", std::strerror(rc));
  }
}

// Receive k (from 1) must hold what the echo protocol predicts (see the top of the file).
void check_recv(Peer &p, const Cqe &c, uint32_t k) {
  const uint32_t slot = static_cast<uint32_t>(c.wr_id);
  const uint32_t hdr = p.ud ? kGrhBytes : 0;
  if (c.byte_len != p.o.size + hdr) {
    FAIL("receive %u: byte_len %u, expected %u", k, c.byte_len, p.o.size + hdr);
    return;
  }
  const uint8_t *d = p.buf.data() + uint64_t{slot} * p.slot_bytes;
  if (p.ud) {
    if (!(c.wc_flags & kWcGrh)) FAIL("receive %u: no GRH flag (wc_flags 0x%x)", k, c.wc_flags);
    if (c.src_qp != p.peer.qpn)
      FAIL("receive %u: src_qp 0x%x, expected 0x%x", k, c.src_qp, p.peer.qpn);
    // RoCE v2 over IPv4: the IPv4 header sits in the last 20 bytes of the GRH area; over
    // IPv6 the GRH area is the IPv6 header (source at 8, destination at 24).
    const bool v4 = std::memcmp(p.peer.gid, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0;
    if (v4 && ((d[20] >> 4) != 4 || std::memcmp(d + 20 + 12, p.peer.gid + 12, 4) != 0))
      FAIL("receive %u: the GRH area does not hold the guest's IPv4 header", k);
    if (!v4 && ((d[0] >> 4) != 6 || std::memcmp(d + 8, p.peer.gid, 16) != 0 ||
                std::memcmp(d + 24, p.mine.gid, 16) != 0))
      FAIL("receive %u: the GRH area does not hold the IPv6 header from the guest's GID to ours",
           k);
    d += hdr;
  }
  const bool initial = !p.client && k == 1;
  const uint32_t msg = p.client ? k : k - 1;
  for (uint32_t i = 0; i < p.o.size; ++i) {
    const uint8_t want = initial ? kGuestInitialByte : pattern(msg, i);
    if (d[i] != want) {
      FAIL("receive %u: byte %u is 0x%02x, expected 0x%02x", k, i, d[i], want);
      return;
    }
  }
}

int run(Options o) {
  Peer p;
  p.o = o;
  p.type = o.mode.starts_with("ud-") ? kUd : o.mode.starts_with("uc-") ? kUc : kRc;
  p.ud = p.type == kUd;
  p.client = o.mode.ends_with("-client");
  const auto end = Clock::now() + std::chrono::seconds(o.timeout_s);
  setup(p);
  // The guest sends right after the exchange: our receives are in the engine by then, since
  // it reads them in place from the RQ ring (transport::RingQueues). (Before the ringq merge
  // this waited for the daemon to copy them out; the ring's `taken` index now moves only when
  // a receive is consumed, so that wait never ended.)
  char g[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, p.mine.gid, g, sizeof g);
  std::printf("local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", p.mine.lid,
              p.mine.qpn, p.mine.psn, g);
  std::fflush(stdout);
  if (p.client) {
    connect_qp(p, client_exchange(o, p.mine, end));
  } else {
    server_exchange(o, p.mine, end, [&](const Dest &d) { connect_qp(p, d); });
  }

  // ibv_*_pingpong's loop: the client sends first; a side sends again once its last send and
  // a receive have completed, until both counts reach ITERS.
  const auto t0 = Clock::now();
  uint32_t scnt = 0, rcnt = 0, pending = 1;  // bit 0: receive, bit 1: send
  if (p.client) {
    post_send_msg(p, 1);
    pending |= 2;
  }
  Cqe cqe[8];
  // RC under loss, the end of the exchange: the guest's tool exits once its own counts are
  // reached, taking its QP with it, so our retransmissions of the last message can reach no QP
  // (rxe drops them without a counter).
  //  - As client, the guest's echo of our last message (our last receive) proves its delivery:
  //    once every receive is in, wait for the last send's ACK kLastAckGraceMs (less than the
  //    0.54 s ACK timeout: nothing is resent before), then stop without it.
  //  - As server, nothing proves it: the lost frame may be our message's last packet, and the
  //    guest then waits for it. Wait for the ACK through every retransmission; RETRY_EXC_ERR on
  //    that last send means the guest had it and left (its tool exits 0 only with every
  //    message). Report how many retransmitted datagrams may have reached no QP, for the
  //    script's datagram count (kTailNoQpNote).
  constexpr int kLastAckGraceMs = 350;
  Clock::time_point last_post = Clock::now();
  bool last_unacked = false, tail_retry_exc = false;
  const auto last_send_open = [&] {
    return p.type == kRc && rcnt == o.iters && scnt + 1 == o.iters;
  };
  while (rcnt < o.iters || scnt < o.iters) {
    if (p.client && last_send_open() &&
        Clock::now() - last_post > std::chrono::milliseconds(kLastAckGraceMs)) {
      last_unacked = true;
      break;
    }
    const int n = p.ctx->poll_cq(*p.cq, cqe, 8);
    if (n == 0) {
      if (ms_left(end) == 0) {
        FAIL("%s: stuck after %u sends and %u receives (timeout %d s)", o.mode.c_str(), scnt, rcnt,
             o.timeout_s);
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      continue;
    }
    for (int i = 0; i < n; ++i) {
      const Cqe &c = cqe[i];
      if (c.status == static_cast<uint32_t>(uroce::transport::WcStatus::kRetryExcErr) &&
          !p.client && (c.wr_id & kSendWrId) && last_send_open()) {
        tail_retry_exc = true;
        break;
      }
      if (c.status != 0) {
        FAIL("completion wr_id 0x%lx status %u opcode %u vendor_err %u",
             static_cast<unsigned long>(c.wr_id), c.status, c.opcode, c.vendor_err);
        return 1;
      }
      if (c.wr_id & kSendWrId) {
        if (c.opcode != kWcSend) FAIL("send completion with opcode %u", c.opcode);
        ++scnt;
        pending &= ~2u;
        const auto ack_ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_post).count();
        if (p.type == kRc && scnt == o.iters && ack_ms > kLastAckGraceMs)
          std::printf("note: the last send's ACK came %lld ms after it (retransmitted)\n",
                      static_cast<long long>(ack_ms));
      } else {
        if (c.opcode != kWcRecv) FAIL("receive completion with opcode %u", c.opcode);
        if (c.qp_num != p.qp->qpn) FAIL("receive completion for qp 0x%x", c.qp_num);
        ++rcnt;
        check_recv(p, c, rcnt);
        post_recv_slot(p, static_cast<uint32_t>(c.wr_id));
        pending &= ~1u;
      }
      if (scnt < o.iters && pending == 0) {
        post_send_msg(p, scnt + 1);
        last_post = Clock::now();
        pending = 3;
      }
    }
    if (tail_retry_exc) break;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (last_unacked) {
    // Leave before the first retransmission (0.54 s after the last send); the engine has
    // acknowledged the guest's last message while we waited.
    std::printf("note: no ACK for the last send within %d ms (lost): not waited for\n",
                kLastAckGraceMs);
  } else if (tail_retry_exc) {
    const uint32_t pkts = (o.size + o.mtu - 1) / o.mtu;
    std::printf(
        "note: the last send ended in RETRY_EXC_ERR (its ACK lost, the guest gone): "
        "%s %u\n",
        kTailNoQpNote, kRetryCnt * pkts);
  } else {
    // Stay a moment so the engine acknowledges the guest's last message before the QP goes
    // away.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  std::printf("%s: %u iterations of %u bytes in %.2f s (%.0f us/iter), %d failure(s)\n",
              o.mode.c_str(), o.iters, o.size, secs, secs * 1e6 / o.iters, g_fails);
  return g_fails == 0 ? 0 : 1;
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: rxe_peer {rc,uc,ud}-{client,server} -S SOCK [-H HOST] [-p PORT] [-n "
               "ITERS] [-s SIZE] [-m MTU] [-g GID_INDEX] [-P PSN] [-t SECONDS]\n");
  std::exit(2);
}

uint32_t num(const char *s) {
  char *end = nullptr;
  errno = 0;
  const unsigned long v = std::strtoul(s, &end, 0);
  if (errno || end == s || *end || v > 0xffffffffUL) usage();
  return static_cast<uint32_t>(v);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) usage();
  Options o;
  o.mode = argv[1];
  if (o.mode != "rc-client" && o.mode != "rc-server" && o.mode != "uc-client" &&
      o.mode != "uc-server" && o.mode != "ud-client" && o.mode != "ud-server")
    usage();
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) usage();
    const std::string f = argv[i];
    const char *v = argv[i + 1];
    if (f == "-S")
      o.sock = v;
    else if (f == "-H")
      o.host = v;
    else if (f == "-p")
      o.port = static_cast<int>(num(v));
    else if (f == "-n")
      o.iters = num(v);
    else if (f == "-s")
      o.size = num(v);
    else if (f == "-m")
      o.mtu = num(v);
    else if (f == "-g")
      o.gid_index = num(v);
    else if (f == "-P")
      o.psn = num(v);
    else if (f == "-t")
      o.timeout_s = static_cast<int>(num(v));
    else
      usage();
  }
  if (o.sock.empty() || o.iters == 0 || o.size == 0 || o.size > (1u << 30) ||
      mtu_enum(o.mtu) == 0 || o.port <= 0 || o.port > 65535 || o.timeout_s <= 0)
    usage();
  if (o.mode.ends_with("-client") && o.host.empty()) usage();
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return run(o);
}
