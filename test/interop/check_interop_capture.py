#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Checks one capture of the interop suite (test/interop/interop.sh), taken on the rig's bridge
between uroced and a Linux rxe guest:
  - uroce-pcap-check --expect-roce: every frame is RoCE v2 and valid, every ICRC verified
    ("invalid 0", "other 0");
  - every frame's ICRC also recomputed here, independently of uroce (zlib's CRC-32 over the
    masked bytes, IBTA A17.3.3), for IPv4 and IPv6 alike;
  - tshark (the same preferences as test/unit/transport/check_capture.py: UDP checksum 0 over
    IPv6 accepted, payload heuristics off) dissects every frame as
    eth:ethertype:ip|ipv6:udp:infiniband[:data] (as the frame's EtherType says) with no
    malformed mark and no expert info, and reports the same opcode, destination QP and PSN as
    our own parse;
  - both directions are present: every frame comes from one of uroced's addresses (UROCE_IPS,
    comma-separated: IPv4 and IPv6) or the guest's (GUEST_IPS), each side with at least the
    opcodes named in --want-uroce / --want-guest; with --want-from A,B,..., each of these
    addresses is the source of some frame;
  - with --max-payload N: some frame carries exactly N payload bytes (the path MTU in use) and
    none carries more;
  - every frame has IPv4 TTL / IPv6 hop limit 64 (Linux uses the route's hop limit whatever the
    app's AV says; uroce does the same);
  - with --want-retransmits 1: some request (same source, QPN, PSN and opcode) appears more
    than once (the loss scenario must exercise go-back-N / timeouts).
Prints a per-direction opcode summary. A missing tshark is a failure, never a skip.

Usage: check_interop_capture.py PCAP UROCE_PCAP_CHECK TSHARK UROCE_IPS GUEST_IPS
           [--want-uroce HEX,HEX] [--want-guest HEX,HEX] [--want-from IP,IP]
           [--max-payload N] [--want-retransmits 1]
"""

import collections
import ipaddress
import os
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "unit", "transport"))
import check_capture as cc  # noqa: E402  (read_pcap, parse, pcap_check, run_tshark)

# Bytes between the BTH and the payload, per opcode (RETH 16, AETH 4, ImmDt 4, DETH 8,
# AtomicETH 28, AtomicAckETH 8).
EXT = {}
for base in (0x00, 0x20):  # RC, UC
    for op, n in ((0x00, 0), (0x01, 0), (0x02, 0), (0x03, 4), (0x04, 0), (0x05, 4),
                  (0x06, 16), (0x07, 0), (0x08, 0), (0x09, 4), (0x0A, 16), (0x0B, 20)):
        EXT[base | op] = n
EXT.update({0x0C: 16, 0x0D: 4, 0x0E: 0, 0x0F: 4, 0x10: 4, 0x11: 4, 0x12: 12, 0x13: 28,
            0x14: 28, 0x16: 4, 0x17: 4, 0x64: 8, 0x65: 12, 0x81: 16})


def l3(fr):
    """(IP version, source address, TTL / hop limit) of an untagged IPv4 or IPv6 frame."""
    etype = struct.unpack_from("!H", fr, 12)[0]
    if etype == 0x0800:
        return 4, ipaddress.IPv4Address(fr[14 + 12:14 + 16]), fr[14 + 8]
    if etype == 0x86DD:
        return 6, ipaddress.IPv6Address(fr[14 + 8:14 + 24]), fr[14 + 7]
    cc.fail(f"a frame with EtherType {etype:#06x}, neither IPv4 nor IPv6")


def icrc_ok(fr, ver):
    """The ICRC per IBTA A17.3.3 (RoCE v2: IP header on), with zlib, not uroce's code."""
    b = bytearray(fr[14:-4])
    if ver == 6:
        b[0] |= 0x0F  # traffic class (high nibble; the version nibble stays)
        b[1] = b[2] = b[3] = 0xFF  # traffic class (low nibble) and flow label
        b[7] = 0xFF  # hop limit
        udp = 40
    else:
        b[1] = b[8] = b[10] = b[11] = 0xFF  # TOS, TTL, header checksum
        udp = 20
    b[udp + 6] = b[udp + 7] = 0xFF  # UDP checksum
    b[udp + 8 + 4] = 0xFF  # BTH: FECN, BECN, reserved
    want = zlib.crc32(b"\xff" * 8 + bytes(b)) & 0xFFFFFFFF
    return want == struct.unpack("<I", fr[-4:])[0]


def payload_len(p):
    ext = EXT.get(p["opcode"])
    if ext is None:
        return None
    return p["udp_len"] - 8 - 12 - ext - p["pad"] - 4


def main():
    args = sys.argv[1:]
    if len(args) < 5:
        cc.fail(__doc__.strip().splitlines()[-2])
    pcap, tool, tshark = args[:3]
    addrs = {}  # address -> "uroced" | "guest"
    for side, lst in (("uroced", args[3]), ("guest", args[4])):
        for a in filter(None, lst.split(",")):
            addrs[ipaddress.ip_address(a)] = side
    opts = {"--want-uroce": "", "--want-guest": "", "--max-payload": "", "--want-retransmits": "",
            "--want-from": ""}
    rest = args[5:]
    while rest:
        if rest[0] not in opts or len(rest) < 2:
            cc.fail(f"bad argument {rest[0]}")
        opts[rest[0]] = rest[1]
        rest = rest[2:]
    if not os.access(tshark, os.X_OK):
        cc.fail(f"tshark not found at {tshark} (scripts/install-deps.sh installs it)")
    frames = cc.read_pcap(pcap)
    n_frames, counts = cc.pcap_check(tool, pcap)
    if n_frames != len(frames):
        cc.fail(f"{pcap}: {n_frames} frames per uroce-pcap-check, {len(frames)} in the file")
    ours = [cc.parse(i + 1, fr) for i, fr in enumerate(frames)]
    rows = cc.run_tshark(tshark, pcap)
    if len(rows) != len(frames):
        cc.fail(f"tshark printed {len(rows)} rows for {len(frames)} frames")
    errors = []
    by_dir = {"uroced": collections.Counter(), "guest": collections.Counter()}
    max_pl = {"uroced": 0, "guest": 0}
    retx = {"uroced": 0, "guest": 0}
    by_src = collections.Counter()
    seen = set()
    for i, (row, mine, fr) in enumerate(zip(rows, ours, frames), 1):
        where = f"frame {i} (opcode {mine['opcode']:#04x})"
        ver, src, hops = l3(fr)
        stack = "eth:ethertype:ip:udp:infiniband" if ver == 4 else "eth:ethertype:ipv6:udp:infiniband"
        if row["frame.protocols"] not in (stack, stack + ":data"):
            errors.append(f"{where}: protocols {row['frame.protocols']}, want {stack}[:data]")
        if row["_ws.malformed"] or row["_ws.expert.message"]:
            errors.append(f"{where}: malformed/expert: {row['_ws.malformed']} "
                          f"{row['_ws.expert.message']}")
        try:
            t = (int(row["infiniband.bth.opcode"], 0), int(row["infiniband.bth.destqp"], 0),
                 int(row["infiniband.bth.psn"], 0))
        except ValueError:
            errors.append(f"{where}: tshark BTH fields {row}")
            continue
        if t != (mine["opcode"], mine["qpn"], mine["psn"]):
            errors.append(f"{where}: tshark says {t}, our parse "
                          f"{(mine['opcode'], mine['qpn'], mine['psn'])}")
        if not icrc_ok(fr, ver):
            errors.append(f"{where}: IPv{ver} frame from {src}: ICRC {fr[-4:].hex()} is not "
                          "zlib's CRC-32 over the masked bytes")
        side = addrs.get(src)
        if side is None:
            errors.append(f"{where}: from {src}, neither uroced nor the guest")
            continue
        by_src[src] += 1
        by_dir[side][mine["opcode"]] += 1
        if hops != 64:
            errors.append(f"{where}: IPv{ver} {'TTL' if ver == 4 else 'hop limit'} {hops} "
                          f"from {src}, want 64")
        if mine["opcode"] not in (0x11, 0x12, 0x0D, 0x0E, 0x0F, 0x10):  # requests only
            key = (side, mine["qpn"], mine["psn"], mine["opcode"])
            if key in seen:
                retx[side] += 1
            seen.add(key)
        pl = payload_len(mine)
        if pl is not None:
            max_pl[side] = max(max_pl[side], pl)
    for e in errors[:30]:
        print(e)
    if errors:
        cc.fail(f"{pcap}: {len(errors)} problems over {len(frames)} frames")
    for name in ("uroced", "guest"):
        ops = ", ".join(f"{o:#04x}:{c}" for o, c in sorted(by_dir[name].items()))
        srcs = ", ".join(f"{a} {by_src[a]}" for a, s in addrs.items() if s == name and by_src[a])
        print(f"{name} ({srcs}): {sum(by_dir[name].values())} frames, largest payload "
              f"{max_pl[name]}, opcodes {ops}")
        want = opts["--want-uroce" if name == "uroced" else "--want-guest"]
        for w in filter(None, want.split(",")):
            if by_dir[name][int(w, 16)] == 0:
                cc.fail(f"{pcap}: no frame with opcode {w} from {name}")
    for a in filter(None, opts["--want-from"].split(",")):
        if by_src[ipaddress.ip_address(a)] == 0:
            cc.fail(f"{pcap}: no frame from {a}")
    print(f"retransmitted requests: uroced {retx['uroced']}, guest {retx['guest']}")
    if opts["--want-retransmits"] and retx["uroced"] + retx["guest"] == 0:
        cc.fail(f"{pcap}: no retransmitted request at all")
    if opts["--max-payload"]:
        mtu = int(opts["--max-payload"])
        for name in ("uroced", "guest"):
            if max_pl[name] != mtu:
                cc.fail(f"{pcap}: the largest payload from {name} is {max_pl[name]}, want {mtu}")
    n6 = sum(c for a, c in by_src.items() if a.version == 6)
    print(f"ok: {pcap}: {len(frames)} RoCE frames ({len(frames) - n6} IPv4, {n6} IPv6), all valid "
          "(ICRC checked by uroce-pcap-check and zlib), tshark clean")


if __name__ == "__main__":
    main()
