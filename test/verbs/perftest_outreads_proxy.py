#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# A TCP relay for perftest's out-of-band exchange (used by perftest.sh) that makes each side
# believe its peer is a device with a larger max_qp_rd_atom, as a Linux rxe peer (128) is.
#
# perftest 4.5 sends each QP's key as the ASCII record
#   LID:OUT_READS:QPN:PSN:RKEY:VADDR:GID(16 x "xx:")SRQN:
# (KEY_PRINT_FMT_GID, 108 bytes with its NUL). OUT_READS is the sender's max_qp_rd_atom for
# READ / ATOMIC tests, and the receiver uses it as max_rd_atomic when it moves its QP to RTS.
# This relay rewrites that field in both directions to the value given, and leaves every other
# byte alone.
#
# Usage: perftest_outreads_proxy.py LISTEN_PORT TARGET_PORT OUT_READS
# Accepts one connection on 127.0.0.1:LISTEN_PORT, connects it to 127.0.0.1:TARGET_PORT, relays
# until both sides closed, then prints "rewritten N" (the number of key records changed) and
# exits 0. Prints "listening" once the socket listens. Exits 1 on any error or after 110 s.
import re
import select
import socket
import sys
import time

KEY = re.compile(rb"([0-9a-f]{4}):([0-9a-f]{4})(:[0-9a-f]{6}:[0-9a-f]{6}:[0-9a-f]{8}:"
                 rb"[0-9a-f]{16}:(?:[0-9a-f]{2}:){16}[0-9a-f]{8}:\x00)")


def main():
    listen_port, target_port, out_reads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    field = b"%04x" % out_reads
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", listen_port))
    srv.listen(1)
    print("listening", flush=True)
    deadline = time.monotonic() + 110
    srv.settimeout(100)
    a, _ = srv.accept()
    b = socket.create_connection(("127.0.0.1", target_port), timeout=10)
    peer = {a: b, b: a}
    open_ = {a, b}
    rewritten = 0
    while open_ and time.monotonic() < deadline:
        r, _, _ = select.select(list(open_), [], [], 1.0)
        for s in r:
            try:
                data = s.recv(65536)
            except ConnectionResetError:
                data = b""
            if not data:
                open_.discard(s)
                try:
                    peer[s].shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                continue
            # perftest writes each record with one write() of 108 bytes, which arrives whole
            # over loopback; a record split across two reads would not be rewritten, and the
            # caller's check of the count would notice.
            data, n = KEY.subn(lambda m: m.group(1) + b":" + field + m.group(3), data)
            rewritten += n
            try:
                peer[s].sendall(data)
            except OSError:
                open_.discard(s)
    for s in (a, b):
        s.close()
    if open_:
        print("proxy: timed out", flush=True)
        sys.exit(1)
    print("rewritten %d" % rewritten, flush=True)


if __name__ == "__main__":
    main()
