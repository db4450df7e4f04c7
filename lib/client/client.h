// SPDX-License-Identifier: BSD-3-Clause
// lib/client: the app side of uroced (used by the verbs shim and by tests). doc/client.md.
//
// A Context is one connection to uroced (one daemon session): control calls go over the
// control socket (bounded waits), and the data path touches only shared memory:
//   post_send / post_recv / post_srq_recv write a WQE into the QP's ring and, when the ring's
//   notification token was idle, push a doorbell (no syscall);
//   poll_cq reads CQEs from the CQ ring (no syscall); req_notify_cq arms the CQ and
//   wait_cq_event sleeps on the CQ's eventfd.
// Errors: 0 or a positive errno, as verbs.
//
// Doorbells go straight to the daemon worker that owns the QP: a context has one doorbell ring
// per worker (the QPN names it: abi::doorbell_ring), each with its own eventfd to wake that
// worker if it sleeps (ring 0's from kOpenContext, the others' with the first QP on them).
// Threading: a Context and its objects are NOT thread-safe: every post on any QP of a context
// may push to one of the context's doorbell rings (single producer each). The verbs shim writes
// the rings itself, under a lock per queue, and serialises only the doorbell pushes per
// context; tests use one thread per Context.
// Lifetime: objects (Cq, Qp, Srq) must be destroyed before their Context; a Context that is
// closed (or whose process dies) has all of its resources freed by the daemon.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ctl/client.h"
#include "shm/eventfd.h"
#include "shm/memfd.h"
#include "uroce/abi.h"
#include "uroce/ctl_verbs.h"
#include "uroce/ring.h"

namespace uroce::client {

inline constexpr int kDefaultTimeoutMs = 30'000;  // modify_qp may wait for ARP / ND

// Memory an app registers: a memfd (sealed against shrinking and growing) mapped read-write.
// The verbs shim remaps existing app memory instead (shm::Mapping::replace); tests use this.
struct Buffer {
  shm::Memfd memfd;
  shm::Mapping map;
  static int create(size_t len, Buffer *out) noexcept;
  uint8_t *data() const noexcept { return reinterpret_cast<uint8_t *>(map.data()); }
  size_t size() const noexcept { return map.size(); }
  uint64_t va() const noexcept { return reinterpret_cast<uintptr_t>(map.data()); }
};

struct Mr {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;  // app virtual address of the first byte
  uint64_t length = 0;
};

struct Cq {
  uint32_t handle = 0;
  uint32_t depth = 0;
  shm::Mapping map;
  shm::RingConsumer ring;
  shm::EventFd ev;
};

struct Qp {
  uint32_t qpn = 0;
  uint32_t qp_type = 0;
  uint32_t state = 0;  // the state last set through modify_qp (ibv_qp_state)
  ctl::CreateQpReply caps{};
  shm::Mapping sq_map, rq_map;
  shm::RingProducer sq, rq;
  bool has_rq = false;
};

struct Srq {
  uint32_t handle = 0;
  ctl::CreateSrqReply caps{};
  shm::Mapping map;
  shm::RingProducer ring;
};

// ibv_send_wr with a flat gather list. With IBV_SEND_INLINE the bytes at the SGEs' addresses
// (pointers in this process) are copied into the WQE at post time.
struct SendWr {
  uint64_t wr_id = 0;
  uint8_t opcode = 0;  // ibv_wr_opcode
  uint32_t send_flags = 0;
  const abi::Sge *sg_list = nullptr;
  uint32_t num_sge = 0;
  uint32_t imm_data = 0;  // __be32 as verbs (or invalidate_rkey for SEND_WITH_INV)
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  uint32_t ah = 0;
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
};

struct RecvWr {
  uint64_t wr_id = 0;
  const abi::Sge *sg_list = nullptr;
  uint32_t num_sge = 0;
};

class Context {
 public:
  // Connects to uroced's control socket, performs the hello handshake and opens the context
  // (the doorbell ring). Returns 0 or an errno (ECONNREFUSED, ETIMEDOUT, EPROTO, ...).
  static int open(const char *socket_path, const char *name, std::unique_ptr<Context> *out,
                  int timeout_ms = kDefaultTimeoutMs) noexcept;

  // Connects, performs the hello handshake and asks for the device attributes, without opening
  // a context (no doorbell ring): how the verbs shim lists devices. Returns 0 or an errno.
  static int probe(const char *socket_path, const char *name, ctl::DeviceAttrPayload *out,
                   int timeout_ms) noexcept;

  // ---- control (one request / reply each) ----
  int query_device(ctl::DeviceAttrPayload *out) noexcept;
  int query_port(uint32_t port_num, ctl::PortAttrPayload *out) noexcept;
  int query_gid(uint32_t port_num, uint32_t index, uint8_t gid[16]) noexcept;
  int alloc_pd(uint32_t *pd) noexcept;
  int dealloc_pd(uint32_t pd) noexcept;
  // Registers [offset, offset + len) of buf (its address in this process becomes Mr::addr).
  int reg_mr(uint32_t pd, const Buffer &buf, size_t offset, size_t len, uint32_t access,
             Mr *out) noexcept;
  // Registers p.length bytes at p.offset of memfd `fd` (sealed against shrinking), which the
  // app sees at p.app_va (the verbs shim: its process-wide memfd, doc/verbs.md). p.pd, p.access
  // as reg_mr.
  int reg_mr_fd(int fd, const ctl::RegMrPayload &p, Mr *out) noexcept;
  int dereg_mr(const Mr &mr) noexcept;
  int create_cq(uint32_t cqe, std::unique_ptr<Cq> *out) noexcept;
  int destroy_cq(Cq &cq) noexcept;
  // ibv_resize_cq: `cq` then reads the daemon's new ring (depth updated). The caller keeps
  // every poller of `cq` out meanwhile. On error `cq` is unchanged.
  int resize_cq(Cq &cq, uint32_t cqe) noexcept;
  // ibv_rereg_mr of PD / access: the MR keeps its keys.
  int rereg_mr(const Mr &mr, uint32_t pd, uint32_t access) noexcept;
  // ibv_alloc_mw (type 1 or 2) / ibv_dealloc_mw: the window's rkey (its current one, any tag).
  int alloc_mw(uint32_t pd, uint32_t type, uint32_t *rkey) noexcept;
  int dealloc_mw(uint32_t rkey) noexcept;
  int create_qp(const ctl::CreateQpPayload &attr, std::unique_ptr<Qp> *out) noexcept;
  int modify_qp(Qp &qp, const ctl::QpAttrPayload &attr, uint32_t mask) noexcept;
  int query_qp(const Qp &qp, ctl::QueryQpReply *out) noexcept;
  int destroy_qp(Qp &qp) noexcept;
  int create_srq(const ctl::CreateSrqPayload &attr, std::unique_ptr<Srq> *out) noexcept;
  int destroy_srq(Srq &srq) noexcept;
  // Arms (or with 0 disarms) the SRQ's limit event (SRQ_LIMIT_REACHED, raised once).
  int modify_srq(Srq &srq, uint32_t srq_limit) noexcept;
  int create_ah(uint32_t pd, const ctl::AhAttrPayload &attr, uint32_t *ah) noexcept;
  int destroy_ah(uint32_t ah) noexcept;
  // The session's pending asynchronous events (ibv_get_async_event), oldest first; *lost counts
  // events the daemon dropped because 64 were already queued.
  int get_async_events(std::vector<ctl::AsyncEventEntry> *out, uint32_t *lost = nullptr) noexcept;
  // Waits up to timeout_ms until the daemon signals queued async events: 1, 0 timeout, -errno.
  int wait_async_event(int timeout_ms) noexcept { return async_ev_.wait(timeout_ms); }
  int async_fd() const noexcept { return async_ev_.fd(); }
  // The control socket (the verbs shim hands out a duplicate as ibv_context::cmd_fd).
  int ctl_fd() const noexcept { return ctl_.fd(); }
  // Every counter of the daemon (kStats, all pages; restarts if the set changed meanwhile).
  int stats(std::vector<ctl::StatEntry> *out) noexcept;

  // ---- data path (shared memory only) ----
  // 0, ENOMEM (ring full), EINVAL (too many SGEs / inline bytes for the QP's slot class, or
  // a QP state that cannot post).
  int post_send(Qp &qp, const SendWr &wr) noexcept;
  // wrs[0..n) in order, published together (one store of the ring's producer index, at most one
  // doorbell): ibv_post_send of a chain. *posted = how many went in; returns 0, or the error of
  // wrs[*posted] (EINVAL as post_send, ENOMEM when the ring is full); those before it are posted.
  int post_send_list(Qp &qp, const SendWr *wrs, size_t n, size_t *posted) noexcept;
  int post_recv(Qp &qp, const RecvWr &wr) noexcept;
  int post_srq_recv(Srq &srq, const RecvWr &wr) noexcept;
  // Test hook: writes `slot` (the QP's slot size, any bytes) into the SQ as the next WQE and
  // rings the doorbell, without validation, so tests can show what the daemon does with a
  // corrupt WQE. Never used by the verbs shim.
  int post_send_raw(Qp &qp, const void *slot) noexcept;
  // Test hook: the session's doorbell ring of worker `ring` (app -> daemon; ring 0 if there is
  // no such ring), so tests can push doorbells naming any QPN and kind, or rewrite its producer
  // index. Never used by the verbs shim.
  shm::RingProducer &doorbell_ring_for_test(uint32_t ring = 0) noexcept {
    return db_[ring < db_rings_ ? ring : 0].ring;
  }
  uint32_t doorbell_rings() const noexcept { return db_rings_; }
  // Pushes Doorbell{qpn, kind} (abi::kDoorbellSq / kDoorbellRq; an SRQ's qpn is
  // abi::kSrqDoorbellBit | its handle) to the context's doorbell ring abi::doorbell_ring(qpn).
  // For callers that write WQEs into the rings themselves (the verbs shim): call it only when
  // RingProducer::claim_notify() returned true after the commit, and serialise the calls (each
  // doorbell ring has a single producer).
  void ring_doorbell(uint32_t qpn, uint32_t kind) noexcept;
  // Up to n completions; returns how many.
  int poll_cq(Cq &cq, abi::Cqe *out, int n) noexcept;
  // Arms the CQ: the next (solicited-only: next receive or error) completion writes the eventfd.
  void req_notify_cq(Cq &cq, bool solicited_only) noexcept;
  // Waits up to timeout_ms for a completion event and consumes it: 1 event, 0 timeout, -errno.
  int wait_cq_event(Cq &cq, int timeout_ms) noexcept;

  const ctl::HelloReplyPayload &server_info() const noexcept { return ctl_.server_info(); }

 private:
  int call(uint16_t type, const void *payload, size_t len, const int *fds, size_t nfds,
           ctl::Message *reply) noexcept;

  ctl::Client ctl_;
  std::unique_ptr<ctl::Message> msg_ = std::make_unique<ctl::Message>();
  // One doorbell ring per daemon worker, all in db_map_; ev: the worker's eventfd for this
  // context (set once, by the first create_qp on that worker, or kOpenContext for ring 0).
  struct DbRing {
    shm::RingProducer ring;
    shm::EventFd ev;
  };
  shm::Mapping db_map_;
  std::unique_ptr<DbRing[]> db_;
  uint32_t db_rings_ = 0;
  shm::EventFd async_ev_;
  int timeout_ms_ = kDefaultTimeoutMs;
};

}  // namespace uroce::client
