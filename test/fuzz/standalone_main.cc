// SPDX-License-Identifier: BSD-3-Clause
// A main() for the fuzz targets in builds without libFuzzer (gcc): runs every seed file given
// (files or directories), then a number of pseudo-random mutations of them from a fixed seed, so
// that the same inputs run on every build. A failing check aborts with the input's origin
// reported (and written to ./replay-crash-input, which the libFuzzer binary can run).
//
//   replay [--mutations N] [--seed S] [--min-inputs K] PATH...
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

// With ASan in the build, its reports (and UBSan's) end through a death callback.
#if defined(__SANITIZE_ADDRESS__)
#define UROCE_HAVE_SANITIZER_API 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UROCE_HAVE_SANITIZER_API 1
#endif
#endif
#ifdef UROCE_HAVE_SANITIZER_API
#include <sanitizer/common_interface_defs.h>
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

using Input = std::vector<uint8_t>;

// What is running, for the crash report. Written before each input.
const Input *g_current = nullptr;
char g_what[512] = "nothing";

void report_crash() {
  static const char kMsg[] = "\nreplay: crashed on ";
  (void)!write(2, kMsg, sizeof kMsg - 1);
  (void)!write(2, g_what, std::strlen(g_what));
  static const char kSaved[] = "\nreplay: input saved as ./replay-crash-input\n";
  if (g_current != nullptr) {
    const int fd = open("replay-crash-input", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      (void)!write(fd, g_current->data(), g_current->size());
      close(fd);
      (void)!write(2, kSaved, sizeof kSaved - 1);
    }
  }
}

extern "C" void on_fatal_signal(int sig) {
  report_crash();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void run(const Input &x) {
  g_current = &x;
  LLVMFuzzerTestOneInput(x.data(), x.size());
  g_current = nullptr;
}

// splitmix64: small, fast, and the same sequence everywhere.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }
};

bool read_file(const std::filesystem::path &p, Input *out) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

// One to eight libFuzzer-style edits: bit flips, byte sets, interesting values, inserts,
// erases, truncation, chunk copies and splices with another input.
Input mutate(const std::vector<Input> &all, Rng &rng) {
  Input x = all[rng.below(all.size())];
  static constexpr uint8_t kInteresting[] = {0x00, 0x01, 0x03, 0x04, 0x0F, 0x10, 0x20,
                                             0x40, 0x7F, 0x80, 0x81, 0xC0, 0xFE, 0xFF};
  const size_t edits = 1 + rng.below(8);
  for (size_t e = 0; e < edits; ++e) {
    switch (rng.below(8)) {
      case 0:
        if (!x.empty()) x[rng.below(x.size())] ^= static_cast<uint8_t>(1u << rng.below(8));
        break;
      case 1:
        if (!x.empty()) x[rng.below(x.size())] = static_cast<uint8_t>(rng.next());
        break;
      case 2:
        if (!x.empty()) x[rng.below(x.size())] = kInteresting[rng.below(sizeof kInteresting)];
        break;
      case 3:
        x.insert(x.begin() + static_cast<std::ptrdiff_t>(rng.below(x.size() + 1)),
                 static_cast<uint8_t>(rng.next()));
        break;
      case 4:
        if (!x.empty()) x.erase(x.begin() + static_cast<std::ptrdiff_t>(rng.below(x.size())));
        break;
      case 5:
        x.resize(rng.below(x.size() + 1));
        break;
      case 6:
        if (x.size() > 1) {
          const size_t from = rng.below(x.size()), to = rng.below(x.size());
          const size_t n = 1 + rng.below(std::min<size_t>(16, x.size() - std::max(from, to)));
          std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(from), n,
                      x.begin() + static_cast<std::ptrdiff_t>(to));
        }
        break;
      default: {
        const Input &o = all[rng.below(all.size())];
        const size_t cut = rng.below(x.size() + 1), from = rng.below(o.size() + 1);
        x.resize(cut);
        x.insert(x.end(), o.begin() + static_cast<std::ptrdiff_t>(from), o.end());
        break;
      }
    }
  }
  return x;
}

int usage() {
  std::fprintf(stderr, "usage: replay [--mutations N] [--seed S] [--min-inputs K] PATH...\n");
  return 2;
}

}  // namespace

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  unsigned long mutations = 2000, seed = 1, min_inputs = 1;
  std::vector<fs::path> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&](unsigned long *v) {
      if (i + 1 >= argc) return false;
      char *end = nullptr;
      *v = std::strtoul(argv[++i], &end, 0);
      return end != nullptr && *end == '\0';
    };
    if (a == "--mutations") {
      if (!value(&mutations)) return usage();
    } else if (a == "--seed") {
      if (!value(&seed)) return usage();
    } else if (a == "--min-inputs") {
      if (!value(&min_inputs)) return usage();
    } else if (!a.empty() && a[0] == '-') {
      return usage();
    } else {
      paths.emplace_back(argv[i]);
    }
  }

  std::vector<Input> inputs;
  std::vector<std::string> names;
  for (const fs::path &p : paths) {
    std::error_code ec;
    std::vector<fs::path> files;
    if (fs::is_directory(p, ec)) {
      for (const auto &e : fs::directory_iterator(p, ec))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(p);
    }
    for (const fs::path &f : files) {
      Input x;
      if (!read_file(f, &x)) {
        std::fprintf(stderr, "replay: cannot read %s\n", f.c_str());
        return 2;
      }
      inputs.push_back(std::move(x));
      names.push_back(f.string());
    }
  }
  if (inputs.size() < min_inputs) {
    std::fprintf(stderr, "replay: %zu input(s), fewer than --min-inputs %lu\n", inputs.size(),
                 min_inputs);
    return 1;
  }

  for (const int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL})
    std::signal(sig, on_fatal_signal);
#ifdef UROCE_HAVE_SANITIZER_API
  __sanitizer_set_death_callback(report_crash);
#endif

  for (size_t i = 0; i < inputs.size(); ++i) {
    std::snprintf(g_what, sizeof g_what, "seed file %s", names[i].c_str());
    run(inputs[i]);
  }
  Rng rng{seed};
  for (unsigned long m = 0; m < mutations; ++m) {
    const Input x = mutate(inputs, rng);
    std::snprintf(g_what, sizeof g_what, "mutation %lu of --seed %lu", m, seed);
    run(x);
  }
  std::printf("replay: %zu inputs and %lu mutations (seed %lu) passed\n", inputs.size(), mutations,
              seed);
  return 0;
}
