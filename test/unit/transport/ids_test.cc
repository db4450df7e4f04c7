// SPDX-License-Identifier: BSD-3-Clause
// Unpredictable identifiers (doc/security.md): memory keys and QPNs drawn from the CSPRNG.
// The statistical bounds are 5 standard deviations wide for random values and are broken by
// any sequential numbering (index << 8 | tag keys, qpn_base + index QPNs): each test says how.
#include <gtest/gtest.h>

#include <cerrno>
#include <cmath>
#include <set>
#include <vector>

#include "transport/ah.h"
#include "transport/core.h"
#include "transport/mr.h"

namespace uroce::transport {
namespace {

// Counts, per bit, how many of `v` have it set, and checks each is within 5 sd of half.
void expect_bits_balanced(const std::vector<uint32_t> &v, int first_bit, int last_bit,
                          const char *what) {
  const double n = static_cast<double>(v.size());
  const double bound = 5 * std::sqrt(n) / 2;
  for (int b = first_bit; b <= last_bit; ++b) {
    double ones = 0;
    for (const uint32_t x : v)
      ones += (x >> b) & 1;
    EXPECT_NEAR(ones, n / 2, bound) << what << " bit " << b;
  }
}

TEST(Ids, MemoryKeysHaveNoStructure) {
  MrTable t(1024, 0);  // keyed from getrandom(2), as in uroced
  uint8_t mem[64];
  std::vector<uint32_t> keys;
  for (int i = 0; i < 1024; ++i) {
    uint32_t k = 0;
    ASSERT_EQ(t.reg(1, mem, 0x1000, sizeof mem, kAccessLocalWrite, &k), 0);
    keys.push_back(k);
  }
  uint32_t k = 0;
  EXPECT_EQ(t.reg(1, mem, 0x1000, sizeof mem, kAccessLocalWrite, &k), ENOMEM);  // capacity
  EXPECT_EQ(std::set<uint32_t>(keys.begin(), keys.end()).size(), keys.size());
  // Every one of the 32 bits is a coin flip: `index << 8 | tag` keys leave bits 18..31 at 0.
  expect_bits_balanced(keys, 0, 31, "key");
  // Successive keys are not neighbours (sequential slots would make all 1023 pairs so).
  int adjacent = 0;
  for (size_t i = 1; i < keys.size(); ++i)
    adjacent += ((keys[i] - keys[i - 1]) & 0x7ff) == 1 || ((keys[i] - keys[i - 1]) >> 8) == 1;
  EXPECT_LT(adjacent, 10);
  // Knowing every other key does not help: 2^20 random guesses hit about 2^20 * 1024 / 2^32
  // = 0.25 keys (Poisson: more than 6 has probability < 1e-6).
  util::Csprng g;
  int hits = 0;
  for (int i = 0; i < (1 << 20); ++i) {
    uint8_t *h = nullptr;
    hits += t.check(g.next_u32(), 1, 0x1000, 8, 0, &h) == MrCheck::kOk;
  }
  EXPECT_LE(hits, 6);
}

TEST(Ids, ReusedSlotGetsAFreshUnrelatedKey) {
  MrTable t(1, 0);
  uint8_t mem[64];
  std::vector<uint32_t> keys;
  uint32_t pd = 0;
  for (int i = 0; i < 4096; ++i) {
    uint32_t k = 0;
    ASSERT_EQ(t.reg(1, mem, 0x1000, sizeof mem, kAccessLocalWrite, &k), 0);
    ASSERT_NE(k, 0u);
    if (!keys.empty()) {
      ASSERT_NE(k, keys.back());
    }
    keys.push_back(k);
    uint8_t *h = nullptr;
    ASSERT_EQ(t.check(k, 1, 0x1000, 8, 0, &h), MrCheck::kOk);
    ASSERT_EQ(t.dereg(k, &pd), 0);
    ASSERT_EQ(t.check(k, 1, 0x1000, 8, 0, &h), MrCheck::kBadKey);
  }
  // One slot of two: bit 0 is the slot, bits 1..31 fresh on every registration (an 8-bit tag
  // would leave bits 8..31 constant).
  expect_bits_balanced(keys, 1, 31, "reused key");
  // 4096 draws of 31 bits: a repeated key has probability ~4e-3.
  EXPECT_GE(std::set<uint32_t>(keys.begin(), keys.end()).size(), keys.size() - 1);
}

TEST(Ids, KeyChosenByTheCaller) {
  MrTable a(8, 0), b(8, 0);
  uint8_t mem[64];
  uint32_t k = 0;
  ASSERT_EQ(a.reg(1, mem, 0x1000, sizeof mem, kAccessLocalWrite, &k), 0);
  EXPECT_EQ(b.reg_with_key(0, 1, mem, 0x1000, sizeof mem, kAccessLocalWrite), EINVAL);
  EXPECT_EQ(b.reg_with_key(k, 1, mem, 0x1000, 0, kAccessLocalWrite), EINVAL);
  ASSERT_EQ(b.reg_with_key(k, 1, mem, 0x1000, sizeof mem, kAccessLocalWrite), 0);
  uint8_t *h = nullptr;
  EXPECT_EQ(b.check(k, 1, 0x1000, 8, 0, &h), MrCheck::kOk);
  EXPECT_EQ(h, mem);
  EXPECT_EQ(b.check(k ^ 0x80000000u, 1, 0x1000, 8, 0, &h), MrCheck::kBadKey);  // same slot
  EXPECT_EQ(b.reg_with_key(k ^ 0x80000000u, 1, mem, 0x1000, 8, kAccessLocalWrite), EBUSY);
}

struct QpnEngine {
  explicit QpnEngine(uint32_t prefix) {
    EngineConfig c;  // seed 0: getrandom(2)
    c.max_qp = 512;
    c.max_cq = 2;
    c.qpn_base = prefix << 16 | 0x11;
    e = std::make_unique<EngineCore>(c);
    pd = e->create_pd();
    cq = e->create_cq(16);
  }
  uint32_t create() {
    QpInitAttr ia;
    ia.qp_type = QpType::kRc;
    ia.pd = pd;
    ia.send_cq = ia.recv_cq = cq;
    ia.cap = QpCap{1, 1, 1, 1, 0};
    return e->create_qp(ia);
  }
  std::unique_ptr<EngineCore> e;
  uint32_t pd = 0, cq = 0;
};

TEST(Ids, QpnsKeepTheWorkerPrefixAndRandomLowBits) {
  QpnEngine w(3);
  std::vector<uint32_t> low;
  for (int i = 0; i < 512; ++i) {
    const uint32_t q = w.create();
    ASSERT_NE(q, 0u);
    EXPECT_EQ(q >> 16, 3u) << "the worker bits (daemon/lcore.h qpn_owner)";
    EXPECT_GE(q & 0xffff, 2u);
    EXPECT_EQ(w.e->qp_slot(q), static_cast<uint32_t>(i));
    EXPECT_EQ(w.e->qp_slot(q ^ 0x10000), UINT32_MAX) << "the whole QPN is compared";
    low.push_back(q & 0xffff);
  }
  EXPECT_EQ(w.create(), 0u);  // table full
  EXPECT_EQ(std::set<uint32_t>(low.begin(), low.end()).size(), low.size());
  // qpn_base + index would leave bits 9..15 at 0 (512 QPs from 0x11).
  expect_bits_balanced(low, 0, 15, "QPN");
  // A destroyed QP's slot comes back with another QPN; the old one is unknown.
  const uint32_t old = 3u << 16 | low[100];
  ASSERT_EQ(w.e->destroy_qp(old), 0);
  const uint32_t again = w.create();
  EXPECT_NE(again, old);
  EXPECT_EQ(w.e->qp_slot(again), 100u);
  EXPECT_EQ(w.e->qp_slot(old), UINT32_MAX);
  QpAttr a;
  QpInitAttr ia;
  EXPECT_EQ(w.e->query_qp(old, &a, &ia), EINVAL);
}

TEST(Ids, TwoEnginesDrawDifferentQpns) {
  QpnEngine a(0), b(0);
  int same = 0;
  for (int i = 0; i < 64; ++i)
    same += a.create() == b.create();
  EXPECT_LT(same, 4);  // identical sequences (sequential numbering) give 64
}

// uroced shares one table among its workers (transport/tables.h): dereg is retire (the key
// stops matching at once) then, after a grace period, release (the slot may be reused).
TEST(Ids, RetiredRegionNeverMatchesAndKeepsItsSlotUntilReleased) {
  MrTable t(1, 7);
  uint8_t mem[64];
  uint32_t k = 0, pd = 0;
  ASSERT_EQ(t.reg(3, mem, 0x1000, sizeof mem, kAccessLocalWrite, &k), 0);
  ASSERT_EQ(t.retire(k, &pd), 0);
  EXPECT_EQ(pd, 3u);
  uint8_t *h = nullptr;
  EXPECT_EQ(t.check(k, 3, 0x1000, 8, 0, &h), MrCheck::kBadKey);
  EXPECT_EQ(t.find(k), nullptr);
  EXPECT_EQ(t.retire(k, &pd), EINVAL);    // once
  EXPECT_EQ(t.invalidate(k, 3), EINVAL);  // not a live region
  uint32_t k2 = 0;
  EXPECT_EQ(t.reg(3, mem, 0x1000, sizeof mem, kAccessLocalWrite, &k2), ENOMEM);  // still taken
  EXPECT_EQ(t.in_use(), 1u);
  t.release(k ^ 0x80000000u);  // another key of the slot: ignored
  EXPECT_EQ(t.in_use(), 1u);
  t.release(k);
  EXPECT_EQ(t.in_use(), 0u);
  ASSERT_EQ(t.reg(3, mem, 0x1000, sizeof mem, kAccessLocalWrite, &k2), 0);
  EXPECT_NE(k2, k);
  // An invalidated region (SEND_WITH_INV on a worker) can still be retired.
  ASSERT_EQ(t.invalidate(k2, 3), 0);
  ASSERT_EQ(t.retire(k2, &pd), 0);
  t.release(k2);
  EXPECT_EQ(t.in_use(), 0u);
}

TEST(Ids, RetiredAddressHandleIsGoneAndKeepsItsSlotUntilReleased) {
  AhTable t(1);
  AhAttr a;
  a.path.dscp = 9;
  const uint32_t ah = t.create(2, a);
  ASSERT_EQ(ah, 1u);
  ASSERT_NE(t.path(ah, 2), nullptr);
  EXPECT_EQ(t.path(ah, 2)->dscp, 9);
  EXPECT_EQ(t.path(ah, 3), nullptr);  // another PD's
  uint32_t pd = 0;
  ASSERT_EQ(t.retire(ah, &pd), 0);
  EXPECT_EQ(pd, 2u);
  EXPECT_EQ(t.path(ah, 2), nullptr);
  EXPECT_EQ(t.retire(ah, &pd), EINVAL);
  EXPECT_EQ(t.create(2, a), 0u);  // the only slot is still taken
  t.release(ah);
  EXPECT_EQ(t.create(2, a), 1u);
  EXPECT_EQ(t.path(0, 2), nullptr);
  EXPECT_EQ(t.path(2, 2), nullptr);
}

}  // namespace
}  // namespace uroce::transport
