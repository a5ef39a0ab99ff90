#!/usr/bin/python3
"""The toggled co-location measurement (measure.sh --toggle): a job's iterations split by whether its co-runner
ran (phase "on") or was stopped ("off") while each took place.

  split.py iters ITER_LOG TOGGLES [--warm N]    shoal train's --iter-log (wall_s: the end of each iteration;
                                                 an iteration spans the previous one's end to its own)
  split.py passes MEMBW_OUT TOGGLES              membw -l's "pass END_S SECONDS" lines
TOGGLES: lines "WALL_S on|off", the time each phase began. An iteration counts for a phase when it starts at least
--margin (0.05) s after the phase began and ends before the next began; the others are left out. Prints
"ALONE COLOCATED N_OFF N_ON": 1 / the median duration of the off and on iterations (per second), or "nan nan" with
the reason on stderr when a phase has fewer than --min (5) iterations."""
import argparse
import bisect
import csv
import math
import sys


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def read_spans(kind, path, warm):
    spans = []
    try:
        f = open(path)
    except OSError as e:
        sys.exit("split.py: %s: %s" % (path, e.strerror))
    with f:
        if kind == "iters":
            prev = None
            for n, row in enumerate(csv.DictReader(f), start=2):
                try:
                    it, t = int(row["iter"]), float(row["wall_s"])
                except (KeyError, TypeError, ValueError):
                    sys.exit("split.py: %s:%d: expected an --iter-log row with iter and wall_s" % (path, n))
                if prev is not None and it >= warm:
                    spans.append((prev, t))
                prev = t
        else:
            for n, line in enumerate(f, start=1):
                w = line.split()
                if not w or w[0] != "pass":
                    continue
                try:
                    end, d = float(w[1]), float(w[2])
                except (IndexError, ValueError):
                    sys.exit("split.py: %s:%d: expected 'pass END_S SECONDS'" % (path, n))
                spans.append((end - d, end))
    return spans


def read_phases(path):
    ph = []
    with open(path) as f:
        for n, line in enumerate(f, start=1):
            w = line.split()
            if len(w) != 2 or w[1] not in ("on", "off"):
                sys.exit("split.py: %s:%d: expected 'WALL_S on|off'" % (path, n))
            ph.append((float(w[0]), w[1]))
    return ph


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["iters", "passes"])
    ap.add_argument("timing")
    ap.add_argument("toggles")
    ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--margin", type=float, default=0.05)
    ap.add_argument("--min", type=int, default=5)
    a = ap.parse_args()
    spans = read_spans(a.kind, a.timing, a.warm)
    ph = read_phases(a.toggles)
    starts = [t for t, _ in ph]
    d = {"on": [], "off": []}
    for s, e in spans:
        i = bisect.bisect_right(starts, s) - 1
        if i < 0 or s < starts[i] + a.margin or (i + 1 < len(starts) and e > starts[i + 1]) or e <= s:
            continue
        d[ph[i][1]].append(e - s)
    if len(d["off"]) < a.min or len(d["on"]) < a.min:
        print("split.py: %s: %d alone and %d co-located iterations (fewer than %d)" % (
            a.timing, len(d["off"]), len(d["on"]), a.min), file=sys.stderr)
        print("nan nan")
        return
    off, on = median(d["off"]), median(d["on"])
    print("%.4f %.4f %d %d" % (1 / off, 1 / on, len(d["off"]), len(d["on"])))


if __name__ == "__main__":
    main()
