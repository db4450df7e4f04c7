// SPDX-License-Identifier: BSD-3-Clause
// The communication manager's messages (IBTA 12.6, Tables 106-120): REQ, MRA, REJ, REP, RTU,
// DREQ, DREP, SIDR_REQ, SIDR_REP as plain structs, encoded into and decoded from 256-byte MADs.
// Decoding checks the structure only (MAD header, lengths, reserved bits are ignored as the
// spec says receivers must); what the values mean is the connection manager's to judge.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <variant>

#include "cm/mad.h"
#include "wire/gid.h"

namespace uroce::cm {

inline constexpr size_t kReqPrivate = 92, kMraPrivate = 222, kRejPrivate = 148, kRejAri = 72,
                        kRepPrivate = 196, kRtuPrivate = 224, kDreqPrivate = 220,
                        kDrepPrivate = 224, kSidrReqPrivate = 216, kSidrRepPrivate = 136,
                        kSidrRepInfo = 72;

// Transport service types in REQ (Table 106).
enum class Transport : uint8_t { kRc = 0, kUc = 1, kRd = 2 };

// One path of a REQ (primary or alternate). On RoCE the LIDs are 0xFFFF (permissive) and the
// GIDs are the RoCE v2 GIDs of both ends.
struct Path {
  uint16_t local_lid = 0xFFFF;
  uint16_t remote_lid = 0xFFFF;
  wire::Gid local_gid;
  wire::Gid remote_gid;
  uint32_t flow_label = 0;  // 20 bits
  uint8_t packet_rate = 0;  // 6 bits, IBTA rate encoding
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint8_t sl = 0;  // 4 bits
  bool subnet_local = false;
  uint8_t local_ack_timeout = 0;  // 5 bits: 4.096 us x 2^n
};

struct Req {
  uint32_t local_comm_id = 0;
  uint64_t service_id = 0;
  uint64_t local_ca_guid = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;  // 24 bits
  uint8_t responder_resources = 0;
  uint32_t local_eecn = 0;
  uint8_t initiator_depth = 0;
  uint32_t remote_eecn = 0;
  uint8_t remote_cm_response_timeout = 0;  // 5 bits
  Transport transport = Transport::kRc;    // 2 bits (3 is reserved: decoded as is)
  bool e2e_flow_control = false;
  uint32_t starting_psn = 0;              // 24 bits
  uint8_t local_cm_response_timeout = 0;  // 5 bits
  uint8_t retry_count = 0;                // 3 bits
  uint16_t pkey = kDefaultPkey;
  uint8_t path_mtu = 0;  // 4 bits, IBTA MTU enum (1 = 256 ... 5 = 4096)
  bool rdc_exists = false;
  uint8_t rnr_retry_count = 0;  // 3 bits
  uint8_t max_cm_retries = 0;   // 4 bits
  bool srq = false;
  uint8_t extended_transport = 0;  // 3 bits (XRC)
  Path primary;
  Path alternate{0, 0};  // LIDs 0 (Linux's ib_cm reads a non-zero LID as an alternate path)
  bool sap_supported = false;
  std::array<uint8_t, kReqPrivate> private_data{};
};

struct Mra {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint8_t message_mraed = 0;    // 2 bits: 0 REQ, 1 REP, 2 LAP
  uint8_t service_timeout = 0;  // 5 bits
  std::array<uint8_t, kMraPrivate> private_data{};
};

struct Rej {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint8_t message_rejected = 0;  // 2 bits: 0 REQ, 1 REP, 2 other
  uint8_t ari_length = 0;        // 7 bits, at most kRejAri
  uint16_t reason = 0;
  std::array<uint8_t, kRejAri> ari{};
  std::array<uint8_t, kRejPrivate> private_data{};
};

struct Rep {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;   // 24 bits
  uint32_t local_eecn = 0;  // 24 bits
  uint32_t starting_psn = 0;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t target_ack_delay = 0;   // 5 bits
  uint8_t failover_accepted = 0;  // 2 bits
  bool e2e_flow_control = false;
  uint8_t rnr_retry_count = 0;  // 3 bits
  bool srq = false;
  uint64_t local_ca_guid = 0;
  std::array<uint8_t, kRepPrivate> private_data{};
};

struct Rtu {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kRtuPrivate> private_data{};
};

struct Dreq {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t remote_qpn = 0;  // 24 bits
  std::array<uint8_t, kDreqPrivate> private_data{};
};

struct Drep {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kDrepPrivate> private_data{};
};

struct SidrReq {
  uint32_t request_id = 0;
  uint16_t pkey = kDefaultPkey;
  uint64_t service_id = 0;
  std::array<uint8_t, kSidrReqPrivate> private_data{};
};

struct SidrRep {
  uint32_t request_id = 0;
  uint8_t status = 0;
  uint8_t info_length = 0;  // at most kSidrRepInfo
  uint32_t qpn = 0;         // 24 bits
  uint64_t service_id = 0;
  uint32_t qkey = 0;
  std::array<uint8_t, kSidrRepInfo> info{};
  std::array<uint8_t, kSidrRepPrivate> private_data{};
};

using Message = std::variant<Req, Mra, Rej, Rep, Rtu, Dreq, Drep, SidrReq, SidrRep>;

// The attribute id each message is sent with.
AttrId attr_of(const Message &m) noexcept;

// Writes `m` as a whole MAD (header with `tid`, method Send) into mad[kMadSize].
void encode(const Message &m, uint64_t tid, uint8_t *mad) noexcept;

enum class DecodeError : uint8_t {
  kOk = 0,
  kShort,            // fewer than kMadSize bytes
  kBadBaseVersion,   // not 1
  kNotCm,            // management class other than 0x07
  kBadClassVersion,  // CM class version other than 2 (REJ reason 31 for a REQ)
  kBadMethod,        // not Send
  kBadStatus,        // non-zero MAD status
  kBadAttr,          // an attribute uroce does not handle (LAP, APR, ClassPortInfo, unknown)
  kBadLength,        // a length field beyond its array (REJ ARI, SIDR_REP additional info)
};
const char *decode_error_str(DecodeError e) noexcept;

// Reads a CM MAD. `len` is the UD payload's length (extra bytes after the MAD are ignored).
DecodeError decode(const uint8_t *mad, size_t len, MadHeader *hdr, Message *out) noexcept;

}  // namespace uroce::cm
