// SPDX-License-Identifier: BSD-3-Clause
// Property test: random mixes of every RC opcode on many QPs through a lossy, duplicating,
// reordering, corrupting link. Checked for every run:
//   - every posted WR completes exactly once, in order, with IBV_WC_SUCCESS and its opcode;
//   - WRITE data lands exactly where it should and nowhere else (a shadow copy of the remote
//     memory, guard bytes untouched), READ data is what the remote holds, SEND / WRITE with
//     immediate consume receive WQEs in order with the right bytes and immediate;
//   - fetch-and-add on counters shared by all QPs is linearizable (the returned values are a
//     permutation of init .. init + n - 1), compare-and-swap chains on a per-QP word;
//   - totals match.
// A failing run prints its seed (UROCE_SEED=N reruns it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <random>

#include "harness.h"
#include "support/seed.h"

namespace uroce::transport::testing {
namespace {

constexpr uint32_t kPairs = 6;
constexpr uint32_t kArea = 16384;  // write / read / source areas
constexpr uint32_t kSlot = 4096;   // receive and read-destination slots
constexpr uint32_t kSlots = 16;    // outstanding ops per QP
constexpr uint32_t kCounters = 4;  // shared FAA counters
// Node 1 (responder) memory per pair: write area | read area | recv slots | CAS word.
constexpr uint64_t kPairB = 2 * kArea + kSlots * kSlot + 64;
// Node 0 (requester) memory per pair: source area | read dest slots | atomic result slots.
constexpr uint64_t kPairA = kArea + kSlots * kSlot + kSlots * 8;
constexpr uint64_t kVaA = 0x10000000, kVaB = 0x40000000;

struct Op {
  WrOpcode op;
  uint32_t off = 0, len = 0, roff = 0;
  uint32_t seq = 0;  // receive sequence number for SEND / WRITE_IMM
  uint32_t counter = 0;
  uint64_t cas_expect = 0;
};

struct Pair {
  uint32_t qa = 0, qb = 0;
  Mtu mtu = Mtu::k1024;
  std::vector<Op> ops;  // planned, in post order
  uint32_t posted = 0, done = 0;
  uint32_t recv_posted = 0, recv_done = 0;
  std::vector<uint32_t> recv_ops;  // op index of each receive-consuming op, in order
  uint64_t cas_value = 0;
};

struct MixRun {
  double drop, dup, reorder, corrupt;
  uint32_t ops_per_pair;
};

void run_mix(uint64_t seed, const MixRun &cfg) {
  SCOPED_TRACE(::testing::Message() << "seed=" << seed << " drop=" << cfg.drop);
  std::mt19937_64 rng(seed);
  EngineConfig ec;
  ec.max_inflight_psn = 64;
  Net net(seed, 2, ec, 4096);
  test::Faults f;
  f.drop = cfg.drop;
  f.duplicate = cfg.dup;
  f.reorder = cfg.reorder;
  f.corrupt = cfg.corrupt;
  f.jitter_ns = 500;
  net.link.set_faults(f);
  Buf A = net.reg(0, kPairs * kPairA, kAllAccess, kVaA);
  Buf B = net.reg(1, kCounters * 8 + kPairs * kPairB, kAllAccess, kVaB);
  fill_pattern(A.mem.data(), A.mem.size(), static_cast<uint32_t>(seed));
  std::vector<uint8_t> shadowB(B.mem.size(), 0);
  // Read areas hold a pattern; counters start at 1000.
  for (uint32_t i = 0; i < kPairs; ++i) {
    uint8_t *ra = B.at(kCounters * 8 + i * kPairB + kArea);
    fill_pattern(ra, kArea, static_cast<uint32_t>(seed + 100 + i));
    std::memcpy(&shadowB[kCounters * 8 + i * kPairB + kArea], ra, kArea);
  }
  for (uint32_t c = 0; c < kCounters; ++c) {
    const uint64_t v = 1000;
    std::memcpy(B.at(c * 8), &v, 8);
  }
  std::vector<Pair> pairs(kPairs);
  std::vector<uint32_t> faa_count(kCounters, 0);
  std::vector<std::vector<uint64_t>> faa_origs(kCounters);
  const Mtu mtus[] = {Mtu::k256, Mtu::k1024, Mtu::k4096};
  for (uint32_t i = 0; i < kPairs; ++i) {
    Pair &p = pairs[i];
    RcParams rp;
    rp.mtu = p.mtu = mtus[i % 3];
    rp.timeout = 6;  // 262 us
    rp.retry_cnt = 7;
    rp.psn_a = static_cast<uint32_t>(rng()) & 0xFFFFFF;
    rp.psn_b = static_cast<uint32_t>(rng()) & 0xFFFFFF;
    rp.cap = QpCap{kSlots, kSlots, 4, 1, 64};
    std::tie(p.qa, p.qb) = net.connect(0, 1, rp);
    uint32_t seq = 0;
    for (uint32_t k = 0; k < cfg.ops_per_pair; ++k) {
      Op o;
      const uint32_t kind = rng() % 7;
      const WrOpcode kinds[] = {WrOpcode::kSend,           WrOpcode::kSendWithImm,
                                WrOpcode::kRdmaWrite,      WrOpcode::kRdmaWriteWithImm,
                                WrOpcode::kRdmaRead,       WrOpcode::kAtomicFetchAndAdd,
                                WrOpcode::kAtomicCmpAndSwp};
      o.op = kinds[kind];
      o.len = static_cast<uint32_t>(rng() % kSlot);
      if (rng() % 8 == 0) o.len = 0;
      o.off = static_cast<uint32_t>(rng() % (kArea - o.len));
      o.roff = static_cast<uint32_t>(rng() % (kArea - o.len));
      if (o.op == WrOpcode::kSend || o.op == WrOpcode::kSendWithImm ||
          o.op == WrOpcode::kRdmaWriteWithImm) {
        o.seq = seq++;
        p.recv_ops.push_back(k);
      }
      if (o.op == WrOpcode::kAtomicFetchAndAdd) {
        o.counter = static_cast<uint32_t>(rng() % kCounters);
        o.len = 8;
        ++faa_count[o.counter];
      }
      if (o.op == WrOpcode::kAtomicCmpAndSwp) o.len = 8;
      p.ops.push_back(o);
    }
  }

  auto b_base = [&](uint32_t i) { return uint64_t{kCounters} * 8 + i * kPairB; };
  auto post_more = [&](uint32_t i) {
    Pair &p = pairs[i];
    const uint64_t a0 = i * kPairA, b0 = b_base(i);
    while (p.recv_posted < p.recv_ops.size() && p.recv_posted - p.recv_done < kSlots) {
      const uint64_t slot = b0 + 2 * kArea + (p.recv_posted % kSlots) * kSlot;
      std::memset(B.at(slot), 0, kSlot);
      ASSERT_EQ(net.e(1).post_recv(p.qb, make_recv(p.recv_posted, B, slot, kSlot)), 0);
      ++p.recv_posted;
    }
    while (p.posted < p.ops.size() && p.posted - p.done < kSlots) {
      Op &o = p.ops[p.posted];
      SendWr wr = make_wr(p.posted, o.op, A, a0 + o.off, o.len);
      wr.imm_data_be = 0xA0000000u | (i << 16) | o.seq;
      switch (o.op) {
        case WrOpcode::kRdmaWrite:
        case WrOpcode::kRdmaWriteWithImm:
          wr.remote_addr = kVaB + b0 + o.roff;
          wr.rkey = B.key;
          std::memcpy(&shadowB[b0 + o.roff], A.at(a0 + o.off), o.len);
          break;
        case WrOpcode::kRdmaRead: {
          const uint64_t dst = a0 + kArea + (p.posted % kSlots) * kSlot;
          wr.sg_list[0] = Sge{kVaA + dst, o.len, A.key};
          wr.remote_addr = kVaB + b0 + kArea + o.roff;
          wr.rkey = B.key;
          break;
        }
        case WrOpcode::kAtomicFetchAndAdd:
        case WrOpcode::kAtomicCmpAndSwp: {
          const uint64_t dst = a0 + kArea + kSlots * kSlot + (p.posted % kSlots) * 8;
          wr.sg_list[0] = Sge{kVaA + dst, 8, A.key};
          wr.rkey = B.key;
          if (o.op == WrOpcode::kAtomicFetchAndAdd) {
            wr.remote_addr = kVaB + o.counter * 8;
            wr.compare_add = 1;
          } else {
            wr.remote_addr = kVaB + b0 + 2 * kArea + kSlots * kSlot;
            wr.compare_add = p.cas_value;
            wr.swap = p.cas_value + 3;
            o.cas_expect = p.cas_value;
            p.cas_value += 3;
          }
          break;
        }
        default:
          break;
      }
      ASSERT_EQ(net.e(0).post_send(p.qa, wr), 0);
      ++p.posted;
    }
  };
  for (uint32_t i = 0; i < kPairs; ++i)
    post_more(i);

  auto qp_index = [&](uint32_t qpn, bool requester) -> uint32_t {
    for (uint32_t i = 0; i < kPairs; ++i)
      if ((requester ? pairs[i].qa : pairs[i].qb) == qpn) return i;
    ADD_FAILURE() << "unknown qpn " << qpn;
    return 0;
  };
  const WcOpcode wc_of[] = {WcOpcode::kRdmaWrite, WcOpcode::kRdmaWrite, WcOpcode::kSend,
                            WcOpcode::kSend,      WcOpcode::kRdmaRead,  WcOpcode::kCompSwap,
                            WcOpcode::kFetchAdd};
  bool failed = false;
  auto all_done = [&] {
    for (auto &p : pairs)
      if (p.done < p.ops.size() || p.recv_done < p.recv_ops.size()) return false;
    return true;
  };
  const bool ok = net.run_until(
      [&] {
        if (failed) return true;
        Wc wc[32];
        uint32_t n;
        while ((n = net.e(0).poll_cq(net.node(0).cq, wc, 32)) > 0) {
          for (uint32_t k = 0; k < n; ++k) {
            const uint32_t i = qp_index(wc[k].qp_num, true);
            Pair &p = pairs[i];
            const uint64_t a0 = i * kPairA;
            if (wc[k].status != WcStatus::kSuccess || wc[k].wr_id != p.done) {
              ADD_FAILURE() << "pair " << i << " wr " << wc[k].wr_id << " expected " << p.done
                            << " status " << wc_status_str(wc[k].status);
              failed = true;
              return true;
            }
            const Op &o = p.ops[p.done];
            EXPECT_EQ(wc[k].opcode, wc_of[static_cast<uint32_t>(o.op)]);
            if (o.op == WrOpcode::kRdmaRead) {
              const uint64_t dst = a0 + kArea + (p.done % kSlots) * kSlot;
              EXPECT_EQ(std::memcmp(A.at(dst), &shadowB[b_base(i) + kArea + o.roff], o.len), 0)
                  << "READ data, pair " << i << " op " << p.done;
            } else if (o.op == WrOpcode::kAtomicFetchAndAdd || o.op == WrOpcode::kAtomicCmpAndSwp) {
              uint64_t orig;
              std::memcpy(&orig, A.at(a0 + kArea + kSlots * kSlot + (p.done % kSlots) * 8), 8);
              if (o.op == WrOpcode::kAtomicFetchAndAdd)
                faa_origs[o.counter].push_back(orig);
              else
                EXPECT_EQ(orig, o.cas_expect) << "CAS chain, pair " << i;
            }
            ++p.done;
          }
        }
        while ((n = net.e(1).poll_cq(net.node(1).cq, wc, 32)) > 0) {
          for (uint32_t k = 0; k < n; ++k) {
            const uint32_t i = qp_index(wc[k].qp_num, false);
            Pair &p = pairs[i];
            if (wc[k].status != WcStatus::kSuccess || wc[k].wr_id != p.recv_done) {
              ADD_FAILURE() << "pair " << i << " recv " << wc[k].wr_id << " expected "
                            << p.recv_done << " status " << wc_status_str(wc[k].status);
              failed = true;
              return true;
            }
            const Op &o = p.ops[p.recv_ops[p.recv_done]];
            const uint64_t slot = b_base(i) + 2 * kArea + (p.recv_done % kSlots) * kSlot;
            EXPECT_EQ(wc[k].byte_len, o.len);
            if (o.op == WrOpcode::kRdmaWriteWithImm) {
              EXPECT_EQ(wc[k].opcode, WcOpcode::kRecvRdmaWithImm);
            } else {
              EXPECT_EQ(wc[k].opcode, WcOpcode::kRecv);
              EXPECT_EQ(std::memcmp(B.at(slot), A.at(i * kPairA + o.off), o.len), 0)
                  << "SEND data, pair " << i << " recv " << p.recv_done;
              std::memcpy(&shadowB[slot], B.at(slot),
                          kSlot);  // receive slots are not checked below
            }
            const bool imm = o.op != WrOpcode::kSend;
            EXPECT_EQ(wc[k].wc_flags, imm ? uint32_t{kWcWithImm} : 0u);
            if (imm) {
              EXPECT_EQ(wc[k].imm_data, 0xA0000000u | (i << 16) | o.seq);
            }
            ++p.recv_done;
          }
        }
        for (uint32_t i = 0; i < kPairs; ++i)
          post_more(i);
        return all_done();
      },
      20'000'000);
  ASSERT_TRUE(ok);
  ASSERT_FALSE(failed);
  // WRITE areas equal the shadow byte for byte (nothing written outside the targets); the
  // receive slots were compared on completion.
  for (uint32_t i = 0; i < kPairs; ++i) {
    const uint64_t b0 = b_base(i);
    EXPECT_EQ(std::memcmp(B.at(b0), &shadowB[b0], 2 * kArea), 0) << "pair " << i;
    uint64_t cas;
    std::memcpy(&cas, B.at(b0 + 2 * kArea + kSlots * kSlot), 8);
    EXPECT_EQ(cas, pairs[i].cas_value);
  }
  for (uint32_t c = 0; c < kCounters; ++c) {
    uint64_t v;
    std::memcpy(&v, B.at(c * 8), 8);
    EXPECT_EQ(v, 1000u + faa_count[c]);
    auto &o = faa_origs[c];
    ASSERT_EQ(o.size(), faa_count[c]);
    std::sort(o.begin(), o.end());
    for (size_t k = 0; k < o.size(); ++k)
      ASSERT_EQ(o[k], 1000u + k) << "counter " << c;  // each value returned exactly once
  }
  if (cfg.drop > 0) {
    uint64_t rt = 0;
    for (auto &p : pairs)
      rt += net.e(0).qp_counters(p.qa)->retransmits;
    EXPECT_GT(rt, 0u);  // the faults were exercised
  }
}

TEST(TransportProperty, NoLoss) {
  UROCE_SEED(seed, 1);
  run_mix(seed, MixRun{0, 0, 0, 0, 300});
}
TEST(TransportProperty, Loss0_1Percent) {
  UROCE_SEED(seed, 2);
  run_mix(seed, MixRun{0.001, 0.001, 0.001, 0.001, 300});
}
TEST(TransportProperty, Loss1Percent) {
  UROCE_SEED(seed, 3);
  run_mix(seed, MixRun{0.01, 0.01, 0.01, 0.005, 300});
}
TEST(TransportProperty, Loss5Percent) {
  UROCE_SEED(seed, 4);
  run_mix(seed, MixRun{0.05, 0.02, 0.02, 0.01, 200});
}
TEST(TransportProperty, ManySeedsAt5Percent) {
  UROCE_SEED(seed, 100);
  for (uint64_t s = seed; s < seed + 5; ++s)
    run_mix(s, MixRun{0.05, 0.01, 0.02, 0.01, 60});
}

}  // namespace
}  // namespace uroce::transport::testing
