// SPDX-License-Identifier: BSD-3-Clause
// The connection state machine: public calls (the consumer's side), then one on_* per message
// received, then the timers. What each message does in each state is the table in doc/cm.md.
#include "cm/cm.h"

#include <cerrno>
#include <cstring>

namespace uroce::cm {

const char *state_name(State s) noexcept {
  switch (s) {
    case State::kReqSent:
      return "REQ_SENT";
    case State::kReqRcvd:
      return "REQ_RCVD";
    case State::kRepSent:
      return "REP_SENT";
    case State::kRepRcvd:
      return "REP_RCVD";
    case State::kEstablished:
      return "ESTABLISHED";
    case State::kDreqSent:
      return "DREQ_SENT";
    case State::kDreqRcvd:
      return "DREQ_RCVD";
    case State::kTimewait:
      return "TIMEWAIT";
    case State::kSidrReqSent:
      return "SIDR_REQ_SENT";
    case State::kSidrReqRcvd:
      return "SIDR_REQ_RCVD";
  }
  return "?";
}

uint64_t cm_time_ns(uint8_t exp) noexcept {
  return 4096ull << (exp > 31 ? 31 : exp);  // 4096 ns = 4.096 us
}

Cm::Cm(Host &host, uint64_t ca_guid, uint64_t id_seed, Limits l)
    : host_(host), ca_guid_(ca_guid), rng_(id_seed), lim_(l) {}

uint32_t Cm::new_id() {
  for (;;) {  // splitmix64: comm ids are not guessable from the previous ones
    uint64_t z = (rng_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    const uint32_t id = static_cast<uint32_t>(z ^ (z >> 31));
    if (id != 0 && conns_.find(id) == conns_.end()) return id;
  }
}

Cm::Conn *Cm::find(uint32_t id) {
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : &it->second;
}

Cm::Conn *Cm::find_remote(const wire::Gid &peer, uint32_t remote_comm_id) {
  for (auto &[id, c] : conns_)
    if (c.remote_id == remote_comm_id && c.peer == peer) return &c;
  return nullptr;
}

bool Cm::state_of(uint32_t comm_id, State *s) const {
  auto it = conns_.find(comm_id);
  if (it == conns_.end()) return false;
  *s = it->second.state;
  return true;
}

size_t Cm::count_in(State s) const noexcept {
  size_t n = 0;
  for (const auto &[id, c] : conns_)
    n += c.state == s;
  return n;
}

void Cm::send_to(const wire::Gid &to, const Message &m, uint64_t tid) {
  uint8_t mad[kMadSize];
  encode(m, tid, mad);
  host_.send_mad(to, mad);
  ++c_.tx_mads;
}

// Sends `m` on the connection, remembers it for resending, and with `arm` starts its timer.
void Cm::send(Conn &c, const Message &m, uint64_t now, bool arm) {
  c.last = m;
  send_to(c.peer, m, c.tid);
  if (arm) {
    c.retries = 0;
    c.deadline = now + c.wait_ns;
  } else {
    c.deadline = 0;
  }
}

void Cm::rej_to(const wire::Gid &to, uint64_t tid, uint32_t local, uint32_t remote, uint8_t what,
                uint16_t reason) {
  Rej j;
  j.local_comm_id = local;
  j.remote_comm_id = remote;
  j.message_rejected = what;
  j.reason = reason;
  send_to(to, j, tid);
  ++c_.rej_sent;
}

void Cm::emit(Event::Kind k, Conn &c, const Message *m, uint16_t reason) {
  Event e{k};
  e.comm_id = c.local_id;
  e.listen_id = c.listen_id;
  e.reason = reason;
  e.peer = c.peer;
  if (m) {
    e.req = std::get_if<Req>(m);
    e.rep = std::get_if<Rep>(m);
    e.rej = std::get_if<Rej>(m);
    e.sidr_req = std::get_if<SidrReq>(m);
    e.sidr_rep = std::get_if<SidrRep>(m);
  }
  host_.on_event(e);
}

void Cm::enter_timewait(Conn &c, uint64_t now) {
  if (c.passive && (c.state == State::kReqRcvd || c.state == State::kRepSent)) --half_open_;
  c.state = State::kTimewait;
  c.deadline = now + lim_.timewait_ns;
}

// --- the consumer's calls --------------------------------------------------------------------

int Cm::listen(uint64_t service_id, uint32_t listen_id) {
  if (listeners_.count(service_id)) return EADDRINUSE;
  listeners_[service_id] = listen_id;
  return 0;
}

int Cm::unlisten(uint32_t listen_id) {
  for (auto it = listeners_.begin(); it != listeners_.end(); ++it)
    if (it->second == listen_id) {
      listeners_.erase(it);
      return 0;
    }
  return ENOENT;
}

int Cm::connect(const Req &req, const wire::Gid &peer, uint64_t now, uint32_t *comm_id) {
  if (req.local_qpn == 0 || req.local_qpn > 0xFFFFFF || req.path_mtu < 1 || req.path_mtu > 5 ||
      req.transport == Transport::kRd)
    return EINVAL;
  const uint32_t id = new_id();
  Conn &c = conns_[id];
  c.local_id = id;
  c.state = State::kReqSent;
  c.peer = peer;
  c.tid = (uint64_t{id} << 32) | 0x1;
  c.local_qpn = req.local_qpn;
  Req q = req;
  q.local_comm_id = id;
  q.local_ca_guid = ca_guid_;
  if (!q.remote_cm_response_timeout) q.remote_cm_response_timeout = lim_.response_timeout;
  if (!q.local_cm_response_timeout) q.local_cm_response_timeout = lim_.response_timeout;
  if (!q.max_cm_retries) q.max_cm_retries = lim_.max_retries & 0xF;
  c.max_retries = q.max_cm_retries;
  // IBTA 12.7.26: the peer's answer time plus a round trip of packet lifetimes.
  c.wait_ns = cm_time_ns(q.remote_cm_response_timeout) + 2 * cm_time_ns(lim_.packet_lifetime);
  send(c, q, now, true);
  *comm_id = id;
  return 0;
}

int Cm::rtu(uint32_t comm_id, const uint8_t *priv, size_t len, uint64_t now) {
  Conn *c = find(comm_id);
  if (!c || c->state != State::kRepRcvd) return EINVAL;
  if (len > kRtuPrivate) return EINVAL;
  Rtu r;
  r.local_comm_id = c->local_id;
  r.remote_comm_id = c->remote_id;
  if (len) std::memcpy(r.private_data.data(), priv, len);
  c->state = State::kEstablished;
  send(*c, r, now, false);
  return 0;
}

int Cm::sidr_query(const SidrReq &q, const wire::Gid &peer, uint64_t now, uint32_t *comm_id) {
  const uint32_t id = new_id();
  Conn &c = conns_[id];
  c.local_id = id;
  c.state = State::kSidrReqSent;
  c.peer = peer;
  c.tid = (uint64_t{id} << 32) | 0x2;
  c.max_retries = lim_.max_retries;
  c.wait_ns = cm_time_ns(lim_.response_timeout) + 2 * cm_time_ns(lim_.packet_lifetime);
  SidrReq s = q;
  s.request_id = id;
  send(c, s, now, true);
  *comm_id = id;
  return 0;
}

int Cm::accept(uint32_t comm_id, const Rep &rep, uint64_t now) {
  Conn *c = find(comm_id);
  if (!c || c->state != State::kReqRcvd) return EINVAL;
  if (rep.local_qpn == 0 || rep.local_qpn > 0xFFFFFF) return EINVAL;
  Rep p = rep;
  p.local_comm_id = c->local_id;
  p.remote_comm_id = c->remote_id;
  p.local_ca_guid = ca_guid_;
  c->local_qpn = p.local_qpn;
  c->state = State::kRepSent;
  send(*c, p, now, true);
  return 0;
}

int Cm::reject(uint32_t comm_id, uint16_t reason, const uint8_t *priv, size_t len) {
  Conn *c = find(comm_id);
  if (!c || (c->state != State::kReqRcvd && c->state != State::kRepRcvd)) return EINVAL;
  if (len > kRejPrivate) return EINVAL;
  Rej j;
  j.local_comm_id = c->local_id;
  j.remote_comm_id = c->remote_id;
  j.message_rejected = c->state == State::kReqRcvd ? 0 : 1;
  j.reason = reason;
  if (len) std::memcpy(j.private_data.data(), priv, len);
  send_to(c->peer, j, c->tid);
  ++c_.rej_sent;
  if (c->passive) --half_open_;
  conns_.erase(comm_id);
  return 0;
}

int Cm::mra(uint32_t comm_id, uint8_t service_timeout) {
  Conn *c = find(comm_id);
  if (!c || c->state != State::kReqRcvd) return EINVAL;
  Mra a;
  a.local_comm_id = c->local_id;
  a.remote_comm_id = c->remote_id;
  a.message_mraed = 0;
  a.service_timeout = service_timeout & 31;
  c->last = a;
  c->mra_sent = true;
  send_to(c->peer, a, c->tid);
  return 0;
}

int Cm::sidr_reply(uint32_t comm_id, const SidrRep &rep) {
  Conn *c = find(comm_id);
  if (!c || c->state != State::kSidrReqRcvd) return EINVAL;
  SidrRep p = rep;
  p.request_id = c->remote_id;
  send_to(c->peer, p, c->tid);
  conns_.erase(comm_id);
  return 0;
}

int Cm::disconnect(uint32_t comm_id, uint64_t now) {
  Conn *c = find(comm_id);
  if (!c) return EINVAL;
  if (c->state == State::kDreqRcvd) {  // answer the peer's DREQ
    Drep d;
    d.local_comm_id = c->local_id;
    d.remote_comm_id = c->remote_id;
    send(*c, d, now, false);
    enter_timewait(*c, now);
    return 0;
  }
  if (c->state != State::kEstablished) return EINVAL;
  Dreq d;
  d.local_comm_id = c->local_id;
  d.remote_comm_id = c->remote_id;
  d.remote_qpn = c->remote_qpn;
  c->state = State::kDreqSent;
  c->max_retries = lim_.max_retries;
  c->wait_ns = 2 * cm_time_ns(lim_.packet_lifetime) + cm_time_ns(lim_.response_timeout);
  send(*c, d, now, true);
  return 0;
}

void Cm::destroy(uint32_t comm_id) {
  Conn *c = find(comm_id);
  if (!c) return;
  switch (c->state) {
    case State::kReqSent:
    case State::kRepRcvd:
      rej_to(c->peer, c->tid, c->local_id, c->remote_id, c->state == State::kReqSent ? 2 : 1,
             kRejConsumerDefined);
      break;
    case State::kReqRcvd:
    case State::kRepSent:
      rej_to(c->peer, c->tid, c->local_id, c->remote_id, c->state == State::kReqRcvd ? 0 : 1,
             kRejConsumerDefined);
      --half_open_;
      break;
    case State::kEstablished: {
      Dreq d;
      d.local_comm_id = c->local_id;
      d.remote_comm_id = c->remote_id;
      d.remote_qpn = c->remote_qpn;
      send_to(c->peer, d, c->tid);
      break;
    }
    case State::kDreqRcvd: {
      Drep d;
      d.local_comm_id = c->local_id;
      d.remote_comm_id = c->remote_id;
      send_to(c->peer, d, c->tid);
      break;
    }
    default:
      break;
  }
  conns_.erase(comm_id);
}

}  // namespace uroce::cm
