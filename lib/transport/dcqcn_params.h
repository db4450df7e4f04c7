// SPDX-License-Identifier: BSD-3-Clause
// DCQCN parameters, named and scaled as ConnectX names them (mlxconfig / mlx5 sysfs ecn/roce_rp,
// roce_np); defaults are ConnectX's. doc/congestion.md gives each one's source and meaning.
// Header-only: lib/config validates and fills these without linking the transport.
#pragma once

#include <cstdint>

namespace uroce::transport {

struct DcqcnParams {
  // ---- reaction point (the sender) ----
  uint32_t rpg_time_reset = 300;              // us between timer-driven rate increases
  uint32_t rpg_byte_reset = 32767;            // bytes sent between byte-driven increases; 0: off
  uint32_t rpg_threshold = 1;                 // F: increase events per counter in fast recovery
  uint32_t rpg_ai_rate = 5;                   // Mb/s added to Rt per additive-increase event
  uint32_t rpg_hai_rate = 50;                 // Mb/s added to Rt per hyper-increase event
  uint32_t rpg_gd = 11;                       // cut: Rc *= 1 - alpha / 2^rpg_gd (alpha in 1/1024)
  uint32_t rpg_min_dec_fac = 50;              // %: one cut leaves at least this share of Rc
  uint32_t rpg_min_rate = 1;                  // Mb/s floor of Rc
  uint32_t rate_to_set_on_first_cnp = 0;      // Mb/s Rc = Rt on a QP's first CNP; 0: cut instead
  uint32_t dce_tcp_g = 1019;                  // alpha' = alpha * G/1024 (+ (1024 - G) after a CNP)
  uint32_t dce_tcp_rtt = 1;                   // us: the alpha update period
  uint32_t initial_alpha_value = 1023;        // alpha (1/1024) on the first CNP
  uint32_t rate_reduce_monitor_period = 4;    // us: at most one cut per period; 0: every CNP
  bool clamp_tgt_rate = false;                // every cut sets Rt = Rc
  bool clamp_tgt_rate_after_time_inc = true;  // a cut after a timer increase sets Rt = Rc
  // ---- notification point (the receiver) ----
  uint32_t min_time_between_cnps = 4;  // us between two CNPs to one QP
  uint8_t cnp_dscp = 48;
  uint8_t cnp_802p_prio = 6;
};

// ConnectX's defaults (the struct's initializers).
inline DcqcnParams dcqcn_connectx_defaults() noexcept {
  return DcqcnParams{};
}

// The SIGCOMM'15 paper's values (Zhu et al., section 5 and HPCC's `dcqcn_paper` run): g = 1/256,
// alpha period K = 55 us, one cut per 50 us, timer 55 us, byte counter 10 MB, F = 5,
// R_AI = 40 Mb/s, R_HAI = 10 x R_AI (HPCC's ratio; the paper gives none), Rt = Rc on every cut.
inline DcqcnParams dcqcn_paper_preset() noexcept {
  DcqcnParams p;
  p.rpg_time_reset = 55;
  p.rpg_byte_reset = 10u << 20;
  p.rpg_threshold = 5;
  p.rpg_ai_rate = 40;
  p.rpg_hai_rate = 400;
  p.dce_tcp_g = 1020;  // (1 - 1/256) * 1024
  p.dce_tcp_rtt = 55;
  p.rate_reduce_monitor_period = 50;
  p.clamp_tgt_rate = true;
  p.min_time_between_cnps = 50;
  return p;
}

// Accepted ranges (ConnectX's where its documentation gives one; doc/congestion.md).
struct DcqcnRange {
  const char *name;
  uint32_t lo, hi;
};
inline constexpr uint32_t kDcqcnMaxRateMbps = 800000;  // 800 Gb/s
inline constexpr DcqcnRange kDcqcnRanges[] = {
    {"rpg_time_reset", 1, 131071},
    {"rpg_byte_reset", 0, 1u << 30},
    {"rpg_threshold", 1, 31},
    {"rpg_ai_rate", 1, kDcqcnMaxRateMbps},
    {"rpg_hai_rate", 1, kDcqcnMaxRateMbps},
    {"rpg_gd", 1, 15},
    {"rpg_min_dec_fac", 0, 100},
    {"rpg_min_rate", 1, kDcqcnMaxRateMbps},
    {"rate_to_set_on_first_cnp", 0, kDcqcnMaxRateMbps},
    {"dce_tcp_g", 0, 1023},
    {"dce_tcp_rtt", 1, 131071},
    {"initial_alpha_value", 0, 1023},
    {"rate_reduce_monitor_period", 0, 1000000},
    {"clamp_tgt_rate", 0, 1},
    {"clamp_tgt_rate_after_time_inc", 0, 1},
    {"min_time_between_cnps", 0, 1000000},
    {"cnp_dscp", 0, 63},
    {"cnp_802p_prio", 0, 7},
};

// Sets parameter `name` to `v` (already range-checked); false for an unknown name.
inline bool set_dcqcn_param(DcqcnParams *p, const char *name, uint32_t v) noexcept {
  auto is = [name](const char *n) {
    const char *a = name;
    while (*a && *a == *n)
      ++a, ++n;
    return *a == *n;
  };
  if (is("rpg_time_reset"))
    p->rpg_time_reset = v;
  else if (is("rpg_byte_reset"))
    p->rpg_byte_reset = v;
  else if (is("rpg_threshold"))
    p->rpg_threshold = v;
  else if (is("rpg_ai_rate"))
    p->rpg_ai_rate = v;
  else if (is("rpg_hai_rate"))
    p->rpg_hai_rate = v;
  else if (is("rpg_gd"))
    p->rpg_gd = v;
  else if (is("rpg_min_dec_fac"))
    p->rpg_min_dec_fac = v;
  else if (is("rpg_min_rate"))
    p->rpg_min_rate = v;
  else if (is("rate_to_set_on_first_cnp"))
    p->rate_to_set_on_first_cnp = v;
  else if (is("dce_tcp_g"))
    p->dce_tcp_g = v;
  else if (is("dce_tcp_rtt"))
    p->dce_tcp_rtt = v;
  else if (is("initial_alpha_value"))
    p->initial_alpha_value = v;
  else if (is("rate_reduce_monitor_period"))
    p->rate_reduce_monitor_period = v;
  else if (is("clamp_tgt_rate"))
    p->clamp_tgt_rate = v != 0;
  else if (is("clamp_tgt_rate_after_time_inc"))
    p->clamp_tgt_rate_after_time_inc = v != 0;
  else if (is("min_time_between_cnps"))
    p->min_time_between_cnps = v;
  else if (is("cnp_dscp"))
    p->cnp_dscp = static_cast<uint8_t>(v);
  else if (is("cnp_802p_prio"))
    p->cnp_802p_prio = static_cast<uint8_t>(v);
  else
    return false;
  return true;
}

}  // namespace uroce::transport
