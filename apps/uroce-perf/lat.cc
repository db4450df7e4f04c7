// SPDX-License-Identifier: BSD-3-Clause
// The latency tests' loops: ping-pong (write_lat, send_lat) and post-to-completion.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "perf.h"

namespace uroce::perf {

// Waits (bounded) until *p == v; the peer's WRITE places it.
bool wait_byte(Side &s, const uint8_t *p, uint8_t v) {
  const uint64_t end = now_ns() + uint64_t{kWaitMs} * 1'000'000u;
  uint32_t spins = 0;
  while (__atomic_load_n(p, __ATOMIC_ACQUIRE) != v) {
    if ((++spins & 1023) == 0 && now_ns() > end)
      return s.fail("the peer's WRITE did not arrive within " + std::to_string(kWaitMs / 1000) +
                    " s");
  }
  return true;
}

// Polls until `want` completions of the given kind (send side or receive side) arrived. With -e
// an empty CQ is armed, polled once more (a completion committed before the arm) and slept on.
bool wait_cqes(Side &s, int want_send, int want_recv, Cqe *last_recv) {
  const uint64_t end = now_ns() + uint64_t{kWaitMs} * 1'000'000u;
  // One at a time: a completion that belongs to the next step (the peer may answer before our
  // own send completion is polled) stays in the CQ.
  Cqe wc[1];
  uint32_t spins = 0;
  while (want_send > 0 || want_recv > 0) {
    int n = s.ctx->poll_cq(*s.cq, wc, 1);
    if (n == 0 && s.o_.use_event) {
      s.ctx->req_notify_cq(*s.cq, false);
      n = s.ctx->poll_cq(*s.cq, wc, 1);
      if (n == 0) {
        const int w = s.ctx->wait_cq_event(*s.cq, 1000);
        if (w < 0) return s.fail(std::string("waiting for a CQ event: ") + std::strerror(-w));
        ++s.events;
        if (w == 0 && now_ns() > end)
          return s.fail("no completion for " + std::to_string(kWaitMs / 1000) + " s");
        continue;
      }
    }
    for (int i = 0; i < n; ++i) {
      if (!cqe_ok(s, wc[i], s.server_ ? "server" : "client")) return false;
      if (wc[i].opcode >= kWcRecv) {
        --want_recv;
        if (last_recv) *last_recv = wc[i];
      } else {
        --want_send;
      }
    }
    if (n == 0 && (++spins & 1023) == 0 && now_ns() > end)
      return s.fail("no completion for " + std::to_string(kWaitMs / 1000) + " s");
  }
  return true;
}

// One ping-pong step of write_lat / send_lat, or one read / atomic (client only).
// Layout of QP 0's region: slot 0 receives the peer's WRITE, slot 1 is the source.
bool lat_post(Side &s, uint64_t size, uint8_t seq) {
  const Options &o = s.o_;
  uint8_t *src = s.region_ptr(0) + s.slot + s.moff;
  Sge sge{s.region_va(0) + s.slot + s.moff, static_cast<uint32_t>(size), s.mr.lkey};
  SendWr wr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = kSignaled;
  if (o.verb == Verb::kWrite || o.verb == Verb::kSend) {
    src[size - 1] = seq;
    if (size <= static_cast<uint64_t>(o.inline_size)) wr.send_flags |= kInline;
  }
  switch (o.verb) {
    case Verb::kWrite:
      wr.opcode = kWrWrite;
      wr.remote_addr = s.remote[0].vaddr;
      wr.rkey = s.remote[0].rkey;
      break;
    case Verb::kSend:
      wr.opcode = kWrSend;
      if (o.conn == Conn::kUd) {
        wr.ah = s.ahs[0];
        wr.remote_qpn = s.remote[0].qpn;
        wr.remote_qkey = kQkey;
      }
      break;
    case Verb::kRead:
      wr.opcode = kWrRead;
      wr.remote_addr = s.remote[0].vaddr;
      wr.rkey = s.remote[0].rkey;
      sge.addr = s.region_va(0);
      break;
    case Verb::kAtomic:
      wr.opcode = o.cmp_swap ? kWrCmpSwp : kWrFetchAdd;
      wr.remote_addr = s.remote[0].vaddr;
      wr.rkey = s.remote[0].rkey;
      wr.compare_add = o.cmp_swap ? 0 : 1;
      sge.addr = s.region_va(0);
      sge.length = 8;
      break;
  }
  const int rc = s.ctx->post_send(*s.qps[0], wr);
  if (rc != 0) return s.fail(std::string("post_send: ") + std::strerror(rc));
  return true;
}

// Receive slot for send_lat: slot 0 (the source is slot 1); reposted after each message.
bool lat_recv_check(Side &s, const Cqe &c, uint64_t size, uint8_t seq) {
  if (c.byte_len != size + s.moff)
    return s.fail("a message of " + std::to_string(c.byte_len - s.moff) + " bytes, expected " +
                  std::to_string(size));
  const uint8_t *d = s.region_ptr(0) + (c.wr_id & 0xffffffffu) * s.slot + s.moff;
  if (s.o_.check) {
    for (uint64_t i = 0; i + 1 < size; ++i)
      if (d[i] != pat(0, i, size))
        return s.fail("--check: received data differs at byte " + std::to_string(i));
    if (d[size - 1] != seq) return s.fail("--check: the message's sequence byte differs");
  }
  return s.post_recv(0, c.wr_id & 0xffffffffu);
}

// The client's latency loop; samples in ns (RTT / 2 for write and send, as perftest).
bool run_lat(Side &s, uint64_t size, std::vector<uint64_t> *samples) {
  const Options &o = s.o_;
  samples->clear();
  samples->reserve(o.iters);
  uint8_t *dst = s.region_ptr(0);
  for (uint32_t i = 0; i < o.iters; ++i) {
    const uint8_t seq = static_cast<uint8_t>(i % 255 + 1);
    const uint64_t t0 = now_ns();
    if (!lat_post(s, size, seq)) return false;
    uint64_t t1 = 0;
    if (o.verb == Verb::kWrite) {
      if (!wait_byte(s, dst + size - 1, seq)) return false;
      t1 = now_ns();
      if (!wait_cqes(s, 1, 0, nullptr)) return false;
    } else if (o.verb == Verb::kSend) {
      Cqe rc{};
      if (!wait_cqes(s, 1, 1, &rc)) return false;
      t1 = now_ns();
      if (!lat_recv_check(s, rc, size, seq)) return false;
    } else {
      if (!wait_cqes(s, 1, 0, nullptr)) return false;
      t1 = now_ns();
    }
    const uint64_t d = t1 - t0;
    samples->push_back(o.verb == Verb::kWrite || o.verb == Verb::kSend ? d / 2 : d);
  }
  return true;
}

// The server's half of write_lat / send_lat.
bool serve_lat(Side &s, uint64_t size, uint32_t iters) {
  uint8_t *dst = s.region_ptr(0);
  for (uint32_t i = 0; i < iters; ++i) {
    const uint8_t seq = static_cast<uint8_t>(i % 255 + 1);
    if (s.o_.verb == Verb::kWrite) {
      if (!wait_byte(s, dst + size - 1, seq)) return false;
      if (!lat_post(s, size, seq)) return false;
      if (!wait_cqes(s, 1, 0, nullptr)) return false;
    } else {
      Cqe rc{};
      if (!wait_cqes(s, 0, 1, &rc)) return false;
      if (!lat_recv_check(s, rc, size, seq)) return false;
      if (!lat_post(s, size, seq)) return false;
      if (!wait_cqes(s, 1, 0, nullptr)) return false;
    }
  }
  return true;
}

}  // namespace uroce::perf
