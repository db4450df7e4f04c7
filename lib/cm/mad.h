// SPDX-License-Identifier: BSD-3-Clause
// Management datagrams (IBTA 13.4): the 24-byte common MAD header and the constants of the
// communication manager's class, as carried in UD SENDs to QP 1 (the GSI) on RoCE v2.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uroce::cm {

inline constexpr size_t kMadSize = 256;       // every CM MAD, header included
inline constexpr size_t kMadHeaderSize = 24;  // the common header
inline constexpr uint32_t kGsiQpn = 1;
inline constexpr uint32_t kGsiQkey = 0x80010000;
inline constexpr uint16_t kDefaultPkey = 0xFFFF;

inline constexpr uint8_t kBaseVersion = 1;
inline constexpr uint8_t kCmClass = 0x07;  // communication management
inline constexpr uint8_t kCmClassVersion = 2;
inline constexpr uint8_t kMethodSend = 0x03;

enum class AttrId : uint16_t {
  kClassPortInfo = 0x0001,
  kReq = 0x0010,
  kMra = 0x0011,
  kRej = 0x0012,
  kRep = 0x0013,
  kRtu = 0x0014,
  kDreq = 0x0015,
  kDrep = 0x0016,
  kSidrReq = 0x0017,
  kSidrRep = 0x0018,
  kLap = 0x0019,
  kApr = 0x001A,
};
const char *attr_name(uint16_t attr) noexcept;  // "REQ", ..., "?" for an unknown id

struct MadHeader {
  uint8_t base_version = kBaseVersion;
  uint8_t mgmt_class = kCmClass;
  uint8_t class_version = kCmClassVersion;
  uint8_t method = kMethodSend;
  uint16_t status = 0;
  uint16_t class_specific = 0;
  uint64_t tid = 0;  // transaction id: a response echoes its request's
  uint16_t attr_id = 0;
  uint32_t attr_mod = 0;
};

void write_header(const MadHeader &h, uint8_t *mad) noexcept;  // mad: kMadHeaderSize bytes
MadHeader read_header(const uint8_t *mad) noexcept;

}  // namespace uroce::cm
