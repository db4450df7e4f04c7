#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Checks one capture of the interop suite (test/interop/interop.sh), taken on the rig's bridge
between uroced and a Linux rxe guest:
  - uroce-pcap-check --expect-roce: every frame is RoCE v2 and valid, every ICRC verified
    ("invalid 0", "other 0");
  - tshark (the same preferences as test/unit/transport/check_capture.py: UDP checksum 0 over
    IPv6 accepted, payload heuristics off) dissects every frame as
    eth:ethertype:ip:udp:infiniband[:data] with no malformed mark and no expert info, and
    reports the same opcode, destination QP and PSN as our own parse;
  - both directions are present: frames from uroced (UROCE_IP) and from the guest (GUEST_IP),
    each with at least the opcodes named in --want-uroce / --want-guest;
  - with --max-payload N: some frame carries exactly N payload bytes (the path MTU in use) and
    none carries more;
  - every frame has IPv4 TTL 64 (Linux uses the route's hop limit whatever the app's AV says;
    uroce does the same);
  - with --want-retransmits 1: some request (same source, QPN, PSN and opcode) appears more
    than once (the loss scenario must exercise go-back-N / timeouts).
Prints a per-direction opcode summary. A missing tshark is a failure, never a skip.

Usage: check_interop_capture.py PCAP UROCE_PCAP_CHECK TSHARK UROCE_IP GUEST_IP
           [--want-uroce HEX,HEX] [--want-guest HEX,HEX] [--max-payload N]
           [--want-retransmits 1]
"""

import collections
import os
import struct
import sys

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


def src_ip(fr):
    if struct.unpack_from("!H", fr, 12)[0] != 0x0800:
        cc.fail("a frame that is not IPv4 (the rig uses IPv4 GIDs)")
    return ".".join(str(b) for b in fr[14 + 12:14 + 16])


def payload_len(p):
    ext = EXT.get(p["opcode"])
    if ext is None:
        return None
    return p["udp_len"] - 8 - 12 - ext - p["pad"] - 4


def main():
    args = sys.argv[1:]
    if len(args) < 5:
        cc.fail(__doc__.strip().splitlines()[-2])
    pcap, tool, tshark, uroce_ip, guest_ip = args[:5]
    opts = {"--want-uroce": "", "--want-guest": "", "--max-payload": "", "--want-retransmits": ""}
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
    by_dir = {uroce_ip: collections.Counter(), guest_ip: collections.Counter()}
    max_pl = {uroce_ip: 0, guest_ip: 0}
    retx = {uroce_ip: 0, guest_ip: 0}
    seen = set()
    for i, (row, mine, fr) in enumerate(zip(rows, ours, frames), 1):
        where = f"frame {i} (opcode {mine['opcode']:#04x})"
        stack = "eth:ethertype:ip:udp:infiniband"
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
        src = src_ip(fr)
        if src not in by_dir:
            errors.append(f"{where}: from {src}, neither uroced nor the guest")
            continue
        by_dir[src][mine["opcode"]] += 1
        if fr[14 + 8] != 64:
            errors.append(f"{where}: IPv4 TTL {fr[14 + 8]} from {src}, want 64")
        if mine["opcode"] not in (0x11, 0x12, 0x0D, 0x0E, 0x0F, 0x10):  # requests only
            key = (src, mine["qpn"], mine["psn"], mine["opcode"])
            if key in seen:
                retx[src] += 1
            seen.add(key)
        pl = payload_len(mine)
        if pl is not None:
            max_pl[src] = max(max_pl[src], pl)
    for e in errors[:30]:
        print(e)
    if errors:
        cc.fail(f"{pcap}: {len(errors)} problems over {len(frames)} frames")
    for name, ip in (("uroced", uroce_ip), ("guest", guest_ip)):
        ops = ", ".join(f"{o:#04x}:{c}" for o, c in sorted(by_dir[ip].items()))
        print(f"{name} ({ip}): {sum(by_dir[ip].values())} frames, largest payload "
              f"{max_pl[ip]}, opcodes {ops}")
        want = opts["--want-uroce" if name == "uroced" else "--want-guest"]
        for w in filter(None, want.split(",")):
            if by_dir[ip][int(w, 16)] == 0:
                cc.fail(f"{pcap}: no frame with opcode {w} from {name}")
    print(f"retransmitted requests: uroced {retx[uroce_ip]}, guest {retx[guest_ip]}")
    if opts["--want-retransmits"] and retx[uroce_ip] + retx[guest_ip] == 0:
        cc.fail(f"{pcap}: no retransmitted request at all")
    if opts["--max-payload"]:
        mtu = int(opts["--max-payload"])
        for name, ip in (("uroced", uroce_ip), ("guest", guest_ip)):
            if max_pl[ip] != mtu:
                cc.fail(f"{pcap}: the largest payload from {name} is {max_pl[ip]}, want {mtu}")
    print(f"ok: {pcap}: {len(frames)} RoCE frames, all valid (ICRC checked), tshark clean")


if __name__ == "__main__":
    main()
