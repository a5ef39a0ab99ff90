#!/usr/bin/env python3
"""The start cost, restart cost and speeds a live run's jobs really had. Over its jobs
that ran once, a least-squares fit of wall = start + work / speed(model, workers), one
start cost shared by all jobs, one speed per class. Writes TABLE (the speed table TP
with the fitted classes replaced; classes without such a job keep TP's value) and
prints the start cost and the restart cost.

The restart cost is what a job lost per run after its first, as the simulator charges
it (GPUs held, no progress): from the controller's decision to its new run's first log
line, plus the start cost (the new run's start-up). The decision is the resize or move
(`resize/migrate` in serve.log: the job is placed again at once, so the wait for its
old run to leave is part of the restart), or, for a job preempted into the queue, the
start that resumed it (the wait in the queue is the policy's, which the simulator
models). A run without serve.log (Slurm's own) prints the default.
    fitspeeds.py JOBS_CSV TP TABLE [DEFAULT_RESTART (16)]"""
import csv
import json
import os
import re
import statistics
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


def restart_latencies(run_dir):
    """decision -> the new run's first log line, for every run after a job's first"""
    epoch = None
    for line in open(os.path.join(run_dir, "journal")):
        if line.startswith("epoch "):
            epoch = float(line.split()[1])
    if epoch is None:
        return []
    events = {}  # job id -> [(time, kind)] in log order
    for line in open(os.path.join(run_dir, "serve.log")):
        m = re.match(r"\[\s*([\d.]+)\] (start|resize/migrate|preempt) job (\d+)", line)
        if m:
            events.setdefault(m.group(3), []).append((float(m.group(1)), m.group(2)))
    lat = []
    for job, evs in events.items():
        try:
            runs = [float(l.split()[2]) - epoch for l in open(os.path.join(run_dir, job + ".log")) if l.startswith("run ")]
        except OSError:
            continue
        for r in runs[1:]:
            before = [e for e in evs if e[0] <= r + 0.05]  # the log's times are rounded to 0.1 s
            stops = [i for i, e in enumerate(before) if e[1] != "start"]
            if not stops:
                continue
            stop = before[stops[-1]]
            starts = [e for e in before[stops[-1]:] if e[1] == "start"]
            t = stop[0] if stop[1] == "resize/migrate" or not starts else starts[-1][0]
            lat.append(max(0.0, r - t))
    return lat


rc = float(sys.argv[4]) if len(sys.argv) > 4 else 16.0
run_dir = os.path.dirname(os.path.abspath(jobs_csv))
if os.path.exists(os.path.join(run_dir, "serve.log")):
    lat = restart_latencies(run_dir)
    if lat:
        rc = statistics.mean(lat) + sc
print("%.1f %.1f" % (sc, rc))
