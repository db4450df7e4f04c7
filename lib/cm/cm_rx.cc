// SPDX-License-Identifier: BSD-3-Clause
// The communication manager: what each received message does in each state, and the timers
// (retries, timeouts, time-wait). The table is in doc/cm.md.
#include <cerrno>

#include "cm/cm.h"

namespace uroce::cm {

void Cm::receive(const wire::Gid &from, const uint8_t *mad, size_t len, uint64_t now) {
  ++c_.rx_mads;
  MadHeader h;
  Message m;
  const DecodeError e = decode(mad, len, &h, &m);
  if (e != DecodeError::kOk) {
    ++c_.rx_bad;
    return;
  }
  std::visit(
      [&](const auto &msg) {
        using T = std::decay_t<decltype(msg)>;
        if constexpr (std::is_same_v<T, Req>)
          on_req(from, h.tid, msg);
        else if constexpr (std::is_same_v<T, Rep>)
          on_rep(from, h.tid, msg);
        else if constexpr (std::is_same_v<T, Rtu>)
          on_rtu(msg);
        else if constexpr (std::is_same_v<T, Rej>)
          on_rej(msg);
        else if constexpr (std::is_same_v<T, Mra>)
          on_mra(msg, now);
        else if constexpr (std::is_same_v<T, Dreq>)
          on_dreq(from, h.tid, msg, now);
        else if constexpr (std::is_same_v<T, Drep>)
          on_drep(msg, now);
        else if constexpr (std::is_same_v<T, SidrReq>)
          on_sidr_req(from, h.tid, msg);
        else if constexpr (std::is_same_v<T, SidrRep>)
          on_sidr_rep(msg);
      },
      m);
}

void Cm::on_req(const wire::Gid &from, uint64_t tid, const Req &q) {
  if (Conn *dup = find_remote(from, q.local_comm_id)) {                          // a resent REQ
    if (dup->state == State::kRepSent) send_to(dup->peer, dup->last, dup->tid);  // REP lost
    if (dup->state == State::kReqRcvd && dup->mra_sent)
      send_to(dup->peer, dup->last, dup->tid);  // our MRA was lost
    if (dup->state == State::kTimewait)
      rej_to(from, tid, dup->local_id, q.local_comm_id, 0, kRejStaleConn);
    return;  // kReqRcvd without an MRA: the consumer has not answered yet
  }
  for (auto &[id, c] : conns_)  // the same remote QP in another live connection: stale
    if (c.peer == from && c.remote_qpn == q.local_qpn && c.state != State::kSidrReqRcvd &&
        c.state != State::kSidrReqSent) {
      rej_to(from, tid, 0, q.local_comm_id, 0, kRejStaleConn);
      return;
    }
  auto l = listeners_.find(q.service_id);
  if (l == listeners_.end()) {
    rej_to(from, tid, 0, q.local_comm_id, 0, kRejInvalidServiceId);
    return;
  }
  if (q.transport == Transport::kRd || static_cast<uint8_t>(q.transport) > 2 || q.local_qpn == 0) {
    rej_to(from, tid, 0, q.local_comm_id, 0, kRejInvalidTransport);
    return;
  }
  if (q.path_mtu < 1 || q.path_mtu > 5) {
    rej_to(from, tid, 0, q.local_comm_id, 0, kRejInvalidMtu);
    return;
  }
  if (half_open_ >= lim_.max_half_open) {
    ++c_.half_open_refused;
    rej_to(from, tid, 0, q.local_comm_id, 0, kRejNoResources);
    return;
  }
  const uint32_t id = new_id();
  Conn &c = conns_[id];
  c.local_id = id;
  c.remote_id = q.local_comm_id;
  c.state = State::kReqRcvd;
  c.passive = true;
  c.peer = from;
  c.tid = tid;
  c.listen_id = l->second;
  c.remote_qpn = q.local_qpn;
  // The REP waits for the RTU as long as the REQ said the active side answers, plus a round
  // trip of packet lifetimes; a hostile REQ cannot make a half-open connection live for hours.
  c.max_retries = q.max_cm_retries < lim_.max_retries ? q.max_cm_retries : lim_.max_retries;
  const uint8_t t = q.local_cm_response_timeout < lim_.max_peer_timeout
                        ? q.local_cm_response_timeout
                        : lim_.max_peer_timeout;
  c.wait_ns = cm_time_ns(t) + 2 * cm_time_ns(lim_.packet_lifetime);
  ++half_open_;
  const Message m = q;
  emit(Event::kReqReceived, c, &m);
}

void Cm::on_rep(const wire::Gid &from, uint64_t tid, const Rep &p) {
  Conn *c = find(p.remote_comm_id);
  if (!c || !(c->peer == from)) {
    ++c_.rx_unmatched;
    rej_to(from, tid, 0, p.local_comm_id, 1, kRejInvalidCommId);
    return;
  }
  if (c->state == State::kEstablished && c->remote_id == p.local_comm_id) {
    send_to(c->peer, c->last, c->tid);  // our RTU was lost: resend it
    return;
  }
  if (c->state != State::kReqSent) return;
  c->remote_id = p.local_comm_id;
  c->remote_qpn = p.local_qpn;
  c->state = State::kRepRcvd;
  c->deadline = 0;
  const Message m = p;
  emit(Event::kRepReceived, *c, &m);
}

void Cm::on_rtu(const Rtu &r) {
  Conn *c = find(r.remote_comm_id);
  if (!c || c->state != State::kRepSent || c->remote_id != r.local_comm_id) {
    ++c_.rx_unmatched;
    return;
  }
  c->state = State::kEstablished;
  c->deadline = 0;
  --half_open_;
  emit(Event::kEstablished, *c);
}

void Cm::on_rej(const Rej &j) {
  Conn *c = find(j.remote_comm_id);
  if (!c || (c->state != State::kReqSent && c->state != State::kRepSent &&
             c->state != State::kRepRcvd && c->state != State::kReqRcvd)) {
    ++c_.rx_unmatched;
    return;
  }
  if (c->passive) --half_open_;
  const Message m = j;
  emit(Event::kRejected, *c, &m, j.reason);
  conns_.erase(c->local_id);
}

void Cm::on_mra(const Mra &a, uint64_t now) {
  Conn *c = find(a.remote_comm_id);
  const bool for_req = a.message_mraed == 0 && c && c->state == State::kReqSent;
  const bool for_rep = a.message_mraed == 1 && c && c->state == State::kRepSent;
  if (!for_req && !for_rep) {
    ++c_.rx_unmatched;
    return;
  }
  // The peer needs service_timeout more: wait that long (capped, and a round trip) before
  // resending.
  const uint8_t t =
      a.service_timeout < lim_.max_peer_timeout ? a.service_timeout : lim_.max_peer_timeout;
  c->deadline = now + cm_time_ns(t) + 2 * cm_time_ns(lim_.packet_lifetime);
}

void Cm::on_dreq(const wire::Gid &from, uint64_t tid, const Dreq &d, uint64_t now) {
  Conn *c = find(d.remote_comm_id);
  if (!c || !(c->peer == from) || c->remote_id != d.local_comm_id ||
      (c->local_qpn && d.remote_qpn != c->local_qpn)) {
    ++c_.rx_unmatched;
    Drep r;  // IBTA 12.9.8.4: a DREQ for no connection is still answered
    r.local_comm_id = d.remote_comm_id;
    r.remote_comm_id = d.local_comm_id;
    send_to(from, r, tid);
    return;
  }
  switch (c->state) {
    case State::kRepSent:  // the RTU was lost; the DREQ shows the peer was established
      --half_open_;
      [[fallthrough]];
    case State::kEstablished:
      c->state = State::kDreqRcvd;
      c->deadline = 0;
      emit(Event::kDreqReceived, *c);
      break;
    case State::kDreqSent: {  // both sides disconnect at once: answer, and we are done too
      Drep r;
      r.local_comm_id = c->local_id;
      r.remote_comm_id = c->remote_id;
      send(*c, r, now, false);
      enter_timewait(*c, now);
      emit(Event::kDisconnected, *c);
      break;
    }
    case State::kTimewait:  // our DREP was lost
      if (std::holds_alternative<Drep>(c->last)) send_to(c->peer, c->last, c->tid);
      break;
    default:
      break;
  }
}

void Cm::on_drep(const Drep &d, uint64_t now) {
  Conn *c = find(d.remote_comm_id);
  if (!c || c->state != State::kDreqSent || c->remote_id != d.local_comm_id) {
    ++c_.rx_unmatched;
    return;
  }
  enter_timewait(*c, now);
  emit(Event::kDisconnected, *c);
}

void Cm::on_sidr_req(const wire::Gid &from, uint64_t tid, const SidrReq &q) {
  auto l = listeners_.find(q.service_id);
  if (l == listeners_.end()) {
    SidrRep p;
    p.request_id = q.request_id;
    p.status = kSidrUnsupported;
    p.service_id = q.service_id;
    send_to(from, p, tid);
    return;
  }
  if (find_remote(from, q.request_id)) return;  // a resent SIDR_REQ still being answered
  const uint32_t id = new_id();
  Conn &c = conns_[id];
  c.local_id = id;
  c.remote_id = q.request_id;
  c.state = State::kSidrReqRcvd;
  c.passive = true;
  c.peer = from;
  c.tid = tid;
  c.listen_id = l->second;
  const Message m = q;
  emit(Event::kSidrReqReceived, c, &m);
}

void Cm::on_sidr_rep(const SidrRep &p) {
  Conn *c = find(p.request_id);
  if (!c || c->state != State::kSidrReqSent) {
    ++c_.rx_unmatched;
    return;
  }
  const Message m = p;
  emit(Event::kSidrRepReceived, *c, &m);
  conns_.erase(c->local_id);
}

void Cm::poll(uint64_t now) {
  for (auto it = conns_.begin(); it != conns_.end();) {
    Conn &c = it->second;
    if (c.deadline == 0 || now < c.deadline) {
      ++it;
      continue;
    }
    if (c.state == State::kTimewait) {
      emit(Event::kTimewaitExit, c);
      it = conns_.erase(it);
      continue;
    }
    if (c.retries < c.max_retries) {  // resend REQ / REP / DREQ / SIDR_REQ
      ++c.retries;
      ++c_.retries;
      send_to(c.peer, c.last, c.tid);
      c.deadline = now + c.wait_ns;
      ++it;
      continue;
    }
    ++c_.timeouts;
    if (c.state == State::kDreqSent) {  // the peer never answered: disconnected all the same
      enter_timewait(c, now);
      emit(Event::kDisconnected, c);
      ++it;
      continue;
    }
    if (c.state == State::kReqSent || c.state == State::kRepSent)
      rej_to(c.peer, c.tid, c.local_id, c.remote_id, c.state == State::kReqSent ? 2 : 1,
             kRejTimeout);
    if (c.state == State::kRepSent) --half_open_;
    emit(Event::kTimeout, c);
    it = conns_.erase(it);
  }
}

}  // namespace uroce::cm
