// SPDX-License-Identifier: BSD-3-Clause
// The bw tests' loop (doc/uroce-perf.md, Output: bw).
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

bool cqe_ok(Side &s, const Cqe &c, const char *where) {
  if (c.status == 0) return true;
  return s.fail(std::string(" Completion with error at ") + where + ": status " +
                std::to_string(c.status) + " opcode " + std::to_string(c.opcode) + " wr_id " +
                std::to_string(c.wr_id & 0xffffffffu) + " qp " + std::to_string(c.qp_num));
}

// Fills the WR for message k of QP q.
void make_wr(Side &s, uint32_t q, uint64_t k, uint64_t size, Sge *sge, SendWr *wr) {
  const Options &o = s.o_;
  const uint64_t lslot = s.src_base + k % s.src_n;
  const uint64_t rslot = s.remote_slot(q, k);
  sge->addr = s.region_va(q) + lslot * s.slot + s.moff;
  sge->length = static_cast<uint32_t>(size);
  sge->lkey = s.mr.lkey;
  wr->sg_list = sge;
  wr->num_sge = 1;
  wr->send_flags = 0;
  switch (o.verb) {
    case Verb::kWrite:
      wr->opcode = kWrWrite;
      wr->remote_addr = s.remote[q].vaddr + rslot * s.slot;
      wr->rkey = s.remote[q].rkey;
      if (size <= static_cast<uint64_t>(o.inline_size)) wr->send_flags |= kInline;
      break;
    case Verb::kRead:
      wr->opcode = kWrRead;
      wr->remote_addr = s.remote[q].vaddr + rslot * s.slot;
      wr->rkey = s.remote[q].rkey;
      break;
    case Verb::kSend:
      wr->opcode = kWrSend;
      if (size <= static_cast<uint64_t>(o.inline_size)) wr->send_flags |= kInline;
      if (o.conn == Conn::kUd) {
        wr->ah = s.ahs[q];
        wr->remote_qpn = s.remote[q].qpn;
        wr->remote_qkey = kQkey;
      }
      break;
    case Verb::kAtomic:
      wr->opcode = o.cmp_swap ? kWrCmpSwp : kWrFetchAdd;
      wr->remote_addr = s.remote[q].vaddr;  // the first 8 bytes of the QP's remote region
      wr->rkey = s.remote[q].rkey;
      wr->compare_add = o.cmp_swap ? 0 : 1;
      wr->swap = 0;
      sge->length = 8;
      break;
  }
}

// -n iterations per QP, or -D seconds. One signaled WR every cq_mod (and the last one).
bool run_bw(Side &s, uint64_t size, BwResult *r) {
  const Options &o = s.o_;
  const uint32_t nq = static_cast<uint32_t>(s.qps.size());
  const uint64_t target = o.duration != 0 ? UINT64_MAX : o.iters;
  std::vector<uint64_t> posted(nq, 0), done(nq, 0), unsig(nq, 0);
  std::vector<uint64_t> st, sd;  // (time, completed) at each batch of completions
  st.reserve(1 << 20);
  sd.reserve(1 << 20);
  Cqe wc[32];
  const uint64_t t0 = now_ns();
  const uint64_t t_stop = o.duration != 0 ? t0 + uint64_t{o.duration} * 1'000'000'000u : 0;
  uint64_t last_progress = t0, total_done = 0, t_last = t0, events = 0;
  // --progress: one line a second with the rate of that second (this side's completions).
  const bool progress = o.progress && !s.quiet_;
  uint64_t next_report = t0 + 1'000'000'000u, report_done = 0, report_t = t0;
  uint32_t report_n = 0;
  bool stop = false;
  auto post = [&](uint32_t q, bool signal) -> int {
    Sge sge;
    SendWr wr;
    make_wr(s, q, posted[q], size, &sge, &wr);
    if (signal) {
      wr.send_flags |= kSignaled;
      wr.wr_id = (uint64_t{q} << 32) | (unsig[q] + 1);
    }
    const int rc = s.ctx->post_send(*s.qps[q], wr);
    if (rc != 0) return rc;
    ++posted[q];
    unsig[q] = signal ? 0 : unsig[q] + 1;
    return 0;
  };
  // -l: lists of post_list WRs, one post_send_list call each (perftest --post_list); the
  // signaled WR ends a list (cq_mod is a multiple of post_list, options.cc).
  const uint32_t plist = o.post_list;
  std::vector<Sge> lsge(plist);
  std::vector<SendWr> lwr(plist);
  auto post_list = [&](uint32_t q) -> int {
    uint64_t u = unsig[q];
    for (uint32_t i = 0; i < plist; ++i) {
      make_wr(s, q, posted[q] + i, size, &lsge[i], &lwr[i]);
      const bool signal = u + 1 >= o.cq_mod || posted[q] + i + 1 == target;
      if (signal) {
        lwr[i].send_flags |= kSignaled;
        lwr[i].wr_id = (uint64_t{q} << 32) | (u + 1);
        u = 0;
      } else {
        ++u;
      }
    }
    size_t n = 0;
    const int rc = s.ctx->post_send_list(*s.qps[q], lwr.data(), plist, &n);
    for (size_t i = 0; i < n; ++i)  // what went in, even if the rest did not
      unsig[q] = (lwr[i].send_flags & kSignaled) ? 0 : unsig[q] + 1;
    posted[q] += n;
    return rc;
  };
  for (;;) {
    const uint64_t now = now_ns();
    if (t_stop != 0 && !stop && now >= t_stop) {
      stop = true;
      for (uint32_t q = 0; q < nq; ++q) {
        // The WRs after the last signaled one complete with one more signaled WR.
        while (unsig[q] != 0) {
          const int rc = post(q, true);
          if (rc == ENOMEM) continue;  // the ring drains as the daemon reads it
          if (rc != 0) return s.fail(std::string("post_send: ") + std::strerror(rc));
        }
      }
    }
    bool all_posted = stop || target != UINT64_MAX;
    if (!stop) {
      for (uint32_t q = 0; q < nq; ++q) {
        while (plist > 1 && posted[q] - done[q] + plist <= o.tx_depth &&
               posted[q] + plist <= target) {
          const int rc = post_list(q);
          if (rc == ENOMEM) break;
          if (rc != 0) return s.fail(std::string("post_send: ") + std::strerror(rc));
        }
        while (plist == 1 && posted[q] - done[q] < o.tx_depth && posted[q] < target) {
          const bool signal = unsig[q] + 1 >= o.cq_mod || posted[q] + 1 == target;
          const int rc = post(q, signal);
          if (rc == ENOMEM) break;
          if (rc != 0) return s.fail(std::string("post_send: ") + std::strerror(rc));
        }
        if (posted[q] < target) all_posted = false;
      }
    }
    if (progress && now >= next_report) {
      const double dt = static_cast<double>(now - report_t) / 1e9;
      const double msgs = static_cast<double>(total_done - report_done);
      const double unit = o.report_gbits ? 1e9 / 8 : 1048576.0;
      std::printf(" progress: %u s  %.2f %s  %.6f Mpps  %" PRIu64 " messages\n", ++report_n,
                  msgs * static_cast<double>(size) / dt / unit,
                  o.report_gbits ? "Gb/sec" : "MB/sec", msgs / dt / 1e6, total_done);
      report_done = total_done;
      report_t = now;
      next_report += 1'000'000'000u;
    }
    int n = s.ctx->poll_cq(*s.cq, wc, 32);
    if (n == 0 && o.use_event && !(t_stop != 0 && !stop && now >= t_stop)) {
      // -e: arm, poll once more (a completion committed before the daemon saw the arm), sleep.
      s.ctx->req_notify_cq(*s.cq, false);
      n = s.ctx->poll_cq(*s.cq, wc, 32);
      if (n == 0) {
        const int64_t left_ms =
            t_stop != 0 && !stop ? static_cast<int64_t>((t_stop - now) / 1'000'000) + 1 : 1000;
        const int w =
            s.ctx->wait_cq_event(*s.cq, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
        if (w < 0) return s.fail(std::string("waiting for a CQ event: ") + std::strerror(-w));
        ++events;
        continue;
      }
    }
    if (n > 0) {
      const uint64_t t = now_ns();
      for (int i = 0; i < n; ++i) {
        if (!cqe_ok(s, wc[i], s.server_ ? "server" : "client")) return false;
        if (wc[i].opcode >= kWcRecv) {  // -b send_bw: the peer's messages
          if (!s.on_recv(wc[i])) return false;
          continue;
        }
        const uint32_t q = static_cast<uint32_t>(wc[i].wr_id >> 32);
        if (q >= nq) return s.fail("a completion with an unknown wr_id");
        done[q] += wc[i].wr_id & 0xffffffffu;
        total_done += wc[i].wr_id & 0xffffffffu;
      }
      if (st.size() < st.capacity()) {
        st.push_back(t);
        sd.push_back(total_done);
      }
      last_progress = t_last = t;
    } else if (now - last_progress > uint64_t{kWaitMs} * 1'000'000u) {
      return s.fail("no completion for " + std::to_string(kWaitMs / 1000) + " s (" +
                    std::to_string(total_done) + " of the messages completed)");
    }
    if (all_posted) {
      bool all_done = true;
      for (uint32_t q = 0; q < nq; ++q)
        all_done = all_done && done[q] == posted[q];
      if (all_done) break;
    }
  }
  r->msgs = total_done;
  r->ns = t_last - t0;
  r->events = events;
  r->per_qp = done;
  // Peak: the best rate over any stretch of 1/20 of the completion batches.
  r->peak_bps = 0;
  if (st.size() >= 2) {
    const size_t w = std::max<size_t>(1, st.size() / 20);
    for (size_t i = 0; i + w < st.size(); ++i) {
      const uint64_t dt = st[i + w] - st[i];
      if (dt == 0) continue;
      r->peak_bps = std::max(r->peak_bps, static_cast<double>(sd[i + w] - sd[i]) * size * 1e9 / dt);
    }
  }
  const double avg = r->ns ? static_cast<double>(r->msgs) * size * 1e9 / r->ns : 0;
  if (r->peak_bps < avg) r->peak_bps = avg;
  return true;
}

}  // namespace uroce::perf
