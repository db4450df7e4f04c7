// SPDX-License-Identifier: BSD-3-Clause
// The verbs shim's memory-region semantics through the public verbs API (doc/verbs.md, "Memory
// regions"), against one uroced (UROCE_SOCKET), with two RC QPs of this process connected to
// each other over the port's own address (same-port loopback):
//   - unaligned and overlapping registrations: contents kept, RDMA WRITE / READ through either
//     MR land in / come from the very bytes the app sees; a WRITE past an MR's end fails;
//   - after the first dereg the overlap is still shared (the second MR works), after the last
//     the pages are private anonymous memory again (no memfd in /proc/self/maps), bytes intact;
//   - memory that cannot be shared: MAP_SHARED -> EOPNOTSUPP, unmapped -> EFAULT, NULL / 0 ->
//     EINVAL, unsupported access flags -> EOPNOTSUPP, relaxed ordering accepted;
//   - a forked child's writes to registered memory do not reach the parent;
//   - a few unsupported verbs fail with rdma-core's errno (xrcd, flow), alloc_mw of type 3
//     EINVAL, resize_cq grows;
//   - async events: SRQ_LIMIT_REACHED makes ctx->async_fd readable, ibv_get_async_event names
//     the SRQ, and the SRQ can be destroyed once the event is acknowledged.
// Prints "ok: ..." / "FAIL: ..." lines and "N failure(s)"; exit 0 iff none.
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "connect_qp.h"

static int fails;
#define CHECK(cond, ...) \
  do {                   \
    if (cond) {          \
      printf("ok: ");    \
    } else {             \
      printf("FAIL: ");  \
      ++fails;           \
    }                    \
    printf(__VA_ARGS__); \
    printf("\n");        \
  } while (0)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qa, *qb;

// Is the page holding addr mapped from the shim's memfd?
static int shared_with_memfd(const void *addr) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  int found = 0;
  uintptr_t a = (uintptr_t)addr;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long s, e;
    if (sscanf(line, "%lx-%lx", &s, &e) == 2 && s <= a && a < e) {
      found = strstr(line, "memfd:uroce-verbs-mr") != NULL;
      break;
    }
  }
  if (f) fclose(f);
  return found;
}

// One RDMA op on qa, waits (bounded) for its completion. Returns the WC status or -1.
static int rdma(enum ibv_wr_opcode op, void *local, uint32_t len, uint32_t lkey, uint64_t raddr,
                uint32_t rkey) {
  struct ibv_sge sge = {(uintptr_t)local, len, lkey};
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = 7;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  if (ibv_post_send(qa, &wr, &bad)) return -1;
  struct ibv_wc wc;
  for (int i = 0; i < 20000; ++i) {  // 20 s at most
    int n = ibv_poll_cq(cq, 1, &wc);
    if (n < 0) return -1;
    if (n == 1) return wc.status;
    usleep(1000);
  }
  return -1;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int num = 0;
  struct ibv_device **list = ibv_get_device_list(&num);
  if (!list || num < 1) {
    printf("FAIL: no uroce device (UROCE_SOCKET=%s)\n", getenv("UROCE_SOCKET"));
    return 1;
  }
  ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  pd = ctx ? ibv_alloc_pd(ctx) : NULL;
  cq = ctx ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
  if (!pd || !cq) {
    printf("FAIL: open/pd/cq: %s\n", strerror(errno));
    return 1;
  }
  struct ibv_qp_init_attr ia;
  memset(&ia, 0, sizeof ia);
  ia.send_cq = ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  qa = ibv_create_qp(pd, &ia);
  qb = ibv_create_qp(pd, &ia);
  union ibv_gid gid;
  if (!qa || !qb || ibv_query_gid(ctx, 1, 1, &gid) || connect_qp(qa, qb->qp_num, &gid) ||
      connect_qp(qb, qa->qp_num, &gid)) {
    printf("FAIL: RC loopback setup: %s\n", strerror(errno));
    return 1;
  }
  const unsigned access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

  // ---- unaligned, overlapping registrations on heap memory
  const size_t n = 5 * 4096;
  uint8_t *buf = malloc(n);
  for (size_t i = 0; i < n; ++i)
    buf[i] = (uint8_t)(i * 13);
  uint8_t *src = malloc(4096);
  struct ibv_mr *msrc = ibv_reg_mr(pd, src, 4096, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr *m1 = ibv_reg_mr(pd, buf + 100, 5000, access);  // unaligned
  struct ibv_mr *m2 = ibv_reg_mr_iova2(pd, buf + 3000, 9000, (uintptr_t)(buf + 3000),
                                       access | IBV_ACCESS_RELAXED_ORDERING);  // overlaps m1
  int kept = 1;
  for (size_t i = 0; i < n; ++i)
    kept &= buf[i] == (uint8_t)(i * 13);
  CHECK(msrc && m1 && m2 && kept && shared_with_memfd(buf + 100) && shared_with_memfd(buf + 11999),
        "unaligned + overlapping ibv_reg_mr (relaxed ordering via reg_mr_iova2): contents kept, "
        "pages shared");
  if (!msrc || !m1 || !m2) return 1;
  memset(src, 0xA5, 4096);
  // WRITE through m2 into the overlap [3000, 5100): the app sees it at once.
  int st = rdma(IBV_WR_RDMA_WRITE, src, 2000, msrc->lkey, (uintptr_t)(buf + 3050), m2->rkey);
  int ok = st == IBV_WC_SUCCESS;
  for (size_t i = 3050; i < 5050; ++i)
    ok &= buf[i] == 0xA5;
  ok &= buf[3049] == (uint8_t)(3049 * 13) && buf[5050] == (uint8_t)(5050 * 13);
  CHECK(ok, "RDMA WRITE through the second MR lands exactly in the app's bytes (status %d)", st);
  // READ through m1 of what the app writes: the daemon reads the same pages.
  for (size_t i = 200; i < 1200; ++i)
    buf[i] = (uint8_t)(i ^ 0x3c);
  memset(src, 0, 4096);
  st = rdma(IBV_WR_RDMA_READ, src, 1000, msrc->lkey, (uintptr_t)(buf + 200), m1->rkey);
  ok = st == IBV_WC_SUCCESS;
  for (size_t i = 0; i < 1000; ++i)
    ok &= src[i] == (uint8_t)((i + 200) ^ 0x3c);
  CHECK(ok, "RDMA READ through the first MR returns what the app wrote (status %d)", st);
  // ---- dereg: the overlap stays shared while m2 holds it; then everything private again
  CHECK(ibv_dereg_mr(m1) == 0 && !shared_with_memfd(buf + 100) && shared_with_memfd(buf + 3000),
        "after the first ibv_dereg_mr: its own pages private, the overlap still shared");
  memset(src, 0x5B, 4096);
  st = rdma(IBV_WR_RDMA_WRITE, src, 100, msrc->lkey, (uintptr_t)(buf + 4000), m2->rkey);
  ok = st == IBV_WC_SUCCESS;
  for (size_t i = 4000; i < 4100; ++i)
    ok &= buf[i] == 0x5B;
  CHECK(ok, "the remaining MR still reaches the app's bytes (status %d)", st);
  CHECK(ibv_dereg_mr(m2) == 0 && !shared_with_memfd(buf + 3000) &&
            !shared_with_memfd(buf + 11999) && buf[4000] == 0x5B &&
            buf[3049] == (uint8_t)(3049 * 13) && buf[201] == (uint8_t)(201 ^ 0x3c),
        "after the last ibv_dereg_mr: private anonymous memory again, bytes intact");

  // ---- fork: the child's writes never reach the parent's registered pages
  struct ibv_mr *m3 = ibv_reg_mr(pd, buf, n, access);
  memset(buf, 0x11, n);
  pid_t pid = fork();
  if (pid == 0) {
    int priv = !shared_with_memfd(buf) && buf[10] == 0x11;
    memset(buf, 0x22, n);
    _exit(priv ? 0 : 1);
  }
  int wst = 0;
  waitpid(pid, &wst, 0);
  ok = m3 && WIFEXITED(wst) && WEXITSTATUS(wst) == 0;
  for (size_t i = 0; i < n; ++i)
    ok &= buf[i] == 0x11;
  CHECK(ok, "fork: the child gets a private copy, its writes do not reach the parent");
  // Out of the MR's bounds: an error completion, nothing written (last use of the QPs: the
  // error moves qa to ERR).
  memset(src, 0x33, 4096);
  st = m3 ? rdma(IBV_WR_RDMA_WRITE, src, 100, msrc->lkey, (uintptr_t)(buf + n - 50), m3->rkey) : -1;
  CHECK(st != IBV_WC_SUCCESS && st != -1 && buf[n - 50] == 0x11,
        "RDMA WRITE past the end of an MR fails (status %d), nothing written", st);
  if (m3) ibv_dereg_mr(m3);

  // ---- memory that cannot be shared
  void *sh = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  errno = 0;
  struct ibv_mr *bad = ibv_reg_mr(pd, sh, 8192, access);
  CHECK(!bad && errno == EOPNOTSUPP, "MAP_SHARED memory: NULL, errno %d (EOPNOTSUPP)", errno);
  munmap(sh, 8192);
  uint8_t *hole = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  munmap(hole + 4096, 4096);
  errno = 0;
  bad = ibv_reg_mr(pd, hole, 3 * 4096, access);
  CHECK(!bad && errno == EFAULT && !shared_with_memfd(hole),
        "a range with an unmapped page: NULL, errno %d (EFAULT), nothing remapped", errno);
  errno = 0;
  bad = ibv_reg_mr(pd, NULL, 4096, access);
  CHECK(!bad && errno == EINVAL, "NULL address: errno %d (EINVAL)", errno);
  errno = 0;
  bad = ibv_reg_mr(pd, buf, 0, access);
  CHECK(!bad && errno == EINVAL, "length 0: errno %d (EINVAL)", errno);
  errno = 0;
  bad = ibv_reg_mr(pd, buf, 64, access | IBV_ACCESS_ON_DEMAND);
  CHECK(!bad && errno == EOPNOTSUPP, "IBV_ACCESS_ON_DEMAND: errno %d (EOPNOTSUPP)", errno);

  // ---- unsupported verbs: rdma-core's errno, no crash
  errno = 0;
  CHECK(!ibv_alloc_mw(pd, (enum ibv_mw_type)3) && errno == EINVAL, "ibv_alloc_mw(type 3): EINVAL");
  struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  CHECK(mw && ibv_dealloc_mw(mw) == 0, "ibv_alloc_mw(type 2) / ibv_dealloc_mw: 0");
  struct ibv_xrcd_init_attr xa = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
                                  .fd = -1};
  errno = 0;
  CHECK(!ibv_open_xrcd(ctx, &xa) && errno == EOPNOTSUPP, "ibv_open_xrcd: EOPNOTSUPP");
  struct ibv_flow_attr fa = {.size = sizeof fa, .port = 1};
  errno = 0;
  CHECK(!ibv_create_flow(qa, &fa) && errno == EOPNOTSUPP, "ibv_create_flow: EOPNOTSUPP");
  CHECK(ibv_resize_cq(cq, 128) == 0 && cq->cqe >= 128, "ibv_resize_cq(128): 0, cqe %d", cq->cqe);
  CHECK(ibv_resize_cq(cq, 0) == EINVAL, "ibv_resize_cq(0): EINVAL");
  struct ibv_gid_entry ge;
  CHECK(ibv_query_gid_ex(ctx, 1, 1, &ge, 0) == 0 && ge.gid_type == IBV_GID_TYPE_ROCE_V2 &&
            ge.gid.raw[10] == 0xff && ge.gid.raw[11] == 0xff,
        "ibv_query_gid_ex(1): RoCE v2, IPv4-mapped");

  // ---- async events: an SRQ created with a limit raises SRQ_LIMIT_REACHED once its WQE count
  // drops below it; ctx->async_fd becomes readable and ibv_get_async_event names the SRQ.
  {
    struct ibv_srq_init_attr si = {.attr = {.max_wr = 16, .max_sge = 1, .srq_limit = 3}};
    struct ibv_srq *srq = ibv_create_srq(pd, &si);
    struct ibv_qp_init_attr ja = ia;
    ja.srq = srq;
    struct ibv_qp *qx = ibv_create_qp(pd, &ia), *qy = srq ? ibv_create_qp(pd, &ja) : NULL;
    int setup = srq && qx && qy && connect_qp(qx, qy->qp_num, &gid) == 0 &&
                connect_qp(qy, qx->qp_num, &gid) == 0;
    uint8_t *rb = malloc(4096);
    struct ibv_mr *mr = setup ? ibv_reg_mr(pd, rb, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
    for (int i = 0; mr && i < 5; ++i) {
      struct ibv_sge sge = {(uintptr_t)(rb + 64 * i), 64, mr->lkey};
      struct ibv_recv_wr rw = {.wr_id = 100 + i, .sg_list = &sge, .num_sge = 1}, *rbad;
      setup &= ibv_post_srq_recv(srq, &rw, &rbad) == 0;
    }
    int got = 0;
    for (int i = 0; setup && i < 3; ++i) {  // 5 - 3 = 2 WQEs left < limit 3
      struct ibv_sge sge = {(uintptr_t)msrc->addr, 8, msrc->lkey};
      struct ibv_send_wr sw = {.wr_id = 200 + i,
                               .sg_list = &sge,
                               .num_sge = 1,
                               .opcode = IBV_WR_SEND,
                               .send_flags = IBV_SEND_SIGNALED},
                         *sbad;
      if (ibv_post_send(qx, &sw, &sbad)) break;
    }
    struct ibv_wc wc;
    for (int i = 0; setup && got < 6 && i < 20000; ++i) {
      int k = ibv_poll_cq(cq, 1, &wc);
      if (k == 1 && wc.status == IBV_WC_SUCCESS) ++got;
      if (k == 0) usleep(1000);
    }
    struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};
    int readable = setup && got == 6 && poll(&pfd, 1, 10000) == 1;
    struct ibv_async_event ev;
    int evok = readable && ibv_get_async_event(ctx, &ev) == 0 &&
               ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq;
    if (evok) ibv_ack_async_event(&ev);
    CHECK(evok,
          "SRQ limit: %d completions, async_fd readable %d, ibv_get_async_event -> "
          "SRQ_LIMIT_REACHED on our SRQ (%s)",
          got, readable,
          evok ? "yes" : ibv_event_type_str(readable ? ev.event_type : IBV_EVENT_CQ_ERR));
    struct ibv_srq_attr sa;
    CHECK(srq && ibv_query_srq(srq, &sa) == 0 && sa.srq_limit == 0,
          "ibv_query_srq after the event: limit %u (0: fired)", srq ? sa.srq_limit : 99);
    // Re-arm with ibv_modify_srq: 2 WQEs left, limit 4 -> fires again on the next receive.
    struct ibv_srq_attr ma = {.srq_limit = 4};
    int armed = srq && ibv_modify_srq(srq, &ma, IBV_SRQ_LIMIT) == 0;
    CHECK(armed && ibv_query_srq(srq, &sa) == 0 && sa.srq_limit == 4,
          "ibv_modify_srq(IBV_SRQ_LIMIT 4), ibv_query_srq: limit %u", armed ? sa.srq_limit : 99);
    struct ibv_srq_attr over = {.srq_limit = 17};  // above max_wr 16
    CHECK(srq && ibv_modify_srq(srq, &over, IBV_SRQ_LIMIT) == EINVAL &&
              ibv_query_srq(srq, &sa) == 0 && sa.srq_limit == 4,
          "ibv_modify_srq(IBV_SRQ_LIMIT 17 > max_wr 16): EINVAL, limit kept");
    struct ibv_srq_attr big = {.max_wr = 64};
    CHECK(srq && ibv_modify_srq(srq, &big, IBV_SRQ_MAX_WR) == EOPNOTSUPP,
          "ibv_modify_srq(IBV_SRQ_MAX_WR): EOPNOTSUPP");
    if (armed) {
      struct ibv_sge sge = {(uintptr_t)msrc->addr, 8, msrc->lkey};
      struct ibv_send_wr sw = {.wr_id = 300,
                               .sg_list = &sge,
                               .num_sge = 1,
                               .opcode = IBV_WR_SEND,
                               .send_flags = IBV_SEND_SIGNALED},
                         *sbad;
      armed = ibv_post_send(qx, &sw, &sbad) == 0;
    }
    int evok2 = armed && poll(&pfd, 1, 10000) == 1 && ibv_get_async_event(ctx, &ev) == 0 &&
                ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq;
    if (evok2) ibv_ack_async_event(&ev);
    CHECK(evok2, "ibv_modify_srq(IBV_SRQ_LIMIT) re-arms: SRQ_LIMIT_REACHED again");
    for (int i = 0, left = evok2 ? 2 : 0; left > 0 && i < 10000; ++i) {  // its 2 completions
      if (ibv_poll_cq(cq, 1, &wc) == 1)
        --left;
      else
        usleep(1000);
    }
    if (qx) ibv_destroy_qp(qx);
    if (qy) ibv_destroy_qp(qy);
    if (srq) CHECK(ibv_destroy_srq(srq) == 0, "ibv_destroy_srq after the acknowledged event");
    if (mr) ibv_dereg_mr(mr);
    free(rb);
  }

  ibv_destroy_qp(qa);
  ibv_destroy_qp(qb);
  ibv_dereg_mr(msrc);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
