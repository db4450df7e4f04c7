#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes the captures that test uroce-pcap-check, and a manifest of what each frame is.

Frames are made with scapy (scapy.contrib.roce computes the IPv4 ICRC when icrc=None); the IPv6
ICRC, which scapy 2.5 leaves at 0, is computed here with zlib from the IBTA Annex A17 rules.
The pcap / pcapng files themselves are written by hand so that each record's captured and
original lengths are under the test's control.

Every frame is recorded in the manifest with what uroce-pcap-check must say about it: RoCE or
other, the opcode name of a valid RoCE frame, and the reason it is invalid (with and without
ICRC verification). The checker (check_pcap_check.py) derives the expected report from that.

Usage: gen_captures.py OUTDIR   (writes OUTDIR/*.pcap* and OUTDIR/manifest.json)
"""

import json
import os
import random
import struct
import sys
import zlib

from scapy.compat import raw
from scapy.contrib.roce import BTH, cnp
from scapy.layers.inet import IP, TCP, UDP, IPOption_NOP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, CookedLinux, CookedLinuxV2, Dot1Q, Ether
from scapy.packet import Raw

ROCE_PORT = 4791
MAC_A = "02:00:00:00:00:0a"
MAC_B = "02:00:00:00:00:0b"
IP4_A, IP4_B = "192.168.7.1", "192.168.7.2"
IP6_A, IP6_B = "fd00:7::1", "fd00:7::2"

# Names as lib/wire's opcode table spells them (the tool prints these).
OPNAMES = {
    0x00: "RC_SEND_FIRST",
    0x01: "RC_SEND_MIDDLE",
    0x02: "RC_SEND_LAST",
    0x04: "RC_SEND_ONLY",
    0x05: "RC_SEND_ONLY_WITH_IMMEDIATE",
    0x0A: "RC_RDMA_WRITE_ONLY",
    0x0B: "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
    0x0C: "RC_RDMA_READ_REQUEST",
    0x10: "RC_RDMA_READ_RESPONSE_ONLY",
    0x11: "RC_ACKNOWLEDGE",
    0x12: "RC_ATOMIC_ACKNOWLEDGE",
    0x13: "RC_CMP_SWAP",
    0x14: "RC_FETCH_ADD",
    0x17: "RC_SEND_ONLY_WITH_INVALIDATE",
    0x24: "UC_SEND_ONLY",
    0x64: "UD_SEND_ONLY",
    0x81: "CNP",
}

# The reasons lib/wire's parse_error_str() gives, and the tool's own snaplen reason.
BAD_ICRC = "bad ICRC"
BAD_IP_CSUM = "bad IPv4 header checksum"
BAD_UDP_CSUM = "bad UDP checksum"
BAD_UDP_LEN = "bad UDP length"
FRAGMENT = "IPv4 fragment"
IP_OPTIONS = "IPv4 header has options (IHL != 5)"
BAD_TVER = "BTH transport version is not 0"
BAD_OPCODE = "invalid opcode"
TRUNC_BTH = "truncated BTH"
TRUNC_EXT = "truncated extended transport header"
SNAPLEN = "truncated by capture (snaplen)"

# Extended transport headers (IBTA 9.3), network order.
def reth(va, rkey, dmalen):
    return struct.pack("!QII", va, rkey, dmalen)


def aeth(syndrome, msn):
    return struct.pack("!I", (syndrome << 24) | (msn & 0xFFFFFF))


def atomic_eth(va, rkey, swap_add, compare):
    return struct.pack("!QIQQ", va, rkey, swap_add, compare)


def atomic_ack_eth(orig):
    return struct.pack("!Q", orig)


def imm(v):
    return struct.pack("!I", v)


def deth(qkey, src_qp):
    return struct.pack("!II", qkey, src_qp & 0xFFFFFF)


def icrc_v6(l3):
    """ICRC of an IPv6 RoCE packet; l3 = IPv6 header .. last byte before the ICRC."""
    m = bytearray(l3)
    m[0] |= 0x0F  # traffic class, high nibble
    m[1] = m[2] = m[3] = 0xFF  # traffic class low nibble, flow label
    m[7] = 0xFF  # hop limit
    m[46] = m[47] = 0xFF  # UDP checksum
    m[52] = 0xFF  # BTH byte 4
    return zlib.crc32(b"\xff" * 8 + bytes(m)) & 0xFFFFFFFF


def l2(vlan=None):
    e = Ether(src=MAC_A, dst=MAC_B)
    return e / Dot1Q(vlan=vlan, prio=3) if vlan is not None else e


def pad_body(bth, body):
    """Pads the body to whole 4-byte words and sets the BTH pad count, as every RoCE sender
    does (IBTA 9.2); bodies that are already whole words are left as they are."""
    n = (4 - len(body) % 4) % 4
    if n:
        bth.padcount = n
        body = body + b"\0" * n
    return body


def roce4(bth, body=b"", ip=None, udp=None, vlan=None):
    """IPv4 RoCE frame; scapy computes the ICRC (bth.icrc left None)."""
    body = pad_body(bth, body)
    ip_kw = {"src": IP4_A, "dst": IP4_B, "tos": 0x02}
    ip_kw.update(ip or {})
    udp_kw = {"sport": 0xC123, "dport": ROCE_PORT, "chksum": 0}
    udp_kw.update(udp or {})
    p = l2(vlan) / IP(**ip_kw) / UDP(**udp_kw) / bth
    if body:
        p = p / Raw(body)
    return raw(p)


def roce6(bth, body=b"", vlan=None, corrupt_icrc=False):
    """IPv6 RoCE frame with the ICRC computed by icrc_v6 (UDP checksum 0, as RoCE sends)."""
    body = pad_body(bth, body)
    bth.icrc = 0
    p = l2(vlan) / IPv6(src=IP6_A, dst=IP6_B, tc=0x0A, fl=0x12345) / UDP(
        sport=0xC456, dport=ROCE_PORT, chksum=0) / bth
    if body:
        p = p / Raw(body)
    b = raw(p)
    l3 = 18 if vlan is not None else 14
    icrc = icrc_v6(b[l3:-4]) ^ (0x00010000 if corrupt_icrc else 0)
    return b[:-4] + struct.pack("<I", icrc)


def flip(frame, off):
    """Frame with one bit flipped at `off` (negative: from the end)."""
    b = bytearray(frame)
    b[off] ^= 0x01
    return bytes(b)


class Capture:
    """Frames of one capture and their expected verdicts."""

    def __init__(self, name, link="Ethernet", linktype=1, fmt="pcap", snaplen=65535):
        self.name, self.link, self.linktype, self.fmt, self.snaplen = (
            name, link, linktype, fmt, snaplen)
        self.records = []  # (captured bytes, original length)
        self.frames = []

    def add(self, frame, kind, op=None, reason=None, reason_no_icrc="same", proto=None,
            caplen=None, cut_before_port=False):
        """kind: 'roce' or 'other'; op: opcode byte of the frame (RoCE); reason: why the tool
        must call it invalid (None: valid); reason_no_icrc: the same with --no-icrc;
        proto: a protocol tshark must see in it; caplen: cut the record to this many bytes."""
        orig = len(frame)
        data = frame if caplen is None else frame[:caplen]
        self.records.append((data, orig))
        self.frames.append({
            "n": len(self.records),
            "kind": kind,
            "opcode": op,
            "op": OPNAMES.get(op) if op is not None else None,
            "reason": reason,
            "reason_no_icrc": reason if reason_no_icrc == "same" else reason_no_icrc,
            "proto": proto,
            "cut_before_port": cut_before_port,
        })

    def roce(self, frame, op, reason=None, reason_no_icrc="same", proto="infiniband",
             caplen=None):
        self.add(frame, "roce", op, reason, reason_no_icrc, proto, caplen)

    def other(self, frame, proto=None, caplen=None, cut_before_port=False):
        self.add(frame, "other", None, None, None, proto, caplen, cut_before_port)

    def write(self, outdir):
        path = os.path.join(outdir, self.name)
        with open(path, "wb") as f:
            if self.fmt == "pcapng":
                write_pcapng(f, self.linktype, self.snaplen, self.records)
            else:
                write_pcap(f, self.linktype, self.snaplen, self.records,
                           nano=self.fmt == "pcap-ns")
        return {"file": self.name, "link": self.link, "frames": self.frames}


def write_pcap(f, linktype, snaplen, records, nano=False):
    f.write(struct.pack("<IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0, snaplen,
                        linktype))
    for i, (data, orig) in enumerate(records):
        f.write(struct.pack("<IIII", 1700000000 + i, 1000 * i, len(data), orig))
        f.write(data)


def pcapng_block(btype, body):
    body += b"\0" * (-len(body) % 4)
    n = 12 + len(body)
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def write_pcapng(f, linktype, snaplen, records):
    f.write(pcapng_block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)))
    # if_tsresol = 9 (nanoseconds), then opt_endofopt
    opts = struct.pack("<HHB3x", 9, 1, 9) + struct.pack("<HH", 0, 0)
    f.write(pcapng_block(1, struct.pack("<HHI", linktype, 0, snaplen) + opts))
    for i, (data, orig) in enumerate(records):
        ts = (1700000000 + i) * 1000000000 + i
        f.write(pcapng_block(6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(data),
                                            orig) + data))


def arp():
    return raw(Ether(src=MAC_A, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc=IP4_A, pdst=IP4_B))


def tcp(payload=b"GET / HTTP/1.0\r\n\r\n"):
    return raw(Ether(src=MAC_A, dst=MAC_B) / IP(src=IP4_A, dst=IP4_B) /
               TCP(sport=40000, dport=80, flags="PA") / Raw(payload))


def udp_other():
    return raw(Ether(src=MAC_A, dst=MAC_B) / IP(src=IP4_A, dst=IP4_B) /
               UDP(sport=4791, dport=53) / Raw(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"))


def mixed_frames(c):
    """The main capture: valid frames of many opcodes, wire errors and non-RoCE traffic."""
    c.roce(roce4(BTH(opcode=0x04, dqpn=0x11, psn=1, ackreq=1), b"hello RoCE!!"), 0x04)
    c.other(arp(), proto="arp")
    c.roce(roce4(BTH(opcode=0x00, dqpn=0x11, psn=2), b"A" * 256), 0x00)
    c.roce(roce4(BTH(opcode=0x01, dqpn=0x11, psn=3), b"B" * 256), 0x01)
    c.roce(roce4(BTH(opcode=0x02, dqpn=0x11, psn=4, padcount=3), b"C" * 13 + b"\0" * 3), 0x02)
    c.other(tcp(), proto="tcp")
    c.roce(roce4(BTH(opcode=0x0A, dqpn=0x22, psn=10),
                 reth(0x7F0000001000, 0xABCD, 64) + bytes(range(64))), 0x0A)
    c.roce(roce4(BTH(opcode=0x0C, dqpn=0x22, psn=11), reth(0x7F0000002000, 0xABCD, 4096)), 0x0C)
    c.roce(roce4(BTH(opcode=0x11, dqpn=0x33, psn=11), aeth(0x1F, 7)), 0x11)
    c.roce(roce4(BTH(opcode=0x13, dqpn=0x22, psn=12),
                 atomic_eth(0x7F0000003000, 0xABCD, 5, 4)), 0x13)
    c.roce(roce4(BTH(opcode=0x12, dqpn=0x33, psn=12), aeth(0, 8) + atomic_ack_eth(4)), 0x12)
    c.other(udp_other(), proto="udp")
    c.roce(roce4(BTH(opcode=0x64, dqpn=0x44, psn=0), deth(0x11111111, 0x55) + b"datagram"),
           0x64)
    c.roce(roce4(cnp(0x22)), 0x81)
    c.roce(roce4(BTH(opcode=0x05, dqpn=0x11, psn=5), imm(0xDEADBEEF) + b"imm!"), 0x05)
    # 802.1Q tagged
    c.roce(roce4(BTH(opcode=0x04, dqpn=0x11, psn=6), b"vlan", vlan=100), 0x04)
    # a valid non-zero UDP checksum (scapy computes it)
    c.roce(roce4(BTH(opcode=0x24, dqpn=0x66, psn=1), b"udp checksum", udp={"chksum": None}),
           0x24)
    # IPv6, ICRC from icrc_v6
    c.roce(roce6(BTH(opcode=0x0A, dqpn=0x77, psn=100), reth(0x1000, 0x99, 8) + b"ipv6 wr!"),
           0x0A, proto="ipv6")
    c.roce(roce6(BTH(opcode=0x10, dqpn=0x77, psn=101), aeth(0, 9) + b"x" * 32, vlan=7), 0x10,
           proto="ipv6")
    # trailing bytes after the IP packet (e.g. a captured Ethernet FCS) are not part of it
    c.roce(roce4(BTH(opcode=0x14, dqpn=0x22, psn=13), atomic_eth(0x4000, 0x1, 1, 0)) +
           b"\xde\xad\xbe\xef", 0x14)
    # 3 payload bytes after the IETH, then 1 byte of pad
    c.roce(roce4(BTH(opcode=0x17, dqpn=0x11, psn=14, padcount=1),
                 struct.pack("!I", 0x1234) + b"inv" + b"\0"), 0x17)
    # --- invalid RoCE frames ---
    good = roce4(BTH(opcode=0x04, dqpn=0x11, psn=20), b"payload to corrupt!!")  # 20 B: whole words
    c.roce(flip(good, -1), 0x04, reason=BAD_ICRC, reason_no_icrc=None)  # ICRC byte
    c.roce(flip(good, -8), 0x04, reason=BAD_ICRC, reason_no_icrc=None)  # payload byte
    c.roce(roce4(BTH(opcode=0x11, dqpn=0x33, psn=21), aeth(0, 3), ip={"chksum": 0x1234}), 0x11,
           reason=BAD_IP_CSUM)
    c.roce(roce4(BTH(opcode=0x04, dqpn=0x11, psn=22), b"udpsum", udp={"chksum": 0x1234}), 0x04,
           reason=BAD_UDP_CSUM)
    c.roce(roce4(BTH(opcode=0x04, dqpn=0x11, psn=23), b"frag", ip={"flags": "MF"}), 0x04,
           reason=FRAGMENT, proto=None)
    c.roce(roce4(BTH(opcode=0x04, dqpn=0x11, psn=24), b"opts", ip={"options": [IPOption_NOP()] * 4}),
           0x04, reason=IP_OPTIONS)
    c.roce(roce4(BTH(opcode=0x04, dqpn=0x11, psn=25, version=1), b"tver"), 0x04, reason=BAD_TVER)
    c.roce(roce4(BTH(opcode=0x1F, dqpn=0x11, psn=26), b"1f!!"), 0x1F, reason=BAD_OPCODE)
    c.roce(roce4(BTH(opcode=0x0A, dqpn=0x22, psn=27), b"8 bytes!"), 0x0A, reason=TRUNC_EXT)
    c.roce(raw(Ether(src=MAC_A, dst=MAC_B) / IP(src=IP4_A, dst=IP4_B) /
               UDP(sport=0xC000, dport=ROCE_PORT, chksum=0) / Raw(b"\x04" * 10)), None,
           reason=TRUNC_BTH, proto=None)
    c.roce(roce4(BTH(opcode=0x04, dqpn=0x11, psn=28), b"udplen", udp={"len": 8 + 12 + 4 + 4}),
           0x04, reason=BAD_UDP_LEN, proto=None)
    c.roce(roce6(BTH(opcode=0x04, dqpn=0x77, psn=102), b"ipv6 bad", corrupt_icrc=True), 0x04,
           reason=BAD_ICRC, reason_no_icrc=None, proto="ipv6")
    # a later fragment of a UDP datagram has no UDP header: not classifiable as RoCE
    c.other(raw(Ether(src=MAC_A, dst=MAC_B) / IP(src=IP4_A, dst=IP4_B, proto=17, frag=100) /
                Raw(b"\x00\x00\x12\xb7" + b"\0" * 20)), proto="ip")
    c.roce(roce4(BTH(opcode=0x0B, dqpn=0x22, psn=29), reth(0x5000, 0x2, 4) + imm(1) + b"last"),
           0x0B)


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    manifest = {"captures": [], "errors": []}

    for name, fmt in (("mixed.pcap", "pcap"), ("mixed-ns.pcap", "pcap-ns"),
                      ("mixed.pcapng", "pcapng")):
        c = Capture(name, fmt=fmt)
        mixed_frames(c)
        entry = c.write(outdir)
        entry["runs"] = ["default", "quiet", "no_icrc"]
        entry["tshark"] = True
        manifest["captures"].append(entry)

    # Linux cooked capture (tshark -i any), SLL
    c = Capture("sll.pcap", link="Linux cooked (SLL)", linktype=113)
    ck = dict(pkttype=0, lladdrtype=1, lladdrlen=6, src=bytes.fromhex("02000000000a0000"))

    def sll(frame, proto=None):
        """Re-frame an Ethernet frame's L3 packet behind an SLL header."""
        eth = Ether(frame)
        p = CookedLinux(proto=proto if proto is not None else eth.type, **ck)
        return raw(p) + frame[14:]

    c.roce(sll(roce4(BTH(opcode=0x04, dqpn=0x11, psn=1), b"sll send")), 0x04)
    c.other(sll(arp()), proto="arp")
    c.roce(sll(flip(roce4(BTH(opcode=0x11, dqpn=0x33, psn=2), aeth(0, 1)), -2)), 0x11,
           reason=BAD_ICRC, reason_no_icrc=None)
    c.roce(sll(roce6(BTH(opcode=0x0C, dqpn=0x77, psn=3), reth(0x1000, 0x99, 512))), 0x0C,
           proto="ipv6")
    # VLAN tag left in the packet: the cooked protocol is 0x8100 and the tag follows
    c.roce(sll(roce4(BTH(opcode=0x04, dqpn=0x11, psn=4), b"tagged", vlan=5)), 0x04)
    c.other(raw(CookedLinux(proto=0x0004, **ck)) + b"\x42\x42\x03" + b"\0" * 20)  # 802.2 LLC
    c.other(sll(tcp()), proto="tcp")
    c.other(b"\x00\x00\x00\x01\x00\x06\x02\x00\x00\x00")  # shorter than the SLL header
    c.roce(sll(roce4(BTH(opcode=0x81, dqpn=0x22, psn=0, becn=1) / Raw(b"\0" * 16))), 0x81)
    entry = c.write(outdir)
    entry["runs"] = ["default", "quiet", "no_icrc"]
    entry["tshark"] = True
    manifest["captures"].append(entry)

    # SLL2, in pcapng as tshark writes it
    c = Capture("sll2.pcapng", link="Linux cooked v2 (SLL2)", linktype=276, fmt="pcapng")
    ck2 = dict(ifindex=3, lladdrtype=1, pkttype=4, lladdrlen=6,
               src=bytes.fromhex("02000000000b0000"))

    def sll2(frame):
        return raw(CookedLinuxV2(proto=Ether(frame).type, **ck2)) + frame[14:]

    c.roce(sll2(roce4(BTH(opcode=0x04, dqpn=0x11, psn=1), b"sll2 send")), 0x04)
    c.roce(sll2(roce4(BTH(opcode=0x64, dqpn=0x44, psn=2), deth(0x1, 0x2) + b"ud")), 0x64)
    c.roce(sll2(flip(roce4(BTH(opcode=0x0A, dqpn=0x22, psn=3), reth(0, 1, 4) + b"data"), -6)),
           0x0A, reason=BAD_ICRC, reason_no_icrc=None)
    c.other(sll2(udp_other()), proto="udp")
    big = sll2(roce4(BTH(opcode=0x0A, dqpn=0x22, psn=4), reth(0, 1, 1000) + b"z" * 1000))
    c.roce(big, 0x0A, reason=SNAPLEN, caplen=100)
    c.roce(sll2(roce6(BTH(opcode=0x11, dqpn=0x77, psn=5), aeth(0x60, 0))), 0x11, proto="ipv6")
    entry = c.write(outdir)
    entry["runs"] = ["default", "quiet", "no_icrc"]
    entry["tshark"] = True
    manifest["captures"].append(entry)

    # Frames cut by the capture's snaplen
    c = Capture("snaplen.pcap", fmt="pcap-ns", snaplen=128)
    c.roce(roce4(BTH(opcode=0x11, dqpn=0x33, psn=1), aeth(0, 1)), 0x11)
    c.roce(roce4(BTH(opcode=0x0A, dqpn=0x22, psn=2), reth(0, 1, 1024) + b"w" * 1024), 0x0A,
           reason=SNAPLEN, caplen=128)
    c.other(tcp(b"t" * 1000), proto="tcp", caplen=128)
    # IPv4/UDP, but cut before the destination port: counted as other, with a note
    c.other(roce4(BTH(opcode=0x04, dqpn=0x11, psn=3), b"cut early"), caplen=36,
            cut_before_port=True)
    c.roce(roce4(cnp(0x22)), 0x81)
    c.roce(roce6(BTH(opcode=0x04, dqpn=0x77, psn=4), b"6" * 400), 0x04, reason=SNAPLEN,
           caplen=128, proto="ipv6")
    c.roce(flip(roce4(BTH(opcode=0x04, dqpn=0x11, psn=5), b"full but bad"), -3), 0x04,
           reason=BAD_ICRC, reason_no_icrc=None)
    entry = c.write(outdir)
    entry["runs"] = ["default", "quiet", "no_icrc"]
    entry["tshark"] = True
    manifest["captures"].append(entry)

    # No RoCE at all
    c = Capture("no-roce.pcap")
    c.other(arp(), proto="arp")
    c.other(tcp(), proto="tcp")
    c.other(udp_other(), proto="udp")
    entry = c.write(outdir)
    entry["runs"] = ["default", "quiet", "expect_roce"]
    manifest["captures"].append(entry)

    # A valid file with no frame at all
    c = Capture("header-only.pcapng", fmt="pcapng")
    entry = c.write(outdir)
    entry["runs"] = ["default", "expect_roce"]
    manifest["captures"].append(entry)

    # --- files the tool must refuse (exit 2) ---
    def err(name, data, stderr, frames_before=None):
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)
        manifest["errors"].append({"file": name, "stderr": stderr,
                                   "frames_before_error": frames_before})

    one = roce4(BTH(opcode=0x04, dqpn=0x11, psn=1), b"one good frame")
    hdr = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    rec = struct.pack("<IIII", 1, 0, len(one), len(one)) + one
    err("empty.pcap", b"", "")
    err("garbage.bin", bytes(random.Random(7).getrandbits(8) for _ in range(300)), "")
    err("cut-record-header.pcap", hdr + rec + b"\x01\x02\x03\x04\x05", "read error after frame 1",
        frames_before=1)
    err("cut-record-body.pcap", hdr + rec + struct.pack("<IIII", 2, 0, 200, 200) + one[:20],
        "read error after frame 1", frames_before=1)
    err("bogus-caplen.pcap", hdr + struct.pack("<IIII", 1, 0, 0x7FFFFFF0, 0x7FFFFFF0) + one,
        "read error after frame 0", frames_before=0)
    err("cut-global-header.pcap", hdr[:10], "")
    err("raw-ip.pcap", struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101) +
        struct.pack("<IIII", 1, 0, len(one) - 14, len(one) - 14) + one[14:],
        "unsupported link type 12 (RAW)")  # LINKTYPE_RAW is DLT_RAW
    shb = pcapng_block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    err("bad-block.pcapng", shb + struct.pack("<II", 1, 0xFFFFFF00) + b"\0" * 16, "")

    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gen_captures.py OUTDIR")
    main(sys.argv[1])
