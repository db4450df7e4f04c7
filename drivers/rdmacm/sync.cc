// SPDX-License-Identifier: BSD-3-Clause
// Synchronous ids of the drop-in librdmacm (doc/cm.md): an id created without an event channel
// gets one of its own, and rdma_resolve_addr / rdma_resolve_route / rdma_connect / rdma_accept
// on it return once their event came (as librdmacm's ucma_complete); rdma_get_request waits for
// a listener's CONNECT_REQUEST; rdma_create_ep / rdma_destroy_ep (rdma_server, rdma_client).
#include <cerrno>
#include <cstring>

#include "rdmacm.h"

namespace uroce::rdmacm {

Event *pop_pending(Chan *c) {
  std::lock_guard<std::mutex> g(c->pending_mu);
  if (c->pending.empty()) return nullptr;
  Event *e = c->pending.front();
  c->pending.pop_front();
  return e;
}

void drop_pending(Chan *c, Id *id) {
  std::lock_guard<std::mutex> g(c->pending_mu);
  for (auto it = c->pending.begin(); it != c->pending.end();) {
    if ((*it)->ev.id == &id->id || (*it)->ev.listen_id == &id->id) {
      delete *it;
      it = c->pending.erase(it);
    } else {
      ++it;
    }
  }
}

void move_pending(Chan *from, Chan *to, Id *id) {
  std::deque<Event *> mine;
  {
    std::lock_guard<std::mutex> g(from->pending_mu);
    for (auto it = from->pending.begin(); it != from->pending.end();) {
      if ((*it)->ev.id == &id->id || (*it)->ev.listen_id == &id->id) {
        mine.push_back(*it);
        it = from->pending.erase(it);
      } else {
        ++it;
      }
    }
  }
  std::lock_guard<std::mutex> g(to->pending_mu);
  to->pending.insert(to->pending.end(), mine.begin(), mine.end());
}

namespace {

void keep_pending(Chan *c, rdma_cm_event *ev) {
  std::lock_guard<std::mutex> g(c->pending_mu);
  c->pending.push_back(reinterpret_cast<Event *>(ev));
}

// The next event of the channel that is not pending already (rdma_get_cm_event without the
// pending queue: the daemons only).
int next_from_daemons(Chan *c, rdma_cm_event **ev) {
  std::deque<Event *> held;
  {
    std::lock_guard<std::mutex> g(c->pending_mu);
    held.swap(c->pending);
  }
  const int rc = rdma_get_cm_event(&c->ch, ev);
  std::lock_guard<std::mutex> g(c->pending_mu);
  held.insert(held.end(), c->pending.begin(), c->pending.end());
  c->pending.swap(held);
  return rc;
}

}  // namespace

// The first CONNECT_REQUEST for `listen`: from the pending queue, else from the daemons (other
// events are kept pending); nullptr with errno set on an error (the listener's own event).
rdma_cm_event *next_request(Chan *c, rdma_cm_id *listen) {
  {
    std::lock_guard<std::mutex> g(c->pending_mu);
    for (auto it = c->pending.begin(); it != c->pending.end(); ++it)
      if ((*it)->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && (*it)->ev.listen_id == listen) {
        Event *e = *it;
        c->pending.erase(it);
        return &e->ev;
      }
  }
  for (;;) {
    rdma_cm_event *ev = nullptr;
    if (next_from_daemons(c, &ev) != 0) return nullptr;
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && ev->listen_id == listen) return ev;
    if (ev->id == listen) {  // the listener's own event (an error): the request fails
      const int st = ev->status;
      rdma_ack_cm_event(ev);
      errno = st < 0 ? -st : EPROTO;
      return nullptr;
    }
    keep_pending(c, ev);  // another id's: for that id's synchronous call
  }
}

int sync_wait(Id *id, rdma_cm_event_type want) {
  for (;;) {
    rdma_cm_event *ev = nullptr;
    if (next_from_daemons(id->chan, &ev) != 0) return -1;
    if (ev->id != &id->id || ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      keep_pending(id->chan, ev);
      continue;
    }
    const rdma_cm_event_type got = ev->event;
    const int status = ev->status;
    rdma_ack_cm_event(ev);
    if (got == want || (want == RDMA_CM_EVENT_ESTABLISHED && got == RDMA_CM_EVENT_CONNECT_RESPONSE))
      return 0;
    if (got == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
    if (status < 0) return fail(-status);
    return fail(status != 0 ? status : EPROTO);
  }
}

}  // namespace uroce::rdmacm

using namespace uroce::rdmacm;

UROCE_EXPORT int rdma_create_ep(rdma_cm_id **out, rdma_addrinfo *res, ibv_pd *pd,
                                ibv_qp_init_attr *qp_init_attr) {
  if (out == nullptr || res == nullptr) return fail(EINVAL);
  if (res->ai_family == AF_IB) return fail(EAFNOSUPPORT);
  rdma_cm_id *cid = nullptr;
  if (rdma_create_id(nullptr, &cid, nullptr, static_cast<rdma_port_space>(res->ai_port_space)) != 0)
    return -1;
  Id *id = to_id(cid);
  if (res->ai_qp_type != 0) cid->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
  // As librdmacm: the QP's type is the id's (rdma_client leaves it 0 in its attributes).
  if (qp_init_attr != nullptr) qp_init_attr->qp_type = cid->qp_type;
  int rc;
  if ((res->ai_flags & RAI_PASSIVE) != 0) {
    rc = rdma_bind_addr(cid, res->ai_src_addr);
    if (rc == 0 && qp_init_attr != nullptr) {
      id->has_ep_attr = true;
      id->ep_attr = *qp_init_attr;
      id->ep_pd = pd;
    }
  } else {
    rc = rdma_resolve_addr(cid, res->ai_src_len != 0 ? res->ai_src_addr : nullptr, res->ai_dst_addr,
                           2000);
    if (rc == 0) rc = rdma_resolve_route(cid, 2000);
    if (rc == 0 && qp_init_attr != nullptr) rc = rdma_create_qp(cid, pd, qp_init_attr);
  }
  if (rc != 0) {
    const int e = errno;
    rdma_destroy_id(cid);
    return fail(e);
  }
  *out = cid;
  return 0;
}

UROCE_EXPORT void rdma_destroy_ep(rdma_cm_id *cid) {
  if (cid == nullptr) return;
  rdma_destroy_qp(cid);
  rdma_destroy_id(cid);
}

UROCE_EXPORT int rdma_get_request(rdma_cm_id *listen, rdma_cm_id **out) {
  Id *lis = to_id(listen);
  if (lis == nullptr || out == nullptr || !lis->sync) return fail(EINVAL);
  rdma_cm_event *ev = next_request(lis->chan, listen);
  if (ev == nullptr) return -1;
  rdma_cm_id *cid = ev->id;
  to_id(cid)->sync = true;
  if (lis->has_ep_attr) {
    ibv_qp_init_attr a = lis->ep_attr;
    if (rdma_create_qp(cid, lis->ep_pd, &a) != 0) {
      const int e = errno;
      rdma_reject(cid, nullptr, 0);
      rdma_ack_cm_event(ev);
      rdma_destroy_id(cid);
      return fail(e);
    }
  }
  cid->event = ev;  // acked when the id goes, as librdmacm does
  *out = cid;
  return 0;
}
