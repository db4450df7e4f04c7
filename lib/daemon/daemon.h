// SPDX-License-Identifier: BSD-3-Clause
// lib/daemon: what joins apps to the transport engine inside uroced (doc/uroced.md).
//
// Daemon is the ctl::Handler of the control server: one session per connected app, owning its
// PDs, MRs, CQs, QPs, SRQs and AHs (each checked to belong to the session on every request),
// all torn down when the app disconnects or dies. The engines work on the apps' shared-memory
// rings in place (transport::RingQueues: the requester copies WQEs from the SQ ring, the
// completer writes CQEs into the CQ ring); what is left of the bridge hands each worker's
// doorbells to its engine, moves CQEs of a CQ shared across workers to its owner, and async events
// to the session.
//
// Threads (doc/uroced.md, "Threading"): one engine per worker lcore; worker 0 is the main lcore,
// which also runs the control path. Each session has one doorbell ring per worker, read by
// that worker only (doc/ipc.md, "Doorbells"). A worker's objects are
// changed only on that worker (run_on). PDs, MRs and AHs are in one table all the engines
// share (transport/tables.h), written by the control thread; an MR or AH is freed after a
// grace period (grace.h). The data path never throws, allocates, locks or prints;
// the control path reports errors as -errno in the reply status.
//
// Files: daemon.cc construction and worker plumbing; session.cc sessions and teardown;
// ctl_dispatch.cc the handler table; verbs_*.cc the handlers; quota.cc per-app quotas;
// path.cc address vectors;
// stats.cc counters; bridge_*.cc the data path; objects.h the objects (private).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ctl/server.h"
#include "daemon/grace.h"
#include "daemon/lcore.h"
#include "daemon/quota.h"
#include "daemon/sleeper.h"
#include "shm/eventfd.h"
#include "shm/memfd.h"
#include "transport/core.h"
#include "uroce/abi.h"
#include "uroce/ctl_cm.h"
#include "uroce/ctl_verbs.h"
#include "uroce/ring.h"
#include "wire/gid.h"

namespace uroce::daemon {

// What the daemon needs from the Ethernet port the engine sends on (control plane only).
class PortView {
 public:
  virtual ~PortView() = default;
  virtual const uint8_t *mac() const noexcept = 0;
  virtual uint32_t eth_mtu() const noexcept = 0;
  virtual transport::Mtu ib_mtu() const noexcept = 0;
  virtual size_t gid_count() const noexcept = 0;
  virtual wire::Gid gid(size_t i) const noexcept = 0;  // i < gid_count()
  virtual uint8_t dscp() const noexcept = 0;
  virtual const char *ibdev_name() const noexcept = 0;  // verbs device name (config ibdev)
  virtual bool link_up() const noexcept = 0;
  // Resolves the MAC address of `dgid` (ARP for IPv4-mapped GIDs, ND otherwise). May run the
  // data path while it waits (bounded). 0, or EHOSTUNREACH.
  virtual int resolve(const wire::Gid &dgid, uint8_t mac_out[6]) noexcept = 0;
};

// The path (MACs, GIDs, DSCP, TTL / hop limit, flow label) of an address vector, as modify_qp
// with IBV_QP_AV and create_ah use it: the source GID from sgid_index, the destination MAC
// resolved through the port (ARP / ND), DSCP = traffic_class >> 2 (the port's if 0), and the
// TTL / hop limit always wire::kRoceHopLimit, as Linux (the AV's hop_limit is ignored).
// 0, -EINVAL (not global, bad port or sgid_index, IPv4 / IPv6 GID mix) or -EHOSTUNREACH.
int path_from_ah_attr(PortView &port, const ctl::AhAttrPayload &a, wire::PathInfo *out);

struct DaemonOptions {
  Quota quota;                    // per app session (quota.h)
  uint32_t wqe_budget = 32;       // WQEs taken from one ring per bridge_in pass
  uint32_t doorbell_budget = 64;  // doorbells taken from one session per pass
};

// Appends port.PORT.cc.* (doc/congestion.md, Counters) for the totals `t` of a port's engines;
// nothing when a name would not fit in a StatEntry.
void add_port_cc_stats(const std::string &port, const transport::CcTotals &t,
                       std::vector<ctl::StatEntry> &v);

// The engine of every worker: its queues are the apps' shared-memory rings (doc/ipc.md, "One
// queue, one copy").
using DaemonEngine = transport::EngineCoreT<transport::RingQueues>;

// Daemon-wide bridge counters (exported through kStats).
struct BridgeCounters {
  uint64_t doorbells = 0;
  uint64_t bad_doorbells = 0;   // unknown QPN / kind, or a QP of another session
  uint64_t send_wqes = 0;       // copied from SQ rings by the engines' requesters
  uint64_t recv_wqes = 0;       // taken from RQ / SRQ rings by the engines' responders
  uint64_t bad_wqes = 0;        // copies that failed validation: error CQE + ERR (SRQ: SRQ_ERR)
  uint64_t corrupt_rings = 0;   // a ring whose app-written index was impossible
  uint64_t cqes_forwarded = 0;  // moved from a worker's forward ring into the CQ owner's ring
  uint64_t cq_events = 0;       // eventfd writes
  uint64_t sessions_opened = 0, sessions_closed = 0;
  uint64_t async_events = 0;    // engine events queued to their session
  uint64_t async_unrouted = 0;  // events whose object no longer exists
  uint64_t async_lost = 0;      // a session's event queue was full
};

class Daemon : public ctl::Handler {
 public:
  // engines[w]: worker w's engine (w == 0: the main lcore's). All built with the same
  // EngineConfig except qpn_base == worker_qpn_base(w, base) (lcore.h), and sharing one
  // ObjectTables (EngineConfig::tables) when there are several (std::invalid_argument if not).
  Daemon(std::vector<DaemonEngine *> engines, PortView &port, DaemonOptions opt = {});
  Daemon(DaemonEngine &engine, PortView &port, DaemonOptions opt = {})
      : Daemon(std::vector<DaemonEngine *>{&engine}, port, opt) {}
  ~Daemon() override;
  Daemon(const Daemon &) = delete;
  Daemon &operator=(const Daemon &) = delete;

  // Adds the verbs request types to the server's table.
  static void register_types(ctl::TypeTable &t) noexcept;

  // ---- ctl::Handler (control path, main lcore) ----
  void on_connect(ctl::Server &, const ctl::ClientInfo &) override;
  void on_message(ctl::Server &, const ctl::ClientInfo &, ctl::Message &) override;
  void on_disconnect(ctl::Server &, const ctl::ClientInfo &, ctl::CtlError) override;
  // The server stopped reading an app over its quota of unread replies (quota.cc).
  void on_throttle(ctl::Server &, const ctl::ClientInfo &) override;
  void on_rate_limit(ctl::Server &, const ctl::ClientInfo &) override;

  // ---- data path: called by worker w's thread only (w == 0: the main lcore) ----
  // Doorbells -> the engine (sq_doorbell / rq_doorbell: the requester copies the WQEs from the
  // ring itself): worker w reads its own doorbell ring of every session, and nothing else.
  // Returns the number of doorbells popped.
  uint32_t bridge_in(unsigned w = 0) noexcept;
  // CQEs of other workers' QPs -> the app's CQ rings this worker owns (+ eventfd); engine async
  // events -> their session's queue (+ the session's async eventfd). Returns the work done.
  uint32_t bridge_out(unsigned w = 0) noexcept;
  // Worker w >= 1: runs the control operations main sent it. Returns how many ran.
  unsigned serve_commands(unsigned w) noexcept;
  // ---- control thread ----
  unsigned workers() const noexcept { return static_cast<unsigned>(w_.size()); }
  // Runs f() on worker w (directly when w == 0) and returns when it has run; while it waits,
  // the wait hook runs (uroced: one step of the main loop, so worker 0 keeps going).
  void run_on(unsigned w, const std::function<void()> &f);
  void set_wait_hook(std::function<void()> h) { wait_hook_ = std::move(h); }
  // Sum of every worker's counters and main's. Call on the control thread; it asks each worker
  // for its share (run_on), unless `stopped` says the workers' threads have ended.
  BridgeCounters counters(bool stopped = false);
  uint32_t qps_on(unsigned w) const noexcept { return w < load_.size() ? load_[w] : 0; }
  size_t session_count() const noexcept { return sessions_.size(); }
  // Control-server client ids of the connected apps (e.g. to send them kShutdown).
  std::vector<uint64_t> session_ids() const;
  // Congestion-control totals of every engine (the port's: uroced's port.P.cc.*), each read on
  // its worker. Control thread.
  transport::CcTotals cc_totals();
  // Extra counters appended to kStats replies (uroced adds the port's).
  using StatsHook = std::function<void(std::vector<ctl::StatEntry> &)>;
  void set_stats_hook(StatsHook h) { stats_hook_ = std::move(h); }
  // The handler of the connection-manager types (uroce/ctl_cm.h; lib/daemon/cm_service.h),
  // also told of every session's end. Without one they are answered EOPNOTSUPP.
  void set_cm(ctl::Handler *h) noexcept { cm_ = h; }
  // Grace periods of the shared object tables (grace.h); nullptr: run_on barriers.
  void set_grace(GracePeriod *g) noexcept { grace_ = g; }
  // Tears every session down (daemon shutdown; the workers must still be running).
  void close_all();

  // ---- sleeping lcores (doc/uroced.md, Sleeping when idle) ----
  // sleepers[w]: worker w's Sleeper, which the daemon rings after pushing to w's rings
  // (commands; main's for async events) and which watches the eventfd of every session's
  // doorbell ring of w. Set before the first session; empty: no lcore sleeps.
  void set_sleepers(std::vector<Sleeper *> s) { sleepers_ = std::move(s); }
  // Worker w: whether its bridge or engine has work it will do without a new event (active
  // QPs / SRQs, CQs waiting for room in the app's ring, engine QPs that can send).
  bool pending(unsigned w) const noexcept;
  // Worker w: sets / clears the asleep flag of its doorbell ring of every session (the app
  // writes that ring's eventfd after a push that finds it set).
  void arm_doorbells(unsigned w, bool asleep) noexcept;

  struct Session;
  struct Cq;
  struct Qp;
  struct Srq;
  struct Worker;

 private:
  struct Reply;
  struct VerbsHandler;
  // ---- control handlers, one per verbs type (table in ctl_dispatch.cc): 0 or a negative
  // errno; they fill the reply payload / fds ----
  using Handler = int (Daemon::*)(Session &s, ctl::Message &m, Reply &r);
  // session.cc
  int do_open_context(Session &s, ctl::Message &m, Reply &r);
  // session.cc
  int do_get_async_events(Session &s, ctl::Message &m, Reply &r);
  // verbs_device.cc
  int do_query_device(Session &s, ctl::Message &m, Reply &r);
  int do_query_port(Session &s, ctl::Message &m, Reply &r);
  int do_query_gid(Session &s, ctl::Message &m, Reply &r);
  // verbs_pd_mr_ah.cc
  int do_alloc_pd(Session &s, ctl::Message &m, Reply &r);
  int do_dealloc_pd(Session &s, ctl::Message &m, Reply &r);
  int do_reg_mr(Session &s, ctl::Message &m, Reply &r);
  int do_dereg_mr(Session &s, ctl::Message &m, Reply &r);
  int do_create_ah(Session &s, ctl::Message &m, Reply &r);
  int do_destroy_ah(Session &s, ctl::Message &m, Reply &r);
  // verbs_cq_srq.cc
  int do_create_cq(Session &s, ctl::Message &m, Reply &r);
  int do_destroy_cq(Session &s, ctl::Message &m, Reply &r);
  int do_resize_cq(Session &s, ctl::Message &m, Reply &r);
  int do_rereg_mr(Session &s, ctl::Message &m, Reply &r);
  int do_alloc_mw(Session &s, ctl::Message &m, Reply &r);
  int do_dealloc_mw(Session &s, ctl::Message &m, Reply &r);
  int do_create_srq(Session &s, ctl::Message &m, Reply &r);
  int do_modify_srq(Session &s, ctl::Message &m, Reply &r);
  int do_destroy_srq(Session &s, ctl::Message &m, Reply &r);
  // verbs_qp.cc
  int do_create_qp(Session &s, ctl::Message &m, Reply &r);
  int do_modify_qp(Session &s, ctl::Message &m, Reply &r);
  int do_query_qp(Session &s, ctl::Message &m, Reply &r);
  int do_destroy_qp(Session &s, ctl::Message &m, Reply &r);
  // stats.cc
  int do_stats(Session &s, ctl::Message &m, Reply &r);

  // ---- daemon.cc: the workers ----
  // Returns once no worker can still hold what was retired from the object tables before.
  void synchronize();
  Qp *main_qp(uint32_t qpn) const noexcept;

  // ---- session.cc: session lifetime ----
  void destroy_qp_obj(Session &s, Qp &q);
  void destroy_srq_obj(Srq &q);
  void destroy_cq_obj(Cq &c);
  void destroy_session(Session &s);
  // ---- verbs_cq_srq.cc: binding a CQ / SRQ to the worker of a QP that uses it ----
  // The engine handle of CQ c on worker w: binds c to w if unbound, or makes w's forward
  // ring. 0 when an engine table is full.
  uint32_t cq_on(Cq &c, unsigned w);
  uint32_t srq_on(Srq &q, unsigned w);  // q unbound or bound to w

  // ---- quota.cc: 0, or -ENOMEM (counted) when `more` of kind k would exceed s's quota ----
  int check_quota(Session &s, QuotaKind k, uint64_t more = 1) noexcept;

  // ---- path.cc, stats.cc ----
  int path_from_ah(const ctl::AhAttrPayload &a, wire::PathInfo *out);
  void snapshot_stats();

  // ---- data path (worker W's thread) ----
  // bridge_doorbell.cc
  uint32_t doorbells(Worker &W, Session &s) noexcept;  // s's doorbell ring of worker W
  void ring(Worker &W, uint32_t qpn, uint32_t kind) noexcept;
  // bridge_cq.cc
  static void cq_event(void *cq) noexcept;  // the engine fired the app's arm: eventfd
  // A worker wrote into a forward ring its owner armed before sleeping: wake the owner.
  static void fwd_event(void *lane) noexcept;
  void cq_error(Worker &W, Cq &c) noexcept;  // IBV_EVENT_CQ_ERR, once
  // bridge_events.cc
  // session: DEVICE_FATAL's session id (the other events name their object by handle).
  void emit_async(Worker &W, uint32_t type, uint32_t handle, uint64_t session = 0) noexcept;
  void forward_events() noexcept;  // main: the workers' events
  void route_event(uint32_t type, uint32_t handle, uint64_t session) noexcept;  // main
  void queue_async(Session *owner, uint32_t type, uint32_t handle) noexcept;

  PortView &port_;
  DaemonOptions opt_;
  transport::ObjectTables *tab_ = nullptr;  // PDs, MRs, AHs of every engine (control thread)
  GracePeriod *grace_ = nullptr;
  transport::EngineConfig cfg0_;  // worker 0's engine configuration (limits)
  BridgeCounters mctr_;           // main's share
  std::vector<std::unique_ptr<Worker>> w_;
  std::map<uint64_t, std::unique_ptr<Session>> sessions_;
  // Main's lookup tables (control thread / main lcore only), sized at construction.
  std::vector<std::vector<Qp *>> qp_main_;  // [worker][that worker's engine's qp_slot(qpn)]
  std::vector<uint32_t> load_;              // QPs per worker
  std::vector<Srq *> srq_by_handle_;        // by the app's handle (1..max_srq)
  std::vector<Cq *> cq_by_handle_;          // by the app's handle (1..max_cq)
  std::vector<Sleeper *> sleepers_;
  std::function<void()> wait_hook_;
  StatsHook stats_hook_;
  ctl::Handler *cm_ = nullptr;
  std::vector<ctl::StatEntry> stats_;  // snapshot served page by page
  uint32_t stats_gen_ = 0;
  uint64_t quota_refused_[kQuotaKinds] = {};  // per QuotaKind
};

}  // namespace uroce::daemon
