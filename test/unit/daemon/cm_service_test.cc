// SPDX-License-Identifier: BSD-3-Clause
// lib/daemon CmService (QP 1 and rdma_cm's ids in uroced): two services joined by a link that
// carries their frames, driven through the control messages the drop-in librdmacm sends.
// Connect / accept / RTU / disconnect with the events and parameters each side sees, a REQ to a
// port nobody listens on rejected at once, the end of a session disconnecting its connections,
// frames for QP 1 dropped and counted by reason, and bad requests.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "../../support/fake_port_view.h"
#include "cm/cma.h"
#include "cm/msg.h"
#include "daemon/cm_service.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce::daemon {
namespace {

using test::FakePort;

using Frames = std::vector<std::vector<uint8_t>>;

struct CmServiceTest : testing::Test {
  FakePort pa{1}, pb{2};
  Frames to_a, to_b;
  uint64_t now = 1'000'000;
  bool drop_all = false;
  CmService a{pa,
              [this](const uint8_t *f, uint32_t n) {
                if (!drop_all) to_b.emplace_back(f, f + n);
                return true;
              },
              [this] { return now; }, 1};
  CmService b{pb,
              [this](const uint8_t *f, uint32_t n) {
                if (!drop_all) to_a.emplace_back(f, f + n);
                return true;
              },
              [this] { return now; }, 2};
  std::vector<int> fds;

  void SetUp() override {
    pa.peer_gid = pb.gid(1);
    std::memcpy(pa.peer_mac, pb.mac(), 6);
    pb.peer_gid = pa.gid(1);
    std::memcpy(pb.peer_mac, pa.mac(), 6);
  }
  void TearDown() override {
    for (int fd : fds)
      close(fd);
  }
  void pump() {
    for (int i = 0; i < 100 && (!to_a.empty() || !to_b.empty()); ++i) {
      Frames fa, fb;
      fa.swap(to_a);
      fb.swap(to_b);
      for (auto &f : fa)
        a.rx(f.data(), static_cast<uint32_t>(f.size()), now);
      for (auto &f : fb)
        b.rx(f.data(), static_cast<uint32_t>(f.size()), now);
    }
  }
  template <class P>
  int req(CmService &s, uint64_t sess, uint16_t type, const P &p, void *rep = nullptr,
          size_t rep_len = 0, int fd = -1) {
    ctl::Message m;
    m.hdr.type = type;
    m.payload_len = sizeof p;
    std::memcpy(m.payload, &p, sizeof p);
    if (fd >= 0) {
      m.fds[0] = shm::UniqueFd(dup(fd));
      m.nfds = 1;
    }
    alignas(8) uint8_t out[sizeof(ctl::CmEventReply)];
    size_t n = 0;
    const int rc = s.handle(sess, m, out, &n);
    if (rc == 0 && rep != nullptr) {
      EXPECT_EQ(n, rep_len);
      std::memcpy(rep, out, rep_len);
    }
    return rc;
  }
  int handle_req(CmService &s, uint64_t sess, uint16_t type, uint32_t h) {
    return req(s, sess, type, ctl::HandlePayload{h, 0});
  }
  // A channel of session `sess`; *app: the end the app polls.
  uint32_t channel(CmService &s, uint64_t sess, int *app) {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
    fds.push_back(sv[0]);
    fds.push_back(sv[1]);
    *app = sv[0];
    ctl::Message m;
    m.hdr.type = ctl::kCmCreateChannel;
    m.fds[0] = shm::UniqueFd(dup(sv[1]));
    m.nfds = 1;
    alignas(8) uint8_t out[sizeof(ctl::CmEventReply)];
    size_t n = 0;
    EXPECT_EQ(s.handle(sess, m, out, &n), 0);
    ctl::HandlePayload h{};
    std::memcpy(&h, out, sizeof h);
    return h.handle;
  }
  uint32_t new_id(CmService &s, uint64_t sess, uint32_t ch) {
    ctl::CmCreateIdPayload p{ch, 0x0106, 2, 0};
    ctl::HandlePayload h{};
    EXPECT_EQ(req(s, sess, ctl::kCmCreateId, p, &h, sizeof h), 0);
    return h.handle;
  }
  bool event(CmService &s, uint64_t sess, uint32_t ch, ctl::CmEventReply *r) {
    return req(s, sess, ctl::kCmGetEvent, ctl::HandlePayload{ch, 0}, r, sizeof *r) == 0;
  }
  static bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
  }
  static void drain(int fd) {
    char b[16];
    while (recv(fd, b, sizeof b, MSG_DONTWAIT) > 0) {
    }
  }

  // A listener on A port 7000 (session 1), B (session 2) connected to it and established.
  struct Conn {
    int app_a = -1, app_b = -1;
    uint32_t ch_a = 0, ch_b = 0, lis = 0, child = 0, cli = 0;
  };
  Conn establish() {
    Conn c;
    c.ch_a = channel(a, 1, &c.app_a);
    c.lis = new_id(a, 1, c.ch_a);
    ctl::CmAddrPayload bp{};
    bp.id = c.lis;
    bp.port = 7000;
    std::memcpy(bp.gid, pa.gid(1).raw, 16);
    ctl::CmAddrReply ar{};
    EXPECT_EQ(req(a, 1, ctl::kCmBind, bp, &ar, sizeof ar), 0);
    EXPECT_EQ(ar.port, 7000);
    EXPECT_EQ(ar.gid_index, 1);
    EXPECT_EQ(handle_req(a, 1, ctl::kCmListen, c.lis), 0);

    c.ch_b = channel(b, 2, &c.app_b);
    c.cli = new_id(b, 2, c.ch_b);
    ctl::CmResolvePayload rp{};
    rp.id = c.cli;
    rp.dst_port = 7000;
    std::memcpy(rp.dst_gid, pa.gid(1).raw, 16);
    EXPECT_EQ(req(b, 2, ctl::kCmResolveAddr, rp, &ar, sizeof ar), 0);
    EXPECT_EQ(std::memcmp(ar.gid, pb.gid(1).raw, 16), 0);
    EXPECT_GE(ar.port, 32768);
    ctl::CmEventReply ev{};
    EXPECT_TRUE(readable(c.app_b));
    EXPECT_TRUE(event(b, 2, c.ch_b, &ev));
    EXPECT_EQ(ev.event, ctl::kEvAddrResolved);
    EXPECT_EQ(handle_req(b, 2, ctl::kCmResolveRoute, c.cli), 0);
    EXPECT_TRUE(event(b, 2, c.ch_b, &ev));
    EXPECT_EQ(ev.event, ctl::kEvRouteResolved);
    drain(c.app_b);

    ctl::CmConnPayload cp{};
    cp.id = c.cli;
    cp.qpn = 0x123;
    cp.psn = 0xabcde;
    cp.responder_resources = 4;
    cp.initiator_depth = 2;
    cp.retry_count = 7;
    cp.rnr_retry_count = 6;
    cp.path_mtu = 3;
    cp.private_len = 5;
    std::memcpy(cp.private_data, "hello", 5);
    EXPECT_EQ(req(b, 2, ctl::kCmConnect, cp), 0);
    pump();
    EXPECT_TRUE(readable(c.app_a));
    EXPECT_TRUE(event(a, 1, c.ch_a, &ev));
    EXPECT_EQ(ev.event, ctl::kEvConnectRequest);
    EXPECT_EQ(ev.listen_id, c.lis);
    EXPECT_EQ(ev.qpn, 0x123u);
    EXPECT_EQ(ev.psn, 0xabcdeu);
    EXPECT_EQ(ev.responder_resources, 4);
    EXPECT_EQ(ev.initiator_depth, 2);
    EXPECT_EQ(ev.rnr_retry_count, 6);
    EXPECT_EQ(ev.path_mtu, 3);
    EXPECT_EQ(ev.local_ack_timeout, 19);  // Linux 6.1's on RoCE: packet lifetime 18, + 1
    EXPECT_EQ(std::memcmp(ev.private_data, "hello", 5), 0);  // after rdma_cm's 36-byte header
    EXPECT_EQ(std::memcmp(ev.peer_gid, pb.gid(1).raw, 16), 0);
    EXPECT_EQ(ev.local_port, 7000);
    EXPECT_GE(ev.peer_port, 32768);  // the client's port, from the header
    c.child = ev.id;
    EXPECT_NE(c.child, c.lis);
    drain(c.app_a);

    ctl::CmConnPayload ap{};
    ap.id = c.child;
    ap.qpn = 0x456;
    ap.psn = 0x777;
    ap.responder_resources = 2;
    ap.initiator_depth = 4;
    ap.rnr_retry_count = 5;
    EXPECT_EQ(req(a, 1, ctl::kCmAccept, ap), 0);
    pump();
    EXPECT_TRUE(event(b, 2, c.ch_b, &ev));
    EXPECT_EQ(ev.event, ctl::kEvConnectResponse);
    EXPECT_EQ(ev.qpn, 0x456u);
    EXPECT_EQ(ev.psn, 0x777u);
    EXPECT_EQ(ev.responder_resources, 2);
    EXPECT_EQ(ev.initiator_depth, 4);
    EXPECT_EQ(ev.rnr_retry_count, 5);
    EXPECT_EQ(handle_req(b, 2, ctl::kCmEstablish, c.cli), 0);
    pump();
    EXPECT_TRUE(event(a, 1, c.ch_a, &ev));
    EXPECT_EQ(ev.event, ctl::kEvEstablished);
    EXPECT_EQ(ev.id, c.child);
    return c;
  }
};

TEST_F(CmServiceTest, ConnectAcceptEstablishDisconnect) {
  const Conn c = establish();
  ctl::CmEventReply ev{};
  EXPECT_FALSE(event(a, 1, c.ch_a, &ev));                     // nothing more
  EXPECT_EQ(handle_req(b, 2, ctl::kCmDisconnect, c.cli), 0);  // DREQ
  pump();
  EXPECT_TRUE(event(a, 1, c.ch_a, &ev));
  EXPECT_EQ(ev.event, ctl::kEvDisconnected);
  EXPECT_EQ(ev.id, c.child);
  EXPECT_EQ(handle_req(a, 1, ctl::kCmDisconnect, c.child), 0);  // DREP
  pump();
  EXPECT_TRUE(event(b, 2, c.ch_b, &ev));
  EXPECT_EQ(ev.event, ctl::kEvDisconnected);
  EXPECT_EQ(handle_req(a, 1, ctl::kCmDestroyId, c.child), 0);
  EXPECT_EQ(handle_req(b, 2, ctl::kCmDestroyId, c.cli), 0);
  EXPECT_EQ(handle_req(a, 1, ctl::kCmDestroyId, c.lis), 0);
  EXPECT_EQ(a.ids(), 0u);
  EXPECT_EQ(b.ids(), 0u);
  EXPECT_EQ(a.cm().counters().rx_bad, 0u);
  EXPECT_EQ(b.cm().counters().rx_bad, 0u);
}

TEST_F(CmServiceTest, NobodyListeningIsRejectedAtOnce) {
  int app = -1;
  const uint32_t ch = channel(b, 2, &app);
  const uint32_t id = new_id(b, 2, ch);
  ctl::CmResolvePayload rp{};
  rp.id = id;
  rp.dst_port = 9;
  std::memcpy(rp.dst_gid, pa.gid(1).raw, 16);
  ctl::CmAddrReply ar{};
  ASSERT_EQ(req(b, 2, ctl::kCmResolveAddr, rp, &ar, sizeof ar), 0);
  ASSERT_EQ(handle_req(b, 2, ctl::kCmResolveRoute, id), 0);
  ctl::CmConnPayload cp{};
  cp.id = id;
  cp.qpn = 0x99;
  cp.path_mtu = 3;
  ASSERT_EQ(req(b, 2, ctl::kCmConnect, cp), 0);
  pump();
  ctl::CmEventReply ev{};
  ASSERT_TRUE(event(b, 2, ch, &ev));  // ADDR_RESOLVED
  ASSERT_TRUE(event(b, 2, ch, &ev));  // ROUTE_RESOLVED
  ASSERT_TRUE(event(b, 2, ch, &ev));
  EXPECT_EQ(ev.event, ctl::kEvRejected);
  EXPECT_EQ(ev.status, cm::kRejInvalidServiceId);
}

TEST_F(CmServiceTest, SidrGivesTheListenersQpnAndQkey) {
  int app_a = -1, app_b = -1;
  const uint32_t ch_a = channel(a, 1, &app_a), ch_b = channel(b, 2, &app_b);
  ctl::HandlePayload h{};
  ASSERT_EQ(req(a, 1, ctl::kCmCreateId, ctl::CmCreateIdPayload{ch_a, 0x0111, 4, 0}, &h, sizeof h),
            0);
  const uint32_t lis = h.handle;
  ctl::CmAddrPayload bp{};
  bp.id = lis;
  bp.port = 7174;
  ASSERT_EQ(req(a, 1, ctl::kCmBind, bp), 0);
  ASSERT_EQ(handle_req(a, 1, ctl::kCmListen, lis), 0);
  auto ask = [&](uint16_t port) {
    ctl::HandlePayload c{};
    EXPECT_EQ(req(b, 2, ctl::kCmCreateId, ctl::CmCreateIdPayload{ch_b, 0x0111, 4, 0}, &c, sizeof c),
              0);
    ctl::CmResolvePayload rp{};
    rp.id = c.handle;
    rp.dst_port = port;
    std::memcpy(rp.dst_gid, pa.gid(1).raw, 16);
    ctl::CmAddrReply ar{};
    EXPECT_EQ(req(b, 2, ctl::kCmResolveAddr, rp, &ar, sizeof ar), 0);
    EXPECT_EQ(handle_req(b, 2, ctl::kCmResolveRoute, c.handle), 0);
    ctl::CmConnPayload cp{};
    cp.id = c.handle;
    cp.private_len = 3;
    std::memcpy(cp.private_data, "ud!", 3);
    EXPECT_EQ(req(b, 2, ctl::kCmConnect, cp), 0);
    ctl::CmEventReply ev{};
    EXPECT_TRUE(event(b, 2, ch_b, &ev));  // ADDR_RESOLVED
    EXPECT_TRUE(event(b, 2, ch_b, &ev));  // ROUTE_RESOLVED
    return c.handle;
  };
  const uint32_t cli = ask(7174);
  pump();
  ctl::CmEventReply ev{};
  ASSERT_TRUE(event(a, 1, ch_a, &ev));
  EXPECT_EQ(ev.event, ctl::kEvConnectRequest);
  EXPECT_EQ(ev.listen_id, lis);
  EXPECT_EQ(std::memcmp(ev.private_data, "ud!", 3), 0);
  ctl::CmConnPayload ap{};
  ap.id = ev.id;
  ap.qpn = 0x55;
  ap.qkey = 0x01234567;
  ASSERT_EQ(req(a, 1, ctl::kCmAccept, ap), 0);
  EXPECT_EQ(req(a, 1, ctl::kCmAccept, ap), -EINVAL);  // answered once
  pump();
  ASSERT_TRUE(event(b, 2, ch_b, &ev));
  EXPECT_EQ(ev.event, ctl::kEvEstablished);
  EXPECT_EQ(ev.id, cli);
  EXPECT_EQ(ev.qpn, 0x55u);
  EXPECT_EQ(ev.qkey, 0x01234567u);
  EXPECT_EQ(std::memcmp(ev.peer_gid, pa.gid(1).raw, 16), 0);
  // Nobody listening on that port: UNREACHABLE at once.
  const uint32_t lost = ask(7999);
  pump();
  ASSERT_TRUE(event(b, 2, ch_b, &ev));
  EXPECT_EQ(ev.event, ctl::kEvUnreachable);
  EXPECT_EQ(ev.id, lost);
  EXPECT_EQ(a.cm().connections(), 0u);
  EXPECT_EQ(b.cm().connections(), 0u);
}

TEST_F(CmServiceTest, UnreachableAddressIsAnAddrError) {
  int app = -1;
  const uint32_t ch = channel(b, 2, &app);
  const uint32_t id = new_id(b, 2, ch);
  ctl::CmResolvePayload rp{};
  rp.id = id;
  const wire::Gid nowhere = wire::Gid::from_ipv4(10, 0, 0, 99);
  std::memcpy(rp.dst_gid, nowhere.raw, 16);
  ctl::CmAddrReply ar{};
  ASSERT_EQ(req(b, 2, ctl::kCmResolveAddr, rp, &ar, sizeof ar), 0);
  ctl::CmEventReply ev{};
  ASSERT_TRUE(event(b, 2, ch, &ev));
  EXPECT_EQ(ev.event, ctl::kEvAddrError);
  EXPECT_EQ(ev.status, -EHOSTUNREACH);
  EXPECT_EQ(handle_req(b, 2, ctl::kCmResolveRoute, id), -EINVAL);
}

TEST_F(CmServiceTest, SessionEndDisconnectsAndFreesItsIds) {
  const Conn c = establish();
  b.close_session(2);  // the client app died: DREQ
  EXPECT_EQ(b.ids(), 0u);
  pump();
  ctl::CmEventReply ev{};
  ASSERT_TRUE(event(a, 1, c.ch_a, &ev));
  EXPECT_EQ(ev.event, ctl::kEvDisconnected);
  a.close_session(1);
  EXPECT_EQ(a.ids(), 0u);
  // Its channel went with it.
  EXPECT_EQ(req(a, 1, ctl::kCmGetEvent, ctl::HandlePayload{c.ch_a, 0}), -EINVAL);
}

TEST_F(CmServiceTest, BadRequests) {
  // A channel must be an AF_UNIX datagram socket.
  const int efd = eventfd(0, 0);
  ctl::Message m;
  m.hdr.type = ctl::kCmCreateChannel;
  m.fds[0] = shm::UniqueFd(efd);
  m.nfds = 1;
  alignas(8) uint8_t out[sizeof(ctl::CmEventReply)];
  size_t n = 0;
  EXPECT_EQ(a.handle(1, m, out, &n), -EINVAL);
  int app = -1;
  const uint32_t ch = channel(a, 1, &app);
  // Another session's channel and ids are not this session's.
  EXPECT_EQ(req(a, 2, ctl::kCmCreateId, ctl::CmCreateIdPayload{ch, 0x0106, 2, 0}), -EINVAL);
  EXPECT_EQ(req(a, 1, ctl::kCmCreateId, ctl::CmCreateIdPayload{ch, 0x0999, 2, 0}),
            -EPROTONOSUPPORT);
  const uint32_t id1 = new_id(a, 1, ch);
  const uint32_t id2 = new_id(a, 1, ch);
  EXPECT_EQ(handle_req(a, 2, ctl::kCmListen, id1), -EINVAL);
  EXPECT_EQ(handle_req(a, 1, ctl::kCmListen, id1), -EINVAL);  // not bound
  ctl::CmAddrPayload bp{};
  bp.id = id1;
  bp.port = 7000;
  EXPECT_EQ(req(a, 1, ctl::kCmBind, bp), 0);  // any address
  bp.id = id2;
  EXPECT_EQ(req(a, 1, ctl::kCmBind, bp), -EADDRINUSE);
  const wire::Gid other = wire::Gid::from_ipv4(10, 0, 0, 50);
  std::memcpy(bp.gid, other.raw, 16);
  bp.port = 7001;
  EXPECT_EQ(req(a, 1, ctl::kCmBind, bp), -EADDRNOTAVAIL);
  EXPECT_EQ(handle_req(a, 1, ctl::kCmAccept, id1), -EINVAL);  // wrong payload size
  ctl::CmConnPayload cp{};
  cp.id = id1;
  EXPECT_EQ(req(a, 1, ctl::kCmConnect, cp), -EINVAL);  // not resolved
  EXPECT_EQ(req(a, 1, ctl::kCmAccept, cp), -EINVAL);   // no request
  EXPECT_EQ(handle_req(a, 1, ctl::kCmDisconnect, id1), -EINVAL);
  EXPECT_EQ(req(a, 1, ctl::kCmGetEvent, ctl::HandlePayload{ch, 0}), -EAGAIN);
}

// A UD SEND to QP 1 carrying `mad`, from B to A, with the fields a test breaks.
std::vector<uint8_t> gsi_frame(const FakePort &from, const FakePort &to, const uint8_t *mad,
                               uint32_t len, uint8_t opcode = wire::op::kUdSendOnly,
                               uint16_t pkey = 0xffff, uint32_t qkey = kGsiQkey) {
  wire::PathInfo path;
  std::memcpy(path.smac, from.mac(), 6);
  std::memcpy(path.dmac, to.mac(), 6);
  path.sgid = from.gid(1);
  path.dgid = to.gid(1);
  wire::PacketDesc d;
  d.path = &path;
  d.f.opcode = opcode;
  d.f.pkey = pkey;
  d.f.dest_qp = kGsiQpn;
  d.f.qkey = qkey;
  d.f.src_qp = kGsiQpn;
  d.payload_len = len;
  std::vector<uint8_t> f(1024);
  const wire::BuildResult r = wire::build_frame(f.data(), f.size(), d, mad);
  EXPECT_TRUE(r.ok());
  f.resize(r.frame_len);
  return f;
}

TEST_F(CmServiceTest, Qp1FramesAreCheckedAndCountedByReason) {
  uint8_t mad[cm::kMadSize];
  cm::Drep drep;
  drep.local_comm_id = 5;
  drep.remote_comm_id = 6;
  cm::encode(drep, 42, mad);
  auto rx = [this](std::vector<uint8_t> f) {
    a.rx(f.data(), static_cast<uint32_t>(f.size()), now);
  };
  auto drops = [this](GsiDrop d) { return a.counters().drops[static_cast<size_t>(d)]; };
  rx(gsi_frame(pb, pa, mad, cm::kMadSize));
  EXPECT_EQ(a.counters().rx, 1u);
  EXPECT_EQ(a.cm().counters().rx_mads, 1u);
  rx(gsi_frame(pb, pa, mad, cm::kMadSize, wire::op::kUdSendOnlyImm));
  EXPECT_EQ(drops(GsiDrop::kNotSendOnly), 1u);
  rx(gsi_frame(pb, pa, mad, cm::kMadSize, wire::op::kUdSendOnly, 0x8001));
  EXPECT_EQ(drops(GsiDrop::kBadPkey), 1u);
  rx(gsi_frame(pb, pa, mad, cm::kMadSize, wire::op::kUdSendOnly, 0xffff, 0x11111111));
  EXPECT_EQ(drops(GsiDrop::kBadQkey), 1u);
  rx(gsi_frame(pb, pa, mad, 100));
  EXPECT_EQ(drops(GsiDrop::kShortMad), 1u);
  auto bad_icrc = gsi_frame(pb, pa, mad, cm::kMadSize);
  bad_icrc.back() ^= 1;
  rx(bad_icrc);
  EXPECT_EQ(drops(GsiDrop::kParse), 1u);
  rx(std::vector<uint8_t>(20, 0));  // a runt
  EXPECT_EQ(drops(GsiDrop::kParse), 2u);
  // A MAD that is not a CM MAD reaches the CM, which counts it as bad.
  uint8_t junk[cm::kMadSize] = {1, 0x04, 2};
  rx(gsi_frame(pb, pa, junk, cm::kMadSize));
  EXPECT_EQ(a.cm().counters().rx_bad, 1u);
  EXPECT_EQ(a.counters().rx, 2u);
  std::vector<ctl::StatEntry> st;
  a.add_stats(st);
  bool found = false;
  for (const auto &e : st)
    found |= std::strcmp(e.name, "cm.gsi_drop_bad_qkey") == 0 && e.value == 1;
  EXPECT_TRUE(found);
}

TEST_F(CmServiceTest, AnswersGoToTheMacTheRequestCameFrom) {
  // A never resolved B: a DREQ for nobody is still answered with a DREP (IBTA 12.9.8.4), sent
  // to the MAC the DREQ came from.
  pa.peer_gid = wire::Gid{};
  uint8_t mad[cm::kMadSize];
  cm::Dreq dreq;
  dreq.local_comm_id = 7;
  cm::encode(dreq, 1, mad);
  auto f = gsi_frame(pb, pa, mad, cm::kMadSize);
  a.rx(f.data(), static_cast<uint32_t>(f.size()), now);
  ASSERT_EQ(to_b.size(), 1u);
  EXPECT_EQ(std::memcmp(to_b[0].data(), pb.mac(), 6), 0);
  wire::ParsedPacket p;
  ASSERT_EQ(wire::parse_frame(to_b[0].data(), to_b[0].size(), &p), wire::ParseError::kOk);
  EXPECT_EQ(p.bth()->dest_qp(), kGsiQpn);
  EXPECT_EQ(p.deth()->src_qp(), kGsiQpn);
  EXPECT_EQ(p.deth()->qkey(), kGsiQkey);
  EXPECT_EQ(p.payload_len, cm::kMadSize);
  cm::MadHeader h;
  cm::Message m;
  ASSERT_EQ(cm::decode(p.payload(), p.payload_len, &h, &m), cm::DecodeError::kOk);
  ASSERT_TRUE(std::holds_alternative<cm::Drep>(m));
  EXPECT_EQ(std::get<cm::Drep>(m).remote_comm_id, 7u);
  EXPECT_EQ(a.counters().tx, 1u);
  EXPECT_EQ(a.counters().tx_no_route, 0u);
}

TEST_F(CmServiceTest, Ipv6LinkLocalConnectCarriesIpv6GidsAndHeader) {
  // Both ports have fe80:: (GID 0) and a global fd00::n (GID 2). A listens on any IPv6 address;
  // B resolves A's link-local address without a source: its source is its own link-local
  // address (not the global one), the REQ's primary path and rdma_cm's header (IP version 6)
  // carry both link-local GIDs, and A's new id sees them as its local and peer addresses.
  pa.add_global_v6();
  pb.add_global_v6();
  pb.peer_gid = pa.gid(0);
  std::memcpy(pb.peer_mac, pa.mac(), 6);
  int app_a = -1, app_b = -1;
  const uint32_t ch_a = channel(a, 1, &app_a), ch_b = channel(b, 2, &app_b);
  const uint32_t lis = new_id(a, 1, ch_a);
  ctl::CmAddrPayload bp{};
  bp.id = lis;
  bp.port = 7000;
  bp.v6 = 1;  // ::
  ctl::CmAddrReply ar{};
  ASSERT_EQ(req(a, 1, ctl::kCmBind, bp, &ar, sizeof ar), 0);
  EXPECT_EQ(std::memcmp(ar.gid, pa.gid(2).raw, 16), 0);  // the first global IPv6 address
  EXPECT_EQ(ar.gid_index, 2);
  ASSERT_EQ(handle_req(a, 1, ctl::kCmListen, lis), 0);

  const uint32_t cli = new_id(b, 2, ch_b);
  ctl::CmResolvePayload rp{};
  rp.id = cli;
  rp.dst_port = 7000;
  std::memcpy(rp.dst_gid, pa.gid(0).raw, 16);
  ASSERT_EQ(req(b, 2, ctl::kCmResolveAddr, rp, &ar, sizeof ar), 0);
  EXPECT_EQ(std::memcmp(ar.gid, pb.gid(0).raw, 16), 0);  // link-local to link-local
  EXPECT_EQ(ar.gid_index, 0);
  const uint16_t cport = ar.port;
  ctl::CmEventReply ev{};
  ASSERT_TRUE(event(b, 2, ch_b, &ev));
  EXPECT_EQ(ev.event, ctl::kEvAddrResolved);
  ASSERT_EQ(handle_req(b, 2, ctl::kCmResolveRoute, cli), 0);
  ASSERT_TRUE(event(b, 2, ch_b, &ev));
  ctl::CmConnPayload cp{};
  cp.id = cli;
  cp.qpn = 0x321;
  cp.path_mtu = 3;
  ASSERT_EQ(req(b, 2, ctl::kCmConnect, cp), 0);

  ASSERT_EQ(to_a.size(), 1u);
  wire::ParsedPacket p;
  ASSERT_EQ(wire::parse_frame(to_a[0].data(), to_a[0].size(), &p), wire::ParseError::kOk);
  EXPECT_EQ(p.sgid(), pb.gid(0));
  cm::MadHeader h;
  cm::Message m;
  ASSERT_EQ(cm::decode(p.payload(), p.payload_len, &h, &m), cm::DecodeError::kOk);
  ASSERT_TRUE(std::holds_alternative<cm::Req>(m));
  const cm::Req &q = std::get<cm::Req>(m);
  EXPECT_EQ(q.primary.local_gid, pb.gid(0));
  EXPECT_EQ(q.primary.remote_gid, pa.gid(0));
  cm::CmaHdr ch;
  ASSERT_TRUE(cm::read_cma_hdr(q.private_data.data(), &ch));
  EXPECT_EQ(ch.ip_version, 6);
  EXPECT_EQ(ch.port, cport);
  EXPECT_EQ(std::memcmp(ch.src, pb.gid(0).raw, 16), 0);
  EXPECT_EQ(std::memcmp(ch.dst, pa.gid(0).raw, 16), 0);

  pump();
  ASSERT_TRUE(event(a, 1, ch_a, &ev));
  EXPECT_EQ(ev.event, ctl::kEvConnectRequest);
  EXPECT_EQ(ev.listen_id, lis);
  EXPECT_EQ(std::memcmp(ev.local_gid, pa.gid(0).raw, 16), 0);
  EXPECT_EQ(std::memcmp(ev.peer_gid, pb.gid(0).raw, 16), 0);
  EXPECT_EQ(ev.gid_index, 0);  // the QP's sgid_index: A's link-local GID
  EXPECT_EQ(ev.local_port, 7000);
  EXPECT_EQ(ev.peer_port, cport);
  EXPECT_EQ(ev.qpn, 0x321u);
}

TEST_F(CmServiceTest, AnyIpv6WithoutAGlobalAddressIsTheLinkLocalOne) {
  int app = -1;
  const uint32_t ch = channel(a, 1, &app);
  const uint32_t id = new_id(a, 1, ch);
  ctl::CmAddrPayload bp{};
  bp.id = id;
  bp.v6 = 1;
  ctl::CmAddrReply ar{};
  ASSERT_EQ(req(a, 1, ctl::kCmBind, bp, &ar, sizeof ar), 0);
  EXPECT_EQ(std::memcmp(ar.gid, pa.gid(0).raw, 16), 0);
  EXPECT_EQ(ar.gid_index, 0);
}

TEST_F(CmServiceTest, MigrateIdMovesQueuedAndLaterEvents) {
  // rdma_migrate_id: B's id moves to a second channel with the DISCONNECTED already queued for
  // it on the first; A's listener moves with the CONNECT_REQUEST queued for it, and that
  // request's new id reports to the new channel too.
  const Conn c = establish();
  ASSERT_EQ(handle_req(a, 1, ctl::kCmDisconnect, c.child), 0);  // DREQ
  pump();
  int app_b2 = -1;
  const uint32_t ch_b2 = channel(b, 2, &app_b2);
  drain(c.app_b);
  ASSERT_EQ(req(b, 2, ctl::kCmMigrateId, ctl::CmMigratePayload{c.cli, ch_b2}), 0);
  ctl::CmEventReply ev{};
  EXPECT_FALSE(event(b, 2, c.ch_b, &ev));
  EXPECT_TRUE(readable(app_b2));
  ASSERT_TRUE(event(b, 2, ch_b2, &ev));
  EXPECT_EQ(ev.event, ctl::kEvDisconnected);
  EXPECT_EQ(ev.id, c.cli);
  ASSERT_EQ(handle_req(b, 2, ctl::kCmDisconnect, c.cli), 0);  // DREP
  pump();
  ASSERT_TRUE(event(a, 1, c.ch_a, &ev));
  EXPECT_EQ(ev.event, ctl::kEvDisconnected);

  // A second client connects; its CONNECT_REQUEST waits on A's first channel.
  const uint32_t cli2 = new_id(b, 2, c.ch_b);
  ctl::CmResolvePayload rp{};
  rp.id = cli2;
  rp.dst_port = 7000;
  std::memcpy(rp.dst_gid, pa.gid(1).raw, 16);
  ctl::CmAddrReply ar{};
  ASSERT_EQ(req(b, 2, ctl::kCmResolveAddr, rp, &ar, sizeof ar), 0);
  ASSERT_EQ(handle_req(b, 2, ctl::kCmResolveRoute, cli2), 0);
  ctl::CmConnPayload cp{};
  cp.id = cli2;
  cp.qpn = 0x99;
  cp.path_mtu = 3;
  ASSERT_EQ(req(b, 2, ctl::kCmConnect, cp), 0);
  pump();
  int app_a2 = -1;
  const uint32_t ch_a2 = channel(a, 1, &app_a2);
  ASSERT_EQ(req(a, 1, ctl::kCmMigrateId, ctl::CmMigratePayload{c.lis, ch_a2}), 0);
  EXPECT_FALSE(event(a, 1, c.ch_a, &ev));
  ASSERT_TRUE(event(a, 1, ch_a2, &ev));
  EXPECT_EQ(ev.event, ctl::kEvConnectRequest);
  EXPECT_EQ(ev.listen_id, c.lis);
  const uint32_t child2 = ev.id;
  ctl::CmConnPayload ap{};
  ap.id = child2;
  ap.qpn = 0x98;
  ASSERT_EQ(req(a, 1, ctl::kCmAccept, ap), 0);
  pump();
  ASSERT_TRUE(event(b, 2, c.ch_b, &ev));  // ADDR_RESOLVED, ROUTE_RESOLVED, CONNECT_RESPONSE
  ASSERT_TRUE(event(b, 2, c.ch_b, &ev));
  ASSERT_TRUE(event(b, 2, c.ch_b, &ev));
  EXPECT_EQ(ev.event, ctl::kEvConnectResponse);
  ASSERT_EQ(handle_req(b, 2, ctl::kCmEstablish, cli2), 0);
  pump();
  EXPECT_FALSE(event(a, 1, c.ch_a, &ev));
  ASSERT_TRUE(event(a, 1, ch_a2, &ev));
  EXPECT_EQ(ev.event, ctl::kEvEstablished);
  EXPECT_EQ(ev.id, child2);

  // Another session's channel, an unknown id, and a channel that is not one: refused.
  int app_x = -1;
  const uint32_t ch_x = channel(a, 9, &app_x);
  EXPECT_EQ(req(a, 1, ctl::kCmMigrateId, ctl::CmMigratePayload{c.lis, ch_x}), -EINVAL);
  EXPECT_EQ(req(a, 1, ctl::kCmMigrateId, ctl::CmMigratePayload{12345, ch_a2}), -EINVAL);
  EXPECT_EQ(req(a, 1, ctl::kCmMigrateId, ctl::CmMigratePayload{c.lis, c.lis}), -EINVAL);
}

TEST_F(CmServiceTest, ListenerBoundToOneAddressRefusesRequestsForAnother) {
  // A listens on 10.0.0.1 port 7000 (bound to that address); B connects to A's link-local
  // address on port 7000: A answers REJ 28 (the kernel's answer when rdma_cm finds no id),
  // makes no id and queues nothing; B sees REJECTED with that reason.
  pb.peer_gid = pa.gid(0);
  std::memcpy(pb.peer_mac, pa.mac(), 6);
  int app_a = -1, app_b = -1;
  const uint32_t ch_a = channel(a, 1, &app_a), ch_b = channel(b, 2, &app_b);
  const uint32_t lis = new_id(a, 1, ch_a);
  ctl::CmAddrPayload bp{};
  bp.id = lis;
  bp.port = 7000;
  std::memcpy(bp.gid, pa.gid(1).raw, 16);
  ctl::CmAddrReply ar{};
  ASSERT_EQ(req(a, 1, ctl::kCmBind, bp, &ar, sizeof ar), 0);
  ASSERT_EQ(handle_req(a, 1, ctl::kCmListen, lis), 0);
  const uint32_t cli = new_id(b, 2, ch_b);
  ctl::CmResolvePayload rp{};
  rp.id = cli;
  rp.dst_port = 7000;
  std::memcpy(rp.dst_gid, pa.gid(0).raw, 16);
  ASSERT_EQ(req(b, 2, ctl::kCmResolveAddr, rp, &ar, sizeof ar), 0);
  ASSERT_EQ(handle_req(b, 2, ctl::kCmResolveRoute, cli), 0);
  ctl::CmConnPayload cp{};
  cp.id = cli;
  cp.qpn = 0x55;
  cp.path_mtu = 3;
  ASSERT_EQ(req(b, 2, ctl::kCmConnect, cp), 0);
  const size_t ids_before = a.ids();
  pump();
  EXPECT_EQ(a.ids(), ids_before);
  ctl::CmEventReply ev{};
  EXPECT_FALSE(event(a, 1, ch_a, &ev));
  EXPECT_EQ(a.counters().addr_mismatch, 1u);
  EXPECT_EQ(a.cm().connections(), 0u);
  ASSERT_TRUE(event(b, 2, ch_b, &ev));  // ADDR_RESOLVED
  ASSERT_TRUE(event(b, 2, ch_b, &ev));  // ROUTE_RESOLVED
  ASSERT_TRUE(event(b, 2, ch_b, &ev));
  EXPECT_EQ(ev.event, ctl::kEvRejected);
  EXPECT_EQ(ev.status, cm::kRejConsumerDefined);
}

}  // namespace
}  // namespace uroce::daemon
