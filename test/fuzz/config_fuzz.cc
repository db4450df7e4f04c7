// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: arbitrary text -> config::parse (lib/config), the parser of uroced's config file
// and --set overrides.
//
// Input: the file's text, then optionally a NUL byte and up to 8 NUL-separated --set overrides.
// Checked: parse either returns or throws config::ConfigError whose message names where the bad
// text came from ("fuzz.conf:LINE: " or "--set #N "); any other exception is a failure. An
// accepted config keeps every promise doc/config.md makes (port names, devices, ibdev names and
// addresses unique and well formed, values in their ranges, IPv6 ports with an MTU >= 1280,
// daemon values in range); and written back out as a config file it parses to the same Config.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "fuzz_util.h"

namespace uroce::fuzz {
namespace {

using config::Config;
using config::ConfigError;

constexpr const char *kFile = "fuzz.conf";

bool name_chars(std::string_view s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (const char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-'))
      return false;
  return true;
}

void check_accepted(const Config &c) {
  std::set<std::string> names, devices, ibdevs, addrs, sockets;
  for (const std::string &a : c.eal_args) {
    FUZZ_CHECK(!a.empty());
    FUZZ_CHECK(a.find_first_of(" \t\r\n") == std::string::npos);
  }
  for (const config::PortConfig &p : c.ports) {
    FUZZ_CHECK(name_chars(p.name, 32));
    FUZZ_CHECK(names.insert(p.name).second);
    FUZZ_CHECK(!p.device.empty());
    FUZZ_CHECK(p.device.find_first_of(" \t") == std::string::npos);
    FUZZ_CHECK(devices.insert(p.device).second);
    FUZZ_CHECK(name_chars(p.ibdev, 63));
    FUZZ_CHECK(ibdevs.insert(p.ibdev).second);
    // one control socket per port, none shared, each a usable sun_path
    FUZZ_CHECK(!p.socket.empty() && p.socket[0] == '/' && p.socket.size() <= 107);
    FUZZ_CHECK(sockets.insert(p.socket).second);
    FUZZ_CHECK(p.mtu >= config::kMinMtu && p.mtu <= config::kMaxMtu);
    FUZZ_CHECK(p.ib_mtu() >= 256 && p.ib_mtu() <= 4096);
    FUZZ_CHECK(p.dscp <= 63);
    if (!p.ipv6.empty()) FUZZ_CHECK(p.mtu >= config::kIpv6MinMtu);
    for (const config::Ipv4Prefix &a : p.ipv4) {
      FUZZ_CHECK(a.len >= 1 && a.len <= 32);
      FUZZ_CHECK(a.addr[0] != 0 && a.addr[0] != 127 && a.addr[0] < 224);
      FUZZ_CHECK(addrs.insert(config::format_ipv4(a.addr)).second);
    }
    for (const config::Ipv6Prefix &a : p.ipv6) {
      FUZZ_CHECK(a.len >= 1 && a.len <= 128);
      FUZZ_CHECK(a.addr[0] != 0xFF);
      FUZZ_CHECK(addrs.insert(config::format_ipv6(a.addr)).second);
    }
  }
  const config::DaemonConfig &d = c.daemon;
  FUZZ_CHECK(!d.socket.empty() && d.socket[0] == '/' && d.socket.size() <= 107);
  FUZZ_CHECK(!d.workers.empty());
  std::set<unsigned> lcores;
  for (const unsigned w : d.workers) {
    FUZZ_CHECK(w < 128);
    FUZZ_CHECK(lcores.insert(w).second);
  }
  FUZZ_CHECK(d.mbufs >= 511 && d.mbufs <= (16u << 20));
  FUZZ_CHECK(d.rx_desc >= 32 && d.rx_desc <= 16384);
  FUZZ_CHECK(d.tx_desc >= 32 && d.tx_desc <= 16384);
  FUZZ_CHECK(d.idle_sleep_us == 0 ||
             (d.idle_sleep_us >= config::kMinIdleSleepUs && d.idle_sleep_us <= 100000));
}

// The accepted config as a config file (every value explicit).
std::string write_back(const Config &c) {
  std::string t = "[eal]\n";
  for (const std::string &a : c.eal_args)
    t += "args = " + a + "\n";
  const config::DaemonConfig &d = c.daemon;
  t += "[daemon]\nsocket = " + d.socket + "\nworkers = ";
  for (size_t i = 0; i < d.workers.size(); ++i)
    t += (i ? "," : "") + std::to_string(d.workers[i]);
  t += "\nmbufs = " + std::to_string(d.mbufs) + "\nrx_desc = " + std::to_string(d.rx_desc) +
       "\ntx_desc = " + std::to_string(d.tx_desc) + "\npcap = " + d.pcap +
       "\nidle_sleep_us = " + std::to_string(d.idle_sleep_us) + "\n";
  for (const config::PortConfig &p : c.ports) {
    t += "[port " + p.name + "]\ndevice = " + p.device + "\nmtu = " + std::to_string(p.mtu) +
         "\ndscp = " + std::to_string(p.dscp) + "\necn = " + (p.ecn ? "on" : "off") +
         "\nibdev = " + p.ibdev + "\nsocket = " + p.socket + "\n";
    for (const config::Ipv4Prefix &a : p.ipv4)
      t += "ipv4 = " + config::format_ipv4(a.addr) + "/" + std::to_string(a.len) + "\n";
    for (const config::Ipv6Prefix &a : p.ipv6)
      t += "ipv6 = " + config::format_ipv6(a.addr) + "/" + std::to_string(a.len) + "\n";
  }
  return t;
}

bool same(const Config &a, const Config &b) {
  if (a.eal_args != b.eal_args || a.ports.size() != b.ports.size()) return false;
  const config::DaemonConfig &x = a.daemon, &y = b.daemon;
  if (x.socket != y.socket || x.workers != y.workers || x.mbufs != y.mbufs ||
      x.rx_desc != y.rx_desc || x.tx_desc != y.tx_desc || x.pcap != y.pcap ||
      x.idle_sleep_us != y.idle_sleep_us)
    return false;
  for (size_t i = 0; i < a.ports.size(); ++i) {
    const config::PortConfig &p = a.ports[i], &q = b.ports[i];
    if (p.name != q.name || p.device != q.device || p.ipv4 != q.ipv4 || p.ipv6 != q.ipv6 ||
        p.mtu != q.mtu || p.dscp != q.dscp || p.ecn != q.ecn || p.ibdev != q.ibdev ||
        p.socket != q.socket)
      return false;
  }
  return true;
}

[[noreturn]] void unexpected(const char *what, const char *msg) {
  std::fprintf(stderr, "config::parse threw %s: %s\n", what, msg);
  std::abort();
}

void run_one(const uint8_t *data, size_t size) {
  const std::string_view in(reinterpret_cast<const char *>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view text = in.substr(0, nul);
  std::vector<std::string> overrides;
  if (nul != std::string_view::npos) {
    std::string_view rest = in.substr(nul + 1);
    while (overrides.size() < 8) {
      const size_t n = rest.find('\0');
      overrides.emplace_back(rest.substr(0, n));
      if (n == std::string_view::npos) break;
      rest = rest.substr(n + 1);
    }
  }
  Config c;
  try {
    c = config::parse(text, kFile, overrides);
  } catch (const ConfigError &e) {
    const std::string_view m = e.what();
    const bool names_where =
        m.rfind(std::string(kFile) + ":", 0) == 0 || m.rfind("--set #", 0) == 0;
    if (!names_where) unexpected("a ConfigError that names no place", e.what());
    return;
  } catch (const std::exception &e) {
    unexpected("an exception other than ConfigError", e.what());
  } catch (...) {
    unexpected("a non-std exception", "?");
  }
  check_accepted(c);
  // Written back out, the config parses to the same values.
  const std::string again = write_back(c);
  Config c2;
  try {
    c2 = config::parse(again, "written-back.conf");
  } catch (const std::exception &e) {
    std::fprintf(stderr, "written-back config refused: %s\n--- text:\n%s---\n", e.what(),
                 again.c_str());
    std::abort();
  }
  FUZZ_CHECK(same(c, c2));
}

}  // namespace
}  // namespace uroce::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uroce::fuzz::run_one(data, size);
  return 0;
}
