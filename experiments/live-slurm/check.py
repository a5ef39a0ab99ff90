#!/usr/bin/python3
"""Accounting check of a faults.sh (or run.sh) directory: every submitted job
completed once or was reported failed with a reason by the controller; no job
ran again after it completed; no two exits within one run (two processes of a
job at once); no run without a start decision of the controller (a start may
be withdrawn before the job ran: fewer runs than starts is fine). Exit 1 on a
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
    # overlap: an exit logged after the next run had started belongs to a run that was still going (a
    # run killed outright logs no exit; its successor's start proves nothing either way)
    # two exits logged between one run's start and the next: two processes of the job at once (a run
    # killed outright logs no exit, so missing exits prove nothing)
    runs.sort()
    n_exit_between = [sum(1 for _, t in exits if runs[k] < t < (runs[k + 1] if k + 1 < len(runs) else 1e30))
                       for k in range(len(runs))]
    if any(n > 1 for n in n_exit_between): why.append("two exits within one run")
    # every run needs a start decision of the controller (a start may also be withdrawn before it ran)
    if serve and len(runs) > starts.get(sid, 0): why.append("ran %d times, the controller started it %d times" % (len(runs), starts.get(sid, 0)))
    rows.append((sid, name, len(runs), " ".join(str(rc) for rc, _ in exits), st, "; ".join(why) or "ok"))
    if why: bad.append(sid)
print("%-6s %-5s %4s  %-18s %-26s %s" % ("job", "name", "runs", "exit statuses", "controller's verdict", "check"))
for r in rows: print("%-6s %-5s %4d  %-18s %-26s %s" % r)
m = re.findall(r"summary: .*", serve)
if m: print(m[-1])
print("checked %d jobs: %s" % (len(rows), "all accounted for, none run twice" if not bad else "VIOLATIONS: " + " ".join(bad)))
sys.exit(1 if bad else 0)
