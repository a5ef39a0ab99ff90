"""Shared by test_ddp_*.py: the DDP-like helper (shoal.ddp) checked on ranks started with `shoal launch`.
  grads   BSP gradients equal one process's whole-batch gradient (several buckets, reduced as ready)
  bsp     2 ranks, 2 epochs on 12000 images: >= 75% test accuracy, identical models
  dssync  4 ranks, groups of 2: models differ before final() and agree after it, >= 75%
  localsgd 2 ranks, averaging every 4 steps (374 steps: the last 2 unaveraged): the same checks"""
import copy
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402


def net(torch):
    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, stride=2), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 13 * 13, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def child():
    import torch
    import torch.nn.functional as F
    import shoal
    import shoal.ddp
    from shoal import data
    torch.set_num_threads(1)
    mode = sys.argv[sys.argv.index("--child") + 1]
    c = shoal.Comm()
    r, p = c.rank, c.size
    torch.manual_seed(100 + r)  # different initial models: the wrapper must broadcast rank 0's
    x, y = data.load("train", limit=4000 if mode == "grads" else 12000)
    x, y = torch.from_numpy(x), torch.from_numpy(y).long()
    if mode == "grads":
        model = net(torch)
        ddp = shoal.ddp.DistributedDataParallel(model, c, bucket_mb=0.01)  # a few KiB: several buckets
        check(len(ddp.buckets) >= 3, "only %d buckets" % len(ddp.buckets))
        ref = copy.deepcopy(model)  # rank 0's parameters on every rank now
        B = 64
        for it in range(3):
            xb, yb = x[it * B:(it + 1) * B], y[it * B:(it + 1) * B]
            mine = slice(r * B // p, (r + 1) * B // p)
            ddp.zero_grad()
            F.cross_entropy(ddp(xb[mine]), yb[mine]).backward()
            ref.zero_grad()
            F.cross_entropy(ref(xb), yb).backward()  # the whole batch in one process
            for (name, a), b in zip(model.named_parameters(), ref.parameters()):
                err = (a.grad - b.grad).abs().max().item()
                check(err < 1e-5, "iteration %d %s: gradient differs by %g" % (it, name, err))
            with torch.no_grad():
                for a, b in zip(model.parameters(), ref.parameters()):
                    a -= 0.1 * a.grad
                    b -= 0.1 * b.grad
        print("OK grads rank %d" % r)
    else:
        sync = mode
        config = {"dssync": "pattern=random k=2", "localsgd": "period=4"}.get(sync, "")
        model = net(torch)
        ddp = shoal.ddp.DistributedDataParallel(model, c, sync=sync, config=config, bucket_mb=0.05)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        B = 32
        n = x.shape[0] // p
        xs, ys = x[r * n:(r + 1) * n], y[r * n:(r + 1) * n]
        g = torch.Generator().manual_seed(7 + r)
        for epoch in range(2):
            perm = torch.randperm(n, generator=g)
            for i in range(0, n - B + 1, B):
                idx = perm[i:i + B]
                opt.zero_grad()
                F.cross_entropy(ddp(xs[idx]), ys[idx]).backward()
                opt.step()
        def spread():
            flat = torch.cat([q.detach().reshape(-1) for q in model.parameters()])
            hi, lo = flat.clone(), flat.clone()
            c.allreduce(hi, op="max")
            c.allreduce(lo, op="min")
            return (hi - lo).abs().max().item()
        ddp._close_step()
        before = spread()
        if sync == "dssync":  # groups of 2 among 4 ranks: the models differ until the final average
            check(before > 0, "dssync: every rank has the same model before final: a global average")
        elif sync == "localsgd":  # steps since the last periodic average: the models differ until final
            check(before > 0, "localsgd: the ranks' models agree before final: averaged every step?")
        else:
            check(before == 0, "bsp: ranks' models differ by %g" % before)
        ddp.final()
        check(spread() == 0, "%s: ranks' models differ after final" % sync)
        tx, ty = data.load("t10k", limit=2000)
        with torch.no_grad():
            acc = (model(torch.from_numpy(tx)).argmax(1).numpy() == ty).mean()
        check(acc >= 0.75, "%s: test accuracy %.3f after 2 epochs on 12000 images (all ranks)" % (sync, acc))
        print("OK train %s rank %d acc %.3f" % (sync, r, acc))
    c.destroy()


def run(mode):
    """Parent side: launch this mode on its rank count and check every rank reported OK."""
    me = os.path.abspath(sys.argv[0])
    if "--child" in sys.argv:
        child()
        return
    n = {"grads": 2, "bsp": 2, "dssync": 4, "localsgd": 2}[mode]
    rc, out = harness.launch(n, me, [mode], timeout=300)
    want = "OK grads" if mode == "grads" else "OK train"
    check(rc == 0 and out.count(want) == n, "%s on %d ranks (exit %d):\n%s" % (mode, n, rc, out))
    print("\n".join(ln for ln in out.splitlines() if want in ln))
