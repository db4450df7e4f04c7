// SPDX-License-Identifier: BSD-3-Clause
// Writes the seed corpus of wqe_fuzz (input layout in wqe_fuzz.cc): on RC, UC and UD QPs,
// well-formed send WQEs of every opcode (SGEs pointed into the MR by the kind byte), inline
// sends, UD sends naming the session's AH / the bystander's AH / the bystander QPs, RQ and SRQ
// receive WQEs, a few broken ones (bad opcode, too many SGEs, reserved bits set), rewritten
// ring indices (SQ / RQ / SRQ producer ahead, too far ahead, behind, arbitrary; CQ consumer
// jumps; the doorbell ring's producer) and doorbells naming other sessions' QPs and SRQs,
// no QP, or no kind.
// Usage: wqe_seed_gen OUTDIR STAMP
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "uroce/abi.h"

namespace {

using Seed = std::vector<unsigned char>;
constexpr size_t kSendSlot = 128;  // max_send_sge 4, max_inline_data 64
constexpr size_t kRecvSlot = 64;   // max_recv_sge 3
// Setup byte: the QP's type.
constexpr uint8_t kRc = 0, kUc = 1, kUd = 2;
// Record classes (kind bits 0-1) and ring index targets (kind bits 2-4).
constexpr uint8_t kSendRec = 0, kRecvRec = 1, kIndexRec = 2, kBellRec = 3;
enum Ring : uint8_t { kSq = 0, kRq = 1, kSrq = 2, kCqCons = 3, kDbRing = 4 };
enum How : uint8_t { kDelta = 0, kAbs = 1, kOverSize = 2, kBehind = 3 };

void u32(Seed *s, uint32_t v) {
  for (int i = 3; i >= 0; --i)
    s->push_back(static_cast<unsigned char>(v >> (8 * i)));
}
void u64(Seed *s, uint64_t v) {
  u32(s, static_cast<uint32_t>(v >> 32));
  u32(s, static_cast<uint32_t>(v));
}

// ud_sel < 0: no UD selector byte; else the selector (wqe_fuzz.cc: AH, remote QPN, Q_Key).
void send_rec(Seed *s, uint8_t opcode, uint32_t num_sge, uint16_t inline_len, uint8_t reserved = 0,
              int ud_sel = -1) {
  s->push_back(kSendRec | 4 | (ud_sel >= 0 ? 0x10 : 0));  // SGEs into the MR
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
  if (ud_sel >= 0) s->push_back(static_cast<unsigned char>(ud_sel));
}

// A BIND_MW of the session's type 2 window (wqe_fuzz.cc: tags relative to its first one) to
// [off, off + len) of the MR, or with len 0 a LOCAL_INV of tag `tag`.
void window_rec(Seed *s, uint8_t tag, uint8_t new_tag, uint64_t off, uint64_t len,
                uint32_t access) {
  s->push_back(kSendRec | 4);
  unsigned char slot[kSendSlot] = {};
  uroce::abi::SendWqeHeader h{};
  h.wr_id = 0x7000 + new_tag;
  h.opcode = len ? 8 : 7;  // IBV_WR_BIND_MW : IBV_WR_LOCAL_INV
  h.send_flags = 2;
  h.rkey = tag;
  h.imm_data = len ? new_tag : tag;
  h.remote_addr = off;
  h.compare_add = len;
  h.remote_qkey = access;
  std::memcpy(slot, &h, sizeof h);
  s->insert(s->end(), slot, slot + kSendSlot);
}

void recv_rec(Seed *s, uint32_t num_sge, uint32_t reserved = 0, bool srq = false) {
  s->push_back(kRecvRec | 4 | (srq ? 8 : 0));  // receive (shared receive) ring, SGEs into the MR
  unsigned char slot[kRecvSlot] = {};
  const uroce::abi::RecvWqeHeader h{0x6000 + num_sge, num_sge, reserved};
  std::memcpy(slot, &h, sizeof h);
  for (uint32_t i = 0; i < num_sge && i < 3; ++i) {
    const uroce::abi::Sge g{128u * i, 64, 0};
    std::memcpy(slot + sizeof h + i * sizeof g, &g, sizeof g);
  }
  s->insert(s->end(), slot, slot + kRecvSlot);
}

// Rewrites a ring index (then, with bell, a raw doorbell for that ring).
void index_rec(Seed *s, Ring ring, How how, uint64_t v, bool bell) {
  s->push_back(static_cast<unsigned char>(kIndexRec | ring << 2 | how << 5 | (bell ? 0x80 : 0)));
  u64(s, v);
}

// A raw doorbell: whom 0 the QP, 1 / 2 the bystander QPs, 3 the SRQ, 4 the bystander's SRQ,
// 5 the qpn given; kind 0 SQ, 1 RQ, 2 the kind given.
void bell_rec(Seed *s, uint8_t whom, uint8_t kind, uint32_t qpn = 0, uint32_t raw_kind = 0) {
  s->push_back(static_cast<unsigned char>(kBellRec | whom << 2 | kind << 5));
  u32(s, qpn);
  u32(s, raw_kind);
}

Seed with_setup(uint8_t type) {
  return Seed{type};
}

}  // namespace

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  if (argc != 3) {
    std::fprintf(stderr, "usage: wqe_seed_gen OUTDIR STAMP\n");
    return 2;
  }
  std::vector<Seed> seeds;
  for (uint8_t type : {kRc, kUc, kUd}) {
    for (uint8_t op = 0; op <= 10; ++op) {
      Seed s = with_setup(type);
      send_rec(&s, op, op == 5 || op == 6 ? 1 : 2, 0);
      seeds.push_back(s);
    }
    Seed s = with_setup(type);
    send_rec(&s, 2, 0, 40);  // inline SEND
    send_rec(&s, 0, 0, 64);  // inline WRITE
    seeds.push_back(s);
    s = with_setup(type);
    recv_rec(&s, 1);
    recv_rec(&s, 3);
    recv_rec(&s, 0);
    seeds.push_back(s);
  }
  // UD sends: the session's AH to bystander A (an RC QP of another session) with the right
  // Q_Key, to itself, the bystander's AH (another PD), AH 0, and as written.
  {
    Seed s = with_setup(kUd);
    recv_rec(&s, 1);
    send_rec(&s, 2, 1, 0, 0, 0x00 | 0x00 | 0x10);   // own AH, A, Q_Key
    send_rec(&s, 2, 1, 0, 0, 0x00 | 0x08 | 0x10);   // own AH, itself, Q_Key
    send_rec(&s, 2, 1, 0, 0, 0x01 | 0x08 | 0x10);   // the bystander's AH
    send_rec(&s, 2, 1, 0, 0, 0x02 | 0x04);          // AH 0, B, Q_Key as written
    send_rec(&s, 3, 0, 32, 0, 0x00 | 0x08 | 0x10);  // inline SEND_WITH_IMM to itself
    send_rec(&s, 2, 1, 0, 0, 0x03 | 0x0C);          // everything as written
    seeds.push_back(s);
  }
  // Memory windows: bind (tag 0 -> 1), invalidate, bind again (1 -> 2), a bind of a bound
  // window (an error: the QP goes to ERR), on RC and UC.
  for (uint8_t type : {kRc, kUc}) {
    Seed s = with_setup(type);
    window_rec(&s, 0, 1, 256, 4096, 6);  // remote write | read
    window_rec(&s, 1, 0, 0, 0, 0);
    window_rec(&s, 1, 2, 0, 512, 2);
    window_rec(&s, 2, 3, 0, 512, 2);
    seeds.push_back(s);
  }
  Seed s = with_setup(kRc);
  recv_rec(&s, 1, 0, true);  // SRQ: good, too many SGEs, reserved set, good
  recv_rec(&s, 9, 0, true);
  recv_rec(&s, 1, 5, true);
  recv_rec(&s, 3, 0, true);
  seeds.push_back(s);
  s = with_setup(kRc);
  send_rec(&s, 0x55, 1, 0);  // no such opcode
  send_rec(&s, 2, 200, 0);   // more SGEs than the slot holds
  seeds.push_back(s);
  s = with_setup(kRc);
  send_rec(&s, 2, 1, 0, 1);  // reserved byte set
  recv_rec(&s, 9);           // more SGEs than the slot holds
  recv_rec(&s, 1, 7);        // reserved set
  send_rec(&s, 2, 1, 600);   // inline longer than the slot
  seeds.push_back(s);
  // Ring indices, each after a good WQE: a producer 1 and 3 ahead (stale slots), exactly one
  // ring ahead, more than a ring ahead, behind, far away; for the SQ, RQ and SRQ.
  for (Ring r : {kSq, kRq, kSrq}) {
    for (const auto &[how, v] :
         std::initializer_list<std::pair<How, uint64_t>>{{kDelta, 1},
                                                         {kDelta, 3},
                                                         {kOverSize, 0},
                                                         {kOverSize, 5},
                                                         {kBehind, 0},
                                                         {kBehind, 7},
                                                         {kAbs, ~uint64_t{0}},
                                                         {kAbs, uint64_t{1} << 40},
                                                         {kDelta, 16}}) {
      for (uint8_t type : {kRc, kUd}) {
        s = with_setup(type);
        if (r == kSq)
          send_rec(&s, 2, 1, 0);
        else
          recv_rec(&s, 1, 0, r == kSrq);
        index_rec(&s, r, how, v, true);
        if (r == kSq)
          send_rec(&s, 2, 1, 0);  // the app posts on: its own index again
        else
          recv_rec(&s, 1, 0, r == kSrq);
        seeds.push_back(s);
      }
    }
  }
  // More receives than the engine's RQ (max_recv_wr 16) holds on an RC QP nothing sends to;
  // an SRQ claimed full twice (valid stale WQEs beyond its max_wr 128): backpressure.
  s = with_setup(kRc);
  for (int i = 0; i < 12; ++i)
    recv_rec(&s, 1);
  seeds.push_back(s);
  s = with_setup(kUd);
  recv_rec(&s, 1, 0, true);
  index_rec(&s, kSrq, kOverSize, 0, true);
  index_rec(&s, kSrq, kOverSize, 0, true);
  index_rec(&s, kSrq, kOverSize, 1, true);
  seeds.push_back(s);
  // Rewritten without a doorbell, then put back (a producer that jumps and returns).
  s = with_setup(kRc);
  index_rec(&s, kSq, kOverSize, 1, false);
  index_rec(&s, kSq, kDelta, static_cast<uint32_t>(-17), true);
  send_rec(&s, 0, 1, 0);
  seeds.push_back(s);
  // The CQ's consumer index: jumps ahead of the producer, behind, arbitrary, with completions
  // coming (RC sends that fail at once, receives).
  for (const auto &[how, v] : std::initializer_list<std::pair<How, uint64_t>>{
           {kDelta, 5}, {kBehind, 0}, {kAbs, 0x123456789ull}, {kOverSize, 0}}) {
    s = with_setup(kRc);
    send_rec(&s, 2, 1, 0);
    index_rec(&s, kCqCons, how, v, false);
    send_rec(&s, 0, 1, 0);
    recv_rec(&s, 1);
    seeds.push_back(s);
  }
  // The doorbell ring's producer index: a few stale doorbells, too far, behind.
  for (const auto &[how, v] :
       std::initializer_list<std::pair<How, uint64_t>>{{kDelta, 2}, {kOverSize, 0}, {kBehind, 3}}) {
    s = with_setup(kRc);
    send_rec(&s, 2, 1, 0);
    index_rec(&s, kDbRing, how, v, false);
    send_rec(&s, 2, 1, 0);
    seeds.push_back(s);
  }
  // Doorbells naming the QP (both kinds), the bystander QPs and SRQ (another session's), the
  // QP's own SRQ, no QP, QPN 0, an SRQ handle that does not exist, a kind that does not exist.
  s = with_setup(kRc);
  send_rec(&s, 2, 1, 0);
  bell_rec(&s, 0, 0);
  bell_rec(&s, 0, 1);
  bell_rec(&s, 1, 0);
  bell_rec(&s, 1, 1);
  bell_rec(&s, 2, 0);
  bell_rec(&s, 2, 1);
  bell_rec(&s, 3, 1);
  bell_rec(&s, 4, 1);
  bell_rec(&s, 3, 0);
  bell_rec(&s, 5, 0, 0xFFFFFF);
  bell_rec(&s, 5, 1, 0);
  bell_rec(&s, 5, 1, 0x80000000u | 999);
  bell_rec(&s, 0, 2, 0, 7);
  bell_rec(&s, 0, 2, 0, 0);
  recv_rec(&s, 1);
  seeds.push_back(s);
  s = with_setup(kUc);
  for (int i = 0; i < 20; ++i)  // more doorbells than the ring holds for the session
    bell_rec(&s, static_cast<uint8_t>(i % 3), static_cast<uint8_t>(i & 1));
  send_rec(&s, 0, 1, 0);
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
