#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Wire fidelity of the transport engine: frames captured from the fake link pass
uroce-pcap-check and tshark.

1. Runs capture_traffic (a gtest, capture_traffic.cc) which drives a representative traffic mix
   between three engines and writes two pcaps: every frame as sent, and every frame as
   delivered (after drops, with the switch's CE marks).
2. For each pcap:
   - uroce-pcap-check --expect-roce must exit 0 with "invalid 0" and "other 0"; its per-opcode
     counts must include every opcode in WANT_OPCODES (all RC, UC and UD opcodes and CNP);
   - this script parses every frame itself (Ethernet / IPv4 | IPv6 / UDP 4791 / BTH [/ AETH]);
   - tshark (prefs as test/wire/check_tshark.py: zero UDP checksum over IPv6 accepted, payload
     heuristics off) must dissect every frame as eth:ethertype:ip|ipv6:udp:infiniband[:data]
     with no malformed mark and no expert info, and report for each frame the same BTH opcode,
     destination QP and PSN (and AETH syndrome) as this script's parse; its opcode counts must
     equal uroce-pcap-check's.
3. The traffic must show what it was meant to: ACK, RNR NAK, PSN sequence error NAK and remote
   access error NAK syndromes; retransmitted requests (the same opcode / QPN / PSN sent twice);
   IPv4 and IPv6 frames; MTU 256 and 4096 payloads; and, in the delivered capture, CE-marked
   frames.
A missing tshark is a failure, never a skip.

Second mode, --daemon: checks captures uroced wrote (daemon.pcap; the integration tests use
it). Such a capture also holds ARP / ND frames. For each PCAP: uroce-pcap-check must exit 0
with "invalid 0" and at least MIN_ROCE RoCE frames; tshark must dissect every frame (RoCE or
not) without a malformed mark or expert info; every RoCE frame must have the protocol stack
and the BTH opcode / QPN / PSN (and AETH syndrome) this script parses, and tshark's opcode
counts must equal uroce-pcap-check's.

With --cnps N (--daemon): the capture must hold exactly N CNPs (opcode 0x81), each dissected
by tshark as RoCE with the BTH our parse gives; with --cnp-dscp D every IPv4 CNP must carry
DSCP D, ECN 00 and P_Key 0xFFFF; with --min-ce N at least N RoCE frames must carry CE
(uroced_ecn.sh: the receiver's capture of a marking bottleneck).

Third mode, --lanes: the captures of two uroced joined to each other, each with several
workers (uroced_pair.sh with WORKERS=2), hold every RoCE frame of every lane. For each daemon D
(IPv4 address, capture, log) and its peer P:
  - the RoCE frames D sent (source address D) number the frames its engines committed (the
    "engine counters: ... tx_pkts=N" line of its log, summed over the workers), less at most
    the copies its capture rings dropped ("capture: ... capture_dropped=K");
  - the RoCE frames D received from P number those P's capture shows P sending to D, less at
    most D's capture_dropped (and P's frames dropped at its stop, tx_dropped);
  - in both directions there are frames for QPs owned by worker 1 (BTH destination QP bits
    16..23 == 1): received by D's worker-1 QPs, and sent to P's worker-1 QPs.

Usage: check_capture.py CAPTURE_TRAFFIC UROCE_PCAP_CHECK TSHARK WORKDIR
       check_capture.py --daemon [--cnps N] [--cnp-dscp D] [--min-ce N] UROCE_PCAP_CHECK TSHARK
                        MIN_ROCE PCAP...
       check_capture.py --lanes IP_A PCAP_A LOG_A IP_B PCAP_B LOG_B
"""

import collections
import os
import re
import struct
import subprocess
import sys

RC = list(range(0x00, 0x15)) + [0x16, 0x17]
UC = list(range(0x20, 0x2C))
WANT_OPCODES = set(RC + UC + [0x64, 0x65, 0x81])
CNP_DSCP = 48  # capture_traffic.cc's EngineConfig::cnp_dscp (ConnectX's default cnp_dscp)
AETH_OPCODES = {0x0D, 0x0F, 0x10, 0x11, 0x12}
HEURISTICS = ["rpcrdma_infiniband", "smb_direct_infiniband", "smcr_infiniband",
              "iser_infiniband", "sdp_infiniband", "fc_infiniband", "lnet_ib", "eth_over_ib",
              "mellanox_eoib", "nvme_rdma"]
FIELDS = ["frame.number", "frame.protocols", "_ws.malformed", "_ws.expert.message",
          "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",
          "infiniband.aeth.syndrome", "ip.dsfield.dscp", "ip.dsfield.ecn", "infiniband.bth.p_key"]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        fail(f"{path}: not a pcap")
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


def is_roce(fr):
    """Ethernet (no VLAN tag) + IPv4 without options or IPv6 + UDP to 4791."""
    if len(fr) < 14 + 20:
        return False
    etype = struct.unpack_from("!H", fr, 12)[0]
    if etype == 0x0800:
        udp = 14 + (fr[14] & 0x0F) * 4
        return (len(fr) >= udp + 8 and fr[14 + 9] == 17 and
                struct.unpack_from("!H", fr, udp + 2)[0] == 4791)
    if etype == 0x86DD:
        return (len(fr) >= 14 + 48 and fr[14 + 6] == 17 and
                struct.unpack_from("!H", fr, 14 + 42)[0] == 4791)
    return False


def parse(n, fr):
    """Our own parse: returns dict(ver, ecn, opcode, qpn, psn, syndrome, payload_len)."""
    etype = struct.unpack_from("!H", fr, 12)[0]
    off = 14
    if etype == 0x0800:
        ihl = (fr[off] & 0x0F) * 4
        ecn = fr[off + 1] & 3
        if fr[off + 9] != 17:
            fail(f"frame {n}: IPv4 protocol {fr[off + 9]}")
        udp, ver = off + ihl, 4
    elif etype == 0x86DD:
        ecn = (struct.unpack_from("!I", fr, off)[0] >> 20) & 3
        if fr[off + 6] != 17:
            fail(f"frame {n}: IPv6 next header {fr[off + 6]}")
        udp, ver = off + 40, 6
    else:
        fail(f"frame {n}: EtherType {etype:04x}")
    dport, ulen = struct.unpack_from("!HH", fr, udp + 2)
    if dport != 4791:
        fail(f"frame {n}: UDP destination port {dport}")
    bth = udp + 8
    opcode = fr[bth]
    pad = (fr[bth + 1] >> 4) & 3
    qpn = struct.unpack_from("!I", fr, bth + 4)[0] & 0xFFFFFF
    psn = struct.unpack_from("!I", fr, bth + 8)[0] & 0xFFFFFF
    syn = None
    if opcode in AETH_OPCODES:
        syn = fr[bth + 12]
    return dict(ver=ver, ecn=ecn, opcode=opcode, qpn=qpn, psn=psn, syndrome=syn,
                udp_len=ulen, pad=pad)


def pcap_check(tool, pcap, only_roce=True):
    p = subprocess.run([tool, "--expect-roce", pcap], capture_output=True, text=True)
    out = p.stdout
    if p.returncode != 0:
        fail(f"uroce-pcap-check --expect-roce {pcap} exited {p.returncode}:\n{out}{p.stderr}")
    tot = re.search(r"^totals: frames (\d+), RoCE (\d+), other (\d+), invalid (\d+)$", out, re.M)
    if not tot:
        fail(f"uroce-pcap-check: no totals line:\n{out}")
    frames, roce, other, invalid = map(int, tot.groups())
    if invalid or (only_roce and (other or frames != roce)):
        fail(f"uroce-pcap-check {pcap}: {tot.group(0)}")
    counts = {int(h, 16): int(c) for h, c in re.findall(r"^  \S+ \(0x([0-9A-Fa-f]{2})\): (\d+)$",
                                                          out, re.M)}
    if sum(counts.values()) != roce:
        fail(f"uroce-pcap-check {pcap}: opcode counts sum to {sum(counts.values())}, RoCE {roce}")
    return frames, counts


def run_tshark(tshark, pcap):
    heur = list(HEURISTICS)
    while True:
        cmd = [tshark, "-r", pcap, "-n", "-o", "udp.ignore_ipv6_zero_checksum:TRUE"]
        for h in heur:
            cmd += ["--disable-heuristic", h]
        cmd += ["-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E",
                "aggregator=|", "-E", "quote=n"]
        for f in FIELDS:
            cmd += ["-e", f]
        p = subprocess.run(cmd, capture_output=True, text=True)
        unknown = [h for h in heur if f"No such protocol {h}," in p.stderr]
        if unknown and p.returncode != 0:
            heur = [h for h in heur if h not in unknown]
            continue
        if p.returncode != 0:
            fail(f"tshark exited {p.returncode}: {p.stderr.strip()}")
        return [dict(zip(FIELDS, row.split("\t"))) for row in p.stdout.splitlines()]


def compare_with_tshark(name, frames, ours, counts, tshark, pcap, cnp_dscp=None):
    """tshark must dissect every frame without malformed marks or expert info, and agree with
    `ours` (our parse of each frame; None for a frame that is not RoCE) on the BTH of every
    RoCE frame; its opcode counts must equal `counts` (uroce-pcap-check's). With cnp_dscp, every
    IPv4 CNP must carry that DSCP, ECN 00 and P_Key 0xFFFF, as ConnectX sends it (tshark 4.0
    has no BECN field: dcqcn_engine_test checks that byte)."""
    rows = run_tshark(tshark, pcap)
    if len(rows) != len(frames):
        fail(f"{name}: tshark printed {len(rows)} rows for {len(frames)} frames")
    errors = []
    ts_counts = collections.Counter()
    for i, (row, mine) in enumerate(zip(rows, ours), 1):
        if row["frame.number"] != str(i):
            fail(f"{name}: row for frame {row['frame.number']} where {i} was expected")
        if mine is None:
            if row["_ws.malformed"] or row["_ws.expert.message"]:
                errors.append(f"{name} frame {i} ({row['frame.protocols']}): malformed/expert: "
                              f"{row['_ws.malformed']} {row['_ws.expert.message']}")
            continue
        where = f"{name} frame {i} (opcode {mine['opcode']:#04x})"
        l3 = "ip" if mine["ver"] == 4 else "ipv6"
        stack = f"eth:ethertype:{l3}:udp:infiniband"
        if row["frame.protocols"] not in (stack, stack + ":data"):
            errors.append(f"{where}: protocols {row['frame.protocols']}, want {stack}[:data]")
        if row["_ws.malformed"] or row["_ws.expert.message"]:
            errors.append(f"{where}: malformed/expert: {row['_ws.malformed']} "
                          f"{row['_ws.expert.message']}")
        try:
            op = int(row["infiniband.bth.opcode"], 0)
            qpn = int(row["infiniband.bth.destqp"], 0)
            psn = int(row["infiniband.bth.psn"], 0)
        except ValueError:
            errors.append(f"{where}: tshark BTH fields {row}")
            continue
        ts_counts[op] += 1
        if (op, qpn, psn) != (mine["opcode"], mine["qpn"], mine["psn"]):
            errors.append(f"{where}: tshark says opcode {op:#x} QPN {qpn:#x} PSN {psn:#x}, the "
                          f"frame has {mine['opcode']:#x} {mine['qpn']:#x} {mine['psn']:#x}")
        syn = row["infiniband.aeth.syndrome"]
        if mine["syndrome"] is not None:
            if not syn or int(syn, 0) != mine["syndrome"]:
                errors.append(f"{where}: AETH syndrome {syn!r}, want {mine['syndrome']:#x}")
        elif syn:
            errors.append(f"{where}: unexpected AETH syndrome {syn}")
        if cnp_dscp is not None and op == 0x81 and mine["ver"] == 4:
            got = (row["ip.dsfield.dscp"], row["ip.dsfield.ecn"], row["infiniband.bth.p_key"])
            if got[0] != str(cnp_dscp) or got[1] != "0" or int(got[2] or "0", 0) != 0xFFFF:
                errors.append(f"{where}: CNP DSCP / ECN / P_Key {got}, want {cnp_dscp} / 0 / 0xffff")
    for e in errors[:30]:
        print(e)
    if errors:
        fail(f"{name}: {len(errors)} problems over {len(frames)} frames")
    if ts_counts != collections.Counter(counts):
        diff = {hex(o): (ts_counts[o], counts.get(o, 0)) for o in set(ts_counts) | set(counts)
                if ts_counts[o] != counts.get(o, 0)}
        fail(f"{name}: tshark and uroce-pcap-check opcode counts differ (tshark, tool): {diff}")


def check_daemon_capture(pcap, tool, tshark, min_roce, cnps=None, cnp_dscp=None, min_ce=0):
    """A capture uroced wrote: RoCE frames plus ARP / ND (see the module docstring)."""
    name = os.path.basename(pcap)
    frames = read_pcap(pcap)
    n_frames, counts = pcap_check(tool, pcap, only_roce=False)
    if n_frames != len(frames):
        fail(f"{name}: {n_frames} frames per uroce-pcap-check, {len(frames)} in the file")
    ours = [parse(i + 1, fr) if is_roce(fr) else None for i, fr in enumerate(frames)]
    roce = [p for p in ours if p is not None]
    if len(roce) < min_roce:
        fail(f"{name}: {len(roce)} RoCE frames, expected at least {min_roce}")
    mine = collections.Counter(p["opcode"] for p in roce)
    if mine != collections.Counter(counts):
        diff = {hex(o): (mine[o], counts.get(o, 0)) for o in set(mine) | set(counts)
                if mine[o] != counts.get(o, 0)}
        fail(f"{name}: our opcode counts differ from uroce-pcap-check's (ours, tool): {diff}")
    n_cnp = mine[0x81]
    if cnps is not None and n_cnp != cnps:
        fail(f"{name}: {n_cnp} CNPs (opcode 0x81) in the capture, expected {cnps}")
    n_ce = sum(1 for p in roce if p["ecn"] == 3)
    if n_ce < min_ce:
        fail(f"{name}: {n_ce} CE-marked RoCE frames, expected at least {min_ce}")
    compare_with_tshark(name, frames, ours, counts, tshark, pcap, cnp_dscp=cnp_dscp)
    print(f"OK: {name}: {len(frames)} frames, {len(roce)} RoCE ({len(counts)} opcodes), every "
          f"ICRC valid (uroce-pcap-check), tshark: no malformed frame, no expert info; "
          f"{n_cnp} CNPs dissected by tshark (infiniband, opcode 0x81"
          f"{f', DSCP {cnp_dscp}, ECN 00, P_Key 0xffff' if cnp_dscp is not None else ''}), "
          f"{n_ce} CE-marked frames")


def ipv4_addrs(fr):
    """(source, destination) dotted IPv4 addresses of an untagged IPv4 frame, else None."""
    if struct.unpack_from("!H", fr, 12)[0] != 0x0800:
        return None
    return tuple(".".join(str(b) for b in fr[o:o + 4]) for o in (14 + 12, 14 + 16))


def log_value(log, line_re, key, default=None):
    """The integer `key=N` of the lines of `log` matching line_re, summed; a matching line
    without the key counts `default` (None: fails); fails when no line matches."""
    total, found = 0, False
    with open(log) as f:
        for line in f:
            if re.search(line_re, line):
                m = re.search(rf"\b{key}=(\d+)", line)
                if m is None and default is None:
                    fail(f"{log}: {key}= missing on: {line.strip()}")
                total += int(m.group(1)) if m else default
                found = True
    if not found:
        fail(f"{log}: no line matching {line_re!r}")
    return total


def check_lanes(daemons):
    """--lanes (see the module docstring). daemons: [(ip, pcap, log)] x 2."""
    info = []
    for ip, pcap, log in daemons:
        frames = [fr for fr in read_pcap(pcap) if is_roce(fr)]
        sent = collections.Counter()  # destination IP -> frames
        by_owner = collections.Counter()  # (direction, owner of the BTH destination QP)
        for i, fr in enumerate(frames, 1):
            addrs = ipv4_addrs(fr)
            if addrs is None:
                continue
            src, dst = addrs
            owner = (parse(i, fr)["qpn"] >> 16) & 0xFF
            if src == ip:
                sent[dst] += 1
                if dst != ip:  # not same-port loopback
                    by_owner[("sent", owner)] += 1
            else:
                by_owner[("received", owner)] += 1
        info.append(dict(
            ip=ip, name=os.path.basename(pcap), sent=sent, by_owner=by_owner,
            received=collections.Counter(ipv4_addrs(fr)[0] for fr in frames
                                         if ipv4_addrs(fr) and ipv4_addrs(fr)[0] != ip),
            tx_pkts=log_value(log, r"^engine counters:", "tx_pkts"),
            cap_dropped=log_value(log, r"^capture: ", "capture_dropped", 0),
            tx_dropped=log_value(log, r"^(port p0 counters|worker \d+ queue):", "tx_dropped")))
    for d, p in ((info[0], info[1]), (info[1], info[0])):
        n_sent = sum(d["sent"].values())
        if not d["tx_pkts"] - d["cap_dropped"] <= n_sent <= d["tx_pkts"]:
            fail(f"{d['name']}: {n_sent} RoCE frames sent by {d['ip']} in the capture, its engines "
                 f"committed {d['tx_pkts']} (capture_dropped {d['cap_dropped']})")
        got, want = d["received"][p["ip"]], p["sent"][d["ip"]]
        if not want - d["cap_dropped"] - p["tx_dropped"] <= got <= want:
            fail(f"{d['name']}: {got} RoCE frames received from {p['ip']}, {p['name']} shows "
                 f"{want} sent to {d['ip']} (capture_dropped {d['cap_dropped']}, peer tx_dropped "
                 f"{p['tx_dropped']})")
        for direction in ("received", "sent"):
            if d["by_owner"][(direction, 1)] == 0:
                fail(f"{d['name']}: no RoCE frame {direction} for a QP of worker 1 "
                     f"(by owner: {dict(d['by_owner'])})")
        print(f"OK: {d['name']}: {n_sent} RoCE frames sent (engines: {d['tx_pkts']}), {got} "
              f"received from {p['ip']} (sent by it: {want}); for worker-1 QPs "
              f"{d['by_owner'][('received', 1)]} received, {d['by_owner'][('sent', 1)]} sent to "
              f"the peer's; capture_dropped {d['cap_dropped']}")


def check_one(name, pcap, tool, tshark):
    frames = read_pcap(pcap)
    n_frames, counts = pcap_check(tool, pcap)
    if n_frames != len(frames) or n_frames < 150:
        fail(f"{name}: {n_frames} frames per uroce-pcap-check, {len(frames)} in the file")
    missing = sorted(WANT_OPCODES - set(counts))
    if missing:
        fail(f"{name}: opcodes never seen by uroce-pcap-check: {[hex(o) for o in missing]}")
    ours = [parse(i + 1, fr) for i, fr in enumerate(frames)]
    if collections.Counter(p["opcode"] for p in ours) != collections.Counter(counts):
        fail(f"{name}: our opcode counts differ from uroce-pcap-check's")

    compare_with_tshark(name, frames, ours, counts, tshark, pcap, cnp_dscp=CNP_DSCP)
    return ours, counts


def main():
    if len(sys.argv) == 8 and sys.argv[1] == "--lanes":
        a = sys.argv[2:]
        check_lanes([tuple(a[0:3]), tuple(a[3:6])])
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] == "--daemon":
        args, opts = sys.argv[2:], {}
        while args and args[0] in ("--cnps", "--cnp-dscp", "--min-ce") and len(args) >= 2:
            opts[args[0]] = int(args[1])
            args = args[2:]
        if len(args) < 4:
            fail("usage: check_capture.py --daemon [--cnps N] [--cnp-dscp D] [--min-ce N] "
                 "UROCE_PCAP_CHECK TSHARK MIN_ROCE PCAP...")
        tool, tshark, min_roce = args[0], args[1], int(args[2])
        if not os.access(tshark, os.X_OK):
            fail(f"tshark not found ({tshark!r}): install the tshark package")
        for pcap in args[3:]:
            check_daemon_capture(pcap, tool, tshark, min_roce, opts.get("--cnps"),
                                 opts.get("--cnp-dscp"), opts.get("--min-ce", 0))
        return 0
    if len(sys.argv) != 5:
        fail(__doc__.strip().splitlines()[-1])
    gen, tool, tshark, work = sys.argv[1:]
    if not os.access(tshark, os.X_OK):
        fail(f"tshark not found ({tshark!r}): install the tshark package")
    if not os.access(tool, os.X_OK):
        fail(f"uroce-pcap-check not found ({tool!r})")
    os.makedirs(work, exist_ok=True)
    sent, delivered = os.path.join(work, "sent.pcap"), os.path.join(work, "delivered.pcap")
    for f in (sent, delivered):
        if os.path.exists(f):
            os.unlink(f)
    env = dict(os.environ, UROCE_CAPTURE_SENT=sent, UROCE_CAPTURE_DELIVERED=delivered)
    p = subprocess.run([gen], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{gen} exited {p.returncode}:\n{p.stdout[-4000:]}{p.stderr[-2000:]}")

    s_frames, s_counts = check_one("sent", sent, tool, tshark)
    d_frames, d_counts = check_one("delivered", delivered, tool, tshark)

    # what the mix was meant to put on the wire
    syns = {f["syndrome"] for f in s_frames if f["opcode"] == 0x11}
    if not any(s is not None and s >> 5 == 0 for s in syns):
        fail("no ACK (syndrome 000xxxxx)")
    if not any(s is not None and s >> 5 == 1 for s in syns):
        fail("no RNR NAK (syndrome 001xxxxx)")
    for code, what in ((0x60, "PSN sequence error"), (0x62, "remote access error")):
        if code not in syns:
            fail(f"no {what} NAK (syndrome {code:#x}); syndromes seen: "
                 f"{sorted(hex(s) for s in syns if s is not None)}")
    reqs = collections.Counter((f["opcode"], f["qpn"], f["psn"]) for f in s_frames
                               if f["opcode"] not in AETH_OPCODES and f["opcode"] != 0x81
                               and f["opcode"] < 0x60)
    retx = sum(1 for c in reqs.values() if c > 1)
    if retx == 0:
        fail("no request was retransmitted")
    if {f["ver"] for f in s_frames} != {4, 6}:
        fail("want both IPv4 and IPv6 frames")
    # payload = UDP length - 8 (UDP) - 12 (BTH) - 4 (ICRC) - pad, for the MIDDLE opcodes
    mids = {f["udp_len"] - 24 for f in s_frames if f["opcode"] in (0x01, 0x07, 0x0E)}
    if not {256, 4096} <= mids:
        fail(f"want MIDDLE packets of 256 and 4096 payload bytes, saw {sorted(mids)}")
    ce = sum(1 for f in d_frames if f["ecn"] == 3)
    ect = sum(1 for f in s_frames if f["ecn"] == 2)
    if ce == 0 or ect == 0:
        fail(f"ECN: {ect} ECT(0) frames sent, {ce} CE frames delivered")
    if any(f["ecn"] == 3 for f in s_frames):
        fail("a frame was sent with CE already set")
    print(f"OK: sent {len(s_frames)} frames ({len(s_counts)} opcodes), delivered "
          f"{len(d_frames)} ({len(d_counts)} opcodes); {retx} requests retransmitted; "
          f"{ce} CE-marked, {s_counts.get(0x81, 0)} CNPs; syndromes "
          f"{sorted(hex(s) for s in syns if s is not None)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
