#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The attacker of uroced_attack.sh: forges RoCE v2 frames against a live RC connection.

Runs in the namespace that joins the two daemons' veths (the segment), so it can send on either
link and, for the on-path phases, read what passes. Frames are packed here with struct and
their ICRC computed with zlib.crc32 over the masked fields (IBTA Annex A17.3.3); a frame of each
shape is checked against scapy.contrib.roce's ICRC first, so a wrong ICRC cannot pass unnoticed
(a frame with a bad ICRC would be dropped as a parse error, not by the checks under test).

Phases (one per run, JSON counts of what was sent on stdout):
  blind     an off-path attacker: knows the hosts' MAC / IP addresses (ARP) and sends with the
            peer's addresses as source, guessing everything else: WRITE / READ requests with
            random rkey, VA and PSN, ACKs, NAKs (sequence, remote access) and RNR NAKs with
            random PSN / MSN, CNPs -- all to random QPNs. QPNs of the live connection are left
            out of the guesses (QPNS file) so that every frame must be counted as no_qp; the
            odds of guessing one are in doc/security.md.
  wrongsrc  the live QPNs, but the attacker's own address as source: every frame must be
            dropped as address (the GIDs are not the connection's).
  cnp       an on-path attacker floods the live QPNs with CNPs (RoCE cannot authenticate them).
  responses an on-path attacker sends ACK / NAK / RNR NAK to the requester's live QPN with
            PSNs outside its window: half ahead (bad_response), half long past (duplicate).
  rkey      an on-path attacker watches the requester's frames, waits for a quiet gap, and
            sends WRITEs and READs with guessed rkeys at the responder's next 256 PSNs.

Usage: roce_attacker.py PHASE --to-a IFACE --to-b IFACE --mac-a M --mac-b M --ip-a IP --ip-b IP
       --qpns FILE [--count N] [--seed S] [--self-ip IP]
"""

import argparse
import ipaddress
import json
import random
import socket
import struct
import sys
import time
import zlib

ROCE_PORT = 4791
OP_WRITE_ONLY = 0x0A
OP_READ_REQ = 0x0C
OP_ACK = 0x11
OP_CNP = 0x81
OP_WRITE_FIRST, OP_SEND_FIRST = 0x06, 0x00


def ip_checksum(h):
    s = sum(struct.unpack("!10H", h))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(smac, dmac, sip, dip, opcode, dqpn, psn, ext=b"", payload=b"", ackreq=True, becn=False,
          sport=None):
    """Ethernet / IPv4 / UDP / BTH / ext / payload / pad / ICRC."""
    pad = (4 - len(payload) % 4) % 4
    body = ext + payload + b"\0" * pad
    bth = struct.pack("!BBHII", opcode, pad << 4, 0xFFFF, (0x40 if becn else 0) << 24 | dqpn,
                      (0x80000000 if ackreq else 0) | (psn & 0xFFFFFF))
    udp_len = 8 + len(bth) + len(body) + 4
    sport = sport if sport is not None else 0xC000 | random.getrandbits(14)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, random.getrandbits(16),
                               0x4000, 64, 17, 0, ipaddress.IPv4Address(sip).packed,
                               ipaddress.IPv4Address(dip).packed))
    struct.pack_into("!H", ip, 10, ip_checksum(bytes(ip)))
    udp = struct.pack("!HHHH", sport, ROCE_PORT, udp_len, 0)
    # ICRC: pseudo LRH of 8 x 0xFF, then IP TOS / TTL / checksum, UDP checksum and BTH byte 4
    # masked to ones (IBTA A17.3.3).
    mip = bytearray(ip)
    mip[1] = 0xFF
    mip[8] = 0xFF
    mip[10:12] = b"\xff\xff"
    mudp = udp[:6] + b"\xff\xff"
    mbth = bth[:4] + b"\xff" + bth[5:]
    icrc = zlib.crc32(b"\xff" * 8 + bytes(mip) + mudp + mbth + body) & 0xFFFFFFFF
    eth = bytes.fromhex(dmac.replace(":", "")) + bytes.fromhex(smac.replace(":", "")) + b"\x08\x00"
    return eth + bytes(ip) + udp + bth + body + struct.pack("<I", icrc)


def check_icrc_with_scapy(f):
    from scapy.contrib.roce import BTH  # noqa: F401 (binds UDP 4791 to BTH)
    from scapy.layers.l2 import Ether
    p = Ether(f)
    want = bytes(p)[-4:]
    p[BTH].icrc = None
    got = bytes(Ether(bytes(p)))[-4:]
    if got != want:
        sys.exit("roce_attacker: ICRC %s differs from scapy's %s" % (want.hex(), got.hex()))


def reth(va, rkey, length):
    return struct.pack("!QII", va, rkey, length)


def aeth(syndrome, msn):
    return struct.pack("!I", syndrome << 24 | (msn & 0xFFFFFF))


class Link:
    def __init__(self, iface):
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        self.s.bind((iface, 0))
        self.sent = 0
        self.pace = True

    def send(self, f):
        self.s.send(f)
        self.sent += 1
        if self.pace and self.sent % 32 == 0:  # bursts of 32: the daemon's af_packet ring never overflows
            time.sleep(0.004)


def guess_qpn(live):
    while True:
        q = random.getrandbits(24)
        if q not in live and q > 1:
            return q


def forged_kinds():
    """(name, function() -> (opcode, psn, ext, payload, becn))"""
    r = random.getrandbits
    return [
        ("write", lambda: (OP_WRITE_ONLY, r(24), reth(r(64), r(32), 64), bytes(r(8) for _ in range(64)), False)),
        ("read", lambda: (OP_READ_REQ, r(24), reth(r(64), r(32), 4096), b"", False)),
        ("ack", lambda: (OP_ACK, r(24), aeth(0x1F, r(24)), b"", False)),
        ("nak_seq", lambda: (OP_ACK, r(24), aeth(0x60, r(24)), b"", False)),
        ("nak_access", lambda: (OP_ACK, r(24), aeth(0x62, r(24)), b"", False)),
        ("rnr_nak", lambda: (OP_ACK, r(24), aeth(0x20 | r(5), r(24)), b"", False)),
        ("cnp", lambda: (OP_CNP, 0, b"\0" * 16, b"", True)),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("phase", choices=["blind", "wrongsrc", "cnp", "responses", "rkey"])
    for a in ("--to-a", "--to-b", "--mac-a", "--mac-b", "--ip-a", "--ip-b", "--qpns"):
        ap.add_argument(a, required=True)
    ap.add_argument("--count", type=int, default=700)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--self-ip", default="10.78.0.66")
    ap.add_argument("--self-mac", default="02:00:00:00:00:66")
    o = ap.parse_args()
    random.seed(o.seed)
    qa, qb = (int(x) for x in open(o.qpns).read().split())
    live = {qa, qb}
    to_a, to_b = Link(o.to_a), Link(o.to_b)
    # (link, our source MAC / IP as the peer, destination MAC / IP, the live QPN there)
    sides = {"a": (to_a, o.mac_b, o.ip_b, o.mac_a, o.ip_a, qa),
             "b": (to_b, o.mac_a, o.ip_a, o.mac_b, o.ip_b, qb)}
    sent = {"a": {}, "b": {}}
    # Our ICRC against scapy's, before anything is sent (importing scapy takes a while: not
    # inside the on-path phases' quiet gap).
    for opc, ext, pay in ((OP_WRITE_ONLY, reth(1, 2, 64), b"x" * 64), (OP_ACK, aeth(0x1F, 1), b""),
                          (OP_CNP, b"\0" * 16, b"")):
        check_icrc_with_scapy(frame(o.mac_a, o.mac_b, o.ip_a, o.ip_b, opc, qb, 5, ext, pay))

    def emit(side, kind, f):
        sides[side][0].send(f)
        sent[side][kind] = sent[side].get(kind, 0) + 1

    if o.phase in ("blind", "wrongsrc"):
        for side, (link, smac, sip, dmac, dip, live_qpn) in sides.items():
            if o.phase == "wrongsrc":
                smac, sip = o.self_mac, o.self_ip
            for kind, make in forged_kinds():
                for _ in range(o.count // 7):
                    opc, psn, ext, pay, becn = make()
                    q = guess_qpn(live) if o.phase == "blind" else live_qpn
                    emit(side, kind, frame(smac, dmac, sip, dip, opc, q, psn, ext, pay,
                                           ackreq=opc != OP_CNP, becn=becn))
    elif o.phase == "cnp":
        for side, (link, smac, sip, dmac, dip, live_qpn) in sides.items():
            for _ in range(o.count):
                emit(side, "cnp", frame(smac, dmac, sip, dip, OP_CNP, live_qpn, 0, b"\0" * 16,
                                        becn=True, ackreq=False))
    elif o.phase in ("responses", "rkey"):
        # On path: read the requester's (A's) frames on the segment for the responder's next
        # expected PSN, then act in a quiet gap (the victim pauses 50 ms between rounds).
        link, smac, sip, dmac, dip, _ = sides["b"]
        sniff = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        sniff.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
        sniff.bind((o.to_a, 0))
        sniff.settimeout(0.008)
        nxt, last, deadline = None, 0.0, time.time() + 60
        while time.time() < deadline:
            try:
                f = sniff.recv(4096)
            except socket.timeout:
                if nxt is not None and time.time() - last > 0.008:
                    break
                continue
            if len(f) < 14 + 20 + 8 + 12 or f[12:14] != b"\x08\x00" or f[23] != 17:
                continue
            if struct.unpack("!H", f[36:38])[0] != ROCE_PORT:
                continue
            opc = f[42]
            dq = struct.unpack("!I", f[46:50])[0] & 0xFFFFFF
            psn = struct.unpack("!I", f[50:54])[0] & 0xFFFFFF
            if dq != qb or opc >= 0x0D:  # A's requests to B only (opcodes 0x00..0x0C)
                continue
            n = 1
            if opc == OP_READ_REQ:
                n = max(1, (struct.unpack("!I", f[66:70])[0] + 1023) // 1024)
            nxt, last = (psn + n) & 0xFFFFFF, time.time()
        if nxt is None:
            sys.exit("roce_attacker: saw no request from A to QP %d within 60 s" % qb)
        if o.phase == "responses":
            la, smac_a, sip_a, dmac_a, dip_a, _ = sides["a"]
            for i in range(o.count):
                ahead = i % 2 == 0
                psn = (nxt + (1 << 22) if ahead else nxt - (1 << 22)) & 0xFFFFFF
                syn = (0x1F, 0x60, 0x20 | 14)[i % 3]
                emit("a", "ahead" if ahead else "past",
                     frame(smac_a, dmac_a, sip_a, dip_a, OP_ACK, qa, psn, aeth(syn, random.getrandbits(24))))
        else:
            # The victim may have sent a few more requests since the gap: sweep the next 256
            # PSNs in order, so one of them is likely the expected PSN when it arrives (the ones
            # below it are duplicates, the ones above sequence errors or, once the QP is in
            # ERR, dropped).
            link.pace = False  # all at once, inside the gap
            for k in range(256):
                kind, opc = ("write", OP_WRITE_ONLY) if k % 2 == 0 else ("read", OP_READ_REQ)
                emit("b", kind, frame(smac, dmac, sip, dip, opc, qb, (nxt + k) & 0xFFFFFF,
                                      reth(random.getrandbits(64), random.getrandbits(32), 64),
                                      b"\xee" * 64 if opc == OP_WRITE_ONLY else b""))
        sent["expected_psn"] = nxt
    json.dump(sent, sys.stdout)
    print()


if __name__ == "__main__":
    main()
