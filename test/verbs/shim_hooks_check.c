// SPDX-License-Identifier: BSD-3-Clause
// The verbs shim's MR path under UCX-like memory hooks (doc/verbs.md, "Memory regions"): this
// executable defines mremap, mmap, munmap, mprotect and madvise itself, so they interpose libc's
// for every library of the process, the shim included, as UCX's memory hooks do:
//   - mremap takes four arguments, as UCX's hook does: the fifth (MREMAP_FIXED's target address)
//     is whatever happens to be there, here an unaligned address, so the kernel says EINVAL;
//   - mmap / munmap / mprotect / madvise work (raw system calls) but count the calls made from
//     inside libibverbs.so.1 while `watching` is set.
// Against one uroced (UROCE_SOCKET), two RC QPs of this process over the port's own address:
// ibv_reg_mr of unaligned heap buffers, RDMA WRITE and READ through them (the bytes the app
// sees), ibv_dereg_mr (pages private again, bytes intact), with no hooked call from the shim
// in between. A check first proves the hooks are in force (mremap(MREMAP_FIXED) from here fails).
// Prints "ok: ..." / "FAIL: ..." lines and "N failure(s)"; exit 0 iff none.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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

// ---- the hooks
static volatile int watching;
static volatile int shim_calls;  // hooked calls from libibverbs.so.1 while watching
static volatile int mremap_calls;

static void note(void *caller) {
  if (!watching) return;
  Dl_info di;
  if (dladdr(caller, &di) && di.dli_fname && strstr(di.dli_fname, "libibverbs.so")) ++shim_calls;
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
  ++mremap_calls;
  note(__builtin_return_address(0));
  // UCX 1.13's ucm_override_mremap(void *old_address, size_t old_size, size_t new_size, int
  // flags): the target of MREMAP_FIXED is lost; the kernel gets a stale register.
  return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, (void *)1);
}
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  note(__builtin_return_address(0));
  return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}
int munmap(void *addr, size_t len) {
  note(__builtin_return_address(0));
  return (int)syscall(SYS_munmap, addr, len);
}
int mprotect(void *addr, size_t len, int prot) {
  note(__builtin_return_address(0));
  return (int)syscall(SYS_mprotect, addr, len, prot);
}
int madvise(void *addr, size_t len, int advice) {
  note(__builtin_return_address(0));
  return (int)syscall(SYS_madvise, addr, len, advice);
}

// ---- verbs
static struct ibv_cq *cq;
static struct ibv_qp *qa;

static int rdma(enum ibv_wr_opcode op, void *local, uint32_t len, uint32_t lkey, void *raddr,
                uint32_t rkey) {
  struct ibv_sge sge = {(uintptr_t)local, len, lkey};
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof wr);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = (uintptr_t)raddr;
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

static int shared_with_memfd(const void *addr) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  int found = 0;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long s, e;
    if (sscanf(line, "%lx-%lx", &s, &e) == 2 && s <= (uintptr_t)addr && (uintptr_t)addr < e) {
      found = strstr(line, "memfd:uroce-verbs-mr") != NULL;
      break;
    }
  }
  if (f) fclose(f);
  return found;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  // The hooks are in force: this call goes through the 4-argument mremap and fails.
  void *p1 = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void *p2 = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  errno = 0;
  void *r = mremap(p1, 4096, 4096, MREMAP_MAYMOVE | MREMAP_FIXED, p2);
  CHECK(r == MAP_FAILED && errno == EINVAL && mremap_calls == 1,
        "the 4-argument mremap hook is in force (mremap(MREMAP_FIXED): errno %d)", errno);
  munmap(p1, 4096);
  munmap(p2, 4096);

  int num = 0;
  struct ibv_device **list = ibv_get_device_list(&num);
  if (!list || num < 1) {
    printf("FAIL: no uroce device (UROCE_SOCKET=%s)\n", getenv("UROCE_SOCKET"));
    return 1;
  }
  struct ibv_context *ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
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
  struct ibv_qp *qb = ibv_create_qp(pd, &ia);
  union ibv_gid gid;
  if (!qa || !qb || ibv_query_gid(ctx, 1, 1, &gid) || connect_qp(qa, qb->qp_num, &gid) ||
      connect_qp(qb, qa->qp_num, &gid)) {
    printf("FAIL: RC loopback setup: %s\n", strerror(errno));
    return 1;
  }

  const size_t n = 3 * 4096;
  uint8_t *dst = malloc(n), *src = malloc(n);
  for (size_t i = 0; i < n; ++i) {
    dst[i] = (uint8_t)(i * 7);
    src[i] = (uint8_t)(i ^ 0x5a);
  }
  const unsigned access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  watching = 1;
  errno = 0;
  struct ibv_mr *md = ibv_reg_mr(pd, dst + 100, n - 200, access);  // unaligned
  int e1 = errno;
  struct ibv_mr *ms = ibv_reg_mr(pd, src + 10, n - 20, access);
  watching = 0;
  int kept = 1;
  for (size_t i = 0; i < n; ++i)
    kept &= dst[i] == (uint8_t)(i * 7) && src[i] == (uint8_t)(i ^ 0x5a);
  CHECK(md && ms && kept && shared_with_memfd(dst + 100) && shared_with_memfd(src + 10),
        "ibv_reg_mr under the hooks: MRs %p %p (errno %d), contents kept, pages shared", md, ms,
        e1);
  if (!md || !ms) {
    printf("%d failure(s)\n", fails);
    return 1;
  }
  int st = rdma(IBV_WR_RDMA_WRITE, src + 10, 5000, ms->lkey, dst + 1000, md->rkey);
  int ok = st == IBV_WC_SUCCESS && memcmp(dst + 1000, src + 10, 5000) == 0 &&
           dst[999] == (uint8_t)(999 * 7) && dst[6000] == (uint8_t)(6000 * 7);
  CHECK(ok, "RDMA WRITE lands exactly in the app's bytes (status %d)", st);
  for (size_t i = 2000; i < 4000; ++i)
    dst[i] = (uint8_t)(i + 3);
  st = rdma(IBV_WR_RDMA_READ, src + 20, 2000, ms->lkey, dst + 2000, md->rkey);
  ok = st == IBV_WC_SUCCESS;
  for (size_t i = 0; i < 2000; ++i)
    ok &= src[20 + i] == (uint8_t)(2000 + i + 3);
  CHECK(ok, "RDMA READ returns what the app wrote (status %d)", st);
  watching = 1;
  int d1 = ibv_dereg_mr(md), d2 = ibv_dereg_mr(ms);
  watching = 0;
  CHECK(d1 == 0 && d2 == 0 && !shared_with_memfd(dst + 100) && !shared_with_memfd(src + 10) &&
            dst[1000] == src[10] && dst[2000] == (uint8_t)(2003),
        "ibv_dereg_mr under the hooks: private memory again, bytes intact");
  CHECK(shim_calls == 0, "no interposable memory call from the shim in reg / dereg (%d made)",
        shim_calls);
  ibv_destroy_qp(qa);
  ibv_destroy_qp(qb);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
