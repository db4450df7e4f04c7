// SPDX-License-Identifier: BSD-3-Clause
// Verbs control messages between an app (lib/client, the verbs shim) and uroced, carried by the
// control channel of uroce/ctl.h (types from kFirstVerbsType). Each request type T has the reply
// type T | kReplyBit; the reply's header status is 0 or a negative errno, and a reply with a
// non-zero status has an empty payload and no fds. Fixed-width, host byte order, every layout
// static_assert'ed. Handles (PD, CQ, SRQ, AH) are the daemon's and meaningful only inside the
// session (connection) that created them; a handle of another session is EINVAL. doc/client.md
// describes the protocol from the app's side.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "uroce/ctl.h"

namespace uroce::ctl {

enum VerbsType : uint16_t {
  kOpenContext = kFirstVerbsType,  // empty -> OpenContextReply + fds: doorbell rings (one memfd),
                                   // async eventfd, doorbell eventfd of ring 0
  kQueryDevice,                    // empty -> DeviceAttrPayload
  kQueryPort,                      // PortNumPayload -> PortAttrPayload
  kQueryGid,                       // QueryGidPayload -> GidPayload
  kAllocPd,                        // empty -> HandlePayload
  kDeallocPd,                      // HandlePayload -> empty
  kRegMr,                          // RegMrPayload + fd: memfd -> RegMrReply
  kDeregMr,                        // HandlePayload (lkey) -> empty
  kCreateCq,                       // CreateCqPayload -> CreateCqReply + fds: ring memfd, eventfd
  kDestroyCq,                      // HandlePayload -> empty
  kCreateQp,                       // CreateQpPayload -> CreateQpReply + fds: SQ, RQ ring memfds
                                   // (no RQ with an SRQ), its doorbell ring's eventfd
  kModifyQp,                       // ModifyQpPayload -> empty
  kQueryQp,                        // HandlePayload (qpn) -> QueryQpReply
  kDestroyQp,                      // HandlePayload (qpn) -> empty
  kCreateSrq,                      // CreateSrqPayload -> CreateSrqReply + fd: ring memfd
  kDestroySrq,                     // HandlePayload -> empty
  kCreateAh,                       // CreateAhPayload -> HandlePayload
  kDestroyAh,                      // HandlePayload -> empty
  kStats,                          // StatsRequest -> StatsReply (counters, paginated)
  kGetAsyncEvents,                 // empty -> AsyncEventsReply (the session's pending events)
  kModifySrq,                      // ModifySrqPayload -> empty (arm / disarm the limit event)
  kResizeCq,                       // ResizeCqPayload -> CreateCqReply + fd: the new ring memfd
  kReregMr,                        // ReregMrPayload -> empty (PD / access changed, keys kept)
  kAllocMw,                        // AllocMwPayload -> HandlePayload (the window's rkey)
  kDeallocMw,                      // HandlePayload (the window's rkey, any tag) -> empty
  kLastVerbsType = kDeallocMw,
};

// A generic object handle (PD, CQ, SRQ, AH, QPN, MR lkey).
struct HandlePayload {
  uint32_t handle;
  uint32_t reserved;  // 0
};
static_assert(sizeof(HandlePayload) == 8 && offsetof(HandlePayload, handle) == 0);

// Geometry of a ring the daemon created in its own memfd (the fd travels with the reply).
struct RingGeometry {
  uint64_t bytes;  // memfd size (header + slots, page-rounded)
  uint32_t slot_size;
  uint32_t slot_count;
};
static_assert(sizeof(RingGeometry) == 16 && offsetof(RingGeometry, slot_size) == 8 &&
              offsetof(RingGeometry, slot_count) == 12);

// The doorbell rings (app -> worker w, abi::Doorbell slots; abi::doorbell_ring says which): one
// memfd of doorbell_rings * doorbell.bytes bytes, ring w at offset w * doorbell.bytes, each
// with the geometry `doorbell`. Ring w's eventfd (written when the ring says w is asleep) is the
// third fd here for ring 0, and the last fd of every kCreateQp reply for the QP's ring.
struct OpenContextReply {
  RingGeometry doorbell;
  uint32_t max_qp_per_session;
  uint32_t doorbell_rings;  // 1 .. abi::kMaxDoorbellRings: the daemon's worker lcores
};
static_assert(sizeof(OpenContextReply) == 24 &&
              offsetof(OpenContextReply, max_qp_per_session) == 16 &&
              offsetof(OpenContextReply, doorbell_rings) == 20);

// ibv_device_attr, the fields uroce fills (the rest are 0 in ibv_query_device).
struct DeviceAttrPayload {
  uint64_t node_guid;  // EUI-64 of the first port's MAC (network order bytes in a u64)
  uint64_t sys_image_guid;
  uint64_t max_mr_size;
  uint64_t page_size_cap;
  uint32_t vendor_id;
  uint32_t vendor_part_id;
  uint32_t hw_ver;
  uint32_t max_qp;
  uint32_t max_qp_wr;
  uint32_t device_cap_flags;
  uint32_t max_sge;
  uint32_t max_cq;
  uint32_t max_cqe;
  uint32_t max_mr;
  uint32_t max_pd;
  uint32_t max_qp_rd_atom;
  uint32_t max_qp_init_rd_atom;
  uint32_t max_srq;
  uint32_t max_srq_wr;
  uint32_t max_srq_sge;
  uint32_t max_ah;
  uint32_t max_inline;
  uint32_t atomic_cap;  // ibv_atomic_cap: 1 = IBV_ATOMIC_HCA
  uint32_t phys_port_cnt;
  char fw_ver[64];
  char ibdev_name[64];  // the verbs device name (config port.NAME.ibdev), NUL-terminated
};
static_assert(sizeof(DeviceAttrPayload) == 240 && offsetof(DeviceAttrPayload, vendor_id) == 32 &&
              offsetof(DeviceAttrPayload, phys_port_cnt) == 108 &&
              offsetof(DeviceAttrPayload, fw_ver) == 112 &&
              offsetof(DeviceAttrPayload, ibdev_name) == 176);

struct PortNumPayload {
  uint32_t port_num;  // 1-based, as verbs
  uint32_t reserved;
};
static_assert(sizeof(PortNumPayload) == 8);

// ibv_port_attr, the fields uroce fills.
struct PortAttrPayload {
  uint32_t state;       // ibv_port_state: 4 = ACTIVE, 1 = DOWN
  uint32_t max_mtu;     // ibv_mtu
  uint32_t active_mtu;  // ibv_mtu
  uint32_t gid_tbl_len;
  uint32_t max_msg_sz;
  uint32_t pkey_tbl_len;
  uint32_t link_layer;  // 2 = IBV_LINK_LAYER_ETHERNET
  uint32_t active_speed;
  uint32_t active_width;
  uint32_t phys_state;  // 5 = LINK_UP
  uint32_t eth_mtu;     // the port's Ethernet MTU (uroce extension)
  uint8_t mac[6];
  uint8_t reserved[2];
};
static_assert(sizeof(PortAttrPayload) == 52 && offsetof(PortAttrPayload, mac) == 44);

struct QueryGidPayload {
  uint32_t port_num;
  uint32_t index;
};
static_assert(sizeof(QueryGidPayload) == 8);

struct GidPayload {
  uint8_t gid[16];
  uint32_t gid_type;  // port::GidType values: 0 IB, 1 RoCE v1, 2 RoCE v2 (always 2 today)
  uint32_t reserved;
};
static_assert(sizeof(GidPayload) == 24 && offsetof(GidPayload, gid_type) == 16);

// reg_mr: the fd (one SCM_RIGHTS fd) is a memfd sealed against shrinking (F_SEAL_SHRINK); the
// registered range is [offset, offset + length) of it, which the app sees at app_va.
struct RegMrPayload {
  uint32_t pd;
  uint32_t access;  // ibv_access_flags
  uint64_t offset;
  uint64_t app_va;
  uint64_t length;
};
static_assert(sizeof(RegMrPayload) == 32 && offsetof(RegMrPayload, offset) == 8 &&
              offsetof(RegMrPayload, app_va) == 16 && offsetof(RegMrPayload, length) == 24);

struct RegMrReply {
  uint32_t lkey;
  uint32_t rkey;
};
static_assert(sizeof(RegMrReply) == 8);

struct CreateCqPayload {
  uint32_t cqe;  // requested depth, >= 1
  uint32_t reserved;
};
static_assert(sizeof(CreateCqPayload) == 8);

// fds: [0] the CQ ring memfd (abi::Cqe slots, daemon produces), [1] the completion eventfd.
struct CreateCqReply {
  uint32_t cq;
  uint32_t cqe;  // actual depth (the ring's slot count)
  RingGeometry ring;
};
static_assert(sizeof(CreateCqReply) == 24 && offsetof(CreateCqReply, ring) == 8);

struct CreateQpPayload {
  uint32_t pd;
  uint32_t qp_type;  // ibv_qp_type: 2 RC, 3 UC, 4 UD
  uint32_t send_cq;
  uint32_t recv_cq;
  uint32_t srq;  // 0: none
  uint32_t max_send_wr;
  uint32_t max_recv_wr;
  uint32_t max_send_sge;
  uint32_t max_recv_sge;
  uint32_t max_inline_data;
  uint32_t sq_sig_all;  // 0 / 1
  uint32_t reserved;
};
static_assert(sizeof(CreateQpPayload) == 48 && offsetof(CreateQpPayload, sq_sig_all) == 40);

// fds: [0] the SQ ring memfd, [1] the RQ ring memfd (absent when the QP uses an SRQ: then
// rq.slot_count == 0 and only one fd is attached).
struct CreateQpReply {
  uint32_t qpn;
  uint32_t max_send_wr;  // actual caps
  uint32_t max_recv_wr;
  uint32_t max_send_sge;
  uint32_t max_recv_sge;
  uint32_t max_inline_data;
  RingGeometry sq;  // abi::SendWqe<slot_size> slots
  RingGeometry rq;  // abi::RecvWqe<slot_size> slots
};
static_assert(sizeof(CreateQpReply) == 56 && offsetof(CreateQpReply, sq) == 24 &&
              offsetof(CreateQpReply, rq) == 40);

// ibv_ah_attr for RoCE: the GID is what matters (uroce resolves the MAC with ARP / ND).
struct AhAttrPayload {
  uint8_t dgid[16];
  uint32_t flow_label;
  uint8_t sgid_index;
  uint8_t hop_limit;
  uint8_t traffic_class;
  uint8_t is_global;  // must be 1 (RoCE needs a GRH)
  uint8_t port_num;
  uint8_t sl;
  uint8_t reserved[6];
};
static_assert(sizeof(AhAttrPayload) == 32 && offsetof(AhAttrPayload, flow_label) == 16 &&
              offsetof(AhAttrPayload, sgid_index) == 20 && offsetof(AhAttrPayload, port_num) == 24);

// ibv_qp_attr + mask (ibv_qp_attr_mask values).
struct QpAttrPayload {
  uint32_t qp_state;  // ibv_qp_state
  uint32_t cur_qp_state;
  uint32_t path_mtu;  // ibv_mtu
  uint32_t qkey;
  uint32_t rq_psn;
  uint32_t sq_psn;
  uint32_t dest_qp_num;
  uint32_t qp_access_flags;
  uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data;
  uint16_t pkey_index;
  uint8_t en_sqd_async_notify;
  uint8_t sq_draining;
  uint8_t max_rd_atomic;
  uint8_t max_dest_rd_atomic;
  uint8_t min_rnr_timer;
  uint8_t port_num;
  uint8_t timeout;
  uint8_t retry_cnt;
  uint8_t rnr_retry;
  uint8_t reserved0;
  uint32_t path_mig_state;
  AhAttrPayload ah_attr;
  uint32_t rate_limit;  // kbit/s (IBV_QP_RATE_LIMIT), 0: none
};
static_assert(sizeof(QpAttrPayload) == 104 && offsetof(QpAttrPayload, pkey_index) == 52 &&
              offsetof(QpAttrPayload, path_mig_state) == 64 &&
              offsetof(QpAttrPayload, ah_attr) == 68 && offsetof(QpAttrPayload, rate_limit) == 100);

// IBV_QP_RATE_LIMIT values accepted besides 0 (packet_pacing_caps; transport/verbs_types.h).
constexpr uint32_t kRateLimitMinKbps = 1000;
constexpr uint32_t kRateLimitMaxKbps = 400'000'000;

struct ModifyQpPayload {
  uint32_t qpn;
  uint32_t attr_mask;
  QpAttrPayload attr;
};
static_assert(sizeof(ModifyQpPayload) == 112 && offsetof(ModifyQpPayload, attr) == 8);

struct QueryQpReply {
  QpAttrPayload attr;
  CreateQpPayload init;
};
static_assert(sizeof(QueryQpReply) == 152 && offsetof(QueryQpReply, init) == 104);

struct CreateSrqPayload {
  uint32_t pd;
  uint32_t max_wr;
  uint32_t max_sge;
  uint32_t srq_limit;
};
static_assert(sizeof(CreateSrqPayload) == 16);

// fd: [0] the SRQ ring memfd (abi::RecvWqe<slot_size> slots, app produces).
struct CreateSrqReply {
  uint32_t srq;
  uint32_t max_wr;
  uint32_t max_sge;
  uint32_t reserved;
  RingGeometry ring;
};
static_assert(sizeof(CreateSrqReply) == 32 && offsetof(CreateSrqReply, ring) == 16);

// ibv_modify_srq(IBV_SRQ_LIMIT): SRQ_LIMIT_REACHED is raised once when the SRQ's WQE count
// drops below srq_limit (0 disarms). EINVAL if srq_limit exceeds the SRQ's depth.
struct ModifySrqPayload {
  uint32_t srq;
  uint32_t srq_limit;
};
static_assert(sizeof(ModifySrqPayload) == 8);

// ibv_resize_cq: the CQ gets a new ring of pow2(cqe) slots holding the completions the app had
// not consumed, in order (EINVAL when more are waiting than fit); the reply is a CreateCqReply
// with one fd (the new ring; the eventfd stays). The app polls the old ring no more.
struct ResizeCqPayload {
  uint32_t cq;
  uint32_t cqe;  // requested depth, >= 1
};
static_assert(sizeof(ResizeCqPayload) == 8);

// ibv_rereg_mr(IBV_REREG_MR_CHANGE_PD / _ACCESS) of the MR `lkey`: its PD and access become
// these (the caller passes the current ones for what it does not change); keys, range and
// memory stay.
struct ReregMrPayload {
  uint32_t lkey;
  uint32_t pd;
  uint32_t access;  // ibv_access_flags, as RegMrPayload
  uint32_t reserved;
};
static_assert(sizeof(ReregMrPayload) == 16);

// ibv_alloc_mw: a memory window of `type` (ibv_mw_type: 1 or 2) in PD `pd`.
struct AllocMwPayload {
  uint32_t pd;
  uint32_t type;
};
static_assert(sizeof(AllocMwPayload) == 8 && offsetof(AllocMwPayload, type) == 4);

struct CreateAhPayload {
  uint32_t pd;
  uint32_t reserved;
  AhAttrPayload attr;
};
static_assert(sizeof(CreateAhPayload) == 40 && offsetof(CreateAhPayload, attr) == 8);

// Counters as (name, value) pairs, paginated: the reply holds entries [first, first + count)
// of `total`; ask again with first += count until first == total. The set can change between
// pages (an app came or went): `generation` changes then and the reader starts over.
inline constexpr uint32_t kStatNameLen = 56;
struct StatEntry {
  char name[kStatNameLen];  // NUL-terminated, e.g. "port.p0.rx_packets", "qp.17.retransmits"
  uint64_t value;
};
static_assert(sizeof(StatEntry) == 64 && offsetof(StatEntry, value) == 56);

struct StatsRequest {
  uint32_t first;
  uint32_t reserved;
};
static_assert(sizeof(StatsRequest) == 8);

inline constexpr uint32_t kStatsPerReply = 62;
struct StatsReply {
  uint32_t total;
  uint32_t first;
  uint32_t count;
  uint32_t generation;
  StatEntry entries[kStatsPerReply];
};
static_assert(sizeof(StatsReply) == 16 + 64 * kStatsPerReply && sizeof(StatsReply) <= kMaxPayload);

// Asynchronous events (ibv_async_event) of one session, oldest first. The daemon writes the
// session's async eventfd (the second fd of the kOpenContext reply) when it queues one; the app
// then asks for them. A session queues at most kMaxAsyncEvents; more are counted as lost.
inline constexpr uint32_t kMaxAsyncEvents = 64;
struct AsyncEventEntry {
  uint32_t event_type;  // ibv_event_type (IBV_EVENT_QP_FATAL = 1, SRQ_LIMIT_REACHED = 15, ...)
  uint32_t handle;      // QPN, CQ or SRQ handle, as the event type says
};
static_assert(sizeof(AsyncEventEntry) == 8);
struct AsyncEventsReply {
  uint32_t count;
  uint32_t lost;  // events dropped since the last request because the queue was full
  AsyncEventEntry events[kMaxAsyncEvents];
};
static_assert(sizeof(AsyncEventsReply) == 8 + 8 * kMaxAsyncEvents);

// Size/fd rules of every verbs message (used by both ends to fill their ctl::TypeTable).
struct VerbsSpec {
  uint16_t type;
  uint32_t req_payload;  // exact request payload size
  uint32_t req_fds;      // exact number of fds attached to the request
  uint32_t rep_min, rep_max;
  uint32_t rep_fds;  // at most
};
inline constexpr VerbsSpec kVerbsSpecs[] = {
    {kOpenContext, 0, 0, 0, sizeof(OpenContextReply), 3},
    {kQueryDevice, 0, 0, 0, sizeof(DeviceAttrPayload), 0},
    {kQueryPort, sizeof(PortNumPayload), 0, 0, sizeof(PortAttrPayload), 0},
    {kQueryGid, sizeof(QueryGidPayload), 0, 0, sizeof(GidPayload), 0},
    {kAllocPd, 0, 0, 0, sizeof(HandlePayload), 0},
    {kDeallocPd, sizeof(HandlePayload), 0, 0, 0, 0},
    {kRegMr, sizeof(RegMrPayload), 1, 0, sizeof(RegMrReply), 0},
    {kDeregMr, sizeof(HandlePayload), 0, 0, 0, 0},
    {kCreateCq, sizeof(CreateCqPayload), 0, 0, sizeof(CreateCqReply), 2},
    {kDestroyCq, sizeof(HandlePayload), 0, 0, 0, 0},
    {kCreateQp, sizeof(CreateQpPayload), 0, 0, sizeof(CreateQpReply), 3},
    {kModifyQp, sizeof(ModifyQpPayload), 0, 0, 0, 0},
    {kQueryQp, sizeof(HandlePayload), 0, 0, sizeof(QueryQpReply), 0},
    {kDestroyQp, sizeof(HandlePayload), 0, 0, 0, 0},
    {kCreateSrq, sizeof(CreateSrqPayload), 0, 0, sizeof(CreateSrqReply), 1},
    {kDestroySrq, sizeof(HandlePayload), 0, 0, 0, 0},
    {kCreateAh, sizeof(CreateAhPayload), 0, 0, sizeof(HandlePayload), 0},
    {kDestroyAh, sizeof(HandlePayload), 0, 0, 0, 0},
    {kStats, sizeof(StatsRequest), 0, 0, sizeof(StatsReply), 0},
    {kGetAsyncEvents, 0, 0, 0, sizeof(AsyncEventsReply), 0},
    {kModifySrq, sizeof(ModifySrqPayload), 0, 0, 0, 0},
    {kResizeCq, sizeof(ResizeCqPayload), 0, 0, sizeof(CreateCqReply), 1},
    {kReregMr, sizeof(ReregMrPayload), 0, 0, 0, 0},
    {kAllocMw, sizeof(AllocMwPayload), 0, 0, sizeof(HandlePayload), 0},
    {kDeallocMw, sizeof(HandlePayload), 0, 0, 0, 0},
};
static_assert(sizeof(kVerbsSpecs) / sizeof(kVerbsSpecs[0]) == kLastVerbsType - kFirstVerbsType + 1);

}  // namespace uroce::ctl
