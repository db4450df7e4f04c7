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

#include "daemon/daemon.h"

namespace uroce::daemon {

using transport::QpState;
using transport::WcOpcode;
using transport::WcStatus;
using transport::WrOpcode;

inline constexpr uint32_t kSrqDoorbellBit = 0x80000000u;  // Doorbell.qpn of an SRQ: bit | handle
inline constexpr uint32_t kCqBurst = 32;

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

struct Daemon::Cq {
  uint32_t handle = 0;
  Session *owner = nullptr;
  RingMem mem;
  shm::RingProducer ring;  // produced by the bound worker only
  shm::EventFd ev;
  bool err_reported = false;  // IBV_EVENT_CQ_ERR sent for a corrupt ring (bound worker)
  int worker = kUnbound;      // main: set by the first QP using it, for life
  uint32_t qp_refs = 0;       // main: QPs using it
};

struct Daemon::Srq {
  uint32_t handle = 0;
  Session *owner = nullptr;
  RingMem mem;
  shm::RingConsumer ring;  // consumed by the bound worker only
  int worker = kUnbound;   // main: first QP using it, or worker 0 when rung before that
  uint32_t qp_refs = 0;    // main
  // A forwarded doorbell is in flight (lcore.h argument in Daemon::main_doorbells).
  std::atomic<uint8_t> db_pending{0};
  bool active = false;  // bound worker
  Srq *act_next = nullptr, *act_prev = nullptr;
};

struct Daemon::Qp {
  uint32_t qpn = 0;
  unsigned worker = 0;  // the owner, for life (also bits 16..23 of qpn)
  Session *owner = nullptr;
  transport::QpType type = transport::QpType::kRc;
  RingMem sq_mem, rq_mem;
  shm::RingConsumer sq, rq;
  bool has_rq = false;
  Cq *scq = nullptr, *rcq = nullptr;
  uint32_t srq = 0;
  uint32_t pd = 0;
  std::atomic<uint8_t> db_pending{0};  // bit 1 SQ, bit 2 RQ: a forwarded doorbell in flight
  // The owner worker's data-path state.
  bool sq_rung = false, rq_rung = false;
  bool err = false;  // moved to ERR by the bridge (or by the app)
  bool active = false;
  Qp *act_next = nullptr, *act_prev = nullptr;
};

struct Daemon::Session {
  uint64_t id = 0;
  pid_t pid = 0;
  std::string name;
  RingMem db_mem;
  shm::RingConsumer db;  // main
  bool has_db = false;
  shm::EventFd db_ev;       // written by the app when `db` says main is asleep
  bool db_watched = false;  // db_ev is in main's Sleeper
  bool db_broken = false;   // its doorbell ring's index was impossible: DEVICE_FATAL sent
  std::set<uint32_t> pds, ahs;
  std::map<uint32_t, uint32_t> pd_qps;   // PD -> QPs using it (EBUSY before the engines)
  std::map<uint32_t, shm::Mapping> mrs;  // lkey -> the daemon's mapping of the app's memfd
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

// An engine async event on its way from a worker to main.
struct AsyncItem {
  uint32_t type = 0;
  uint32_t handle = 0;
};

// What one worker's data path owns. Only that worker's thread touches it (the control thread
// through run_on), except the rings, which have one producer and one consumer thread each.
struct Daemon::Worker {
  unsigned id = 0;
  transport::EngineCore *eng = nullptr;
  uint32_t qpn_base = 0;
  std::vector<Qp *> qp_by_index;  // by the engine's qp_slot(qpn)
  std::vector<Srq *> srq_by_handle;
  std::vector<Cq *> cq_by_handle;
  Qp *act_head = nullptr;
  Srq *srq_act_head = nullptr;
  BridgeCounters ctr;
  std::unique_ptr<LocalRing<abi::Doorbell>> db_in;  // main -> worker (id >= 1)
  std::unique_ptr<LocalRing<AsyncItem>> ev_out;     // worker -> main (id >= 1)
  std::unique_ptr<CmdChannel> cmd;                  // control thread -> worker (id >= 1)
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

// The active lists of a worker (QPs / SRQs with rung rings), intrusive and doubly linked.
template <class T>
void link_front(T &q, T *&head) noexcept {
  if (q.active) return;
  q.active = true;
  q.act_prev = nullptr;
  q.act_next = head;
  if (head) head->act_prev = &q;
  head = &q;
}

template <class T>
void unlink(T &q, T *&head) noexcept {
  if (!q.active) return;
  if (q.act_prev)
    q.act_prev->act_next = q.act_next;
  else
    head = q.act_next;
  if (q.act_next) q.act_next->act_prev = q.act_prev;
  q.act_next = q.act_prev = nullptr;
  q.active = false;
}

}  // namespace uroce::daemon
