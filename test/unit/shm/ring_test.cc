// SPDX-License-Identifier: BSD-3-Clause
// Single-thread semantics of the SPSC ring: geometry checks, full/empty, order, wrap of the
// 64-bit indices, bursts across the end of the slot array, typed/zero-copy/peek APIs, corrupt
// peer indices (including guard pages proving nothing outside the ring is ever touched) and the
// notification words.
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "uroce/ring.h"

namespace uroce::shm {
namespace {

struct Item {
  uint64_t seq;
  uint64_t pay[7];
};
static_assert(sizeof(Item) == 64);

Item make_item(uint64_t seq) {
  Item it;
  it.seq = seq;
  for (int i = 0; i < 7; ++i)
    it.pay[i] = seq * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i);
  return it;
}

bool check_item(const Item &it, uint64_t seq) {
  Item want = make_item(seq);
  return std::memcmp(&it, &want, sizeof(it)) == 0;
}

// A ring buffer in its own 64-byte aligned heap block.
struct Mem {
  explicit Mem(size_t bytes) : raw(bytes + 64) {
    auto p = reinterpret_cast<uintptr_t>(raw.data());
    base = reinterpret_cast<void *>((p + 63) & ~uintptr_t{63});
    size = bytes;
  }
  std::vector<std::byte> raw;
  void *base;
  size_t size;
  abi::RingHeader *hdr() const { return static_cast<abi::RingHeader *>(base); }
};

struct Pair {
  Pair(uint32_t slot, uint32_t count, uint64_t start = 0) : mem(abi::ring_bytes(slot, count)) {
    EXPECT_EQ(ring_init(mem.base, mem.size, slot, count, abi::RingKind::kNone, 0, start),
              RingError::kOk);
    EXPECT_EQ(p.attach(mem.base, mem.size, slot, count), RingError::kOk);
    EXPECT_EQ(c.attach(mem.base, mem.size, slot, count), RingError::kOk);
  }
  Mem mem;
  RingProducer p;
  RingConsumer c;
};

TEST(Ring, InitRejectsBadGeometry) {
  Mem m(abi::ring_bytes(64, 16));
  EXPECT_EQ(ring_init(m.base, m.size, 48, 16), RingError::kInvalid);  // slot not pow2
  EXPECT_EQ(ring_init(m.base, m.size, 4, 16), RingError::kInvalid);   // slot < 8
  EXPECT_EQ(ring_init(m.base, m.size, 64, 12), RingError::kInvalid);  // count not pow2
  EXPECT_EQ(ring_init(m.base, m.size, 64, 1), RingError::kInvalid);   // count < 2
  EXPECT_EQ(ring_init(m.base, m.size, 64, 32), RingError::kInvalid);  // does not fit
  EXPECT_EQ(ring_init(static_cast<char *>(m.base) + 8, m.size - 8, 8, 2), RingError::kInvalid);
  EXPECT_EQ(ring_init(nullptr, m.size, 64, 16), RingError::kInvalid);
  ASSERT_EQ(ring_init(m.base, m.size, 64, 16), RingError::kOk);
  EXPECT_EQ(m.hdr()->magic, abi::kRingMagic);
  EXPECT_EQ(m.hdr()->slot_size, 64u);
  EXPECT_EQ(m.hdr()->slot_count, 16u);
  EXPECT_EQ(m.hdr()->data_offset, sizeof(abi::RingHeader));
}

TEST(Ring, AttachChecksHeaderAgainstExpectedGeometry) {
  Mem m(abi::ring_bytes(64, 16));
  ASSERT_EQ(ring_init(m.base, m.size, 64, 16), RingError::kOk);
  RingProducer p;
  RingConsumer c;
  EXPECT_EQ(p.attach(m.base, m.size, 128, 16), RingError::kInvalid);
  EXPECT_EQ(c.attach(m.base, m.size, 64, 8), RingError::kInvalid);
  EXPECT_EQ(c.attach(m.base, m.size - 1, 64, 16), RingError::kInvalid);
  m.hdr()->magic ^= 1;
  EXPECT_EQ(c.attach(m.base, m.size, 64, 16), RingError::kInvalid);
  m.hdr()->magic ^= 1;
  m.hdr()->version = 99;
  EXPECT_EQ(p.attach(m.base, m.size, 64, 16), RingError::kInvalid);
  m.hdr()->version = abi::kRingVersion;
  // Indices already inconsistent at attach: prod more than count ahead of cons.
  m.hdr()->prod = 17;
  EXPECT_EQ(p.attach(m.base, m.size, 64, 16), RingError::kInvalid);
  EXPECT_EQ(c.attach(m.base, m.size, 64, 16), RingError::kInvalid);
  EXPECT_FALSE(c.attached());
  m.hdr()->prod = 16;  // exactly full is fine
  EXPECT_EQ(c.attach(m.base, m.size, 64, 16), RingError::kOk);
  EXPECT_EQ(c.available(), 16u);
  // Detached handles fail cleanly.
  RingProducer dp;
  RingConsumer dc;
  Item it{};
  EXPECT_EQ(dp.try_push(it), RingError::kDetached);
  EXPECT_EQ(dc.try_pop(&it), RingError::kDetached);
  EXPECT_EQ(dp.push_burst(&it, 1), 0u);
  EXPECT_EQ(dc.pop_burst(&it, 1), 0u);
}

TEST(Ring, FullEmptyAndOrder) {
  Pair r(64, 8);
  Item out;
  EXPECT_EQ(r.c.try_pop(&out), RingError::kEmpty);
  for (uint64_t i = 0; i < 8; ++i)
    ASSERT_EQ(r.p.try_push(make_item(i)), RingError::kOk) << i;
  EXPECT_EQ(r.p.try_push(make_item(8)), RingError::kFull);
  EXPECT_EQ(r.p.free_slots(), 0u);
  EXPECT_EQ(r.c.available(), 8u);
  for (uint64_t i = 0; i < 8; ++i) {
    ASSERT_EQ(r.c.try_pop(&out), RingError::kOk);
    EXPECT_TRUE(check_item(out, i)) << i;
  }
  EXPECT_EQ(r.c.try_pop(&out), RingError::kEmpty);
  EXPECT_EQ(r.p.free_slots(), 8u);
  EXPECT_EQ(r.p.index(), 8u);
  EXPECT_EQ(r.c.index(), 8u);
  EXPECT_EQ(r.mem.hdr()->prod, 8u);
  EXPECT_EQ(r.mem.hdr()->cons, 8u);
}

TEST(Ring, IndicesWrapAt2To64) {
  const uint64_t start = UINT64_MAX - 20;
  Pair r(64, 16, start);
  std::mt19937_64 rng(1);
  uint64_t pushed = 0, popped = 0;
  std::vector<Item> buf(16);
  while (popped < 1000) {
    size_t n = rng() % 17;
    for (size_t i = 0; i < n; ++i)
      buf[i] = make_item(pushed + i);
    size_t got = r.p.push_burst(buf.data(), n);
    EXPECT_EQ(got, std::min<uint64_t>(n, 16 - (pushed - popped)));
    pushed += got;
    size_t m = rng() % 17;
    size_t out = r.c.pop_burst(buf.data(), m);
    EXPECT_EQ(out, std::min<uint64_t>(m, pushed - popped));
    for (size_t i = 0; i < out; ++i)
      ASSERT_TRUE(check_item(buf[i], popped + i));
    popped += out;
  }
  EXPECT_FALSE(r.c.corrupt());
  EXPECT_FALSE(r.p.corrupt());
  EXPECT_EQ(r.p.index(), start + pushed);  // wrapped past zero
  EXPECT_LT(r.p.index(), start);
  EXPECT_EQ(r.c.index(), start + popped);
}

TEST(Ring, FullAndEmptyExactlyAtWrap) {
  const uint64_t start = UINT64_MAX - 3;  // 4 pushes reach index 0
  Pair r(64, 4, start);
  for (uint64_t i = 0; i < 4; ++i)
    ASSERT_EQ(r.p.try_push(make_item(i)), RingError::kOk);
  EXPECT_EQ(r.p.index(), 0u);
  EXPECT_EQ(r.p.try_push(make_item(4)), RingError::kFull);
  Item out;
  ASSERT_EQ(r.c.try_pop(&out), RingError::kOk);
  EXPECT_TRUE(check_item(out, 0));
  ASSERT_EQ(r.p.try_push(make_item(4)), RingError::kOk);
  for (uint64_t i = 1; i <= 4; ++i) {
    ASSERT_EQ(r.c.try_pop(&out), RingError::kOk);
    EXPECT_TRUE(check_item(out, i));
  }
  EXPECT_EQ(r.c.try_pop(&out), RingError::kEmpty);
  EXPECT_EQ(r.c.index(), 1u);
}

TEST(Ring, BurstSplitsAcrossEndOfSlotArray) {
  Pair r(64, 8);
  Item buf[8];
  for (int i = 0; i < 6; ++i)
    ASSERT_EQ(r.p.try_push(make_item(i)), RingError::kOk);
  ASSERT_EQ(r.c.pop_burst(buf, 6), 6u);
  // Next 8 items occupy slots 6,7,0,..,5: the copy is split in two.
  for (int i = 0; i < 8; ++i)
    buf[i] = make_item(100 + i);
  ASSERT_EQ(r.p.push_burst(buf, 8), 8u);
  Item out[8];
  ASSERT_EQ(r.c.pop_burst(out, 8), 8u);
  for (int i = 0; i < 8; ++i)
    EXPECT_TRUE(check_item(out[i], 100 + i)) << i;
}

TEST(Ring, UntypedBurstCopiesWholeSlots) {
  Pair r(16, 4);
  uint8_t in[16 * 3], out[16 * 4];
  for (size_t i = 0; i < sizeof(in); ++i)
    in[i] = static_cast<uint8_t>(i * 7 + 1);
  ASSERT_EQ(r.p.push_burst(static_cast<const void *>(in), 3), 3u);
  ASSERT_EQ(r.p.try_push(static_cast<const void *>(in)), RingError::kOk);
  EXPECT_EQ(r.p.push_burst(static_cast<const void *>(in), 1), 0u);  // full
  ASSERT_EQ(r.c.pop_burst(static_cast<void *>(out), 4), 4u);
  EXPECT_EQ(std::memcmp(out, in, sizeof(in)), 0);
  EXPECT_EQ(std::memcmp(out + 48, in, 16), 0);
}

TEST(Ring, TypedItemsSmallerThanSlot) {
  Pair r(128, 4);
  Item in = make_item(7), out{};
  ASSERT_EQ(r.p.try_push(in), RingError::kOk);
  ASSERT_EQ(r.c.try_pop(&out), RingError::kOk);
  EXPECT_TRUE(check_item(out, 7));
  Item two[2] = {make_item(8), make_item(9)}, got[2];
  ASSERT_EQ(r.p.push_burst(two, 2), 2u);
  ASSERT_EQ(r.c.pop_burst(got, 2), 2u);
  EXPECT_TRUE(check_item(got[0], 8));
  EXPECT_TRUE(check_item(got[1], 9));

  struct Big {
    uint64_t v[32];
  } big{};
  EXPECT_EQ(r.p.try_push(big), RingError::kInvalid);  // 256 > 128
  EXPECT_EQ(r.c.try_pop(&big), RingError::kInvalid);
  EXPECT_EQ(r.p.push_burst(&big, 1), 0u);
}

TEST(Ring, ReserveCommitZeroCopy) {
  Pair r(64, 4);
  ASSERT_EQ(r.p.reserve(8), 4u);
  for (size_t i = 0; i < 3; ++i) {
    Item it = make_item(i);
    std::memcpy(r.p.slot(i), &it, sizeof(it));
  }
  EXPECT_EQ(r.c.available(), 0u);  // nothing visible before commit
  EXPECT_EQ(r.p.commit(5), RingError::kInvalid);
  ASSERT_EQ(r.p.commit(3), RingError::kOk);
  EXPECT_EQ(r.c.available(), 3u);
  EXPECT_EQ(r.p.commit(1), RingError::kInvalid);  // reservation used up
  EXPECT_EQ(r.p.reserve(4), 1u);
}

TEST(Ring, PeekConsume) {
  Pair r(64, 8);
  for (uint64_t i = 0; i < 5; ++i)
    ASSERT_EQ(r.p.try_push(make_item(i)), RingError::kOk);
  ASSERT_EQ(r.c.peek(3), 3u);
  for (size_t i = 0; i < 3; ++i) {
    Item it;
    std::memcpy(&it, r.c.at(i), sizeof(it));
    EXPECT_TRUE(check_item(it, i));
  }
  EXPECT_EQ(r.c.consume(4), RingError::kInvalid);
  ASSERT_EQ(r.c.consume(2), RingError::kOk);
  EXPECT_EQ(r.c.consume(1), RingError::kInvalid);  // peek window consumed
  ASSERT_EQ(r.c.peek(10), 3u);
  Item it;
  std::memcpy(&it, r.c.at(0), sizeof(it));
  EXPECT_TRUE(check_item(it, 2));
  ASSERT_EQ(r.c.consume(3), RingError::kOk);
  EXPECT_EQ(r.c.available(), 0u);
  EXPECT_EQ(r.p.free_slots(), 8u);
}

// Deferred release (the daemon's work queues): taken slots stay the consumer's until
// release_to(), so the producer never has more than capacity() items outstanding; a producer
// index beyond released + capacity is corrupt even when it is within capacity of what was taken.
TEST(Ring, DeferredReleaseKeepsTakenSlotsUntilReleased) {
  Pair r(64, 8, UINT64_MAX - 3);  // across the 64-bit wrap
  r.c.defer_release();
  const uint64_t base = r.c.index();
  for (uint64_t i = 0; i < 8; ++i)
    ASSERT_EQ(r.p.try_push(make_item(i)), RingError::kOk);
  Item out[8];
  ASSERT_EQ(r.c.pop_burst(out, 5), 5u);
  EXPECT_TRUE(check_item(out[4], 4));
  EXPECT_EQ(r.c.unreleased(), 5u);
  EXPECT_EQ(r.mem.hdr()->cons, base);  // nothing published
  EXPECT_EQ(r.p.free_slots(), 0u);     // the producer still sees a full ring
  EXPECT_EQ(r.p.try_push(make_item(8)), RingError::kFull);
  r.c.release_to(base + 6);  // beyond what was taken: ignored
  r.c.release_to(base - 1);  // behind what was released: ignored
  EXPECT_EQ(r.mem.hdr()->cons, base);
  r.c.release_to(base + 2);
  EXPECT_EQ(r.mem.hdr()->cons, base + 2);
  EXPECT_EQ(r.c.unreleased(), 3u);
  EXPECT_EQ(r.p.free_slots(), 2u);
  ASSERT_EQ(r.p.try_push(make_item(8)), RingError::kOk);
  ASSERT_EQ(r.p.try_push(make_item(9)), RingError::kOk);
  ASSERT_EQ(r.c.pop_burst(out, 8), 5u);  // 5, 6, 7, 8, 9
  EXPECT_TRUE(check_item(out[0], 5));
  EXPECT_TRUE(check_item(out[4], 9));
  r.c.release_to(r.c.index());
  EXPECT_EQ(r.c.unreleased(), 0u);
  EXPECT_EQ(r.p.free_slots(), 8u);
  EXPECT_FALSE(r.c.corrupt());
  // An app that claims one item more than the released slots allow breaks the ring.
  ASSERT_EQ(r.c.pop_burst(out, 8), 0u);
  r.c.release_to(r.c.index() - 1);  // no-op (behind)
  for (uint64_t i = 0; i < 3; ++i)
    ASSERT_EQ(r.p.try_push(make_item(10 + i)), RingError::kOk);
  ASSERT_EQ(r.c.pop_burst(out, 3), 3u);  // taken, not released: 3 of 8 slots still in use
  r.mem.hdr()->prod = r.c.index() + 6;   // 3 unreleased + 6 > 8
  EXPECT_EQ(r.c.available(), 0u);
  EXPECT_TRUE(r.c.corrupt());
  // Behind what was taken, though not behind what was released: corrupt as well.
  Pair q(64, 8);
  q.c.defer_release();
  for (uint64_t i = 0; i < 4; ++i)
    ASSERT_EQ(q.p.try_push(make_item(i)), RingError::kOk);
  ASSERT_EQ(q.c.pop_burst(out, 4), 4u);
  q.c.release_to(1);
  q.mem.hdr()->prod = 2;  // released 1 <= 2 < taken 4
  EXPECT_EQ(q.c.available(), 0u);
  EXPECT_TRUE(q.c.corrupt());
}

TEST(Ring, ConsumerDetectsProducerIndexTooFarAhead) {
  Pair r(64, 8);
  ASSERT_EQ(r.p.try_push(make_item(0)), RingError::kOk);
  r.mem.hdr()->prod = 9;  // cons 0 + count 8 + 1
  Item out = make_item(42);
  EXPECT_EQ(r.c.try_pop(&out), RingError::kCorrupt);
  EXPECT_TRUE(r.c.corrupt());
  EXPECT_TRUE(check_item(out, 42));  // untouched
  // Sticky: repairing the index does not revive the handle.
  r.mem.hdr()->prod = 1;
  EXPECT_EQ(r.c.try_pop(&out), RingError::kCorrupt);
  EXPECT_EQ(r.c.pop_burst(&out, 1), 0u);
  EXPECT_EQ(r.c.peek(1), 0u);
  EXPECT_EQ(r.c.consume(0), RingError::kCorrupt);
  EXPECT_EQ(r.c.available(), 0u);
  EXPECT_EQ(r.mem.hdr()->cons, 0u);  // never advanced
}

TEST(Ring, ConsumerDetectsProducerIndexMovingBackwards) {
  {  // below the consumer's own index
    Pair r(64, 8);
    for (uint64_t i = 0; i < 4; ++i)
      ASSERT_EQ(r.p.try_push(make_item(i)), RingError::kOk);
    Item out[4];
    ASSERT_EQ(r.c.pop_burst(out, 4), 4u);
    r.mem.hdr()->prod = 2;
    EXPECT_EQ(r.c.try_pop(out), RingError::kCorrupt);
  }
  {  // backwards but still ahead of the consumer
    Pair r(64, 8);
    for (uint64_t i = 0; i < 6; ++i)
      ASSERT_EQ(r.p.try_push(make_item(i)), RingError::kOk);
    Item out[8];
    ASSERT_EQ(r.c.pop_burst(out, 2), 2u);  // cached prod = 6
    r.mem.hdr()->prod = 4;
    EXPECT_EQ(r.c.pop_burst(out, 8), 0u);  // wants more than cached: reloads, sees 4 < 6
    EXPECT_TRUE(r.c.corrupt());
  }
  {  // wrap-around garbage: UINT64_MAX
    Pair r(64, 8);
    r.mem.hdr()->prod = UINT64_MAX;
    EXPECT_EQ(r.c.available(), 0u);
    EXPECT_TRUE(r.c.corrupt());
  }
}

TEST(Ring, ProducerDetectsBadConsumerIndex) {
  {  // consumer index ahead of the producer
    Pair r(64, 8);
    for (uint64_t i = 0; i < 8; ++i)
      ASSERT_EQ(r.p.try_push(make_item(i)), RingError::kOk);
    r.mem.hdr()->cons = 9;
    EXPECT_EQ(r.p.try_push(make_item(8)), RingError::kCorrupt);
    EXPECT_TRUE(r.p.corrupt());
    EXPECT_EQ(r.mem.hdr()->prod, 8u);
  }
  {  // consumer index moving backwards
    Pair r(64, 8);
    for (uint64_t i = 0; i < 8; ++i)
      ASSERT_EQ(r.p.try_push(make_item(i)), RingError::kOk);
    Item out[4];
    ASSERT_EQ(r.c.pop_burst(out, 4), 4u);
    for (uint64_t i = 0; i < 4; ++i)
      ASSERT_EQ(r.p.try_push(make_item(i)), RingError::kOk);
    r.mem.hdr()->cons = 3;  // producer's cache says 4
    EXPECT_EQ(r.p.try_push(make_item(9)), RingError::kCorrupt);
    EXPECT_EQ(r.p.reserve(1), 0u);
    EXPECT_EQ(r.mem.hdr()->prod, 12u);
  }
}

// Random garbage in the producer index never makes the consumer read outside the ring: the ring
// sits between two PROT_NONE pages, so any stray access would fault and kill the test.
TEST(Ring, GarbageIndicesNeverEscapeTheRing) {
  const size_t page = 4096;
  const uint32_t slot = 64, count = 16;
  const size_t rb = abi::ring_bytes(slot, count);  // 256 + 1024 < one page
  void *map = mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  auto *base = static_cast<std::byte *>(map);
  ASSERT_EQ(mprotect(base, page, PROT_NONE), 0);
  ASSERT_EQ(mprotect(base + 2 * page, page, PROT_NONE), 0);
  // Place the ring so the slot array ends exactly at the upper guard page.
  void *ring = base + 2 * page - rb;
  ASSERT_EQ(reinterpret_cast<uintptr_t>(ring) % 64, 0u);
  std::mt19937_64 rng(7);
  uint64_t corrupt_seen = 0, items_seen = 0;
  for (int round = 0; round < 2000; ++round) {
    ASSERT_EQ(ring_init(ring, rb, slot, count, abi::RingKind::kNone, 0, rng()), RingError::kOk);
    RingConsumer c;
    ASSERT_EQ(c.attach(ring, rb, slot, count), RingError::kOk);
    const uint64_t cons0 = c.index();
    auto *h = static_cast<abi::RingHeader *>(ring);
    std::byte out[slot * count];
    for (int step = 0; step < 8 && !c.corrupt(); ++step) {
      // Mostly plausible values, sometimes wild ones.
      uint64_t v = rng();
      h->prod = (v & 1) ? c.index() + (v >> 1) % (2 * count) - count / 2 : v;
      const uint64_t want = h->prod;
      const size_t n = c.pop_burst(out, count);
      EXPECT_LE(n, count);
      items_seen += n;
      if (!c.corrupt()) {
        EXPECT_LE(want - (c.index() - n), count);
      }
    }
    corrupt_seen += c.corrupt();
    EXPECT_LE(c.index() - cons0, 8u * count);
  }
  EXPECT_GT(corrupt_seen, 0u);
  EXPECT_GT(items_seen, 0u);
  munmap(map, 3 * page);
}

TEST(Ring, DoorbellNotifyWord) {
  Pair r(64, 8);
  EXPECT_TRUE(r.p.claim_notify());   // idle -> queued: caller rings
  EXPECT_FALSE(r.p.claim_notify());  // already queued
  EXPECT_EQ(r.mem.hdr()->notify, abi::kNotifyQueued);
  EXPECT_FALSE(r.c.release_notify());  // empty: token released
  EXPECT_EQ(r.mem.hdr()->notify, abi::kNotifyIdle);
  ASSERT_EQ(r.p.try_push(make_item(0)), RingError::kOk);
  EXPECT_TRUE(r.p.claim_notify());
  // Items present when the lcore tries to go idle: it takes the token back and stays active.
  EXPECT_TRUE(r.c.release_notify());
  EXPECT_EQ(r.mem.hdr()->notify, abi::kNotifyQueued);
  EXPECT_FALSE(r.p.claim_notify());
}

TEST(Ring, CqArmWord) {
  Pair r(64, 8);
  EXPECT_FALSE(r.p.take_arm(false));  // not armed
  r.c.arm(false);
  EXPECT_TRUE(r.p.take_arm(false));
  EXPECT_FALSE(r.p.take_arm(true));  // consumed
  r.c.arm(true);                     // solicited only
  EXPECT_FALSE(r.p.take_arm(false));
  EXPECT_EQ(r.mem.hdr()->notify, abi::kNotifyArmedSolicited);
  EXPECT_TRUE(r.p.take_arm(true));
  EXPECT_EQ(r.mem.hdr()->notify, abi::kNotifyIdle);
  r.mem.hdr()->notify = 77;  // garbage from the app: no event, no crash
  EXPECT_FALSE(r.p.take_arm(true));
}

}  // namespace
}  // namespace uroce::shm
