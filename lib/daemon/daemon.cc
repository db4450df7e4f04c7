// SPDX-License-Identifier: BSD-3-Clause
// Daemon: construction, the workers' plumbing (run_on, grace periods), main's QPN lookup.
#include "daemon/objects.h"

#include <cerrno>
#include <ctime>
#include <stdexcept>

namespace uroce::daemon {

Daemon::Daemon(std::vector<DaemonEngine *> engines, PortView &port, DaemonOptions opt)
    : port_(port), opt_(opt) {
  if (engines.empty() || engines.size() > kMaxWorkers)
    throw std::invalid_argument("uroce daemon: 1 to 64 worker engines");
  cfg0_ = engines[0]->config();
  tab_ = &engines[0]->tables();
  for (DaemonEngine *e : engines)
    if (&e->tables() != tab_)
      throw std::invalid_argument("uroce daemon: the workers' engines must share ObjectTables");
  for (size_t i = 0; i < engines.size(); ++i) {
    auto W = std::make_unique<Worker>();
    W->id = static_cast<unsigned>(i);
    W->eng = engines[i];
    W->qpn_base = engines[i]->config().qpn_base;
    W->qp_by_index.assign(engines[i]->config().max_qp, nullptr);
    W->srq_by_eh.assign(engines[i]->config().max_srq + 1, nullptr);
    W->cq_by_eh.assign(engines[i]->config().max_cq + 1, nullptr);
    if (i != 0) {
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
  for (const ctl::CmSpec &s : ctl::kCmSpecs) {  // handled by the CM service (set_cm)
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
  Sleeper *wake = w < sleepers_.size() ? sleepers_[w] : nullptr;
  w_[w]->cmd->call(
      fn,
      [wake] {
        if (wake) wake->ring();
      },
      [this] {
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

void Daemon::synchronize() {
  if (grace_ != nullptr) {
    grace_->synchronize();
    return;
  }
  // A worker runs commands between passes, where it holds nothing from the tables.
  for (unsigned w = 1; w < w_.size(); ++w)
    run_on(w, [] {});
}

Daemon::Qp *Daemon::main_qp(uint32_t qpn) const noexcept {
  const uint32_t w = qpn_owner(qpn, static_cast<uint32_t>(w_.size()));
  const uint32_t idx = w_[w]->eng->qp_slot(qpn);
  return idx < qp_main_[w].size() ? qp_main_[w][idx] : nullptr;
}

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

}  // namespace uroce::daemon
