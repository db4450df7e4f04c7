// SPDX-License-Identifier: BSD-3-Clause
// Test helper: frames written as hex text (white space ignored).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace uroce::port::test {

inline std::vector<uint8_t> hex(const std::string &s) {
  std::vector<uint8_t> out;
  int hi = -1;
  for (char c : s) {
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else if (c == ' ' || c == '\n' || c == '\t') {
      continue;
    } else {
      throw std::invalid_argument("bad hex character");
    }
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<uint8_t>(hi << 4 | v));
      hi = -1;
    }
  }
  if (hi >= 0) throw std::invalid_argument("odd number of hex digits");
  return out;
}

inline std::string to_hex(const uint8_t *p, size_t n) {
  static const char *d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (i) s += (i % 16 == 0) ? '\n' : ' ';
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

}  // namespace uroce::port::test
