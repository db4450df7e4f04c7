// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: address handles, ibv_init_ah_from_wc, multicast (not supported).
#include <errno.h>

#include <cstring>
#include <new>

#include "shim.h"

using namespace uroce;
using namespace uroce::verbs;

namespace uroce::verbs {

// ---- QP attributes <-> control payloads ----
void to_ah_payload(const ibv_ah_attr &a, ctl::AhAttrPayload *p) noexcept {
  std::memcpy(p->dgid, a.grh.dgid.raw, 16);
  p->flow_label = a.grh.flow_label;
  p->sgid_index = a.grh.sgid_index;
  p->hop_limit = a.grh.hop_limit;
  p->traffic_class = a.grh.traffic_class;
  p->is_global = a.is_global;
  p->port_num = a.port_num;
  p->sl = a.sl;
}

void from_ah_payload(const ctl::AhAttrPayload &p, ibv_ah_attr *a) noexcept {
  std::memset(a, 0, sizeof *a);
  std::memcpy(a->grh.dgid.raw, p.dgid, 16);
  a->grh.flow_label = p.flow_label;
  a->grh.sgid_index = p.sgid_index;
  a->grh.hop_limit = p.hop_limit;
  a->grh.traffic_class = p.traffic_class;
  a->is_global = p.is_global;
  a->port_num = p.port_num;
  a->sl = p.sl;
}

}  // namespace uroce::verbs

// ---------------------------------------------------------------------------------------------
// AH
// ---------------------------------------------------------------------------------------------
UV_EXPORT ibv_ah *ibv_create_ah(ibv_pd *pd, ibv_ah_attr *attr) {
  if (pd == nullptr || attr == nullptr) return fail_null<ibv_ah>(EINVAL);
  if (!attr->is_global) return fail_null<ibv_ah>(EINVAL);  // RoCE: the GID is the address
  auto *a = new (std::nothrow) Ah();
  if (a == nullptr) return fail_null<ibv_ah>(ENOMEM);
  ctl::AhAttrPayload p{};
  to_ah_payload(*attr, &p);
  const int rc = ctl_call(ctx_of(pd->context), [&](client::Context &k) {
    return k.create_ah(pd_handle(pd), p, &a->handle);
  });
  if (rc) {
    delete a;
    return fail_null<ibv_ah>(rc);
  }
  a->ah.context = pd->context;
  a->ah.pd = pd;
  a->ah.handle = a->handle;
  return &a->ah;
}

UV_EXPORT int ibv_destroy_ah(ibv_ah *ah) {
  if (ah == nullptr) return EINVAL;
  Ah *a = reinterpret_cast<Ah *>(ah);
  const int rc =
      ctl_call(ctx_of(ah->context), [&](client::Context &k) { return k.destroy_ah(a->handle); });
  if (rc) return rc;
  delete a;
  return 0;
}

// The GRH area of a UD receive holds, for RoCE v2 over IPv4, the IPv4 header in its last 20
// bytes (as rxe and ConnectX write it); tell the two apart as rdma-core does (IP version, and
// for an ambiguous first nibble the IPv4 header checksum).
namespace {
uint16_t ipv4_csum(const uint8_t *h) {
  uint32_t s = 0;
  for (int i = 0; i < 20; i += 2)
    if (i != 10) s += static_cast<uint32_t>(h[i] << 8 | h[i + 1]);
  while (s >> 16)
    s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(~s);
}
int grh_ip_version(const ibv_grh *grh) {
  const auto *b = reinterpret_cast<const uint8_t *>(grh);
  const uint8_t *ip4 = b + 20;
  const int v6 = b[0] >> 4;
  if (v6 != 6) return (ip4[0] >> 4) == 4 ? 4 : -1;
  if ((ip4[0] & 0x0f) != 5 || (ip4[0] >> 4) != 4) return 6;
  return ipv4_csum(ip4) == static_cast<uint16_t>(ip4[10] << 8 | ip4[11]) ? 4 : 6;
}
}  // namespace

UV_EXPORT int ibv_init_ah_from_wc(ibv_context *context, uint8_t port_num, ibv_wc *wc, ibv_grh *grh,
                                  ibv_ah_attr *ah_attr) {
  if (context == nullptr || wc == nullptr || ah_attr == nullptr) return EINVAL;
  if (!(wc->wc_flags & IBV_WC_GRH) || grh == nullptr) return EINVAL;  // RoCE: needs the GRH
  std::memset(ah_attr, 0, sizeof *ah_attr);
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  ah_attr->is_global = 1;
  union ibv_gid our {};
  const int ver = grh_ip_version(grh);
  if (ver == 4) {
    const auto *ip4 = reinterpret_cast<const uint8_t *>(grh) + 20;
    uint8_t *d = ah_attr->grh.dgid.raw;  // the sender's address, IPv4-mapped
    d[10] = d[11] = 0xff;
    std::memcpy(d + 12, ip4 + 12, 4);
    our.raw[10] = our.raw[11] = 0xff;
    std::memcpy(our.raw + 12, ip4 + 16, 4);
    ah_attr->grh.hop_limit = 0xff;
    ah_attr->grh.traffic_class = ip4[1];
  } else if (ver == 6) {
    ah_attr->grh.dgid = grh->sgid;
    our = grh->dgid;
    const uint32_t vtf = be32toh(grh->version_tclass_flow);
    ah_attr->grh.flow_label = vtf & 0xfffff;
    ah_attr->grh.hop_limit = 0xff;
    ah_attr->grh.traffic_class = static_cast<uint8_t>(vtf >> 20);
  } else {
    return EPROTONOSUPPORT;
  }
  // Our GID the packet was sent to -> sgid_index.
  ibv_port_attr pa{};
  int rc = query_port_op(context, port_num, &pa, sizeof pa);
  if (rc) return rc;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    union ibv_gid g {};
    if (ibv_query_gid(context, port_num, i, &g) == 0 && std::memcmp(g.raw, our.raw, 16) == 0) {
      ah_attr->grh.sgid_index = static_cast<uint8_t>(i);
      return 0;
    }
  }
  return ENOENT;
}

UV_EXPORT ibv_ah *ibv_create_ah_from_wc(ibv_pd *pd, ibv_wc *wc, ibv_grh *grh, uint8_t port_num) {
  if (pd == nullptr) return fail_null<ibv_ah>(EINVAL);
  ibv_ah_attr a{};
  const int rc = ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a);
  if (rc) return fail_null<ibv_ah>(rc);
  return ibv_create_ah(pd, &a);
}

// ---------------------------------------------------------------------------------------------
// Multicast: not supported (no multicast groups on uroce).
// ---------------------------------------------------------------------------------------------
UV_EXPORT int ibv_attach_mcast(ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) {
  (void)qp, (void)gid, (void)lid;
  return EOPNOTSUPP;
}

UV_EXPORT int ibv_detach_mcast(ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) {
  (void)qp, (void)gid, (void)lid;
  return EOPNOTSUPP;
}
