#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Checks a chart uroce-perf-plot wrote: a PNG must have the PNG signature and a non-empty IHDR
# (CRC checked); an SVG must parse as XML and hold each TEXT as the content of a <text>
# element (axis labels, series names).  Usage: check_chart.py FILE.png | FILE.svg [TEXT ...]
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

path, texts = sys.argv[1], sys.argv[2:]
with open(path, "rb") as f:
    data = f.read()
if path.endswith(".png"):
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        sys.exit(f"check_chart: {path} is not a PNG")
    w, h = struct.unpack(">II", data[16:24])
    (crc,) = struct.unpack(">I", data[29:33])
    if w == 0 or h == 0 or zlib.crc32(data[12:29]) != crc or not data.endswith(b"IEND\xaeB`\x82"):
        sys.exit(f"check_chart: {path}: bad IHDR / IEND ({w}x{h})")
    print(f"{path}: PNG {w}x{h}")
else:
    root = ET.fromstring(data)
    if not root.tag.endswith("svg"):
        sys.exit(f"check_chart: {path}: the root element is {root.tag}")
    found = {"".join(t.itertext()).strip() for t in root.iter() if t.tag.endswith("text")}
    missing = [t for t in texts if t not in found]
    if missing:
        sys.exit(f"check_chart: {path} lacks the text(s) {missing}; it has {sorted(found)}")
    print(f"{path}: SVG with {len(found)} texts, all {len(texts)} expected ones")
