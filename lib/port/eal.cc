// SPDX-License-Identifier: BSD-3-Clause
#include "port/eal.h"

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_pdump.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <memory>

namespace uroce::port {

namespace {

bool has_arg(const std::vector<std::string> &args, std::initializer_list<const char *> names) {
  for (const std::string &a : args)
    for (const char *n : names) {
      const std::string s(n);
      if (a == s || a.rfind(s + "=", 0) == 0) return true;
      // short options may be glued to their value: -l0-3
      if (s.size() == 2 && s[0] == '-' && a.size() > 2 && a[1] != '-' && a.rfind(s, 0) == 0)
        return true;
    }
  return false;
}

// Value of key=VALUE in a vdev's comma-separated arguments, or "".
std::string vdev_arg(const std::string &dev, const std::string &key) {
  size_t pos = dev.find(',');
  while (pos != std::string::npos) {
    const size_t next = dev.find(',', pos + 1);
    const std::string kv = dev.substr(pos + 1, next == std::string::npos ? next : next - pos - 1);
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
    pos = next;
  }
  return "";
}

}  // namespace

std::vector<std::string> eal_argv(const config::Config &cfg, const std::string &argv0) {
  std::vector<std::string> v{argv0};
  v.insert(v.end(), cfg.eal_args.begin(), cfg.eal_args.end());
  if (!has_arg(cfg.eal_args, {"-l", "-c", "--lcores"})) {
    std::vector<unsigned> w = cfg.daemon.workers;
    std::sort(w.begin(), w.end());
    std::string list;
    for (unsigned l : w) {
      if (!list.empty()) list += ',';
      list += std::to_string(l);
    }
    v.push_back("-l");
    v.push_back(list);
  }
  const bool no_pci = has_arg(cfg.eal_args, {"--no-pci"});
  for (const config::PortConfig &p : cfg.ports) {
    if (p.device_is_pci()) {
      if (no_pci)
        throw PortError("port '" + p.name + "': device " + p.device +
                        " is a PCI address but the [eal] args contain --no-pci");
      v.push_back("-a");
      v.push_back(p.device);
    } else {
      v.push_back("--vdev=" + p.device);
    }
  }
  return v;
}

std::string ethdev_name(const config::PortConfig &p) {
  if (p.device_is_pci()) return p.device.size() == 7 ? "0000:" + p.device : p.device;
  return p.device.substr(0, p.device.find(','));
}

uint32_t af_packet_framesz(const config::PortConfig &p) {
  const std::string n = ethdev_name(p);
  if (n.rfind("net_af_packet", 0) != 0 && n.rfind("eth_af_packet", 0) != 0) return 0;
  const std::string fs = vdev_arg(p.device, "framesz");
  return fs.empty() ? 2048 : static_cast<uint32_t>(std::strtoul(fs.c_str(), nullptr, 10));
}

uint16_t data_room_for(const config::PortConfig &p) {
  // Ethernet header + one VLAN tag + FCS room above the MTU, and for net_af_packet its whole
  // framesz (FACTS: framesz must not exceed the mbuf data room).
  uint32_t need = std::max(p.mtu + 14 + 4 + 4, af_packet_framesz(p));
  need = (need + 63) / 64 * 64;
  const uint32_t room = std::max<uint32_t>(RTE_MBUF_DEFAULT_BUF_SIZE, need + RTE_PKTMBUF_HEADROOM);
  if (room > UINT16_MAX)
    throw PortError("port '" + p.name + "': an mbuf data room of " + std::to_string(room) +
                    " bytes is needed, above the 65535 limit");
  return static_cast<uint16_t>(room);
}

Eal::Eal(const std::vector<std::string> &argv) {
  std::vector<std::unique_ptr<char[]>> store;
  std::vector<char *> cargv;
  for (const std::string &s : argv) {
    store.emplace_back(new char[s.size() + 1]);
    std::copy(s.c_str(), s.c_str() + s.size() + 1, store.back().get());
    cargv.push_back(store.back().get());
  }
  cargv.push_back(nullptr);
  // rte_eal_init may keep pointers into argv: keep the strings alive for the process.
  static std::vector<std::unique_ptr<char[]>> keep;
  for (auto &p : store)
    keep.push_back(std::move(p));
  const int r = rte_eal_init(static_cast<int>(argv.size()), cargv.data());
  if (r < 0) {
    std::string line;
    for (const std::string &s : argv)
      line += " " + s;
    throw PortError("rte_eal_init failed: " + std::string(rte_strerror(rte_errno)) +
                    " (arguments:" + line + ")");
  }
  pdump_ = rte_pdump_init() == 0 ? 0 : -(rte_errno ? rte_errno : ENOTSUP);
}

Eal::~Eal() {
  if (pdump_ == 0) rte_pdump_uninit();
  rte_eal_cleanup();
}

rte_mempool *create_pool(const char *name, uint32_t n, uint16_t data_room) {
  const unsigned cache =
      std::min<unsigned>(256, n / 8 / (rte_lcore_count() ? rte_lcore_count() : 1));
  rte_mempool *mp =
      rte_pktmbuf_pool_create(name, n, cache, 0, data_room, static_cast<int>(rte_socket_id()));
  if (mp == nullptr)
    throw PortError("cannot create the mbuf pool (" + std::to_string(n) + " mbufs of " +
                    std::to_string(data_room) + " bytes): " + rte_strerror(rte_errno) +
                    " -- lower daemon.mbufs or raise the EAL memory (-m)");
  return mp;
}

void free_pool(rte_mempool *mp) noexcept {
  rte_mempool_free(mp);
}

uint16_t port_id_of(const config::PortConfig &p) {
  const std::string name = ethdev_name(p);
  uint16_t id = 0;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &id) != 0)
    throw PortError("port '" + p.name + "': no ethdev named '" + name +
                    "' after EAL init (device " + p.device +
                    "): is the PMD available and the device string right?");
  return id;
}

TscClock::TscClock() : hz_(rte_get_tsc_hz()) {
  if (hz_ == 0) throw PortError("TSC frequency unknown");
  mult_ = static_cast<uint64_t>((static_cast<unsigned __int128>(1000000000u) << 32) / hz_);
}

CaptureClock::CaptureClock() : tsc0_ns_(tsc_.now_ns()) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  base_ns_ = static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t TscClock::now_ns() const noexcept {
  // Relative error of the factor < 2^-32 * hz / 10^9 (below 10^-9 for any TSC under 4 GHz).
  const unsigned __int128 c = rte_get_tsc_cycles();
  return static_cast<uint64_t>((c * mult_) >> 32);
}

}  // namespace uroce::port
