"""The learned placer from Python: the simulator's step interface (shoal.sim.PlacementEnv) runs whole
episodes, the C forward pass on the weights file equals the trainer's PyTorch network on every
observation of an episode, the reward's clock ends at the sum of the JCTs, bad actions and settings are
refused naming them, and one training iteration runs and writes a file the C policy reads."""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, fail  # noqa: E402

CFG = "synthetic=80 load=1.5 machines=8 gpus=8 racks=4 oversub=2 agents=2 seed=3"


def forward_equals_c(tmp):
    import torch
    from shoal.marl_net import Net
    from shoal.sim import PlacementEnv
    torch.manual_seed(7)
    net = Net(16)
    w = os.path.join(tmp, "t.weights")
    net.save(w, 2, "test")
    with PlacementEnv(CFG + " weights=" + w) as env:
        obs = env.reset()
        n, worst = 0, 0.0
        last_area = 0.0
        while obs is not None:
            check(obs.logits is not None, "weights given: logits expected")
            x = lambda a: torch.from_numpy(a).unsqueeze(0)
            with torch.no_grad():
                t = net(x(obs.socket), x(obs.server), x(obs.rack), x(obs.job), torch.from_numpy(obs.socket_server),
                        torch.from_numpy(obs.server_rack), x(obs.mask))[0].numpy()
            fin = np.isfinite(t)
            check((fin == np.isfinite(obs.logits)).all() and (fin == obs.mask).all(), "masks differ")
            d = np.abs(t[fin] - obs.logits[fin]) / (1 + np.abs(t[fin]))
            worst = max(worst, float(d.max()))
            check(int(np.argmax(obs.logits)) == int(np.argmax(t)) or d.max() < 1e-5, "argmax differs")
            check(obs.area >= last_area, "area went back")
            last_area = obs.area
            n += 1
            # sampled actions, so that the episode visits varied states
            obs = env.step(int(np.random.default_rng(n).choice(np.flatnonzero(obs.mask))))
        check(n > 80, "only %d decisions" % n)
        check(worst < 1e-5, "C and PyTorch differ by %g (relative)" % worst)
        rep, area = env.report()
        check(rep.jobs == 80 and rep.unfinished == 0, "jobs %d unfinished %d" % (rep.jobs, rep.unfinished))
        check(abs(area - rep.jct_avg_s * rep.jobs) <= 1e-6 * area, "area %g vs JCT sum %g" % (area, rep.jct_avg_s * rep.jobs))
        check(area >= last_area, "final area below the last decision's")
    print("forward pass: %d decisions, largest relative difference %.2g" % (n, worst))


def refusals():
    import shoal
    from shoal.sim import PlacementEnv

    def expect(fn, *words):
        try:
            fn()
        except shoal.ShoalError as e:
            for wd in words:
                check(wd in str(e), "%r not in %r" % (wd, str(e)))
            return
        fail("expected a ShoalError with %r" % (words,))

    expect(lambda: PlacementEnv("synthetic=10 colour=blue"), "unknown key 'colour'")
    expect(lambda: PlacementEnv("synthetic=10 gpus=x"), "gpus=x")
    expect(lambda: PlacementEnv("synthetic=10 weights=/nonexistent/w").reset(), "/nonexistent/w")
    with PlacementEnv(CFG) as env:
        obs = env.reset()
        bad = int(np.flatnonzero(~obs.mask)[0]) if (~obs.mask).any() else obs.mask.size
        expect(lambda: env.step(bad), "action %d" % bad)
        expect(lambda: env.step(-1), "action -1")
        # a refused action changes nothing: the decision still waits
        obs = env.step(int(np.flatnonzero(obs.mask)[0]))
        check(obs is not None, "episode ended early")
        obs = env.reset(5)  # abandons the running episode
        check(obs is not None and obs.logits is None, "reset after abandon")


def one_training_iteration(tmp):
    import subprocess
    from harness import PY
    out = os.path.join(tmp, "trained.weights")
    philly = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "philly", "philly.csv")
    if not os.path.exists(philly):
        print("skip training iteration: no %s" % philly)
        return
    p = subprocess.run([PY, "-m", "shoal.marl", "train", "--out", out, "--iters", "1", "--rollouts", "2",
                        "--windows", "0-0.1", "--topology", "8x2", "--agents", "2", "--trace", philly],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=100)
    check(p.returncode == 0, "train failed: %s" % p.stdout.decode(errors="replace")[-2000:])
    check(os.path.exists(out), "no weights written")
    from shoal.marl_net import Net
    net, agents, trained = Net.load(out)
    check(agents == 2 and "--seed 1" in trained, "header: %d %r" % (agents, trained))


def main():
    with tempfile.TemporaryDirectory(prefix="shoal-marl-") as tmp:
        forward_equals_c(tmp)
        refusals()
        one_training_iteration(tmp)


if __name__ == "__main__":
    main()
