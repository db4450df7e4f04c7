// SPDX-License-Identifier: BSD-3-Clause
// The verbs shim's own cost per work request and per completion (doc/perf.md, "Verbs shim:
// post and poll"), through the exported verbs API of whichever libibverbs.so.1 the loader
// picks (LD_LIBRARY_PATH: this tree's shim, or an older build of it as the baseline).
//
//   UROCE_SOCKET=A:B shim_post_bench [--rounds N] [--batch B]
//
// An RC pair between device 0 (A) and device 1 (B), 8-byte signalled RDMA WRITEs from A. Each
// round posts B WRs in one of three ways, timing only the posting calls: B ibv_post_send calls
// of one WR, one ibv_post_send of a B-WR chain, or ibv_wr_start + B x (ibv_wr_rdma_write +
// ibv_wr_set_sge) + ibv_wr_complete. It then waits (untimed, 200 us sleeps) and reaps the B
// completions, alternately with ibv_poll_cq (16 at a time) and ibv_start_poll / ibv_next_poll
// reading opcode, byte_len and qp_num, timing only the calls that returned completions.
// Prints ns per WR and per completion, the median over the timed sections (TSC, calibrated
// against CLOCK_MONOTONIC; the cost of a pair of TSC reads is subtracted). Nothing is asserted; a
// failed verb ends the run (exit 1).
#include <infiniband/verbs.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

[[noreturn]] void die(const char *what, int err) {
  std::fprintf(stderr, "shim_post_bench: %s: %s\n", what, std::strerror(err));
  std::exit(1);
}

double now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

struct Side {
  ibv_context *ctx;
  ibv_pd *pd;
  ibv_cq_ex *cq;
  ibv_qp *qp;
  ibv_mr *mr;
  ibv_gid gid;
  std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 16);
};

void open_side(ibv_device *dev, Side *s, uint32_t depth) {
  s->ctx = ibv_open_device(dev);
  if (!s->ctx) die("ibv_open_device", errno);
  s->pd = ibv_alloc_pd(s->ctx);
  if (!s->pd) die("ibv_alloc_pd", errno);
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 4 * depth;
  ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM;
  s->cq = ibv_create_cq_ex(s->ctx, &ca);
  if (!s->cq) die("ibv_create_cq_ex", errno);
  s->mr = ibv_reg_mr(s->pd, s->buf.data(), s->buf.size(),
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!s->mr) die("ibv_reg_mr", errno);
  ibv_qp_init_attr_ex qa{};
  qa.send_cq = qa.recv_cq = ibv_cq_ex_to_cq(s->cq);
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = depth;
  qa.cap.max_recv_wr = 16;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  qa.pd = s->pd;
  qa.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
  s->qp = ibv_create_qp_ex(s->ctx, &qa);
  if (!s->qp) die("ibv_create_qp_ex", errno);
  int rc = ibv_query_gid(s->ctx, 1, 1, &s->gid);
  if (rc) die("ibv_query_gid", rc);
}

void connect(Side &s, const Side &peer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  int rc =
      ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc) die("modify_qp INIT", rc);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer.qp->qp_num;
  a.rq_psn = 0;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer.gid;
  a.ah_attr.grh.sgid_index = 1;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  rc = ibv_modify_qp(s.qp, &a,
                     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc) die("modify_qp RTR", rc);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 17;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  rc = ibv_modify_qp(s.qp, &a,
                     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                         IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc) die("modify_qp RTS", rc);
}

// Per timed section: cycles per WR / completion. The median is reported: on a shared machine a
// section that was preempted costs milliseconds, which would swamp a mean.
struct Acc {
  std::vector<double> per;  // cycles per item, one entry per timed section
  uint64_t n = 0;           // WRs / completions
  uint64_t calls = 0;       // timed sections
  void add(double cycles, int items) {
    per.push_back(cycles / items);
    n += static_cast<uint64_t>(items);
    ++calls;
  }
  double median() {
    if (per.empty()) return 0;
    std::nth_element(per.begin(), per.begin() + per.size() / 2, per.end());
    return per[per.size() / 2];
  }
};

}  // namespace

int main(int argc, char **argv) {
  int rounds = 2000;
  int batch = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rounds"))
      rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--batch"))
      batch = std::atoi(argv[i + 1]);
  }
  if (rounds <= 0 || batch <= 0 || batch > 128) {
    std::fprintf(stderr, "usage: shim_post_bench [--rounds N] [--batch 1..128]\n");
    return 2;
  }
  int ndev = 0;
  ibv_device **list = ibv_get_device_list(&ndev);
  if (!list || ndev < 2) die("need two devices (UROCE_SOCKET=A:B)", ENODEV);
  Side a, b;
  open_side(list[0], &a, 256);
  open_side(list[1], &b, 256);
  connect(a, b);
  connect(b, a);

  // TSC frequency and the cost of an empty timed section.
  const double t0 = now_ns();
  const uint64_t c0 = __rdtsc();
  usleep(100000);
  const double ns_per_cycle = (now_ns() - t0) / static_cast<double>(__rdtsc() - c0);
  double empty = 1e30;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t s = __rdtsc();
    const uint64_t e = __rdtsc();
    if (static_cast<double>(e - s) < empty) empty = static_cast<double>(e - s);
  }

  ibv_qp_ex *qx = ibv_qp_to_qp_ex(a.qp);
  ibv_cq *cq = ibv_cq_ex_to_cq(a.cq);
  ibv_sge sge{reinterpret_cast<uintptr_t>(a.buf.data()), 8, a.mr->lkey};
  std::vector<ibv_send_wr> wrs(batch);
  for (int i = 0; i < batch; ++i) {
    ibv_send_wr &w = wrs[i];
    w = {};
    w.wr_id = i;
    w.opcode = IBV_WR_RDMA_WRITE;
    w.sg_list = &sge;
    w.num_sge = 1;
    w.send_flags = IBV_SEND_SIGNALED;
    w.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(b.buf.data());
    w.wr.rdma.rkey = b.mr->rkey;
  }
  Acc post[3], poll[2];
  for (int r = 0; r < rounds; ++r) {
    const int mode = r % 3;
    uint64_t s = 0, e = 0;
    int rc = 0;
    if (mode == 0) {  // one WR per ibv_post_send
      ibv_send_wr *bad = nullptr;
      s = __rdtsc();
      for (int i = 0; i < batch && rc == 0; ++i) {
        wrs[i].next = nullptr;
        rc = ibv_post_send(a.qp, &wrs[i], &bad);
      }
      e = __rdtsc();
    } else if (mode == 1) {  // one chain
      for (int i = 0; i < batch; ++i)
        wrs[i].next = i + 1 < batch ? &wrs[i + 1] : nullptr;
      ibv_send_wr *bad = nullptr;
      s = __rdtsc();
      rc = ibv_post_send(a.qp, &wrs[0], &bad);
      e = __rdtsc();
    } else {  // ibv_wr_*
      s = __rdtsc();
      ibv_wr_start(qx);
      for (int i = 0; i < batch; ++i) {
        qx->wr_id = i;
        qx->wr_flags = IBV_SEND_SIGNALED;
        ibv_wr_rdma_write(qx, b.mr->rkey, reinterpret_cast<uintptr_t>(b.buf.data()));
        ibv_wr_set_sge(qx, a.mr->lkey, reinterpret_cast<uintptr_t>(a.buf.data()), 8);
      }
      rc = ibv_wr_complete(qx);
      e = __rdtsc();
    }
    if (rc) die("post", rc);
    post[mode].add(static_cast<double>(e - s) - empty, batch);

    const int pm = r % 2;
    int got = 0;
    const double deadline = now_ns() + 30e9;
    usleep(200);
    while (got < batch) {
      if (now_ns() > deadline) die("completions", ETIMEDOUT);
      int k = 0;
      if (pm == 0) {
        ibv_wc wc[16];
        s = __rdtsc();
        k = ibv_poll_cq(cq, 16, wc);
        e = __rdtsc();
        for (int i = 0; i < k; ++i)
          if (wc[i].status != IBV_WC_SUCCESS) die("completion status", EIO);
      } else {
        ibv_poll_cq_attr pa{};
        unsigned sum = 0;
        s = __rdtsc();
        if (ibv_start_poll(a.cq, &pa) == 0) {
          do {
            sum += ibv_wc_read_opcode(a.cq) + ibv_wc_read_byte_len(a.cq) +
                   ibv_wc_read_qp_num(a.cq) + a.cq->status;
            ++k;
          } while (ibv_next_poll(a.cq) == 0);
          ibv_end_poll(a.cq);
        }
        e = __rdtsc();
        if (sum == 0xffffffffu) std::puts("");  // keeps the reads
      }
      if (k < 0) die("poll", EIO);
      if (k == 0) {
        usleep(200);
        continue;
      }
      poll[pm].add(static_cast<double>(e - s) - empty, k);
      got += k;
    }
  }
  auto ns = [&](Acc &x) { return x.median() * ns_per_cycle; };
  std::printf(
      "shim_post_bench rounds=%d batch=%d post1_ns=%.1f chain_ns=%.1f wr_api_ns=%.1f "
      "poll_cq_ns=%.1f cq_ex_ns=%.1f cqes_per_poll=%.1f\n",
      rounds, batch, ns(post[0]), ns(post[1]), ns(post[2]), ns(poll[0]), ns(poll[1]),
      poll[0].calls ? static_cast<double>(poll[0].n) / poll[0].calls : 0.0);
  ibv_destroy_qp(a.qp);
  ibv_destroy_qp(b.qp);
  return 0;
}
