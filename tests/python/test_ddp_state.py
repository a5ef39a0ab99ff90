"""shoal.ddp: the whole model state, not only the trained parameters. Ranks that build their modules with
different seeds and see different data start from rank 0's frozen parameters and buffers, and after
final() hold the same state_dict: BatchNorm's running statistics averaged over the ranks, the frozen
parameter and the batch counter rank 0's, for bsp, dssync and localsgd."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402


def child():
    import numpy as np
    import torch
    import shoal
    import shoal.ddp
    sync, config = sys.argv[sys.argv.index("--child") + 1:][:2]
    comm = shoal.Comm(timeout=20)
    r, n = comm.rank, comm.size
    torch.manual_seed(100 + r)  # different initial modules on every rank
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1))
    net[2].bias.requires_grad_(False)  # frozen
    frozen0 = net[2].bias.detach().clone()
    model = shoal.ddp.DistributedDataParallel(net, comm, sync=sync, config=config or None)
    # construction: the frozen parameter and the buffers are rank 0's
    mine = torch.cat([net[2].bias.detach(), net[1].running_mean, net[1].running_var]).numpy().astype(np.float32)
    every = np.zeros(mine.size * n, np.float32)
    comm.allgather(mine.copy(), every)
    every = every.reshape(n, -1)
    check((every == every[0]).all(), "rank %d: frozen parameter and buffers differ after construction" % r)
    if r != 0:
        check(not torch.equal(frozen0, net[2].bias), "rank %d: the test's modules did not differ" % r)
    opt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.1)
    g = torch.Generator().manual_seed(r)
    for _ in range(4):
        x = torch.randn(8, 3, generator=g) + r  # different data: different running statistics
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    # what final() must give: the ranks' mean of the running statistics
    stats = torch.cat([net[1].running_mean, net[1].running_var]).numpy().astype(np.float32)
    all_stats = np.zeros(stats.size * n, np.float32)
    comm.allgather(stats.copy(), all_stats)
    want = all_stats.reshape(n, -1).mean(axis=0)
    model.final()
    sd = net.state_dict()
    vec = torch.cat([v.reshape(-1).to(torch.float64) for v in sd.values()]).numpy()
    allv = np.zeros(vec.size * n, np.float64)
    comm.allgather(vec.copy(), allv)
    allv = allv.reshape(n, -1)
    check((allv == allv[0]).all(), "%s rank %d: state_dict differs between ranks after final()" % (sync, r))
    got = torch.cat([net[1].running_mean, net[1].running_var]).numpy()
    check(np.allclose(got, want, rtol=1e-5, atol=1e-6), "%s rank %d: running stats %s, want the mean %s"
          % (sync, r, got.tolist(), want.tolist()))
    model.destroy()
    comm.destroy()
    print("OK rank %d" % r)


def main():
    me = os.path.abspath(__file__)
    for sync, config in (("bsp", ""), ("dssync", "pattern=random k=2"), ("localsgd", "period=2")):
        res = harness.torchrun_style(4 if sync == "dssync" else 2, me, [sync, config], timeout=90)
        for r, (rc, out) in enumerate(res):
            check(rc == 0 and "OK rank %d" % r in out, "%s rank %d (exit %d):\n%s" % (sync, r, rc, out))
    print("python ddp_state: ok")


if __name__ == "__main__":
    child() if "--child" in sys.argv else main()
