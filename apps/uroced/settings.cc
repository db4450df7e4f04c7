// SPDX-License-Identifier: BSD-3-Clause
// uroced's settings from its configuration (settings.h).
#include "settings.h"

#include <algorithm>
#include <cstdio>

namespace uroce::daemon {

std::string mac_str(const uint8_t *m) {
  char b[18];
  std::snprintf(b, sizeof b, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return b;
}

void print_config(const config::Config &c) {
  std::printf("eal args:");
  for (const std::string &a : c.eal_args)
    std::printf(" %s", a.c_str());
  std::printf("\ndaemon: socket=%s workers=", c.daemon.socket.c_str());
  for (size_t i = 0; i < c.daemon.workers.size(); ++i)
    std::printf("%s%u", i ? "," : "", c.daemon.workers[i]);
  std::printf(
      " mbufs=%u rx_desc=%u tx_desc=%u pcap=%s poll=%s idle_threshold_us=%u idle_sleep_us=%u "
      "idle_max_sleep_us=%u\n",
      c.daemon.mbufs, c.daemon.rx_desc, c.daemon.tx_desc,
      c.daemon.pcap.empty() ? "(off)" : c.daemon.pcap.c_str(),
      c.daemon.poll == config::PollMode::kBusy ? "busy" : "adaptive", c.daemon.idle_threshold_us,
      c.daemon.idle_sleep_us, c.daemon.idle_max_sleep_us);
  const config::QuotaConfig &q = c.daemon.quota;
  std::printf(
      "quota per app: qps=%u cqs=%u srqs=%u mrs=%u mr_bytes=%llu ctl_outstanding=%u "
      "event_fds=%u pds=%u ahs=%u ctl_rate=%u\n",
      q.qps, q.cqs, q.srqs, q.mrs, static_cast<unsigned long long>(q.mr_bytes), q.ctl_outstanding,
      q.event_fds, q.pds, q.ahs, q.ctl_rate);
  for (const config::PortConfig &p : c.ports) {
    std::printf("port %s: device=%s mtu=%u (IB MTU %u) dscp=%u ecn=%s ibdev=%s socket=%s\n",
                p.name.c_str(), p.device.c_str(), p.mtu, p.ib_mtu(), p.dscp, p.ecn ? "on" : "off",
                p.ibdev.c_str(), p.socket.c_str());
    for (const config::Ipv4Prefix &a : p.ipv4)
      std::printf("  ipv4 %s/%u\n", config::format_ipv4(a.addr).c_str(), a.len);
    for (const config::Ipv6Prefix &a : p.ipv6)
      std::printf("  ipv6 %s/%u\n", config::format_ipv6(a.addr).c_str(), a.len);
  }
}

DaemonOptions daemon_options(const config::QuotaConfig &q) {
  DaemonOptions o;
  o.quota = Quota{q.qps,       q.cqs, q.srqs, q.mrs,     q.mr_bytes, q.ctl_outstanding,
                  q.event_fds, q.pds, q.ahs,  q.ctl_rate};
  return o;
}

// DCQCN from a port's [cc] (doc/congestion.md): the reaction point and pacer of every QP, and
// the notification point's CNP interval, DSCP and 802.1p priority. With `none` the engine keeps
// its defaults.
void apply_cc(const config::CcConfig &cc, transport::EngineConfig *e) {
  const transport::EngineConfig def;
  if (cc.algorithm != config::CcAlgorithm::kDcqcn) {
    e->dcqcn = nullptr;
    e->cnp_interval_ns = def.cnp_interval_ns;
    e->cnp_dscp = def.cnp_dscp;
    e->cnp_pcp = def.cnp_pcp;
    return;
  }
  e->dcqcn = &cc.dcqcn;
  e->cnp_interval_ns = uint64_t{cc.dcqcn.min_time_between_cnps} * 1000;
  e->cnp_dscp = cc.dcqcn.cnp_dscp;
  e->cnp_pcp = static_cast<int8_t>(cc.dcqcn.cnp_802p_prio);
}

// The idle policy from [daemon] (doc/config.md): adaptive unless poll = busy or
// idle_sleep_us = 0 (the older spelling of busy polling).
IdleParams idle_params(const config::DaemonConfig &d) {
  IdleParams p;
  p.adaptive = d.poll == config::PollMode::kAdaptive && d.idle_sleep_us != 0;
  p.threshold_ns = uint64_t{d.idle_threshold_us} * 1000;
  p.nap_min_ns = uint64_t{d.idle_sleep_us} * 1000;
  p.nap_max_ns = std::max(p.nap_min_ns, uint64_t{d.idle_max_sleep_us} * 1000);
  return p;
}

// Counters of one lcore's sleeps (uroce-stat: worker.W.sleeps, worker.W.wake.SOURCE, ...).
void add_idle_stats(unsigned w, const IdleCounters &c, std::vector<ctl::StatEntry> &v) {
  auto add = [&](const std::string &what, uint64_t value) {
    ctl::StatEntry e{};
    std::snprintf(e.name, sizeof e.name, "worker.%u.%s", w, what.c_str());
    e.value = value;
    v.push_back(e);
  };
  add("sleeps", c.sleeps);
  add("naps", c.naps);
  add("sleeps_aborted", c.aborted);
  add("sleep_us", c.slept_ns / 1000);
  for (unsigned i = 0; i < static_cast<unsigned>(WakeSource::kCount); ++i)
    add(std::string("wake_") + kWakeSourceNames[i], c.wakeups[i]);
}

// Busy mode: worker.W.yields (idle passes that gave the core away).
void add_busy_stats(unsigned w, uint64_t yields, std::vector<ctl::StatEntry> &v) {
  ctl::StatEntry e{};
  std::snprintf(e.name, sizeof e.name, "worker.%u.yields", w);
  e.value = yields;
  v.push_back(e);
}

}  // namespace uroce::daemon
