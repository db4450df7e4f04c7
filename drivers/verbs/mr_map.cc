// SPDX-License-Identifier: BSD-3-Clause
#include "mr_map.h"

#include "sys_mem.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

namespace uroce::verbs {

namespace {

// Copies whole pages. The pages of a registration hold more than the app's buffer (heap
// neighbours, allocator metadata): copying them all is the point of remapping in place, but an
// AddressSanitizer build would flag the bytes in its redzones, so there the copy is a plain
// word loop that ASan does not instrument (volatile: the compiler cannot turn it into a
// memcpy call, which ASan intercepts). Both addresses and n are page-aligned.
#if defined(__SANITIZE_ADDRESS__)
__attribute__((no_sanitize("address"))) void copy_pages(void *dst, const void *src, size_t n) {
  auto *d = static_cast<volatile uint64_t *>(dst);
  auto *s = static_cast<const volatile uint64_t *>(src);
  for (size_t i = 0; i < n / sizeof(uint64_t); ++i)
    d[i] = s[i];
}
#else
void copy_pages(void *dst, const void *src, size_t n) {
  std::memcpy(dst, src, n);
}
#endif

constexpr uint64_t kPage = 4096;
// File offset = virtual address: x86-64 (4-level paging) and AArch64 (48-bit) user space ends
// below 2^47 / 2^48; mappings above kMemfdSize are refused with EINVAL.
constexpr uint64_t kMemfdSize = uint64_t{1} << 47;
constexpr const char *kMemfdName = "uroce-verbs-mr";

std::string read_maps() {
  std::string out;
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

bool parse_hex(std::string_view &s, uint64_t *v) {
  uint64_t x = 0;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else
      break;
    if (x >> 60) return false;
    x = x << 4 | static_cast<uint64_t>(d);
  }
  if (i == 0) return false;
  s.remove_prefix(i);
  *v = x;
  return true;
}

template <class F>
void for_each_line(const std::string &maps, F &&f) {
  std::string_view all(maps);
  while (!all.empty()) {
    const size_t nl = all.find('\n');
    const std::string_view line = all.substr(0, nl);
    all.remove_prefix(nl == std::string_view::npos ? all.size() : nl + 1);
    MapsEntry e;
    if (parse_maps_line(line, &e) && !f(e)) return;
  }
}

int prot_of(const MapsEntry &e) {
  return (e.r ? PROT_READ : 0) | (e.w ? PROT_WRITE : 0) | (e.x ? PROT_EXEC : 0);
}

bool is_ours(const MapsEntry &e) {
  return e.shared && e.path.substr(0, 7) == "/memfd:" &&
         e.path.substr(7, std::strlen(kMemfdName)) == kMemfdName && e.offset == e.start;
}

struct Piece {
  uint64_t start, end;
  int prot;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// PageCounts
// ---------------------------------------------------------------------------------------------
void PageCounts::split_at(uint64_t x) {
  auto it = segs_.upper_bound(x);
  if (it == segs_.begin()) return;
  --it;
  if (it->first < x && x < it->second.end) {
    const Seg tail{it->second.end, it->second.count};
    it->second.end = x;
    segs_.emplace(x, tail);
  }
}

void PageCounts::merge_around(uint64_t start, uint64_t end) {
  auto it = segs_.lower_bound(start);
  if (it != segs_.begin()) --it;
  while (it != segs_.end() && it->first <= end) {
    auto nx = std::next(it);
    if (nx != segs_.end() && it->second.end == nx->first && it->second.count == nx->second.count) {
      it->second.end = nx->second.end;
      segs_.erase(nx);
    } else {
      it = nx;
    }
  }
}

std::vector<Range> PageCounts::uncovered(uint64_t start, uint64_t end) const {
  std::vector<Range> out;
  uint64_t pos = start;
  auto it = segs_.upper_bound(start);
  if (it != segs_.begin()) {
    auto pv = std::prev(it);
    if (pv->second.end > pos) pos = pv->second.end;
  }
  for (; it != segs_.end() && it->first < end && pos < end; ++it) {
    if (it->first > pos) out.push_back({pos, it->first});
    if (it->second.end > pos) pos = it->second.end;
  }
  if (pos < end) out.push_back({pos, end});
  return out;
}

void PageCounts::add(uint64_t start, uint64_t end) {
  if (start >= end) return;
  const std::vector<Range> gaps = uncovered(start, end);
  split_at(start);
  split_at(end);
  for (auto it = segs_.lower_bound(start); it != segs_.end() && it->first < end; ++it)
    ++it->second.count;
  for (const Range &g : gaps)
    segs_.emplace(g.start, Seg{g.end, 1});
  merge_around(start, end);
}

std::vector<Range> PageCounts::remove(uint64_t start, uint64_t end) {
  std::vector<Range> freed;
  if (start >= end) return freed;
  split_at(start);
  split_at(end);
  for (auto it = segs_.lower_bound(start); it != segs_.end() && it->first < end;) {
    if (--it->second.count == 0) {
      if (!freed.empty() && freed.back().end == it->first)
        freed.back().end = it->second.end;
      else
        freed.push_back({it->first, it->second.end});
      it = segs_.erase(it);
    } else {
      ++it;
    }
  }
  merge_around(start, end);
  return freed;
}

std::vector<Range> PageCounts::all() const {
  std::vector<Range> out;
  for (const auto &[s, g] : segs_) {
    if (!out.empty() && out.back().end == s)
      out.back().end = g.end;
    else
      out.push_back({s, g.end});
  }
  return out;
}

uint32_t PageCounts::count_at(uint64_t addr) const {
  auto it = segs_.upper_bound(addr);
  if (it == segs_.begin()) return 0;
  --it;
  return addr < it->second.end ? it->second.count : 0;
}

// ---------------------------------------------------------------------------------------------
// /proc/self/maps: "start-end perms offset dev inode   path"
// ---------------------------------------------------------------------------------------------
bool parse_maps_line(std::string_view s, MapsEntry *e) {
  if (!parse_hex(s, &e->start) || s.empty() || s[0] != '-') return false;
  s.remove_prefix(1);
  if (!parse_hex(s, &e->end) || s.size() < 6 || s[0] != ' ') return false;
  e->r = s[1] == 'r';
  e->w = s[2] == 'w';
  e->x = s[3] == 'x';
  if (s[4] != 's' && s[4] != 'p') return false;
  e->shared = s[4] == 's';
  s.remove_prefix(5);
  if (s.empty() || s[0] != ' ') return false;
  s.remove_prefix(1);
  if (!parse_hex(s, &e->offset)) return false;
  // dev, inode, then the optional path after spaces
  for (int field = 0; field < 2; ++field) {
    while (!s.empty() && s[0] == ' ')
      s.remove_prefix(1);
    const size_t sp = s.find(' ');
    s.remove_prefix(sp == std::string_view::npos ? s.size() : sp);
  }
  while (!s.empty() && s[0] == ' ')
    s.remove_prefix(1);
  e->path = s;
  return e->start < e->end;
}

// ---------------------------------------------------------------------------------------------
// Remapper
// ---------------------------------------------------------------------------------------------
Remapper &Remapper::get() {
  // Not on the heap (the fork handler reads it before the heap is safe to use in the child) and
  // never destroyed (MRs may be deregistered after static destructors ran).
  alignas(Remapper) static unsigned char storage[sizeof(Remapper)];
  static Remapper *r = [] {
    auto *x = new (storage) Remapper();
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    return x;
  }();
  return *r;
}

void Remapper::atfork_prepare() {
  get().mu_.lock();
}
void Remapper::atfork_parent() {
  get().mu_.unlock();
}

// Registered pages are MADV_DONTFORK: a child starts with holes there (so nothing in the child
// can write to the parent's pages, and a touch before this handler runs faults instead of
// corrupting the parent), and this handler fills them with private copies read from the memfd,
// which is what fork gives for ordinary memory. It uses no heap until those pages are back
// (the heap itself may have registered pages); the range list lives in mmap'ed memory.
void Remapper::atfork_child() {
  Remapper &m = get();
  for (size_t i = 0; i < m.snap_n_; ++i) {
    const Range r = m.snap_[i];
    const size_t n = r.end - r.start;
    void *want = reinterpret_cast<void *>(r.start);
    void *p = sys::mmap(want, n, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != want) {  // something else is mapped there now (the app unmapped a registered range)
      if (p != MAP_FAILED) sys::munmap(p, n);
      continue;
    }
    void *src = sys::mmap(nullptr, n, PROT_READ, MAP_SHARED, m.fd_, static_cast<off_t>(r.start));
    if (src != MAP_FAILED) {
      copy_pages(p, src, n);
      sys::munmap(src, n);
    }
  }
  m.snap_n_ = 0;
  m.counts_.clear();
  if (m.fd_ >= 0) ::close(m.fd_);
  m.fd_ = -1;  // the child's own registrations, if any, get a memfd of their own
  m.mu_.unlock();
}

// Keeps snap_ (mmap'ed, not heap) equal to counts_.all(), for the fork handler.
void Remapper::update_snapshot() {
  const std::vector<Range> all = counts_.all();
  if (all.size() > snap_cap_) {
    size_t cap = snap_cap_ ? snap_cap_ : 256;
    while (cap < all.size())
      cap *= 2;
    void *p = sys::mmap(nullptr, cap * sizeof(Range), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;  // keep the old (shorter) list: those ranges still get copied
    if (snap_) sys::munmap(snap_, snap_cap_ * sizeof(Range));
    snap_ = static_cast<Range *>(p);
    snap_cap_ = cap;
  }
  for (size_t i = 0; i < all.size(); ++i)
    snap_[i] = all[i];
  snap_n_ = all.size();
}

namespace {
// Registered as early as possible (at library load), so the child handler runs before any
// handler registered later by the app.
__attribute__((constructor)) void register_fork_handlers() {
  Remapper::get();
}
}  // namespace

int Remapper::ensure_memfd() {
  if (fd_ >= 0) return 0;
  const int fd = sys::memfd_create(kMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return errno;
  if (sys::ftruncate(fd, static_cast<off_t>(kMemfdSize)) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    const int e = errno;
    ::close(fd);
    return e;
  }
  fd_ = fd;
  return 0;
}

bool Remapper::idle() {
  std::lock_guard<std::mutex> g(mu_);
  return counts_.empty();
}

int Remapper::acquire(uint64_t addr, uint64_t len, int *fd, uint64_t *ps, uint64_t *pe) {
  if (len == 0 || addr + len < addr) return EINVAL;
  const uint64_t s = addr & ~(kPage - 1);
  const uint64_t e = (addr + len + kPage - 1) & ~(kPage - 1);
  if (e > kMemfdSize || e < s) return EINVAL;
  std::lock_guard<std::mutex> g(mu_);
  int rc = ensure_memfd();
  if (rc) return rc;
  const std::vector<Range> gaps = counts_.uncovered(s, e);
  std::vector<std::vector<Piece>> pieces(gaps.size());
  if (!gaps.empty()) {
    const std::string maps = read_maps();
    if (maps.empty()) return EFAULT;
    for (size_t i = 0; i < gaps.size(); ++i) {
      uint64_t pos = gaps[i].start;
      const uint64_t end = gaps[i].end;
      for_each_line(maps, [&](const MapsEntry &m) {
        if (m.end <= pos) return true;
        if (m.start > pos || rc) {  // a hole
          if (!rc) rc = EFAULT;
          return false;
        }
        if (!m.r)
          rc = EFAULT;
        else if (m.shared || m.path == "[vvar]" || m.path == "[vdso]" || m.path == "[vsyscall]")
          rc = EOPNOTSUPP;
        if (rc) return false;
        const uint64_t pend = m.end < end ? m.end : end;
        pieces[i].push_back({pos, pend, prot_of(m)});
        pos = pend;
        return pos < end;
      });
      if (!rc && pos < end) rc = EFAULT;
      if (rc) return rc;
    }
  }
  size_t done = 0;
  for (; done < gaps.size(); ++done) {
    const Range &r = gaps[done];
    const size_t n = r.end - r.start;
    void *tmp =
        sys::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, static_cast<off_t>(r.start));
    if (tmp == MAP_FAILED) {
      rc = errno;
      break;
    }
    copy_pages(tmp, reinterpret_cast<void *>(r.start), n);
    if (sys::mremap(tmp, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void *>(r.start)) ==
        MAP_FAILED) {
      rc = errno;
      sys::munmap(tmp, n);
      sys::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(r.start),
                     static_cast<off_t>(n));
      break;
    }
    for (const Piece &p : pieces[done])
      if (p.prot != (PROT_READ | PROT_WRITE))
        sys::mprotect(reinterpret_cast<void *>(p.start), p.end - p.start, p.prot);
    sys::madvise(reinterpret_cast<void *>(r.start), n, MADV_DONTFORK);  // see atfork_child
  }
  if (rc) {
    for (size_t i = 0; i < done; ++i)
      restore(gaps[i]);
    return rc;
  }
  counts_.add(s, e);
  update_snapshot();
  *fd = fd_;
  *ps = s;
  *pe = e;
  return 0;
}

void Remapper::release(uint64_t ps, uint64_t pe) {
  std::lock_guard<std::mutex> g(mu_);
  for (const Range &r : counts_.remove(ps, pe))
    restore(r);
  update_snapshot();
}

// Copies the pages of r that are still our memfd's (the app may have unmapped or replaced
// some) into private anonymous memory at the same address, with the same protections, then
// frees the memfd blocks.
int Remapper::restore(const Range &r) {
  std::vector<Piece> ours;
  const std::string maps = read_maps();
  for_each_line(maps, [&](const MapsEntry &m) {
    if (m.end <= r.start) return true;
    if (m.start >= r.end) return false;
    if (is_ours(m)) {
      const uint64_t a = m.start > r.start ? m.start : r.start;
      const uint64_t b = m.end < r.end ? m.end : r.end;
      ours.push_back({a, b, prot_of(m)});
    }
    return true;
  });
  int rc = 0;
  for (const Piece &p : ours) {
    const size_t n = p.end - p.start;
    void *tmp = sys::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (tmp == MAP_FAILED) {
      rc = errno;
      continue;  // the pages stay shared (still correct for the app, just not private)
    }
    if (p.prot & PROT_READ) {
      copy_pages(tmp, reinterpret_cast<void *>(p.start), n);
    } else {
      // Unreadable now (the app mprotect'ed it): read through a temporary view of the memfd.
      void *v = fd_ >= 0
                    ? sys::mmap(nullptr, n, PROT_READ, MAP_SHARED, fd_, static_cast<off_t>(p.start))
                    : MAP_FAILED;
      if (v == MAP_FAILED) {
        sys::munmap(tmp, n);
        rc = EFAULT;
        continue;
      }
      copy_pages(tmp, v, n);
      sys::munmap(v, n);
    }
    if (sys::mremap(tmp, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void *>(p.start)) ==
        MAP_FAILED) {
      rc = errno;
      sys::munmap(tmp, n);
      continue;
    }
    if (p.prot != (PROT_READ | PROT_WRITE))
      sys::mprotect(reinterpret_cast<void *>(p.start), n, p.prot);
    // only pages that are private again: the others are still the app's memory
    sys::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(p.start),
                   static_cast<off_t>(n));
  }
  // Blocks whose pages the app unmapped meanwhile are nobody's: free them too (unless some page
  // could not be made private, then those stay and the rest were freed above).
  if (rc == 0)
    sys::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(r.start),
                   static_cast<off_t>(r.end - r.start));
  return rc;
}

}  // namespace uroce::verbs
