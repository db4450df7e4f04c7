// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/daemon.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iterator>
#include <stdexcept>

namespace uroce::daemon {

using transport::QpState;
using transport::WcOpcode;
using transport::WcStatus;
using transport::WrOpcode;

namespace {

constexpr uint32_t kSrqDoorbellBit = 0x80000000u;  // Doorbell.qpn of an SRQ: bit | handle
constexpr uint32_t kCqBurst = 32;
constexpr uint32_t kMaxSrqPerSession = 64;

uint32_t pow2_at_least(uint32_t v) noexcept {
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

int make_ring(const char *name, abi::RingKind kind, uint32_t id, uint32_t slot_size,
              uint32_t slot_count, RingMem *out) {
  const uint64_t bytes = shm::round_up_page(abi::ring_bytes(slot_size, slot_count));
  auto r = shm::SharedRegion::create(name, bytes);
  if (!r) return -r.error();
  if (shm::ring_init(r->map.addr(), bytes, slot_size, slot_count, kind, id) != shm::RingError::kOk)
    return -EINVAL;
  out->mem = std::move(r.value());
  out->geo.bytes = bytes;
  out->geo.slot_size = slot_size;
  out->geo.slot_count = slot_count;
  return 0;
}

void add_stat(std::vector<ctl::StatEntry> &v, const std::string &name, uint64_t value) {
  ctl::StatEntry e{};
  std::snprintf(e.name, sizeof e.name, "%s", name.c_str());
  e.value = value;
  v.push_back(e);
}

constexpr const char *kDropNames[] = {"parse",     "no_qp",    "qp_state",     "opcode",
                                      "address",   "pkey",     "qkey",         "sequence",
                                      "duplicate", "resource", "bad_response", "length"};
static_assert(sizeof(kDropNames) / sizeof(kDropNames[0]) ==
              static_cast<size_t>(transport::DropReason::kCount));

}  // namespace

// ---------------------------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------------------------
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
  bool db_broken = false;  // its doorbell ring's index was impossible: DEVICE_FATAL sent
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
  std::vector<Qp *> qp_by_index;  // qpn - qpn_base
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

// ---------------------------------------------------------------------------------------------
// Construction, session lifetime
// ---------------------------------------------------------------------------------------------
Daemon::Daemon(std::vector<transport::EngineCore *> engines, PortView &port, DaemonOptions opt)
    : port_(port), opt_(opt) {
  if (engines.empty() || engines.size() > kMaxWorkers)
    throw std::invalid_argument("uroce daemon: 1 to 64 worker engines");
  cfg0_ = engines[0]->config();
  // Each QP and SRQ has at most one forwarded doorbell per kind in flight: the forward ring
  // cannot fill (pow2 >= 2 * max_qp + max_srq).
  uint32_t fwd = 2;
  while (fwd < 2 * cfg0_.max_qp + cfg0_.max_srq)
    fwd <<= 1;
  for (size_t i = 0; i < engines.size(); ++i) {
    auto W = std::make_unique<Worker>();
    W->id = static_cast<unsigned>(i);
    W->eng = engines[i];
    W->qpn_base = engines[i]->config().qpn_base;
    W->qp_by_index.assign(engines[i]->config().max_qp, nullptr);
    W->srq_by_handle.assign(engines[i]->config().max_srq + 1, nullptr);
    W->cq_by_handle.assign(engines[i]->config().max_cq + 1, nullptr);
    if (i != 0) {
      W->db_in = std::make_unique<LocalRing<abi::Doorbell>>(fwd);
      W->ev_out = std::make_unique<LocalRing<AsyncItem>>(1024);
      W->cmd = std::make_unique<CmdChannel>();
    }
    qp_main_.emplace_back(engines[i]->config().max_qp, nullptr);
    w_.push_back(std::move(W));
  }
  load_.assign(engines.size(), 0);
  srq_by_handle_.assign(cfg0_.max_srq + 1, nullptr);
  cq_by_handle_.assign(cfg0_.max_cq + 1, nullptr);
}

Daemon::~Daemon() {
  close_all();
}

void Daemon::register_types(ctl::TypeTable &t) noexcept {
  for (const ctl::VerbsSpec &s : ctl::kVerbsSpecs) {
    t.add({s.type, s.req_payload, s.req_payload, s.req_fds});
    t.add({static_cast<uint16_t>(s.type | ctl::kReplyBit), s.rep_min, s.rep_max, s.rep_fds});
  }
}

void Daemon::run_on(unsigned w, const std::function<void()> &f) {
  if (w == 0) {
    f();
    return;
  }
  const std::function<void()> &fn = f;
  w_[w]->cmd->call(fn, [this] {
    if (wait_hook_) {
      wait_hook_();
    } else {
      const timespec nap{0, 20'000};
      nanosleep(&nap, nullptr);
    }
  });
}

unsigned Daemon::serve_commands(unsigned w) noexcept {
  return w < w_.size() && w_[w]->cmd ? w_[w]->cmd->serve() : 0;
}

uint32_t Daemon::replicate(const std::function<uint32_t(transport::EngineCore &)> &f,
                           const std::function<void(transport::EngineCore &, uint32_t)> &undo) {
  uint32_t h = 0;
  size_t done = 0;
  bool ok = true;
  for (; done < w_.size(); ++done) {
    uint32_t r = 0;
    run_on(static_cast<unsigned>(done), [&] { r = f(*w_[done]->eng); });
    if (r == 0 || (done != 0 && r != h)) {
      if (r != 0) run_on(static_cast<unsigned>(done), [&] { undo(*w_[done]->eng, r); });
      ok = false;
      break;
    }
    h = r;
  }
  if (ok) return h;
  for (size_t i = 0; i < done; ++i)
    run_on(static_cast<unsigned>(i), [&] { undo(*w_[i]->eng, h); });
  return 0;
}

void Daemon::on_all(const std::function<void(transport::EngineCore &)> &f) {
  for (size_t i = 0; i < w_.size(); ++i)
    run_on(static_cast<unsigned>(i), [&] { f(*w_[i]->eng); });
}

void Daemon::on_connect(ctl::Server &, const ctl::ClientInfo &ci) {
  auto s = std::make_unique<Session>();
  s->id = ci.id;
  s->pid = ci.cred.pid;
  s->name = ci.name;
  sessions_[ci.id] = std::move(s);
  ++mctr_.sessions_opened;
  rebuild_lists();
}

void Daemon::on_disconnect(ctl::Server &, const ctl::ClientInfo &ci, ctl::CtlError) {
  auto it = sessions_.find(ci.id);
  if (it == sessions_.end()) return;
  // Off the doorbell list first: run_on's wait hook runs main's loop during the teardown.
  Session *s = it->second.get();
  std::erase(live_sessions_, s);
  destroy_session(*s);
  sessions_.erase(it);
  ++mctr_.sessions_closed;
  rebuild_lists();
}

void Daemon::close_all() {
  live_sessions_.clear();
  for (auto &kv : sessions_) {
    destroy_session(*kv.second);
    ++mctr_.sessions_closed;
  }
  sessions_.clear();
  rebuild_lists();
}

std::vector<uint64_t> Daemon::session_ids() const {
  std::vector<uint64_t> v;
  for (const auto &kv : sessions_)
    v.push_back(kv.first);
  return v;
}

void Daemon::rebuild_lists() {
  live_sessions_.clear();
  for (auto &kv : sessions_)
    live_sessions_.push_back(kv.second.get());
}

Daemon::Qp *Daemon::main_qp(uint32_t qpn) const noexcept {
  const uint32_t w = qpn_owner(qpn, static_cast<uint32_t>(w_.size()));
  const uint32_t idx = qpn - w_[w]->qpn_base;
  return idx < qp_main_[w].size() ? qp_main_[w][idx] : nullptr;
}

namespace {
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
}  // namespace

void Daemon::destroy_qp_obj(Session &s, Qp &q) {
  const uint32_t idx = q.qpn - w_[q.worker]->qpn_base;
  qp_main_[q.worker][idx] = nullptr;  // main forwards no more doorbells for it
  run_on(q.worker, [&] {
    Worker &W = *w_[q.worker];
    unlink(q, W.act_head);
    W.qp_by_index[idx] = nullptr;
    W.eng->destroy_qp(q.qpn);
  });
  --load_[q.worker];
  --q.scq->qp_refs;
  --q.rcq->qp_refs;
  if (q.srq && s.srqs.count(q.srq)) --s.srqs[q.srq]->qp_refs;
  if (--s.pd_qps[q.pd] == 0) s.pd_qps.erase(q.pd);
  s.qps.erase(q.qpn);
}

// A CQ that no QP uses any more (qp_refs 0) stops being bound to its worker once that worker's
// engine holds none of its completions (they would be stranded there: the engines' CQs are
// replicated, their contents are not). The worker drops it from its table on its own thread;
// the CQ ring's producer side (index, arm, error flag) passes to the next worker bound to it
// with the happens-before of run_on (this reply, then the next command to that worker). A CQ
// whose completions are still waiting for room in the app's ring stays bound (tried again at
// the next create_qp naming it). An SRQ is never released: its posted receives live in its
// worker's engine.
void Daemon::release_idle_cq(Cq &c) {
  if (c.qp_refs != 0 || c.worker == kUnbound) return;
  const unsigned w = static_cast<unsigned>(c.worker);
  bool idle = false;
  run_on(w, [&] {
    Worker &W = *w_[w];
    move_cq(W, c);  // what still fits in the app's ring goes there first
    if (W.eng->cq_pending(c.handle) != 0) return;
    W.cq_by_handle[c.handle] = nullptr;
    idle = true;
  });
  if (idle) c.worker = kUnbound;
}

void Daemon::destroy_srq_obj(Srq &q) {
  srq_by_handle_[q.handle] = nullptr;
  if (q.worker != kUnbound)
    run_on(static_cast<unsigned>(q.worker), [&] {
      Worker &W = *w_[q.worker];
      unlink(q, W.srq_act_head);
      W.srq_by_handle[q.handle] = nullptr;
    });
  on_all([&](transport::EngineCore &e) { e.destroy_srq(q.handle); });
}

// Everything the app owned, in dependency order. QPs go to ERR first: their queues are flushed
// and the engine stops answering for them, so peers see the ordinary RC errors (retry exceeded).
void Daemon::destroy_session(Session &s) {
  for (auto &kv : s.qps) {
    Qp &q = *kv.second;
    run_on(q.worker, [&] {
      transport::QpAttr a;
      a.qp_state = QpState::kErr;
      w_[q.worker]->eng->modify_qp(q.qpn, a, transport::kQpState);
    });
  }
  while (!s.qps.empty())
    destroy_qp_obj(s, *s.qps.begin()->second);
  for (auto &kv : s.srqs)
    destroy_srq_obj(*kv.second);
  s.srqs.clear();
  for (auto &kv : s.cqs) {
    Cq &c = *kv.second;
    cq_by_handle_[c.handle] = nullptr;
    if (c.worker != kUnbound)
      run_on(static_cast<unsigned>(c.worker),
             [&] { w_[c.worker]->cq_by_handle[c.handle] = nullptr; });
    on_all([&](transport::EngineCore &e) { e.destroy_cq(c.handle); });
  }
  s.cqs.clear();
  for (uint32_t ah : s.ahs)
    on_all([&](transport::EngineCore &e) { e.destroy_ah(ah); });
  s.ahs.clear();
  for (auto &kv : s.mrs)
    on_all([&](transport::EngineCore &e) { e.dereg_mr(kv.first); });
  s.mrs.clear();  // unmaps
  for (uint32_t pd : s.pds)
    on_all([&](transport::EngineCore &e) { e.dealloc_pd(pd); });
  s.pds.clear();
}

// ---------------------------------------------------------------------------------------------
// Control messages
// ---------------------------------------------------------------------------------------------
// The verbs handlers, one per request type, in the order of ctl::kVerbsSpecs (checked below).
struct Daemon::VerbsHandler {
  uint16_t type;
  Handler fn;
};

void Daemon::on_message(ctl::Server &srv, const ctl::ClientInfo &ci, ctl::Message &m) {
  static constexpr VerbsHandler kHandlers[] = {
      {ctl::kOpenContext, &Daemon::do_open_context},
      {ctl::kQueryDevice, &Daemon::do_query_device},
      {ctl::kQueryPort, &Daemon::do_query_port},
      {ctl::kQueryGid, &Daemon::do_query_gid},
      {ctl::kAllocPd, &Daemon::do_alloc_pd},
      {ctl::kDeallocPd, &Daemon::do_dealloc_pd},
      {ctl::kRegMr, &Daemon::do_reg_mr},
      {ctl::kDeregMr, &Daemon::do_dereg_mr},
      {ctl::kCreateCq, &Daemon::do_create_cq},
      {ctl::kDestroyCq, &Daemon::do_destroy_cq},
      {ctl::kCreateQp, &Daemon::do_create_qp},
      {ctl::kModifyQp, &Daemon::do_modify_qp},
      {ctl::kQueryQp, &Daemon::do_query_qp},
      {ctl::kDestroyQp, &Daemon::do_destroy_qp},
      {ctl::kCreateSrq, &Daemon::do_create_srq},
      {ctl::kDestroySrq, &Daemon::do_destroy_srq},
      {ctl::kCreateAh, &Daemon::do_create_ah},
      {ctl::kDestroyAh, &Daemon::do_destroy_ah},
      {ctl::kStats, &Daemon::do_stats},
      {ctl::kGetAsyncEvents, &Daemon::do_get_async_events},
      {ctl::kModifySrq, &Daemon::do_modify_srq},
  };
  // Every verbs type has its handler, at its kVerbsSpecs index.
  static_assert(std::size(kHandlers) == std::size(ctl::kVerbsSpecs));
  static_assert([] {
    for (size_t i = 0; i < std::size(kHandlers); ++i)
      if (kHandlers[i].type != ctl::kVerbsSpecs[i].type ||
          kHandlers[i].type != ctl::kFirstVerbsType + i)
        return false;
    return true;
  }());

  auto it = sessions_.find(ci.id);
  if (it == sessions_.end()) return;
  Session &s = *it->second;
  auto r = std::make_unique<Reply>();
  int rc = -EOPNOTSUPP;
  const size_t i = static_cast<size_t>(m.hdr.type) - ctl::kFirstVerbsType;
  try {
    if (m.hdr.type >= ctl::kFirstVerbsType && i < std::size(kHandlers))
      rc = (this->*kHandlers[i].fn)(s, m, *r);
  } catch (const std::bad_alloc &) {
    rc = -ENOMEM;
  }
  if (rc != 0) {
    srv.reply(ci.id, m.hdr, rc, nullptr, 0);
  } else {
    srv.reply(ci.id, m.hdr, 0, r->buf, r->len, r->fds, r->nfds);
  }
  // Objects created for this reply keep their own fds; the message's fds close with it.
}

int Daemon::do_open_context(Session &s, ctl::Message &, Reply &r) {
  if (!s.has_db) {
    const uint32_t slots = pow2_at_least(2 * (opt_.max_qp_per_session + kMaxSrqPerSession));
    const int rc = make_ring("uroce-doorbell", abi::RingKind::kDoorbell, 0, sizeof(abi::Doorbell),
                             slots, &s.db_mem);
    if (rc) return rc;
    if (s.db.attach(s.db_mem.mem.map.addr(), s.db_mem.geo.bytes, sizeof(abi::Doorbell), slots) !=
        shm::RingError::kOk)
      return -EINVAL;
    auto ev = shm::EventFd::create();
    if (!ev) return -ev.error();
    s.async_ev = std::move(ev.value());
    s.has_db = true;
  }
  ctl::OpenContextReply rep{};
  rep.doorbell = s.db_mem.geo;
  rep.max_qp_per_session = opt_.max_qp_per_session;
  r.set(rep);
  r.fd(s.db_mem.mem.memfd.fd());
  r.fd(s.async_ev.fd());
  return 0;
}

int Daemon::do_get_async_events(Session &s, ctl::Message &, Reply &r) {
  ctl::AsyncEventsReply rep{};
  rep.count = s.async_n;
  rep.lost = s.async_lost;
  for (uint32_t i = 0; i < s.async_n; ++i)
    rep.events[i] = s.async_q[i];
  s.async_n = 0;
  s.async_lost = 0;
  r.set(rep);
  r.len = offsetof(ctl::AsyncEventsReply, events) + rep.count * sizeof(ctl::AsyncEventEntry);
  if (s.async_ev.valid()) s.async_ev.drain();
  return 0;
}

int Daemon::do_query_device(Session &, ctl::Message &, Reply &r) {
  const transport::EngineConfig &c = cfg0_;
  ctl::DeviceAttrPayload d{};
  const uint8_t *mac = port_.mac();
  const uint8_t eui[8] = {
      static_cast<uint8_t>(mac[0] ^ 2), mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
  std::memcpy(&d.node_guid, eui, 8);
  d.sys_image_guid = d.node_guid;
  d.max_mr_size = uint64_t{1} << 40;
  d.page_size_cap = 4096;
  d.vendor_id = 0x55524f;  // "URO"
  d.vendor_part_id = 1;
  d.hw_ver = 1;
  d.max_qp = c.max_qp;
  d.max_qp_wr = transport::kMaxWr;
  d.max_sge = transport::kMaxSge;
  d.max_cq = c.max_cq;
  d.max_cqe = c.max_cqe;
  d.max_mr = c.max_mr;
  d.max_pd = c.max_pd;
  d.max_qp_rd_atom = transport::kMaxRdAtomic;
  d.max_qp_init_rd_atom = transport::kMaxInitRdAtomic;
  d.max_srq = c.max_srq;
  d.max_srq_wr = transport::kMaxWr;
  d.max_srq_sge = 31;  // the largest receive slot class
  d.max_ah = c.max_ah;
  d.max_inline = 960;  // the largest send slot class
  d.atomic_cap = 1;
  d.phys_port_cnt = 1;
  std::snprintf(d.fw_ver, sizeof d.fw_ver, "uroce");
  std::snprintf(d.ibdev_name, sizeof d.ibdev_name, "%s", port_.ibdev_name());
  r.set(d);
  return 0;
}

int Daemon::do_query_port(Session &, ctl::Message &m, Reply &r) {
  ctl::PortNumPayload p{};
  if (!m.payload_as(&p) || p.port_num != 1) return -EINVAL;
  ctl::PortAttrPayload a{};
  a.state = port_.link_up() ? 4 : 1;
  a.max_mtu = static_cast<uint32_t>(transport::Mtu::k4096);
  a.active_mtu = static_cast<uint32_t>(port_.ib_mtu());
  a.gid_tbl_len = static_cast<uint32_t>(port_.gid_count());
  a.max_msg_sz = transport::kMaxMsgSize;
  a.pkey_tbl_len = 1;
  a.link_layer = 2;
  a.active_speed = 1;
  a.active_width = 1;
  a.phys_state = port_.link_up() ? 5 : 3;
  a.eth_mtu = port_.eth_mtu();
  std::memcpy(a.mac, port_.mac(), 6);
  r.set(a);
  return 0;
}

int Daemon::do_query_gid(Session &, ctl::Message &m, Reply &r) {
  ctl::QueryGidPayload q{};
  if (!m.payload_as(&q) || q.port_num != 1 || q.index >= port_.gid_count()) return -EINVAL;
  ctl::GidPayload g{};
  const wire::Gid gid = port_.gid(q.index);
  std::memcpy(g.gid, gid.raw, 16);
  g.gid_type = 2;
  r.set(g);
  return 0;
}

int Daemon::do_alloc_pd(Session &s, ctl::Message &, Reply &r) {
  const uint32_t pd = replicate([](transport::EngineCore &e) { return e.create_pd(); },
                                [](transport::EngineCore &e, uint32_t h) { e.dealloc_pd(h); });
  if (pd == 0) return -ENOMEM;
  s.pds.insert(pd);
  r.set(ctl::HandlePayload{pd, 0});
  return 0;
}

int Daemon::do_dealloc_pd(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h) || !s.pds.count(h.handle)) return -EINVAL;
  // QPs exist in their owner's engine only: check here so that every engine agrees.
  if (s.pd_qps.count(h.handle)) return -EBUSY;
  int rc = 0;
  run_on(0, [&] { rc = w_[0]->eng->dealloc_pd(h.handle); });
  if (rc) return -rc;
  for (unsigned w = 1; w < w_.size(); ++w)
    run_on(w, [&] { w_[w]->eng->dealloc_pd(h.handle); });
  s.pds.erase(h.handle);
  return 0;
}

int Daemon::do_reg_mr(Session &s, ctl::Message &m, Reply &r) {
  ctl::RegMrPayload p{};
  if (!m.payload_as(&p) || m.nfds != 1 || !s.pds.count(p.pd)) return -EINVAL;
  if (p.length == 0 || p.offset > (uint64_t{1} << 57) || p.length > (uint64_t{1} << 40) ||
      p.app_va + p.length < p.app_va)
    return -EINVAL;
  if (s.mrs.size() >= opt_.max_mr_per_session) return -ENOMEM;
  // Sealed against shrinking, or the app could truncate it under our mapping (SIGBUS).
  auto fd = shm::Memfd::adopt(std::move(m.fds[0]), p.offset + p.length);
  if (!fd) return -fd.error();
  const uint64_t start = p.offset & ~uint64_t{shm::kPageSize - 1};
  const uint64_t end = shm::round_up_page(p.offset + p.length);
  auto map =
      shm::Mapping::map(fd->fd(), end - start, shm::MapProt::kReadWrite, static_cast<off_t>(start));
  if (!map) return -map.error();
  uint8_t *host = reinterpret_cast<uint8_t *>(map->data()) + (p.offset - start);
  uint32_t lkey = 0, rkey = 0;
  int rc = 0;
  const uint32_t key = replicate(
      [&](transport::EngineCore &e) -> uint32_t {
        uint32_t l = 0, k = 0;
        const int e_rc = e.reg_mr(p.pd, host, p.app_va, p.length, p.access, &l, &k);
        if (e_rc) {
          rc = e_rc;
          return 0;
        }
        return l;
      },
      [](transport::EngineCore &e, uint32_t h) { e.dereg_mr(h); });
  if (key == 0) return rc ? -rc : -EIO;
  lkey = rkey = key;
  s.mrs[lkey] = std::move(map.value());
  r.set(ctl::RegMrReply{lkey, rkey});
  return 0;
}

int Daemon::do_dereg_mr(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h)) return -EINVAL;
  auto it = s.mrs.find(h.handle);
  if (it == s.mrs.end()) return -EINVAL;
  int rc = 0;
  run_on(0, [&] { rc = w_[0]->eng->dereg_mr(h.handle); });
  if (rc) return -rc;
  for (unsigned w = 1; w < w_.size(); ++w)
    run_on(w, [&] { w_[w]->eng->dereg_mr(h.handle); });
  s.mrs.erase(it);
  return 0;
}

int Daemon::do_create_cq(Session &s, ctl::Message &m, Reply &r) {
  ctl::CreateCqPayload p{};
  if (!m.payload_as(&p) || p.cqe == 0 || p.cqe > cfg0_.max_cqe) return -EINVAL;
  const uint32_t depth = pow2_at_least(p.cqe);
  if (depth > cfg0_.max_cqe) return -EINVAL;
  auto c = std::make_unique<Cq>();
  int rc = make_ring("uroce-cq", abi::RingKind::kCompletion, 0, sizeof(abi::Cqe), depth, &c->mem);
  if (rc) return rc;
  auto ev = shm::EventFd::create();
  if (!ev) return -ev.error();
  c->ev = std::move(ev.value());
  if (c->ring.attach(c->mem.mem.map.addr(), c->mem.geo.bytes, sizeof(abi::Cqe), depth) !=
      shm::RingError::kOk)
    return -EINVAL;
  c->handle = replicate(
      [depth](transport::EngineCore &e) -> uint32_t {
        try {
          return e.create_cq(depth);
        } catch (const std::bad_alloc &) {
          return 0;
        }
      },
      [](transport::EngineCore &e, uint32_t h) { e.destroy_cq(h); });
  if (c->handle == 0) return -ENOMEM;
  c->owner = &s;
  ctl::CreateCqReply rep{};
  rep.cq = c->handle;
  rep.cqe = depth;
  rep.ring = c->mem.geo;
  r.set(rep);
  r.fd(c->mem.mem.memfd.fd());
  r.fd(c->ev.fd());
  cq_by_handle_[c->handle] = c.get();
  s.cqs[c->handle] = std::move(c);
  rebuild_lists();
  return 0;
}

int Daemon::do_destroy_cq(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h)) return -EINVAL;
  auto it = s.cqs.find(h.handle);
  if (it == s.cqs.end()) return -EINVAL;
  Cq &c = *it->second;
  if (c.qp_refs) return -EBUSY;  // checked here: the QPs are in their owner's engine only
  cq_by_handle_[h.handle] = nullptr;
  if (c.worker != kUnbound)
    run_on(static_cast<unsigned>(c.worker),
           [&] { w_[c.worker]->cq_by_handle[c.handle] = nullptr; });
  on_all([&](transport::EngineCore &e) { e.destroy_cq(c.handle); });
  s.cqs.erase(it);
  rebuild_lists();
  return 0;
}

int Daemon::do_create_qp(Session &s, ctl::Message &m, Reply &r) {
  ctl::CreateQpPayload p{};
  if (!m.payload_as(&p) || !s.has_db) return -EINVAL;
  if (!s.pds.count(p.pd) || !s.cqs.count(p.send_cq) || !s.cqs.count(p.recv_cq)) return -EINVAL;
  if (p.srq && !s.srqs.count(p.srq)) return -EINVAL;
  if (p.qp_type < 2 || p.qp_type > 4 || p.sq_sig_all > 1) return -EINVAL;
  if (p.max_send_wr > transport::kMaxWr || p.max_recv_wr > transport::kMaxWr ||
      p.max_send_sge > transport::kMaxSge || p.max_recv_sge > transport::kMaxSge)
    return -EINVAL;
  if (s.qps.size() >= opt_.max_qp_per_session) return -ENOMEM;
  const uint32_t ssge = p.max_send_sge ? p.max_send_sge : 1;
  const uint32_t rsge = p.max_recv_sge ? p.max_recv_sge : 1;
  const uint32_t sslot = abi::send_slot_size(ssge, p.max_inline_data);
  const uint32_t rslot = abi::recv_slot_size(rsge);
  if (sslot == 0 || rslot == 0 || p.max_inline_data > transport::kMaxInline) return -EINVAL;

  transport::QpInitAttr init;
  init.qp_type = static_cast<transport::QpType>(p.qp_type);
  init.pd = p.pd;
  init.send_cq = p.send_cq;
  init.recv_cq = p.recv_cq;
  init.srq = p.srq;
  init.has_srq = p.srq != 0;
  // A work queue holds as many WRs as its ring has slots (a power of two at least what was
  // asked; reported back as the QP's cap, as rxe and ConnectX round up): a slot is freed when
  // its WR completes (release_slots), so ibv_post_* refuses with ENOMEM at exactly that cap.
  init.cap.max_send_wr = pow2_at_least(p.max_send_wr);
  init.cap.max_recv_wr = p.srq ? 0 : pow2_at_least(p.max_recv_wr);
  init.cap.max_send_sge = ssge;
  init.cap.max_recv_sge = rsge;
  init.cap.max_inline_data = p.max_inline_data;
  init.sq_sig_all = p.sq_sig_all != 0;

  auto q = std::make_unique<Qp>();
  const uint32_t sslots = init.cap.max_send_wr;
  int rc = make_ring("uroce-sq", abi::RingKind::kSendQueue, 0, sslot, sslots, &q->sq_mem);
  if (rc) return rc;
  if (q->sq.attach(q->sq_mem.mem.map.addr(), q->sq_mem.geo.bytes, sslot, sslots) !=
      shm::RingError::kOk)
    return -EINVAL;
  q->sq.defer_release();
  if (!p.srq) {
    const uint32_t rslots = init.cap.max_recv_wr;
    rc = make_ring("uroce-rq", abi::RingKind::kRecvQueue, 0, rslot, rslots, &q->rq_mem);
    if (rc) return rc;
    if (q->rq.attach(q->rq_mem.mem.map.addr(), q->rq_mem.geo.bytes, rslot, rslots) !=
        shm::RingError::kOk)
      return -EINVAL;
    q->rq.defer_release();
    q->has_rq = true;
  }
  // Placement: the worker its CQs / SRQ are bound to, else the least loaded one. A CQ whose
  // QPs are all gone does not bind any more (release_idle_cq).
  Cq *scq = s.cqs[p.send_cq].get(), *rcq = s.cqs[p.recv_cq].get();
  release_idle_cq(*scq);
  if (rcq != scq) release_idle_cq(*rcq);
  Srq *srq = p.srq ? s.srqs[p.srq].get() : nullptr;
  const int bound[3] = {scq->worker, rcq->worker, srq ? srq->worker : kUnbound};
  const int w = place_qp(bound, 3, load_.data(), load_.size());
  if (w == kUnbound) return -EINVAL;  // its CQs / SRQ already live on different workers
  q->worker = static_cast<unsigned>(w);
  q->owner = &s;
  q->type = init.qp_type;
  q->scq = scq;
  q->rcq = rcq;
  q->srq = p.srq;
  q->pd = p.pd;
  uint32_t qpn = 0;
  run_on(q->worker, [&] {
    Worker &W = *w_[q->worker];
    qpn = W.eng->create_qp(init);
    if (qpn == 0) return;
    q->qpn = qpn;
    W.qp_by_index[qpn - W.qpn_base] = q.get();
    W.cq_by_handle[scq->handle] = scq;
    W.cq_by_handle[rcq->handle] = rcq;
    if (srq && srq->worker == kUnbound) {
      W.srq_by_handle[srq->handle] = srq;
      activate_srq(W, *srq);  // WQEs posted before it was bound
    }
  });
  if (qpn == 0) return -ENOMEM;
  scq->worker = rcq->worker = w;
  ++scq->qp_refs;
  ++rcq->qp_refs;
  if (srq) {
    srq->worker = w;
    ++srq->qp_refs;
  }
  ++s.pd_qps[p.pd];
  ++load_[q->worker];
  ctl::CreateQpReply rep{};
  rep.qpn = qpn;
  rep.max_send_wr = init.cap.max_send_wr;
  rep.max_recv_wr = init.cap.max_recv_wr;
  rep.max_send_sge = ssge;
  rep.max_recv_sge = rsge;
  rep.max_inline_data = p.max_inline_data;
  rep.sq = q->sq_mem.geo;
  rep.rq = q->rq_mem.geo;
  r.set(rep);
  r.fd(q->sq_mem.mem.memfd.fd());
  if (q->has_rq) r.fd(q->rq_mem.mem.memfd.fd());
  qp_main_[w][qpn - w_[w]->qpn_base] = q.get();
  s.qps[qpn] = std::move(q);
  return 0;
}

int path_from_ah_attr(PortView &port, const ctl::AhAttrPayload &a, wire::PathInfo *out) {
  if (!a.is_global || (a.port_num != 1 && a.port_num != 0)) return -EINVAL;
  if (a.sgid_index >= port.gid_count()) return -EINVAL;
  wire::PathInfo p;
  p.sgid = port.gid(a.sgid_index);
  std::memcpy(p.dgid.raw, a.dgid, 16);
  if (p.sgid.is_v4mapped() != p.dgid.is_v4mapped()) return -EINVAL;
  std::memcpy(p.smac, port.mac(), 6);
  if (port.resolve(p.dgid, p.dmac) != 0) return -EHOSTUNREACH;
  p.dscp = a.traffic_class ? static_cast<uint8_t>(a.traffic_class >> 2) : port.dscp();
  // As Linux for every RoCE device (ib_resolve_unicast_gid_dmac): the IP TTL / hop limit is
  // the route's (64), not the address vector's. ibv_rc_pingpong asks for 1; rxe and ConnectX
  // send 64 all the same, and so does uroce (found against rxe: doc/interop.md).
  p.hop_limit = wire::kRoceHopLimit;
  p.flow_label = a.flow_label & 0xfffff;
  *out = p;
  return 0;
}

int Daemon::path_from_ah(const ctl::AhAttrPayload &a, wire::PathInfo *out) {
  return path_from_ah_attr(port_, a, out);
}

int Daemon::do_modify_qp(Session &s, ctl::Message &m, Reply &) {
  ctl::ModifyQpPayload p{};
  if (!m.payload_as(&p)) return -EINVAL;
  auto it = s.qps.find(p.qpn);
  if (it == s.qps.end()) return -EINVAL;
  Qp &q = *it->second;
  const ctl::QpAttrPayload &x = p.attr;
  transport::QpAttr a;
  a.qp_state = static_cast<QpState>(x.qp_state);
  a.cur_qp_state = static_cast<QpState>(x.cur_qp_state);
  a.path_mtu = static_cast<transport::Mtu>(x.path_mtu);
  if ((p.attr_mask & transport::kQpPathMtu) && transport::mtu_valid(a.path_mtu) &&
      static_cast<uint32_t>(a.path_mtu) > static_cast<uint32_t>(port_.ib_mtu()))
    a.path_mtu = port_.ib_mtu();  // as rxe: the path MTU never exceeds the port's
  a.qkey = x.qkey;
  a.rq_psn = x.rq_psn;
  a.sq_psn = x.sq_psn;
  a.dest_qp_num = x.dest_qp_num;
  a.qp_access_flags = x.qp_access_flags;
  a.pkey_index = x.pkey_index;
  a.en_sqd_async_notify = x.en_sqd_async_notify != 0;
  a.max_rd_atomic = x.max_rd_atomic;
  a.max_dest_rd_atomic = x.max_dest_rd_atomic;
  a.min_rnr_timer = x.min_rnr_timer;
  a.port_num = x.port_num;
  a.timeout = x.timeout;
  a.retry_cnt = x.retry_cnt;
  a.rnr_retry = x.rnr_retry;
  a.path_mig_state = x.path_mig_state;
  if (p.attr_mask & transport::kQpAv) {
    const int rc = path_from_ah(x.ah_attr, &a.ah);
    if (rc) return rc;
  }
  int rc = 0;
  run_on(q.worker, [&] {
    Worker &W = *w_[q.worker];
    rc = W.eng->modify_qp(q.qpn, a, p.attr_mask);
    if (rc) return;
    if (p.attr_mask & transport::kQpState) q.err = a.qp_state == QpState::kErr;
    release_slots(W, q);  // a reset emptied the engine's queues
    // WQEs posted before RTS (or while the QP was being reset) are looked at again.
    if (q.sq.available(1) != 0 || (q.has_rq && q.rq.available(1) != 0)) {
      q.sq_rung = true;
      q.rq_rung = q.has_rq;
      activate(W, q);
    }
  });
  return -rc;
}

int Daemon::do_query_qp(Session &s, ctl::Message &m, Reply &r) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h) || !s.qps.count(h.handle)) return -EINVAL;
  transport::QpAttr a;
  transport::QpInitAttr init;
  const unsigned ow = s.qps[h.handle]->worker;
  int rc = 0;
  run_on(ow, [&] { rc = w_[ow]->eng->query_qp(h.handle, &a, &init); });
  if (rc) return -rc;
  ctl::QueryQpReply rep{};
  ctl::QpAttrPayload &x = rep.attr;
  x.qp_state = static_cast<uint32_t>(a.qp_state);
  x.cur_qp_state = static_cast<uint32_t>(a.cur_qp_state);
  x.path_mtu = static_cast<uint32_t>(a.path_mtu);
  x.qkey = a.qkey;
  x.rq_psn = a.rq_psn;
  x.sq_psn = a.sq_psn;
  x.dest_qp_num = a.dest_qp_num;
  x.qp_access_flags = a.qp_access_flags;
  x.max_send_wr = a.cap.max_send_wr;
  x.max_recv_wr = a.cap.max_recv_wr;
  x.max_send_sge = a.cap.max_send_sge;
  x.max_recv_sge = a.cap.max_recv_sge;
  x.max_inline_data = a.cap.max_inline_data;
  x.pkey_index = a.pkey_index;
  x.en_sqd_async_notify = a.en_sqd_async_notify;
  x.sq_draining = a.sq_draining;
  x.max_rd_atomic = a.max_rd_atomic;
  x.max_dest_rd_atomic = a.max_dest_rd_atomic;
  x.min_rnr_timer = a.min_rnr_timer;
  x.port_num = 1;
  x.timeout = a.timeout;
  x.retry_cnt = a.retry_cnt;
  x.rnr_retry = a.rnr_retry;
  x.path_mig_state = a.path_mig_state;
  std::memcpy(x.ah_attr.dgid, a.ah.dgid.raw, 16);
  x.ah_attr.flow_label = a.ah.flow_label;
  x.ah_attr.hop_limit = a.ah.hop_limit;
  x.ah_attr.traffic_class = static_cast<uint8_t>(a.ah.dscp << 2);
  x.ah_attr.is_global = 1;
  x.ah_attr.port_num = 1;
  for (size_t i = 0; i < port_.gid_count() && i < 256; ++i)
    if (port_.gid(i) == a.ah.sgid) {
      x.ah_attr.sgid_index = static_cast<uint8_t>(i);
      break;
    }
  ctl::CreateQpPayload &n = rep.init;
  n.pd = init.pd;
  n.qp_type = static_cast<uint32_t>(init.qp_type);
  n.send_cq = init.send_cq;
  n.recv_cq = init.recv_cq;
  n.srq = init.srq;
  n.max_send_wr = init.cap.max_send_wr;
  n.max_recv_wr = init.cap.max_recv_wr;
  n.max_send_sge = init.cap.max_send_sge;
  n.max_recv_sge = init.cap.max_recv_sge;
  n.max_inline_data = init.cap.max_inline_data;
  n.sq_sig_all = init.sq_sig_all;
  r.set(rep);
  return 0;
}

int Daemon::do_destroy_qp(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h)) return -EINVAL;
  auto it = s.qps.find(h.handle);
  if (it == s.qps.end()) return -EINVAL;
  destroy_qp_obj(s, *it->second);
  return 0;
}

int Daemon::do_create_srq(Session &s, ctl::Message &m, Reply &r) {
  ctl::CreateSrqPayload p{};
  if (!m.payload_as(&p) || !s.has_db || !s.pds.count(p.pd)) return -EINVAL;
  if (p.max_wr == 0 || p.max_wr > transport::kMaxWr || p.max_sge == 0 || p.max_sge > 31)
    return -EINVAL;
  if (s.srqs.size() >= kMaxSrqPerSession) return -ENOMEM;
  const uint32_t slot = abi::recv_slot_size(p.max_sge);
  const uint32_t slots = pow2_at_least(p.max_wr);
  auto q = std::make_unique<Srq>();
  int rc = make_ring("uroce-srq", abi::RingKind::kSharedRecvQueue, 0, slot, slots, &q->mem);
  if (rc) return rc;
  if (q->ring.attach(q->mem.mem.map.addr(), q->mem.geo.bytes, slot, slots) != shm::RingError::kOk)
    return -EINVAL;
  q->ring.defer_release();  // as a QP's RQ (do_create_qp): max_wr is the ring's slot count
  q->handle = replicate(
      [&p, slots](transport::EngineCore &e) -> uint32_t {
        try {
          return e.create_srq(p.pd, slots, p.max_sge);
        } catch (const std::bad_alloc &) {
          return 0;
        }
      },
      [](transport::EngineCore &e, uint32_t h) { e.destroy_srq(h); });
  if (q->handle == 0) return -ENOMEM;
  if (p.srq_limit) {
    run_on(0, [&] { rc = w_[0]->eng->modify_srq(q->handle, p.srq_limit); });
    if (rc) {
      on_all([&](transport::EngineCore &e) { e.destroy_srq(q->handle); });
      return -rc;
    }
    for (unsigned w = 1; w < w_.size(); ++w)
      run_on(w, [&] { w_[w]->eng->modify_srq(q->handle, p.srq_limit); });
  }
  q->owner = &s;
  ctl::CreateSrqReply rep{};
  rep.srq = q->handle;
  rep.max_wr = slots;
  rep.max_sge = p.max_sge;
  rep.ring = q->mem.geo;
  r.set(rep);
  r.fd(q->mem.mem.memfd.fd());
  srq_by_handle_[q->handle] = q.get();
  s.srqs[q->handle] = std::move(q);
  return 0;
}

int Daemon::do_modify_srq(Session &s, ctl::Message &m, Reply &) {
  ctl::ModifySrqPayload p{};
  if (!m.payload_as(&p) || !s.srqs.count(p.srq)) return -EINVAL;
  // The SRQ exists in every worker's engine (do_create_srq): arm it everywhere, as creation
  // does; worker 0's engine validates the limit (the engines are identical).
  int rc = 0;
  run_on(0, [&] { rc = w_[0]->eng->modify_srq(p.srq, p.srq_limit); });
  if (rc) return -rc;
  for (unsigned w = 1; w < w_.size(); ++w)
    run_on(w, [&] { w_[w]->eng->modify_srq(p.srq, p.srq_limit); });
  return 0;
}

int Daemon::do_destroy_srq(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h)) return -EINVAL;
  auto it = s.srqs.find(h.handle);
  if (it == s.srqs.end()) return -EINVAL;
  Srq &q = *it->second;
  if (q.qp_refs) return -EBUSY;  // checked here: the QPs are in their owner's engine only
  destroy_srq_obj(q);
  s.srqs.erase(it);
  return 0;
}

int Daemon::do_create_ah(Session &s, ctl::Message &m, Reply &r) {
  ctl::CreateAhPayload p{};
  if (!m.payload_as(&p) || !s.pds.count(p.pd)) return -EINVAL;
  transport::AhAttr a;
  const int rc = path_from_ah(p.attr, &a.path);
  if (rc) return rc;
  const uint32_t ah = replicate([&](transport::EngineCore &e) { return e.create_ah(p.pd, a); },
                                [](transport::EngineCore &e, uint32_t h) { e.destroy_ah(h); });
  if (ah == 0) return -ENOMEM;
  s.ahs.insert(ah);
  r.set(ctl::HandlePayload{ah, 0});
  return 0;
}

int Daemon::do_destroy_ah(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h) || !s.ahs.count(h.handle)) return -EINVAL;
  int rc = 0;
  run_on(0, [&] { rc = w_[0]->eng->destroy_ah(h.handle); });
  if (rc) return -rc;
  for (unsigned w = 1; w < w_.size(); ++w)
    run_on(w, [&] { w_[w]->eng->destroy_ah(h.handle); });
  s.ahs.erase(h.handle);
  return 0;
}

void Daemon::snapshot_stats() {
  std::vector<ctl::StatEntry> v;
  size_t pds = 0, mrs = 0, cqs = 0, qps = 0, srqs = 0, ahs = 0;
  for (auto &kv : sessions_) {
    const Session &s = *kv.second;
    pds += s.pds.size();
    mrs += s.mrs.size();
    cqs += s.cqs.size();
    qps += s.qps.size();
    srqs += s.srqs.size();
    ahs += s.ahs.size();
  }
  add_stat(v, "daemon.sessions", sessions_.size());
  add_stat(v, "daemon.pds", pds);
  add_stat(v, "daemon.mrs", mrs);
  add_stat(v, "daemon.cqs", cqs);
  add_stat(v, "daemon.qps", qps);
  add_stat(v, "daemon.srqs", srqs);
  add_stat(v, "daemon.ahs", ahs);
  const BridgeCounters ctr = counters();
  add_stat(v, "daemon.workers", w_.size());
  add_stat(v, "daemon.sessions_opened", ctr.sessions_opened);
  add_stat(v, "daemon.sessions_closed", ctr.sessions_closed);
  add_stat(v, "bridge.doorbells", ctr.doorbells);
  add_stat(v, "bridge.bad_doorbells", ctr.bad_doorbells);
  add_stat(v, "bridge.send_wqes", ctr.send_wqes);
  add_stat(v, "bridge.recv_wqes", ctr.recv_wqes);
  add_stat(v, "bridge.bad_wqes", ctr.bad_wqes);
  add_stat(v, "bridge.flushed_wqes", ctr.flushed_wqes);
  add_stat(v, "bridge.corrupt_rings", ctr.corrupt_rings);
  add_stat(v, "bridge.cqes", ctr.cqes);
  add_stat(v, "bridge.cqe_lost", ctr.cqe_lost);
  add_stat(v, "bridge.cq_events", ctr.cq_events);
  add_stat(v, "bridge.cq_passes", ctr.cq_passes);
  add_stat(v, "bridge.async_events", ctr.async_events);
  add_stat(v, "bridge.async_unrouted", ctr.async_unrouted);
  add_stat(v, "bridge.async_lost", ctr.async_lost);
  add_stat(v, "bridge.doorbells_forwarded", ctr.doorbells_forwarded);
  // Every engine's counters, each copied on its own worker.
  transport::EngineCounters e;
  uint64_t active = 0;
  for (unsigned w = 0; w < w_.size(); ++w) {
    transport::EngineCounters x;
    uint32_t act = 0;
    run_on(w, [&] {
      x = w_[w]->eng->counters();
      act = w_[w]->eng->active_qps();
    });
    e.rx_pkts += x.rx_pkts;
    e.tx_pkts += x.tx_pkts;
    e.tx_backpressure += x.tx_backpressure;
    e.acks_coalesced += x.acks_coalesced;
    e.cq_overflows += x.cq_overflows;
    for (size_t i = 0; i < static_cast<size_t>(transport::DropReason::kCount); ++i)
      e.drops[i] += x.drops[i];
    for (size_t i = 0; i < static_cast<size_t>(wire::ParseError::kCount); ++i)
      e.parse_errors[i] += x.parse_errors[i];
    active += act;
    if (w_.size() > 1) {
      const std::string pre = "worker." + std::to_string(w) + ".";
      add_stat(v, pre + "qps", load_[w]);
      add_stat(v, pre + "rx_pkts", x.rx_pkts);
      add_stat(v, pre + "tx_pkts", x.tx_pkts);
    }
  }
  add_stat(v, "engine.rx_pkts", e.rx_pkts);
  add_stat(v, "engine.tx_pkts", e.tx_pkts);
  add_stat(v, "engine.tx_backpressure", e.tx_backpressure);
  add_stat(v, "engine.acks_coalesced", e.acks_coalesced);
  add_stat(v, "engine.cq_overflows", e.cq_overflows);
  add_stat(v, "engine.active_qps", active);
  for (size_t i = 0; i < static_cast<size_t>(transport::DropReason::kCount); ++i)
    add_stat(v, std::string("engine.drop.") + kDropNames[i], e.drops[i]);
  for (size_t i = 0; i < static_cast<size_t>(wire::ParseError::kCount); ++i)
    if (e.parse_errors[i])
      add_stat(v,
               std::string("engine.parse_error.") +
                   wire::parse_error_str(static_cast<wire::ParseError>(i)),
               e.parse_errors[i]);
  if (stats_hook_) stats_hook_(v);
  for (auto &kv : sessions_) {
    const Session &s = *kv.second;
    const std::string pre = "session." + std::to_string(s.id) + ".";
    add_stat(v, pre + "pid", static_cast<uint64_t>(s.pid));
    add_stat(v, pre + "qps", s.qps.size());
    add_stat(v, pre + "mrs", s.mrs.size());
    add_stat(v, pre + "cqs", s.cqs.size());
    for (auto &qkv : s.qps) {
      const uint32_t qpn = qkv.first;
      const unsigned ow = qkv.second->worker;
      transport::QpCounters cc;
      const transport::QpCounters *c = nullptr;
      transport::QpAttr a;
      transport::QpInitAttr init;
      run_on(ow, [&] {
        const transport::QpCounters *x = w_[ow]->eng->qp_counters(qpn);
        if (x == nullptr) return;
        cc = *x;
        c = &cc;
        w_[ow]->eng->query_qp(qpn, &a, &init);
      });
      if (c == nullptr) continue;
      const std::string q = "qp." + std::to_string(qpn) + ".";
      add_stat(v, q + "session", s.id);
      add_stat(v, q + "worker", ow);
      add_stat(v, q + "type", static_cast<uint64_t>(init.qp_type));
      add_stat(v, q + "state", static_cast<uint64_t>(a.qp_state));
      add_stat(v, q + "tx_pkts", c->tx_pkts);
      add_stat(v, q + "rx_pkts", c->rx_pkts);
      add_stat(v, q + "retransmits", c->retransmits);
      add_stat(v, q + "timeouts", c->timeouts);
      add_stat(v, q + "seq_naks_sent", c->seq_naks_sent);
      add_stat(v, q + "seq_naks_rcvd", c->seq_naks_rcvd);
      add_stat(v, q + "rnr_naks_sent", c->rnr_naks_sent);
      add_stat(v, q + "rnr_naks_rcvd", c->rnr_naks_rcvd);
      add_stat(v, q + "dup_requests", c->dup_requests);
      add_stat(v, q + "ce_seen", c->ce_seen);
      add_stat(v, q + "cnp_sent", c->cnp_sent);
      add_stat(v, q + "cnp_rcvd", c->cnp_rcvd);
      add_stat(v, q + "window_cuts", c->window_cuts);
      add_stat(v, q + "window_restores", c->window_restores);
    }
  }
  stats_ = std::move(v);
  ++stats_gen_;
}

int Daemon::do_stats(Session &, ctl::Message &m, Reply &r) {
  ctl::StatsRequest q{};
  if (!m.payload_as(&q)) return -EINVAL;
  if (q.first == 0) snapshot_stats();
  if (q.first > stats_.size()) return -EINVAL;
  auto rep = std::make_unique<ctl::StatsReply>();
  std::memset(rep.get(), 0, sizeof(*rep));
  rep->total = static_cast<uint32_t>(stats_.size());
  rep->first = q.first;
  rep->generation = stats_gen_;
  const size_t n = std::min<size_t>(ctl::kStatsPerReply, stats_.size() - q.first);
  rep->count = static_cast<uint32_t>(n);
  for (size_t i = 0; i < n; ++i)
    rep->entries[i] = stats_[q.first + i];
  // Only the used part of the entry array travels.
  r.len = offsetof(ctl::StatsReply, entries) + n * sizeof(ctl::StatEntry);
  std::memcpy(r.buf, rep.get(), r.len);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// The bridge (data path: no allocation, no exceptions, no locks, no output)
// ---------------------------------------------------------------------------------------------
namespace {
template <class T>
void link_front(T &q, T *&head) noexcept {
  if (q.active) return;
  q.active = true;
  q.act_prev = nullptr;
  q.act_next = head;
  if (head) head->act_prev = &q;
  head = &q;
}

// One field of a WQE slot the app shares with us, read once into a private value.
template <class T>
T load_field(const uint8_t *slot, size_t off) noexcept {
  T v;
  std::memcpy(&v, slot + off, sizeof v);
  return v;
}

// The header of a send slot, field by field. A whole-struct memcpy to the stack was read back
// in pieces that straddled its 16-byte stores: a store-forwarding stall on every WQE, 40 % of
// drain_sq's samples (doc/perf.md).
abi::SendWqeHeader load_send_header(const uint8_t *s) noexcept {
  using H = abi::SendWqeHeader;
  H h;
  h.wr_id = load_field<uint64_t>(s, offsetof(H, wr_id));
  h.opcode = load_field<uint8_t>(s, offsetof(H, opcode));
  h.reserved = load_field<uint8_t>(s, offsetof(H, reserved));
  h.inline_len = load_field<uint16_t>(s, offsetof(H, inline_len));
  h.send_flags = load_field<uint32_t>(s, offsetof(H, send_flags));
  h.num_sge = load_field<uint32_t>(s, offsetof(H, num_sge));
  h.imm_data = load_field<uint32_t>(s, offsetof(H, imm_data));
  h.remote_addr = load_field<uint64_t>(s, offsetof(H, remote_addr));
  h.rkey = load_field<uint32_t>(s, offsetof(H, rkey));
  h.ud_ah = load_field<uint32_t>(s, offsetof(H, ud_ah));
  h.compare_add = load_field<uint64_t>(s, offsetof(H, compare_add));
  h.swap = load_field<uint64_t>(s, offsetof(H, swap));
  h.remote_qpn = load_field<uint32_t>(s, offsetof(H, remote_qpn));
  h.remote_qkey = load_field<uint32_t>(s, offsetof(H, remote_qkey));
  return h;
}
}  // namespace

void Daemon::activate(Worker &W, Qp &q) noexcept {
  link_front(q, W.act_head);
}

void Daemon::activate_srq(Worker &W, Srq &s) noexcept {
  link_front(s, W.srq_act_head);
}

void Daemon::qp_to_error(Worker &W, Qp &q) noexcept {
  transport::QpAttr a;
  a.qp_state = QpState::kErr;
  W.eng->modify_qp(q.qpn, a, transport::kQpState);
  q.err = true;
}

// The app wrote an impossible index into the QP's SQ or RQ ring (shm::RingConsumer found it
// corrupt): no WQE to complete, so the QP goes to ERR and the app gets IBV_EVENT_QP_FATAL (a
// local work queue catastrophic error), once.
void Daemon::ring_broken(Worker &W, Qp &q) noexcept {
  ++W.ctr.corrupt_rings;
  if (q.err) return;
  qp_to_error(W, q);
  emit_async(W, static_cast<uint32_t>(transport::AsyncEvent::kQpFatal), q.qpn);
}

// A WQE the engine cannot take: the QP goes to ERR (the engine flushes what it holds, and
// those completions are moved first, keeping the CQ in posting order), then this WQE
// completes with `st` (FLUSH_ERR if the QP was already in error).
void Daemon::fail_wqe(Worker &W, Qp &q, Cq *cq, uint64_t wr_id, WcStatus st, WcOpcode op,
                      bool recv) noexcept {
  BridgeCounters &ctr_ = W.ctr;  // this worker's share
  if (q.err) {
    st = WcStatus::kWrFlushErr;
    ++ctr_.flushed_wqes;
  } else {
    ++ctr_.bad_wqes;
    qp_to_error(W, q);
  }
  if (q.scq) move_cq(W, *q.scq);
  if (q.rcq && q.rcq != q.scq) move_cq(W, *q.rcq);
  if (cq == nullptr) return;
  abi::Cqe e{};
  e.wr_id = wr_id;
  e.status = static_cast<uint32_t>(st);
  e.opcode = static_cast<uint32_t>(recv ? WcOpcode::kRecv : op);
  e.qp_num = q.qpn;
  if (cq->ring.try_push(e) != shm::RingError::kOk) {
    ++ctr_.cqe_lost;
    return;
  }
  ++ctr_.cqes;
  if (cq->ring.take_arm(true)) {
    cq->ev.signal();
    ++ctr_.cq_events;
  }
}

bool Daemon::drain_sq(Worker &W, Qp &q) noexcept {
  BridgeCounters &ctr_ = W.ctr;  // this worker's share
  transport::SendWr wr;
  const uint32_t ssize = q.sq.slot_size();
  const uint32_t max_sge = (ssize - sizeof(abi::SendWqeHeader)) / sizeof(abi::Sge);
  const uint32_t max_inline = ssize - sizeof(abi::SendWqeHeader);
  // The WQEs available now (up to the budget) are taken in place and released to the app with
  // one consume() at the end of the pass: one store to the shared consumer index per pass, not
  // per WQE.
  const size_t avail = q.sq.peek(opt_.wqe_budget);
  uint32_t done = 0;
  bool engine_full = false;
  // The app wrote these slots on another core: start moving their lines here, several slots
  // ahead of the copy (a line from the other vCPU takes 0.2-0.7 us in this VM, doc/perf.md), and
  // both lines of a slot: the header is the first 64 bytes, the first SGEs (or inline bytes)
  // the second.
  constexpr uint32_t kPrefetchAhead = 8;
  const auto prefetch_slot = [&q, ssize](size_t i) {
    const auto *p = static_cast<const uint8_t *>(q.sq.at(i));
    __builtin_prefetch(p);
    if (ssize > 64) __builtin_prefetch(p + 64);
  };
  for (uint32_t i = 0; i < kPrefetchAhead && i < avail; ++i)
    prefetch_slot(i);
  while (done < avail) {
    // Copy first, validate the private copy only (the app may keep writing the slot): the
    // header here, the SGEs straight into wr.sg_list (checked by the engine from there), and
    // only as many as the private header says. Inline bytes are payload, never checked: the
    // engine copies them once, at post time, from the slot itself.
    const auto *shared = static_cast<const uint8_t *>(q.sq.at(done));
    if (done + kPrefetchAhead < avail) prefetch_slot(done + kPrefetchAhead);
    const abi::SendWqeHeader h = load_send_header(shared);
    bool ok = h.reserved == 0 && h.opcode <= static_cast<uint8_t>(WrOpcode::kSendWithInv) &&
              (h.send_flags & ~uint32_t{0x1f}) == 0;
    WcStatus st = WcStatus::kLocQpOpErr;
    if (ok) {
      wr.wr_id = h.wr_id;
      wr.opcode = static_cast<WrOpcode>(h.opcode);
      wr.send_flags = h.send_flags;
      wr.imm_data_be = h.imm_data;
      wr.invalidate_rkey = h.imm_data;
      wr.remote_addr = h.remote_addr;
      wr.rkey = h.rkey;
      wr.compare_add = h.compare_add;
      wr.swap = h.swap;
      wr.ah = h.ud_ah;
      wr.remote_qpn = h.remote_qpn;
      wr.remote_qkey = h.remote_qkey;
      if (h.send_flags & transport::kSendInline) {
        if (h.inline_len > max_inline || h.num_sge != 0) {
          ok = false;
          st = WcStatus::kLocLenErr;
        } else {
          // The engine copies inline bytes at post time from sg_list addresses.
          wr.num_sge = h.inline_len ? 1 : 0;
          wr.sg_list[0].addr = reinterpret_cast<uintptr_t>(shared + sizeof h);
          wr.sg_list[0].length = h.inline_len;
          wr.sg_list[0].lkey = 0;
        }
      } else if (h.inline_len != 0 || h.num_sge > max_sge || h.num_sge > transport::kMaxSge) {
        ok = false;
        st = WcStatus::kLocLenErr;
      } else {
        wr.num_sge = h.num_sge;
        // Element by element: GCC expands the bounded variable-length memcpy into `rep movsq`,
        // slow for the usual one or two SGEs (doc/perf.md).
        for (uint32_t i = 0; i < h.num_sge; ++i) {
          abi::Sge g;
          std::memcpy(&g, shared + sizeof h + i * sizeof g, sizeof g);
          wr.sg_list[i].addr = g.addr;
          wr.sg_list[i].length = g.length;
          wr.sg_list[i].lkey = g.lkey;
        }
      }
    }
    if (ok) {
      // On a QP in ERR the engine takes the WQE and flushes it, in order.
      const int rc = W.eng->post_send(q.qpn, wr);
      if (rc == ENOMEM) {  // the engine's queue is full: retry on a later pass
        engine_full = true;
        break;
      }
      if (rc == 0)
        ++ctr_.send_wqes;
      else
        ok = false;
    }
    if (!ok)
      fail_wqe(W, q, q.scq, h.wr_id, st, wc_opcode_of(static_cast<WrOpcode>(h.opcode)), false);
    ++done;
  }
  if (done != 0) {
    q.sq.consume(done);
    // The WQEs failed here, and those the engine finished meanwhile.
    q.sq.release_all_but(W.eng->sq_outstanding(q.qpn));
  }
  if (engine_full) return true;
  if (q.sq.corrupt()) {
    ring_broken(W, q);
    return false;
  }
  if (done == opt_.wqe_budget) return true;
  return q.sq.release_notify();
}

bool Daemon::drain_rq(Worker &W, Qp &q) noexcept {
  BridgeCounters &ctr_ = W.ctr;  // this worker's share
  alignas(64) uint8_t slot[512];
  transport::RecvWr wr;
  const uint32_t rsize = q.rq.slot_size();
  const uint32_t max_sge = (rsize - sizeof(abi::RecvWqeHeader)) / sizeof(abi::Sge);
  uint32_t done = 0;
  while (done < opt_.wqe_budget && q.rq.peek(1) == 1) {
    std::memcpy(slot, q.rq.at(0), rsize);
    abi::RecvWqeHeader h;
    std::memcpy(&h, slot, sizeof h);
    if (h.reserved != 0 || h.num_sge > max_sge || h.num_sge > transport::kMaxSge) {
      fail_wqe(W, q, q.rcq, h.wr_id, WcStatus::kLocLenErr, WcOpcode::kRecv, true);
    } else {
      wr.wr_id = h.wr_id;
      wr.num_sge = h.num_sge;
      std::memcpy(wr.sg_list, slot + sizeof h, h.num_sge * sizeof(abi::Sge));
      const int rc = W.eng->post_recv(q.qpn, wr);
      if (rc == ENOMEM) return true;
      if (rc == 0)
        ++ctr_.recv_wqes;
      else
        fail_wqe(W, q, q.rcq, h.wr_id, WcStatus::kLocQpOpErr, WcOpcode::kRecv, true);
    }
    q.rq.consume(1);
    ++done;
  }
  if (done != 0) q.rq.release_all_but(W.eng->rq_outstanding(q.qpn));
  if (q.rq.corrupt()) {
    ring_broken(W, q);
    return false;
  }
  if (done == opt_.wqe_budget) return true;
  return q.rq.release_notify();
}

// SRQ WQEs belong to no QP: a malformed one is counted and dropped, and the app gets
// IBV_EVENT_SRQ_ERR for the SRQ.
bool Daemon::drain_srq(Worker &W, Srq &s) noexcept {
  BridgeCounters &ctr_ = W.ctr;  // this worker's share
  alignas(64) uint8_t slot[512];
  transport::RecvWr wr;
  const uint32_t rsize = s.ring.slot_size();
  const uint32_t max_sge = (rsize - sizeof(abi::RecvWqeHeader)) / sizeof(abi::Sge);
  uint32_t done = 0;
  while (done < opt_.wqe_budget && s.ring.peek(1) == 1) {
    std::memcpy(slot, s.ring.at(0), rsize);
    abi::RecvWqeHeader h;
    std::memcpy(&h, slot, sizeof h);
    if (h.reserved != 0 || h.num_sge > max_sge || h.num_sge > transport::kMaxSge) {
      ++ctr_.bad_wqes;
      emit_async(W, static_cast<uint32_t>(transport::AsyncEvent::kSrqErr), s.handle);
    } else {
      wr.wr_id = h.wr_id;
      wr.num_sge = h.num_sge;
      std::memcpy(wr.sg_list, slot + sizeof h, h.num_sge * sizeof(abi::Sge));
      const int rc = W.eng->post_srq_recv(s.handle, wr);
      if (rc == ENOMEM) return true;
      if (rc == 0) {
        ++ctr_.recv_wqes;
      } else {
        ++ctr_.bad_wqes;
        emit_async(W, static_cast<uint32_t>(transport::AsyncEvent::kSrqErr), s.handle);
      }
    }
    s.ring.consume(1);
    ++done;
  }
  if (done != 0) s.ring.release_all_but(W.eng->srq_count(s.handle));
  if (s.ring.corrupt()) {
    ++ctr_.corrupt_rings;
    emit_async(W, static_cast<uint32_t>(transport::AsyncEvent::kSrqErr), s.handle);
    return false;
  }
  if (done == opt_.wqe_budget) return true;
  return s.ring.release_notify();
}

// Main: every session's doorbell ring. A doorbell for a QP / SRQ of worker 0 activates it here;
// one for another worker's goes to that worker's forward ring, at most one per QP and kind in
// flight: main sets the kind's db_pending bit with an acq_rel fetch_or and forwards only on a
// 0 -> 1 change; the worker clears it with an acq_rel fetch_and *before* draining the rings.
// If main finds the bit set, the worker has not cleared it yet: the worker's fetch_and then
// reads main's fetch_or (read-modify-writes of one atomic form a release sequence), so main's
// fetch_or synchronizes with it, and main's pop of the app's doorbell (an acquire pairing with
// the app's release push, which follows its WQE writes) happens-before the worker's drain,
// which therefore sees those WQEs. Dropping the duplicate loses nothing, and the forward ring
// (2 * max_qp + max_srq slots) cannot fill.
void Daemon::main_doorbells() noexcept {
  Worker &W0 = *w_[0];
  for (Session *s : live_sessions_) {
    if (!s->has_db) continue;
    abi::Doorbell db[64];
    const uint32_t want = opt_.doorbell_budget < 64 ? opt_.doorbell_budget : 64;
    const size_t n = s->db.pop_burst(db, want);
    if (n == 0 && s->db.corrupt() && !s->db_broken) {
      // The app broke its doorbell ring's index: the daemon can no longer hear this context's
      // posts (a QP already active keeps being drained). Like a device whose queues are gone:
      // IBV_EVENT_DEVICE_FATAL, once, to this session only; the app must close the context.
      s->db_broken = true;
      ++mctr_.corrupt_rings;
      queue_async(s, static_cast<uint32_t>(transport::AsyncEvent::kDeviceFatal), 0);
    }
    for (size_t i = 0; i < n; ++i) {
      ++mctr_.doorbells;
      const abi::Doorbell d = db[i];
      if (d.kind == abi::kDoorbellRq && (d.qpn & kSrqDoorbellBit)) {
        const uint32_t h = d.qpn & ~kSrqDoorbellBit;
        Srq *q = h < srq_by_handle_.size() ? srq_by_handle_[h] : nullptr;
        if (q == nullptr || q->owner != s) {
          ++mctr_.bad_doorbells;
          continue;
        }
        if (q->worker == kUnbound) {  // rung before any QP uses it: it lives on worker 0
          q->worker = 0;
          W0.srq_by_handle[h] = q;
        }
        if (q->worker == 0) {
          activate_srq(W0, *q);
        } else if ((q->db_pending.fetch_or(1, std::memory_order_acq_rel) & 1) == 0) {
          if (w_[q->worker]->db_in->push(d))
            ++mctr_.doorbells_forwarded;
          else
            ++mctr_.bad_doorbells;  // cannot happen (sized for it); counted, never silent
        }
        continue;
      }
      Qp *q = main_qp(d.qpn);
      if (q == nullptr || q->owner != s ||
          (d.kind != abi::kDoorbellSq && d.kind != abi::kDoorbellRq) ||
          (d.kind == abi::kDoorbellRq && !q->has_rq)) {
        ++mctr_.bad_doorbells;
        continue;
      }
      if (q->worker == 0) {
        if (d.kind == abi::kDoorbellSq)
          q->sq_rung = true;
        else
          q->rq_rung = true;
        activate(W0, *q);
        continue;
      }
      const uint8_t bit = d.kind == abi::kDoorbellSq ? 1 : 2;
      if ((q->db_pending.fetch_or(bit, std::memory_order_acq_rel) & bit) == 0) {
        if (w_[q->worker]->db_in->push(d))
          ++mctr_.doorbells_forwarded;
        else
          ++mctr_.bad_doorbells;
      }
    }
  }
}

uint32_t Daemon::bridge_in(unsigned w) noexcept {
  Worker &W = *w_[w];
  BridgeCounters &ctr_ = W.ctr;  // this worker's share
  if (w == 0) {
    main_doorbells();
  } else {
    abi::Doorbell db[64];
    size_t n;
    while ((n = W.db_in->pop_burst(db, 64)) != 0) {
      for (size_t i = 0; i < n; ++i) {
        const abi::Doorbell d = db[i];
        if (d.qpn & kSrqDoorbellBit) {
          const uint32_t h = d.qpn & ~kSrqDoorbellBit;
          Srq *q = h < W.srq_by_handle.size() ? W.srq_by_handle[h] : nullptr;
          if (q == nullptr) {
            ++ctr_.bad_doorbells;
            continue;
          }
          q->db_pending.fetch_and(static_cast<uint8_t>(~1u), std::memory_order_acq_rel);
          activate_srq(W, *q);
          continue;
        }
        const uint32_t idx = d.qpn - W.qpn_base;
        Qp *q = idx < W.qp_by_index.size() ? W.qp_by_index[idx] : nullptr;
        if (q == nullptr) {  // destroyed since main forwarded it
          ++ctr_.bad_doorbells;
          continue;
        }
        const uint8_t bit = d.kind == abi::kDoorbellSq ? 1 : 2;
        q->db_pending.fetch_and(static_cast<uint8_t>(~bit), std::memory_order_acq_rel);
        if (bit == 1)
          q->sq_rung = true;
        else
          q->rq_rung = true;
        activate(W, *q);
      }
    }
  }
  const uint32_t before =
      static_cast<uint32_t>(ctr_.send_wqes + ctr_.recv_wqes + ctr_.bad_wqes + ctr_.flushed_wqes);
  // Receive queues first, so a request arriving with the next RX burst finds its buffer.
  for (Srq *s = W.srq_act_head; s != nullptr;) {
    Srq *next = s->act_next;
    if (!drain_srq(W, *s)) unlink(*s, W.srq_act_head);
    s = next;
  }
  for (Qp *q = W.act_head; q != nullptr;) {
    Qp *next = q->act_next;
    if (q->rq_rung && !drain_rq(W, *q)) q->rq_rung = false;
    if (q->sq_rung && !drain_sq(W, *q)) q->sq_rung = false;
    if (!q->sq_rung && !q->rq_rung) unlink(*q, W.act_head);
    q = next;
  }
  return static_cast<uint32_t>(ctr_.send_wqes + ctr_.recv_wqes + ctr_.bad_wqes +
                               ctr_.flushed_wqes) -
         before;
}

// A slot of the app's SQ / RQ / SRQ ring stays taken (not reusable by the app) from the moment
// the bridge reads its WQE until the WR completes: what the ring has taken minus what the engine
// still holds is released. The engine holds only WQEs taken from that ring (after a reset it
// holds none), so the release point never passes a WR the engine still works on; called in
// the middle of a drain pass (fail_wqe -> move_cq), the engine may hold WQEs the ring has not
// marked taken yet, and the release falls short (never too far) until the pass ends.
void Daemon::release_slots(Worker &W, Qp &q) noexcept {
  q.sq.release_all_but(W.eng->sq_outstanding(q.qpn));
  if (q.has_rq) q.rq.release_all_but(W.eng->rq_outstanding(q.qpn));
  if (q.srq != 0) {
    Srq *srq = q.srq < W.srq_by_handle.size() ? W.srq_by_handle[q.srq] : nullptr;
    if (srq != nullptr) srq->ring.release_all_but(W.eng->srq_count(srq->handle));
  }
}

// The app broke its consumer index: the CQ is unusable; IBV_EVENT_CQ_ERR once.
bool Daemon::cq_ring_broken(Worker &W, Cq &c) noexcept {
  if (!c.ring.corrupt()) return false;
  if (!c.err_reported) {
    c.err_reported = true;
    ++W.ctr.corrupt_rings;
    emit_async(W, static_cast<uint32_t>(transport::AsyncEvent::kCqErr), c.handle);
  }
  return true;
}

uint32_t Daemon::move_cq(Worker &W, Cq &c) noexcept {
  BridgeCounters &ctr_ = W.ctr;  // this worker's share
  if (cq_ring_broken(W, c)) return 0;
  transport::Wc wc[kCqBurst];
  uint32_t moved = 0;
  bool urgent = false;
  for (;;) {
    const size_t fr = c.ring.free_slots(kCqBurst);
    if (fr == 0) break;
    const uint32_t want = fr < kCqBurst ? static_cast<uint32_t>(fr) : kCqBurst;
    const uint32_t k = W.eng->poll_cq(c.handle, wc, want);
    if (k == 0) break;
    const size_t got = c.ring.reserve(k);  // == k: free_slots said so
    // The WQE slots of these completions are the app's again before it can see them: an app
    // that polls a completion and posts finds the room it freed.
    uint32_t last_qpn = 0;
    for (size_t i = 0; i < got; ++i) {
      if (wc[i].qp_num == last_qpn) continue;
      last_qpn = wc[i].qp_num;
      const uint32_t idx = last_qpn - W.qpn_base;
      if (Qp *q = idx < W.qp_by_index.size() ? W.qp_by_index[idx] : nullptr) release_slots(W, *q);
    }
    for (size_t i = 0; i < got; ++i) {
      abi::Cqe e{};
      e.wr_id = wc[i].wr_id;
      e.status = static_cast<uint32_t>(wc[i].status);
      e.opcode = static_cast<uint32_t>(wc[i].opcode);
      e.vendor_err = wc[i].vendor_err;
      e.byte_len = wc[i].byte_len;
      e.imm_data = wc[i].imm_data;
      e.qp_num = wc[i].qp_num;
      e.src_qp = wc[i].src_qp;
      e.wc_flags = wc[i].wc_flags;
      e.pkey_index = wc[i].pkey_index;
      e.slid = wc[i].slid;
      e.sl = wc[i].sl;
      e.dlid_path_bits = wc[i].dlid_path_bits;
      std::memcpy(c.ring.slot(i), &e, sizeof e);
      // Solicited-only arms fire on errors and on every receive completion (the engine's
      // completion does not say whether the request was solicited): a superset, never a miss.
      if (wc[i].status != WcStatus::kSuccess ||
          static_cast<uint32_t>(wc[i].opcode) >= static_cast<uint32_t>(WcOpcode::kRecv))
        urgent = true;
    }
    c.ring.commit(got);
    moved += static_cast<uint32_t>(got);
    if (k < want) break;
  }
  // free_slots() may have found the index broken just now (the dirty list will not bring
  // this CQ back unless another completion arrives).
  cq_ring_broken(W, c);
  if (moved) {
    ctr_.cqes += moved;
    if (c.ring.take_arm(urgent)) {
      c.ev.signal();
      ++ctr_.cq_events;
    }
  }
  return moved;
}

// Main: an engine async event goes to the session owning the object it names
// (ibv_get_async_event).
void Daemon::route_event(uint32_t type, uint32_t h) noexcept {
  Session *owner = nullptr;
  switch (static_cast<transport::AsyncEvent>(type)) {
    case transport::AsyncEvent::kCqErr:
      if (h < cq_by_handle_.size() && cq_by_handle_[h]) owner = cq_by_handle_[h]->owner;
      break;
    case transport::AsyncEvent::kSrqErr:
    case transport::AsyncEvent::kSrqLimitReached:
      if (h < srq_by_handle_.size() && srq_by_handle_[h]) owner = srq_by_handle_[h]->owner;
      break;
    default:  // QP events
      if (Qp *q = main_qp(h)) owner = q->owner;
      break;
  }
  if (owner == nullptr) {
    ++mctr_.async_unrouted;
    return;
  }
  queue_async(owner, type, h);
}

// Worker W: an event for main (direct on worker 0, else through W's event ring).
void Daemon::emit_async(Worker &W, uint32_t type, uint32_t handle) noexcept {
  if (W.id == 0) {
    route_event(type, handle);
  } else if (!W.ev_out->push(AsyncItem{type, handle})) {
    ++W.ctr.async_lost;
  }
}

void Daemon::forward_events() noexcept {
  for (size_t w = 1; w < w_.size(); ++w) {
    AsyncItem it[32];
    size_t n;
    while ((n = w_[w]->ev_out->pop_burst(it, 32)) != 0)
      for (size_t i = 0; i < n; ++i)
        route_event(it[i].type, it[i].handle);
  }
}

void Daemon::queue_async(Session *owner, uint32_t type, uint32_t handle) noexcept {
  if (owner->async_n == ctl::kMaxAsyncEvents) {
    ++owner->async_lost;
    ++mctr_.async_lost;
    return;
  }
  owner->async_q[owner->async_n++] = {type, handle};
  ++mctr_.async_events;
  if (owner->async_ev.valid()) owner->async_ev.signal();
}

// Only the CQs the engine listed as dirty (a completion arrived since the last pass) are
// looked at: the cost grows with the CQs that received completions, not with all CQs. A CQ
// whose app ring was full keeps its remaining completions in the engine and is listed again
// for the next pass (the app is behind; it costs one check per pass until it catches up).
uint32_t Daemon::bridge_out(unsigned w) noexcept {
  Worker &W = *w_[w];
  uint32_t n = 0;
  uint32_t dirty[kCqBurst];
  // One snapshot batch at a time: CQs re-marked below land behind it, for the next pass.
  uint32_t left = W.eng->dirty_cq_count();
  while (left != 0) {
    const uint32_t k = W.eng->take_dirty_cqs(dirty, left < kCqBurst ? left : kCqBurst);
    if (k == 0) break;
    left -= k;
    for (uint32_t i = 0; i < k; ++i) {
      const uint32_t h = dirty[i];
      Cq *c = h < W.cq_by_handle.size() ? W.cq_by_handle[h] : nullptr;
      if (c == nullptr) continue;
      n += move_cq(W, *c);
      ++W.ctr.cq_passes;
      if (!c->ring.corrupt() && W.eng->cq_pending(h) != 0) W.eng->mark_cq_dirty(h);
    }
  }
  transport::AsyncEventRecord ev;
  while (W.eng->poll_async_event(&ev))
    emit_async(W, static_cast<uint32_t>(ev.type), ev.handle);
  if (w == 0) forward_events();
  return n;
}

BridgeCounters Daemon::counters(bool stopped) {
  BridgeCounters t = mctr_;
  for (unsigned w = 0; w < w_.size(); ++w) {
    BridgeCounters c;
    if (stopped || w == 0)
      c = w_[w]->ctr;
    else
      run_on(w, [&] { c = w_[w]->ctr; });
    t.doorbells += c.doorbells;
    t.bad_doorbells += c.bad_doorbells;
    t.send_wqes += c.send_wqes;
    t.recv_wqes += c.recv_wqes;
    t.bad_wqes += c.bad_wqes;
    t.flushed_wqes += c.flushed_wqes;
    t.corrupt_rings += c.corrupt_rings;
    t.cqes += c.cqes;
    t.cqe_lost += c.cqe_lost;
    t.cq_events += c.cq_events;
    t.cq_passes += c.cq_passes;
    t.async_events += c.async_events;
    t.async_unrouted += c.async_unrouted;
    t.async_lost += c.async_lost;
  }
  return t;
}

}  // namespace uroce::daemon
