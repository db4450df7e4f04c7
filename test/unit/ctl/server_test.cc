// SPDX-License-Identifier: BSD-3-Clause
// Client <-> Server over a real listening socket: handshake, ping with fds, a registered verbs
// type, version mismatch, requests before hello, malformed messages after hello, client death
// (exit and SIGKILL of a forked client), stale socket files, client-side timeouts, fd hygiene,
// a server served by the client's wait hook.
#include <dirent.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ctl/client.h"
#include "ctl/server.h"
#include "shm/memfd.h"

namespace uroce::ctl {
namespace {

using shm::UniqueFd;

constexpr int kTimeoutMs = 20000;  // a bound against hangs only; nothing waits for it normally
constexpr uint16_t kEchoType = kFirstVerbsType + 1;

int count_fds() {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (readdir(d) != nullptr)
    ++n;
  closedir(d);
  return n;
}

struct Event {
  enum Kind { kConnect, kMessage, kDisconnect } kind;
  uint64_t id;
  PeerCred cred;
  std::string name;
  CtlError why;
};

class Recorder : public Handler {
 public:
  void on_connect(Server &, const ClientInfo &c) override { add({Event::kConnect, c, {}}); }
  void on_message(Server &s, const ClientInfo &c, Message &m) override {
    add({Event::kMessage, c, {}});
    if (m.hdr.type == kEchoType) {  // reply with the payload reversed, status = payload length
      uint8_t rev[kMaxPayload];
      for (uint32_t i = 0; i < m.payload_len; ++i)
        rev[i] = m.payload[m.payload_len - 1 - i];
      s.reply(c.id, m.hdr, static_cast<int32_t>(m.payload_len), rev, m.payload_len);
    }
  }
  void on_disconnect(Server &, const ClientInfo &c, CtlError why) override {
    add({Event::kDisconnect, c, why});
  }
  std::vector<Event> snapshot() {
    std::lock_guard<std::mutex> g(mu_);
    return events_;
  }
  // Waits (bounded by iterations) until `pred` holds on the events.
  template <class P>
  bool wait_for(P pred) {
    for (int i = 0; i < 20000; ++i) {
      if (pred(snapshot())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }

 private:
  struct Raw {
    Event::Kind k;
    const ClientInfo &c;
    CtlError why;
  };
  void add(Raw r) {
    std::lock_guard<std::mutex> g(mu_);
    events_.push_back({r.k, r.c.id, r.c.cred, r.c.name, r.why});
  }
  std::mutex mu_;
  std::vector<Event> events_;
};

size_t count_kind(const std::vector<Event> &ev, Event::Kind k) {
  size_t n = 0;
  for (const auto &e : ev)
    n += e.kind == k;
  return n;
}

// A server on a fresh path, polled by a background thread.
class ServerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    fds_before_ = count_fds();
    char tmpl[] = "/tmp/uroce-ctl-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/uroced.sock";
    auto s = Server::listen(path_.c_str());
    ASSERT_TRUE(s.ok()) << s.error();
    srv_ = std::move(s).value();
    ASSERT_TRUE(srv_->types().add({kEchoType, 1, 64, 0}));
    thread_ = std::thread([this] {
      while (!stop_)
        srv_->poll(5, rec_);
    });
  }
  void TearDown() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    srv_.reset();
    EXPECT_NE(access(path_.c_str(), F_OK), 0) << "socket file not removed";
    rmdir(dir_.c_str());
    EXPECT_EQ(count_fds(), fds_before_) << "fd leak";
  }
  // A raw connected socket (no handshake).
  UniqueFd raw_connect() {
    UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    struct sockaddr_un sa {};
    sa.sun_family = AF_UNIX;
    std::strcpy(sa.sun_path, path_.c_str());
    EXPECT_EQ(connect(s.get(), reinterpret_cast<sockaddr *>(&sa), sizeof(sa)), 0);
    return s;
  }

  int fds_before_ = 0;
  std::string dir_, path_;
  std::unique_ptr<Server> srv_;
  Recorder rec_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(ServerFixture, HandshakePingAndOrderlyClose) {
  {
    Client c;
    ASSERT_EQ(Client::connect(path_.c_str(), "unit-test", kTimeoutMs, &c), CtlError::kOk);
    EXPECT_EQ(c.server_info().abi_version, abi::kAbiVersion);
    EXPECT_EQ(c.server_info().max_message, kMaxMessage);
    EXPECT_EQ(c.server_info().max_fds, kMaxFds);
    EXPECT_EQ(c.server_info().server_pid, static_cast<uint32_t>(getpid()));
    EXPECT_EQ(c.server_cred().pid, getpid());
    EXPECT_NE(c.server_info().session_id, 0u);

    Message reply;
    const char msg[] = "are you there";
    ASSERT_EQ(c.call(kPing, msg, sizeof(msg), nullptr, 0, &reply, kTimeoutMs), CtlError::kOk);
    EXPECT_EQ(reply.hdr.type, kPong);
    EXPECT_EQ(reply.hdr.status, 0);
    ASSERT_EQ(reply.payload_len, sizeof(msg));
    EXPECT_EQ(std::memcmp(reply.payload, msg, sizeof(msg)), 0);

    ASSERT_EQ(c.call(kEchoType, "abc", 3, nullptr, 0, &reply, kTimeoutMs), CtlError::kUnknownType)
        << "the client must register the reply type first";
  }
  ASSERT_TRUE(
      rec_.wait_for([](const auto &ev) { return count_kind(ev, Event::kDisconnect) == 1; }));
  auto ev = rec_.snapshot();
  ASSERT_EQ(count_kind(ev, Event::kConnect), 1u);
  EXPECT_EQ(ev[0].name, "unit-test");
  EXPECT_EQ(ev[0].cred.pid, getpid());
  EXPECT_EQ(ev[0].cred.uid, geteuid());
  EXPECT_EQ(ev.back().why, CtlError::kClosed);
  EXPECT_EQ(ev.back().id, ev[0].id);
}

TEST_F(ServerFixture, RegisteredTypeReachesHandler) {
  Client c;
  ASSERT_EQ(Client::connect(path_.c_str(), "verbs", kTimeoutMs, &c), CtlError::kOk);
  ASSERT_TRUE(c.types().add({kEchoType | kReplyBit, 0, 64, 0}));
  Message reply;
  ASSERT_EQ(c.call(kEchoType, "abcd", 4, nullptr, 0, &reply, kTimeoutMs), CtlError::kOk);
  EXPECT_EQ(reply.hdr.status, 4);
  ASSERT_EQ(reply.payload_len, 4u);
  EXPECT_EQ(std::memcmp(reply.payload, "dcba", 4), 0);
  // Size rules of the registered type are enforced by the server: 0 bytes is below the minimum,
  // and the server drops the client.
  EXPECT_EQ(c.call(kEchoType, nullptr, 0, nullptr, 0, &reply, kTimeoutMs), CtlError::kClosed);
  ASSERT_TRUE(
      rec_.wait_for([](const auto &ev) { return count_kind(ev, Event::kDisconnect) == 1; }));
  EXPECT_EQ(rec_.snapshot().back().why, CtlError::kBadPayload);
}

TEST_F(ServerFixture, PingEchoesFds) {
  Client c;
  ASSERT_EQ(Client::connect(path_.c_str(), "fds", kTimeoutMs, &c), CtlError::kOk);
  auto reg = shm::SharedRegion::create("echo", shm::kPageSize);
  ASSERT_TRUE(reg.ok());
  std::memcpy(reg->map.data(), "round trip", 10);
  int fds[2] = {reg->memfd.fd(), reg->memfd.fd()};
  Message reply;
  ASSERT_EQ(c.call(kPing, "x", 1, fds, 2, &reply, kTimeoutMs), CtlError::kOk);
  ASSERT_EQ(reply.nfds, 2u);
  auto m = shm::Mapping::map(reply.fds[1].get(), shm::kPageSize);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(std::memcmp(m->data(), "round trip", 10), 0);
}

TEST_F(ServerFixture, VersionMismatchRefused) {
  UniqueFd s = raw_connect();
  HelloPayload h{};
  h.abi_version = abi::kAbiVersion + 100;
  ASSERT_EQ(send_message(s.get(), make_header(kHello, 1), &h, sizeof(h), nullptr, 0),
            CtlError::kOk);
  Message m;
  ASSERT_EQ(recv_message(s.get(), TypeTable::defaults(), &m), CtlError::kOk);
  EXPECT_EQ(m.hdr.type, kHelloReply);
  EXPECT_EQ(m.hdr.status, -EPROTO);
  HelloReplyPayload rep;
  ASSERT_TRUE(m.payload_as(&rep));
  EXPECT_EQ(rep.abi_version, abi::kAbiVersion);
  EXPECT_EQ(recv_message(s.get(), TypeTable::defaults(), &m), CtlError::kClosed);
  EXPECT_EQ(count_kind(rec_.snapshot(), Event::kConnect), 0u);
}

TEST_F(ServerFixture, RequestBeforeHelloDropsClientSilently) {
  UniqueFd s = raw_connect();
  ASSERT_EQ(send_message(s.get(), make_header(kPing, 1), "p", 1, nullptr, 0), CtlError::kOk);
  Message m;
  EXPECT_EQ(recv_message(s.get(), TypeTable::defaults(), &m), CtlError::kClosed);
  // Never connected from the handler's point of view: nothing to tear down.
  auto ev = rec_.snapshot();
  EXPECT_EQ(count_kind(ev, Event::kConnect), 0u);
  EXPECT_EQ(count_kind(ev, Event::kDisconnect), 0u);
}

TEST_F(ServerFixture, MalformedAfterHelloDisconnectsWithReason) {
  struct Case {
    const char *name;
    CtlError want;
  };
  const Case cases[] = {{"bad magic", CtlError::kBadMagic},
                        {"second hello", CtlError::kProtocol},
                        {"unsolicited reply", CtlError::kProtocol},
                        {"unknown type", CtlError::kUnknownType}};
  for (size_t i = 0; i < std::size(cases); ++i) {
    UniqueFd s = raw_connect();
    Client c;
    ASSERT_EQ(Client::handshake(std::move(s), "bad", kTimeoutMs, &c), CtlError::kOk);
    switch (i) {
      case 0: {
        MsgHeader h = make_header(kPing, 1);
        h.magic = kMagic;
        h.version = kProtoVersion;
        h.length = sizeof(h);
        h.magic = 0;
        ASSERT_EQ(::send(c.fd(), &h, sizeof(h), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(h)));
        break;
      }
      case 1: {
        HelloPayload hp{};
        hp.abi_version = abi::kAbiVersion;
        ASSERT_EQ(c.send(make_header(kHello, 7), &hp, sizeof(hp), nullptr, 0), CtlError::kOk);
        break;
      }
      case 2:
        ASSERT_EQ(c.send(make_header(kPong, 7), nullptr, 0, nullptr, 0), CtlError::kOk);
        break;
      default:
        ASSERT_EQ(c.send(make_header(0x5555, 7), nullptr, 0, nullptr, 0), CtlError::kOk);
    }
    Message m;
    EXPECT_EQ(c.recv(&m, kTimeoutMs), CtlError::kClosed) << cases[i].name;
    ASSERT_TRUE(
        rec_.wait_for([&](const auto &ev) { return count_kind(ev, Event::kDisconnect) == i + 1; }));
    EXPECT_EQ(rec_.snapshot().back().why, cases[i].want) << cases[i].name;
  }
}

// A forked client handshakes, then dies (exit without closing; then SIGKILL): the server
// reports the disconnect with the dead process's pid.
TEST_F(ServerFixture, ClientDeathDetected) {
  for (int variant = 0; variant < 2; ++variant) {
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(ready[0]);
      Client c;
      if (Client::connect(path_.c_str(), "doomed", kTimeoutMs, &c) != CtlError::kOk) _exit(3);
      char b = 1;
      if (write(ready[1], &b, 1) != 1) _exit(4);
      if (variant == 0) _exit(0);  // the kernel closes the socket
      for (;;)
        pause();  // killed by the parent
    }
    close(ready[1]);
    char b = 0;
    EXPECT_EQ(read(ready[0], &b, 1), 1);
    close(ready[0]);
    if (variant == 1) kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (variant == 0) {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    ASSERT_TRUE(rec_.wait_for([&](const auto &ev) {
      return count_kind(ev, Event::kDisconnect) == static_cast<size_t>(variant + 1);
    }));
    auto ev = rec_.snapshot();
    EXPECT_EQ(ev.back().cred.pid, pid);
    EXPECT_EQ(ev.back().name, "doomed");
    EXPECT_EQ(ev.back().why, CtlError::kClosed);
  }
  EXPECT_EQ(count_kind(rec_.snapshot(), Event::kConnect), 2u);
}

TEST_F(ServerFixture, ManyClientsInterleaved) {
  constexpr int kClients = 20;
  std::vector<Client> cs(kClients);
  for (int i = 0; i < kClients; ++i)
    ASSERT_EQ(Client::connect(path_.c_str(), "many", kTimeoutMs, &cs[i]), CtlError::kOk);
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < kClients; ++i) {
      uint64_t v = static_cast<uint64_t>(i) * 1000 + round;
      Message r;
      ASSERT_EQ(cs[i].call(kPing, &v, sizeof(v), nullptr, 0, &r, kTimeoutMs), CtlError::kOk);
      uint64_t got;
      ASSERT_TRUE(r.payload_as(&got));
      EXPECT_EQ(got, v);
    }
  }
  for (int i = 0; i < kClients; i += 2)
    cs[i].close();
  ASSERT_TRUE(rec_.wait_for(
      [&](const auto &ev) { return count_kind(ev, Event::kDisconnect) == kClients / 2; }));
  Message r;
  EXPECT_EQ(cs[1].call(kPing, "still", 5, nullptr, 0, &r, kTimeoutMs), CtlError::kOk);
}

TEST_F(ServerFixture, SecondServerOnLivePathRefused) {
  auto s2 = Server::listen(path_.c_str());
  EXPECT_FALSE(s2.ok());
  EXPECT_EQ(s2.error(), EADDRINUSE);
}

TEST(CtlServer, StaleSocketFileReplaced) {
  char tmpl[] = "/tmp/uroce-ctl-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/s";
  {  // bind, then close without unlink: what a crashed daemon leaves behind
    UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET, 0));
    struct sockaddr_un sa {};
    sa.sun_family = AF_UNIX;
    std::strcpy(sa.sun_path, path.c_str());
    ASSERT_EQ(bind(s.get(), reinterpret_cast<sockaddr *>(&sa), sizeof(sa)), 0);
  }
  ASSERT_EQ(access(path.c_str(), F_OK), 0);
  {
    auto srv = Server::listen(path.c_str());
    ASSERT_TRUE(srv.ok()) << srv.error();
  }
  // A regular file at the path is never removed.
  FILE *f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  EXPECT_EQ(Server::listen(path.c_str()).error(), EADDRINUSE);
  unlink(path.c_str());
  rmdir(tmpl);
  std::string longp(200, 'x');
  EXPECT_EQ(Server::listen(longp.c_str()).error(), ENAMETOOLONG);
}

TEST(CtlClient, NoServer) {
  Client c;
  int err = 0;
  EXPECT_EQ(Client::connect("/tmp/uroce-definitely-not-here.sock", "x", 100, &c, &err),
            CtlError::kIo);
  EXPECT_EQ(err, ENOENT);
  EXPECT_FALSE(c.connected());
}

// A "server" that accepts the bytes but never answers: the handshake ends with kTimeout.
TEST(CtlClient, HandshakeTimesOut) {
  const int before = count_fds();
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd mute(sv[1]);
  Client c;
  EXPECT_EQ(Client::handshake(UniqueFd(sv[0]), "t", 50, &c), CtlError::kTimeout);
  EXPECT_FALSE(c.connected());
  Message m;
  ASSERT_EQ(recv_message(mute.get(), TypeTable::defaults(), &m), CtlError::kOk);
  EXPECT_EQ(m.hdr.type, kHello);  // the request did go out
  mute.reset();
  EXPECT_EQ(count_fds(), before);
}

// Served through Server::adopt on a socketpair, single-threaded: the client side is driven by
// hand so the server's poll() can run between steps. The reply to a mismatched request id is a
// protocol error on the client.
TEST(CtlClient, MismatchedReplyIsProtocolError) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd srv_end(sv[1]);
  std::thread fake([&] {
    Message m;
    if (recv_message(srv_end.get(), TypeTable::defaults(), &m) != CtlError::kOk) return;
    HelloReplyPayload rep{};
    rep.abi_version = abi::kAbiVersion;
    // Wrong request id.
    send_message(srv_end.get(), make_header(kHelloReply, m.hdr.request_id + 1), &rep, sizeof(rep),
                 nullptr, 0);
  });
  Client c;
  EXPECT_EQ(Client::handshake(UniqueFd(sv[0]), "t", kTimeoutMs, &c), CtlError::kProtocol);
  fake.join();
}

// set_client_wait_hook (in-process daemons on the client's thread, wqe_fuzz): a server that
// only the hook polls answers the handshake and a ping; a hook that serves nothing still ends
// the wait at its timeout.
TEST(CtlClient, WaitHookServesServerOnSameThread) {
  Server srv;
  Recorder rec;
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  ASSERT_NE(srv.adopt(UniqueFd(sv[1])), 0u);
  struct Hook {
    Server *srv;
    Recorder *rec;
    int calls = 0;
  } hook{&srv, &rec};
  set_client_wait_hook(
      [](void *p) {
        auto *h = static_cast<Hook *>(p);
        ++h->calls;
        h->srv->poll(0, *h->rec);
      },
      &hook);
  Client c;
  const CtlError hs = Client::handshake(UniqueFd(sv[0]), "inline", kTimeoutMs, &c);
  Message reply;
  const CtlError ping =
      hs == CtlError::kOk ? c.call(kPing, "x", 1, nullptr, 0, &reply, kTimeoutMs) : hs;
  const uint16_t ping_type = reply.hdr.type;
  const int served_calls = hook.calls;
  set_client_wait_hook([](void *p) { ++static_cast<Hook *>(p)->calls; }, &hook);
  const CtlError mute = c.call(kPing, "y", 1, nullptr, 0, &reply, 50);
  set_client_wait_hook(nullptr, nullptr);
  EXPECT_EQ(hs, CtlError::kOk);
  EXPECT_EQ(ping, CtlError::kOk);
  EXPECT_EQ(ping_type, kPong);
  EXPECT_GT(served_calls, 0);
  EXPECT_EQ(mute, CtlError::kTimeout);
  EXPECT_GT(hook.calls, served_calls);
  EXPECT_EQ(count_kind(rec.snapshot(), Event::kConnect), 1u);
}

TEST(CtlServerAdopt, SocketpairClient) {
  Server srv;
  Recorder rec;
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd cli(sv[0]);
  const uint64_t id = srv.adopt(UniqueFd(sv[1]));
  ASSERT_NE(id, 0u);
  HelloPayload h{};
  h.abi_version = abi::kAbiVersion;
  std::strcpy(h.name, "adopted");
  ASSERT_EQ(send_message(cli.get(), make_header(kHello, 1), &h, sizeof(h), nullptr, 0),
            CtlError::kOk);
  for (int i = 0; i < 100 && rec.snapshot().empty(); ++i)
    srv.poll(10, rec);
  ASSERT_EQ(count_kind(rec.snapshot(), Event::kConnect), 1u);
  EXPECT_EQ(rec.snapshot()[0].name, "adopted");
  Message m;
  ASSERT_EQ(recv_message(cli.get(), TypeTable::defaults(), &m), CtlError::kOk);
  EXPECT_EQ(m.hdr.status, 0);
  // Server-initiated notice, then the daemon drops the client itself.
  ASSERT_EQ(srv.send(id, make_header(kShutdown, 0), nullptr, 0), CtlError::kOk);
  ASSERT_EQ(recv_message(cli.get(), TypeTable::defaults(), &m), CtlError::kOk);
  EXPECT_EQ(m.hdr.type, kShutdown);
  srv.disconnect(id, CtlError::kProtocol);
  srv.poll(0, rec);
  EXPECT_EQ(count_kind(rec.snapshot(), Event::kDisconnect), 1u);
  EXPECT_EQ(rec.snapshot().back().why, CtlError::kProtocol);
  EXPECT_EQ(srv.client_count(), 0u);
  EXPECT_EQ(recv_message(cli.get(), TypeTable::defaults(), &m), CtlError::kClosed);
}

}  // namespace
}  // namespace uroce::ctl
