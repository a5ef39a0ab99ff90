#!/usr/bin/env python3
"""Checks of drills.sh's results (DIR): every shoal job completed exactly once (its own log: one 'done'),
no job ran twice at once, no two runs shared a node at once (sacct --duplicates: every run of every job,
the other user's too; one GPU per node), the controller named every fault (torn journal tails dropped,
no damage refused, Slurm not answering and answering again, the second controller refused).
Prints one line per check and a last line 'drills: N of M checks hold'; exit status 1 if one fails.
   drills_check.py DIR"""
import re
import sys
from datetime import datetime


def nodes_of(spec):
    """'ld-h[0-2,5]' or 'ld-h0,ld-h3' -> the node names"""
    out = []
    for part in re.findall(r'[^,\[]+(?:\[[^\]]*\])?', spec):
        m = re.match(r'(.*)\[(.*)\]$', part)
        if not m:
            out.append(part)
            continue
        for r in m.group(2).split(','):
            a, _, b = r.partition('-')
            for i in range(int(a), int(b or a) + 1):
                out.append(f'{m.group(1)}{i}')
    return out


def when(s):
    try:
        return datetime.strptime(s, '%Y-%m-%dT%H:%M:%S').timestamp()
    except ValueError:
        return None


def main(d):
    submitted = [line.split() for line in open(f'{d}/submitted') if line.strip()]
    shoal = [i for i, kind in submitted if kind == 'shoal']
    checks = []
    # every job completed exactly once
    bad = []
    for i in shoal:
        try:
            log = open(f'{d}/{i}.log').read().splitlines()
        except OSError:
            log = []
        done = sum(1 for line in log if line.startswith('done'))
        if done != 1:
            bad.append(f'{i}: done {done} times, {sum(1 for x in log if x.startswith("run"))} runs')
    checks.append((not bad, f'{len(shoal)} jobs completed exactly once' if not bad else 'lost or doubled: ' + '; '.join(bad)))
    # runs from sacct: none of a job at once, none sharing a node at once
    runs = []
    for line in open(f'{d}/sacct.txt'):
        f = line.rstrip('\n').split('|')
        if len(f) < 6 or '.' in f[0]:
            continue
        s, e = when(f[3]), when(f[4])
        if s is None or f[5] in ('', 'None assigned'):
            continue
        runs.append((f[0], s, e if e is not None else float('inf'), nodes_of(f[5]), f[2]))
    overlaps = []
    for a in range(len(runs)):
        for b in range(a + 1, len(runs)):
            x, y = runs[a], runs[b]
            if x[1] < y[2] and y[1] < x[2] and (x[0] == y[0] or set(x[3]) & set(y[3])):
                overlaps.append(f'{x[0]} ({x[4]} on {",".join(x[3])}) and {y[0]} ({y[4]} on {",".join(y[3])})')
    checks.append((not overlaps and len(runs) >= len(submitted),
                   f'{len(runs)} runs in sacct, none of one job at once, none sharing a node at once'
                   if not overlaps else 'overlapping runs: ' + '; '.join(overlaps)))
    serve = open(f'{d}/serve.log').read()
    cuts = [line.split() for line in open(f'{d}/cuts')]
    torn = sum(1 for _, n, o in cuts if 0 < int(o) < int(n))
    said = serve.count('its last record was cut')
    offsets = sorted({int(o) for _, n, o in cuts if int(o) < int(n)})
    checks.append((said >= torn, f'{len(cuts)} kills; {torn} torn last records (offsets {offsets[0] if offsets else "-"}..'
                   f'{offsets[-1] if offsets else "-"}), {said} dropped and said in the log'))
    damage = serve.count('can no longer vouch')
    checks.append((damage == 0, f'{damage} refusals for damage (a cut last record is never damage)'))
    checks.append(('does not answer' in serve and 'answers again after' in serve,
                   'slurmctld outage said (does not answer, answers again)'))
    second = open(f'{d}/second.log').read()
    checks.append(('is served by controller drill' in second and 'exit 0' not in second,
                   'second controller refused: ' + (second.splitlines()[0] if second else '(nothing)')))
    for ok, text in checks:
        print(('ok   ' if ok else 'FAIL ') + text)
    n = sum(1 for ok, _ in checks if ok)
    print(f'drills: {n} of {len(checks)} checks hold')
    return 0 if n == len(checks) else 1


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
