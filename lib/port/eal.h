// SPDX-License-Identifier: BSD-3-Clause
// DPDK environment setup for uroced: EAL arguments from the configuration, EAL init/cleanup,
// the packet mbuf pool, device -> ethdev port id, and a TSC clock. Not on the fast path (except
// TscClock::now_ns); errors are reported by throwing PortError with a clear message.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.h"

struct rte_mempool;

namespace uroce::port {

class PortError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// argv for rte_eal_init: argv0, the [eal] args, "-l LIST" from daemon.workers unless the args
// already choose lcores (-l, -c, --lcores), then per port "--vdev=DEVICE" or "-a PCI".
// Throws PortError if a PCI port is configured together with --no-pci.
std::vector<std::string> eal_argv(const config::Config &cfg, const std::string &argv0);

// The ethdev name DPDK gives the device: the vdev name before the first ',' or the PCI
// address in DDDD:BB:DD.F form.
std::string ethdev_name(const config::PortConfig &p);

// net_af_packet's framesz (its device argument, default 2048), or 0 for any other device.
uint32_t af_packet_framesz(const config::PortConfig &p);
// Bytes of an af_packet frame slot that do not carry the Ethernet frame (tpacket2 header,
// sockaddr_ll, alignment), with margin.
inline constexpr uint32_t kAfPacketFrameOverhead = 96;

// mbuf data room (headroom included) for a port: room for an MTU-sized frame with a VLAN tag
// and, for net_af_packet, for its framesz (FACTS: framesz must not exceed the data room).
uint16_t data_room_for(const config::PortConfig &p);

// rte_eal_init on construction (throws PortError), rte_eal_cleanup on destruction.
// The EAL, and packet capture by DPDK's tools (rte_pdump: dpdk-dumpcap attaches as a secondary
// process; that needs the primary on hugepages, doc/uroced.md).
class Eal {
 public:
  explicit Eal(const std::vector<std::string> &argv);
  ~Eal();
  Eal(const Eal &) = delete;
  Eal &operator=(const Eal &) = delete;
  // 0 when rte_pdump_init succeeded, else its negative errno (capture by dpdk-dumpcap off).
  int pdump_status() const noexcept { return pdump_; }

 private:
  int pdump_ = -1;
};

// Creates the packet pool (n mbufs, data room as given, per-lcore cache). Throws PortError.
rte_mempool *create_pool(const char *name, uint32_t n, uint16_t data_room);
void free_pool(rte_mempool *mp) noexcept;

// Port id of an ethdev by device (see ethdev_name). Throws PortError naming the device.
uint16_t port_id_of(const config::PortConfig &p);

// Monotonic nanoseconds from the TSC (satisfies transport::Clock). Valid after EAL init.
class TscClock {
 public:
  TscClock();
  // TSC cycles scaled to ns with a 32.32 fixed-point factor: one multiplication, no division
  // (a 128-bit division per call showed up in uroced's profile, doc/perf.md).
  uint64_t now_ns() const noexcept;

 private:
  uint64_t hz_;
  uint64_t mult_;  // (10^9 << 32) / hz
};

// Capture timestamps (daemon.pcap): CLOCK_REALTIME read once at construction plus the TSC's
// nanoseconds since. One object serves every lcore, so the stamps of all lanes are on one
// clock, and each lane's stamps never go backwards (the TSC is invariant and synchronised across
// cores, as DPDK assumes; an NTP step of the system clock after start is not followed). Valid
// after EAL init.
class CaptureClock {
 public:
  CaptureClock();
  uint64_t now_ns() const noexcept { return base_ns_ + (tsc_.now_ns() - tsc0_ns_); }

 private:
  TscClock tsc_;
  uint64_t tsc0_ns_;
  uint64_t base_ns_;
};

}  // namespace uroce::port
