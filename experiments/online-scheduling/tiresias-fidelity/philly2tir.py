#!/usr/bin/env python3
# Run: python3 philly2tir.py ../shared/data/philly/philly.csv A B OUT_tiresias_job.csv
# Philly (timestamp,duration,num_gpus,gpu_time,cluster) -> Tiresias job csv, jobs submitted in [A,B) s after the first
# submission (as shoal --window A:B), sorted by (timestamp,row); submit_time rebased to the window's first job; model vgg16.
import csv, sys, datetime
rows = []
for i, r in enumerate(csv.DictReader(open(sys.argv[1]))):
    t = datetime.datetime.strptime(r['timestamp'], '%Y-%m-%d %H:%M:%S')
    rows.append((t, i, r))
rows.sort(key=lambda x: (x[0], x[1]))
t0 = rows[0][0]; A, B = float(sys.argv[2]), float(sys.argv[3])
sel = [(int((t - t0).total_seconds()), r) for t, i, r in rows if A <= (t - t0).total_seconds() < B]
base = sel[0][0]
with open(sys.argv[4], 'w') as f:
    f.write('job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n')
    for k, (s, r) in enumerate(sel):
        nxt = sel[k + 1][0] if k + 1 < len(sel) else s
        f.write('%d,%d,%d,%d,vgg16,%d,%d\n' % (k, int(float(r['num_gpus'])), s - base, 1000, int(float(r['duration'])), nxt - s))
print(len(sel), 'jobs; max gpus', max(int(float(r['num_gpus'])) for s, r in sel))
