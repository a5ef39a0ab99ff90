#!/usr/bin/python3
"""Accounting check of a faults.sh (or run.sh) directory: every submitted job
completed once or was reported failed with a reason by the controller; no job
ran again after it completed; no two runs of a job overlapped; the
controllers' start actions equal the runs the jobs logged. Exit 1 on a
violation.
  check.py DIR"""
import os, re, sys

d = sys.argv[1]
serve = open(os.path.join(d, "serve.log")).read() if os.path.exists(os.path.join(d, "serve.log")) else ""
starts = {}
for m in re.finditer(r"start job (\d+) on", serve):
    starts[m.group(1)] = starts.get(m.group(1), 0) + 1
final = {}
summ = serve.rsplit("summary:", 1)
if len(summ) == 2:
    for m in re.finditer(r"job (\d+): (.+?) arrival", summ[1]):
        final[m.group(1)] = m.group(2)
bad, rows = [], []
for line in open(os.path.join(d, "submitted")):
    f = line.split()
    sid, name = f[0], f[1]
    runs, exits = [], []
    try:
        for l in open(os.path.join(d, sid + ".log")):
            g = l.split()
            if len(g) < 3: continue
            if g[0] == "run": runs.append(float(g[2]))
            elif g[0] == "exit": exits.append((int(g[1]), float(g[2])))
    except OSError:
        pass
    done = [t for rc, t in exits if rc == 0]
    st = final.get(sid, "?")
    why = []
    if len(done) > 1: why.append("completed %d times" % len(done))
    if done and any(r > done[0] for r in runs): why.append("ran again after it completed")
    if not done and (st == "COMPLETED" or st in ("?", "not ended")): why.append("neither completed nor reported failed (%s)" % st)
    if done and st != "COMPLETED": why.append("completed but the controller says %s" % st)
    for k in range(len(runs) - 1):
        if k < len(exits) and runs[k + 1] < exits[k][1]: why.append("run %d started before run %d ended" % (k + 2, k + 1))
    if serve and starts.get(sid, 0) != len(runs): why.append("controller started it %d times, it ran %d times" % (starts.get(sid, 0), len(runs)))
    rows.append((sid, name, len(runs), " ".join(str(rc) for rc, _ in exits), st, "; ".join(why) or "ok"))
    if why: bad.append(sid)
print("%-6s %-5s %4s  %-18s %-26s %s" % ("job", "name", "runs", "exit statuses", "controller's verdict", "check"))
for r in rows: print("%-6s %-5s %4d  %-18s %-26s %s" % r)
m = re.findall(r"summary: .*", serve)
if m: print(m[-1])
print("checked %d jobs: %s" % (len(rows), "all accounted for, none run twice" if not bad else "VIOLATIONS: " + " ".join(bad)))
sys.exit(1 if bad else 0)
