// SPDX-License-Identifier: BSD-3-Clause
// Memory windows over the wire (interop suite, scenario mw; doc/interop.md "Memory windows").
// One plain libibverbs program for both sides: in the rxe guest against the kernel's rxe, on
// the host through the uroce verbs shim. The owner registers a 64 KiB MR with MW_BIND and binds
// three windows: W1 type 1 (ibv_bind_mw) at the MR's end, W2 type 2 (IBV_WR_BIND_MW in
// ibv_post_send) bound to QP A, W3 type 2 (ibv_wr_bind_mw) bound to QP C. The accessor, over
// three RC QPs (A, B, C; an access error kills a QP on both sides):
//   A: READ W1 / W2 (the owner's bytes), WRITE them, READ back (its bytes);
//   B: READ across W1's end (and the MR's): IBV_WC_REM_ACCESS_ERR;
//   C: READ across W3's end, inside the MR: REM_ACCESS_ERR (-L, the peer is Linux 6.1's rxe:
//      success, rxe checks only the MR's range);
//   A: SEND_WITH_INV of W2's rkey (the owner's receive: IBV_WC_WITH_INV, invalidated_rkey),
//      then a READ inside W2: REM_ACCESS_ERR. (-L on an rxe owner: rxe puts the kernel's
//      IB_WC_WITH_INVALIDATE, bit 2, into the user's wc_flags, where bit 2 is
//      IBV_WC_IP_CSUM_OK; that bit stands for IBV_WC_WITH_INV then.)
// The owner then checks its buffer: the windows hold the accessor's bytes, the rest its own.
// Out-of-band exchange over TCP (the owner listens; the accessor retries its connect).
// Every wait is bounded by -t (and alarm()). Exit status 0: every check held.
//
// Usage: mw_peer owner|access -p PORT [-H OWNER_IP] [-d DEV] [-g GID_INDEX] [-t SECS] [-L]
// -L: the windows (accessor) or the receive (owner) are Linux 6.1 rxe's, with the quirks above.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kBuf = 65536, kNqp = 3, kQpA = 0, kQpB = 1, kQpC = 2 };
// Windows: offset, length in the owner's MR.
static const uint64_t kWinOff[3] = {kBuf - 4096, 8192, 32768};
static const uint64_t kWinLen[3] = {4096, 8192, 4096};

static int g_fails;
static int g_timeout = 120;
static const char *g_role;

#define CHECK(cond, ...)                    \
  do {                                      \
    if (cond) {                             \
      printf("mw_peer %s: ok: ", g_role);   \
    } else {                                \
      printf("mw_peer %s: FAIL: ", g_role); \
      g_fails++;                            \
    }                                       \
    printf(__VA_ARGS__);                    \
    printf("\n");                           \
    fflush(stdout);                         \
  } while (0)
#define DIE(...)                                        \
  do {                                                  \
    printf("mw_peer %s: FAIL: ", g_role);               \
    printf(__VA_ARGS__);                                \
    printf(" (errno %d %s)\n", errno, strerror(errno)); \
    exit(1);                                            \
  } while (0)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint8_t owner_byte(size_t i) {
  return (uint8_t)(i * 13 + 1);
}
static uint8_t access_byte(size_t i) {
  return (uint8_t)(i * 7 + 0x5b);
}

struct peer {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp[kNqp];
  struct ibv_mr *mr;
  uint8_t *buf;
  int gid_index;
  union ibv_gid gid;
};

// poll one completion (bounded by -t)
static struct ibv_wc poll_one(struct peer *p, const char *what) {
  struct ibv_wc wc;
  double end = now() + g_timeout;
  for (;;) {
    int n = ibv_poll_cq(p->cq, 1, &wc);
    if (n < 0) DIE("ibv_poll_cq (%s)", what);
    if (n == 1) return wc;
    if (now() > end) DIE("no completion for %s within %d s", what, g_timeout);
    usleep(100);
  }
}

static void setup(struct peer *p, const char *dev, int owner) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  struct ibv_device *d = NULL;
  for (int i = 0; list && i < n; i++)
    if (!dev || !strcmp(ibv_get_device_name(list[i]), dev)) {
      d = list[i];
      break;
    }
  if (!d) DIE("no device %s", dev ? dev : "(any)");
  p->ctx = ibv_open_device(d);
  if (!p->ctx) DIE("ibv_open_device");
  ibv_free_device_list(list);
  p->pd = ibv_alloc_pd(p->ctx);
  p->cq = ibv_create_cq(p->ctx, 64, NULL, NULL, 0);
  if (!p->pd || !p->cq) DIE("ibv_alloc_pd / ibv_create_cq");
  p->buf = aligned_alloc(4096, kBuf);
  for (size_t i = 0; i < kBuf; i++)
    p->buf[i] = owner ? owner_byte(i) : 0;
  int acc = IBV_ACCESS_LOCAL_WRITE;
  if (owner) acc |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND;
  p->mr = ibv_reg_mr(p->pd, p->buf, kBuf, acc);
  if (!p->mr) DIE("ibv_reg_mr (access 0x%x)", acc);
  if (ibv_query_gid(p->ctx, 1, p->gid_index, &p->gid)) DIE("ibv_query_gid %d", p->gid_index);
  for (int i = 0; i < kNqp; i++) {
    struct ibv_qp_init_attr_ex a = {
        .send_cq = p->cq,
        .recv_cq = p->cq,
        .cap = {.max_send_wr = 16, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 1,
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
        .pd = p->pd,
        .send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_INV |
                          IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
                          IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV,
    };
    p->qp[i] = ibv_create_qp_ex(p->ctx, &a);
    if (!p->qp[i]) DIE("ibv_create_qp_ex (send_ops_flags 0x%lx)", (unsigned long)a.send_ops_flags);
    struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT,
                            .pkey_index = 0,
                            .port_num = 1,
                            .qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE};
    if (ibv_modify_qp(p->qp[i], &m,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      DIE("modify_qp INIT");
  }
}

// TCP: the owner listens on port, the accessor connects (retried until -t).
static int tcp_open(const char *host, int port) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
  if (!host) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(l, (struct sockaddr *)&sa, sizeof sa) || listen(l, 1)) DIE("listen on %d", port);
    struct pollfd pf = {.fd = l, .events = POLLIN};
    if (poll(&pf, 1, g_timeout * 1000) != 1) DIE("nobody connected to port %d", port);
    int s = accept(l, NULL, NULL);
    close(l);
    return s;
  }
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) DIE("bad address %s", host);
  double end = now() + g_timeout;
  for (;;) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (!connect(s, (struct sockaddr *)&sa, sizeof sa)) return s;
    close(s);
    if (now() > end) DIE("could not connect to %s:%d", host, port);
    sleep(1);
  }
}

// one line of at most 511 bytes
static void tcp_send(int s, const char *line) {
  char b[512] = {0};
  snprintf(b, sizeof b, "%s", line);
  if (write(s, b, sizeof b) != (ssize_t)sizeof b) DIE("tcp write");
}
static void tcp_recv(int s, char *b) {
  size_t got = 0;
  while (got < 512) {
    struct pollfd pf = {.fd = s, .events = POLLIN};
    if (poll(&pf, 1, g_timeout * 1000) != 1) DIE("tcp: peer silent");
    ssize_t r = read(s, b + got, 512 - got);
    if (r <= 0) DIE("tcp: peer closed");
    got += r;
  }
  b[511] = 0;
}

// exchange QPNs, PSNs and GIDs, then RTR / RTS
static void connect_qps(struct peer *p, int s, int owner) {
  char line[512], gid[33], *q = line;
  uint32_t psn[kNqp], rqpn[kNqp], rpsn[kNqp];
  for (int i = 0; i < 16; i++)
    sprintf(gid + 2 * i, "%02x", p->gid.raw[i]);
  for (int i = 0; i < kNqp; i++) {
    psn[i] = (lrand48() & 0xffffff);
    q += sprintf(q, "%06x %06x ", p->qp[i]->qp_num, psn[i]);
  }
  sprintf(q, "%s", gid);
  char in[512];
  if (owner) {
    tcp_recv(s, in);
    tcp_send(s, line);
  } else {
    tcp_send(s, line);
    tcp_recv(s, in);
  }
  union ibv_gid rgid;
  char rg[33];
  if (sscanf(in, "%x %x %x %x %x %x %32s", &rqpn[0], &rpsn[0], &rqpn[1], &rpsn[1], &rqpn[2],
             &rpsn[2], rg) != 7)
    DIE("bad exchange '%s'", in);
  for (int i = 0; i < 16; i++)
    sscanf(rg + 2 * i, "%2hhx", &rgid.raw[i]);
  for (int i = 0; i < kNqp; i++) {
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = IBV_MTU_1024,
        .dest_qp_num = rqpn[i],
        .rq_psn = rpsn[i],
        .max_dest_rd_atomic = 1,
        .min_rnr_timer = 12,
        .ah_attr = {.is_global = 1,
                    .grh = {.dgid = rgid, .sgid_index = p->gid_index, .hop_limit = 64},
                    .port_num = 1}};
    if (ibv_modify_qp(p->qp[i], &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      DIE("modify_qp RTR");
    // local ACK timeout 17 (0.54 s): a TCG guest on a loaded host can be silent for longer
    // than 67 ms several times in a row (rxe_peer does the same).
    struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTS,
                            .timeout = 17,
                            .retry_cnt = 7,
                            .rnr_retry = 7,
                            .sq_psn = psn[i],
                            .max_rd_atomic = 1};
    if (ibv_modify_qp(p->qp[i], &r,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
      DIE("modify_qp RTS");
  }
}

static const char *st(enum ibv_wc_status s) {
  return ibv_wc_status_str(s);
}

static int owner(struct peer *p, int s, int lax) {
  struct ibv_mw *mw[3];
  mw[0] = ibv_alloc_mw(p->pd, IBV_MW_TYPE_1);
  mw[1] = ibv_alloc_mw(p->pd, IBV_MW_TYPE_2);
  mw[2] = ibv_alloc_mw(p->pd, IBV_MW_TYPE_2);
  if (!mw[0] || !mw[1] || !mw[2]) DIE("ibv_alloc_mw");
  const int wacc = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  uint32_t rkey[3];
  struct ibv_mw_bind_info info[3];
  for (int i = 0; i < 3; i++)
    info[i] = (struct ibv_mw_bind_info){.mr = p->mr,
                                        .addr = (uintptr_t)p->buf + kWinOff[i],
                                        .length = kWinLen[i],
                                        .mw_access_flags = wacc};
  // W1: type 1, ibv_bind_mw on QP A (mw->rkey becomes the new rkey).
  struct ibv_mw_bind b = {.wr_id = 1, .send_flags = IBV_SEND_SIGNALED, .bind_info = info[0]};
  if (ibv_bind_mw(p->qp[kQpA], mw[0], &b)) DIE("ibv_bind_mw (type 1)");
  rkey[0] = mw[0]->rkey;
  // W2: type 2, IBV_WR_BIND_MW through ibv_post_send on QP A.
  rkey[1] = ibv_inc_rkey(mw[1]->rkey);
  struct ibv_send_wr wr = {.wr_id = 2, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED};
  wr.bind_mw.mw = mw[1];
  wr.bind_mw.rkey = rkey[1];
  wr.bind_mw.bind_info = info[1];
  struct ibv_send_wr *bad = NULL;
  if (ibv_post_send(p->qp[kQpA], &wr, &bad)) DIE("ibv_post_send(IBV_WR_BIND_MW)");
  // W3: type 2, ibv_wr_bind_mw on QP C.
  rkey[2] = ibv_inc_rkey(mw[2]->rkey);
  struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(p->qp[kQpC]);
  if (!qx) DIE("ibv_qp_to_qp_ex");
  ibv_wr_start(qx);
  qx->wr_id = 3;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_bind_mw(qx, mw[2], rkey[2], &info[2]);
  if (ibv_wr_complete(qx)) DIE("ibv_wr_complete (ibv_wr_bind_mw)");
  for (int i = 0; i < 3; i++) {
    struct ibv_wc wc = poll_one(p, "bind");
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW,
          "bind of W%d (type %d, rkey 0x%08x): %s, opcode %d", (int)wc.wr_id, wc.wr_id == 1 ? 1 : 2,
          rkey[wc.wr_id - 1], st(wc.status), wc.opcode);
  }
  // The receive the accessor's SEND_WITH_INV consumes.
  struct ibv_sge sge = {.addr = (uintptr_t)p->buf, .length = 64, .lkey = p->mr->lkey};
  // (it lands at the MR's start, outside every window; the check below skips those 64 bytes)
  struct ibv_recv_wr rwr = {.wr_id = 9, .sg_list = &sge, .num_sge = 1}, *rbad = NULL;
  if (ibv_post_recv(p->qp[kQpA], &rwr, &rbad)) DIE("ibv_post_recv");
  char line[512];
  snprintf(line, sizeof line, "%08x %016llx %08x %016llx %08x %016llx", rkey[0],
           (unsigned long long)info[0].addr, rkey[1], (unsigned long long)info[1].addr, rkey[2],
           (unsigned long long)info[2].addr);
  tcp_send(s, line);
  tcp_recv(s, line);  // the accessor is done
  printf("mw_peer owner: accessor says '%s'\n", line);
  struct ibv_wc wc = poll_one(p, "the SEND_WITH_INV's receive");
  // rxe 6.1 (-L): the kernel's IB_WC_WITH_INVALIDATE (1 << 2) lands in wc_flags unchanged.
  const unsigned inv = lax ? 1u << 2 : IBV_WC_WITH_INV;
  CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.byte_len == 16 &&
            (wc.wc_flags & inv) && wc.invalidated_rkey == rkey[1],
        "receive of SEND_WITH_INV: %s, opcode %d, %u B, wc_flags 0x%x, invalidated_rkey 0x%08x "
        "(W2 0x%08x)%s",
        st(wc.status), wc.opcode, wc.byte_len, wc.wc_flags, wc.invalidated_rkey, rkey[1],
        lax ? "; rxe: IBV_WC_WITH_INV is bit 2 (the kernel's IB_WC_WITH_INVALIDATE)" : "");
  // Memory: the windows W1 and W2 hold the accessor's bytes, everything else the owner's.
  size_t bad_bytes = 0, first = 0;
  for (size_t i = 64; i < kBuf; i++) {
    int in = (i >= kWinOff[0] && i < kWinOff[0] + kWinLen[0]) ||
             (i >= kWinOff[1] && i < kWinOff[1] + kWinLen[1]);
    uint8_t want = in ? access_byte(i) : owner_byte(i);
    if (p->buf[i] != want && bad_bytes++ == 0) first = i;
  }
  CHECK(bad_bytes == 0,
        "buffer: windows W1 / W2 written, the rest untouched (%zu bad bytes, first at %zu)",
        bad_bytes, first);
  for (int i = 0; i < 3; i++)
    ibv_dealloc_mw(mw[i]);
  return 0;
}

// post one RDMA op on QP i and wait for its completion; returns its status
static enum ibv_wc_status rdma(struct peer *p, int i, enum ibv_wr_opcode op, uint32_t rkey,
                               uint64_t raddr, size_t off, uint32_t len, const char *what) {
  struct ibv_sge sge = {.addr = (uintptr_t)p->buf + off, .length = len, .lkey = p->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = 100 + i,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = op,
                           .send_flags = IBV_SEND_SIGNALED};
  wr.wr.rdma.rkey = rkey;
  wr.wr.rdma.remote_addr = raddr;
  struct ibv_send_wr *bad = NULL;
  if (ibv_post_send(p->qp[i], &wr, &bad)) DIE("ibv_post_send (%s)", what);
  struct ibv_wc wc = poll_one(p, what);
  return wc.status;
}

static int accessor(struct peer *p, int s, int lax) {
  char line[512];
  uint32_t rkey[3];
  unsigned long long addr[3];
  tcp_recv(s, line);
  if (sscanf(line, "%x %llx %x %llx %x %llx", &rkey[0], &addr[0], &rkey[1], &addr[1], &rkey[2],
             &addr[2]) != 6)
    DIE("bad window message '%s'", line);
  for (int w = 0; w < 2; w++) {
    uint32_t len = kWinLen[w];
    size_t off = kWinOff[w];
    enum ibv_wc_status r = rdma(p, kQpA, IBV_WR_RDMA_READ, rkey[w], addr[w], off, len, "READ");
    size_t badb = 0;
    for (size_t i = 0; i < len; i++)
      badb += p->buf[off + i] != owner_byte(off + i);
    CHECK(r == IBV_WC_SUCCESS && badb == 0, "READ of W%d (%u B, rkey 0x%08x): %s, %zu bad bytes",
          w + 1, len, rkey[w], st(r), badb);
    for (size_t i = 0; i < len; i++)
      p->buf[off + i] = access_byte(off + i);
    r = rdma(p, kQpA, IBV_WR_RDMA_WRITE, rkey[w], addr[w], off, len, "WRITE");
    CHECK(r == IBV_WC_SUCCESS, "WRITE to W%d (%u B): %s", w + 1, len, st(r));
    memset(p->buf + off, 0, len);
    r = rdma(p, kQpA, IBV_WR_RDMA_READ, rkey[w], addr[w], off, len, "READ back");
    badb = 0;
    for (size_t i = 0; i < len; i++)
      badb += p->buf[off + i] != access_byte(off + i);
    CHECK(r == IBV_WC_SUCCESS && badb == 0, "READ back of W%d: %s, %zu bad bytes", w + 1, st(r),
          badb);
  }
  // B: across W1's end, which is also the MR's end.
  enum ibv_wc_status r = rdma(p, kQpB, IBV_WR_RDMA_READ, rkey[0], addr[0] + kWinLen[0] - 2048, 0,
                              4096, "READ across W1's end");
  CHECK(r == IBV_WC_REM_ACCESS_ERR, "READ across the end of W1 (type 1, the MR's end too): %s",
        st(r));
  // C: across W3's end, inside the MR.
  r = rdma(p, kQpC, IBV_WR_RDMA_READ, rkey[2], addr[2] + kWinLen[2] - 2048, 0, 4096,
           "READ across W3's end");
  if (lax)
    CHECK(r == IBV_WC_SUCCESS,
          "READ across the end of W3 (type 2, inside the MR): %s (a lax owner: Linux 6.1's rxe "
          "checks the MR's range only)",
          st(r));
  else
    CHECK(r == IBV_WC_REM_ACCESS_ERR, "READ across the end of W3 (type 2, inside the MR): %s",
          st(r));
  // A: SEND_WITH_INV of W2's rkey, then W2 must refuse access.
  struct ibv_sge sge = {.addr = (uintptr_t)p->buf, .length = 16, .lkey = p->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = 7,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_SEND_WITH_INV,
                           .send_flags = IBV_SEND_SIGNALED};
  wr.invalidate_rkey = rkey[1];
  struct ibv_send_wr *bad = NULL;
  if (ibv_post_send(p->qp[kQpA], &wr, &bad)) DIE("ibv_post_send(IBV_WR_SEND_WITH_INV)");
  struct ibv_wc wc = poll_one(p, "SEND_WITH_INV");
  CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND,
        "SEND_WITH_INV of W2's rkey 0x%08x: %s", rkey[1], st(wc.status));
  r = rdma(p, kQpA, IBV_WR_RDMA_READ, rkey[1], addr[1], 0, 64, "READ of invalidated W2");
  CHECK(r == IBV_WC_REM_ACCESS_ERR, "READ inside W2 after its invalidation: %s", st(r));
  snprintf(line, sizeof line, "done, %d failed", g_fails);
  tcp_send(s, line);
  return 0;
}

int main(int argc, char **argv) {
  const char *host = NULL, *dev = NULL;
  int port = 0, lax = 0, o;
  struct peer p = {.gid_index = 1};
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2 || (strcmp(argv[1], "owner") && strcmp(argv[1], "access"))) {
    fprintf(stderr,
            "usage: %s owner|access -p PORT [-H OWNER_IP] [-d DEV] [-g GID_INDEX] [-t SECS] [-L]\n",
            argv[0]);
    return 2;
  }
  g_role = argv[1];
  optind = 2;
  while ((o = getopt(argc, argv, "p:H:d:g:t:L")) != -1)
    switch (o) {
      case 'p':
        port = atoi(optarg);
        break;
      case 'H':
        host = optarg;
        break;
      case 'd':
        dev = optarg;
        break;
      case 'g':
        p.gid_index = atoi(optarg);
        break;
      case 't':
        g_timeout = atoi(optarg);
        break;
      case 'L':
        lax = 1;
        break;
      default:
        return 2;
    }
  int is_owner = !strcmp(g_role, "owner");
  if (!port || (!is_owner && !host) || g_timeout <= 0) {
    fprintf(stderr, "%s: -p, and -H for the accessor, are required\n", argv[0]);
    return 2;
  }
  alarm(g_timeout * 3);  // the whole run, whatever blocks
  srand48(getpid() ^ time(NULL));
  setup(&p, dev, is_owner);
  int s = tcp_open(is_owner ? NULL : host, port);
  connect_qps(&p, s, is_owner);
  if (is_owner)
    owner(&p, s, lax);
  else
    accessor(&p, s, lax);
  close(s);
  printf("mw_peer %s: %s, %d check(s) failed\n", g_role, g_fails ? "FAILED" : "passed", g_fails);
  return g_fails ? 1 : 0;
}
