// SPDX-License-Identifier: BSD-3-Clause
// util/capture_ring.h: records come out whole, in order, with their timestamps; a full ring
// refuses and counts; wrap-around; a producer and a consumer thread lose and corrupt nothing
// (every frame is drained or counted as dropped, exactly once).
#include "util/capture_ring.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace uroce::util {
namespace {

// A frame whose bytes derive from its sequence number: corruption shows.
std::vector<uint8_t> frame(uint32_t seq, uint32_t len) {
  std::vector<uint8_t> f(len);
  for (uint32_t i = 0; i < len; ++i)
    f[i] = static_cast<uint8_t>(seq * 7 + i * 13 + (i >> 8));
  if (len >= 4)
    for (int b = 0; b < 4; ++b)
      f[b] = static_cast<uint8_t>(seq >> (8 * b));
  return f;
}

struct Got {
  std::vector<uint8_t> data;
  uint64_t ts;
};

TEST(CaptureRing, OrderLengthsTimestampsAndFull) {
  CaptureRing r(CaptureRing::kMinBytes);
  std::vector<Got> got;
  auto sink = [&got](const uint8_t *f, uint32_t len, uint64_t ts) {
    got.push_back(Got{std::vector<uint8_t>(f, f + len), ts});
  };
  EXPECT_EQ(r.drain(sink), 0u);
  const uint32_t lens[] = {1, 15, 16, 17, 60, 1514, 4218, 9000, 65535};
  for (uint32_t i = 0; i < 9; ++i)
    ASSERT_TRUE(r.push(frame(i, lens[i]).data(), lens[i], 1000 + i));
  EXPECT_EQ(r.drain(sink), 9u);
  ASSERT_EQ(got.size(), 9u);
  for (uint32_t i = 0; i < 9; ++i) {
    EXPECT_EQ(got[i].data, frame(i, lens[i])) << i;
    EXPECT_EQ(got[i].ts, 1000u + i);
  }
  // A frame over kMaxFrame is cut.
  std::vector<uint8_t> big(70000, 0xab);
  ASSERT_TRUE(r.push(big.data(), 70000, 5));
  got.clear();
  EXPECT_EQ(r.drain(sink), 1u);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data.size(), CaptureRing::kMaxFrame);
  // Fill: 1000-byte frames take 1024 bytes each with the header (256 KiB: 256 records).
  uint32_t pushed = 0;
  while (r.push(frame(pushed, 1000).data(), 1000, pushed))
    ++pushed;
  EXPECT_GE(pushed, 200u);
  EXPECT_LE(pushed, 256u);
  EXPECT_EQ(r.dropped(), 1u);
  EXPECT_FALSE(r.push(frame(0, 1000).data(), 1000, 0));
  EXPECT_EQ(r.dropped(), 2u);
  got.clear();
  EXPECT_EQ(r.drain(sink), pushed);
  for (uint32_t i = 0; i < pushed; ++i)
    ASSERT_EQ(got[i].data, frame(i, 1000)) << i;
  EXPECT_TRUE(r.push(frame(1, 1).data(), 1, 0));  // room again
}

TEST(CaptureRing, WrapsAroundTheEnd) {
  CaptureRing r(CaptureRing::kMinBytes);
  uint32_t seq = 0, want = 0;
  bool ok = true;
  // Record sizes that do not divide the ring: records stop short of the end and a wrap marker
  // sends the consumer back; many laps.
  for (int lap = 0; lap < 200; ++lap) {
    for (int i = 0; i < 37; ++i, ++seq) {
      const uint32_t len = 1 + (seq * 2654435761u) % 9000;
      ASSERT_TRUE(r.push(frame(seq, len).data(), len, seq));
    }
    r.drain([&](const uint8_t *f, uint32_t len, uint64_t ts) {
      const uint32_t l = 1 + (want * 2654435761u) % 9000;
      ok = ok && ts == want && len == l && std::vector<uint8_t>(f, f + len) == frame(want, l);
      ++want;
    });
    ASSERT_TRUE(ok) << "lap " << lap;
  }
  EXPECT_EQ(want, seq);
  EXPECT_EQ(r.dropped(), 0u);
}

TEST(CaptureRing, TwoThreads) {
  CaptureRing r(CaptureRing::kMinBytes);
  constexpr uint32_t kFrames = 300000;
  std::atomic<bool> done{false};
  uint32_t accepted = 0;
  std::vector<uint32_t> accepted_seqs;
  accepted_seqs.reserve(kFrames);
  std::thread producer([&] {
    for (uint32_t s = 0; s < kFrames; ++s) {
      const uint32_t len = 4 + (s * 40503u) % 3000;
      if (r.push(frame(s, len).data(), len, s)) accepted_seqs.push_back(s);
    }
    done.store(true, std::memory_order_release);
  });
  std::vector<uint32_t> seen;
  seen.reserve(kFrames);
  uint64_t bad = 0;
  auto sink = [&](const uint8_t *f, uint32_t len, uint64_t ts) {
    const uint32_t s = static_cast<uint32_t>(ts);
    const uint32_t l = 4 + (s * 40503u) % 3000;
    if (len != l || std::vector<uint8_t>(f, f + len) != frame(s, l)) ++bad;
    seen.push_back(s);
  };
  while (!done.load(std::memory_order_acquire))
    r.drain(sink);
  producer.join();
  r.drain(sink);
  accepted = static_cast<uint32_t>(accepted_seqs.size());
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(seen, accepted_seqs);  // in order, each once
  EXPECT_EQ(accepted + r.dropped(), kFrames);
}

TEST(CaptureRing, RefusesABadSize) {
  EXPECT_THROW(CaptureRing(1000), std::invalid_argument);
  EXPECT_THROW(CaptureRing(CaptureRing::kMinBytes / 2), std::invalid_argument);
  EXPECT_THROW(CaptureRing(CaptureRing::kMinBytes + 64), std::invalid_argument);
}

}  // namespace
}  // namespace uroce::util
