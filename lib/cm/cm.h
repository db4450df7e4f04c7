// SPDX-License-Identifier: BSD-3-Clause
// The communication manager of one port (IBTA 12.9): connections set up with REQ / REP / RTU,
// refused with REJ, delayed with MRA, torn down with DREQ / DREP and kept in time-wait, and
// service id resolution for UD (SIDR). Plain C++ on a clock the caller passes in (ns) and a
// host that sends MADs and receives events; the daemon runs it on QP 1, tests on a fake link.
// States, timers and what each message does in each state: doc/cm.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "cm/msg.h"

namespace uroce::cm {

// REJ reasons (IBTA Table 109) uroce sends or reports.
enum RejReason : uint16_t {
  kRejNoQp = 1,
  kRejNoResources = 3,
  kRejTimeout = 4,
  kRejInvalidCommId = 6,
  kRejInvalidServiceId = 8,
  kRejInvalidTransport = 9,
  kRejStaleConn = 10,
  kRejInvalidMtu = 26,
  kRejConsumerDefined = 28,
};
// SIDR_REP status (IBTA Table 121).
enum SidrStatus : uint8_t { kSidrOk = 0, kSidrUnsupported = 1, kSidrRejected = 2, kSidrNoQp = 3 };

enum class State : uint8_t {
  kReqSent,      // active: REQ sent, waiting for REP / REJ / MRA
  kReqRcvd,      // passive: REQ reported, waiting for accept / reject
  kRepSent,      // passive: REP sent, waiting for RTU
  kRepRcvd,      // active: REP reported, waiting for the consumer's RTU
  kEstablished,  // both
  kDreqSent,     // DREQ sent, waiting for DREP
  kDreqRcvd,     // DREQ reported, waiting for the consumer's DREP
  kTimewait,     // disconnected; the comm id and the QP stay reserved for a while
  kSidrReqSent,  // active SIDR
  kSidrReqRcvd,  // passive SIDR: reported, waiting for the consumer's SIDR_REP
};
const char *state_name(State s) noexcept;

// What happened; the message pointers are valid during Host::on_event only.
struct Event {
  enum Kind : uint8_t {
    kReqReceived,      // passive: a REQ for a listener (req); accept() or reject()
    kRepReceived,      // active: the REP (rep); move the QP to RTS, then rtu()
    kEstablished,      // passive: the RTU arrived (or the first data-path DREQ implied it)
    kRejected,         // the peer sent REJ (rej, reason)
    kTimeout,          // no answer after every retry (a REJ with reason Timeout was sent)
    kDreqReceived,     // the peer disconnects; disconnect() answers with DREP
    kDisconnected,     // our DREQ was answered, or its retries ran out
    kTimewaitExit,     // the connection is gone; its comm id may be freed by the consumer
    kSidrReqReceived,  // passive: a SIDR_REQ for a listener (sidr_req); sidr_reply()
    kSidrRepReceived,  // active: the answer (sidr_rep)
  } kind;
  uint32_t comm_id = 0;    // the local id of the connection (or SIDR request)
  uint32_t listen_id = 0;  // for kReqReceived / kSidrReqReceived
  uint16_t reason = 0;     // kRejected: the peer's reason
  wire::Gid peer;
  const Req *req = nullptr;
  const Rep *rep = nullptr;
  const Rej *rej = nullptr;
  const SidrReq *sidr_req = nullptr;
  const SidrRep *sidr_rep = nullptr;
};

class Host {
 public:
  virtual void send_mad(const wire::Gid &to, const uint8_t *mad) = 0;  // kMadSize bytes
  virtual void on_event(const Event &e) = 0;

 protected:
  ~Host() = default;
};

struct Limits {
  uint32_t max_half_open = 256;  // passive connections in kReqRcvd / kRepSent
  uint64_t timewait_ns = 1'000'000'000ull;
  uint8_t packet_lifetime = 18;   // 4.096 us x 2^n (rdma_cm's RoCE value)
  uint8_t response_timeout = 20;  // our CM's answer time, sent in REQ / MRA (4.3 s)
  uint8_t max_retries = 15;       // resends of REQ / REP / DREQ / SIDR_REQ
  uint8_t max_peer_timeout = 23;  // a peer's response timeout is capped here (34 s)
};

struct Counters {
  uint64_t rx_mads = 0, rx_bad = 0, rx_unmatched = 0, tx_mads = 0, retries = 0, timeouts = 0,
           rej_sent = 0, half_open_refused = 0;
};

// 4.096 us x 2^exp, in ns (exp above 31 is capped).
uint64_t cm_time_ns(uint8_t exp) noexcept;

class Cm {
 public:
  Cm(Host &host, uint64_t ca_guid, uint64_t id_seed, Limits l = {});

  // Listeners: 0, EADDRINUSE (the service id has one), ENOENT.
  int listen(uint64_t service_id, uint32_t listen_id);
  int unlisten(uint32_t listen_id);

  // Active side. `req`: everything but local_comm_id / local_ca_guid, which Cm fills (and the
  // timeouts and retries, from Limits when left 0). Sends the REQ; 0 and *comm_id, or EINVAL.
  int connect(const Req &req, const wire::Gid &peer, uint64_t now, uint32_t *comm_id);
  int rtu(uint32_t comm_id, const uint8_t *priv, size_t len, uint64_t now);  // kRepRcvd
  int sidr_query(const SidrReq &q, const wire::Gid &peer, uint64_t now, uint32_t *comm_id);

  // Passive side: answers to kReqReceived / kSidrReqReceived.
  int accept(uint32_t comm_id, const Rep &rep, uint64_t now);  // kReqRcvd -> kRepSent
  int reject(uint32_t comm_id, uint16_t reason, const uint8_t *priv, size_t len);
  int sidr_reply(uint32_t comm_id, const SidrRep &rep);
  // kReqRcvd: an MRA for the REQ (the answer may take 4.096 us x 2^service_timeout), as the
  // kernel's rdma_cm sends when it hands a REQ to its consumer; a resent REQ then gets the MRA
  // again. 0 or EINVAL.
  int mra(uint32_t comm_id, uint8_t service_timeout);

  // Established / kDreqRcvd: DREQ (or the DREP that answers the peer's DREQ).
  int disconnect(uint32_t comm_id, uint64_t now);
  // Forgets the connection at once, telling the peer what its state calls for (REJ before
  // establishment, DREQ after). No event follows.
  void destroy(uint32_t comm_id);

  void receive(const wire::Gid &from, const uint8_t *mad, size_t len, uint64_t now);
  void poll(uint64_t now);  // retries, timeouts, time-wait

  bool state_of(uint32_t comm_id, State *s) const;
  size_t connections() const noexcept { return conns_.size(); }
  size_t count_in(State s) const noexcept;  // connections in state s
  const Counters &counters() const noexcept { return c_; }

 private:
  struct Conn {
    uint32_t local_id = 0;
    uint32_t remote_id = 0;
    State state = State::kReqSent;
    bool passive = false;
    wire::Gid peer;
    uint64_t tid = 0;  // of the REQ (or SIDR_REQ): every message of the exchange echoes it
    uint32_t listen_id = 0;
    uint32_t local_qpn = 0;
    uint32_t remote_qpn = 0;
    Message last;           // what a timeout or a duplicate resends (REQ, REP, RTU, DREQ, DREP)
    uint64_t deadline = 0;  // 0: no timer
    uint64_t wait_ns = 0;   // one try's wait
    uint8_t retries = 0;
    uint8_t max_retries = 0;
    bool mra_sent = false;  // kReqRcvd: `last` is our MRA
  };
  uint32_t new_id();
  void send(Conn &c, const Message &m, uint64_t now, bool arm);
  void send_to(const wire::Gid &to, const Message &m, uint64_t tid);
  void rej_to(const wire::Gid &to, uint64_t tid, uint32_t local, uint32_t remote, uint8_t what,
              uint16_t reason);
  void emit(Event::Kind k, Conn &c, const Message *m = nullptr, uint16_t reason = 0);
  void enter_timewait(Conn &c, uint64_t now);
  Conn *find(uint32_t id);
  Conn *find_remote(const wire::Gid &peer, uint32_t remote_comm_id);
  void on_req(const wire::Gid &from, uint64_t tid, const Req &q);
  void on_rep(const wire::Gid &from, uint64_t tid, const Rep &p);
  void on_rtu(const Rtu &r);
  void on_rej(const Rej &j);
  void on_mra(const Mra &a, uint64_t now);
  void on_dreq(const wire::Gid &from, uint64_t tid, const Dreq &d, uint64_t now);
  void on_drep(const Drep &d, uint64_t now);
  void on_sidr_req(const wire::Gid &from, uint64_t tid, const SidrReq &q);
  void on_sidr_rep(const SidrRep &p);

  Host &host_;
  uint64_t ca_guid_;
  uint64_t rng_;
  Limits lim_;
  Counters c_;
  uint32_t half_open_ = 0;
  std::unordered_map<uint64_t, uint32_t> listeners_;  // service id -> listen id
  std::unordered_map<uint32_t, Conn> conns_;          // local comm id -> connection
};

}  // namespace uroce::cm
