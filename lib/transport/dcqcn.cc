// SPDX-License-Identifier: BSD-3-Clause
#include "transport/dcqcn.h"

#include <algorithm>

namespace uroce::transport {

namespace {
// Rc within this of the line rate (with Rt at line rate) counts as recovered: the rate limiter
// is released. ConnectX's rates are configured in whole Mb/s.
constexpr double kReleaseMbps = 1.0;
}  // namespace

void DcqcnRp::init(const DcqcnParams *p, double line_mbps) noexcept {
  *this = DcqcnRp{};
  p_ = p;
  line_ = line_mbps;
  min_ = std::min(static_cast<double>(p->rpg_min_rate), line_mbps);
  rc_ = rt_ = line_;
}

// Applies every alpha period that ended at or before now_ns: the first one raises alpha if a CNP
// arrived in it, the others decay it (ConnectX's dce_tcp_g / dce_tcp_rtt update, done lazily
// instead of on a 1 us timer). alpha only decreases in decay steps, so at most 1024 run.
void DcqcnRp::advance_alpha(uint64_t now_ns) noexcept {
  const uint64_t period = uint64_t{p_->dce_tcp_rtt} * 1000;
  if (now_ns < alpha_period_start_ns_ + period) return;
  uint64_t n = (now_ns - alpha_period_start_ns_) / period;
  alpha_period_start_ns_ += n * period;
  const uint32_t g = p_->dce_tcp_g;
  alpha_ = ((alpha_ * g) >> 10) + (cnp_in_period_ ? 1024 - g : 0);
  cnp_in_period_ = false;
  for (--n; n > 0 && alpha_ > 0; --n)
    alpha_ = (alpha_ * g) >> 10;
}

void DcqcnRp::cut(uint64_t now_ns) noexcept {
  const bool clamp = p_->clamp_tgt_rate || last_inc_ == Inc::kBytes ||
                     (last_inc_ == Inc::kTimer && p_->clamp_tgt_rate_after_time_inc);
  if (clamp) rt_ = rc_;
  double f = 1.0 - static_cast<double>(alpha_) / static_cast<double>(1u << p_->rpg_gd);
  f = std::max(f, static_cast<double>(p_->rpg_min_dec_fac) / 100.0);
  rc_ = std::max(rc_ * f, min_);
  restart_increase(now_ns);
}

// A cut (or the first CNP's rate setting) restarts the increase side: counters, timer, phase.
void DcqcnRp::restart_increase(uint64_t now_ns) noexcept {
  last_cut_ns_ = now_ns;
  cut_pending_ = false;
  last_inc_ = Inc::kNone;
  t_count_ = bc_count_ = 0;
  bytes_ = 0;
  inc_due_ns_ = now_ns + uint64_t{p_->rpg_time_reset} * 1000;
  ++stats_.cuts;
}

// One increase event of counter `src` (T or BC already counted). Fast recovery while neither
// counter passed F; hyper increase once both did; additive increase in between. With the byte
// counter off, the timer alone decides: F fast-recovery steps, one additive step, then hyper.
void DcqcnRp::increase(Inc src) noexcept {
  last_inc_ = src;
  ++stats_.increases;
  const uint32_t f = p_->rpg_threshold;
  const uint32_t bc = p_->rpg_byte_reset != 0 ? bc_count_ : (t_count_ > 0 ? t_count_ - 1 : 0);
  const uint32_t hi = std::max(t_count_, bc), lo = std::min(t_count_, bc);
  if (hi > f) rt_ += lo > f ? p_->rpg_hai_rate : p_->rpg_ai_rate;
  rt_ = std::min(rt_, line_);
  rc_ = (rc_ + rt_) / 2;
  if (rt_ >= line_ && line_ - rc_ < kReleaseMbps) release();
}

void DcqcnRp::release() noexcept {
  throttled_ = false;
  cut_pending_ = false;
  rc_ = rt_ = line_;
  inc_due_ns_ = UINT64_MAX;
  ++stats_.releases;
}

bool DcqcnRp::on_cnp(uint64_t now_ns) noexcept {
  ++stats_.cnps;
  if (!throttled_) {  // the first CNP (since creation or the last release)
    throttled_ = true;
    alpha_ = p_->initial_alpha_value;
    alpha_period_start_ns_ = now_ns;
    cnp_in_period_ = false;
    last_inc_ = Inc::kNone;
    rc_ = rt_ = line_;
    if (p_->rate_to_set_on_first_cnp != 0) {
      const double r = std::min(static_cast<double>(p_->rate_to_set_on_first_cnp), line_);
      rc_ = rt_ = std::max(r, min_);
      restart_increase(now_ns);
    } else {
      cut(now_ns);
    }
    return true;
  }
  advance_alpha(now_ns);
  bool changed = false;
  if (now_ns >= cut_due_ns()) {
    cut(now_ns);
    changed = true;
  } else {
    cut_pending_ = true;
  }
  cnp_in_period_ = true;
  return changed;
}

bool DcqcnRp::on_tx_bytes(uint32_t bytes) noexcept {
  if (!throttled_ || p_->rpg_byte_reset == 0) return false;
  const uint64_t sum = uint64_t{bytes_} + bytes;
  if (sum < p_->rpg_byte_reset) {
    bytes_ = static_cast<uint32_t>(sum);
    return false;
  }
  bytes_ = static_cast<uint32_t>((sum - p_->rpg_byte_reset) % p_->rpg_byte_reset);
  ++bc_count_;
  increase(Inc::kBytes);
  return true;
}

bool DcqcnRp::on_timer(uint64_t now_ns) noexcept {
  if (!throttled_) return false;
  bool changed = false;
  if (cut_pending_ && now_ns >= cut_due_ns()) {
    advance_alpha(now_ns);
    cut(now_ns);
    changed = true;
  }
  if (throttled_ && now_ns >= inc_due_ns_) {
    inc_due_ns_ += uint64_t{p_->rpg_time_reset} * 1000;
    if (inc_due_ns_ <= now_ns) inc_due_ns_ = now_ns + uint64_t{p_->rpg_time_reset} * 1000;
    ++t_count_;
    increase(Inc::kTimer);
    changed = true;
  }
  return changed;
}

}  // namespace uroce::transport
