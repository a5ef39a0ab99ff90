#!/usr/bin/env python3
"""FE1's line for one run: from the reclaim times and rank 0's iteration logs (wall_s per iteration).

usage: fe1_lost.py MODE REP T_REQ T_FREE T_LIVE ILOG_BEFORE [ILOG_AFTER]

lost_s = the job's end - (T_REQ + (last iteration - iterations done at T_REQ) / the 2-worker speed), the
2-worker speed measured over the second half of what ran with 2 workers."""
import csv
import sys


def rows(path):
    with open(path) as f:
        return [(int(r["iter"]), float(r["wall_s"]), int(r["group_size"])) for r in csv.DictReader(f)]


def main():
    mode, rep = sys.argv[1], sys.argv[2]
    t_req, t_free, t_live = (float(x) for x in sys.argv[3:6])
    a = rows(sys.argv[6])
    b = rows(sys.argv[7]) if len(sys.argv) > 7 else []
    before = [r for r in a if r[1] <= t_req]
    done_at_req = before[-1][0] + 1 if before else 0
    three = [r for r in before if r[2] == 3]
    it3 = (three[-1][1] - three[len(three) // 2][1]) / max(1, three[-1][0] - three[len(three) // 2][0]) if len(three) > 4 else 0
    after = b if b else [r for r in a if r[1] > t_req]
    two = [r for r in after if r[2] == 2]
    half = two[len(two) // 2:]
    it2 = (half[-1][1] - half[0][1]) / max(1, half[-1][0] - half[0][0])
    end_iter, end_t = after[-1][0] + 1, after[-1][1]
    ideal_end = t_req + (end_iter - done_at_req) * it2
    first_after = after[0]
    redone = max(0, done_at_req - first_after[0])
    pause = first_after[1] - t_req
    print(f"{mode} {rep} {t_free - t_req:.3f} {t_live - t_req:.3f} {end_t - ideal_end:.3f} {done_at_req} {redone} "
          f"{pause:.3f} {it3 * 1e3:.2f}ms {it2 * 1e3:.2f}ms")


main()
