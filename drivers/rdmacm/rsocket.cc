// SPDX-License-Identifier: BSD-3-Clause
// rsockets (<rdma/rsocket.h>): not provided by uroce. Every call fails with EOPNOTSUPP so that a
// program linked against them loads and learns it at run time, except rpoll / rselect, which on
// ordinary file descriptors are poll(2) / select(2), as rdma-core's are (rdmacm-utils use rpoll
// on the event channel's fd). doc/cm.md.
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/select.h>

#include <cerrno>

#define UROCE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
int unsupported() {
  errno = EOPNOTSUPP;
  return -1;
}
}  // namespace

UROCE_EXPORT int rsocket(int, int, int) {
  return unsupported();
}
UROCE_EXPORT int rbind(int, const struct sockaddr *, socklen_t) {
  return unsupported();
}
UROCE_EXPORT int rlisten(int, int) {
  return unsupported();
}
UROCE_EXPORT int raccept(int, struct sockaddr *, socklen_t *) {
  return unsupported();
}
UROCE_EXPORT int rconnect(int, const struct sockaddr *, socklen_t) {
  return unsupported();
}
UROCE_EXPORT int rshutdown(int, int) {
  return unsupported();
}
UROCE_EXPORT int rclose(int) {
  return unsupported();
}
UROCE_EXPORT ssize_t rrecv(int, void *, size_t, int) {
  return unsupported();
}
UROCE_EXPORT ssize_t rrecvfrom(int, void *, size_t, int, struct sockaddr *, socklen_t *) {
  return unsupported();
}
UROCE_EXPORT ssize_t rrecvmsg(int, struct msghdr *, int) {
  return unsupported();
}
UROCE_EXPORT ssize_t rsend(int, const void *, size_t, int) {
  return unsupported();
}
UROCE_EXPORT ssize_t rsendto(int, const void *, size_t, int, const struct sockaddr *, socklen_t) {
  return unsupported();
}
UROCE_EXPORT ssize_t rsendmsg(int, const struct msghdr *, int) {
  return unsupported();
}
UROCE_EXPORT ssize_t rread(int, void *, size_t) {
  return unsupported();
}
UROCE_EXPORT ssize_t rreadv(int, const struct iovec *, int) {
  return unsupported();
}
UROCE_EXPORT ssize_t rwrite(int, const void *, size_t) {
  return unsupported();
}
UROCE_EXPORT ssize_t rwritev(int, const struct iovec *, int) {
  return unsupported();
}
UROCE_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout) {
  return poll(fds, nfds, timeout);
}
UROCE_EXPORT int rselect(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *t) {
  return select(nfds, r, w, e, t);
}
UROCE_EXPORT int rgetpeername(int, struct sockaddr *, socklen_t *) {
  return unsupported();
}
UROCE_EXPORT int rgetsockname(int, struct sockaddr *, socklen_t *) {
  return unsupported();
}
UROCE_EXPORT int rsetsockopt(int, int, int, const void *, socklen_t) {
  return unsupported();
}
UROCE_EXPORT int rgetsockopt(int, int, int, void *, socklen_t *) {
  return unsupported();
}
UROCE_EXPORT int rfcntl(int, int, ...) {
  return unsupported();
}
UROCE_EXPORT off_t riomap(int, void *, size_t, int, int, off_t) {
  return unsupported();
}
UROCE_EXPORT int riounmap(int, void *, size_t) {
  return unsupported();
}
UROCE_EXPORT size_t riowrite(int, const void *, size_t, off_t, int) {
  errno = EOPNOTSUPP;
  return 0;
}
