// SPDX-License-Identifier: BSD-3-Clause
// What engine_rx_fuzz sets up and how its input is laid out, shared with its seed generator.
//
// The engine under test (MAC kEngMac, GID 10.0.0.1) talks to a peer (kPeerMac, 10.0.0.2) that
// the fuzzer plays. Its QPs, in order (QPNs: kQpnBase's prefix | random low bits, seed 1):
//   0 RC RTS, own RQ, requester with SEND, WRITE (2 packets), SEND_WITH_IMM, CMP_SWP outstanding
//   1 RC RTS on the SRQ, requester with a READ (2 response packets) and a FETCH_ADD outstanding
//   2 UC RTS, own RQ, one SEND sent
//   3 UD RTS (Q_Key kUdQkey), own RQ, one SEND sent
//   4 RC RTR (receives, no requester), no receive WQEs (RNR NAKs)
//   5 RC INIT (drops everything)
//   6 RC ERR (was RTS, receives flushed)
// Peer QPNs: kPeerQpnBase + index. Path MTU 1024.
//
// Input: one global byte (bit 0: the port refuses every third TX buffer), then records:
//   mode u8, qp_sel u8, psn_delta i8, mr_sel u8, va_off u16, tick u8, len u16, len frame bytes
// Mode bits, applied in this order before the frame is handed to Engine::rx:
//   0 set the IP and UDP length fields to the frame's length
//   1 dest QPN := QPN of QP (qp_sel % 8) (index 7: a QPN that does not exist)
//   2 PSN := the QP's expected PSN (requests) or next request PSN (responses) + psn_delta
//   3 RETH / AtomicETH: rkey := key of MR (mr_sel % kNumMrs), VA := its VA + va_off - 64
//   4 recompute the IPv4 header checksum
//   5 zero the UDP checksum and rewrite the ICRC
//   6 before the frame: advance the fake clock by 2^(tick % 28) ns and poll the engine
//   7 after the frame: poll the engine
// A record with len 0 only advances / polls. At the end the engine is polled with the clock
// moved to each next timer, a bounded number of times, so retries and timeouts run out.
#pragma once

#include <cstdint>

namespace uroce::fuzz::engine_rx {

inline constexpr uint8_t kEngMac[6] = {0x02, 0, 0, 0, 0, 0x01};
inline constexpr uint8_t kPeerMac[6] = {0x02, 0, 0, 0, 0, 0x02};
inline constexpr uint8_t kEngIp[4] = {10, 0, 0, 1};
inline constexpr uint8_t kPeerIp[4] = {10, 0, 0, 2};
inline constexpr uint32_t kQpnBase = 0x11;
inline constexpr uint32_t kPeerQpnBase = 0x100;
inline constexpr uint32_t kNumQps = 7;
inline constexpr uint32_t kUdQkey = 0x11111111;
inline constexpr uint32_t kSqPsn = 0x100;     // the engine's first request PSN (every QP)
inline constexpr uint32_t kRqPsn = 0xFFFFF0;  // the PSN the engine expects first (wraps soon)
inline constexpr uint32_t kMtu = 1024;

// MRs (index: VA, bytes, access): each is an exact-size heap allocation, so an access past
// its end is an ASan report.
//   0 0x10000  4096  local write, remote write / read / atomic
//   1 0x20000   256  remote read only
//   2 0x30000     8  remote write / atomic (one atomic word, nothing around it)
//   3 0x40000   100  local write only (receive buffers)
inline constexpr uint32_t kNumMrs = 4;
inline constexpr uint64_t kMrVa[kNumMrs] = {0x10000, 0x20000, 0x30000, 0x40000};
inline constexpr uint32_t kMrLen[kNumMrs] = {4096, 256, 8, 100};

inline constexpr size_t kRecordHeader = 10;

enum ModeBit : uint8_t {
  kFixLengths = 1u << 0,
  kSteerQpn = 1u << 1,
  kSteerPsn = 1u << 2,
  kSteerKey = 1u << 3,
  kFixIpCsum = 1u << 4,
  kFixIcrc = 1u << 5,
  kPollBefore = 1u << 6,
  kPollAfter = 1u << 7,
};

}  // namespace uroce::fuzz::engine_rx
