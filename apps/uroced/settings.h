// SPDX-License-Identifier: BSD-3-Clause
// uroced's configuration turned into the settings of its parts (doc/config.md): the printout of
// --check, the per-app quotas, DCQCN per port, the idle policy, and the idle counters' names.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "daemon/daemon.h"
#include "daemon/sleeper.h"
#include "transport/engine.h"
#include "uroce/ctl_verbs.h"

namespace uroce::daemon {

std::string mac_str(const uint8_t *m);
void print_config(const config::Config &c);
DaemonOptions daemon_options(const config::QuotaConfig &q);
// DCQCN from a port's [cc] (doc/congestion.md): the reaction point and pacer of every QP, and
// the notification point's CNP interval, DSCP and 802.1p priority. With `none` the engine keeps
// its defaults.
void apply_cc(const config::CcConfig &cc, transport::EngineConfig *e);
// The idle policy from [daemon]: adaptive unless poll = busy or idle_sleep_us = 0 (the older
// spelling of busy polling).
IdleParams idle_params(const config::DaemonConfig &d);
// Counters of one lcore's sleeps (uroce-stat: worker.W.sleeps, worker.W.wake_SOURCE, ...).
void add_idle_stats(unsigned w, const IdleCounters &c, std::vector<ctl::StatEntry> &v);
// Busy mode: worker.W.yields.
void add_busy_stats(unsigned w, uint64_t yields, std::vector<ctl::StatEntry> &v);

}  // namespace uroce::daemon
