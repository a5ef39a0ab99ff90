#!/usr/bin/python3
"""Fit shoal's job-interference model (src/sched/model/interference.h) from ONE source, with held-out pairs.

    g_L(a, b)   = softplus(alpha_L[a] + beta_L[b] + u_L[a] . v_L[b])      (rank R)
    slowdown    = 1 + sum over co-runners and shared levels of g_L

The nic level of the measured source can instead be fitted in the form of a shared shaped link (--nic-form link,
what reduced.sh uses): each job's slowdown from what each job sends and how long it takes alone, one constant
fitted (class LinkModel); the result is written in the form above, tabulated per ordered pair of classes.

Sources (kept separate: one model file each):
  measured   rows of experiments/interference/measure.sh (results/measured.csv): levels core, socket,
             nic, uplink; slowdowns averaged over the repetitions
  gavel      Gavel's co-located throughputs (../shared/data/gavel/throughputs.json, one GPU type): level
             slot (two jobs on one GPU); slowdown of a = alone / co-located throughput of a

Held-out evaluation: the unordered pairs {a, b} of each level are split into K folds; each fold is
predicted by a model fitted on the others (both orders of a held-out pair are held out). MAPE over every observation, and per level. Then the model is fitted on all pairs and
written (JSON), with the held-out figures in its "heldout" field.

Noise floor (measured): the repetitions (--rep) of one pair at one level are independent measurements
of the same slowdown; their mean absolute percentage difference (each repetition against each other)
says how far apart two measurements of one pair are (with independent errors, a model that knew the
true slowdowns would score about this / sqrt(2) against one repetition, / sqrt(2n) against the mean of
n). Reported per level where a pair was measured more than once (the "noise" field).

  fit.py measured [--csv FILE] [--out build/interference-measured.json]   (the shipped model, data/interference-
             measured.json, is reduced.sh's fit: results/reduced/measured.csv, --nic-form link)
  fit.py gavel [--throughputs FILE] [--gpu v100] [--out FILE]
  fit.py measured --nic-form link [--rate 200mbit] [--test-csv FILE --test-rate RATE]   (FILE's nic rows, measured
             at another link rate, predicted by the fitted form)
  options: --rank R (measured 1, gavel 4)  --folds K (5)  --seed S (1)  --iters N (3000)
           --lam X (L2 weight on u, v: measured 0.1, gavel 0.01)
           --pred FILE (held-out predictions as CSV, for the plot)
"""
import argparse
import ast
import csv
import json
import math
import random
import sys

import torch

# the speed models' job model names -> classes of the measured model (docs/learned-placement.md)
MEASURED_MODELS = {
    "resnet50": "cnn", "resnet18": "cnn", "cifar10-resnet": "cnn", "deepspeech2": "cnn",
    "vgg16": "mlp", "bert-base": "mlp", "transformer": "mlp", "lstm-lm": "membw",
    # Gavel's job types (the table speed model), by prefix
    "ResNet-*": "cnn", "CycleGAN*": "cnn", "Transformer*": "mlp", "LM*": "membw", "Recommendation*": "membw",
    "A3C*": "softmax",
}


def load_measured(path):
    """-> ([(level, job, corunner, mean slowdown)], {key: [slowdown per repetition]},
    {key: mean alone rate of the job (per second)})"""
    sums, alone = {}, {}
    try:
        f = open(path)
    except OSError as e:
        sys.exit("fit.py: %s: %s (experiments/interference/measure.sh writes it)" % (path, e.strerror))
    with f:
        for row in csv.DictReader(f):
            if row["corunner"] == "none":
                continue
            s = float(row["slowdown"])
            if not math.isfinite(s) or s <= 0:
                print("fit.py: %s: skipping %s/%s/%s rep %s: slowdown %s" % (path, row["level"], row["job"],
                      row["corunner"], row["rep"], row["slowdown"]), file=sys.stderr)
                continue
            k = (row["level"], row["job"], row["corunner"])
            sums.setdefault(k, []).append(s)
            alone.setdefault(k, []).append(float(row["alone"]))
    return ([(l, a, b, sum(v) / len(v)) for (l, a, b), v in sorted(sums.items())], sums,
            {k: sum(v) / len(v) for k, v in alone.items()})


def noise_floor(reps):
    """{(level, job, corunner): [slowdown per repetition]} -> {level: (MAPE of one repetition against
    another, pairs measured more than once)}"""
    per = {}
    for (l, _, _), v in reps.items():
        if len(v) < 2:
            continue
        d = [abs(x - y) / y for i, x in enumerate(v) for j, y in enumerate(v) if i != j]
        per.setdefault(l, []).append(sum(d) / len(d))
    return {l: (sum(v) / len(v), len(v)) for l, v in sorted(per.items())}


def load_gavel(path, gpu):
    d = json.load(open(path))
    if gpu not in d:
        sys.exit("fit.py: %s has no GPU type '%s' (%s)" % (path, gpu, ", ".join(sorted(d))))
    obs = []
    for k, e in d[gpu].items():
        name, sf = ast.literal_eval(k)
        alone = e["null"]
        for p, val in e.items():
            if p == "null" or val[0] <= 0 or val[1] <= 0:
                continue  # [0, 0]: the pair was not run together (Gavel: does not fit)
            pname, psf = ast.literal_eval(p)
            tag = lambda n, s: n if s == 1 else "%s x%d" % (n, s)
            obs.append(("slot", tag(name, sf), tag(pname, psf), alone / val[0]))
    return obs


class Model:
    def __init__(self, obs, rank, seed):
        self.levels = sorted({o[0] for o in obs})
        self.cls = {l: sorted({o[1] for o in obs if o[0] == l} | {o[2] for o in obs if o[0] == l}) for l in self.levels}
        self.rank = rank
        g = torch.Generator().manual_seed(seed)
        self.p = {}
        for l in self.levels:
            n = len(self.cls[l])
            self.p[l] = {k: torch.nn.Parameter(x) for k, x in (
                ("alpha", torch.zeros(n)), ("beta", torch.zeros(n)),
                ("u", 0.1 * torch.randn(n, rank, generator=g)), ("v", 0.1 * torch.randn(n, rank, generator=g)))}

    def params(self):
        return [x for l in self.levels for x in self.p[l].values()]

    def predict(self, obs):
        out = []
        for l in self.levels:
            idx = [i for i, o in enumerate(obs) if o[0] == l]
            if not idx:
                continue
            ci = {c: i for i, c in enumerate(self.cls[l])}
            a = torch.tensor([ci[obs[i][1]] for i in idx])
            b = torch.tensor([ci[obs[i][2]] for i in idx])
            p = self.p[l]
            x = p["alpha"][a] + p["beta"][b] + (p["u"][a] * p["v"][b]).sum(1)
            out.append((idx, 1 + torch.nn.functional.softplus(x)))
        pred = torch.zeros(len(obs))
        for idx, v in out:
            pred = pred.index_put((torch.tensor(idx),), v)
        return pred

    def fit(self, obs, iters, lam):
        """Returns the training MAPE."""
        opt = torch.optim.Adam(self.params(), lr=0.03)
        target = torch.tensor([o[3] for o in obs])
        for _ in range(iters):
            pred = self.predict(obs)
            loss = ((pred - target).abs() / target).mean()
            loss = loss + lam * sum((x * x).mean() for l in self.levels for k, x in self.p[l].items() if k in "uv")
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            return float(((self.predict(obs) - target).abs() / target).mean())

    def to_json(self, source, models, heldout):
        lv = {}
        for l in self.levels:
            p = self.p[l]
            r = lambda t: [round(float(x), 6) for x in t]
            lv[l] = {"classes": self.cls[l], "alpha": r(p["alpha"]), "beta": r(p["beta"]),
                     "u": [r(row) for row in p["u"]], "v": [r(row) for row in p["v"]]}
        d = {"format": "shoal-interference 1", "source": source, "rank": self.rank, "levels": lv}
        if models:
            d["models"] = models
            d["default_class"] = "mlp"
        d["heldout"] = heldout
        return d


# The shoal train models' parameter counts (src/train/model.c; 4-byte floats): a 2-rank allreduce sends each
# gradient once each way per iteration. Full TCP segments carry 1448 of the 1514 bytes on the wire.
TRAIN_PARAMS = {"softmax": 7850, "mlp": 535818, "cnn": 9098}
FRAME = 1514 / 1448


def parse_rate(text):
    """'200mbit' -> bytes per ms"""
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1}
    for u, f in units.items():
        if text.endswith(u):
            try:
                v = float(text[:-len(u)]) * f
            except ValueError:
                break
            if v > 0 and math.isfinite(v):
                return v / 8 / 1000
            break
    sys.exit("fit.py: --rate '%s': expected a rate such as 200mbit (kbit, mbit, gbit)" % text)


class LinkModel:
    """The nic level as one shaped link two data-parallel jobs share (measure.sh's nic level: both jobs'
    2-rank allreduces cross the same two host links, tbf-shaped at RATE with a burst of 5 ms of it).
    Per job a, from its own alone runs: T_a, its iteration time alone; m_a = bytes it sends per iteration
    / RATE, its data's time on the wire; rho_a = min(1, m_a / T_a), its share of the link alone. Beside b,
    with u_b = m_b / t_b b's share co-located (t_b its co-located iteration time: a fixed point):
        t_a = T_a + m_a * min(1, max(0, rho_a + u_b - 1) / (1 - u_b))    the link's overload: a's demand
                                                                         beyond what b leaves stretches its
                                                                         wire time, at most doubled (fair share)
                  + theta * [m_b > burst]                                a co-runner whose messages outlast
                                                                         the burst keeps a standing queue that
                                                                         a's messages wait behind
        slowdown = t_a / T_a
    theta (ms) is the one fitted constant (grid 0..20 ms, least mean absolute percentage error)."""

    def __init__(self, obs, alone, rate, theta=0.0):
        self.rate = rate
        self.burst = max(5.0, 32768 / rate)
        self.theta = theta
        t = {}
        for o in obs:
            r = alone.get(o[:3])
            if r and r > 0:
                t.setdefault(o[1], []).append(1000 / r)
        self.T = {c: sum(v) / len(v) for c, v in t.items()}
        missing = sorted({c for o in obs for c in o[1:3]} - set(TRAIN_PARAMS))
        if missing:
            sys.exit("fit.py: --nic-form link: no message size for class %s (only %s): use --nic-form lowrank" % (
                ", ".join(missing), ", ".join(sorted(TRAIN_PARAMS))))
        self.cls = {"nic": sorted(self.T)}

    def wire_ms(self, c):
        return 4 * TRAIN_PARAMS[c] * FRAME / self.rate

    def slowdown(self, a, b):
        Ta, Tb, ma, mb = self.T[a], self.T[b], self.wire_ms(a), self.wire_ms(b)
        ra, rb = min(1.0, ma / Ta), min(1.0, mb / Tb)

        def time(T, m, rho, u, m_co):
            over = max(0.0, rho + u - 1)
            return T + m * min(1.0, over / max(1e-9, 1 - u)) + (self.theta if m_co > self.burst else 0.0)

        ta, tb = Ta, Tb
        for _ in range(200):  # damped: the two co-located times depend on each other
            na, nb = time(Ta, ma, ra, mb / tb, mb), time(Tb, mb, rb, ma / ta, ma)
            ta, tb = 0.5 * (ta + na), 0.5 * (tb + nb)
        return ta / Ta

    def predict(self, obs):
        return torch.tensor([self.slowdown(o[1], o[2]) for o in obs])

    def fit(self, obs):
        best = None
        for k in range(81):
            self.theta = 0.25 * k
            e = sum(abs(self.slowdown(o[1], o[2]) - o[3]) / o[3] for o in obs) / len(obs)
            if best is None or e < best[0]:
                best = (e, self.theta)
        self.theta = best[1]
        return best[0]


class MeasuredModel:
    """The measured source with its nic level a LinkModel, the other levels the low-rank form."""

    def __init__(self, obs, alone, a, seed):
        rest = [o for o in obs if o[0] != "nic"]
        nic = [o for o in obs if o[0] == "nic"]
        self.low = Model(rest, a.rank, seed) if rest else None
        self.link = LinkModel(nic, alone, a.rate) if nic else None
        self.cls = dict(self.low.cls if self.low else {}, **(self.link.cls if self.link else {}))
        self.levels = sorted(self.cls)

    def fit(self, obs, iters, lam):
        rest = [o for o in obs if o[0] != "nic"]
        nic = [o for o in obs if o[0] == "nic"]
        e = self.low.fit(rest, iters, lam) * len(rest) if rest else 0.0
        e += self.link.fit(nic) * len(nic) if nic else 0.0
        return e / len(obs)

    def predict(self, obs):
        pred = torch.zeros(len(obs))
        for part, keep in ((self.low, lambda o: o[0] != "nic"), (self.link, lambda o: o[0] == "nic")):
            idx = [i for i, o in enumerate(obs) if keep(o)]
            if idx:
                pred[idx] = part.predict([obs[i] for i in idx]).detach()
        return pred

    def to_json(self, source, models, heldout):
        """The low-rank levels as fitted; the nic level tabulated exactly: rank = max(rank, classes),
        u = the identity, v[b][a] = softplus^-1(slowdown(a beside b) - 1) (at least 1e-4)."""
        d = self.low.to_json(source, models, heldout) if self.low else {
            "format": "shoal-interference 1", "source": source, "rank": 0, "levels": {}, "models": models,
            "default_class": "mlp", "heldout": heldout}
        if not self.link:
            return d
        cls = self.link.cls["nic"]
        n, rank = len(cls), max(d["rank"], len(self.link.cls["nic"]))
        for lv in d["levels"].values():
            lv["u"] = [row + [0.0] * (rank - len(row)) for row in lv["u"]]
            lv["v"] = [row + [0.0] * (rank - len(row)) for row in lv["v"]]
        inv = lambda g: round(math.log(math.expm1(max(g, 1e-4))), 6)
        d["levels"]["nic"] = {"classes": cls, "alpha": [0.0] * n, "beta": [0.0] * n,
                              "u": [[1.0 if i == r else 0.0 for r in range(rank)] for i in range(n)],
                              "v": [[inv(self.link.slowdown(cls[r], cls[b]) - 1) if r < n else 0.0
                                     for r in range(rank)] for b in range(n)]}
        d["heldout"]["nic_form"] = {"form": "link", "theta_ms": self.link.theta, "rate_bytes_per_ms": self.link.rate,
                                    "burst_ms": self.link.burst,
                                    "alone_ms": {c: round(t, 4) for c, t in sorted(self.link.T.items())},
                                    "wire_ms": {c: round(self.link.wire_ms(c), 4) for c in cls}}
        d["rank"] = rank
        d["levels"] = dict(sorted(d["levels"].items()))
        known = {c for lv in d["levels"].values() for c in lv["classes"]}
        d["models"] = {k: c for k, c in d["models"].items() if c in known}  # the loader refuses a class in no level
        return d


def pair_key(o):
    return (o[0],) + tuple(sorted(o[1:3]))


def crossval(obs, folds, seed, fit_fold):
    """Held-out predictions: the unordered pairs of each level in `folds` folds, each fold predicted by
    fit_fold(training observations, fold) (a Model); None where a class of the pair is in no training pair."""
    pairs = sorted({pair_key(o) for o in obs})
    random.Random(seed).shuffle(pairs)
    fold_of = {p: i % folds for i, p in enumerate(pairs)}
    pred = [None] * len(obs)
    for f in range(folds):
        train = [o for o in obs if fold_of[pair_key(o)] != f]
        test = [i for i, o in enumerate(obs) if fold_of[pair_key(o)] == f]
        if not train:
            continue
        m = fit_fold(train, f)
        ok = [i for i in test if obs[i][1] in m.cls.get(obs[i][0], []) and obs[i][2] in m.cls.get(obs[i][0], [])]
        with torch.no_grad():
            p = m.predict([obs[i] for i in ok]) if ok else []
        for i, v in zip(ok, p):
            pred[i] = float(v)
    return pred


def level_mape(obs, pred):
    per = {}
    for o, p in zip(obs, pred):
        if p is not None:
            per.setdefault(o[0], []).append(abs(p - o[3]) / o[3])
    return per


def fitted(obs, a, seed):
    m = MeasuredModel(obs, a.alone, a, seed) if a.nic_form == "link" else Model(obs, a.rank, seed)
    a.train_mape = m.fit(obs, a.iters, a.lam)
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", choices=["measured", "gavel"])
    ap.add_argument("--csv", default="experiments/interference/results/measured.csv")
    ap.add_argument("--throughputs", default="../shared/data/gavel/throughputs.json")
    ap.add_argument("--gpu", default="v100")
    ap.add_argument("--out")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--iters", type=int, default=3000)
    ap.add_argument("--lam", type=float)
    ap.add_argument("--pred")
    ap.add_argument("--nic-form", choices=["lowrank", "link"], default="lowrank")
    ap.add_argument("--rate", default="200mbit")
    ap.add_argument("--test-csv")
    ap.add_argument("--test-rate", default="200mbit")
    a = ap.parse_args()
    measured = a.source == "measured"
    a.rank = a.rank if a.rank is not None else (1 if measured else 4)
    a.lam = a.lam if a.lam is not None else (0.1 if measured else 0.01)
    if not 0 <= a.rank <= 8 or a.folds < 2 or a.iters < 1 or a.lam < 0:
        sys.exit("fit.py: --rank 0..8, --folds >= 2, --iters >= 1, --lam >= 0")
    if a.nic_form == "link" and not measured:
        sys.exit("fit.py: --nic-form link: only for the measured source (Gavel's has no nic level)")
    if a.test_csv and a.nic_form != "link":
        sys.exit("fit.py: --test-csv: only with --nic-form link")
    a.rate = parse_rate(a.rate)
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    noise = {}
    if measured:
        obs, reps, a.alone = load_measured(a.csv)
        noise = noise_floor(reps)
        src = "measured on shoal testbed (experiments/interference/measure.sh, %s)" % a.csv
        out = a.out or "build/interference-measured.json"
    else:
        obs = load_gavel(a.throughputs, a.gpu)
        src = "Gavel co-located throughputs, %s (%s; MIT, see its NOTICE)" % (a.gpu, a.throughputs)
        out = a.out or "build/interference-gavel-%s.json" % a.gpu
    if not obs:
        sys.exit("fit.py: no observations")
    pred = crossval(obs, a.folds, a.seed, lambda tr, f: fitted(tr, a, a.seed + f))
    per = level_mape(obs, pred)
    ape = [e for v in per.values() for e in v]
    missing = sum(p is None for p in pred)
    mape = sum(ape) / len(ape)
    per_level = {l: round(sum(v) / len(v), 4) for l, v in sorted(per.items())}
    print("%s: %d observations, %d unordered pairs, rank %d, L2 %g, %s%d folds: held-out MAPE %.1f%%%s" % (
        a.source, len(obs), len({pair_key(o) for o in obs}), a.rank, a.lam,
        "nic as a shared link, " if a.nic_form == "link" else "", a.folds, 100 * mape,
        " (%d observations of classes seen only in held-out pairs not predicted)" % missing if missing else ""))
    for l, v in per_level.items():
        print("  %-7s %5.1f%%  (%d observations)%s" % (
            l, 100 * v, len(per[l]),
            "  noise floor %.1f%% (%d pairs repeated)" % (100 * noise[l][0], noise[l][1]) if l in noise else ""))
    if a.pred:
        with open(a.pred, "w") as f:
            f.write("level,job,corunner,measured,predicted\n")
            for o, p in zip(obs, pred):
                if p is not None:
                    f.write("%s,%s,%s,%.4f,%.4f\n" % (o[0], o[1].replace(",", ";"), o[2].replace(",", ";"), o[3], p))
    m = fitted(obs, a, a.seed)
    loss = a.train_mape
    heldout = {"mape": round(mape, 4), "per_level": per_level, "folds": a.folds, "observations": len(obs),
               "seed": a.seed, "rank": a.rank, "lam": a.lam, "train_mape": round(loss, 4)}
    if noise:
        heldout["noise"] = {l: {"mape": round(v, 4), "pairs": n} for l, (v, n) in noise.items()}
    with open(out, "w") as f:
        json.dump(m.to_json(src, MEASURED_MODELS if measured else None, heldout), f, indent=1)
        f.write("\n")
    print("wrote %s (fitted on all %d observations, training MAPE %.1f%%)" % (out, len(obs), 100 * loss))
    if a.test_csv:
        test_on(m, a)


def test_on(m, a):
    """The nic level's slowdowns of another measurement (--test-csv, its link at --test-rate) predicted by the link
    form fitted above: theta from the fit, each job's alone time from the other file's rows, its wire time at that
    rate. Prints the MAPE and each pair."""
    obs, _, alone = load_measured(a.test_csv)
    obs = [o for o in obs if o[0] == "nic"]
    if not obs:
        sys.exit("fit.py: --test-csv %s: no nic rows" % a.test_csv)
    rate = parse_rate(a.test_rate)
    # the standing queue is bytes in the link's buffer: its delay scales as 1 / rate
    link = LinkModel(obs, alone, rate, m.link.theta * m.link.rate / rate)
    ape = []
    for o in obs:
        p = link.slowdown(o[1], o[2])
        ape.append(abs(p - o[3]) / o[3])
        print("  %-7s %-7s beside %-7s measured %6.3f  predicted %6.3f" % (o[0], o[1], o[2], o[3], p))
    print("test: %s (link %s, theta %.2f ms from the fit's %.2f ms at its rate): %d nic observations, MAPE %.1f%%" % (
        a.test_csv, a.test_rate, link.theta, m.link.theta, len(obs), 100 * sum(ape) / len(ape)))


if __name__ == "__main__":
    main()
