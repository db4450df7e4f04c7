#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Generates RoCE v2 test vectors with scapy, independently of uroce's C++ code.

Every frame is assembled by scapy (Ether, Dot1Q, IP, IPv6, UDP and scapy.contrib.roce's BTH,
AETH and CNPPadding). The extended headers scapy 2.5 does not model (RETH, AtomicETH,
AtomicAckETH, ImmDt, IETH, DETH) are packed here with struct from IBTA Vol. 1 ch. 9, and the
opcode table below is written from IBTA table 38, not taken from lib/wire.

ICRC (IBTA Annex A17.3.3): for IPv4 scapy computes it (BTH icrc=None); this script checks that
value against its own bit-by-bit CRC-32 and against zlib.crc32. For IPv6 scapy writes 0, so the
bit-by-bit CRC-32 over the masked bytes is stored instead.

Output: one vector per line, "v key=value ...": name is the IBTA opcode name, exts the
extended headers in wire order (comma-separated, "-" for none; the CNP's 16 reserved bytes are
not listed), every number in hexadecimal without 0x, byte strings as hex. Lines starting with
'#' are comments. The consumer is
test/unit/wire/scapy_vectors_test.cc.

Usage: gen_scapy_vectors.py OUTPUT [--seed N]
"""

import argparse
import ipaddress
import random
import struct
import sys
import zlib

import scapy
from scapy.compat import raw
from scapy.contrib.roce import AETH, BTH, CNPPadding
from scapy.layers.inet import IP, UDP, in4_chksum
from scapy.layers.inet6 import IPv6, in6_chksum
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw

ROCE_PORT = 4791

# IBTA Vol. 1 table 38: opcode -> (name, extended headers in wire order, carries payload).
_COMMON = [
    ("SEND_FIRST", [], True),
    ("SEND_MIDDLE", [], True),
    ("SEND_LAST", [], True),
    ("SEND_LAST_WITH_IMMEDIATE", ["imm"], True),
    ("SEND_ONLY", [], True),
    ("SEND_ONLY_WITH_IMMEDIATE", ["imm"], True),
    ("RDMA_WRITE_FIRST", ["reth"], True),
    ("RDMA_WRITE_MIDDLE", [], True),
    ("RDMA_WRITE_LAST", [], True),
    ("RDMA_WRITE_LAST_WITH_IMMEDIATE", ["imm"], True),
    ("RDMA_WRITE_ONLY", ["reth"], True),
    ("RDMA_WRITE_ONLY_WITH_IMMEDIATE", ["reth", "imm"], True),
]
OPCODES = {}
for i, (n, h, p) in enumerate(_COMMON):
    OPCODES[0x00 + i] = ("RC_" + n, h, p)
    OPCODES[0x20 + i] = ("UC_" + n, h, p)
OPCODES.update({
    0x0C: ("RC_RDMA_READ_REQUEST", ["reth"], False),
    0x0D: ("RC_RDMA_READ_RESPONSE_FIRST", ["aeth"], True),
    0x0E: ("RC_RDMA_READ_RESPONSE_MIDDLE", [], True),
    0x0F: ("RC_RDMA_READ_RESPONSE_LAST", ["aeth"], True),
    0x10: ("RC_RDMA_READ_RESPONSE_ONLY", ["aeth"], True),
    0x11: ("RC_ACKNOWLEDGE", ["aeth"], False),
    0x12: ("RC_ATOMIC_ACKNOWLEDGE", ["aeth", "atomicack"], False),
    0x13: ("RC_CMP_SWAP", ["atomiceth"], False),
    0x14: ("RC_FETCH_ADD", ["atomiceth"], False),
    0x16: ("RC_SEND_LAST_WITH_INVALIDATE", ["ieth"], True),
    0x17: ("RC_SEND_ONLY_WITH_INVALIDATE", ["ieth"], True),
    0x64: ("UD_SEND_ONLY", ["deth"], True),
    0x65: ("UD_SEND_ONLY_WITH_IMMEDIATE", ["deth", "imm"], True),
    0x81: ("CNP", ["cnppad"], False),
})

PAYLOAD_SIZES = [0, 1, 2, 3, 4, 5, 63, 64, 255, 1023, 1024, 4096]
NO_PAYLOAD_VARIANTS = 10  # vectors per opcode that carries no payload
SPECIAL_QPNS = [0, 1, 0xFFFFFF, None]  # None: random
SPECIAL_PSNS = [0xFFFFFE, 0xFFFFFF, 0, 1, None]
ECNS = [0, 1, 2, 3]  # Not-ECT, ECT(1), ECT(0), CE


def crc32_bitwise(data, crc=0):
    """CRC-32, reflected polynomial 0xEDB88320, init/xorout 0xFFFFFFFF; one bit at a time."""
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            if crc & 1:
                crc = (crc >> 1) ^ 0xEDB88320
            else:
                crc >>= 1
    return crc ^ 0xFFFFFFFF


def icrc_input(l3, ipv6):
    """The bytes the ICRC covers, from the IP header up to (not including) the ICRC, masked."""
    b = bytearray(l3)
    if ipv6:
        b[0] |= 0x0F  # traffic class, high nibble (the version nibble is kept)
        b[1] = b[2] = b[3] = 0xFF  # traffic class low nibble + flow label
        b[7] = 0xFF  # hop limit
        udp = 40
    else:
        b[1] = 0xFF  # TOS
        b[8] = 0xFF  # TTL
        b[10] = b[11] = 0xFF  # header checksum
        udp = 20
    b[udp + 6] = b[udp + 7] = 0xFF  # UDP checksum
    b[udp + 8 + 4] = 0xFF  # BTH byte 4: FECN, BECN, reserved
    return b"\xff" * 8 + bytes(b)


def mac(rng, group_ok):
    m = bytes(rng.randrange(256) for _ in range(6))
    if group_ok and rng.randrange(8) == 0:
        return bytes([m[0] | 1]) + m[1:]  # a multicast destination now and then
    return bytes([m[0] & 0xFE]) + m[1:]


def ipv6_addr(rng):
    kind = rng.randrange(4)
    if kind == 0:
        a = b"\xfe\x80" + b"\x00" * 6 + bytes(rng.randrange(256) for _ in range(8))
    elif kind == 1:
        a = b"\xfd" + bytes(rng.randrange(256) for _ in range(15))
    elif kind == 2:
        a = b"\x20\x01\x0d\xb8" + bytes(rng.randrange(256) for _ in range(12))
    else:
        a = bytes(rng.randrange(256) for _ in range(16))
    if ipaddress.IPv6Address(a).ipv4_mapped is not None:  # would select IPv4 framing
        a = b"\xfd" + a[1:]
    return a


def build_vector(rng, idx, opcode, paylen, k, opi):
    """One vector: a dict of fields plus the frame bytes. k counts vectors of this opcode."""
    name, exts, has_payload = OPCODES[opcode]
    assert has_payload or paylen == 0
    v = {}
    ipv6 = (k + opi) % 2 == 1
    vlan = ((k // 2) + opi) % 2 == 1
    v["fam"] = 6 if ipv6 else 4
    v["vlan"] = int(vlan)
    v["vid"] = rng.choice([0, 1, 100, 4095, rng.randrange(4096)])
    v["pcp"] = rng.randrange(8)
    v["dmac"] = mac(rng, True)
    v["smac"] = mac(rng, False)
    if ipv6:
        sip, dip = ipv6_addr(rng), ipv6_addr(rng)
        v["sgid"], v["dgid"] = sip, dip
    else:
        sip = bytes(rng.randrange(256) for _ in range(4))
        dip = bytes(rng.randrange(256) for _ in range(4))
        # The GID of an IPv4 address is the IPv4-mapped IPv6 address (RFC 4291 2.5.5.2).
        v["sgid"] = ipaddress.IPv6Address("::ffff:" + str(ipaddress.IPv4Address(sip))).packed
        v["dgid"] = ipaddress.IPv6Address("::ffff:" + str(ipaddress.IPv4Address(dip))).packed
    v["dscp"] = rng.choice([0, 26, 46, 63, rng.randrange(64)])
    v["ecn"] = ECNS[(k + 3 * opi + idx // 7) % 4]
    v["hop"] = rng.choice([1, 64, 255, rng.randrange(1, 256)])
    v["flow"] = rng.choice([0, 0xFFFFF, rng.randrange(1 << 20)]) if ipv6 else 0
    v["sport"] = rng.choice([0xC000, 0xFFFF, rng.randrange(0xC000, 0x10000), rng.randrange(0x10000)])
    v["ipid"] = 0 if ipv6 else rng.randrange(0x10000)

    v["op"] = opcode
    v["se"] = rng.randrange(2)
    v["mig"] = rng.randrange(2)
    v["pkey"] = rng.choice([0xFFFF, 0x7FFF, rng.randrange(0x10000)])
    v["fecn"] = rng.randrange(2)
    v["becn"] = 1 if opcode == 0x81 and rng.randrange(4) else rng.randrange(2)
    q = SPECIAL_QPNS[(k // 2 + opi) % len(SPECIAL_QPNS)]
    v["dqpn"] = rng.randrange(1 << 24) if q is None else q
    v["ackreq"] = rng.randrange(2)
    p = SPECIAL_PSNS[(k + 2 * opi) % len(SPECIAL_PSNS)]
    v["psn"] = rng.randrange(1 << 24) if p is None else p
    # Every extended-header field, zero unless the opcode carries the header.
    for f in ("va", "rkey", "dmalen", "swap", "cmp", "syn", "msn", "orig", "ieth", "qkey",
              "srcqp"):
        v[f] = 0
    v["imm"] = b"\x00" * 4

    pre, aeth, post = b"", None, b""  # extended headers before / as / after scapy's AETH
    for h in exts:
        if h == "reth":
            v["va"] = rng.randrange(1 << 64)
            v["rkey"] = rng.randrange(1 << 32)
            v["dmalen"] = rng.choice([paylen, rng.randrange(1 << 32)])
            b = struct.pack("!QII", v["va"], v["rkey"], v["dmalen"])
        elif h == "atomiceth":
            v["va"] = rng.randrange(1 << 61) << 3  # atomics are 8-byte aligned
            v["rkey"] = rng.randrange(1 << 32)
            v["swap"] = rng.randrange(1 << 64)
            v["cmp"] = rng.randrange(1 << 64)
            b = struct.pack("!QIQQ", v["va"], v["rkey"], v["swap"], v["cmp"])
        elif h == "aeth":
            v["syn"] = rng.choice([0x00, 0x1F, 0x20, 0x60, 0x61, 0x62, rng.randrange(256)])
            v["msn"] = rng.choice([0, 0xFFFFFF, rng.randrange(1 << 24)])
            assert pre == b"" and aeth is None
            aeth = AETH(syndrome=v["syn"], msn=v["msn"])
            continue
        elif h == "atomicack":
            v["orig"] = rng.randrange(1 << 64)
            b = struct.pack("!Q", v["orig"])
        elif h == "imm":
            v["imm"] = bytes(rng.randrange(256) for _ in range(4))
            b = v["imm"]
        elif h == "ieth":
            v["ieth"] = rng.randrange(1 << 32)
            b = struct.pack("!I", v["ieth"])
        elif h == "deth":
            v["qkey"] = rng.choice([0x11111111, 0x80010000, rng.randrange(1 << 32)])
            v["srcqp"] = rng.choice([1, 0xFFFFFF, rng.randrange(1 << 24)])
            b = struct.pack("!II", v["qkey"], v["srcqp"])  # reserved byte 0
        elif h == "cnppad":
            continue
        else:
            raise AssertionError(h)
        if aeth is None:
            pre += b
        else:
            post += b

    payload = bytes(rng.randrange(256) for _ in range(paylen))
    pad = (4 - paylen % 4) % 4
    v["paylen"] = paylen
    v["payload"] = payload

    eth = Ether(dst=v["dmac"].hex(":"), src=v["smac"].hex(":"))
    if vlan:
        eth = eth / Dot1Q(prio=v["pcp"], id=0, vlan=v["vid"])
    tos = (v["dscp"] << 2) | v["ecn"]
    if ipv6:
        ip = IPv6(tc=tos, fl=v["flow"], hlim=v["hop"], nh=17,
                  src=str(ipaddress.IPv6Address(sip)), dst=str(ipaddress.IPv6Address(dip)))
    else:
        ip = IP(tos=tos, id=v["ipid"], flags="DF", ttl=v["hop"], proto=17,
                src=str(ipaddress.IPv4Address(sip)), dst=str(ipaddress.IPv4Address(dip)))
    udp = UDP(sport=v["sport"], dport=ROCE_PORT, chksum=0)
    bth = BTH(opcode=opcode, solicited=v["se"], migreq=v["mig"], padcount=pad, version=0,
              pkey=v["pkey"], fecn=v["fecn"], becn=v["becn"], resv6=0, dqpn=v["dqpn"],
              ackreq=v["ackreq"], resv7=0, psn=v["psn"],
              icrc=0 if ipv6 else None)
    roce = bth
    if pre:
        roce = roce / Raw(pre)
    if aeth is not None:
        roce = roce / aeth
    if "cnppad" in exts:
        roce = roce / CNPPadding()
    rest = post + payload + b"\x00" * pad
    if rest:
        roce = roce / Raw(rest)
    frame = bytearray(raw(eth / ip / udp / roce))

    l3 = 14 + (4 if vlan else 0)
    body = bytes(frame[l3:-4])
    icrc_bits = crc32_bitwise(icrc_input(body, ipv6))
    if ipv6:
        frame[-4:] = struct.pack("<I", icrc_bits)
    else:
        scapy_icrc = struct.unpack("<I", frame[-4:])[0]
        if scapy_icrc != icrc_bits:
            raise SystemExit(f"vector {idx}: scapy ICRC {scapy_icrc:08x} != bitwise {icrc_bits:08x}")
        if zlib.crc32(icrc_input(body, ipv6)) != icrc_bits:
            raise SystemExit(f"vector {idx}: zlib.crc32 disagrees with the bitwise CRC")

    # Sanity: the frame has the layout this script meant (lengths from first principles).
    ext_len = {"reth": 16, "atomiceth": 28, "aeth": 4, "atomicack": 8, "imm": 4, "ieth": 4,
               "deth": 8, "cnppad": 16}
    want = l3 + (40 if ipv6 else 20) + 8 + 12 + sum(ext_len[h] for h in exts) + paylen + pad + 4
    if len(frame) != want:
        raise SystemExit(f"vector {idx}: frame is {len(frame)} bytes, expected {want}")

    # UDP checksum scapy would send for this frame (the frame itself carries 0).
    d = Ether(bytes(frame))
    l4 = bytearray(frame[l3 + (40 if ipv6 else 20):])
    l4[6] = l4[7] = 0
    ck = in6_chksum(17, d[IPv6], bytes(l4)) if ipv6 else in4_chksum(17, d[IP], bytes(l4))
    v["udpck"] = 0xFFFF if ck == 0 else ck
    v["frame"] = bytes(frame)
    v["name"] = name
    v["exts"] = ",".join(h for h in exts if h != "cnppad") or "-"
    return v


ORDER = ["name", "exts", "fam", "vlan", "vid", "pcp", "dmac", "smac", "sgid", "dgid", "dscp", "ecn", "hop", "flow",
         "sport", "ipid", "op", "se", "mig", "pkey", "fecn", "becn", "dqpn", "ackreq", "psn",
         "va", "rkey", "dmalen", "swap", "cmp", "syn", "msn", "orig", "imm", "ieth", "qkey",
         "srcqp", "paylen", "udpck", "payload", "frame"]


def fmt(v):
    out = ["v"]
    for key in ORDER:
        val = v[key]
        if isinstance(val, bytes):
            val = val.hex()
        elif isinstance(val, int):
            val = format(val, "x")
        out.append(f"{key}={val}")
    return " ".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("output")
    ap.add_argument("--seed", type=int, default=0x524F4345)
    args = ap.parse_args()
    rng = random.Random(args.seed)

    vectors = []
    for opi, opcode in enumerate(sorted(OPCODES)):
        _, _, has_payload = OPCODES[opcode]
        sizes = PAYLOAD_SIZES if has_payload else [0] * NO_PAYLOAD_VARIANTS
        for k, n in enumerate(sizes):
            vectors.append(build_vector(rng, len(vectors), opcode, n, k, opi))

    # The coverage the vectors promise, checked rather than hoped for.
    def seen(pred):
        return any(pred(v) for v in vectors)

    for fam in (4, 6):
        for vl in (0, 1):
            assert seen(lambda v: v["fam"] == fam and v["vlan"] == vl), (fam, vl)
        for op in OPCODES:
            assert seen(lambda v: v["fam"] == fam and v["op"] == op), (fam, op)
        for e in ECNS:
            assert seen(lambda v: v["fam"] == fam and v["ecn"] == e), (fam, e)
        for q in (0, 1, 0xFFFFFF):
            assert seen(lambda v: v["fam"] == fam and v["dqpn"] == q), (fam, q)
        for p in (0xFFFFFE, 0xFFFFFF, 0, 1):
            assert seen(lambda v: v["fam"] == fam and v["psn"] == p), (fam, p)
        for n in PAYLOAD_SIZES:
            assert seen(lambda v: v["fam"] == fam and v["paylen"] == n), (fam, n)
        for bit in ("se", "mig", "ackreq", "fecn", "becn"):
            assert seen(lambda v: v["fam"] == fam and v[bit] == 1), (fam, bit)
            assert seen(lambda v: v["fam"] == fam and v[bit] == 0), (fam, bit)

    with open(args.output, "w", encoding="ascii") as f:
        f.write(f"# RoCE v2 vectors from test/wire/gen_scapy_vectors.py, scapy {scapy.VERSION}, "
                f"seed {args.seed}, {len(vectors)} vectors\n")
        for v in vectors:
            f.write(f"# {v['name']} IPv{v['fam']}{' VLAN' if v['vlan'] else ''} "
                    f"payload {v['paylen']}\n")
            f.write(fmt(v) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
