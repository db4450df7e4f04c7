// SPDX-License-Identifier: BSD-3-Clause
// uroce-perf's out-of-band channel: one TCP connection carrying text lines (doc/uroce-perf.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace uroce::perf {

class Oob {
 public:
  Oob() = default;
  ~Oob();
  Oob(const Oob &) = delete;
  Oob &operator=(const Oob &) = delete;

  // Server: listens on port (0: an ephemeral port; *bound gets the port), on 127.0.0.1 only
  // when loopback_only, else on every address (IPv6 socket accepting IPv4 too).
  // Returns "" or an error text.
  std::string listen(uint16_t port, bool loopback_only, uint16_t *bound);
  // Waits for one client (timeout_ms < 0: forever). Returns "" or an error text.
  std::string accept(int timeout_ms);
  // Client: connects to host:port, retrying for up to timeout_ms while refused.
  std::string connect(const std::string &host, uint16_t port, int timeout_ms);

  bool send_line(const std::string &line);  // appends '\n'
  // Reads one line (without '\n'). timeout_ms < 0 waits forever. False on timeout, EOF or error
  // (*why says which).
  bool recv_line(std::string *line, int timeout_ms, std::string *why);
  // As recv_line with timeout 0, without blocking: true only when a whole line is there.
  bool try_line(std::string *line);
  // The peer closed the connection (or it failed): no more lines will come.
  bool closed() const { return closed_ && buf_.find('\n') == std::string::npos; }

 private:
  bool fill(int timeout_ms, std::string *why);
  int lfd_ = -1;
  int fd_ = -1;
  bool closed_ = false;
  std::string buf_;
};

std::vector<std::string> words(const std::string &l);  // a line split at blanks

}  // namespace uroce::perf
