"""The interference fit's nic level as a shared shaped link (experiments/interference/fit.py --nic-form link): hand-
checked slowdowns of the form (two jobs that each fill the link alone: 2x; two light ones: 1x; a light one beside a
bulk one: its standing queue), the one constant recovered from rows the form made, the written model file equal to
the form on every ordered pair and loaded by the simulator, and bad input refused with the class, option or source."""
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import PY, SHOAL_BIN, check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIT_DIR = os.path.join(HERE, "..", "..", "experiments", "interference")
FIT = os.path.join(FIT_DIR, "fit.py")
sys.path.insert(0, FIT_DIR)
import fit  # noqa: E402

RATE = 25000.0  # 200 Mbit/s in bytes per ms


def run(*args):
    p = subprocess.run([PY, FIT] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=100)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def model(alone_ms, theta):
    """A LinkModel with these alone iteration times (ms) and theta, as fit.py builds it from rows."""
    obs = [("nic", a, b, 1.0) for a in alone_ms for b in alone_ms]
    alone = {("nic", a, b): 1000 / alone_ms[a] for a in alone_ms for b in alone_ms}
    return fit.LinkModel(obs, alone, RATE, theta)


def hand_checked():
    wire = {c: 4 * n * fit.FRAME / RATE for c, n in fit.TRAIN_PARAMS.items()}
    # softmax and mlp take exactly their wire time alone (each fills the link); cnn 3x its wire time (a third)
    m = model({"softmax": wire["softmax"], "mlp": wire["mlp"], "cnn": 3 * wire["cnn"]}, 6.0)
    s = m.slowdown("softmax", "softmax")
    check(abs(s - 2.0) < 1e-6, "two jobs each filling the link alone: fair share, 2x: %r" % s)
    s = m.slowdown("cnn", "cnn")
    check(abs(s - 1.0) < 1e-9, "two light jobs (2/3 of the link together), small messages: 1x: %r" % s)
    # mlp's 2 MB messages outlast the 5 ms burst: cnn waits 6 ms behind its queue, and the link is overloaded
    # (cnn's third beside mlp's share): at least the queue, at most the queue plus a doubled wire time
    s = m.slowdown("cnn", "mlp")
    lo, hi = 1 + 6.0 / (3 * wire["cnn"]), 1 + (6.0 + wire["cnn"]) / (3 * wire["cnn"])
    check(lo < s <= hi + 1e-9, "cnn beside mlp: %r not in (%r, %r]" % (s, lo, hi))
    check(abs(m.burst - 5.0) < 1e-9, "burst: 5 ms of the rate: %r" % m.burst)


def fits_and_writes(tmp):
    alone_ms = {"softmax": 1.32, "mlp": 90.0, "cnn": 4.4}
    truth = model(alone_ms, 3.5)
    path = os.path.join(tmp, "rows.csv")
    with open(path, "w") as f:
        f.write("level,job,corunner,rep,unit,alone,colocated,slowdown,busy_alone,busy_pair\n")
        for rep in (1, 2):
            for a in alone_ms:
                for b in alone_ms:
                    s = truth.slowdown(a, b)
                    r = 1000 / alone_ms[a]
                    f.write("nic,%s,%s,%d,iters/s,%.6f,%.6f,%.6f,0.01,0.01\n" % (a, b, rep, r, r / s, s))
    out = os.path.join(tmp, "model.json")
    # the same jobs on a link of half the rate: the link-bound ones take twice as long alone (their alone rows say so)
    slow = model({"softmax": 2 * 1.32, "mlp": 2 * 90.0, "cnn": 4.4}, 7.0)  # the same queue's bytes: twice the delay
    slow.rate, slow.burst = RATE / 2, max(5.0, 32768 / (RATE / 2))
    test = os.path.join(tmp, "rows-100mbit.csv")
    with open(test, "w") as f:
        f.write("level,job,corunner,rep,unit,alone,colocated,slowdown,busy_alone,busy_pair\n")
        for a in alone_ms:
            for b in alone_ms:
                s, r = slow.slowdown(a, b), 1000 / slow.T[a]
                f.write("nic,%s,%s,1,iters/s,%.6f,%.6f,%.6f,0.01,0.01\n" % (a, b, r, r / s, s))
    check(abs(slow.slowdown("cnn", "mlp") - truth.slowdown("cnn", "mlp")) > 0.01, "the slower link changes a slowdown")
    rc, so, se = run("measured", "--csv", path, "--nic-form", "link", "--out", out, "--folds", "3",
                     "--test-csv", test, "--test-rate", "100mbit")
    check(rc == 0, "fit failed: %s %s" % (so, se))
    check("nic as a shared link" in so and "held-out MAPE 0.0%" in so, "held-out on rows the form made: %r" % so)
    check("test: %s (link 100mbit, theta 7.00 ms from the fit's 3.50 ms at its rate): 9 nic observations, MAPE 0.0%%"
          % test in so,
          "the other link's rows predicted: %r" % so)
    d = json.load(open(out))
    nf = d["heldout"]["nic_form"]
    check(nf["theta_ms"] == 3.5, "theta recovered: %r" % nf)
    lv = d["levels"]["nic"]
    cls, rank = lv["classes"], d["rank"]
    check(rank == 3 and sorted(cls) == sorted(alone_ms), "rank and classes: %r %r" % (rank, cls))
    for i, a in enumerate(cls):
        for k, b in enumerate(cls):
            x = lv["alpha"][i] + lv["beta"][k] + sum(lv["u"][i][r] * lv["v"][k][r] for r in range(rank))
            g = math.log1p(math.exp(x))
            want = max(truth.slowdown(a, b) - 1, 1e-4)
            check(abs(g - want) < 1e-4 * max(1, want), "%s beside %s: file %r, form %r" % (a, b, g + 1, want + 1))
    p = subprocess.run([SHOAL_BIN, "sim", "--scenario", "interference", "--interference", out, "--machines", "4",
                        "--window", "0:3600", "--policy", "fifo", "--no-progress"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=100)
    check(p.returncode == 0 and out.encode() in p.stdout, "the simulator loads it: %r" % p.stdout[-400:])
    return path


def refused(tmp, rows):
    bad = os.path.join(tmp, "net.csv")
    with open(rows) as f, open(bad, "w") as g:
        g.write(f.read() + "nic,net,mlp,1,Mbit/s,190,95,2.0,0.01,0.01\n")
    rc, _, err = run("measured", "--csv", bad, "--nic-form", "link", "--out", os.path.join(tmp, "x.json"))
    check(rc != 0 and "class net" in err and "--nic-form lowrank" in err, "net refused: %d %r" % (rc, err))
    rc, _, err = run("measured", "--csv", rows, "--nic-form", "link", "--rate", "fast", "--out", os.path.join(tmp, "x"))
    check(rc != 0 and "--rate 'fast'" in err, "bad rate: %d %r" % (rc, err))
    rc, _, err = run("measured", "--csv", rows, "--test-csv", rows, "--out", os.path.join(tmp, "x"))
    check(rc != 0 and "only with --nic-form link" in err, "--test-csv without the link form: %d %r" % (rc, err))
    rc, _, err = run("gavel", "--nic-form", "link")
    check(rc != 0 and "only for the measured source" in err, "gavel: %d %r" % (rc, err))


def main():
    hand_checked()
    with tempfile.TemporaryDirectory() as tmp:
        rows = fits_and_writes(tmp)
        refused(tmp, rows)
    print("ok")


if __name__ == "__main__":
    main()
