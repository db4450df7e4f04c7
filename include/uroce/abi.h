// SPDX-License-Identifier: BSD-3-Clause
// The app <-> daemon shared-memory ABI: every byte that lives in memory mapped by both an
// application (through the verbs shim) and uroced. Fixed-width, standard-layout, no pointers,
// every size and offset static_assert'ed so a layout change cannot slip in unnoticed. Bump
// kAbiVersion on any incompatible change; doc/ipc.md describes the layouts and the protocols.
//
// Trust: the app can write any byte of these structures at any time. The daemon keeps its own
// copy of everything it relies on (geometry, its own ring index, descriptor contents) and
// validates the rest (the peer's ring index, WQE fields after copying them out of the slot).
//
// Numeric fields that carry verbs values (opcode, send_flags, wc status/opcode/flags, ...) use
// rdma-core's numeric values (lib/transport/verbs_types.h), passed through unchanged.
// All integers are host byte order except where a field says "__be32 as given by verbs".
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace uroce::abi {

// Major ABI version: an app and a daemon talk only if this matches exactly (the control
// handshake checks it before any region is mapped).
inline constexpr uint32_t kAbiVersion = 2;  // 2: one doorbell ring per (context, worker)

inline constexpr size_t kCacheLine = 64;

// ---------------------------------------------------------------------------------------------
// Ring header. One per ring, at a 64-byte aligned offset; the slots follow at data_offset.
// Line 0 is written once by the creator. Line 1 belongs to the producer, line 2 to the
// consumer, line 3 carries the notification word of the doorbell / CQ-arm protocols. Each side
// writes only its own line, so the index lines never bounce on a store by the other side.
// The index fields are accessed with std::atomic_ref<uint64_t> (8-byte aligned, lock-free).
// ---------------------------------------------------------------------------------------------
inline constexpr uint32_t kRingMagic = 0x55524e47;  // "URNG"
inline constexpr uint16_t kRingVersion = 1;

struct alignas(kCacheLine) RingHeader {
  // line 0: geometry, immutable after creation
  uint32_t magic;        // kRingMagic
  uint16_t version;      // kRingVersion
  uint16_t header_size;  // sizeof(RingHeader)
  uint32_t slot_size;    // bytes per slot, power of two, >= 8
  uint32_t slot_count;   // number of slots, power of two, >= 2
  uint32_t kind;         // RingKind, informational
  uint32_t id;           // QPN / CQN / lcore id, informational
  uint64_t data_offset;  // slots start at (char *)this + data_offset; multiple of 64
  uint8_t reserved0[kCacheLine - 32];
  // line 1: producer
  alignas(kCacheLine) uint64_t prod;  // free-running; slots [cons, prod) hold items
  uint8_t reserved1[kCacheLine - 8];
  // line 2: consumer
  alignas(kCacheLine) uint64_t cons;  // free-running; slots [prod, cons + count) are free
  // Items the consumer has read (>= cons). Informational: a work queue's slots are released
  // (cons) only when their WRs complete, and this says how far the lcore has read meanwhile.
  uint64_t taken;
  uint8_t reserved2[kCacheLine - 16];
  // line 3: notification word (RingNotify values; protocol in ring.h and doc/ipc.md)
  alignas(kCacheLine) uint32_t notify;
  uint8_t reserved3[kCacheLine - 4];
};
static_assert(std::is_standard_layout_v<RingHeader> && std::is_trivially_copyable_v<RingHeader>);
static_assert(sizeof(RingHeader) == 256);
static_assert(offsetof(RingHeader, magic) == 0);
static_assert(offsetof(RingHeader, version) == 4);
static_assert(offsetof(RingHeader, header_size) == 6);
static_assert(offsetof(RingHeader, slot_size) == 8);
static_assert(offsetof(RingHeader, slot_count) == 12);
static_assert(offsetof(RingHeader, kind) == 16);
static_assert(offsetof(RingHeader, id) == 20);
static_assert(offsetof(RingHeader, data_offset) == 24);
static_assert(offsetof(RingHeader, prod) == 64);
static_assert(offsetof(RingHeader, cons) == 128);
static_assert(offsetof(RingHeader, taken) == 136);
static_assert(offsetof(RingHeader, notify) == 192);

// RingHeader::notify values.
//  SQ/RQ ring: kNotifyQueued = "this QP is in the lcore's doorbell ring or on its active list"
//              (set by the app with exchange, cleared by the lcore).
//  CQ ring: kNotifyArmedAll / kNotifyArmedSolicited = "write the CQ's eventfd on the next
//           (solicited or error) completion" (set by the app, swapped back to idle by the lcore).
//  Doorbell ring: kNotifyAsleep = "the consumer lcore is (about to be) blocked: write the
//           context's doorbell eventfd after pushing" (set by the lcore before it sleeps,
//           swapped back to idle by whoever wakes it; doc/ipc.md, Sleeping consumers).
enum RingNotify : uint32_t {
  kNotifyIdle = 0,
  kNotifyQueued = 1,
  kNotifyAsleep = 1,
  kNotifyArmedAll = 1,
  kNotifyArmedSolicited = 2,
};

enum class RingKind : uint32_t {
  kNone = 0,
  kSendQueue = 1,   // app -> lcore, SendWqe slots
  kRecvQueue = 2,   // app -> lcore, RecvWqe slots
  kCompletion = 3,  // lcore -> app, Cqe slots
  kDoorbell = 4,    // app -> lcore, Doorbell slots (one ring per (context, worker); id: worker)
  kSharedRecvQueue = 5,
};

// ---------------------------------------------------------------------------------------------
// Work requests and completions.
// ---------------------------------------------------------------------------------------------
struct Sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};
static_assert(sizeof(Sge) == 16 && offsetof(Sge, addr) == 0 && offsetof(Sge, length) == 8 &&
              offsetof(Sge, lkey) == 12);

// The first 64 bytes of every send slot: everything in ibv_send_wr except the gather list.
struct SendWqeHeader {
  uint64_t wr_id;
  uint8_t opcode;        // ibv_wr_opcode
  uint8_t reserved;      // must be 0
  uint16_t inline_len;   // bytes of inline payload following the header (IBV_SEND_INLINE)
  uint32_t send_flags;   // ibv_send_flags
  uint32_t num_sge;      // SGEs following the header (0 if inline)
  uint32_t imm_data;     // imm_data (__be32 as given by verbs) or invalidate_rkey
  uint64_t remote_addr;  // RDMA / atomic
  uint32_t rkey;         // RDMA / atomic
  uint32_t ud_ah;        // UD: address handle number (created over the control socket)
  uint64_t compare_add;  // atomic compare (CMP_AND_SWP) or add (FETCH_AND_ADD)
  uint64_t swap;         // atomic swap
  uint32_t remote_qpn;   // UD
  uint32_t remote_qkey;  // UD
};
static_assert(std::is_standard_layout_v<SendWqeHeader>);
static_assert(sizeof(SendWqeHeader) == 64);
static_assert(offsetof(SendWqeHeader, wr_id) == 0);
static_assert(offsetof(SendWqeHeader, opcode) == 8);
static_assert(offsetof(SendWqeHeader, reserved) == 9);
static_assert(offsetof(SendWqeHeader, inline_len) == 10);
static_assert(offsetof(SendWqeHeader, send_flags) == 12);
static_assert(offsetof(SendWqeHeader, num_sge) == 16);
static_assert(offsetof(SendWqeHeader, imm_data) == 20);
static_assert(offsetof(SendWqeHeader, remote_addr) == 24);
static_assert(offsetof(SendWqeHeader, rkey) == 32);
static_assert(offsetof(SendWqeHeader, ud_ah) == 36);
static_assert(offsetof(SendWqeHeader, compare_add) == 40);
static_assert(offsetof(SendWqeHeader, swap) == 48);
static_assert(offsetof(SendWqeHeader, remote_qpn) == 56);
static_assert(offsetof(SendWqeHeader, remote_qkey) == 60);

// Send slot classes. A QP's SQ uses one class for its whole life, chosen at create_qp as the
// smallest that fits both max_send_sge SGEs and max_inline_data bytes. The tail after the
// header holds either the gather list or the inline bytes (never both: IBV_SEND_INLINE copies
// the data at post time and ignores sg_list afterwards).
//   class   slot   SGEs  inline
//   128     128 B   4     64 B
//   256     256 B  12    192 B
//   512     512 B  28    448 B
//   1024   1024 B  60    960 B     (30+ SGEs: perftest / MPI-style gather lists)
template <uint32_t kSlotBytes>
struct SendWqe {
  static_assert(kSlotBytes >= 128 && (kSlotBytes & (kSlotBytes - 1)) == 0);
  static constexpr uint32_t kMaxSge = (kSlotBytes - sizeof(SendWqeHeader)) / sizeof(Sge);
  static constexpr uint32_t kMaxInline = kSlotBytes - sizeof(SendWqeHeader);
  SendWqeHeader hdr;
  union {
    Sge sge[kMaxSge];
    uint8_t inline_data[kMaxInline];
  };
};
using SendWqe128 = SendWqe<128>;
using SendWqe256 = SendWqe<256>;
using SendWqe512 = SendWqe<512>;
using SendWqe1024 = SendWqe<1024>;
static_assert(sizeof(SendWqe128) == 128 && SendWqe128::kMaxSge == 4 &&
              SendWqe128::kMaxInline == 64 && offsetof(SendWqe128, sge) == 64);
static_assert(sizeof(SendWqe256) == 256 && SendWqe256::kMaxSge == 12 &&
              SendWqe256::kMaxInline == 192 && offsetof(SendWqe256, sge) == 64);
static_assert(sizeof(SendWqe512) == 512 && SendWqe512::kMaxSge == 28 &&
              SendWqe512::kMaxInline == 448 && offsetof(SendWqe512, sge) == 64);
static_assert(sizeof(SendWqe1024) == 1024 && SendWqe1024::kMaxSge == 60 &&
              SendWqe1024::kMaxInline == 960 && offsetof(SendWqe1024, inline_data) == 64);
static_assert(std::is_trivially_copyable_v<SendWqe1024> && std::is_standard_layout_v<SendWqe1024>);

// Slot size for a QP created with the given caps, or 0 if no class fits.
constexpr uint32_t send_slot_size(uint32_t max_sge, uint32_t max_inline) noexcept {
  for (uint32_t s = 128; s <= 1024; s <<= 1) {
    const uint32_t tail = s - static_cast<uint32_t>(sizeof(SendWqeHeader));
    if (max_sge <= tail / sizeof(Sge) && max_inline <= tail) return s;
  }
  return 0;
}
static_assert(send_slot_size(1, 0) == 128 && send_slot_size(4, 64) == 128);
static_assert(send_slot_size(5, 0) == 256 && send_slot_size(1, 65) == 256);
static_assert(send_slot_size(30, 0) == 1024 && send_slot_size(60, 960) == 1024);
static_assert(send_slot_size(61, 0) == 0 && send_slot_size(0, 961) == 0);

struct RecvWqeHeader {
  uint64_t wr_id;
  uint32_t num_sge;
  uint32_t reserved;  // must be 0
};
static_assert(sizeof(RecvWqeHeader) == 16 && offsetof(RecvWqeHeader, wr_id) == 0 &&
              offsetof(RecvWqeHeader, num_sge) == 8 && offsetof(RecvWqeHeader, reserved) == 12);

// Receive slot classes: 64 B (3 SGEs), 128 B (7), 256 B (15), 512 B (31).
template <uint32_t kSlotBytes>
struct RecvWqe {
  static_assert(kSlotBytes >= 64 && (kSlotBytes & (kSlotBytes - 1)) == 0);
  static constexpr uint32_t kMaxSge = (kSlotBytes - sizeof(RecvWqeHeader)) / sizeof(Sge);
  RecvWqeHeader hdr;
  Sge sge[kMaxSge];
};
using RecvWqe64 = RecvWqe<64>;
using RecvWqe128 = RecvWqe<128>;
using RecvWqe256 = RecvWqe<256>;
using RecvWqe512 = RecvWqe<512>;
static_assert(sizeof(RecvWqe64) == 64 && RecvWqe64::kMaxSge == 3 && offsetof(RecvWqe64, sge) == 16);
static_assert(sizeof(RecvWqe128) == 128 && RecvWqe128::kMaxSge == 7);
static_assert(sizeof(RecvWqe256) == 256 && RecvWqe256::kMaxSge == 15);
static_assert(sizeof(RecvWqe512) == 512 && RecvWqe512::kMaxSge == 31);

constexpr uint32_t recv_slot_size(uint32_t max_sge) noexcept {
  for (uint32_t s = 64; s <= 512; s <<= 1) {
    if (max_sge <= (s - sizeof(RecvWqeHeader)) / sizeof(Sge)) return s;
  }
  return 0;
}
static_assert(recv_slot_size(1) == 64 && recv_slot_size(3) == 64 && recv_slot_size(4) == 128 &&
              recv_slot_size(31) == 512 && recv_slot_size(32) == 0);

// A completion: every ibv_wc field, plus a timestamp for the extended CQ API. 64 bytes.
struct Cqe {
  uint64_t wr_id;
  uint32_t status;  // ibv_wc_status
  uint32_t opcode;  // ibv_wc_opcode
  uint32_t vendor_err;
  uint32_t byte_len;
  uint32_t imm_data;  // imm_data (__be32 as given by verbs) or invalidated_rkey
  uint32_t qp_num;
  uint32_t src_qp;
  uint32_t wc_flags;  // ibv_wc_flags
  uint16_t pkey_index;
  uint16_t slid;
  uint8_t sl;
  uint8_t dlid_path_bits;
  uint8_t reserved0[2];
  uint64_t completion_ts;  // ns, CLOCK_MONOTONIC of the lcore; 0 if not sampled
  uint8_t reserved1[8];
};
static_assert(std::is_standard_layout_v<Cqe> && std::is_trivially_copyable_v<Cqe>);
static_assert(sizeof(Cqe) == 64);
static_assert(offsetof(Cqe, wr_id) == 0);
static_assert(offsetof(Cqe, status) == 8);
static_assert(offsetof(Cqe, opcode) == 12);
static_assert(offsetof(Cqe, vendor_err) == 16);
static_assert(offsetof(Cqe, byte_len) == 20);
static_assert(offsetof(Cqe, imm_data) == 24);
static_assert(offsetof(Cqe, qp_num) == 28);
static_assert(offsetof(Cqe, src_qp) == 32);
static_assert(offsetof(Cqe, wc_flags) == 36);
static_assert(offsetof(Cqe, pkey_index) == 40);
static_assert(offsetof(Cqe, slid) == 42);
static_assert(offsetof(Cqe, sl) == 44);
static_assert(offsetof(Cqe, dlid_path_bits) == 45);
static_assert(offsetof(Cqe, completion_ts) == 48);

// A doorbell: "QP qpn has work" (kind = kDoorbellSq) or "SRQ/RQ refilled" (kDoorbellRq).
enum DoorbellKind : uint32_t { kDoorbellSq = 1, kDoorbellRq = 2 };
struct Doorbell {
  uint32_t qpn;
  uint32_t kind;
};
static_assert(sizeof(Doorbell) == 8 && offsetof(Doorbell, qpn) == 0 &&
              offsetof(Doorbell, kind) == 4);

// A context has one doorbell ring per worker lcore of the daemon (ctl::OpenContextReply::
// doorbell_rings, at most kMaxDoorbellRings), each read by that worker only. A QP's doorbells go
// to the ring of the worker that owns it, which bits 16..23 of its QPN name; an SRQ's (qpn =
// kSrqDoorbellBit | handle) to ring 0. A doorbell in any other ring is refused and counted.
inline constexpr uint32_t kMaxDoorbellRings = 64;
inline constexpr uint32_t kQpnOwnerShift = 16;
inline constexpr uint32_t kSrqDoorbellBit = 0x80000000u;
// The ring of a doorbell naming `qpn`, for a context with `rings` rings (QPNs naming no
// worker: ring 0, whose reader refuses them like any unknown QPN).
constexpr uint32_t doorbell_ring(uint32_t qpn, uint32_t rings) noexcept {
  if (qpn & kSrqDoorbellBit) return 0;
  const uint32_t w = (qpn & 0xffffffu) >> kQpnOwnerShift;
  return w < rings ? w : 0;
}
static_assert(doorbell_ring(0x10011, 2) == 1 && doorbell_ring(0x11, 2) == 0 &&
              doorbell_ring(0x20011, 2) == 0 && doorbell_ring(kSrqDoorbellBit | 0x10001, 2) == 0);

// ---------------------------------------------------------------------------------------------
// Context region: one memfd per (app context), created by uroced, passed to the shim over the
// control socket, mapped by both. [RegionHeader][RingDesc x desc_capacity][rings ...]. The
// daemon appends a descriptor (then bumps desc_count with a release store) for every ring it
// carves out; the shim finds rings by (kind, id). Offsets are from the region start, 64-byte
// aligned, and every ring lies entirely inside region_bytes. The daemon never reads the table
// back: it keeps its own copy (the app could scribble on it).
// ---------------------------------------------------------------------------------------------
inline constexpr uint32_t kRegionMagic = 0x55435458;  // "UCTX"
inline constexpr uint16_t kRegionVersion = 1;

struct alignas(kCacheLine) RegionHeader {
  uint32_t magic;          // kRegionMagic
  uint16_t version;        // kRegionVersion
  uint16_t header_size;    // sizeof(RegionHeader)
  uint32_t abi_version;    // kAbiVersion
  uint32_t desc_size;      // sizeof(RingDesc)
  uint64_t region_bytes;   // total mapped size
  uint64_t desc_offset;    // offset of the descriptor table
  uint32_t desc_capacity;  // table entries
  uint32_t desc_count;     // published entries (release store by the daemon)
  uint64_t alloc_offset;   // first free byte for the next ring (daemon bookkeeping, informational)
  uint8_t reserved[kCacheLine - 48];
};
static_assert(std::is_standard_layout_v<RegionHeader>);
static_assert(sizeof(RegionHeader) == 64);
static_assert(offsetof(RegionHeader, magic) == 0);
static_assert(offsetof(RegionHeader, version) == 4);
static_assert(offsetof(RegionHeader, header_size) == 6);
static_assert(offsetof(RegionHeader, abi_version) == 8);
static_assert(offsetof(RegionHeader, desc_size) == 12);
static_assert(offsetof(RegionHeader, region_bytes) == 16);
static_assert(offsetof(RegionHeader, desc_offset) == 24);
static_assert(offsetof(RegionHeader, desc_capacity) == 32);
static_assert(offsetof(RegionHeader, desc_count) == 36);
static_assert(offsetof(RegionHeader, alloc_offset) == 40);

struct RingDesc {
  uint32_t kind;    // RingKind
  uint32_t id;      // QPN (SQ/RQ), CQN (CQ), SRQ number, lcore index (doorbell)
  uint64_t offset;  // RingHeader offset from the region start, multiple of 64
  uint64_t bytes;   // header + slots
  uint32_t slot_size;
  uint32_t slot_count;
};
static_assert(sizeof(RingDesc) == 32 && offsetof(RingDesc, kind) == 0 &&
              offsetof(RingDesc, id) == 4 && offsetof(RingDesc, offset) == 8 &&
              offsetof(RingDesc, bytes) == 16 && offsetof(RingDesc, slot_size) == 24 &&
              offsetof(RingDesc, slot_count) == 28);

// Bytes a ring of the given geometry occupies (header + slots), or 0 on overflow.
constexpr uint64_t ring_bytes(uint32_t slot_size, uint32_t slot_count) noexcept {
  const uint64_t data = static_cast<uint64_t>(slot_size) * slot_count;  // < 2^64
  return sizeof(RingHeader) + data;
}

}  // namespace uroce::abi
