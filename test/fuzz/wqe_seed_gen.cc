// SPDX-License-Identifier: BSD-3-Clause
// Writes the seed corpus of wqe_fuzz (record layout in wqe_fuzz.cc): well-formed send WQEs of
// every opcode (SGEs pointed into the MR by the kind byte), inline sends, RQ and SRQ receive
// WQEs, and a few broken ones (bad opcode, too many SGEs, reserved bits set).
// Usage: wqe_seed_gen OUTDIR STAMP
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "uroce/abi.h"

namespace {

using Seed = std::vector<unsigned char>;
constexpr size_t kSendSlot = 128;  // max_send_sge 4, max_inline_data 64
constexpr size_t kRecvSlot = 64;   // max_recv_sge 3

void send_rec(Seed *s, uint8_t opcode, uint32_t num_sge, uint16_t inline_len,
              uint8_t reserved = 0) {
  s->push_back(2);  // send ring, first SGE into the MR
  unsigned char slot[kSendSlot] = {};
  uroce::abi::SendWqeHeader h{};
  h.wr_id = 0x5000 + opcode;
  h.opcode = opcode;
  h.reserved = reserved;
  h.inline_len = inline_len;
  h.send_flags = 2;  // IBV_SEND_SIGNALED
  h.num_sge = num_sge;
  h.remote_addr = 0x1000;
  h.rkey = 0x77;
  std::memcpy(slot, &h, sizeof h);
  if (inline_len == 0) {
    for (uint32_t i = 0; i < num_sge && i < 4; ++i) {
      const uroce::abi::Sge g{64u * i, 32, 0};
      std::memcpy(slot + sizeof h + i * sizeof g, &g, sizeof g);
    }
  } else {
    std::memset(slot + sizeof h, 0x5A, std::min<size_t>(inline_len, kSendSlot - sizeof h));
  }
  s->insert(s->end(), slot, slot + kSendSlot);
}

void recv_rec(Seed *s, uint32_t num_sge, uint32_t reserved = 0, bool srq = false) {
  s->push_back(srq ? 0x0B : 3);  // receive (shared receive) ring, SGEs into the MR
  unsigned char slot[kRecvSlot] = {};
  const uroce::abi::RecvWqeHeader h{0x6000 + num_sge, num_sge, reserved};
  std::memcpy(slot, &h, sizeof h);
  for (uint32_t i = 0; i < num_sge && i < 3; ++i) {
    const uroce::abi::Sge g{128u * i, 64, 0};
    std::memcpy(slot + sizeof h + i * sizeof g, &g, sizeof g);
  }
  s->insert(s->end(), slot, slot + kRecvSlot);
}

}  // namespace

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  if (argc != 3) {
    std::fprintf(stderr, "usage: wqe_seed_gen OUTDIR STAMP\n");
    return 2;
  }
  std::vector<Seed> seeds;
  for (uint8_t op = 0; op <= 10; ++op) {
    Seed s;
    send_rec(&s, op, op == 5 || op == 6 ? 1 : 2, 0);
    seeds.push_back(s);
  }
  Seed s;
  send_rec(&s, 2, 0, 40);  // inline SEND
  send_rec(&s, 0, 0, 64);  // inline WRITE
  seeds.push_back(s);
  s.clear();
  recv_rec(&s, 1);
  recv_rec(&s, 3);
  recv_rec(&s, 0);
  seeds.push_back(s);
  s.clear();
  recv_rec(&s, 1, 0, true);  // SRQ: good, too many SGEs, reserved set, good
  recv_rec(&s, 9, 0, true);
  recv_rec(&s, 1, 5, true);
  recv_rec(&s, 3, 0, true);
  seeds.push_back(s);
  s.clear();
  send_rec(&s, 0x55, 1, 0);  // no such opcode
  send_rec(&s, 2, 200, 0);   // more SGEs than the slot holds
  seeds.push_back(s);
  s.clear();
  send_rec(&s, 2, 1, 0, 1);  // reserved byte set
  recv_rec(&s, 9);           // more SGEs than the slot holds
  recv_rec(&s, 1, 7);        // reserved set
  send_rec(&s, 2, 1, 600);   // inline longer than the slot
  seeds.push_back(s);

  const fs::path dir = argv[1];
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "wqe_seed_gen: %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  for (const auto &e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind("seed-", 0) == 0) fs::remove(e.path(), ec);
  size_t n = 0;
  for (const Seed &x : seeds) {
    char name[32];
    std::snprintf(name, sizeof name, "seed-%04zu", n++);
    std::FILE *f = std::fopen((dir / name).c_str(), "wb");
    if (f == nullptr || std::fwrite(x.data(), 1, x.size(), f) != x.size() || std::fclose(f)) {
      std::fprintf(stderr, "wqe_seed_gen: cannot write %s\n", (dir / name).c_str());
      return 1;
    }
  }
  std::FILE *f = std::fopen(argv[2], "w");
  if (f == nullptr || std::fprintf(f, "%zu seeds in %s\n", n, argv[1]) < 0 || std::fclose(f))
    return 1;
  std::printf("wqe_seed_gen: %zu seeds in %s\n", n, argv[1]);
  return 0;
}
