"""The toggled co-location measurement's split (experiments/interference/split.py): a job's iterations counted as
alone or co-located by the phase of the co-runner they lie in, those crossing a switch or starting within the
margin after one left out, the rates from the medians; too few iterations in a phase give nan, a malformed line
is refused naming the file and line."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import PY, check  # noqa: E402

SPLIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "experiments", "interference", "split.py")


def run(*args):
    p = subprocess.run([PY, SPLIT] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def phases(tmp, n=4, start=100.0, period=1.0):
    path = os.path.join(tmp, "toggles")
    write(path, "".join("%.3f %s\n" % (start + i * period, "off" if i % 2 == 0 else "on") for i in range(n)))
    return path


def iter_log(tmp, ends):
    path = os.path.join(tmp, "il.csv")
    rows = ["iter,epoch,group_size,compute_ms,sync_ms,loss,lr,consensus,payload_bytes,wall_s"]
    rows += ["%d,0,1,1,0,0.1,0.05,,0,%.6f" % (i, t) for i, t in enumerate(ends)]
    write(path, "\n".join(rows) + "\n")
    return path


def job_ends(t0, t1, dt_off, dt_on, start=100.0):
    """iteration end times from t0 to t1: dt_off long in even seconds after start (off), dt_on in odd (on)"""
    ends, t = [], t0
    while t < t1:
        t += dt_on if int(t - start) % 2 == 1 else dt_off
        ends.append(t)
    return ends


def splits_by_phase(tmp):
    tg = phases(tmp)
    rc, out, err = run("iters", iter_log(tmp, job_ends(99.5, 104.0, 0.01, 0.025)), tg, "--warm", "0")
    check(rc == 0, "split failed: %s" % err)
    alone, coloc, n_off, n_on = out.split()
    check(abs(float(alone) - 100) < 1e-6 and abs(float(coloc) - 40) < 1e-6, "rates: %s" % out)
    # 2 off phases of 1 s at 10 ms (95 each after the margin), 2 on phases at 25 ms (38 each);
    # the iterations before the first phase began are nobody's
    check(185 <= int(n_off) <= 190 and 72 <= int(n_on) <= 76, "counts: %s" % out)
    # membw's passes: the same split
    passes = os.path.join(tmp, "membw.out")
    write(passes, "".join("pass %.6f %.6f\n" % (e, 0.02 if int(e - 0.001 - 100) % 2 else 0.01)
                          for e in job_ends(100.0, 104.0, 0.01, 0.02)) + "GB/s 10.0 (check 2.0)\n")
    rc, out, err = run("passes", passes, tg)
    check(rc == 0 and out.split()[:2] == ["100.0000", "50.0000"], "passes: %r %s" % (out, err))


def too_few_and_malformed(tmp):
    tg = phases(tmp)
    # iterations of 0.6 s: at most one fits a phase after the margin
    rc, out, err = run("iters", iter_log(tmp, job_ends(100.0, 104.0, 0.6, 0.6)), tg, "--warm", "0")
    check(rc == 0 and out.strip() == "nan nan" and "fewer than 5" in err, "too few: %r %r" % (out, err))
    bad = os.path.join(tmp, "bad-toggles")
    write(bad, "100.0 off\n101.0 maybe\n")
    rc, out, err = run("iters", iter_log(tmp, [100.1, 100.2]), bad)
    check(rc != 0 and "bad-toggles:2" in err, "bad toggles: %d %r" % (rc, err))
    il = os.path.join(tmp, "bad.csv")
    write(il, "iter,wall_s\n1,100.1\nx,100.2\n")
    rc, out, err = run("iters", il, tg)
    check(rc != 0 and "bad.csv:3" in err, "bad iter log: %d %r" % (rc, err))
    rc, out, err = run("iters", os.path.join(tmp, "missing.csv"), tg)
    check(rc != 0 and "missing.csv" in err, "missing file: %d %r" % (rc, err))


def main():
    with tempfile.TemporaryDirectory(prefix="shoal-split-") as tmp:
        splits_by_phase(tmp)
        too_few_and_malformed(tmp)


if __name__ == "__main__":
    main()
