// SPDX-License-Identifier: BSD-3-Clause
// Grace periods over the device's shared object tables (transport/tables.h; doc/uroced.md,
// "Shared object tables"). Every worker lcore reads the PD / MR / AH tables on its fast path
// without locks and holds what it read only until its next quiescent state (the end of a loop
// pass, or going to sleep). The control thread retires an MR or AH, waits for a grace period,
// then releases the slot and unmaps the memory: no worker can still use it.
//
// uroced: Qsbr (daemon/qsbr.h, DPDK's rte_rcu_qsbr). A Daemon without one waits with a no-op
// command on every worker >= 1 instead (a worker runs commands between passes), which also
// wakes sleeping workers: correct, only slower.
#pragma once

namespace uroce::daemon {

class GracePeriod {
 public:
  virtual ~GracePeriod() = default;
  // Control thread, at a quiescent point of its own lcore: returns once every reader has passed
  // a quiescent state (or is offline) since the call.
  virtual void synchronize() noexcept = 0;
};

}  // namespace uroce::daemon
