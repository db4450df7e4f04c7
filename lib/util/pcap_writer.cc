// SPDX-License-Identifier: BSD-3-Clause
#include "util/pcap_writer.h"

namespace uroce::util {

namespace {
constexpr uint32_t kMagicNs = 0xA1B23C4D;  // nanosecond-resolution pcap, host byte order
constexpr uint32_t kLinkTypeEthernet = 1;

struct GlobalHeader {
  uint32_t magic;
  uint16_t major, minor;
  int32_t thiszone;
  uint32_t sigfigs, snaplen, network;
};
struct RecordHeader {
  uint32_t ts_sec, ts_nsec, incl_len, orig_len;
};
static_assert(sizeof(GlobalHeader) == 24 && sizeof(RecordHeader) == 16);
}  // namespace

bool PcapWriter::open(const char *path, uint32_t snaplen) noexcept {
  close();
  f_ = std::fopen(path, "wb");
  if (f_ == nullptr) return false;
  snaplen_ = snaplen;
  frames_ = 0;
  ok_ = true;
  const GlobalHeader h{kMagicNs, 2, 4, 0, 0, snaplen, kLinkTypeEthernet};
  ok_ = std::fwrite(&h, sizeof h, 1, f_) == 1;
  return ok_;
}

bool PcapWriter::write(const uint8_t *frame, size_t len, uint64_t ts_ns) noexcept {
  if (f_ == nullptr) return false;
  const uint32_t incl = len > snaplen_ ? snaplen_ : static_cast<uint32_t>(len);
  const RecordHeader r{static_cast<uint32_t>(ts_ns / 1000000000u),
                       static_cast<uint32_t>(ts_ns % 1000000000u), incl,
                       static_cast<uint32_t>(len)};
  const bool w = std::fwrite(&r, sizeof r, 1, f_) == 1 && std::fwrite(frame, 1, incl, f_) == incl;
  ok_ = ok_ && w;
  frames_ += w ? 1 : 0;
  return w;
}

bool PcapWriter::close() noexcept {
  if (f_ == nullptr) return ok_;
  ok_ = (std::fclose(f_) == 0) && ok_;
  f_ = nullptr;
  return ok_;
}

}  // namespace uroce::util
