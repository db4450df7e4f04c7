// SPDX-License-Identifier: BSD-3-Clause
#include "telemetry/telemetry.h"

#include <rte_telemetry.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>

#include "client/client.h"

namespace uroce::telemetry {

const Command kCommands[] = {
    {"/uroce/daemon", "daemon.", Command::kGroup,
     "Daemon-wide object counts and sessions. No parameters", ""},
    {"/uroce/bridge", "bridge.", Command::kGroup,
     "Shared-memory ring bridge: doorbells, WQEs, CQEs, events. No parameters", ""},
    {"/uroce/engine", "engine.", Command::kGroup,
     "Transport engines: packets, drops by reason. No parameters", ""},
    {"/uroce/ports", "port.", Command::kList, "Port names. No parameters", ""},
    {"/uroce/port", "port.", Command::kItem, "One port's counters. Parameters: port name", ""},
    {"/uroce/cc", "port.", Command::kItem,
     "One port's congestion-control totals (port.NAME.cc.*). Parameters: port name", "cc."},
    {"/uroce/workers", "worker.", Command::kList, "Worker lcores. No parameters", ""},
    {"/uroce/worker", "worker.", Command::kItem, "One worker's counters. Parameters: worker", ""},
    {"/uroce/qps", "qp.", Command::kList, "QP numbers. No parameters", ""},
    {"/uroce/qp", "qp.", Command::kItem, "One QP's counters. Parameters: QP number", ""},
    {"/uroce/sessions", "session.", Command::kList, "App session ids. No parameters", ""},
    {"/uroce/session", "session.", Command::kItem, "One app session. Parameters: session id", ""},
};
const unsigned kNumCommands = sizeof(kCommands) / sizeof(kCommands[0]);

int select(const Command &c, const char *param, const std::vector<ctl::StatEntry> &stats,
           Entries *out) {
  const bool has_param = param != nullptr && *param != 0;
  if ((c.kind == Command::kItem) != has_param) return -EINVAL;
  std::string prefix = c.prefix;
  if (c.kind == Command::kItem) prefix += std::string(param) + "." + c.sub;
  std::map<std::string, uint64_t> listed;  // kList: component -> number of counters
  out->clear();
  for (const ctl::StatEntry &e : stats) {
    const size_t n = strnlen(e.name, sizeof(e.name));
    const std::string name(e.name, n);
    if (name.compare(0, prefix.size(), prefix) != 0 || name.size() == prefix.size()) continue;
    std::string rest = name.substr(prefix.size());
    if (c.kind == Command::kList) {
      const size_t dot = rest.find('.');
      if (dot == std::string::npos || dot == 0) continue;
      ++listed[rest.substr(0, dot)];
      continue;
    }
    if (rest.find(".neigh.") != std::string::npos || rest.compare(0, 6, "neigh.") == 0)
      continue;  // neighbour entries are MAC + state, not counters (uroce-stat shows them)
    out->emplace_back(std::move(rest), e.value);
  }
  if (c.kind == Command::kList) out->assign(listed.begin(), listed.end());
  return 0;
}

namespace {

std::string g_socket;

const Command *find(const char *cmd) {
  for (unsigned i = 0; i < kNumCommands; ++i)
    if (std::strcmp(kCommands[i].name, cmd) == 0) return &kCommands[i];
  return nullptr;
}

int callback(const char *cmd, const char *params, struct rte_tel_data *d) {
  const Command *c = find(cmd);
  if (c == nullptr) return -EINVAL;
  std::unique_ptr<client::Context> ctx;
  if (client::Context::open(g_socket.c_str(), "telemetry", &ctx, 2'000) != 0) return -EIO;
  std::vector<ctl::StatEntry> stats;
  if (ctx->stats(&stats) != 0) return -EIO;
  Entries sel;
  if (const int rc = select(*c, params, stats, &sel)) return rc;
  if (c->kind == Command::kList) {
    rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
    for (const auto &[k, v] : sel)
      if (rte_tel_data_add_array_string(d, k.c_str()) != 0) break;  // full: the rest is cut
    return 0;
  }
  if (c->kind == Command::kItem && sel.empty()) return -ENOENT;
  rte_tel_data_start_dict(d);
  for (const auto &[k, v] : sel)
    if (rte_tel_data_add_dict_u64(d, k.c_str(), v) != 0) break;  // 256 entries at most
  return 0;
}

}  // namespace

int register_commands(const std::string &ctl_socket) {
  g_socket = ctl_socket;
  for (unsigned i = 0; i < kNumCommands; ++i)
    if (const int rc = rte_telemetry_register_cmd(kCommands[i].name, callback, kCommands[i].help))
      return rc;
  return 0;
}

}  // namespace uroce::telemetry
