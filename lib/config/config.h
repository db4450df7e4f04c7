// SPDX-License-Identifier: BSD-3-Clause
// uroced configuration: an INI-like file plus command-line overrides (doc/config.md).
//
// Not on the fast path: parsing allocates and reports errors by throwing ConfigError, whose
// message always names where the bad text came from ("FILE:LINE" or "--set #N") and the key.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "transport/dcqcn_params.h"

namespace uroce::config {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Ipv4Prefix {
  uint8_t addr[4] = {};
  uint8_t len = 32;
  friend bool operator==(const Ipv4Prefix &, const Ipv4Prefix &) = default;
};

struct Ipv6Prefix {
  uint8_t addr[16] = {};
  uint8_t len = 128;
  friend bool operator==(const Ipv6Prefix &, const Ipv6Prefix &) = default;
};

inline constexpr uint32_t kMinMtu = 576;   // IPv4 minimum datagram every host must accept
inline constexpr uint32_t kMaxMtu = 9600;  // common jumbo limit of NICs and switches
inline constexpr uint32_t kIpv6MinMtu = 1280;
inline constexpr uint32_t kMinIdleSleepUs = 10;  // shortest idle nap (daemon.idle_sleep_us)

// Congestion control ([cc], [cc PORT]; doc/config.md, doc/congestion.md).
enum class CcAlgorithm : uint8_t { kNone, kDcqcn };
struct CcConfig {
  CcAlgorithm algorithm = CcAlgorithm::kNone;
  transport::DcqcnParams dcqcn;  // ConnectX defaults unless preset / keys say otherwise
};

struct PortConfig {
  std::string name;
  std::string device;  // PCI address or vdev string
  std::vector<Ipv4Prefix> ipv4;
  std::vector<Ipv6Prefix> ipv6;
  uint32_t mtu = 1500;  // Ethernet (IP) MTU, as `ip link` shows it
  uint8_t dscp = 0;
  bool ecn = true;
  // How long modify_qp / create_ah wait for a neighbour resolution in progress (doc/uroced.md).
  uint32_t neigh_wait_ms = 4000;
  std::string ibdev;  // verbs device name (ibv_get_device_name); default uroce<N>, N = port index
  // Control socket of this port's verbs device (each port is one device, as rxe makes one per
  // netdev). Default: daemon.socket for the first port, daemon.socket + "." + ibdev for others.
  std::string socket;
  CcConfig cc;        // [cc] with this port's [cc NAME] applied on top
  std::string where;  // where the section was opened, for later error messages

  bool device_is_pci() const;  // "0000:03:00.0" or "03:00.0"
  uint32_t ib_mtu() const;     // see ib_mtu_from_eth_mtu
};

// Per-app limits (the [daemon] quota_* keys; doc/config.md, doc/security.md "Quotas").
struct QuotaConfig {
  uint32_t qps = 256;
  uint32_t cqs = 256;
  uint32_t srqs = 64;
  uint32_t mrs = 1024;
  uint64_t mr_bytes = uint64_t{1} << 36;  // 64 GiB
  uint32_t ctl_outstanding = 8;
  uint32_t event_fds = 256;
  uint32_t pds = 64;
  uint32_t ahs = 256;
  uint32_t ctl_rate = 0;  // control messages per second per app, 0: no limit
};
enum class PollMode : uint8_t { kAdaptive, kBusy };

struct DaemonConfig {
  std::string socket = "/run/uroce/uroced.sock";
  std::vector<unsigned> workers = {0};  // lcore ids
  uint32_t mbufs = 8191;
  uint16_t rx_desc = 1024;
  uint16_t tx_desc = 1024;
  std::string pcap;  // empty: no capture
  // The poll loop when idle (doc/uroced.md, Sleeping when idle): adaptive (sleep on the
  // wake-up sources after idle_threshold_us without work) or busy (never sleep).
  PollMode poll = PollMode::kAdaptive;
  uint32_t idle_threshold_us = 100;
  // First nap when a source cannot interrupt (an RX queue without interrupts); naps double up
  // to idle_max_sleep_us. idle_sleep_us = 0: busy polling, whatever `poll` says.
  uint32_t idle_sleep_us = 20;
  uint32_t idle_max_sleep_us = 1000;
  QuotaConfig quota;
};

struct Config {
  std::vector<std::string> eal_args;
  std::vector<PortConfig> ports;
  DaemonConfig daemon;
  CcConfig cc;  // [cc] alone (each port's own is in PortConfig::cc)
};

// The IB path MTU rxe derives from a netdev MTU (rxe_loc.h eth_mtu_int_to_enum): the largest
// of 256..4096 that fits after RXE_MAX_HDR_LENGTH (80) bytes of headers; 0 if none fits.
// 1500 -> 1024, 4200 -> 4096, 4175 -> 2048.
inline constexpr uint32_t kRxeMaxHdrLength = 80;
uint32_t ib_mtu_from_eth_mtu(uint32_t eth_mtu);

// Parsers for single values, shared with tests. Return false on malformed input.
bool parse_ipv4(std::string_view s, uint8_t out[4]);
bool parse_ipv6(std::string_view s, uint8_t out[16]);
std::string format_ipv4(const uint8_t a[4]);
std::string format_ipv6(const uint8_t a[16]);  // RFC 5952 compressed form

// Parses `text` (contents of `filename`, used only in messages), then applies the overrides
// ("section.key=value"; for ports "port.NAME.key=value"), then validates the whole.
Config parse(std::string_view text, std::string_view filename,
             const std::vector<std::string> &overrides = {});

// Reads and parses a file. Throws ConfigError if it cannot be read.
Config load_file(const std::string &path, const std::vector<std::string> &overrides = {});

}  // namespace uroce::config
