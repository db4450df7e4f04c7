// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/qsbr.h"

#include <rte_rcu_qsbr.h>

#include <cstdlib>
#include <stdexcept>

namespace uroce::daemon {

Qsbr::Qsbr(unsigned readers, unsigned self)
    : n_(readers), self_(self), on_(new bool[readers ? readers : 1]()) {
  if (readers == 0 || self >= readers) throw std::invalid_argument("uroce qsbr: bad reader ids");
  size_t sz = rte_rcu_qsbr_get_memsize(readers);
  sz = (sz + RTE_CACHE_LINE_SIZE - 1) / RTE_CACHE_LINE_SIZE * RTE_CACHE_LINE_SIZE;
  // The variable lives in ordinary memory: no EAL heap needed (it is never shared between
  // processes). Cache-line aligned as DPDK requires; size rounded up to the alignment.
  v_ = static_cast<rte_rcu_qsbr *>(std::aligned_alloc(RTE_CACHE_LINE_SIZE, sz));
  if (v_ == nullptr) throw std::runtime_error("uroce qsbr: out of memory");
  if (rte_rcu_qsbr_init(v_, readers) != 0) {
    std::free(v_);
    throw std::runtime_error("uroce qsbr: rte_rcu_qsbr_init failed");
  }
}

Qsbr::~Qsbr() {
  std::free(v_);
}

void Qsbr::start(unsigned i) noexcept {
  rte_rcu_qsbr_thread_register(v_, i);
  online(i);
}

void Qsbr::stop(unsigned i) noexcept {
  offline(i);
  rte_rcu_qsbr_thread_unregister(v_, i);
}

void Qsbr::online(unsigned i) noexcept {
  if (on_[i]) return;
  rte_rcu_qsbr_thread_online(v_, i);
  on_[i] = true;
}

void Qsbr::offline(unsigned i) noexcept {
  if (!on_[i]) return;
  rte_rcu_qsbr_thread_offline(v_, i);
  on_[i] = false;
}

void Qsbr::quiescent(unsigned i) noexcept {
  if (on_[i]) rte_rcu_qsbr_quiescent(v_, i);
}

void Qsbr::synchronize() noexcept {
  // The caller reports its own quiescent state only when online: reporting for an offline
  // reader would make it look online to later grace periods.
  rte_rcu_qsbr_synchronize(v_, on_[self_] ? self_ : RTE_QSBR_THRID_INVALID);
}

}  // namespace uroce::daemon
