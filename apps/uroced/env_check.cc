// SPDX-License-Identifier: BSD-3-Clause
#include "env_check.h"

#include <unistd.h>
#include <climits>
#include <cstdlib>
#include <set>

namespace uroce::daemon {

namespace {

constexpr const char *kLib = "libibverbs.so.1";

std::string real(const std::string &path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) return "";
  return buf;
}

std::vector<std::string> split(const std::string &s, const char *seps) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    const size_t next = s.find_first_of(seps, pos);
    out.push_back(s.substr(pos, next == std::string::npos ? next : next - pos));
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return out;
}

// Concatenation by append (GCC 12 warns falsely on "literal" + std::string under -O3).
template <class... T>
std::string cat(const T &...parts) {
  std::string out;
  (out.append(parts), ...);
  return out;
}

std::string basename_of(const std::string &p) {
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string dirname_of(const std::string &p) {
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

}  // namespace

std::vector<std::string> default_system_lib_dirs() {
  return {"/lib/x86_64-linux-gnu",
          "/usr/lib/x86_64-linux-gnu",
          "/lib/aarch64-linux-gnu",
          "/usr/lib/aarch64-linux-gnu",
          "/lib64",
          "/usr/lib64",
          "/lib",
          "/usr/lib"};
}

std::string check_ibverbs_env(const char *ld_library_path, const char *ld_preload,
                              const std::vector<std::string> &system_dirs) {
  std::set<std::string> system;
  for (const std::string &d : system_dirs) {
    const std::string r = real(d + "/" + kLib);
    if (!r.empty()) system.insert(r);
  }
  auto foreign_in_dir = [&](const std::string &dir, std::string *resolved) {
    const std::string cand = dir + "/" + kLib;
    if (access(cand.c_str(), F_OK) != 0) return false;
    *resolved = real(cand);
    return resolved->empty() || system.count(*resolved) == 0;
  };
  const std::string hint =
      " The EAL loads DPDK's mlx PMDs, which link libibverbs.so.1: they must get the system "
      "library, never the uroce shim. Run uroced without it (e.g. env -u LD_LIBRARY_PATH -u "
      "LD_PRELOAD uroced ...).";
  if (ld_library_path != nullptr && *ld_library_path != '\0') {
    for (std::string dir : split(ld_library_path, ":;")) {
      if (dir.empty()) dir.push_back('.');
      std::string r;
      if (foreign_in_dir(dir, &r))
        return cat("refusing to start: LD_LIBRARY_PATH directory '", dir, "' holds a ", kLib,
                   r.empty() ? std::string() : cat(" (", r, ")"), " that is not the system one.",
                   hint);
    }
  }
  if (ld_preload != nullptr && *ld_preload != '\0') {
    for (const std::string &e : split(ld_preload, ": \t")) {
      if (e.empty()) continue;
      const std::string base = basename_of(e);
      if (base.rfind("libibverbs", 0) == 0) {
        const std::string r = e.find('/') == std::string::npos ? "" : real(e);
        if (r.empty() || system.count(r) == 0)
          return cat("refusing to start: LD_PRELOAD names '", e, "', which is not the system ",
                     kLib, ".", hint);
      }
      if (e.find('/') != std::string::npos) {
        std::string r;
        if (foreign_in_dir(dirname_of(e), &r))
          return cat("refusing to start: LD_PRELOAD entry '", e, "' lies in a directory with a ",
                     kLib, " (", r, ") that is not the system one.", hint);
      }
    }
  }
  return "";
}

}  // namespace uroce::daemon
