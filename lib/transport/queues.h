// SPDX-License-Identifier: BSD-3-Clause
// Queue backends: the policy the engine is a template over (EngineCoreT<Q>, Engine<Port, Clk,
// Q>). Q names the send queue, the receive queue (of a QP or an SRQ) and the completion queue,
// and the memory each is created over. The operations every backend provides, and why, are in
// doc/ipc.md ("One queue, one copy: design"):
//   Sq: init / release, head (one past the last WQE the engine holds a copy of), tail, pull
//       (copy newly published WQEs in), at / sges / inl (the engine's state of WQE c), pop
//       (the oldest WR completed: free its slot), full / push (private backend: post_send)
//   Rq: init / release, count, take (copy one receive WQE and check it), done (the WR taken
//       last completed), post (private backend)
//   Cq: init / release, push (one completion, arm / notify), poll / arm / take_events
// PrivateQueues: the engine's own rings (wq.h, cq.h). RingQueues (ring_queues.h): the ABI
// rings of include/uroce/ring.h shared with the app.
#pragma once

#include "transport/cq.h"
#include "transport/wq.h"

namespace uroce::transport {

struct PrivateQueues {
  using Sq = SendQueue;
  using Rq = RecvQueue;
  using Cq = CompletionQueue;
  struct QpMem {};                        // what create_qp needs beyond QpInitAttr: nothing
  struct CqMem {};                        // create_cq
  struct SrqMem {};                       // create_srq
  static constexpr bool kShared = false;  // WQEs come through post_send / post_recv

  static bool init_sq(Sq &q, const QpCap &c, const QpMem &) {
    q.init(c.max_send_wr, c.max_send_sge, c.max_inline_data);
    return true;
  }
  static bool init_rq(Rq &q, const QpCap &c, const QpMem &) {
    q.init(c.max_recv_wr, c.max_recv_sge);
    return true;
  }
  static bool init_srq(Rq &q, uint32_t max_wr, uint32_t max_sge, const SrqMem &) {
    q.init(max_wr, max_sge);
    return true;
  }
  static bool init_cq(Cq &q, uint32_t depth, const CqMem &) {
    q.init(depth);
    return true;
  }
};

}  // namespace uroce::transport
