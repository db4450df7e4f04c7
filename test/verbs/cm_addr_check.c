// SPDX-License-Identifier: BSD-3-Clause
// What rdma-core's tools do not check of the drop-in librdmacm (doc/cm.md), built against the
// system's <rdma/rdma_cma.h> and linked with our librdmacm.so.1 (cm_ipv6.sh runs it):
//   server ADDR PORT  rdma_getaddrinfo(RAI_PASSIVE) + rdma_bind_addr + rdma_listen on ADDR
//                     (IPv6, a link-local one with %SCOPE): the bound address keeps its family
//                     and scope id; the CONNECT_REQUEST's id has AF_INET6 local / peer
//                     addresses (printed: "server peer ADDR"); accepts without a QP, waits for
//                     ESTABLISHED and DISCONNECTED, answers the DREQ.
//   client ADDR PORT  rdma_resolve_addr to ADDR: rdma_get_local_addr is AF_INET6 of the
//                     destination's kind (link-local for link-local) with its scope id,
//                     rdma_get_peer_addr is ADDR; the route's path record carries both as GIDs;
//                     connects without a QP (CONNECT_RESPONSE, rdma_establish). Then
//                     rdma_migrate_id moves the id to a second channel: the DISCONNECTED that
//                     follows rdma_disconnect arrives there, with the id, and the first channel
//                     has nothing ("client local ADDR" printed). `client-migrate` does the
//                     migration, and migrates a second id to NULL (synchronous: its
//                     rdma_resolve_addr returns resolved); `client` disconnects on the first
//                     channel.
// Exit 0 when every check passed; each failure prints "FAIL: ..." and exits 1.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what) {
  printf("FAIL: %s (errno %d: %s)\n", what, errno, strerror(errno));
  exit(1);
}
static void check(int ok, const char *what) {
  if (!ok) {
    printf("FAIL: %s\n", what);
    exit(1);
  }
}

static const char *str6(const struct sockaddr *sa, char *buf, size_t n) {
  const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
  char a[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET6) inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof a);
  snprintf(buf, n, "%s%%%u port %u", a, sa->sa_family == AF_INET6 ? in6->sin6_scope_id : 0,
           sa->sa_family == AF_INET6 ? ntohs(in6->sin6_port) : 0);
  return buf;
}

static int link_local(const struct in6_addr *a) {
  return a->s6_addr[0] == 0xfe && (a->s6_addr[1] & 0xc0) == 0x80;
}

// The next event of `ch` (blocking, up to 30 s): it must be `want` for `id` (NULL: any id).
static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want,
                                    struct rdma_cm_id *id) {
  struct pollfd p = {ch->fd, POLLIN, 0};
  if (poll(&p, 1, 30000) != 1) {
    printf("FAIL: no event within 30 s (waiting for %s)\n", rdma_event_str(want));
    exit(1);
  }
  struct rdma_cm_event *ev = NULL;
  if (rdma_get_cm_event(ch, &ev) != 0) die("rdma_get_cm_event");
  if (ev->event != want || (id != NULL && ev->id != id)) {
    printf("FAIL: got %s (status %d) for id %p, want %s for %p\n", rdma_event_str(ev->event),
           ev->status, (void *)ev->id, rdma_event_str(want), (void *)id);
    exit(1);
  }
  return ev;
}

static struct rdma_addrinfo *addr_of(const char *addr, const char *port, int passive) {
  struct rdma_addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_flags = passive ? RAI_PASSIVE : 0;
  hints.ai_family = AF_INET6;
  hints.ai_port_space = RDMA_PS_TCP;
  if (rdma_getaddrinfo(addr, port, &hints, &res) != 0) die("rdma_getaddrinfo");
  check(res->ai_family == AF_INET6, "rdma_getaddrinfo: family AF_INET6");
  return res;
}

static int server(const char *addr, const char *port) {
  char b1[128], b2[128];
  struct rdma_addrinfo *ai = addr_of(addr, port, 1);
  check(ai->ai_src_addr != NULL && ai->ai_src_addr->sa_family == AF_INET6, "passive: src AF_INET6");
  const struct sockaddr_in6 *want = (const struct sockaddr_in6 *)ai->ai_src_addr;
  struct rdma_event_channel *ch = rdma_create_event_channel();
  if (ch == NULL) die("rdma_create_event_channel");
  struct rdma_cm_id *lis = NULL;
  if (rdma_create_id(ch, &lis, NULL, RDMA_PS_TCP) != 0) die("rdma_create_id");
  if (rdma_bind_addr(lis, ai->ai_src_addr) != 0) die("rdma_bind_addr");
  const struct sockaddr_in6 *got = (const struct sockaddr_in6 *)rdma_get_local_addr(lis);
  printf("server bound %s\n", str6(rdma_get_local_addr(lis), b1, sizeof b1));
  check(got->sin6_family == AF_INET6 && memcmp(&got->sin6_addr, &want->sin6_addr, 16) == 0 &&
            got->sin6_port == want->sin6_port && got->sin6_scope_id == want->sin6_scope_id,
        "rdma_get_local_addr after bind: the address, port and scope id bound");
  if (rdma_listen(lis, 4) != 0) die("rdma_listen");
  printf("server listening\n");
  fflush(stdout);

  struct rdma_cm_event *ev = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
  check(ev->listen_id == lis, "CONNECT_REQUEST: listen_id is the listener");
  struct rdma_cm_id *c = ev->id;
  check(ev->param.conn.private_data_len >= 4 && memcmp(ev->param.conn.private_data, "cm6", 4) == 0,
        "CONNECT_REQUEST: the client's private data after rdma_cm's IPv6 header");
  rdma_ack_cm_event(ev);
  const struct sockaddr_in6 *l = (const struct sockaddr_in6 *)rdma_get_local_addr(c);
  const struct sockaddr_in6 *r = (const struct sockaddr_in6 *)rdma_get_peer_addr(c);
  printf("server local %s\n", str6(rdma_get_local_addr(c), b1, sizeof b1));
  printf("server peer %s\n", str6(rdma_get_peer_addr(c), b2, sizeof b2));
  check(l->sin6_family == AF_INET6 && r->sin6_family == AF_INET6,
        "the new id's addresses are AF_INET6");
  check(l->sin6_port == want->sin6_port, "the new id's local port is the listener's");
  check(rdma_get_src_port(c) == want->sin6_port, "rdma_get_src_port of the new id");
  check(r->sin6_port != 0, "the new id's peer port (from rdma_cm's header)");
  check(link_local(&l->sin6_addr) == link_local(&want->sin6_addr) &&
            link_local(&r->sin6_addr) == link_local(&want->sin6_addr),
        "the new id's addresses are of the listener's kind");

  struct rdma_conn_param cp;
  memset(&cp, 0, sizeof cp);
  cp.qp_num = 0x4242;  // no QP: the app would move its own (rdma_accept sends the REP)
  cp.responder_resources = 1;
  cp.initiator_depth = 1;
  cp.rnr_retry_count = 7;
  if (rdma_accept(c, &cp) != 0) die("rdma_accept");
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED, c));
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED, c));
  if (rdma_disconnect(c) != 0) die("rdma_disconnect (DREP)");
  rdma_destroy_id(c);
  rdma_destroy_id(lis);
  rdma_destroy_event_channel(ch);
  rdma_freeaddrinfo(ai);
  printf("server ok\n");
  return 0;
}

static int client(const char *addr, const char *port, int migrate) {
  char b1[128];
  struct rdma_addrinfo *ai = addr_of(addr, port, 0);
  const struct sockaddr_in6 *dst = (const struct sockaddr_in6 *)ai->ai_dst_addr;
  struct rdma_event_channel *ch = rdma_create_event_channel();
  struct rdma_event_channel *ch2 = rdma_create_event_channel();
  if (ch == NULL || ch2 == NULL) die("rdma_create_event_channel");
  struct rdma_cm_id *id = NULL;
  if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) != 0) die("rdma_create_id");
  if (rdma_resolve_addr(id, NULL, ai->ai_dst_addr, 2000) != 0) die("rdma_resolve_addr");
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, id));
  const struct sockaddr_in6 *l = (const struct sockaddr_in6 *)rdma_get_local_addr(id);
  const struct sockaddr_in6 *r = (const struct sockaddr_in6 *)rdma_get_peer_addr(id);
  printf("client local %s\n", str6(rdma_get_local_addr(id), b1, sizeof b1));
  check(l->sin6_family == AF_INET6, "rdma_get_local_addr after resolve: AF_INET6");
  check(link_local(&l->sin6_addr) == link_local(&dst->sin6_addr),
        "the source address is of the destination's kind (link-local for link-local)");
  check(!link_local(&l->sin6_addr) || l->sin6_scope_id == dst->sin6_scope_id,
        "a link-local source keeps the destination's scope id");
  check(r->sin6_family == AF_INET6 && memcmp(&r->sin6_addr, &dst->sin6_addr, 16) == 0 &&
            r->sin6_port == dst->sin6_port && r->sin6_scope_id == dst->sin6_scope_id,
        "rdma_get_peer_addr: the destination, its port and scope id");
  if (rdma_resolve_route(id, 2000) != 0) die("rdma_resolve_route");
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, id));
  check(id->route.num_paths == 1 && id->route.path_rec != NULL, "one path record");
  check(memcmp(id->route.path_rec->sgid.raw, &l->sin6_addr, 16) == 0 &&
            memcmp(id->route.path_rec->dgid.raw, &dst->sin6_addr, 16) == 0,
        "the path record's GIDs are the IPv6 addresses");

  struct rdma_conn_param cp;
  memset(&cp, 0, sizeof cp);
  cp.qp_num = 0x4343;
  cp.responder_resources = 1;
  cp.initiator_depth = 1;
  cp.retry_count = 7;
  cp.rnr_retry_count = 7;
  cp.private_data = "cm6";
  cp.private_data_len = 4;
  if (rdma_connect(id, &cp) != 0) die("rdma_connect");
  rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_CONNECT_RESPONSE, id));
  if (rdma_establish(id) != 0) die("rdma_establish");

  if (!migrate) {
    if (rdma_disconnect(id) != 0) die("rdma_disconnect");
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED, id));
  } else {
    if (rdma_migrate_id(id, ch2) != 0) die("rdma_migrate_id");
    check(id->channel == ch2, "rdma_migrate_id: id->channel is the new channel");
    if (rdma_disconnect(id) != 0) die("rdma_disconnect");
    rdma_ack_cm_event(expect(ch2, RDMA_CM_EVENT_DISCONNECTED, id));
    // rdma_migrate_id(NULL): the id becomes synchronous (a channel of its own): its
    // rdma_resolve_addr returns once resolved, and nothing reaches the old channel.
    struct rdma_cm_id *sid = NULL;
    if (rdma_create_id(ch, &sid, NULL, RDMA_PS_TCP) != 0) die("rdma_create_id (second)");
    if (rdma_migrate_id(sid, NULL) != 0) die("rdma_migrate_id(NULL)");
    check(sid->channel != NULL && sid->channel != ch && sid->channel != ch2,
          "rdma_migrate_id(NULL): a channel of the id's own");
    if (rdma_resolve_addr(sid, NULL, ai->ai_dst_addr, 2000) != 0)
      die("rdma_resolve_addr on the synchronous id");
    check(rdma_get_local_addr(sid)->sa_family == AF_INET6 && rdma_get_src_port(sid) != 0,
          "the synchronous id is resolved when rdma_resolve_addr returns");
    struct rdma_cm_event *ev = NULL;
    fcntl(sid->channel->fd, F_SETFL, fcntl(sid->channel->fd, F_GETFL) | O_NONBLOCK);
    errno = 0;
    check(rdma_get_cm_event(sid->channel, &ev) != 0 && errno == EAGAIN,
          "the synchronous call took its ADDR_RESOLVED (none left on the id's channel)");
    int fl = fcntl(ch->fd, F_GETFL);
    fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
    errno = 0;
    check(rdma_get_cm_event(ch, &ev) != 0 && errno == EAGAIN,
          "the old channel has no event after rdma_migrate_id");
    rdma_destroy_id(sid);
  }
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  rdma_destroy_event_channel(ch2);
  rdma_freeaddrinfo(ai);
  printf("client ok\n");
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc != 4) {
    fprintf(stderr, "usage: %s server|client|client-migrate ADDR PORT\n", argv[0]);
    return 2;
  }
  if (strcmp(argv[1], "server") == 0) return server(argv[2], argv[3]);
  return client(argv[2], argv[3], strcmp(argv[1], "client-migrate") == 0);
}
