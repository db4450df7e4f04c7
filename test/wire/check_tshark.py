#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Dissects frames made by lib/wire's builder with tshark and compares every field.

gen_wire_pcap (C++, built by meson) writes a pcap and an expect file naming, for each frame,
the tshark fields and the values the frame was built from. This script runs tshark over the
pcap and checks, for every frame:
  - the protocol stack is exactly eth[:vlan]:ip|ipv6:udp:infiniband[:data];
  - every expected field has the expected value, and the extended-header / payload fields the
    frame should not have are absent;
  - tshark reports no malformed packet and no expert info of any severity;
and, independently of tshark (which does not check it), that the ICRC of every frame equals
zlib.crc32 over the masked bytes (IBTA Annex A17.3.3).

tshark settings, and what tshark 4.0 does not dissect:
  - udp.ignore_ipv6_zero_checksum:TRUE. RoCE v2 sends UDP checksum 0 over IPv6 too (as rxe
    and ConnectX do, allowed for tunnels by RFC 6935/6936); without this tshark adds an
    "Illegal checksum value (0)" expert warning to every IPv6 frame.
  - The heuristic payload dissectors registered on infiniband.payload (RPC-over-RDMA, SMB
    Direct, iSER, NVMe-RDMA, ...) are disabled: they otherwise guess at random payloads and
    report them malformed. Payload is then shown as data (payload plus pad bytes: tshark
    does not strip the pad).
  - QP0/QP1 payloads are dissected as MADs, so the generator uses QPNs 0 and 1 only on opcodes
    without payload.
  - CNP (opcode 0x81) is "Unknown (129)" to tshark 4.0: the BTH is dissected, and the 16
    reserved bytes and the ICRC are shown as one infiniband.vendor block (checked as such).
  - tshark does not verify the ICRC and has no FECN/BECN fields (BTH byte 4 is "Reserved").
No "decode as" is needed: UDP port 4791 is dissected as RoCE v2 for IPv4 and IPv6.

Usage: check_tshark.py GEN_WIRE_PCAP TSHARK WORKDIR
"""

import ipaddress
import os
import struct
import subprocess
import sys
import zlib

# Fields that are absent unless the expect file names them.
OPTIONAL = [
    "vlan.id", "vlan.priority",
    "ip.src", "ip.dst", "ip.dsfield.dscp", "ip.dsfield.ecn", "ip.ttl", "ip.id", "ip.flags.df",
    "ip.len", "ip.proto",
    "ipv6.src", "ipv6.dst", "ipv6.tclass.dscp", "ipv6.tclass.ecn", "ipv6.flow", "ipv6.hlim",
    "ipv6.plen", "ipv6.nxt",
    "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
    "infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
    "infiniband.aeth.syndrome", "infiniband.aeth.msn", "infiniband.atomicacketh.origremdt",
    "infiniband.deth.q_key", "infiniband.deth.srcqp", "infiniband.immdt", "infiniband.ieth",
    "infiniband.invariant.crc", "infiniband.vendor", "data.len", "data.data",
    "infiniband.grh", "infiniband.lrh", "infiniband.rdeth",
]
BYTES = {"infiniband.immdt", "infiniband.ieth", "infiniband.vendor", "data.data", "eth.src",
         "eth.dst"}
ADDRS = {"ip.src", "ip.dst", "ipv6.src", "ipv6.dst"}
DIAG = ["frame.number", "frame.protocols", "_ws.malformed", "_ws.expert.message"]

# Heuristic dissectors on infiniband.payload in tshark 4.0 (their registered short names;
# `tshark -G heuristic-decodes` lists only the protocols). Names tshark does not know are
# dropped, so other versions still run; any heuristic left on shows up as a protocol-stack or
# malformed failure below.
HEURISTICS = ["rpcrdma_infiniband", "smb_direct_infiniband", "smcr_infiniband",
              "iser_infiniband", "sdp_infiniband", "fc_infiniband", "lnet_ib", "eth_over_ib",
              "mellanox_eoib", "nvme_rdma"]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic not in (0xA1B23C4D, 0xA1B2C3D4):
        fail(f"{path}: not a little-endian pcap (magic {magic:08x})")
    frames, off = [], 24
    while off < len(data):
        _, _, incl, orig = struct.unpack_from("<IIII", data, off)
        off += 16
        if incl != orig:
            fail(f"{path}: frame {len(frames) + 1} truncated in the pcap")
        frames.append(data[off:off + incl])
        off += incl
    return frames


def check_icrc(n, frame):
    """ICRC per IBTA A17.3.3, computed here with zlib over the masked bytes."""
    off, etype = 14, struct.unpack_from("!H", frame, 12)[0]
    if etype == 0x8100:
        off, etype = 18, struct.unpack_from("!H", frame, 16)[0]
    b = bytearray(frame[off:-4])
    if etype == 0x86DD:
        b[0] |= 0x0F
        b[1] = b[2] = b[3] = b[7] = 0xFF
        udp = 40
    elif etype == 0x0800:
        b[1] = b[8] = b[10] = b[11] = 0xFF
        udp = 20
    else:
        fail(f"frame {n}: EtherType {etype:04x}")
    b[udp + 6] = b[udp + 7] = 0xFF
    b[udp + 12] = 0xFF
    want = zlib.crc32(b"\xff" * 8 + bytes(b)) & 0xFFFFFFFF
    got = struct.unpack("<I", frame[-4:])[0]
    if want != got:
        fail(f"frame {n}: ICRC {got:08x}, zlib over the masked bytes gives {want:08x}")


def norm(key, val):
    if key in BYTES:
        return val.replace(":", "").lower()
    if key in ADDRS:
        return ipaddress.ip_address(val)
    if val in ("True", "False"):
        return int(val == "True")
    return int(val, 0)


def run_tshark(tshark, pcap, fields):
    heur = list(HEURISTICS)
    while True:
        cmd = [tshark, "-r", pcap, "-n", "-o", "udp.ignore_ipv6_zero_checksum:TRUE"]
        for h in heur:
            cmd += ["--disable-heuristic", h]
        cmd += ["-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E",
                "aggregator=|", "-E", "quote=n"]
        for f in fields:
            cmd += ["-e", f]
        p = subprocess.run(cmd, capture_output=True, text=True)
        unknown = [h for h in heur if f"No such protocol {h}," in p.stderr]
        if unknown and p.returncode != 0:
            print("tshark does not know heuristic(s)", unknown, "- retrying without them")
            heur = [h for h in heur if h not in unknown]
            continue
        if p.returncode != 0:
            fail(f"tshark exited {p.returncode}: {p.stderr.strip()}")
        return p.stdout.splitlines()


def main():
    if len(sys.argv) != 4:
        fail(__doc__.strip().splitlines()[-1])
    gen, tshark, work = sys.argv[1:]
    if not os.access(tshark, os.X_OK):
        fail(f"tshark not found ({tshark!r}): install the tshark package")
    os.makedirs(work, exist_ok=True)
    pcap, expect = os.path.join(work, "wire.pcap"), os.path.join(work, "wire.expect")
    p = subprocess.run([gen, pcap, expect])
    if p.returncode != 0:
        fail(f"{gen} exited {p.returncode}")

    wanted = []
    with open(expect, encoding="ascii") as f:
        for line in f:
            kv = dict(t.split("=", 1) for t in line.split())
            wanted.append(kv)
    frames = read_pcap(pcap)
    if len(frames) != len(wanted) or len(frames) < 300:
        fail(f"{len(frames)} frames in the pcap, {len(wanted)} in the expect file")
    for n, fr in enumerate(frames, 1):
        check_icrc(n, fr)

    keys = set()
    for kv in wanted:
        keys.update(k for k in kv if k != "frame")
    fields = DIAG + sorted(keys | set(OPTIONAL))
    rows = run_tshark(tshark, pcap, fields)
    if len(rows) != len(wanted):
        fail(f"tshark printed {len(rows)} rows for {len(wanted)} frames")

    errors = []
    seen_ops = set()
    for row, kv in zip(rows, wanted):
        got = dict(zip(fields, row.split("\t")))
        n = kv["frame"]
        if got["frame.number"] != n:
            fail(f"row for frame {got['frame.number']} where {n} was expected")
        where = f"frame {n} (opcode {kv['infiniband.bth.opcode']}, {len(frames[int(n) - 1])} B)"
        stack = ["eth", "ethertype"]
        if "vlan.id" in kv:
            stack += ["vlan", "ethertype"]
        stack += ["ipv6" if "ipv6.src" in kv else "ip", "udp", "infiniband"]
        if "data.len" in kv:
            stack.append("data")
        if got["frame.protocols"] != ":".join(stack):
            errors.append(f"{where}: protocols {got['frame.protocols']}, want {':'.join(stack)}")
        if got["_ws.malformed"] or got["_ws.expert.message"]:
            errors.append(f"{where}: malformed/expert: {got['_ws.malformed']} "
                          f"{got['_ws.expert.message']}")
        for key in fields:
            if key in DIAG:
                continue
            val = got.get(key, "")
            if key not in kv:
                if val:
                    errors.append(f"{where}: unexpected {key}={val[:60]}")
                continue
            if not val:
                errors.append(f"{where}: {key} missing (want {kv[key][:60]})")
                continue
            want = norm(key, kv[key])
            have = [norm(key, v) for v in val.split("|")]
            # A field can occur more than once (tshark names two CNP blocks infiniband.vendor).
            if want not in have:
                errors.append(f"{where}: {key}={val[:60]}, want {kv[key][:60]}")
        seen_ops.add(int(kv["infiniband.bth.opcode"]))

    for e in errors[:40]:
        print(e)
    if errors:
        fail(f"{len(errors)} mismatches over {len(wanted)} frames")
    print(f"OK: {len(wanted)} frames, {len(seen_ops)} opcodes, {len(fields) - len(DIAG)} fields "
          f"compared; ICRC verified with zlib")
    return 0


if __name__ == "__main__":
    sys.exit(main())
