// SPDX-License-Identifier: BSD-3-Clause
// The drop-in librdmacm.so.1 (doc/cm.md): rdma_cm's API over uroced's connection manager.
// The daemon keeps the connections (lib/daemon/cm_service.h); this library holds the app's side
// of each id and channel, moves the id's QP through INIT / RTR / RTS over the verbs shim with
// the parameters the CM negotiated, and turns the daemon's events into rdma_cm_events.
// A channel's fd is one end of an AF_UNIX datagram socket pair; the other end is given to each
// daemon the channel is used with, which sends a byte to it when it queues an event, so poll /
// epoll / O_NONBLOCK on channel->fd behave as with the kernel's rdma_cm.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ctl/client.h"
#include "uroce/ctl_cm.h"
#include "uroce/ctl_verbs.h"

#define UROCE_EXPORT extern "C" __attribute__((visibility("default")))

namespace uroce::rdmacm {

// One uroced (one verbs device): its own control connection, the shim's context for it.
struct Dev {
  std::string sock;
  ctl::Client cli;
  std::mutex mu;  // one request at a time on cli
  ibv_context *ctx = nullptr;
  ibv_pd *pd = nullptr;  // the default PD (rdma_create_qp with pd == NULL)
  ibv_device_attr attr{};
  uint8_t active_mtu = 3;  // IBTA enum
  // A CM request: 0 or -errno (the daemon's status, or -EIO when the channel broke).
  int call(uint16_t type, const void *p, size_t len, const int *fds, size_t nfds, void *rep,
           size_t rep_len);
};

struct Event;

struct Chan {
  rdma_event_channel ch{};            // first: the app's pointer is &ch
  int wake = -1;                      // the end the daemons write to
  std::map<Dev *, uint32_t> handles;  // the channel's handle in each daemon
  // Events a synchronous call took from the daemons that were not the one it waits for: the
  // next rdma_get_cm_event / rdma_get_request returns them first.
  std::mutex pending_mu;
  std::deque<Event *> pending;
};

struct Id {
  rdma_cm_id id{};  // first: the app's pointer is &id
  Dev *dev = nullptr;
  uint32_t handle = 0;  // 0: not yet known to a daemon
  Chan *chan = nullptr;
  uint16_t gid_index = 0;
  uint8_t peer_gid[16] = {};
  // The app's sin6_scope_id (bind, or resolve's source, else its destination, as the kernel's
  // cma_bind_addr): kept on the id's link-local addresses. uroce picks no device by it.
  uint32_t scope = 0;
  uint8_t tos = 0;
  bool tos_set = false;
  // The QP's ACK timeout: RDMA_OPTION_ID_ACK_TIMEOUT, the REQ's (passive side), or Linux's
  // default on RoCE (packet lifetime 18 + 1: 2.1 s; perftest -R and rping set none).
  uint8_t ack_timeout = 19;
  ibv_sa_path_rec path{};
  // The connection as negotiated: ours and the peer's. A REQ's / REP's starting PSN is the one
  // its sender's receive queue expects (IBTA 12.7; Linux's ib_cm): psn is our rq_psn, peer_psn
  // our sq_psn.
  uint32_t psn = 0, peer_qpn = 0, peer_psn = 0;
  uint8_t path_mtu = 3, resp_res = 0, init_depth = 0, retry = 7, rnr_retry = 7;
  // Synchronous ids (created without a channel; sync.cc): their calls wait for their event.
  bool sync = false;
  bool own_chan = false;  // the channel made for it, destroyed with it
  bool own_cqs = false;   // rdma_create_qp made the CQs and their completion channels
  // rdma_create_ep on a passive id: the QP each rdma_get_request creates.
  bool has_ep_attr = false;
  ibv_qp_init_attr ep_attr{};
  ibv_pd *ep_pd = nullptr;
};

struct Event {
  rdma_cm_event ev{};  // first: the app's pointer is &ev
  uint8_t priv[ctl::kCmPrivateMax] = {};
};

inline Id *to_id(rdma_cm_id *id) {
  return reinterpret_cast<Id *>(id);
}
inline int fail(int e) {  // errno = e, -1
  errno = e;
  return -1;
}
inline uint8_t clamp(uint8_t v, int max) {
  return static_cast<uint8_t>(v > max ? max : v);
}

// cma.cc
std::vector<Dev *> &devices();  // every daemon of UROCE_SOCKET, connected on first use
// qp.cc: the QP transitions the CM makes, from the id's negotiated parameters.
int qp_attr_for(Id *id, ibv_qp_state state, ibv_qp_attr *a, int *mask);
int modify_to(Id *id, ibv_qp_state state);  // 0 or errno
uint32_t random_psn();
// sync.cc: a synchronous id's call waits for its event (`want`): 0, or -1 with errno from the
// event that came instead (REJECTED: ECONNREFUSED, else the event's status). Events for other
// ids of the channel are kept in its pending queue.
int sync_wait(Id *id, rdma_cm_event_type want);
Event *pop_pending(Chan *c);         // the oldest pending event, or nullptr
void drop_pending(Chan *c, Id *id);  // acks the pending events of an id being destroyed
// rdma_migrate_id: the pending events of `id` (and its listener's CONNECT_REQUESTs) move.
void move_pending(Chan *from, Chan *to, Id *id);

}  // namespace uroce::rdmacm
