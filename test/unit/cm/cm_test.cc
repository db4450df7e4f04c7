// SPDX-License-Identifier: BSD-3-Clause
// lib/cm's state machine: two managers joined by a fake link that can drop chosen MADs, on a
// clock the test moves. Every IBTA exchange, each message lost once, duplicates, REJ reasons,
// timeouts, the half-open bound, stale connections, simultaneous disconnect and SIDR.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <functional>
#include <vector>

#include "cm/cm.h"
#include "cm/cma.h"

namespace uroce::cm {
namespace {

struct Seen {
  Event::Kind kind;
  uint32_t comm_id;
  uint16_t reason;
  uint32_t qpn;  // REQ / REP / SIDR_REP: the peer's QPN
  uint32_t psn;
  uint8_t first_private;
};

struct Side : Host {
  virtual ~Side() = default;
  wire::Gid gid;
  std::deque<std::pair<wire::Gid, std::vector<uint8_t>>> *wire_out = nullptr;
  std::vector<Seen> events;
  std::vector<uint16_t> sent_attrs;
  std::function<void(const Event &)> react;
  void send_mad(const wire::Gid &, const uint8_t *mad) override {
    sent_attrs.push_back(static_cast<uint16_t>(mad[16] << 8 | mad[17]));
    wire_out->push_back({gid, std::vector<uint8_t>(mad, mad + kMadSize)});
  }
  void on_event(const Event &e) override {
    Seen s{e.kind, e.comm_id, e.reason, 0, 0, 0};
    if (e.req)
      s = {e.kind,           e.comm_id,           e.reason,
           e.req->local_qpn, e.req->starting_psn, e.req->private_data[0]};
    if (e.rep)
      s = {e.kind,           e.comm_id,           e.reason,
           e.rep->local_qpn, e.rep->starting_psn, e.rep->private_data[0]};
    if (e.rej) s.first_private = e.rej->private_data[0];
    if (e.sidr_rep)
      s = {e.kind, e.comm_id, e.sidr_rep->status, e.sidr_rep->qpn, e.sidr_rep->qkey, 0};
    events.push_back(s);
    if (react) react(e);
  }
  bool saw(Event::Kind k) const {
    for (const Seen &s : events)
      if (s.kind == k) return true;
    return false;
  }
  size_t count(Event::Kind k) const {
    size_t n = 0;
    for (const Seen &s : events)
      n += s.kind == k;
    return n;
  }
};

constexpr uint64_t kSid = service_id(PortSpace::kTcp, 7471);

struct Pair : ::testing::Test {
  Side a, b;
  std::deque<std::pair<wire::Gid, std::vector<uint8_t>>> a_out, b_out;
  Limits lim;
  std::unique_ptr<Cm> ca, cb;
  uint64_t now = 1'000'000;
  std::function<bool(uint16_t attr)> drop = [](uint16_t) { return false; };  // A->B and B->A

  void SetUp() override {
    a.gid = wire::Gid::from_ipv4(10, 0, 0, 1);
    b.gid = wire::Gid::from_ipv4(10, 0, 0, 2);
    a.wire_out = &a_out;
    b.wire_out = &b_out;
    make();
  }
  void make() {
    ca = std::make_unique<Cm>(a, 0xA, 1, lim);
    cb = std::make_unique<Cm>(b, 0xB, 2, lim);
  }
  // Delivers every queued MAD (and what the answers queue) until the link is quiet.
  void run() {
    for (int guard = 0; guard < 1000 && (!a_out.empty() || !b_out.empty()); ++guard) {
      if (!a_out.empty()) {
        auto m = a_out.front();
        a_out.pop_front();
        if (!drop(static_cast<uint16_t>(m.second[16] << 8 | m.second[17])))
          cb->receive(m.first, m.second.data(), m.second.size(), now);
      }
      if (!b_out.empty()) {
        auto m = b_out.front();
        b_out.pop_front();
        if (!drop(static_cast<uint16_t>(m.second[16] << 8 | m.second[17])))
          ca->receive(m.first, m.second.data(), m.second.size(), now);
      }
    }
  }
  void advance(uint64_t ns) {
    now += ns;
    ca->poll(now);
    cb->poll(now);
    run();
  }
  Req req(uint32_t qpn = 17) {
    Req q;
    q.service_id = kSid;
    q.local_qpn = qpn;
    q.starting_psn = 0x1234;
    q.path_mtu = 3;
    q.primary.local_gid = a.gid;
    q.primary.remote_gid = b.gid;
    q.private_data[0] = 0xAA;
    return q;
  }
  Rep rep(uint32_t qpn = 33) {
    Rep p;
    p.local_qpn = qpn;
    p.starting_psn = 0x5678;
    p.private_data[0] = 0xBB;
    return p;
  }
  // B accepts every REQ, A sends the RTU on every REP.
  void auto_answer() {
    b.react = [this](const Event &e) {
      if (e.kind == Event::kReqReceived) {
        EXPECT_EQ(cb->accept(e.comm_id, rep(), now), 0);
      }
    };
    a.react = [this](const Event &e) {
      if (e.kind == Event::kRepReceived) {
        EXPECT_EQ(ca->rtu(e.comm_id, nullptr, 0, now), 0);
      }
    };
  }
  uint64_t req_wait() const {
    return cm_time_ns(lim.response_timeout) + 2 * cm_time_ns(lim.packet_lifetime);
  }
  State state(Cm &c, uint32_t id) {
    State s;
    EXPECT_TRUE(c.state_of(id, &s));
    return s;
  }
};

TEST_F(Pair, ConnectAcceptEstablishDisconnect) {
  ASSERT_EQ(cb->listen(kSid, 7), 0);
  EXPECT_EQ(cb->listen(kSid, 8), EADDRINUSE);
  uint32_t id;
  ASSERT_EQ(ca->connect(req(), b.gid, now, &id), 0);
  run();
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_EQ(b.events[0].kind, Event::kReqReceived);
  EXPECT_EQ(b.events[0].qpn, 17u);
  EXPECT_EQ(b.events[0].psn, 0x1234u);
  EXPECT_EQ(b.events[0].first_private, 0xAA);
  const uint32_t bid = b.events[0].comm_id;
  EXPECT_EQ(state(*cb, bid), State::kReqRcvd);
  ASSERT_EQ(cb->accept(bid, rep(), now), 0);
  run();
  ASSERT_EQ(a.events.size(), 1u);
  EXPECT_EQ(a.events[0].kind, Event::kRepReceived);
  EXPECT_EQ(a.events[0].qpn, 33u);
  EXPECT_EQ(a.events[0].first_private, 0xBB);
  EXPECT_EQ(state(*ca, id), State::kRepRcvd);
  ASSERT_EQ(ca->rtu(id, nullptr, 0, now), 0);
  run();
  EXPECT_TRUE(b.saw(Event::kEstablished));
  EXPECT_EQ(state(*ca, id), State::kEstablished);
  EXPECT_EQ(state(*cb, bid), State::kEstablished);

  ASSERT_EQ(ca->disconnect(id, now), 0);
  run();
  EXPECT_TRUE(b.saw(Event::kDreqReceived));
  ASSERT_EQ(cb->disconnect(bid, now), 0);
  run();
  EXPECT_TRUE(a.saw(Event::kDisconnected));
  EXPECT_EQ(state(*ca, id), State::kTimewait);
  EXPECT_EQ(state(*cb, bid), State::kTimewait);
  advance(lim.timewait_ns);
  EXPECT_TRUE(a.saw(Event::kTimewaitExit));
  EXPECT_TRUE(b.saw(Event::kTimewaitExit));
  EXPECT_EQ(ca->connections(), 0u);
  EXPECT_EQ(cb->connections(), 0u);
  EXPECT_EQ(ca->counters().retries + cb->counters().retries, 0u);
}

TEST_F(Pair, NoListenerIsRejectedAtOnce) {
  uint32_t id;
  ASSERT_EQ(ca->connect(req(), b.gid, now, &id), 0);
  run();
  ASSERT_EQ(a.events.size(), 1u);
  EXPECT_EQ(a.events[0].kind, Event::kRejected);
  EXPECT_EQ(a.events[0].reason, kRejInvalidServiceId);
  EXPECT_EQ(ca->connections(), 0u);
  EXPECT_EQ(cb->connections(), 0u);
}

TEST_F(Pair, ConsumerRejectCarriesPrivateData) {
  ASSERT_EQ(cb->listen(kSid, 1), 0);
  b.react = [this](const Event &e) {
    const uint8_t why[2] = {0x42, 0x43};
    if (e.kind == Event::kReqReceived) {
      EXPECT_EQ(cb->reject(e.comm_id, kRejConsumerDefined, why, 2), 0);
    }
  };
  uint32_t id;
  ASSERT_EQ(ca->connect(req(), b.gid, now, &id), 0);
  run();
  ASSERT_EQ(a.events.size(), 1u);
  EXPECT_EQ(a.events[0].reason, kRejConsumerDefined);
  EXPECT_EQ(a.events[0].first_private, 0x42);
  EXPECT_EQ(cb->connections(), 0u);
}

TEST_F(Pair, EachLostMessageIsRecovered) {
  const uint16_t attrs[] = {static_cast<uint16_t>(AttrId::kReq),
                            static_cast<uint16_t>(AttrId::kRep),
                            static_cast<uint16_t>(AttrId::kRtu)};
  for (uint16_t lost : attrs) {
    SCOPED_TRACE(attr_name(lost));
    a.events.clear();
    b.events.clear();
    make();
    ASSERT_EQ(cb->listen(kSid, 1), 0);
    auto_answer();
    bool dropped = false;
    drop = [&](uint16_t attr) {
      if (attr != lost || dropped) return false;
      dropped = true;
      return true;
    };
    uint32_t id;
    ASSERT_EQ(ca->connect(req(), b.gid, now, &id), 0);
    run();
    for (int i = 0; i < 3 && !(a.saw(Event::kRepReceived) && b.saw(Event::kEstablished)); ++i)
      advance(req_wait() + 1);
    EXPECT_TRUE(dropped);
    EXPECT_EQ(a.count(Event::kRepReceived), 1u);
    EXPECT_EQ(b.count(Event::kReqReceived), 1u);
    EXPECT_EQ(b.count(Event::kEstablished), 1u);
    EXPECT_EQ(state(*ca, id), State::kEstablished);
    EXPECT_GE(ca->counters().retries + cb->counters().retries, 1u);
    drop = [](uint16_t) { return false; };
  }
}

TEST_F(Pair, NoAnswerTimesOutAfterEveryRetry) {
  lim.max_retries = 3;
  make();
  ASSERT_EQ(cb->listen(kSid, 1), 0);
  drop = [](uint16_t) { return true; };
  Req q = req();
  q.max_cm_retries = 3;
  uint32_t id;
  ASSERT_EQ(ca->connect(q, b.gid, now, &id), 0);
  for (int i = 0; i < 3; ++i) {
    advance(req_wait() + 1);
    EXPECT_FALSE(a.saw(Event::kTimeout)) << i;
  }
  advance(req_wait() + 1);
  EXPECT_TRUE(a.saw(Event::kTimeout));
  EXPECT_EQ(ca->counters().retries, 3u);
  EXPECT_EQ(ca->connections(), 0u);
  // REQ, 3 resends, then the REJ (reason Timeout) that tells the peer.
  ASSERT_EQ(a.sent_attrs.size(), 5u);
  EXPECT_EQ(a.sent_attrs.back(), static_cast<uint16_t>(AttrId::kRej));
}

TEST_F(Pair, MraDelaysTheResend) {
  uint32_t id;
  ASSERT_EQ(ca->connect(req(), b.gid, now, &id), 0);
  a_out.clear();  // B never sees it
  Mra m;
  m.remote_comm_id = id;
  m.message_mraed = 0;
  m.service_timeout = 24;  // 68 s
  uint8_t mad[kMadSize];
  encode(m, 1, mad);
  ca->receive(b.gid, mad, sizeof mad, now);
  advance(req_wait() + 1);
  EXPECT_EQ(ca->counters().retries, 0u);
  advance(cm_time_ns(24));
  EXPECT_EQ(ca->counters().retries, 1u);
}

TEST_F(Pair, MraSentForAReqHoldsThePeerAndIsResent) {
  ASSERT_EQ(cb->listen(kSid, 1), 0);
  uint32_t passive = 0;
  b.react = [&](const Event &e) {
    if (e.kind == Event::kReqReceived) {
      passive = e.comm_id;
      EXPECT_EQ(cb->mra(e.comm_id, 24), 0);  // as the kernel's rdma_cm: 68 s
    }
  };
  uint32_t id;
  ASSERT_EQ(ca->connect(req(), b.gid, now, &id), 0);
  const auto first = a_out.front();
  run();
  ASSERT_NE(passive, 0u);
  // The REQ's timeout passes: A waits the MRA's time instead of resending.
  advance(req_wait() + 1);
  EXPECT_EQ(ca->counters().retries, 0u);
  EXPECT_EQ(state(*ca, id), State::kReqSent);
  // A resent REQ (our MRA lost) gets the MRA again, not a second event.
  const uint64_t tx = cb->counters().tx_mads;
  cb->receive(first.first, first.second.data(), first.second.size(), now);
  EXPECT_EQ(cb->counters().tx_mads, tx + 1);
  ASSERT_EQ(b_out.size(), 1u);
  EXPECT_EQ(b_out.front().second[16] << 8 | b_out.front().second[17], 0x0011);  // MRA
  EXPECT_EQ(b.count(Event::kReqReceived), 1u);
  run();
  EXPECT_EQ(cb->mra(id + 12345, 24), EINVAL);
  // The consumer answers late, within the MRA's time: connected.
  advance(cm_time_ns(22));
  EXPECT_EQ(cb->accept(passive, rep(), now), 0);
  a.react = [this](const Event &e) {
    if (e.kind == Event::kRepReceived) {
      EXPECT_EQ(ca->rtu(e.comm_id, nullptr, 0, now), 0);
    }
  };
  run();
  EXPECT_EQ(state(*ca, id), State::kEstablished);
  EXPECT_EQ(state(*cb, passive), State::kEstablished);
  EXPECT_EQ(cb->mra(passive, 24), EINVAL);  // only while the REQ waits
}

TEST_F(Pair, DuplicateReqIsReportedOnce) {
  ASSERT_EQ(cb->listen(kSid, 1), 0);
  uint32_t id;
  ASSERT_EQ(ca->connect(req(), b.gid, now, &id), 0);
  const auto first = a_out.front();
  run();
  cb->receive(first.first, first.second.data(), first.second.size(), now);  // resent REQ
  EXPECT_EQ(b.count(Event::kReqReceived), 1u);
  EXPECT_EQ(cb->connections(), 1u);
}

TEST_F(Pair, HalfOpenConnectionsAreBounded) {
  lim.max_half_open = 2;
  make();
  ASSERT_EQ(cb->listen(kSid, 1), 0);
  uint32_t id;
  for (uint32_t qpn = 20; qpn < 23; ++qpn)
    ASSERT_EQ(ca->connect(req(qpn), b.gid, now, &id), 0);
  run();
  EXPECT_EQ(b.count(Event::kReqReceived), 2u);
  ASSERT_EQ(a.count(Event::kRejected), 1u);
  EXPECT_EQ(a.events.back().reason, kRejNoResources);
  EXPECT_EQ(cb->counters().half_open_refused, 1u);
  // Answering one makes room again.
  EXPECT_EQ(cb->reject(b.events[0].comm_id, kRejConsumerDefined, nullptr, 0), 0);
  ASSERT_EQ(ca->connect(req(30), b.gid, now, &id), 0);
  run();
  EXPECT_EQ(b.count(Event::kReqReceived), 3u);
}

TEST_F(Pair, NewReqForAnEstablishedQpIsStale) {
  ASSERT_EQ(cb->listen(kSid, 1), 0);
  auto_answer();
  uint32_t id, id2;
  ASSERT_EQ(ca->connect(req(17), b.gid, now, &id), 0);
  run();
  ASSERT_TRUE(b.saw(Event::kEstablished));
  ASSERT_EQ(ca->connect(req(17), b.gid, now, &id2), 0);
  run();
  ASSERT_TRUE(a.saw(Event::kRejected));
  EXPECT_EQ(a.events.back().reason, kRejStaleConn);
}

TEST_F(Pair, SimultaneousDisconnectAndUnknownDreq) {
  ASSERT_EQ(cb->listen(kSid, 1), 0);
  auto_answer();
  uint32_t id;
  ASSERT_EQ(ca->connect(req(), b.gid, now, &id), 0);
  run();
  const uint32_t bid = b.events[0].comm_id;
  ASSERT_EQ(ca->disconnect(id, now), 0);
  ASSERT_EQ(cb->disconnect(bid, now), 0);  // before either DREQ arrives
  run();
  EXPECT_TRUE(a.saw(Event::kDisconnected));
  EXPECT_TRUE(b.saw(Event::kDisconnected));
  EXPECT_EQ(state(*ca, id), State::kTimewait);
  // A DREQ for nobody is answered with a DREP all the same.
  Dreq d;
  d.local_comm_id = 5;
  d.remote_comm_id = 0xDEAD;
  uint8_t mad[kMadSize];
  encode(d, 9, mad);
  b.sent_attrs.clear();
  cb->receive(a.gid, mad, sizeof mad, now);
  ASSERT_EQ(b.sent_attrs.size(), 1u);
  EXPECT_EQ(b.sent_attrs[0], static_cast<uint16_t>(AttrId::kDrep));
}

TEST_F(Pair, DreqWithoutAnswerStillDisconnects) {
  lim.max_retries = 2;
  make();
  ASSERT_EQ(cb->listen(kSid, 1), 0);
  auto_answer();
  uint32_t id;
  ASSERT_EQ(ca->connect(req(), b.gid, now, &id), 0);
  run();
  drop = [](uint16_t) { return true; };
  ASSERT_EQ(ca->disconnect(id, now), 0);
  for (int i = 0; i < 4 && !a.saw(Event::kDisconnected); ++i)
    advance(req_wait() + 1);
  EXPECT_TRUE(a.saw(Event::kDisconnected));
  EXPECT_EQ(state(*ca, id), State::kTimewait);
}

TEST_F(Pair, SidrResolvesAServiceToAQp) {
  const uint64_t usid = service_id(PortSpace::kUdp, 7174);
  ASSERT_EQ(cb->listen(usid, 3), 0);
  b.react = [this](const Event &e) {
    if (e.kind != Event::kSidrReqReceived) return;
    SidrRep p;
    p.qpn = 0x55;
    p.qkey = 0x01234567;
    EXPECT_EQ(cb->sidr_reply(e.comm_id, p), 0);
  };
  SidrReq q;
  q.service_id = usid;
  uint32_t id;
  ASSERT_EQ(ca->sidr_query(q, b.gid, now, &id), 0);
  run();
  ASSERT_EQ(a.events.size(), 1u);
  EXPECT_EQ(a.events[0].kind, Event::kSidrRepReceived);
  EXPECT_EQ(a.events[0].reason, kSidrOk);
  EXPECT_EQ(a.events[0].qpn, 0x55u);
  EXPECT_EQ(a.events[0].psn, 0x01234567u);  // the Q_Key
  q.service_id = service_id(PortSpace::kUdp, 1);
  ASSERT_EQ(ca->sidr_query(q, b.gid, now, &id), 0);
  run();
  EXPECT_EQ(a.events.back().reason, kSidrUnsupported);
  EXPECT_EQ(ca->connections(), 0u);
  EXPECT_EQ(cb->connections(), 0u);
}

TEST_F(Pair, BadMadsAndBadCallsAreRefused) {
  uint8_t junk[kMadSize] = {1, 0x04, 2, 3};
  cb->receive(a.gid, junk, sizeof junk, now);
  cb->receive(a.gid, junk, 10, now);
  EXPECT_EQ(cb->counters().rx_bad, 2u);
  uint32_t id;
  Req q = req();
  q.path_mtu = 7;
  EXPECT_EQ(ca->connect(q, b.gid, now, &id), EINVAL);
  q = req(0);
  EXPECT_EQ(ca->connect(q, b.gid, now, &id), EINVAL);
  EXPECT_EQ(ca->rtu(12345, nullptr, 0, now), EINVAL);
  EXPECT_EQ(cb->accept(12345, rep(), now), EINVAL);
  EXPECT_EQ(ca->disconnect(12345, now), EINVAL);
  EXPECT_EQ(cb->unlisten(99), ENOENT);
  // A REQ with an impossible MTU gets REJ 26.
  ASSERT_EQ(cb->listen(kSid, 1), 0);
  q = req();
  q.local_comm_id = 77;
  q.path_mtu = 9;
  uint8_t mad[kMadSize];
  encode(q, 1, mad);
  b.sent_attrs.clear();
  cb->receive(a.gid, mad, sizeof mad, now);
  ASSERT_EQ(b_out.size(), 1u);
  MadHeader h;
  Message m;
  ASSERT_EQ(decode(b_out.back().second.data(), kMadSize, &h, &m), DecodeError::kOk);
  EXPECT_EQ(std::get<Rej>(m).reason, kRejInvalidMtu);
  EXPECT_EQ(std::get<Rej>(m).remote_comm_id, 77u);
}

TEST_F(Pair, DestroyTellsThePeer) {
  ASSERT_EQ(cb->listen(kSid, 1), 0);
  auto_answer();
  uint32_t id;
  ASSERT_EQ(ca->connect(req(), b.gid, now, &id), 0);
  run();
  ca->destroy(id);
  run();
  EXPECT_TRUE(b.saw(Event::kDreqReceived));
  EXPECT_EQ(ca->connections(), 0u);
}

}  // namespace
}  // namespace uroce::cm
