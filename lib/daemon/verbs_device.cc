// SPDX-License-Identifier: BSD-3-Clause
// Verbs handlers: device, port and GID queries.
#include "daemon/objects.h"

#include <cerrno>
#include <cstdio>

namespace uroce::daemon {

int Daemon::do_query_device(Session &, ctl::Message &, Reply &r) {
  const transport::EngineConfig &c = cfg0_;
  ctl::DeviceAttrPayload d{};
  const uint8_t *mac = port_.mac();
  const uint8_t eui[8] = {
      static_cast<uint8_t>(mac[0] ^ 2), mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
  std::memcpy(&d.node_guid, eui, 8);
  d.sys_image_guid = d.node_guid;
  d.max_mr_size = uint64_t{1} << 40;
  d.page_size_cap = 4096;
  d.vendor_id = 0x55524f;  // "URO"
  d.vendor_part_id = 1;
  d.hw_ver = 1;
  d.max_qp = c.max_qp;
  d.max_qp_wr = transport::kMaxWr;
  d.max_sge = transport::kMaxSge;
  d.max_cq = c.max_cq;
  d.max_cqe = c.max_cqe;
  d.max_mr = c.max_mr;
  d.max_pd = c.max_pd;
  d.max_qp_rd_atom = transport::kMaxRdAtomic;
  d.max_qp_init_rd_atom = transport::kMaxInitRdAtomic;
  d.max_srq = c.max_srq;
  d.max_srq_wr = transport::kMaxWr;
  d.max_srq_sge = 31;  // the largest receive slot class
  d.max_ah = c.max_ah;
  d.max_inline = 960;  // the largest send slot class
  d.atomic_cap = 1;
  d.phys_port_cnt = 1;
  std::snprintf(d.fw_ver, sizeof d.fw_ver, "uroce");
  std::snprintf(d.ibdev_name, sizeof d.ibdev_name, "%s", port_.ibdev_name());
  r.set(d);
  return 0;
}

int Daemon::do_query_port(Session &, ctl::Message &m, Reply &r) {
  ctl::PortNumPayload p{};
  if (!m.payload_as(&p) || p.port_num != 1) return -EINVAL;
  ctl::PortAttrPayload a{};
  a.state = port_.link_up() ? 4 : 1;
  a.max_mtu = static_cast<uint32_t>(transport::Mtu::k4096);
  a.active_mtu = static_cast<uint32_t>(port_.ib_mtu());
  a.gid_tbl_len = static_cast<uint32_t>(port_.gid_count());
  a.max_msg_sz = transport::kMaxMsgSize;
  a.pkey_tbl_len = 1;
  a.link_layer = 2;
  a.active_speed = 1;
  a.active_width = 1;
  a.phys_state = port_.link_up() ? 5 : 3;
  a.eth_mtu = port_.eth_mtu();
  std::memcpy(a.mac, port_.mac(), 6);
  r.set(a);
  return 0;
}

int Daemon::do_query_gid(Session &, ctl::Message &m, Reply &r) {
  ctl::QueryGidPayload q{};
  if (!m.payload_as(&q) || q.port_num != 1 || q.index >= port_.gid_count()) return -EINVAL;
  ctl::GidPayload g{};
  const wire::Gid gid = port_.gid(q.index);
  std::memcpy(g.gid, gid.raw, 16);
  g.gid_type = 2;
  r.set(g);
  return 0;
}

}  // namespace uroce::daemon
