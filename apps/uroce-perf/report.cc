// SPDX-License-Identifier: BSD-3-Clause
// perftest's result rows, and the same rows as JSON (perftest's keys) and CSV.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "perf.h"
#include "uroce_version.h"

namespace uroce::perf {

namespace {

double bw_unit(const Options &o) {
  return o.report_gbits ? 1e9 / 8 : 1048576.0;
}

// perftest's test name in its JSON ("RDMA_Write_BW_Test", "Atomic_FETCH_AND_ADD_Latency_Test").
std::string json_test_name(const Options &o) {
  std::string t;
  switch (o.verb) {
    case Verb::kWrite:
      t = "RDMA_Write_";
      break;
    case Verb::kRead:
      t = "RDMA_Read_";
      break;
    case Verb::kSend:
      t = "Send_";
      break;
    case Verb::kAtomic:
      t = o.cmp_swap ? "Atomic_CMP_AND_SWAP_" : "Atomic_FETCH_AND_ADD_";
      break;
  }
  if (o.kind == Kind::kBw) {
    if (o.bidir) t += "Bidirectional_";
    if (o.post_list > 1) t += "Post_List_";
    t += "BW_";
  } else {
    t += "Latency_";
  }
  return t + "Test";
}

std::string json_str(const std::string &s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      r += '\\';
      r += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      r += b;
    } else {
      r += c;
    }
  }
  return r + "\"";
}

// The perftest keys of one row ("MsgSize": ..., without braces), as perftest prints them.
void json_row(FILE *f, const Options &o, const Row &r, const char *ind) {
  std::fprintf(f, "%s\"MsgSize\": %" PRIu64 ",\n%s\"n_iterations\": %" PRIu64 ",\n", ind, r.size,
               ind, r.iters);
  if (o.kind == Kind::kBw) {
    std::fprintf(f, "%s\"BW_peak\": %.2f,\n%s\"BW_average\": %.2f,\n%s\"MsgRate\": %.6f", ind,
                 r.bw_peak, ind, r.bw_avg, ind, r.msg_rate);
  } else {
    std::fprintf(f,
                 "%s\"t_min\": %.2f,\n%s\"t_max\": %.2f,\n%s\"t_typical\": %.2f,\n%s\"t_avg\": "
                 "%.2f,\n%s\"t_stdev\": %.2f,\n%s\"percentile_99\": %.2f,\n%s\"percentile_99.9\": "
                 "%.2f",
                 ind, r.t_min, ind, r.t_max, ind, r.t_typical, ind, r.t_avg, ind, r.t_stdev, ind,
                 r.p99, ind, r.p999);
  }
}

}  // namespace

Row bw_row(const Options &o, uint64_t size, uint64_t iters, const BwResult &r) {
  auto rate = [](uint64_t msgs, uint64_t ns) {
    return ns ? static_cast<double>(msgs) * 1e9 / static_cast<double>(ns) : 0.0;
  };
  // -b: both directions summed, as perftest.
  const double mps = rate(r.msgs, r.ns) + rate(r.peer_msgs, r.peer_ns);
  Row row;
  row.size = size;
  row.iters = iters;
  row.bw_avg = mps * static_cast<double>(size) / bw_unit(o);
  row.bw_peak = (r.peak_bps + r.peer_peak_bps) / bw_unit(o);
  row.msg_rate = mps / 1e6;
  return row;
}

Row lat_row(uint64_t size, std::vector<uint64_t> &v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  double sum = 0, sq = 0;
  for (uint64_t x : v)
    sum += static_cast<double>(x);
  const double avg = sum / n;
  for (uint64_t x : v)
    sq += (static_cast<double>(x) - avg) * (static_cast<double>(x) - avg);
  auto pct = [&](double p) {
    size_t i = static_cast<size_t>(std::ceil(p * n));
    if (i > 0) --i;
    return static_cast<double>(v[std::min(i, n - 1)]) / 1000.0;
  };
  Row r;
  r.size = size;
  r.iters = n;
  r.t_min = v.front() / 1000.0;
  r.t_max = v.back() / 1000.0;
  r.t_typical = v[n / 2] / 1000.0;
  r.t_avg = avg / 1000.0;
  r.t_stdev = (n > 1 ? std::sqrt(sq / (n - 1)) : 0) / 1000.0;
  r.p50 = r.t_typical;  // the median, as perftest's t_typical
  r.p90 = pct(0.9);
  r.p99 = pct(0.99);
  r.p999 = pct(0.999);
  r.p9999 = pct(0.9999);
  return r;
}

void print_row(const Options &o, const Row &r) {
  if (o.kind == Kind::kBw) {
    std::printf(" %-7" PRIu64 "    %-10" PRIu64 "       %-7.2f            %-7.2f\t\t   %-7.6f\n",
                r.size, r.iters, r.bw_peak, r.bw_avg, r.msg_rate);
  } else {
    std::printf(" %-7" PRIu64 " %-10" PRIu64
                "  %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f"
                "\t\t%-7.2f \t\t%-7.2f\n",
                r.size, r.iters, r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p999);
  }
}

std::string write_json(const Options &o, const Side &s, const std::vector<Row> &rows,
                       const char *check) {
  FILE *f = std::fopen(o.out_json_file.c_str(), "w");
  if (f == nullptr) return "cannot write " + o.out_json_file + ": " + std::strerror(errno);
  const bool bw = o.kind == Kind::kBw;
  // "test_info": perftest 4.5's keys (perftest_parameters.c write_test_info_to_file).
  std::fprintf(f, "{\n\"test_info\": {\n\"test\": %s,\n", json_str(json_test_name(o)).c_str());
  if (o.use_event) std::fprintf(f, "\"Test with events\": \"Using_uroce_comp0\",\n");
  std::fprintf(f, "\"Dual_port\": \"OFF\",\n\"Device\": \"uroce\",\n");
  std::fprintf(f, "\"Number_of_qps\": %u,\n\"Transport_type\": \"IB\",\n", o.qps);
  std::fprintf(f, "\"Connection_type\": \"%s\",\n\"Using_SRQ\": \"%s\",\n", conn_name(o.conn),
               o.use_srq ? "ON" : "OFF");
  std::fprintf(f, "\"PCIe_relax_order\": \"Unsupported\",\n\"ibv_wr_API\": \"OFF\",\n");
  std::fprintf(f, "\"TX_depth\": %u,\n", o.tx_depth);
  if (o.post_list > 1) std::fprintf(f, "\"Post_List\": %u,\n", o.post_list);
  if (o.verb == Verb::kSend && s.rx_depth != 0) std::fprintf(f, "\"RX_depth\": %u,\n", s.rx_depth);
  if (bw) std::fprintf(f, "\"CQ_Moderation\": %u,\n", o.cq_mod);
  std::fprintf(f, "\"Mtu\": %u,\n\"Link_type\": \"Ethernet\",\n", mtu_bytes(s.path_mtu));
  std::fprintf(f, "\"GID_index\": %d,\n", s.gid_index);
  if (o.verb != Verb::kRead && o.verb != Verb::kAtomic)
    std::fprintf(f, "\"Max_inline_data\": %d,\n", o.inline_size);
  else
    std::fprintf(f, "\"Outstand_reads\": 16,\n");
  std::fprintf(f, "\"rdma_cm_QPs\": \"OFF\",\n\"Data_ex_method\": \"Ethernet\"\n},\n");
  // "results": the last row (perftest rewrites its file for each size: the last one stays).
  std::fprintf(f, "\"results\": {\n");
  if (!rows.empty()) json_row(f, o, rows.back(), "");
  std::fprintf(f, "\n},\n");
  // "uroce": every row (-a), the units and what perftest does not report.
  std::fprintf(f, "\"uroce\": {\n  \"version\": \"%s\",\n  \"test\": \"%s\",\n", UROCE_VERSION,
               o.test.c_str());
  std::fprintf(f, "  \"bidirectional\": %s,\n", o.bidir ? "true" : "false");
  if (bw) {
    std::fprintf(f, "  \"bw_unit\": \"%s\",\n  \"msg_rate_unit\": \"Mpps\",\n",
                 o.report_gbits ? "Gb/sec" : "MB/sec");
    if (o.duration != 0) std::fprintf(f, "  \"duration_s\": %u,\n", o.duration);
  } else {
    std::fprintf(f, "  \"latency_unit\": \"usec\",\n");
  }
  std::fprintf(f, "  \"data_check\": \"%s\",\n  \"rows\": [", check);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::fprintf(f, "%s\n    {\n", i ? "," : "");
    json_row(f, o, rows[i], "      ");
    if (!bw)
      std::fprintf(f,
                   ",\n      \"percentiles\": {\"50\": %.2f, \"90\": %.2f, \"99\": %.2f, "
                   "\"99.9\": %.2f, \"99.99\": %.2f}",
                   rows[i].p50, rows[i].p90, rows[i].p99, rows[i].p999, rows[i].p9999);
    if (rows[i].received != UINT64_MAX)
      std::fprintf(f, ",\n      \"received\": %" PRIu64, rows[i].received);
    std::fprintf(f, "\n    }");
  }
  std::fprintf(f, "\n  ]\n}\n}\n");
  const bool ok = std::fflush(f) == 0 && !std::ferror(f);
  const int e = errno;
  std::fclose(f);
  if (!ok) return "cannot write " + o.out_json_file + ": " + std::strerror(e);
  return "";
}

std::string write_csv(const Options &o, const std::vector<Row> &rows) {
  FILE *f = std::fopen(o.out_csv_file.c_str(), "w");
  if (f == nullptr) return "cannot write " + o.out_csv_file + ": " + std::strerror(errno);
  const char *unit = o.report_gbits ? "Gb/sec" : "MB/sec";
  if (o.kind == Kind::kBw) {
    std::fprintf(f,
                 "test,connection,qps,bidirectional,bytes,iterations,bw_peak[%s],bw_average[%s],"
                 "msg_rate[Mpps]\n",
                 unit, unit);
    for (const Row &r : rows)
      std::fprintf(f, "%s,%s,%u,%d,%" PRIu64 ",%" PRIu64 ",%.2f,%.2f,%.6f\n", o.test.c_str(),
                   conn_name(o.conn), o.qps, o.bidir ? 1 : 0, r.size, r.iters, r.bw_peak, r.bw_avg,
                   r.msg_rate);
  } else {
    std::fprintf(f,
                 "test,connection,bytes,iterations,t_min[usec],t_max[usec],t_typical[usec],"
                 "t_avg[usec],t_stdev[usec],p99[usec],p99.9[usec],p50[usec],p90[usec],"
                 "p99.99[usec]\n");
    for (const Row &r : rows)
      std::fprintf(f,
                   "%s,%s,%" PRIu64 ",%" PRIu64
                   ",%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,"
                   "%.2f\n",
                   o.test.c_str(), conn_name(o.conn), r.size, r.iters, r.t_min, r.t_max,
                   r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p999, r.p50, r.p90, r.p9999);
  }
  const bool ok = std::fflush(f) == 0 && !std::ferror(f);
  const int e = errno;
  std::fclose(f);
  if (!ok) return "cannot write " + o.out_csv_file + ": " + std::strerror(e);
  return "";
}

}  // namespace uroce::perf
