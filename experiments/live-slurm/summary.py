#!/usr/bin/python3
"""Summary of one run.sh directory: per job (jobs.csv) and one line:
scheduler, average JCT, makespan, GPU utilization, jobs completed of N, runs
(starts of a job's processes, from its own log), failed or unfinished jobs.

JCT = the job's "exit 0" time - its submit time. Makespan = last completion -
first submission. Utilization = GPU-seconds held by the jobs' runs (a run
from its "run" line to its "exit" line, on its nodes; a run killed without an
"exit" line until the job's next "run") / (hosts x makespan).
  summary.py DIR HOSTS SCHEDULER"""
import sys, os

d, hosts, sched = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows, jct, ends, subs, busy, runs, bad = [], [], [], [], 0.0, 0, []
for line in open(os.path.join(d, "submitted")):
    sid, idx, g, lo, hi, model, work, expect, t = line.split()
    t = float(t)
    subs.append(t)
    starts, end, open_run = [], None, None
    try:
        for l in open(os.path.join(d, sid + ".log")):
            f = l.split()
            if len(f) < 3: continue
            if f[0] == "run":
                # a run killed after the grace writes no "exit": it ended by the next run's start at the latest
                if open_run: busy += open_run[1] * (float(f[2]) - open_run[0])
                open_run = (float(f[2]), int(f[3]))
                starts.append(open_run)
            elif f[0] == "exit":
                if open_run: busy += open_run[1] * (float(f[2]) - open_run[0])
                open_run = None
                if f[1] == "0": end = float(f[2])
    except OSError:
        pass
    runs += len(starts)
    first = min(s for s, _ in starts) if starts else None
    if end is None:
        bad.append(sid)
    else:
        jct.append(end - t)
        ends.append(end)
    rows.append((sid, idx, g, lo, hi, model, work, expect, "%.2f" % t, "%.2f" % first if first else "",
                 "%.2f" % end if end else "", len(starts), " ".join(str(n) for _, n in starts),
                 "%.1f" % (end - t) if end else ""))
with open(os.path.join(d, "jobs.csv"), "w") as f:
    f.write("slurm_id,index,gpus,min,max,model,work,expected_s,submit,first_run,end,runs,nodes_per_run,jct_s\n")
    for r in rows: f.write(",".join(str(x) for x in r) + "\n")
ms = max(ends) - min(subs) if ends else 0
avg = sum(jct) / len(jct) if jct else 0
# the controller's start latency: its start decision (journal "start", absolute with the epoch) to the
# job's own "run" line
lat = []
jp = os.path.join(d, "journal")
if os.path.exists(jp):
    epoch, dec = 0.0, {}
    for l in open(jp):
        f = l.split()
        if f and f[0] == "epoch": epoch = float(f[1])
        elif f and f[0] == "start": dec.setdefault(f[1], []).append(epoch + float(f[2]))
    for sid, ts in dec.items():
        try:
            rs = [float(l.split()[2]) for l in open(os.path.join(d, sid + ".log")) if l.startswith("run ") and len(l.split()) >= 3]
        except OSError:
            continue
        for a, b in zip(sorted(ts), sorted(rs)):
            if b >= a: lat.append(b - a)
if lat:
    lat.sort()
    with open(os.path.join(d, "start_latency"), "w") as f:
        f.write("starts %d  decision -> job running: median %.2f s  mean %.2f s  max %.2f s\n" %
                (len(lat), lat[len(lat) // 2], sum(lat) / len(lat), lat[-1]))
print("%-28s avg_jct_s %7.1f  makespan_s %7.1f  util %.3f  completed %d/%d  runs %d%s" %
      (sched, avg, ms, busy / (hosts * ms) if ms else 0, len(jct), len(rows), runs,
       ("  not completed: " + " ".join(bad)) if bad else ""))
