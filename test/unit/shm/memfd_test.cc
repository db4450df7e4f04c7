// SPDX-License-Identifier: BSD-3-Clause
// memfd creation and sealing, adoption checks, shared / fixed / replacing mappings, eventfd.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "shm/eventfd.h"
#include "shm/memfd.h"

namespace uroce::shm {
namespace {

TEST(Memfd, CreateSizesAndSeals) {
  auto m = Memfd::create("t", 3 * kPageSize);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(m->size(), 3 * kPageSize);
  const int seals = get_seals(m->fd());
  ASSERT_GE(seals, 0);
  EXPECT_TRUE(seals & F_SEAL_GROW);
  EXPECT_TRUE(seals & F_SEAL_SHRINK);
  EXPECT_FALSE(seals & F_SEAL_SEAL);
  EXPECT_NE(ftruncate(m->fd(), kPageSize), 0);  // cannot shrink
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(ftruncate(m->fd(), 10 * kPageSize), 0);  // cannot grow
  EXPECT_EQ(fcntl(m->fd(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  // Unsealed variant still allows sealing later; F_SEAL_SEAL variant does not.
  auto u = Memfd::create("u", kPageSize, {.seal_size = false});
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(get_seals(u->fd()), 0);
  EXPECT_EQ(ftruncate(u->fd(), 2 * kPageSize), 0);
  auto s = Memfd::create("s", kPageSize, {.seal_size = true, .seal_seals = true});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(add_seals(s->fd(), F_SEAL_WRITE), EPERM);
  EXPECT_EQ(Memfd::create("z", 0).error(), EINVAL);
}

TEST(Memfd, TwoMappingsShareBytes) {
  auto r = SharedRegion::create("share", 2 * kPageSize);
  ASSERT_TRUE(r.ok());
  auto m2 = Mapping::map(r->memfd.fd(), 2 * kPageSize, MapProt::kRead);
  ASSERT_TRUE(m2.ok());
  EXPECT_NE(m2->addr(), r->map.addr());
  std::memcpy(r->map.data() + kPageSize + 5, "hello", 5);
  EXPECT_EQ(std::memcmp(m2->data() + kPageSize + 5, "hello", 5), 0);
  EXPECT_EQ(Mapping::map(r->memfd.fd(), 0).error(), EINVAL);
  EXPECT_EQ(Mapping::map(-1, kPageSize).error(), EBADF);
}

TEST(Memfd, AdoptChecksSealsSizeAndType) {
  auto ok = Memfd::create("a", 2 * kPageSize);
  ASSERT_TRUE(ok.ok());
  auto d = ok->dup();
  ASSERT_TRUE(d.ok());
  auto a = Memfd::adopt(std::move(d).value(), 2 * kPageSize);
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_EQ(a->size(), 2 * kPageSize);
  auto d2 = ok->dup();
  EXPECT_EQ(Memfd::adopt(std::move(d2).value(), 3 * kPageSize).error(), ERANGE);  // too small
  auto unsealed = Memfd::create("b", kPageSize, {.seal_size = false});
  ASSERT_TRUE(unsealed.ok());
  EXPECT_EQ(Memfd::adopt(unsealed->release(), kPageSize).error(), EPERM);  // could shrink
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  close(p[1]);
  EXPECT_EQ(Memfd::adopt(UniqueFd(p[0]), 1).error(), EINVAL);  // not a regular file
  EXPECT_EQ(Memfd::adopt(UniqueFd(), 1).error(), EBADF);
}

TEST(Memfd, MapFixedAtFreeAddress) {
  auto r = SharedRegion::create("fixed", 2 * kPageSize);
  ASSERT_TRUE(r.ok());
  // Find a free address: reserve, then release it.
  void *hole = mmap(nullptr, 2 * kPageSize, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(hole, MAP_FAILED);
  ASSERT_EQ(munmap(hole, 2 * kPageSize), 0);
  auto m = Mapping::map_fixed(r->memfd.fd(), 2 * kPageSize, hole);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(m->addr(), hole);
  std::memcpy(r->map.data(), "abc", 3);
  EXPECT_EQ(std::memcmp(hole, "abc", 3), 0);
}

TEST(Memfd, MapFixedRefusesToReplace) {
  auto r = SharedRegion::create("taken", kPageSize);
  ASSERT_TRUE(r.ok());
  void *busy =
      mmap(nullptr, 2 * kPageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(busy, MAP_FAILED);
  std::memset(busy, 0x5a, 2 * kPageSize);
  // Overlapping only the second page is refused as well.
  auto m = Mapping::map_fixed(r->memfd.fd(), kPageSize, static_cast<char *>(busy) + kPageSize);
  EXPECT_FALSE(m.ok());
  EXPECT_EQ(m.error(), EEXIST);
  EXPECT_EQ(static_cast<unsigned char *>(busy)[kPageSize], 0x5a);  // untouched
  EXPECT_EQ(Mapping::map_fixed(r->memfd.fd(), kPageSize, static_cast<char *>(busy) + 1).error(),
            EINVAL);
  munmap(busy, 2 * kPageSize);
}

TEST(Memfd, ReplaceKeepsContentsAndAddress) {
  const size_t len = 4 * kPageSize;
  auto *buf = static_cast<unsigned char *>(
      mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(buf, MAP_FAILED);
  for (size_t i = 0; i < len; ++i)
    buf[i] = static_cast<unsigned char>(i * 31 + 7);
  auto mf = Memfd::create("mr", len);
  ASSERT_TRUE(mf.ok());
  auto m = Mapping::replace(mf->fd(), buf, len);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(m->addr(), buf);
  for (size_t i = 0; i < len; ++i)
    ASSERT_EQ(buf[i], static_cast<unsigned char>(i * 31 + 7)) << i;
  // The range is now shared with every other mapping of the memfd, both ways.
  auto other = Mapping::map(mf->fd(), len);
  ASSERT_TRUE(other.ok());
  buf[100] = 0xee;
  EXPECT_EQ(static_cast<unsigned char *>(other->addr())[100], 0xee);
  static_cast<unsigned char *>(other->addr())[len - 1] = 0x11;
  EXPECT_EQ(buf[len - 1], 0x11);
  EXPECT_EQ(Mapping::replace(mf->fd(), buf + 1, kPageSize).error(), EINVAL);
  EXPECT_EQ(Mapping::replace(mf->fd(), buf, 100).error(), EINVAL);
  // m unmaps buf on destruction.
}

TEST(Memfd, MappingMoveAndRelease) {
  auto r = SharedRegion::create("mv", kPageSize);
  ASSERT_TRUE(r.ok());
  Mapping a = std::move(r->map);
  EXPECT_FALSE(r->map.valid());
  ASSERT_TRUE(a.valid());
  void *p = a.release();
  EXPECT_FALSE(a.valid());
  Mapping b = Mapping::adopt(p, kPageSize);
  EXPECT_EQ(b.addr(), p);
  b.reset();
  EXPECT_FALSE(b.valid());
}

TEST(EventFd, SignalDrainWait) {
  auto e = EventFd::create();
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->drain(), 0);
  EXPECT_EQ(e->wait(0), 0);
  EXPECT_EQ(e->signal(), 0);
  EXPECT_EQ(e->signal(4), 0);
  EXPECT_EQ(e->wait(0), 1);
  EXPECT_EQ(e->drain(), 5);
  EXPECT_EQ(e->drain(), 0);
  EXPECT_EQ(e->signal(0), EINVAL);
  // Saturated counter: a further signal is still "signalled", not an error.
  EXPECT_EQ(e->signal(0xfffffffffffffffeull), 0);
  EXPECT_EQ(e->signal(1), 0);
  EXPECT_EQ(e->drain(), static_cast<int64_t>(0xfffffffffffffffeull));
}

TEST(EventFd, SemaphoreMode) {
  auto e = EventFd::create(true);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->signal(3), 0);
  EXPECT_EQ(e->drain(), 1);
  EXPECT_EQ(e->drain(), 1);
  EXPECT_EQ(e->drain(), 1);
  EXPECT_EQ(e->drain(), 0);
}

TEST(EventFd, CrossThreadWakeup) {
  auto e = EventFd::create();
  ASSERT_TRUE(e.ok());
  std::thread t([&] { EXPECT_EQ(e->signal(), 0); });
  EXPECT_EQ(e->wait(30000), 1);  // bound only against a hang; the signal comes at once
  t.join();
  EXPECT_EQ(e->drain(), 1);
}

TEST(EventFd, AdoptOnlyEventfds) {
  UniqueFd raw(eventfd(0, EFD_CLOEXEC));  // blocking: adopt must make it non-blocking
  ASSERT_TRUE(raw.valid());
  auto e = EventFd::adopt(std::move(raw));
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_TRUE(fcntl(e->fd(), F_GETFL) & O_NONBLOCK);
  EXPECT_EQ(e->drain(), 0);  // would block forever if still blocking
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  close(p[0]);
  EXPECT_EQ(EventFd::adopt(UniqueFd(p[1])).error(), EINVAL);
  auto mf = Memfd::create("x", kPageSize);
  ASSERT_TRUE(mf.ok());
  EXPECT_EQ(EventFd::adopt(mf->release()).error(), EINVAL);
}

}  // namespace
}  // namespace uroce::shm
