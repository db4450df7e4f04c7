// SPDX-License-Identifier: BSD-3-Clause
// Connection-manager control messages between the drop-in librdmacm (drivers/rdmacm) and
// uroced's CM service (lib/daemon/cm_service.cc), on the control channel of uroce/ctl.h, types
// from kFirstCmType (a range of their own, beside the verbs types). Each request T has the
// reply T | kReplyBit, status 0 or -errno. Ids and channels are the daemon's handles, valid in
// the session (connection) that made them. Addresses travel as 16-byte GIDs (IPv4-mapped for
// IPv4) and ports in host order. doc/cm.md describes the protocol.
#pragma once

#include <cstddef>
#include <cstdint>

#include "uroce/ctl.h"

namespace uroce::ctl {

inline constexpr uint16_t kFirstCmType = 0x0200;

enum CmType : uint16_t {
  kCmCreateChannel = kFirstCmType,  // empty + fd (AF_UNIX SOCK_DGRAM: the wake-up end) -> Handle
  kCmCreateId,                      // CmCreateIdPayload -> HandlePayload (id)
  kCmBind,                          // CmAddrPayload -> CmAddrReply
  kCmResolveAddr,                   // CmResolvePayload -> CmAddrReply (+ ADDR_RESOLVED queued)
  kCmResolveRoute,                  // HandlePayload -> empty (+ ROUTE_RESOLVED queued)
  kCmListen,                        // HandlePayload -> empty
  kCmConnect,                       // CmConnPayload -> empty (REQ / SIDR_REQ sent)
  kCmAccept,                        // CmConnPayload -> empty (REP / SIDR_REP sent)
  kCmReject,                        // CmConnPayload (private data only) -> empty
  kCmEstablish,                     // HandlePayload -> empty (active: RTU after the REP)
  kCmDisconnect,                    // HandlePayload -> empty (DREQ, or DREP to a DREQ)
  kCmDestroyId,                     // HandlePayload -> empty
  kCmGetEvent,                      // HandlePayload (channel) -> CmEventReply; -EAGAIN: none
  kCmMigrateId,                     // CmMigratePayload -> empty (rdma_migrate_id)
  kLastCmType = kCmMigrateId,
};

// enum rdma_cm_event_type's values.
enum CmEvent : uint32_t {
  kEvAddrResolved = 0,
  kEvAddrError = 1,
  kEvRouteResolved = 2,
  kEvRouteError = 3,
  kEvConnectRequest = 4,
  kEvConnectResponse = 5,
  kEvConnectError = 6,
  kEvUnreachable = 7,
  kEvRejected = 8,
  kEvEstablished = 9,
  kEvDisconnected = 10,
  kEvTimewaitExit = 15,
};

struct CmCreateIdPayload {
  uint32_t channel;
  uint16_t port_space;  // RDMA_PS_TCP / RDMA_PS_UDP / RDMA_PS_IB
  uint8_t qp_type;      // IBV_QPT_RC / IBV_QPT_UD
  uint8_t reserved;
};
static_assert(sizeof(CmCreateIdPayload) == 8);

// rdma_migrate_id: the id (and the events queued for it, its listener's CONNECT_REQUESTs
// included) moves to another channel of the session.
struct CmMigratePayload {
  uint32_t id;
  uint32_t channel;
};
static_assert(sizeof(CmMigratePayload) == 8);

struct CmAddrPayload {
  uint32_t id;
  uint16_t port;  // 0: the daemon picks one
  uint16_t reserved;
  uint8_t gid[16];  // all zero: any address of the port (same family as `v6`)
  uint8_t v6;
  uint8_t pad[7];
};
static_assert(sizeof(CmAddrPayload) == 32);

struct CmResolvePayload {
  uint32_t id;
  uint16_t dst_port;
  uint16_t reserved;
  uint8_t src_gid[16];  // zero: the port's first address of dst's family
  uint8_t dst_gid[16];
};
static_assert(sizeof(CmResolvePayload) == 40);

struct CmAddrReply {
  uint8_t gid[16];  // the local address
  uint16_t port;
  uint16_t gid_index;  // sgid_index for the QP's address vector
  uint32_t reserved;
};
static_assert(sizeof(CmAddrReply) == 24);

inline constexpr size_t kCmPrivateMax = 196;  // REP's; REQ 56, REJ 148 after rdma_cm's header

// connect / accept / reject. For UD (SIDR) qkey matters, for RC the rest.
struct CmConnPayload {
  uint32_t id;
  uint32_t qpn;
  uint32_t psn;
  uint32_t qkey;
  uint8_t responder_resources;
  uint8_t initiator_depth;
  uint8_t retry_count;
  uint8_t rnr_retry_count;
  uint8_t srq;
  uint8_t path_mtu;  // IBTA enum (1 = 256 .. 5 = 4096)
  uint8_t private_len;
  uint8_t reserved;
  uint8_t private_data[kCmPrivateMax];
  uint8_t pad[4];
};
static_assert(sizeof(CmConnPayload) == 224);

// An event, rdma_cm's numbering (enum rdma_cm_event_type). CONNECT_RESPONSE is reported to the
// library only: it moves the QP to RTS, sends kCmEstablish and reports ESTABLISHED.
struct CmEventReply {
  uint32_t event;
  int32_t status;  // 0, or a REJ reason for REJECTED, -errno for errors
  uint32_t id;
  uint32_t listen_id;  // CONNECT_REQUEST: the listener; `id` is the new id
  // The peer's connection parameters (CONNECT_REQUEST / CONNECT_RESPONSE / ESTABLISHED (UD)).
  uint32_t qpn;
  uint32_t psn;
  uint32_t qkey;
  uint8_t responder_resources;
  uint8_t initiator_depth;
  uint8_t retry_count;
  uint8_t rnr_retry_count;
  uint8_t srq;
  uint8_t path_mtu;
  uint8_t local_ack_timeout;
  uint8_t private_len;
  uint8_t private_data[kCmPrivateMax];
  uint8_t local_gid[16];
  uint8_t peer_gid[16];
  uint16_t local_port;
  uint16_t peer_port;
  uint16_t gid_index;
  uint16_t pending;  // events still queued after this one
};
static_assert(sizeof(CmEventReply) == 272);

struct CmSpec {
  uint16_t type;
  uint32_t req_payload;
  uint32_t req_fds;
  uint32_t rep_min, rep_max;
  uint32_t rep_fds;
};
inline constexpr CmSpec kCmSpecs[] = {
    {kCmCreateChannel, 0, 1, 8, 8, 0},
    {kCmCreateId, sizeof(CmCreateIdPayload), 0, 8, 8, 0},
    {kCmBind, sizeof(CmAddrPayload), 0, sizeof(CmAddrReply), sizeof(CmAddrReply), 0},
    {kCmResolveAddr, sizeof(CmResolvePayload), 0, sizeof(CmAddrReply), sizeof(CmAddrReply), 0},
    {kCmResolveRoute, 8, 0, 0, 0, 0},
    {kCmListen, 8, 0, 0, 0, 0},
    {kCmConnect, sizeof(CmConnPayload), 0, 0, 0, 0},
    {kCmAccept, sizeof(CmConnPayload), 0, 0, 0, 0},
    {kCmReject, sizeof(CmConnPayload), 0, 0, 0, 0},
    {kCmEstablish, 8, 0, 0, 0, 0},
    {kCmDisconnect, 8, 0, 0, 0, 0},
    {kCmDestroyId, 8, 0, 0, 0, 0},
    {kCmGetEvent, 8, 0, sizeof(CmEventReply), sizeof(CmEventReply), 0},
    {kCmMigrateId, sizeof(CmMigratePayload), 0, 0, 0, 0},
};
static_assert(sizeof(kCmSpecs) / sizeof(kCmSpecs[0]) == kLastCmType - kFirstCmType + 1);

}  // namespace uroce::ctl
