// SPDX-License-Identifier: BSD-3-Clause
// The path of an address vector (modify_qp with IBV_QP_AV, create_ah).
#include "daemon/objects.h"

#include <cerrno>

namespace uroce::daemon {

int path_from_ah_attr(PortView &port, const ctl::AhAttrPayload &a, wire::PathInfo *out) {
  if (!a.is_global || (a.port_num != 1 && a.port_num != 0)) return -EINVAL;
  if (a.sgid_index >= port.gid_count()) return -EINVAL;
  wire::PathInfo p;
  p.sgid = port.gid(a.sgid_index);
  std::memcpy(p.dgid.raw, a.dgid, 16);
  if (p.sgid.is_v4mapped() != p.dgid.is_v4mapped()) return -EINVAL;
  std::memcpy(p.smac, port.mac(), 6);
  if (port.resolve(p.dgid, p.dmac) != 0) return -EHOSTUNREACH;
  p.dscp = a.traffic_class ? static_cast<uint8_t>(a.traffic_class >> 2) : port.dscp();
  // As Linux for every RoCE device (ib_resolve_unicast_gid_dmac): the IP TTL / hop limit is
  // the route's (64), not the address vector's. ibv_rc_pingpong asks for 1; rxe and ConnectX
  // send 64 all the same, and so does uroce (found against rxe: doc/interop.md).
  p.hop_limit = wire::kRoceHopLimit;
  p.flow_label = a.flow_label & 0xfffff;
  *out = p;
  return 0;
}

int Daemon::path_from_ah(const ctl::AhAttrPayload &a, wire::PathInfo *out) {
  return path_from_ah_attr(port_, a, out);
}

}  // namespace uroce::daemon
