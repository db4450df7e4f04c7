#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# Independent check of uroce's ARP / ND frames: scapy parses every frame written by
# port_frames_gen and its fields and ICMPv6 checksums are compared with what RFC 826 / 4861
# require; then tshark dissects the capture and must report no malformed frame and no expert
# warning or error, and a good ICMPv6 checksum on every ND frame.
# Usage: check_frames.py FRAMES_GEN_BINARY
import os
import subprocess
import sys
import tempfile

import logging
logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
from scapy.all import ARP, Ether, IPv6, rdpcap, raw  # noqa: E402
from scapy.layers.inet6 import (ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr,  # noqa: E402
                                ICMPv6NDOptSrcLLAddr)

MAC = "52:b8:2d:95:25:38"
PEER_MAC = "9e:2d:00:2f:ed:47"
LL = "fe80::50b8:2dff:fe95:2538"
PEER_LL = "fe80::9c2d:ff:fe2f:ed47"

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def icmpv6_checksum_ok(pkt, layer):
    again = Ether(raw(pkt))
    del again[layer].cksum
    return Ether(raw(again))[layer].cksum == pkt[layer].cksum


def check_arp(i, p, op, dst, psrc, pdst, hwdst):
    check(ARP in p, f"frame {i}: no ARP layer")
    if ARP not in p:
        return
    a = p[ARP]
    check(p[Ether].src == MAC and p[Ether].dst == dst, f"frame {i}: Ethernet addresses {p[Ether].src} -> {p[Ether].dst}")
    check(a.hwtype == 1 and a.ptype == 0x0800 and a.hwlen == 6 and a.plen == 4, f"frame {i}: ARP types/lengths")
    check(a.op == op, f"frame {i}: op {a.op} != {op}")
    check(a.hwsrc == MAC and a.psrc == psrc and a.pdst == pdst and a.hwdst == hwdst,
          f"frame {i}: ARP addresses {a.hwsrc} {a.psrc} -> {a.hwdst} {a.pdst}")
    check(len(raw(p)) == 60, f"frame {i}: length {len(raw(p))} != 60")


def check_na(i, p, edst, src, dst, tgt, S, O):
    check(ICMPv6ND_NA in p, f"frame {i}: no NA layer")
    if ICMPv6ND_NA not in p:
        return
    na = p[ICMPv6ND_NA]
    check(p[Ether].src == MAC and p[Ether].dst == edst, f"frame {i}: Ethernet {p[Ether].src} -> {p[Ether].dst}")
    check(p[IPv6].hlim == 255, f"frame {i}: hop limit {p[IPv6].hlim}")
    check(p[IPv6].src == src and p[IPv6].dst == dst, f"frame {i}: IPv6 {p[IPv6].src} -> {p[IPv6].dst}")
    check(na.tgt == tgt and na.R == 0 and na.S == S and na.O == O, f"frame {i}: NA tgt={na.tgt} R={na.R} S={na.S} O={na.O}")
    check(ICMPv6NDOptDstLLAddr in p and p[ICMPv6NDOptDstLLAddr].lladdr == MAC, f"frame {i}: TLLA")
    check(icmpv6_checksum_ok(p, ICMPv6ND_NA), f"frame {i}: ICMPv6 checksum")


def main():
    gen = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "frames.pcap")
        subprocess.run([gen, path], check=True)
        pk = rdpcap(path)
        check(len(pk) == 8, f"{len(pk)} frames, want 8")
        if len(pk) == 8:
            check_arp(0, pk[0], 1, "ff:ff:ff:ff:ff:ff", "10.77.0.2", "10.77.0.2", "00:00:00:00:00:00")
            check_arp(1, pk[1], 2, PEER_MAC, "10.77.0.2", "10.77.0.1", PEER_MAC)
            check_arp(2, pk[2], 1, "ff:ff:ff:ff:ff:ff", "10.77.0.2", "10.77.0.3", "00:00:00:00:00:00")
            check_na(3, pk[3], "33:33:00:00:00:01", LL, "ff02::1", LL, 0, 1)
            check_na(4, pk[4], "33:33:00:00:00:01", "fd00:77::2", "ff02::1", "fd00:77::2", 0, 1)
            check_na(5, pk[5], PEER_MAC, "fd00:77::2", PEER_LL, "fd00:77::2", 1, 1)
            p = pk[6]
            check(ICMPv6ND_NS in p, "frame 6: no NS layer")
            if ICMPv6ND_NS in p:
                check(p[Ether].dst == "33:33:ff:00:00:01", f"frame 6: Ethernet dst {p[Ether].dst}")
                check(p[IPv6].src == "fd00:77::2" and p[IPv6].dst == "ff02::1:ff00:1", "frame 6: IPv6 addresses")
                check(p[IPv6].hlim == 255, "frame 6: hop limit")
                check(p[ICMPv6ND_NS].tgt == "fd00:77::1", "frame 6: target")
                check(ICMPv6NDOptSrcLLAddr in p and p[ICMPv6NDOptSrcLLAddr].lladdr == MAC, "frame 6: SLLA")
                check(icmpv6_checksum_ok(p, ICMPv6ND_NS), "frame 6: ICMPv6 checksum")
            check_na(7, pk[7], "33:33:00:00:00:01", "fd00:77::2", "ff02::1", "fd00:77::2", 0, 1)

        # tshark: no malformed frame, no expert warning/error, good ICMPv6 checksums.
        bad = subprocess.run(["tshark", "-r", path, "-Y", "_ws.malformed || _ws.expert.severity >= 6291456"],
                             capture_output=True, text=True, check=True).stdout.strip()
        check(bad == "", f"tshark flags frames:\n{bad}")
        good = subprocess.run(["tshark", "-r", path, "-Y", "icmpv6.checksum.status == 1"],
                              capture_output=True, text=True, check=True).stdout.strip().splitlines()
        check(len(good) == 5, f"tshark: {len(good)} ND frames with a good checksum, want 5")
        arps = subprocess.run(["tshark", "-r", path, "-Y", "arp"], capture_output=True, text=True,
                              check=True).stdout
        check("ARP Announcement for 10.77.0.2" in arps, "tshark does not see the gratuitous ARP as an announcement")
        check("10.77.0.2 is at 52:b8:2d:95:25:38" in arps, "tshark does not see the ARP reply")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
