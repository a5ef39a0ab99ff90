#!/usr/bin/env python3
# Run: python3 compare.py TIRESIAS_LOGDIR/job.csv SHOAL_OUT/jobs-POLICY.csv SHOAL_TRACE.csv.ids
# Job-for-job comparison of start/end/JCT (shoal id k = line k of the .ids file = Tiresias job_id).
import csv, sys
t = {r['job_id']: r for r in csv.DictReader(open(sys.argv[1]))}
ids = [l.strip() for l in open(sys.argv[3])]
s = {ids[int(r['id'])]: r for r in csv.DictReader(open(sys.argv[2]))}
same = diff = 0; worst = (0, None); startdiff = 0; missing_t = [k for k in s if k not in t]
rows = []
for k, sr in s.items():
    if k not in t: continue
    tj, sj = float(t[k]['JCT']), float(sr['jct'])
    d = abs(tj - sj)
    if float(t[k]['start_time']) != float(sr['first_start']): startdiff += 1
    if d <= 1e-6 * max(1.0, abs(tj)): same += 1
    else:
        diff += 1; rows.append((k, sr['gpus'], sr['arrival'], t[k]['start_time'], sr['first_start'], t[k]['end_time'], sr['finish'], tj, sj))
        if d > worst[0]: worst = (d, k)
tavg = sum(float(r['JCT']) for r in t.values()) / len(t); savg = sum(float(r['jct']) for r in s.values()) / len(s)
print('jobs shoal=%d tiresias=%d (missing in tiresias: %d) identicalJCT=%d differ=%d first_start_differs=%d maxabsdiff=%.1f (job %s) avgJCT tiresias=%.3f shoal=%.3f'
      % (len(s), len(t), len(missing_t), same, diff, startdiff, worst[0], worst[1], tavg, savg))
if len(sys.argv) > 4:
    print('job gpus arrival t_start s_start t_end s_end t_jct s_jct')
    for r in sorted(rows, key=lambda r: float(r[2]))[:int(sys.argv[4])]: print(*r)
