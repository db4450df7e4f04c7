#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Checks uroce-perf's --out_json / --out_csv_file files against the table it printed (stdin):
# perftest 4.5's keys are there, "results" is the last row, "uroce.rows" and the CSV hold every
# row with the printed values. Usage: check_json.py bw|lat FILE.json FILE.csv < output
import csv
import json
import re
import sys

kind, jpath, cpath = sys.argv[1:4]
out = sys.stdin.read()
BW = ["MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate"]
LAT = ["MsgSize", "n_iterations", "t_min", "t_max", "t_typical", "t_avg", "t_stdev",
       "percentile_99", "percentile_99.9"]
keys = BW if kind == "bw" else LAT
table, in_table = [], False
for line in out.splitlines():
    if re.match(r"^ #bytes", line):
        in_table = True
        continue
    if in_table and re.match(r"^ *[0-9]+ +[0-9]+ ", line):
        table.append([float(x) for x in line.split()[:len(keys)]])
errors = []
def same(a, b):  # the table rounds to 2 (6 for MsgRate) decimals, as the JSON does
    return abs(float(a) - float(b)) <= 0.011 + 1e-6 * abs(float(b))
with open(jpath) as f:
    d = json.load(f)
info = d["test_info"]
for k in ["test", "Dual_port", "Device", "Number_of_qps", "Transport_type", "Connection_type",
          "Using_SRQ", "Mtu", "Link_type", "rdma_cm_QPs", "Data_ex_method"]:
    if k not in info:
        errors.append("test_info lacks " + k)
want_test = {"bw": "_BW_Test", "lat": "_Latency_Test"}[kind]
if not info.get("test", "").endswith(want_test):
    errors.append("test_info.test = %r" % info.get("test"))
if not table:
    errors.append("no table rows in the output")
rows = d["uroce"]["rows"]
if len(rows) != len(table):
    errors.append("%d JSON rows, %d table rows" % (len(rows), len(table)))
for t, r in zip(table, rows):
    for k, v in zip(keys, t):
        if not same(r[k], v):
            errors.append("row %d: %s = %s, the table says %s" % (t[0], k, r[k], v))
    if kind == "lat":
        p = r["percentiles"]
        if not (float(p["50"]) <= float(p["90"]) <= float(p["99"]) <= float(p["99.9"])):
            errors.append("percentiles out of order: %r" % p)
if table and any(not same(d["results"][k], v) for k, v in zip(keys, table[-1])):
    errors.append("results %r is not the last row %r" % (d["results"], table[-1]))
if d["uroce"]["data_check"] != "PASS":
    errors.append("data_check " + d["uroce"]["data_check"])
with open(cpath) as f:
    c = list(csv.reader(f))
if len(c) != len(table) + 1:
    errors.append("%d CSV lines for %d rows" % (len(c), len(table)))
col = 4 if kind == "bw" else 2  # where the numbers start
for t, r in zip(table, c[1:]):
    for i, v in enumerate(t):
        if not same(r[col + i], v):
            errors.append("CSV row %d column %s: %s, the table says %s" % (t[0], c[0][col + i], r[col + i], v))
for e in errors:
    print("check_json:", e)
sys.exit(1 if errors else 0)
