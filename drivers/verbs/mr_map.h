// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: how registered memory is shared with uroced (doc/verbs.md, "Memory regions").
//
// The process has ONE memfd (created at the first registration, 2^47 bytes, sparse, sealed
// against shrinking and growing) in which the page at virtual address V lives at file offset V.
// ibv_reg_mr(addr, len) backs every page of [addr, addr + len) that is not backed yet by that
// memfd, mapped MAP_SHARED at the same address (contents copied, protections kept), and passes
// the memfd with offset = addr to the daemon. Overlapping and repeated registrations therefore
// share pages without any bookkeeping beyond a reference count per page range (PageCounts).
// When the last registration of a page goes, the page becomes private anonymous memory again
// (contents copied) and its memfd block is punched out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string_view>
#include <vector>

namespace uroce::verbs {

struct Range {
  uint64_t start, end;  // [start, end), page-aligned
  bool operator==(const Range &) const = default;
};

// Reference counts over page ranges, as disjoint segments (pure logic, unit-tested).
class PageCounts {
 public:
  // The parts of [start, end) whose count is 0 (in address order).
  std::vector<Range> uncovered(uint64_t start, uint64_t end) const;
  // Adds 1 to every page of [start, end).
  void add(uint64_t start, uint64_t end);
  // Subtracts 1 from every page of [start, end) (each must be >= 1); returns the ranges that
  // dropped to 0, merged, in address order.
  std::vector<Range> remove(uint64_t start, uint64_t end);
  // Every range with a count > 0 (merged), for fork handling.
  std::vector<Range> all() const;
  uint32_t count_at(uint64_t addr) const;
  bool empty() const { return segs_.empty(); }
  void clear() { segs_.clear(); }

 private:
  struct Seg {
    uint64_t end;
    uint32_t count;
  };
  void split_at(uint64_t x);
  void merge_around(uint64_t start, uint64_t end);
  std::map<uint64_t, Seg> segs_;  // start -> segment (count >= 1)
};

// One line of /proc/self/maps (the fields the remapper needs).
struct MapsEntry {
  uint64_t start, end, offset;
  bool r, w, x, shared;
  std::string_view path;
};
// Parses one line; false if malformed.
bool parse_maps_line(std::string_view line, MapsEntry *out);

class Remapper {
 public:
  static Remapper &get();
  // Makes [addr, addr + len) shared with the memfd (see above). Returns 0 or an errno:
  // EFAULT (a page is not mapped or not readable), EOPNOTSUPP (a page belongs to a shared
  // mapping or a special mapping that cannot be remapped), EINVAL (len 0, overflow, above the
  // memfd's 2^47 bytes), or what mmap/mremap report. On success *fd is the memfd (owned by the
  // remapper) and [*ps, *pe) the page range that must be passed to release() later.
  int acquire(uint64_t addr, uint64_t len, int *fd, uint64_t *ps, uint64_t *pe);
  void release(uint64_t ps, uint64_t pe);
  // Number of pages with a reference (tests).
  bool idle();

 private:
  Remapper() = default;
  int ensure_memfd();
  // Back to private anonymous memory, then frees the memfd blocks.
  int restore(const Range &r);
  void update_snapshot();
  static void atfork_prepare();
  static void atfork_parent();
  static void atfork_child();
  std::mutex mu_;
  int fd_ = -1;
  PageCounts counts_;
  // counts_.all() in mmap'ed memory, for the fork child handler (no heap there).
  Range *snap_ = nullptr;
  size_t snap_n_ = 0, snap_cap_ = 0;
};

}  // namespace uroce::verbs
