#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Runs uroce-pcap-check over generated captures and compares its whole report with the one
derived from the captures' manifest (what each frame was made to be).

  check_pcap_check.py --tool TOOL --workdir DIR --scapy
      generates the scapy captures (gen_captures.py) into DIR, checks each of them, the files
      the tool must refuse and the command-line handling;
  check_pcap_check.py --tool TOOL --workdir DIR --builder-gen GEN
      runs GEN DIR (frames from lib/wire's builder, written by lib/util's PcapWriter) and
      checks its captures.

Where the manifest says so, tshark (an independent dissector) must agree on the frame numbering
and on the opcode of every frame it dissects as RoCE. Any missing piece (scapy, tshark) fails
the test: it never skips.
"""

import argparse
import collections
import json
import os
import random
import shutil
import subprocess
import sys

SNAPLEN_NOTE = ("note: {} IP/UDP frame(s) cut by the snaplen before the UDP port, "
                "counted as other")
NO_ROCE = "no RoCE v2 frames (UDP destination port 4791) in the capture"

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def run_tool(tool, args):
    p = subprocess.run([tool] + args, capture_output=True, text=True, timeout=120)
    if p.returncode < 0:
        fail(f"{' '.join(args)}: killed by signal {-p.returncode}\n{p.stderr}")
    return p.returncode, p.stdout, p.stderr


def expected_report(cap, path, mode):
    """The exact stdout and exit status the manifest implies for one run mode."""
    frames = cap["frames"]
    key = "reason_no_icrc" if mode == "no_icrc" else "reason"
    quiet = mode == "quiet"
    roce = [f for f in frames if f["kind"] == "roce"]
    invalid = [f for f in roce if f[key]]
    ops = collections.Counter()
    for f in roce:
        if not f[key]:
            assert f["op"], f"manifest: valid frame {f['n']} without an opcode name"
            ops[(f["opcode"], f["op"])] += 1
    lines = []
    if not quiet:
        icrc = "not verified (--no-icrc)" if mode == "no_icrc" else "verified"
        lines.append(f"{path}: {cap['link']} capture, ICRC {icrc}")
    lines += [f"frame {f['n']}: {f[key]}" for f in invalid]
    if not quiet:
        lines.append("opcodes (valid RoCE frames):" + ("" if ops else " none"))
        lines += [f"  {name} (0x{code:02x}): {n}" for (code, name), n in sorted(ops.items())]
        cut = sum(1 for f in frames if f["cut_before_port"])
        if cut:
            lines.append(SNAPLEN_NOTE.format(cut))
    lines.append(f"totals: frames {len(frames)}, RoCE {len(roce)}, "
                 f"other {len(frames) - len(roce)}, invalid {len(invalid)}")
    if not roce:
        lines.append(NO_ROCE)
    status = 1 if invalid or (mode == "expect_roce" and not roce) else 0
    return lines, status


MODE_ARGS = {"default": [], "quiet": ["-q"], "no_icrc": ["--no-icrc"],
             "expect_roce": ["--expect-roce"]}


def check_capture(tool, workdir, cap):
    path = os.path.join(workdir, cap["file"])
    for mode in cap["runs"]:
        want, want_rc = expected_report(cap, path, mode)
        rc, out, err = run_tool(tool, MODE_ARGS[mode] + [path])
        got = out.splitlines()
        tag = f"{cap['file']} [{mode}]"
        if rc != want_rc:
            fail(f"{tag}: exit {rc}, expected {want_rc}\nstderr: {err}")
        if got != want:
            diff = [f"  line {i + 1}: got {g!r}, want {w!r}"
                    for i, (g, w) in enumerate(zip(got + [None] * len(want),
                                                   want + [None] * len(got)))
                    if g != w and (g is not None or w is not None)]
            fail(f"{tag}: report differs from the manifest\n" + "\n".join(diff[:20]))
        if mode == "expect_roce" and want_rc == 1 and "--expect-roce" not in err:
            fail(f"{tag}: stderr does not explain the exit status: {err!r}")
        if mode not in ("expect_roce",) and err:
            fail(f"{tag}: unexpected stderr: {err!r}")
        if rc == want_rc and got == want:
            print(f"ok: {tag}: exit {rc}, {got[-1] if rc == 0 else len(got)} lines as expected")

def check_tshark(cap, workdir):
    """tshark numbers frames as we do and reads the same opcode out of every RoCE frame."""
    tshark = shutil.which("tshark")
    if tshark is None:
        fail("tshark not found (scripts/install-deps.sh installs it)")
        return
    path = os.path.join(workdir, cap["file"])
    p = subprocess.run([tshark, "-n", "-r", path, "-T", "fields", "-e", "frame.number",
                        "-e", "frame.protocols", "-e", "infiniband.bth.opcode"],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        fail(f"tshark -r {cap['file']}: exit {p.returncode}: {p.stderr}")
        return
    rows = [line.split("\t") for line in p.stdout.splitlines()]
    if len(rows) != len(cap["frames"]):
        fail(f"tshark sees {len(rows)} frames in {cap['file']}, manifest {len(cap['frames'])}")
        return
    for row, f in zip(rows, cap["frames"]):
        num, protos, opcode = (row + ["", "", ""])[:3]
        if int(num) != f["n"]:
            fail(f"{cap['file']}: tshark frame {num} vs manifest frame {f['n']}")
        if f["proto"] and f["proto"] not in protos.split(":"):
            fail(f"{cap['file']} frame {f['n']}: tshark protocols {protos}, expected {f['proto']}")
        if "infiniband" in protos.split(":") and f["kind"] == "roce" and opcode:
            if int(opcode, 0) != f["opcode"]:
                fail(f"{cap['file']} frame {f['n']}: tshark opcode {opcode}, "
                     f"manifest {f['opcode']}")
    print(f"ok: {cap['file']}: tshark agrees on {len(rows)} frames")


def check_errors(tool, workdir, errors):
    for e in errors:
        path = os.path.join(workdir, e["file"])
        rc, out, err = run_tool(tool, [path])
        if rc != 2:
            fail(f"{e['file']}: exit {rc}, expected 2 (stdout {out!r})")
        if not err.startswith("uroce-pcap-check: ") or e["stderr"] not in err:
            fail(f"{e['file']}: stderr {err!r} lacks {e['stderr']!r}")
        if e["frames_before_error"] is not None:
            want = f"totals: frames {e['frames_before_error']}, "
            if not any(line.startswith(want) for line in out.splitlines()):
                fail(f"{e['file']}: stdout lacks {want!r}: {out!r}")
        print(f"ok: {e['file']}: exit {rc}: {err.strip().splitlines()[-1] if err else ''}")


def check_cli(tool, workdir):
    some = os.path.join(workdir, "no-roce.pcap")
    # (arguments, exit status, stream, text it must contain, usage message expected)
    cases = [
        ([], 2, "stderr", "no FILE given", True),
        (["-x", some], 2, "stderr", "unknown option '-x'", True),
        (["--icrc", some], 2, "stderr", "unknown option '--icrc'", True),
        ([some, some], 2, "stderr", "more than one FILE", True),
        ([os.path.join(workdir, "does-not-exist.pcap")], 2, "stderr", "does-not-exist.pcap",
         False),
        (["-h"], 0, "stdout", "usage: uroce-pcap-check", True),
        (["--help", some], 0, "stdout", "--expect-roce", True),
        (["-q", "--", some], 0, "stdout", "totals: frames 3, RoCE 0, other 3, invalid 0", False),
    ]
    for args, want_rc, stream, text, want_usage in cases:
        rc, out, err = run_tool(tool, args)
        s = out if stream == "stdout" else err
        if rc != want_rc or text not in s:
            fail(f"args {args}: exit {rc} (want {want_rc}), {stream} lacks {text!r}: {s!r}")
        elif want_usage != ("usage: uroce-pcap-check" in s):
            fail(f"args {args}: usage message {'missing' if want_usage else 'unexpected'}: {s!r}")
        else:
            print(f"ok: args {args}: exit {rc}")

def check_robustness(tool, workdir, captures, rounds=200):
    """Damaged copies of the captures (random bytes changed, cut, or spliced; fixed seed): the
    tool may report anything, but must exit 0, 1 or 2 and never crash or hang."""
    rng = random.Random(4791)
    originals = []
    for cap in captures:
        with open(os.path.join(workdir, cap["file"]), "rb") as f:
            originals.append(f.read())
    path = os.path.join(workdir, "damaged.bin")
    seen = collections.Counter()
    for i in range(rounds):
        data = bytearray(rng.choice(originals))
        for _ in range(rng.randint(1, 12)):
            op = rng.randrange(10)
            # mostly past the file header, so that the frames themselves get damaged
            lo = 0 if rng.randrange(8) == 0 or len(data) <= 64 else 64
            if op < 4 and len(data) > lo:
                data[rng.randrange(lo, len(data))] = rng.randrange(256)
            elif op < 8 and len(data) > lo:
                data[rng.randrange(lo, len(data))] ^= 1 << rng.randrange(8)
            elif op == 8:
                del data[rng.randrange(len(data) + 1):]
            else:
                at = rng.randrange(len(data) + 1)
                data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        with open(path, "wb") as f:
            f.write(data)
        rc, out, err = run_tool(tool, [path])
        seen[rc] += 1
        if rc not in (0, 1, 2):
            fail(f"damaged capture round {i}: exit {rc}\n{err}")
            shutil.copy(path, os.path.join(workdir, f"damaged-crash-{i}.bin"))
    print(f"ok: {rounds} damaged captures, exit statuses {dict(sorted(seen.items()))}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--scapy", action="store_true")
    ap.add_argument("--builder-gen")
    a = ap.parse_args()
    if os.path.isdir(a.workdir):
        shutil.rmtree(a.workdir)
    os.makedirs(a.workdir)

    if a.scapy:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        try:
            import gen_captures
        except ImportError as e:
            print(f"FAIL: cannot import scapy ({e}); install python3-scapy "
                  "(scripts/install-deps.sh)")
            return 1
        manifest = gen_captures.main(a.workdir)
    else:
        p = subprocess.run([a.builder_gen, a.workdir], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"FAIL: {a.builder_gen}: exit {p.returncode}: {p.stderr}")
            return 1
        with open(os.path.join(a.workdir, "manifest.json")) as f:
            manifest = json.load(f)

    if not manifest["captures"]:
        fail("the manifest lists no capture")
    for cap in manifest["captures"]:
        check_capture(a.tool, a.workdir, cap)
        if cap.get("tshark"):
            check_tshark(cap, a.workdir)
    check_errors(a.tool, a.workdir, manifest["errors"])
    if a.scapy:
        check_cli(a.tool, a.workdir)
        check_robustness(a.tool, a.workdir, manifest["captures"])

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
