// SPDX-License-Identifier: BSD-3-Clause
// The context region: the daemon carves rings and publishes descriptors, the shim finds them by
// (kind, id) in a second mapping, and every malformed header/descriptor is refused.
#include <cstring>

#include <gtest/gtest.h>

#include "shm/memfd.h"
#include "shm/region.h"
#include "uroce/ring.h"

namespace uroce::shm {
namespace {

using abi::RingKind;

constexpr size_t kBytes = 16 * kPageSize;

struct Fixture {
  Fixture() {
    auto r = SharedRegion::create("ctx", kBytes);
    EXPECT_TRUE(r.ok());
    reg = std::move(r).value();
    auto m = Mapping::map(reg.memfd.fd(), kBytes);  // the shim's view
    EXPECT_TRUE(m.ok());
    shim = std::move(m).value();
  }
  SharedRegion reg;
  Mapping shim;
};

TEST(Region, BuildAndFind) {
  Fixture f;
  auto w = RegionWriter::init(f.reg.map.addr(), kBytes, 8);
  ASSERT_TRUE(w.ok()) << w.error();
  auto sq = w->add_ring(RingKind::kSendQueue, 17, abi::send_slot_size(4, 0), 64);
  ASSERT_TRUE(sq.ok()) << sq.error();
  auto cq = w->add_ring(RingKind::kCompletion, 3, sizeof(abi::Cqe), 128);
  ASSERT_TRUE(cq.ok());
  auto db = w->add_ring(RingKind::kDoorbell, 0, sizeof(abi::Doorbell), 16);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(w->count(), 3u);
  EXPECT_EQ(sq->offset % 64, 0u);
  EXPECT_GE(cq->offset, sq->offset + sq->bytes);

  auto r = RegionReader::open(f.shim.addr(), kBytes);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->count(), 3u);
  auto found = r->find(RingKind::kCompletion, 3);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->offset, cq->offset);
  EXPECT_EQ(found->slot_size, 64u);
  EXPECT_EQ(found->slot_count, 128u);
  EXPECT_EQ(r->find(RingKind::kCompletion, 4).error(), ENOENT);
  EXPECT_EQ(r->find(RingKind::kSendQueue, 3).error(), ENOENT);

  // A CQE written by the "daemon" through its mapping is read by the "shim" through its own.
  RingProducer dp;
  ASSERT_EQ(dp.attach(w->ring_addr(*cq), cq->bytes, cq->slot_size, cq->slot_count), RingError::kOk);
  RingConsumer sc;
  ASSERT_EQ(sc.attach(r->ring_addr(*found), found->bytes, found->slot_size, found->slot_count),
            RingError::kOk);
  abi::Cqe in{}, out{};
  in.wr_id = 0x1234;
  in.byte_len = 99;
  in.status = 0;
  ASSERT_EQ(dp.try_push(in), RingError::kOk);
  ASSERT_EQ(sc.try_pop(&out), RingError::kOk);
  EXPECT_EQ(std::memcmp(&in, &out, sizeof(in)), 0);
}

TEST(Region, WriterLimits) {
  Fixture f;
  EXPECT_EQ(RegionWriter::init(f.reg.map.addr(), kBytes, 0).error(), EINVAL);
  EXPECT_EQ(RegionWriter::init(f.reg.map.data() + 8, kBytes - 8, 4).error(), EINVAL);
  EXPECT_EQ(RegionWriter::init(f.reg.map.addr(), 64, 4).error(), ENOSPC);
  auto w = RegionWriter::init(f.reg.map.addr(), kBytes, 2);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->add_ring(RingKind::kSendQueue, 1, 100, 16).error(), EINVAL);
  ASSERT_TRUE(w->add_ring(RingKind::kSendQueue, 1, 128, 16).ok());
  EXPECT_EQ(w->add_ring(RingKind::kSendQueue, 1, 128, 16).error(), EEXIST);
  EXPECT_EQ(w->add_ring(RingKind::kRecvQueue, 1, 64, 1u << 20).error(), ENOSPC);  // too big
  ASSERT_TRUE(w->add_ring(RingKind::kRecvQueue, 1, 64, 16).ok());
  EXPECT_EQ(w->add_ring(RingKind::kCompletion, 1, 64, 16).error(), ENOSPC);  // table full
}

TEST(Region, ReaderRejectsBadHeaders) {
  Fixture f;
  auto w = RegionWriter::init(f.reg.map.addr(), kBytes, 4);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->add_ring(RingKind::kSendQueue, 1, 128, 16).ok());
  auto *h = static_cast<abi::RegionHeader *>(f.reg.map.addr());
  EXPECT_EQ(RegionReader::open(f.shim.addr(), kBytes - kPageSize).error(), EBADMSG);  // size
  h->magic ^= 1;
  EXPECT_EQ(RegionReader::open(f.shim.addr(), kBytes).error(), EBADMSG);
  h->magic ^= 1;
  h->abi_version = abi::kAbiVersion + 1;
  EXPECT_EQ(RegionReader::open(f.shim.addr(), kBytes).error(), EPROTO);
  h->abi_version = abi::kAbiVersion;
  h->desc_capacity = 0x7fffffff;  // table would run past the end
  EXPECT_EQ(RegionReader::open(f.shim.addr(), kBytes).error(), EBADMSG);
  h->desc_capacity = 4;
  ASSERT_TRUE(RegionReader::open(f.shim.addr(), kBytes).ok());
  EXPECT_EQ(RegionReader::open(nullptr, kBytes).error(), EINVAL);
}

TEST(Region, ReaderRejectsBadDescriptors) {
  Fixture f;
  auto w = RegionWriter::init(f.reg.map.addr(), kBytes, 4);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->add_ring(RingKind::kSendQueue, 1, 128, 16).ok());
  auto r = RegionReader::open(f.shim.addr(), kBytes);
  ASSERT_TRUE(r.ok());
  auto *d = reinterpret_cast<abi::RingDesc *>(f.reg.map.data() + sizeof(abi::RegionHeader));
  const abi::RingDesc good = *d;
  auto expect_bad = [&](const char *what) {
    EXPECT_EQ(r->find(RingKind::kSendQueue, 1).error(), EBADMSG) << what;
    *d = good;
  };
  d->offset = kBytes - 64;
  expect_bad("ring runs past the end");
  d->offset = UINT64_MAX - 63;
  expect_bad("offset overflow");
  d->offset = good.offset + 8;
  expect_bad("misaligned");
  d->offset = 0;
  expect_bad("overlaps the table");
  d->bytes = good.bytes + 64;
  expect_bad("bytes inconsistent with geometry");
  d->slot_size = 96;
  expect_bad("slot size not a power of two");
  d->slot_count = 0;
  expect_bad("zero slots");
  ASSERT_TRUE(r->find(RingKind::kSendQueue, 1).ok());
  // A published count beyond the capacity is clamped.
  auto *h = static_cast<abi::RegionHeader *>(f.reg.map.addr());
  h->desc_count = 1000;
  EXPECT_EQ(r->count(), 4u);
  EXPECT_EQ(r->at(3).error(), EBADMSG);  // zeroed entry
  EXPECT_EQ(r->at(4).error(), ENOENT);
}

}  // namespace
}  // namespace uroce::shm
