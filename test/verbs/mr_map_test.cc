// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs/mr_map: page reference counting, /proc/self/maps parsing, and the remapping
// itself in this process (contents kept, pages shared with the memfd at offset = address,
// overlapping registrations share pages, the last release makes them private again, memory
// that cannot be shared is refused, a forked child gets private copies).
#include "mr_map.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace uroce::verbs {
namespace {

constexpr uint64_t P = 4096;

TEST(PageCounts, AddRemoveUncovered) {
  PageCounts c;
  EXPECT_EQ(c.uncovered(0, 4 * P), (std::vector<Range>{{0, 4 * P}}));
  c.add(P, 3 * P);
  EXPECT_EQ(c.uncovered(0, 4 * P), (std::vector<Range>{{0, P}, {3 * P, 4 * P}}));
  EXPECT_TRUE(c.uncovered(P, 3 * P).empty());
  c.add(2 * P, 5 * P);  // overlaps the tail
  EXPECT_EQ(c.count_at(P), 1u);
  EXPECT_EQ(c.count_at(2 * P), 2u);
  EXPECT_EQ(c.count_at(4 * P), 1u);
  EXPECT_EQ(c.count_at(5 * P), 0u);
  EXPECT_EQ(c.all(), (std::vector<Range>{{P, 5 * P}}));
  // Removing the first registration frees only [P, 2P).
  EXPECT_EQ(c.remove(P, 3 * P), (std::vector<Range>{{P, 2 * P}}));
  EXPECT_EQ(c.count_at(2 * P), 1u);
  EXPECT_EQ(c.uncovered(0, 6 * P), (std::vector<Range>{{0, 2 * P}, {5 * P, 6 * P}}));
  EXPECT_EQ(c.remove(2 * P, 5 * P), (std::vector<Range>{{2 * P, 5 * P}}));
  EXPECT_TRUE(c.empty());
}

TEST(PageCounts, SameRangeTwiceAndContained) {
  PageCounts c;
  c.add(0, 8 * P);
  c.add(0, 8 * P);
  c.add(2 * P, 3 * P);
  EXPECT_TRUE(c.remove(0, 8 * P).empty());
  EXPECT_EQ(c.count_at(2 * P), 2u);
  EXPECT_EQ(c.remove(0, 8 * P), (std::vector<Range>{{0, 2 * P}, {3 * P, 8 * P}}));
  EXPECT_EQ(c.remove(2 * P, 3 * P), (std::vector<Range>{{2 * P, 3 * P}}));
  EXPECT_TRUE(c.empty());
}

TEST(PageCounts, AdjacentRangesMergeInAll) {
  PageCounts c;
  c.add(0, P);
  c.add(P, 2 * P);
  c.add(4 * P, 5 * P);
  EXPECT_EQ(c.all(), (std::vector<Range>{{0, 2 * P}, {4 * P, 5 * P}}));
  EXPECT_EQ(c.uncovered(0, 5 * P), (std::vector<Range>{{2 * P, 4 * P}}));
}

TEST(MapsLine, Parses) {
  MapsEntry e;
  ASSERT_TRUE(
      parse_maps_line("7f9ce5337000-7f9ce5347000 rw-s 7f9ce5337000 00:01 9203        "
                      "/memfd:uroce-verbs-mr (deleted)",
                      &e));
  EXPECT_EQ(e.start, 0x7f9ce5337000u);
  EXPECT_EQ(e.end, 0x7f9ce5347000u);
  EXPECT_EQ(e.offset, 0x7f9ce5337000u);
  EXPECT_TRUE(e.r && e.w && !e.x && e.shared);
  EXPECT_EQ(e.path, "/memfd:uroce-verbs-mr (deleted)");
  ASSERT_TRUE(parse_maps_line("00400000-00401000 r-xp 00000000 08:01 12 ", &e));
  EXPECT_TRUE(e.x && !e.shared && e.path.empty());
  EXPECT_FALSE(parse_maps_line("zzz", &e));
  EXPECT_FALSE(parse_maps_line("1000-2000 rw-q 0 0:0 0", &e));
}

// The /proc/self/maps line covering addr.
std::string maps_line(const void *addr) {
  std::ifstream in("/proc/self/maps");
  std::string line;
  const uint64_t a = reinterpret_cast<uintptr_t>(addr);
  while (std::getline(in, line)) {
    MapsEntry e;
    if (parse_maps_line(line, &e) && e.start <= a && a < e.end) return line;
  }
  return "";
}

bool shared_with_memfd(const void *addr) {
  return maps_line(addr).find("memfd:uroce-verbs-mr") != std::string::npos;
}

// Reads the memfd at offset `va` (what uroced sees) through a mapping of our own.
struct FdView {
  void *m = MAP_FAILED;
  size_t n = 0;
  FdView(int fd, uint64_t va, size_t len) {
    const uint64_t s = va & ~(P - 1);
    n = ((va + len + P - 1) & ~(P - 1)) - s;
    m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(s));
    off = va - s;
  }
  ~FdView() {
    if (m != MAP_FAILED) munmap(m, n);
  }
  uint8_t *at() { return static_cast<uint8_t *>(m) + off; }
  uint64_t off = 0;
};

TEST(Remapper, UnalignedOverlappingAndRestore) {
  Remapper &r = Remapper::get();
  ASSERT_TRUE(r.idle());
  const size_t len = 5 * P;
  auto *area = static_cast<uint8_t *>(
      mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(area, MAP_FAILED);
  for (size_t i = 0; i < len; ++i)
    area[i] = static_cast<uint8_t>(i * 7);
  // Unaligned buffer: [P + 100, 3P + 50)
  uint8_t *buf = area + P + 100;
  int fd = -1;
  uint64_t ps = 0, pe = 0;
  ASSERT_EQ(r.acquire(reinterpret_cast<uintptr_t>(buf), 2 * P - 50, &fd, &ps, &pe), 0);
  EXPECT_EQ(ps, reinterpret_cast<uintptr_t>(area) + P);
  EXPECT_EQ(pe, reinterpret_cast<uintptr_t>(area) + 4 * P);
  EXPECT_TRUE(shared_with_memfd(buf)) << maps_line(buf);
  EXPECT_FALSE(shared_with_memfd(area)) << "page before the range stays private";
  EXPECT_FALSE(shared_with_memfd(area + 4 * P));
  for (size_t i = 0; i < len; ++i)
    ASSERT_EQ(area[i], static_cast<uint8_t>(i * 7)) << "contents kept at " << i;
  {
    FdView v(fd, reinterpret_cast<uintptr_t>(buf), 16);
    ASSERT_NE(v.m, MAP_FAILED);
    EXPECT_EQ(v.at()[0], buf[0]);
    v.at()[1] = 0xAB;  // what the daemon writes, the app sees
    EXPECT_EQ(buf[1], 0xAB);
    buf[2] = 0xCD;  // and the other way
    EXPECT_EQ(v.at()[2], 0xCD);
  }
  // A second, overlapping registration that extends the range by one page on each side.
  int fd2 = -1;
  uint64_t ps2 = 0, pe2 = 0;
  ASSERT_EQ(r.acquire(reinterpret_cast<uintptr_t>(area), len, &fd2, &ps2, &pe2), 0);
  EXPECT_EQ(fd2, fd);
  EXPECT_TRUE(shared_with_memfd(area));
  EXPECT_TRUE(shared_with_memfd(area + 4 * P));
  EXPECT_EQ(buf[1], 0xAB) << "the pages shared earlier are the same pages";
  // Release the first: everything stays shared (the second covers it).
  r.release(ps, pe);
  EXPECT_TRUE(shared_with_memfd(buf));
  // Release the second: private again, contents kept, the memfd no longer aliases it.
  r.release(ps2, pe2);
  EXPECT_TRUE(r.idle());
  EXPECT_FALSE(shared_with_memfd(buf)) << maps_line(buf);
  EXPECT_EQ(buf[1], 0xAB);
  EXPECT_EQ(buf[2], 0xCD);
  EXPECT_EQ(area[0], 0);
  EXPECT_EQ(area[len - 1], static_cast<uint8_t>((len - 1) * 7));
  {
    FdView v(fd, reinterpret_cast<uintptr_t>(buf), 16);
    ASSERT_NE(v.m, MAP_FAILED);
    v.at()[1] = 0x11;  // the block was punched out; nothing reaches the app any more
    EXPECT_EQ(buf[1], 0xAB);
  }
  munmap(area, len);
}

TEST(Remapper, ProtectionsKept) {
  Remapper &r = Remapper::get();
  auto *p = static_cast<uint8_t *>(
      mmap(nullptr, 2 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  p[0] = 42;
  ASSERT_EQ(mprotect(p, 2 * P, PROT_READ), 0);
  int fd;
  uint64_t ps, pe;
  ASSERT_EQ(r.acquire(reinterpret_cast<uintptr_t>(p), 2 * P, &fd, &ps, &pe), 0);
  EXPECT_NE(maps_line(p).find(" r--s "), std::string::npos) << maps_line(p);
  EXPECT_EQ(p[0], 42);
  r.release(ps, pe);
  EXPECT_NE(maps_line(p).find(" r--p "), std::string::npos) << maps_line(p);
  EXPECT_EQ(p[0], 42);
  munmap(p, 2 * P);
}

TEST(Remapper, RefusesWhatCannotBeShared) {
  Remapper &r = Remapper::get();
  int fd;
  uint64_t ps, pe;
  // Shared anonymous memory (e.g. shared with a forked child): EOPNOTSUPP, untouched.
  void *sh = mmap(nullptr, P, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(sh, MAP_FAILED);
  EXPECT_EQ(r.acquire(reinterpret_cast<uintptr_t>(sh), 100, &fd, &ps, &pe), EOPNOTSUPP);
  EXPECT_FALSE(shared_with_memfd(sh));
  munmap(sh, P);
  // A shared file mapping: writes must reach the file, so it cannot be remapped.
  char path[] = "/tmp/uroce-mrmap-XXXXXX";
  const int f = mkstemp(path);
  ASSERT_GE(f, 0);
  ASSERT_EQ(ftruncate(f, P), 0);
  void *fm = mmap(nullptr, P, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
  ASSERT_NE(fm, MAP_FAILED);
  EXPECT_EQ(r.acquire(reinterpret_cast<uintptr_t>(fm), P, &fd, &ps, &pe), EOPNOTSUPP);
  munmap(fm, P);
  close(f);
  unlink(path);
  // Unmapped and unreadable memory: EFAULT.
  auto *g = static_cast<uint8_t *>(
      mmap(nullptr, 3 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(g, MAP_FAILED);
  ASSERT_EQ(munmap(g + P, P), 0);
  EXPECT_EQ(r.acquire(reinterpret_cast<uintptr_t>(g), 3 * P, &fd, &ps, &pe), EFAULT);
  EXPECT_FALSE(shared_with_memfd(g)) << "nothing remapped when a later page fails";
  ASSERT_EQ(mprotect(g + 2 * P, P, PROT_NONE), 0);
  EXPECT_EQ(r.acquire(reinterpret_cast<uintptr_t>(g + 2 * P), 10, &fd, &ps, &pe), EFAULT);
  munmap(g, 3 * P);
  // Bad ranges.
  EXPECT_EQ(r.acquire(0x10000, 0, &fd, &ps, &pe), EINVAL);
  EXPECT_EQ(r.acquire(~uint64_t{0} - 10, 100, &fd, &ps, &pe), EINVAL);
  EXPECT_TRUE(r.idle());
}

TEST(Remapper, HeapBufferAndForkedChildGetsPrivateCopy) {
  Remapper &r = Remapper::get();
  const size_t n = 3 * P + 123;
  auto *buf = static_cast<uint8_t *>(std::malloc(n));  // heap: neighbours share the pages
  ASSERT_NE(buf, nullptr);
  std::memset(buf, 0x5A, n);
  int fd;
  uint64_t ps, pe;
  ASSERT_EQ(r.acquire(reinterpret_cast<uintptr_t>(buf), n, &fd, &ps, &pe), 0);
  EXPECT_TRUE(shared_with_memfd(buf));
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: private pages, writes invisible to the parent.
    const bool priv = !shared_with_memfd(buf) && buf[0] == 0x5A;
    std::memset(buf, 0x77, n);
    _exit(priv ? 0 : 1);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child did not get private copies";
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(buf[i], 0x5A) << "the child's write reached the parent at " << i;
  r.release(ps, pe);
  EXPECT_FALSE(shared_with_memfd(buf));
  std::free(buf);
  EXPECT_TRUE(r.idle());
}

}  // namespace
}  // namespace uroce::verbs
