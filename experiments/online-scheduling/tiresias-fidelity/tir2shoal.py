#!/usr/bin/env python3
# Run: python3 tir2shoal.py IN_tiresias_job.csv OUT_shoal_job.csv  (Tiresias job csv -> shoal job CSV; also writes OUT.ids: line k = Tiresias job_id of shoal job k)
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
rows.sort(key=lambda r: int(r['submit_time']))          # same stable sort Tiresias does (sort_all_jobs)
with open(sys.argv[2], 'w') as f, open(sys.argv[2] + '.ids', 'w') as g:
    f.write('arrival,gpus,duration\n')
    for r in rows:
        f.write('%d,%d,%d\n' % (int(r['submit_time']), int(r['num_gpu']), int(float(r['duration']))))
        g.write(r['job_id'] + '\n')                     # line k = Tiresias job_id of shoal job k
