// SPDX-License-Identifier: BSD-3-Clause
// The daemon's objects and the helpers its files share (private to lib/daemon; daemon.h says
// which file implements what). Each object is reached from main's tables (control thread) and
// from its worker's tables (that worker's data path); the comments say which thread owns a field.
#pragma once

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "daemon/daemon.h"

namespace uroce::daemon {

using transport::QpState;
using transport::WcOpcode;
using transport::WcStatus;
using transport::WrOpcode;

inline constexpr uint32_t kSrqDoorbellBit = abi::kSrqDoorbellBit;  // Doorbell.qpn of an SRQ
inline constexpr uint32_t kCqBurst = 32;  // CQEs moved from a forward ring per pass
inline constexpr uint32_t kMaxSrqPerSession = 64;

inline uint32_t pow2_at_least(uint32_t v) noexcept {
  uint32_t p = 2;
  while (p < v && p < (1u << 30))
    p <<= 1;
  return p;
}

// A ring in a memfd of its own, created and mapped by the daemon; the app gets the fd.
struct RingMem {
  shm::SharedRegion mem;
  ctl::RingGeometry geo{};
};

// Creates and maps the ring (daemon.cc). 0 or a negative errno.
int make_ring(const char *name, abi::RingKind kind, uint32_t id, uint32_t slot_size,
              uint32_t slot_count, RingMem *out);

// A CQ lives on one worker (doc/ipc.md, "A CQ has one producer"): the first QP that uses it
// binds it to that QP's worker, for life, where the engine writes CQEs straight into the app's
// ring. A QP on another worker (its other CQ or its SRQ placed it there) completes into a
// private forward ring of its own worker's engine, which the owner moves into the app's ring.
struct Daemon::Cq {
  uint32_t handle = 0;  // the app's handle (daemon-wide); engines number CQs their own way
  Session *owner = nullptr;
  RingMem mem;
  uint32_t depth = 0;
  shm::EventFd ev;
  BridgeCounters *ctr = nullptr;          // the owner worker's counters (its event hook)
  std::atomic<bool> err_reported{false};  // IBV_EVENT_CQ_ERR sent (once)
  int worker = kUnbound;                  // main: bound by the first QP using it, for life
  uint32_t qp_refs = 0;                   // main: QPs using it
  // Per worker: the engine's handle of this CQ there (0: none) and, on a worker other than
  // the owner, the forward ring its engine writes into. Written by main around run_on.
  struct Lane {
    uint32_t eh = 0;
    std::unique_ptr<LocalRing<abi::Cqe>> fwd;
    Daemon *daemon = nullptr;  // fwd_event's context: who to wake
    unsigned owner = 0;
  };
  std::vector<Lane> lanes;
};

// An SRQ lives on the worker of the first QP that uses it (its ring has one consumer: that
// engine's responder); QPs using it are placed there.
struct Daemon::Srq {
  uint32_t handle = 0;  // the app's handle
  Session *owner = nullptr;
  RingMem mem;
  uint32_t pd = 0, slots = 0, max_sge = 0, limit = 0;  // limit: armed before binding
  int worker = kUnbound;                               // main
  uint32_t eh = 0;                                     // the engine's handle on its worker
  uint32_t qp_refs = 0;                                // main
};

// A QP: its rings are the engine's queues (RingQueues) on its worker.
struct Daemon::Qp {
  uint32_t qpn = 0;
  unsigned worker = 0;  // the owner, for life (also bits 16..23 of qpn)
  Session *owner = nullptr;
  transport::QpType type = transport::QpType::kRc;
  RingMem sq_mem, rq_mem;
  bool has_rq = false;
  Cq *scq = nullptr, *rcq = nullptr;
  Srq *srq = nullptr;
  uint32_t pd = 0;
};

// A session's doorbell ring of one worker (doc/ipc.md, "Doorbells"): the app pushes the
// doorbells of that worker's QPs, the worker alone reads them. `ring` and `broken` belong to
// the worker's thread once the session is on its list (Worker::db_sessions, through run_on);
// `ev` and `watched` to the control thread.
struct DbLane {
  shm::RingConsumer ring;
  bool broken = false;   // worker: its index was impossible; DEVICE_FATAL asked of main
  shm::EventFd ev;       // written by the app when `ring` says the worker is asleep
  bool watched = false;  // ev is in the worker's Sleeper
};

struct Daemon::Session {
  uint64_t id = 0;
  pid_t pid = 0;
  std::string name;
  RingMem db_mem;                // every worker's doorbell ring, ring w at w * db_mem.geo.bytes
  std::unique_ptr<DbLane[]> db;  // [worker]
  bool has_db = false;
  bool db_broken = false;  // main: a doorbell ring's index was impossible, DEVICE_FATAL sent
  std::set<uint32_t> pds, ahs;
  std::map<uint32_t, uint32_t> pd_qps;   // PD -> QPs using it (EBUSY before the engines)
  std::map<uint32_t, shm::Mapping> mrs;  // lkey -> the daemon's mapping of the app's memfd
  std::set<uint32_t> mws;                // memory windows, by id (rkey >> 8: binds change the tag)
  std::map<uint32_t, std::unique_ptr<Cq>> cqs;
  std::map<uint32_t, std::unique_ptr<Qp>> qps;
  std::map<uint32_t, std::unique_ptr<Srq>> srqs;
  // Asynchronous events for this app (fixed capacity: filled on main's data path).
  shm::EventFd async_ev;
  ctl::AsyncEventEntry async_q[ctl::kMaxAsyncEvents] = {};
  uint32_t async_n = 0;
  uint32_t async_lost = 0;
  uint64_t mr_bytes = 0;       // pages mapped for its MRs (quota)
  uint64_t quota_refused = 0;  // requests refused over quota, throttles included
};

// An engine async event on its way from a worker to main; DEVICE_FATAL names its session.
struct AsyncItem {
  uint32_t type = 0;
  uint32_t handle = 0;
  uint64_t session = 0;
};

// A forward ring the owner of a CQ drains into the app's ring (see Daemon::Cq).
struct CqForward {
  Daemon::Cq *cq = nullptr;
  LocalRing<abi::Cqe> *ring = nullptr;
};

// What one worker's data path owns. Only that worker's thread touches it (the control thread
// through run_on), except the rings, which have one producer and one consumer thread each.
struct Daemon::Worker {
  unsigned id = 0;
  DaemonEngine *eng = nullptr;
  uint32_t qpn_base = 0;
  std::vector<Qp *> qp_by_index;   // by the engine's qp_slot(qpn)
  std::vector<Srq *> srq_by_eh;    // by this engine's SRQ handle (async events)
  std::vector<Cq *> cq_by_eh;      // by this engine's CQ handle (async events)
  std::vector<CqForward> forward;  // CQs owned here that QPs of other workers complete into
  BridgeCounters ctr;
  std::vector<Session *> db_sessions;            // whose doorbell ring of this worker it reads
  std::unique_ptr<LocalRing<AsyncItem>> ev_out;  // worker -> main (id >= 1)
  std::unique_ptr<CmdChannel> cmd;               // control thread -> worker (id >= 1)
};

struct Daemon::Reply {
  alignas(8) uint8_t buf[ctl::kMaxPayload];
  size_t len = 0;
  int fds[ctl::kMaxFds] = {};
  size_t nfds = 0;
  template <class T>
  void set(const T &v) {
    static_assert(sizeof(T) <= ctl::kMaxPayload);
    std::memcpy(buf, &v, sizeof(T));
    len = sizeof(T);
  }
  void fd(int f) { fds[nfds++] = f; }
};

}  // namespace uroce::daemon
