// SPDX-License-Identifier: BSD-3-Clause
// DCQCN reaction point (RP) of one QP: the sender's rate Rc, target Rt and alpha, driven by
// received CNPs, transmitted bytes and one deadline the owner arms on its timing wheel.
// The algorithm, its ConnectX semantics and the hand-checked tests: doc/congestion.md.
//
// Contract: an unthrottled QP (no CNP since it was created or last recovered to line rate)
// sends at line rate and costs its owner one test of throttled(). Every method is O(1) except
// on_cnp / on_timer after a long pause, which apply the missed alpha periods (at most 1024
// steps). No allocation, throw, lock or print. One owner thread.
#pragma once

#include <cstdint>

#include "transport/dcqcn_params.h"

namespace uroce::transport {

class DcqcnRp {
 public:
  struct Stats {
    uint64_t cnps = 0;       // CNPs received
    uint64_t cuts = 0;       // rate decreases (first-CNP rate setting included)
    uint64_t increases = 0;  // rate increase events (timer + byte counter)
    uint64_t releases = 0;   // returns to line rate
  };

  // `p` must outlive the RP; line_mbps > 0 is the port's line rate. Starts unthrottled.
  void init(const DcqcnParams *p, double line_mbps) noexcept;

  bool throttled() const noexcept { return throttled_; }
  double rate_mbps() const noexcept { return rc_; }    // Rc (line rate when unthrottled)
  double target_mbps() const noexcept { return rt_; }  // Rt
  uint32_t alpha() const noexcept { return alpha_; }   // 1/1024 units, as of the last event
  const Stats &stats() const noexcept { return stats_; }

  // Each returns true when Rc changed (the owner updates its pacer from rate_mbps()).
  bool on_cnp(uint64_t now_ns) noexcept;
  // Bytes the QP put on the wire; call only while throttled(). At most one increase per call.
  bool on_tx_bytes(uint32_t bytes) noexcept;
  // Call when now_ns >= deadline(): a deferred cut and/or one timer increase.
  bool on_timer(uint64_t now_ns) noexcept;
  // When on_timer is next due; UINT64_MAX when unthrottled.
  uint64_t deadline() const noexcept {
    if (!throttled_) return UINT64_MAX;
    if (cut_pending_ && cut_due_ns() < inc_due_ns_) return cut_due_ns();
    return inc_due_ns_;
  }

 private:
  enum class Inc : uint8_t { kNone, kTimer, kBytes };
  uint64_t cut_due_ns() const noexcept {
    return last_cut_ns_ + uint64_t{p_->rate_reduce_monitor_period} * 1000;
  }
  void advance_alpha(uint64_t now_ns) noexcept;
  void cut(uint64_t now_ns) noexcept;
  void restart_increase(uint64_t now_ns) noexcept;
  void increase(Inc src) noexcept;
  void release() noexcept;

  const DcqcnParams *p_ = nullptr;
  double line_ = 0, min_ = 0;
  double rc_ = 0, rt_ = 0;
  uint32_t alpha_ = 0;
  bool throttled_ = false;
  bool cut_pending_ = false;
  bool cnp_in_period_ = false;           // a CNP arrived in the current alpha period
  Inc last_inc_ = Inc::kNone;            // the last increase since the last cut
  uint32_t t_count_ = 0, bc_count_ = 0;  // T and BC: increase events since the last cut
  uint32_t bytes_ = 0;                   // toward the next byte-counter event
  uint64_t alpha_period_start_ns_ = 0;
  uint64_t last_cut_ns_ = 0;
  uint64_t inc_due_ns_ = UINT64_MAX;
  Stats stats_;
};

}  // namespace uroce::transport
