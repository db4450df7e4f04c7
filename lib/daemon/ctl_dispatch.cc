// SPDX-License-Identifier: BSD-3-Clause
// The verbs control messages: one handler per type, found through a table like ctl::kVerbsSpecs.
#include "daemon/objects.h"

#include <cerrno>
#include <iterator>
#include <memory>
#include <new>

namespace uroce::daemon {

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
      {ctl::kResizeCq, &Daemon::do_resize_cq},
      {ctl::kReregMr, &Daemon::do_rereg_mr},
      {ctl::kAllocMw, &Daemon::do_alloc_mw},
      {ctl::kDeallocMw, &Daemon::do_dealloc_mw},
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
  if (m.hdr.type >= ctl::kFirstCmType && m.hdr.type <= ctl::kLastCmType) {
    if (cm_ != nullptr)
      cm_->on_message(srv, ci, m);
    else
      srv.reply(ci.id, m.hdr, -EOPNOTSUPP, nullptr, 0);
    return;
  }
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

}  // namespace uroce::daemon
