#!/usr/bin/env python3
"""The training-like loop of `shoal bench allreduce --steps` (MS of emulated compute, then an allreduce
of -b bytes; per step the slowest rank's time) through shoal's Python binding, for builds whose bench
has no --steps: ae3.sh runs the automatic choice before the link matrix this way, with PYTHONPATH at
that build's python/ and SHOAL_LIBRARY at its libshoal.so.0. Start it under `shoal launch`.
  steps.py -b BYTES --steps N [--step-ms MS] [--seconds S]"""
import argparse
import time

import numpy as np

import shoal


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-b", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--step-ms", type=float, default=0)
    ap.add_argument("--seconds", type=float, default=0)
    a = ap.parse_args()
    comm = shoal.Comm()
    rank = comm.rank
    count = max(1, a.b // 4)
    x = ((np.arange(count, dtype=np.float32) * 7 + rank * 13) % 17 - 8).astype(np.float32)
    tv = np.zeros(2, dtype=np.float64)
    if rank == 0:
        print("# shoal (Python binding) allreduce --steps %d: %d ranks, %d B, auto, step compute %.1f ms"
              % (a.steps, comm.size, count * 4, a.step_ms), flush=True)
        print("#   step   time(ms)  re-profiles algo        t(s)", flush=True)
    total, done, start = 0.0, 0, time.perf_counter()
    for k in range(a.steps):
        if a.step_ms > 0:
            time.sleep(a.step_ms / 1e3)
        t0 = time.perf_counter()
        comm.allreduce(x)
        tv[0] = time.perf_counter() - t0
        tv[1] = time.perf_counter() - start if rank == 0 else 0.0
        comm.allreduce(tv, op="max")
        total += tv[0]
        done += 1
        if rank == 0:
            print("  %6d %10.2f %12s %-6s %9.3f" % (k, tv[0] * 1e3, "-", "auto", tv[1]), flush=True)
        if a.seconds > 0 and tv[1] >= a.seconds:
            break
    if rank == 0:
        print("# steps %d, allreduce time %.3f s in all, mean %.2f ms, wall %.3f s" % (
            done, total, total / done * 1e3, time.perf_counter() - start), flush=True)
    comm.destroy()


if __name__ == "__main__":
    main()
