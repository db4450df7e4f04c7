// SPDX-License-Identifier: BSD-3-Clause
// fuzz_seed_gen {parse|build|engine} DIR [STAMP]: writes the seeds of one fuzz target into DIR (one
// file per seed, previous seed-* files removed) and, if given, STAMP with the seed count.
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "seeds.h"

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: fuzz_seed_gen {parse|build|engine} DIR [STAMP]\n");
    return 2;
  }
  const std::string_view which = argv[1];
  std::vector<uroce::fuzz::Seed> seeds;
  if (which == "parse") {
    seeds = uroce::fuzz::parse_frame_seeds();
  } else if (which == "build") {
    seeds = uroce::fuzz::build_parse_seeds();
  } else if (which == "engine") {
    seeds = uroce::fuzz::engine_rx_seeds();
  } else {
    std::fprintf(stderr, "fuzz_seed_gen: unknown target '%s'\n", argv[1]);
    return 2;
  }
  const fs::path dir = argv[2];
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "fuzz_seed_gen: %s: %s\n", argv[2], ec.message().c_str());
    return 1;
  }
  for (const auto &e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind("seed-", 0) == 0) fs::remove(e.path(), ec);
  size_t n = 0;
  for (const auto &s : seeds) {
    char name[32];
    std::snprintf(name, sizeof name, "seed-%04zu", n++);
    std::FILE *f = std::fopen((dir / name).c_str(), "wb");
    if (f == nullptr || std::fwrite(s.data(), 1, s.size(), f) != s.size() || std::fclose(f)) {
      std::fprintf(stderr, "fuzz_seed_gen: cannot write %s\n", (dir / name).c_str());
      return 1;
    }
  }
  if (argc == 4) {
    std::FILE *f = std::fopen(argv[3], "w");
    if (f == nullptr || std::fprintf(f, "%zu seeds in %s\n", n, argv[2]) < 0 || std::fclose(f))
      return 1;
  }
  std::printf("fuzz_seed_gen: %zu %s seeds in %s\n", n, argv[1], argv[2]);
  return 0;
}
