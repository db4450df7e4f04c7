// SPDX-License-Identifier: BSD-3-Clause
// IPv4 / IPv6 address text of the configuration (config.h): inet_pton / inet_ntop.
#include <arpa/inet.h>

#include <cstring>
#include <string>

#include "config/config.h"

namespace uroce::config {

bool parse_ipv4(std::string_view s, uint8_t out[4]) {
  const std::string str(s);
  in_addr a{};
  if (inet_pton(AF_INET, str.c_str(), &a) != 1) return false;
  std::memcpy(out, &a, 4);
  return true;
}

bool parse_ipv6(std::string_view s, uint8_t out[16]) {
  const std::string str(s);
  in6_addr a{};
  if (inet_pton(AF_INET6, str.c_str(), &a) != 1) return false;
  std::memcpy(out, &a, 16);
  return true;
}

std::string format_ipv4(const uint8_t a[4]) {
  char buf[INET_ADDRSTRLEN];
  return inet_ntop(AF_INET, a, buf, sizeof buf) ? buf : "?";
}

std::string format_ipv6(const uint8_t a[16]) {
  char buf[INET6_ADDRSTRLEN];
  return inet_ntop(AF_INET6, a, buf, sizeof buf) ? buf : "?";
}

}  // namespace uroce::config
