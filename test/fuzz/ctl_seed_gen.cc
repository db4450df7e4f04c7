// SPDX-License-Identifier: BSD-3-Clause
// Writes the seed corpus of ctl_fuzz: well-formed control messages (hello, ping with payloads
// of several sizes and fd counts, a verbs-range type, a reply) built with the real header
// structs, each behind every interesting mode byte (see ctl_fuzz.cc).
// Usage: ctl_seed_gen OUTDIR STAMP
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "uroce/abi.h"
#include "uroce/ctl.h"

namespace {

using namespace uroce::ctl;

std::vector<uint8_t> message(uint16_t type, const void *payload, uint32_t len, uint32_t fds) {
  MsgHeader h{};
  h.magic = kMagic;
  h.version = kProtoVersion;
  h.type = type;
  h.length = static_cast<uint32_t>(sizeof h) + len;
  h.request_id = 42;
  h.num_fds = fds;
  std::vector<uint8_t> m(sizeof h + len);
  std::memcpy(m.data(), &h, sizeof h);
  if (len) std::memcpy(m.data() + sizeof h, payload, len);
  return m;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: ctl_seed_gen OUTDIR STAMP\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "ctl_seed_gen: %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  std::vector<std::vector<uint8_t>> msgs;
  HelloPayload hello{};
  hello.abi_version = uroce::abi::kAbiVersion;
  hello.max_message = kMaxMessage;
  hello.max_fds = kMaxFds;
  std::snprintf(hello.name, sizeof hello.name, "seed");
  msgs.push_back(message(kHello, &hello, sizeof hello, 0));
  std::vector<uint8_t> bytes(kMaxPayload, 0x5A);
  for (uint32_t len : {0u, 1u, 64u, kMaxPayload})
    for (uint32_t fds : {0u, 1u, kMaxFds})
      msgs.push_back(message(kPing, bytes.data(), len, fds));
  msgs.push_back(message(kFirstVerbsType, bytes.data(), 16, 2));
  msgs.push_back(message(kFirstVerbsType | kReplyBit, bytes.data(), 8, 0));

  int n = 0;
  for (const auto &m : msgs) {
    // Mode byte: fd count in bits 0-2, fix-ups in bits 3-4, socket path in bit 5.
    for (uint8_t mode : {0x00, 0x18, 0x19, 0x38, 0x3C, 0x27}) {
      const std::string path = dir + "/seed-" + std::to_string(n++);
      std::FILE *f = std::fopen(path.c_str(), "wb");
      if (!f) {
        std::perror(path.c_str());
        return 1;
      }
      std::fputc(mode, f);
      std::fwrite(m.data(), 1, m.size(), f);
      if (std::fclose(f) != 0) return 1;
    }
  }
  std::FILE *stamp = std::fopen(argv[2], "w");
  if (!stamp) return 1;
  std::fprintf(stamp, "%d seeds\n", n);
  return std::fclose(stamp) == 0 ? 0 : 1;
}
