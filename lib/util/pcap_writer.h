// SPDX-License-Identifier: BSD-3-Clause
// A minimal classic-pcap writer (LINKTYPE_ETHERNET, nanosecond timestamps), used by tests, the
// fake link and port capture. Not for the fast path: it does buffered stdio writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace uroce::util {

class PcapWriter {
 public:
  PcapWriter() = default;
  ~PcapWriter() { close(); }
  PcapWriter(const PcapWriter &) = delete;
  PcapWriter &operator=(const PcapWriter &) = delete;

  // Creates (truncates) the file and writes the global header. Returns false on I/O error.
  bool open(const char *path, uint32_t snaplen = 65535) noexcept;
  // Appends one frame stamped with `ts_ns` (any epoch). Frames longer than snaplen are cut.
  bool write(const uint8_t *frame, size_t len, uint64_t ts_ns) noexcept;
  bool is_open() const noexcept { return f_ != nullptr; }
  // Flushes and closes; returns false if any write failed.
  bool close() noexcept;
  uint64_t frames() const noexcept { return frames_; }

 private:
  std::FILE *f_ = nullptr;
  uint32_t snaplen_ = 0;
  uint64_t frames_ = 0;
  bool ok_ = true;
};

}  // namespace uroce::util
