// SPDX-License-Identifier: BSD-3-Clause
#include "config/cc_config.h"

#include <cstdint>

#include "config/number.h"

namespace uroce::config::detail {

namespace {

[[noreturn]] void fail(const CcItem &it, const std::string &msg) {
  throw ConfigError(it.where + ": key '" + it.key + "' in " + it.section + ": " + msg);
}

const transport::DcqcnRange *find_range(std::string_view key) {
  for (const transport::DcqcnRange &r : transport::kDcqcnRanges)
    if (key == r.name) return &r;
  return nullptr;
}

bool is_bool_key(std::string_view key) {
  return key == "clamp_tgt_rate" || key == "clamp_tgt_rate_after_time_inc";
}

uint32_t parse_value(const CcItem &it, const transport::DcqcnRange &r) {
  const std::string &v = it.value;
  if (is_bool_key(it.key)) {
    if (v == "on" || v == "yes" || v == "true" || v == "1") return 1;
    if (v == "off" || v == "no" || v == "false" || v == "0") return 0;
    fail(it, "bad value '" + v + "' (expected on or off)");
  }
  uint64_t x = 0;
  std::string why;
  if (!parse_decimal(v, r.lo, r.hi, &x, &why)) fail(it, why);
  return static_cast<uint32_t>(x);
}

}  // namespace

bool is_cc_key(std::string_view key) {
  return key == "algorithm" || key == "preset" || find_range(key) != nullptr;
}

std::string cc_known_keys() {
  std::string out = "algorithm, preset";
  for (const transport::DcqcnRange &r : transport::kDcqcnRanges)
    out += std::string(", ") + r.name;
  return out;
}

void apply_cc_items(const std::vector<CcItem> &items, CcConfig *cc) {
  for (const CcItem &it : items) {
    if (it.key != "preset") continue;
    if (it.value == "connectx")
      cc->dcqcn = transport::dcqcn_connectx_defaults();
    else if (it.value == "paper")
      cc->dcqcn = transport::dcqcn_paper_preset();
    else
      fail(it, "bad value '" + it.value + "' (expected connectx or paper)");
  }
  for (const CcItem &it : items) {
    if (it.key == "preset") continue;
    if (it.key == "algorithm") {
      if (it.value == "dcqcn")
        cc->algorithm = CcAlgorithm::kDcqcn;
      else if (it.value == "none")
        cc->algorithm = CcAlgorithm::kNone;
      else
        fail(it, "bad value '" + it.value + "' (expected dcqcn or none)");
      continue;
    }
    const transport::DcqcnRange *r = find_range(it.key);
    if (r == nullptr) fail(it, "unknown key (known keys: " + cc_known_keys() + ")");
    transport::set_dcqcn_param(&cc->dcqcn, r->name, parse_value(it, *r));
  }
}

}  // namespace uroce::config::detail
