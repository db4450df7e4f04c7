// SPDX-License-Identifier: BSD-3-Clause
// Kernel TCP ping-pong latency over loopback: the baseline of bench/run-verbs.sh (doc/perf.md,
// "Verbs shim"). Two processes (a server forked from the client), one TCP connection on
// 127.0.0.1 with TCP_NODELAY; the client sends SIZE bytes, the server echoes them, N times
// after W warm-up rounds. Prints the round trips' half (one-way latency, the way perftest's
// ib_*_lat report it) as min / median / average / p99 in microseconds, and the same in one
// machine-readable line:
//   tcp_pingpong size=8 iters=10000 min_us=.. median_us=.. avg_us=.. p99_us=..
// Blocking sockets (the kernel's usual path: a syscall per send and receive, wake-ups);
// --busy makes both sides spin on non-blocking recv() instead.
//
//   tcp_pingpong [--size BYTES] [--iters N] [--warmup N] [--busy]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

bool full_io(int fd, char *buf, size_t len, bool send_side, bool busy) {
  size_t done = 0;
  while (done < len) {
    const ssize_t n = send_side ? ::send(fd, buf + done, len - done, MSG_NOSIGNAL)
                                : ::recv(fd, buf + done, len - done, busy ? MSG_DONTWAIT : 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EINTR || (busy && (errno == EAGAIN || errno == EWOULDBLOCK)))) {
      continue;
    } else {
      return false;
    }
  }
  return true;
}

int usage() {
  std::fprintf(stderr, "usage: tcp_pingpong [--size BYTES] [--iters N] [--warmup N] [--busy]\n");
  return 2;
}

}  // namespace

int main(int argc, char **argv) {
  size_t size = 8;
  long iters = 10000, warmup = 1000;
  bool busy = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto num = [&](long lo, long hi) -> long {
      if (i + 1 >= argc) return -1;
      char *end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      return (*end || v < lo || v > hi) ? -1 : v;
    };
    long v;
    if (a == "--size" && (v = num(1, 1 << 20)) > 0)
      size = static_cast<size_t>(v);
    else if (a == "--iters" && (v = num(1, 100000000)) > 0)
      iters = v;
    else if (a == "--warmup" && (v = num(0, 100000000)) >= 0)
      warmup = v;
    else if (a == "--busy")
      busy = true;
    else
      return usage();
  }

  const int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  if (ls < 0) return std::perror("socket"), 1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = 0;  // any free port
  socklen_t sl = sizeof sa;
  if (::bind(ls, reinterpret_cast<sockaddr *>(&sa), sizeof sa) || ::listen(ls, 1) ||
      ::getsockname(ls, reinterpret_cast<sockaddr *>(&sa), &sl))
    return std::perror("bind/listen"), 1;
  const int one = 1;

  const pid_t pid = ::fork();
  if (pid < 0) return std::perror("fork"), 1;
  if (pid == 0) {  // server: echo
    const int c = ::accept(ls, nullptr, nullptr);
    if (c < 0) _exit(1);
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::vector<char> buf(size);
    for (long i = 0; i < warmup + iters; ++i)
      if (!full_io(c, buf.data(), size, false, busy) || !full_io(c, buf.data(), size, true, busy))
        _exit(1);
    _exit(0);
  }
  ::close(ls);
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (s < 0 || ::connect(s, reinterpret_cast<sockaddr *>(&sa), sizeof sa)) {
    std::perror("connect");
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return 1;
  }
  std::vector<char> buf(size, 'p');
  std::vector<double> half_us;
  half_us.reserve(static_cast<size_t>(iters));
  bool ok = true;
  for (long i = 0; ok && i < warmup + iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    ok = full_io(s, buf.data(), size, true, busy) && full_io(s, buf.data(), size, false, busy);
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= warmup)
      half_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 2);
  }
  ::close(s);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (!ok || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::fprintf(stderr, "tcp_pingpong: the exchange failed\n");
    return 1;
  }
  std::sort(half_us.begin(), half_us.end());
  double sum = 0;
  for (double v : half_us)
    sum += v;
  const size_t n = half_us.size();
  const double med = half_us[n / 2], p99 = half_us[std::min(n - 1, n * 99 / 100)];
  std::printf("TCP ping-pong over loopback, %zu B, %ld round trips (%s): one-way = RTT/2\n", size,
              iters, busy ? "busy-polling" : "blocking");
  std::printf(
      "tcp_pingpong size=%zu iters=%ld min_us=%.2f median_us=%.2f avg_us=%.2f p99_us=%.2f\n", size,
      iters, half_us[0], med, sum / static_cast<double>(n), p99);
  return 0;
}
