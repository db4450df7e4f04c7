// SPDX-License-Identifier: BSD-3-Clause
// Grace periods of a device's shared object tables with DPDK's rte_rcu_qsbr (grace.h; doc/
// uroced.md, "Shared object tables"). Reader i is worker lcore i: it goes online when its loop
// starts, reports a quiescent state once per pass (it holds nothing from the tables between
// passes), goes offline before it blocks in its Sleeper (so a sleeping worker never holds a
// grace period up) and online when it wakes, and offline for good when its loop ends.
// synchronize() runs on the control thread, which is reader `self` (main, worker 0): it counts
// as quiescent while it waits, if it is online.
#pragma once

#include <cstdint>
#include <memory>

#include "daemon/grace.h"

struct rte_rcu_qsbr;

namespace uroce::daemon {

class Qsbr final : public GracePeriod {
 public:
  // readers: worker lcores (ids 0 .. readers - 1). Throws std::runtime_error (start-up).
  Qsbr(unsigned readers, unsigned self = 0);
  ~Qsbr() override;
  Qsbr(const Qsbr &) = delete;
  Qsbr &operator=(const Qsbr &) = delete;

  // Reader i's own thread.
  void start(unsigned i) noexcept;  // register + online
  void stop(unsigned i) noexcept;   // offline + unregister
  void online(unsigned i) noexcept;
  void offline(unsigned i) noexcept;
  void quiescent(unsigned i) noexcept;
  // Control thread (reader `self`), outside any use of the tables.
  void synchronize() noexcept override;
  unsigned readers() const noexcept { return n_; }

 private:
  unsigned n_, self_;
  rte_rcu_qsbr *v_ = nullptr;
  // Reader i's own view of whether it is online (written and read by reader i only).
  std::unique_ptr<bool[]> on_;
};

}  // namespace uroce::daemon
