#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Dissects CM MADs made by lib/cm (gen_cm_pcap) with tshark and compares every field.

gen_cm_pcap writes RoCE v2 UD SENDs to QP 1 carrying one CM message each, and an expect file
naming, per frame, tshark fields and the values the message was encoded from. This script
runs tshark and checks, for every frame: the MAD and CM fields have the expected values, the
frame is dissected as a MAD (infiniband.mad present) and tshark reports nothing malformed.
tshark 4.0 dissects REQ (with rdma_cm's IP header), REP, RTU, REJ, DREQ and DREP field by
field; MRA and the SIDR messages only as MADs (their header fields are checked).
Not compared: the REQ's primary flow label and packet rate. tshark 4.0 reads the 20-bit flow
label at byte 88 as a two-byte item and the packet rate from the wrong byte (it shows 0x123 and
0x12 for 0x12345 and 0x2a); lib/cm follows IBTA Table 106 and the kernel's
CM_REQ_PRIMARY_FLOW_LABEL / CM_REQ_PRIMARY_PACKET_RATE (byte 88 bits 0-19, byte 91 bits 2-7),
which test/unit/cm/msg_test.cc checks byte by byte.

Usage: check_cm_tshark.py GEN_CM_PCAP TSHARK WORKDIR
"""

import ipaddress
import os
import subprocess
import sys


def norm(v):
    """A tshark or expect value as something comparable."""
    v = v.strip()
    if v in ("True", "False"):
        return int(v == "True")
    try:
        return int(v, 0)
    except ValueError:
        pass
    try:
        return ipaddress.ip_address(v)
    except ValueError:
        return v


def main():
    gen, tshark, work = sys.argv[1:4]
    pcap, expect = os.path.join(work, "cm.pcap"), os.path.join(work, "cm.expect")
    subprocess.run([gen, pcap, expect], check=True)
    frames = []
    for line in open(expect):
        kv = dict(tok.split("=", 1) for tok in line.split())
        frames.append(kv)
    keys = sorted({k for f in frames for k in f if k != "frame"})
    cmd = [tshark, "-r", pcap, "-T", "fields", "-E", "separator=\t", "-E", "occurrence=f",
           "-o", "udp.ignore_ipv6_zero_checksum:TRUE",
           "-e", "frame.number", "-e", "_ws.malformed", "-e", "infiniband.mad"]
    for k in keys:
        cmd += ["-e", k]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
    if len(out) != len(frames):
        print(f"FAIL: tshark shows {len(out)} frames, {len(frames)} were written")
        return 1
    bad = 0
    for line, want in zip(out, frames):
        cols = line.split("\t")
        n, malformed, mad, got = cols[0], cols[1], cols[2], dict(zip(keys, cols[3:]))
        if malformed:
            print(f"FAIL frame {n}: malformed")
            bad += 1
        if not mad:
            print(f"FAIL frame {n}: not dissected as a MAD")
            bad += 1
        for k, v in want.items():
            if k == "frame":
                continue
            if norm(got.get(k, "")) != norm(v):
                print(f"FAIL frame {n}: {k} = {got.get(k)!r}, expected {v}")
                bad += 1
    checked = sum(len(f) - 1 for f in frames)
    print(f"{len(frames)} CM MADs, {checked} fields compared with tshark, {bad} mismatch(es)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
