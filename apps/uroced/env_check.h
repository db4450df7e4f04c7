// SPDX-License-Identifier: BSD-3-Clause
// uroced must not run with a foreign libibverbs in reach of the dynamic loader: rte_eal_init
// loads every PMD in DPDK's driver directory, including mlx4/mlx5, which link libibverbs.so.1,
// and with the uroce verbs shim (or another build of it) on LD_LIBRARY_PATH they would bind to
// it (FACTS.md). check_ibverbs_env() finds such a configuration before the EAL starts.
#pragma once

#include <string>
#include <vector>

namespace uroce::daemon {

// Directories whose libibverbs.so.1 counts as "the system one".
std::vector<std::string> default_system_lib_dirs();

// Returns "" when the environment is safe, else a message saying what is wrong.
//   ld_library_path: refused if one of its directories (an empty entry means the current
//     directory) holds a libibverbs.so.1 that is not, after resolving symlinks, one of the
//     files system_dirs/libibverbs.so.1.
//   ld_preload: refused if an entry is a libibverbs* file that is not the system one, or lies
//     in a directory holding a foreign libibverbs.so.1.
// Either may be null (unset).
std::string check_ibverbs_env(const char *ld_library_path, const char *ld_preload,
                              const std::vector<std::string> &system_dirs);

}  // namespace uroce::daemon
