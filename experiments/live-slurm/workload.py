#!/usr/bin/python3
"""The live workload: N shoal train jobs with staggered arrivals, seeded.

A shared GPU cluster's mix: many short jobs and a few long, large ones (job
length heavy-tailed and larger jobs running longer, as in Philly):
  long   (10%): 4 workers (2 for a third of them), 180-280 s of training;
  medium (15%): 2 or 4 workers, 45-90 s;
  short  (75%): 1 or 2 workers, 15-35 s.
Models mlp and cnn (half each); three quarters elastic (1-4 workers), the rest
rigid. Lengths are at the requested size, turned into samples with the
measured speeds (throughputs.json, the table `shoal sim --speed table` reads:
worker-steps/s of batch 64). Arrivals: a Poisson process over WINDOW seconds,
the first job at 0. --scale F multiplies every length by F (a shorter run).
--ps F makes a fraction F of the jobs parameter-server jobs (`shoal train
--sync ps`, rigid at their requested size, ceil(workers/2) servers; drawn
from a second seeded stream, so the rest of the workload is the same as
without it); their lengths use the same speeds (the table has no ps rows).

Writes OUT/jobs.txt (one line per job for run.sh: index arrival gpus min max
model epochs train_subset work expected_s) and OUT/trace.csv (the same jobs as a
shoal job CSV for `shoal sim --trace`); jobs.txt's last column is the server count (0: bsp).
  workload.py THROUGHPUTS OUT [--jobs N] [--seed S] [--window W] [--scale F] [--ps F]"""
import argparse, json, math, random, re

ap = argparse.ArgumentParser()
ap.add_argument("throughputs")
ap.add_argument("out")
ap.add_argument("--jobs", type=int, default=30)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--window", type=float, default=240)
ap.add_argument("--scale", type=float, default=1)
ap.add_argument("--ps", type=float, default=0)
a = ap.parse_args()

t = json.load(open(a.throughputs))
speed = {}  # (model, workers) -> worker-steps/s
for cls in ("testbed", "testbed_unconsolidated"):
    for k, v in t[cls].items():
        m = re.match(r"\('(.+)', (\d+)\)", k)
        speed[(m.group(1), int(m.group(2)))] = v["null"]

rng = random.Random(a.seed)
gaps = [rng.expovariate(a.jobs / a.window) for _ in range(a.jobs)]
arr, now = [], 0.0
for g in gaps:
    arr.append(round(now, 1))
    now += g
jobs = []
nlong = max(1, round(0.10 * a.jobs))
nmed = max(1, round(0.15 * a.jobs))
kinds = ["long"] * nlong + ["medium"] * nmed + ["short"] * (a.jobs - nlong - nmed)
rng.shuffle(kinds)
for i in range(a.jobs):
    kind = kinds[i]
    if kind == "long":
        g, dur = (4 if rng.random() < 2 / 3 else 2), rng.uniform(180, 280)
    elif kind == "medium":
        g, dur = rng.choice((2, 4)), rng.uniform(45, 90)
    else:
        g, dur = rng.choice((1, 1, 2)), rng.uniform(15, 35)
    model = rng.choice(("mlp", "cnn"))
    elastic = rng.random() < 0.75
    lo, hi = (1, 4) if elastic else (g, g)
    samples = dur * a.scale * speed[(model, g)] * 64
    epochs = max(1, math.ceil(samples / 60000))
    subset = max(1024, int(round(samples / epochs / 256)) * 256)
    work = epochs * subset // 64
    jobs.append([i, arr[i], g, lo, hi, model, epochs, subset, work, work / speed[(model, g)], 0])
ps_rng = random.Random(a.seed * 7919 + 1)
for j in jobs:
    if ps_rng.random() < a.ps:
        j[3] = j[4] = j[2]  # rigid: a ps job resumes with the same workers and servers only
        j[10] = (j[2] + 1) // 2

with open(a.out + "/jobs.txt", "w") as f:
    f.write("# index arrival_s gpus min max model epochs train_subset work_worker_steps expected_s servers\n")
    for j in jobs:
        f.write("%d %.1f %d %d %d %s %d %d %d %.1f %d\n" % tuple(j))
with open(a.out + "/trace.csv", "w") as f:
    f.write("arrival,gpus,work,model,min_workers,max_workers,worker_cpus,worker_mem_gb,arch,ps\n")
    for j in jobs:
        f.write("%.1f,%d,%d,%s,%d,%d,1,1,%s,%d\n" % (j[1], j[2], j[8], j[5], j[3], j[4], "ps" if j[10] else "allreduce", j[10]))
gs = sum(j[2] * j[9] for j in jobs)
print("%d jobs (%d parameter-server) over %.0f s, %.0f GPU-s of training at the requested sizes (%.0f s of 8 GPUs)" %
      (len(jobs), sum(1 for j in jobs if j[10]), arr[-1], gs, gs / 8))
