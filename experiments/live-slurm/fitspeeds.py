#!/usr/bin/env python3
"""The start cost and the speeds a live run's jobs really had: over its jobs that ran
once, a least-squares fit of wall = start + work / speed(model, workers), one start
cost shared by all jobs, one speed per class. Writes TABLE (the speed table TP with
the fitted classes replaced; classes without such a job keep TP's value) and prints
the start cost.
    fitspeeds.py JOBS_CSV TP TABLE"""
import csv
import json
import re
import sys

jobs_csv, tp, out = sys.argv[1:4]
t = json.load(open(tp))
jobs = []  # (class, work, wall)
for r in csv.DictReader(open(jobs_csv)):
    if r["end"] and r["first_run"] and r["runs"] == "1":
        jobs.append(((r["model"], int(r["gpus"])), float(r["work"]), float(r["end"]) - float(r["first_run"])))
sc, inv = 10.0, {}
if jobs:  # alternating least squares: each class's exact slope for a start cost, then the best start cost
    sc = 0.0
    for _ in range(200):
        num, den = {}, {}
        for k, w, wall in jobs:
            num[k] = num.get(k, 0) + w * (wall - sc)
            den[k] = den.get(k, 0) + w * w
        inv = {k: num[k] / den[k] for k in num}
        sc = sum(wall - w * inv[k] for k, w, wall in jobs) / len(jobs)
for cls in ("testbed", "testbed_unconsolidated"):
    for k in t[cls]:
        m = re.match(r"\('(.+)', (\d+)\)", k)
        u = inv.get((m.group(1), int(m.group(2))))
        if u and u > 0:
            t[cls][k] = {"null": round(1 / u, 3)}
json.dump(t, open(out, "w"), indent=1)
print("%.1f" % sc)
