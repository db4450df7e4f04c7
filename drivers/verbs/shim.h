// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: the drop-in libibverbs.so.1 (doc/verbs.md). Internal declarations.
//
// Every object an application receives is the rdma-core structure it expects (ibv_device,
// ibv_context inside a verbs_context, ibv_pd, ibv_mr, ibv_cq_ex, ibv_qp_ex, ibv_srq, ibv_ah,
// ibv_comp_channel) as the FIRST member of a shim object, so a pointer the app hands back is
// turned into the shim object by a cast. The shim objects carry the lib/client handles.
#pragma once

#pragma GCC visibility push(default)
#include <infiniband/verbs.h>
#pragma GCC visibility pop

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "client/client.h"
#include "uroce/ctl_verbs.h"

#define UV_EXPORT extern "C" __attribute__((visibility("default")))

namespace uroce::verbs {

// Control calls wait at most this long (modify_qp to RTR and create_ah may wait for ARP).
inline constexpr int kCtlTimeoutMs = client::kDefaultTimeoutMs;
// How long ibv_get_device_list waits for one live daemon (absent ones fail at once: no socket
// or ECONNREFUSED). Generous: a daemon on a loaded machine may answer late.
inline constexpr int kProbeTimeoutMs = 10000;

// A small spinlock for the data path (rdma-core providers use pthread spinlocks the same way).
class Spin {
 public:
  void lock() noexcept {
    while (f_.exchange(true, std::memory_order_acquire))
      while (f_.load(std::memory_order_relaxed))
        __builtin_ia32_pause();
  }
  void unlock() noexcept { f_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> f_{false};
};

// One verbs device = one uroced control socket (the daemon's first port). Devices live for the
// life of the process (a device pointer stays valid after ibv_free_device_list, as rdma-core's
// refcounted devices do while a context is open).
struct Device {
  ibv_device dev;  // first: what the app sees
  // Where rdma-core's verbs_device keeps its provider ops (provider libraries such as libmlx5
  // compare it with their own to recognise their devices, e.g. mlx5dv_is_supported): never a
  // provider's, so they all answer "not mine".
  const void *provider_ops;
  uint64_t pad[8];  // rest of verbs_device (refcount, list node, sysfs, core_support)
  char socket[108];
  uint64_t guid;  // network order, as ibv_get_device_guid returns
  int index;
};

struct Cq;
struct Qp;
struct Srq;

struct Context {
  verbs_context vctx;  // first; its last member is the ibv_context the app sees
  Device *dev = nullptr;
  std::unique_ptr<client::Context> cli;
  std::mutex ctl_mu;  // control calls (lib/client is not thread-safe)
  Spin db_mu;         // doorbell pushes: the context's doorbell ring has a single producer
  ctl::DeviceAttrPayload dattr{};
  // Objects by daemon handle, for async events (under ctl_mu).
  std::unordered_map<uint32_t, Qp *> qps;
  std::unordered_map<uint32_t, Cq *> cqs;
  std::unordered_map<uint32_t, Srq *> srqs;
  // Async events fetched from the daemon, not yet returned (under async_mu). ctx->async_fd is
  // async_ep, an epoll instance over the daemon's async eventfd and async_pending (an eventfd
  // kept readable exactly while async_q is not empty): readable while an event can be read, and
  // its file flags (O_NONBLOCK) are the app's (doc/verbs.md, "Async events").
  std::mutex async_mu;
  std::deque<ctl::AsyncEventEntry> async_q;
  int async_ep = -1;
  int async_pending = -1;
  bool pending_set = false;
  int cmd_fd = -1;  // ctx->cmd_fd: a duplicate of the control socket
  ~Context();
};

// Which kind of object an async event names.
enum class EventObj { kNone, kQp, kCq, kSrq };
// Drops the events not yet returned by ibv_get_async_event for an object being destroyed, as
// the kernel does (ib_uverbs_release_uevent): called once the daemon destroyed it.
void purge_async_events(Context *c, EventObj kind, uint32_t handle) noexcept;  // device.cc

inline Context *ctx_of(ibv_context *c) noexcept {
  return reinterpret_cast<Context *>(reinterpret_cast<char *>(c) -
                                     offsetof(verbs_context, context));
}

struct Pd {
  ibv_pd pd;
  uint32_t handle;
};

struct Mr {
  ibv_mr mr;
  client::Mr cmr;
  uint64_t page_start = 0, page_end = 0;  // the remapped page range this MR holds a reference on
  unsigned access = 0;                    // as registered (ibv_rereg_mr keeps it)
};

struct CompChannel {
  ibv_comp_channel ch;  // ch.fd is an epoll fd over the eventfds of its CQs
};

struct Cq {
  ibv_cq_ex cq;  // first; starts with the ibv_cq layout (ibv_cq_ex_to_cq is a cast)
  Context *ctx = nullptr;
  std::unique_ptr<client::Cq> c;
  Spin mu;                // pollers (ibv_poll_cq, start_poll .. end_poll)
  uint64_t wc_flags = 0;  // ibv_create_cq_ex's wc_flags (what read_* may be asked)
  // start_poll .. end_poll (under mu): CQE slots peeked in the CQ ring and read in place; the
  // current one is slot `pos` of the `npeek` peeked; they are consumed at end_poll (or when
  // next_poll moves past the last).
  const abi::Cqe *cur = nullptr;
  uint32_t pos = 0, npeek = 0;
  uint32_t comp_events = 0;   // delivered by ibv_get_cq_event (under cq.mutex)
  uint32_t async_events = 0;  // delivered by ibv_get_async_event (under cq.mutex)
};

struct Qp {
  ibv_qp_ex qpx;  // first; starts with ibv_qp
  Context *ctx = nullptr;
  std::unique_ptr<client::Qp> c;
  uint32_t pd_handle = 0;
  uint64_t send_ops_flags = 0;
  uint32_t async_events = 0;
  // Posting locks the queue, not the context (as rdma-core's providers): sq_mu for
  // ibv_post_send and wr_start .. wr_complete, rq_mu for ibv_post_recv.
  Spin sq_mu, rq_mu;
  // ibv_wr_* (under sq_mu): WRs are written into SQ slots reserved one by one and published
  // together at wr_complete; wr_abort leaves them unpublished (the next post overwrites them).
  uint8_t *wr_slot = nullptr;  // the slot of the WR being built (nullptr: none yet)
  uint32_t wr_n = 0;           // slots reserved and filled since wr_start
  uint32_t wr_flags = 0;       // send_flags of the WR being built
  bool wr_data = false;        // its SGEs / inline data were set
  int wr_err = 0;              // first error since wr_start (wr_complete returns it)
};

struct Srq {
  ibv_srq srq;
  Context *ctx = nullptr;
  std::unique_ptr<client::Srq> c;
  Spin mu;  // posts (ibv_post_srq_recv)
  uint32_t max_wr = 0, max_sge = 0, limit = 0;
  uint32_t async_events = 0;
};

struct Ah {
  ibv_ah ah;
  uint32_t handle;
};

// ---- helpers shared by the translation units ----
// Sets errno and returns nullptr (the verbs convention for object-returning calls).
template <class T = void>
inline T *fail_null(int err) noexcept {
  errno = err;
  return nullptr;
}

// A control call under the context's control lock (lib/client is not thread-safe).
template <class F>
int ctl_call(Context *c, F &&f) {
  std::lock_guard<std::mutex> g(c->ctl_mu);
  return f(*c->cli);
}
inline Cq *cq_of(ibv_cq *cq) noexcept {
  return reinterpret_cast<Cq *>(cq);
}
inline Qp *qp_of(ibv_qp *qp) noexcept {
  return reinterpret_cast<Qp *>(qp);
}
inline Srq *srq_of(ibv_srq *s) noexcept {
  return reinterpret_cast<Srq *>(s);
}
inline uint32_t pd_handle(ibv_pd *pd) noexcept {
  return reinterpret_cast<Pd *>(pd)->handle;
}

void fill_context_ops(Context *c) noexcept;  // post.cc
// Memory windows (mw.cc): the context's alloc_mw / dealloc_mw / bind_mw ops.
ibv_mw *alloc_mw_op(ibv_pd *pd, ibv_mw_type type);
int dealloc_mw_op(ibv_mw *mw);
int bind_mw_op(ibv_qp *qp, ibv_mw *mw, ibv_mw_bind *b);
// After writing k WRs into reserved SQ slots (under sq_mu): publishes them, and rings the
// QP's doorbell if its notification token was idle.
void publish_sq(Qp *q, size_t k) noexcept;  // post.cc
// Whether ibv_post_send may post on q now: not in RESET, INIT or RTR (in ERR its WRs are
// flushed).
inline bool send_state_ok(const Qp *q) noexcept {
  return q->c->state >= 3 && q->c->state != 7;
}
void install_ex_ops(Qp *q) noexcept;                            // wr.cc
void install_cq_ex_ops(Cq *c) noexcept;                         // poll.cc
int poll_cq_op(ibv_cq *cq, int n, ibv_wc *wc) noexcept;         // poll.cc
int req_notify_cq_op(ibv_cq *cq, int solicited_only) noexcept;  // poll.cc
// Removes the completions of QP `qpn` not yet polled from q (a QP moved to RESET, as rdma-core's
// mlx5 provider cleans its CQs then).
void clean_cq(Cq *q, uint32_t qpn) noexcept;                                       // poll.cc
ibv_cq_ex *create_cq_ex_op(ibv_context *ctx, ibv_cq_init_attr_ex *attr) noexcept;  // cq.cc
ibv_qp *create_qp_ex_op(ibv_context *ctx, ibv_qp_init_attr_ex *attr) noexcept;     // qp.cc
int modify_qp_rate_limit_op(ibv_qp *qp, ibv_qp_rate_limit_attr *attr) noexcept;    // qp.cc
ibv_srq *create_srq_ex_op(ibv_context *ctx, ibv_srq_init_attr_ex *attr) noexcept;  // srq.cc
void to_ah_payload(const ibv_ah_attr &a, ctl::AhAttrPayload *p) noexcept;          // ah.cc
void from_ah_payload(const ctl::AhAttrPayload &p, ibv_ah_attr *a) noexcept;        // ah.cc
int query_port_op(ibv_context *ctx, uint8_t port, ibv_port_attr *attr, size_t len) noexcept;
int query_device_ex_op(ibv_context *ctx, const ibv_query_device_ex_input *in,
                       ibv_device_attr_ex *attr, size_t len) noexcept;  // device.cc

}  // namespace uroce::verbs
