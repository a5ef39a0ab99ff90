"""shoal.ddp behaves as torch's DistributedDataParallel where a PyTorch user expects it to: each scenario runs
shoal.ddp and torch's DDP over Gloo in the same processes from the same start and must end with the same model
(bit for bit at 2 ranks, where an average of two has one rounding; within the ordering tolerance at 4):
  unused        find_unused_parameters: a parameter no rank uses keeps .grad None and its value under momentum
                and weight decay; one used by rank 0 only gets rank 0's gradient averaged with zeros
  no_sync       gradient accumulation inside no_sync()
  join          uneven inputs (rank r has 3 + r batches) inside join()
  buffers       BatchNorm's running statistics: rank 0's broadcast at every forward (broadcast_buffers)
  forward_only  a train-mode forward without backward before every step
  two_forwards  two forwards, then one backward of their sum
  retain_graph  backward(retain_graph=True), then a second backward of the same graph
  checkpoint    localsgd and dssync stopped after some steps (every rank's checkpoint(), the optimizer's state)
                and resumed in a new wrapper end where the uninterrupted run ends (no Gloo run: the same code)
And the errors: ranks wrapping different models (shapes; order), different strategies or settings, a
parameter converted after wrapping (.double()) raise a clear InvalidArgument on every rank, and the
communicator still works afterwards."""
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402


def child():
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as TorchDDP
    import shoal
    import shoal.ddp
    torch.set_num_threads(1)
    comm = shoal.Comm(timeout=30)
    r, p = comm.rank, comm.size
    dist.init_process_group("gloo")  # MASTER_PORT: shoal's store listens on SHOAL_MASTER_PORT
    exact = p == 2

    class Net(nn.Module):
        def __init__(self, bn=False, unused=False):
            super().__init__()
            self.fc1 = nn.Linear(12, 32)
            self.bn = nn.BatchNorm1d(32) if bn else nn.Identity()
            self.fc2 = nn.Linear(32, 32)
            if unused:
                self.side = nn.Linear(32, 32)  # rank 0's, on even steps
                self.never = nn.Linear(32, 5)  # no rank's
            self.out = nn.Linear(32, 5)

        def forward(self, x, step=0, side=False):
            h = F.relu(self.bn(self.fc1(x)))
            h = F.relu(self.fc2(h))
            if side and r == 0 and step % 2 == 0:
                h = h + self.side(h)
            return self.out(h)

    def batches(n, salt=0):
        g = torch.Generator().manual_seed(11 + 31 * r + salt)
        return [(torch.randn(8, 12, generator=g), torch.randint(0, 5, (8,), generator=g)) for _ in range(n)]

    def wrap(net, use_shoal, **kw):
        if use_shoal:
            return shoal.ddp.DistributedDataParallel(net, comm, bucket_mb=0.004, **kw)  # a few buckets
        kw.pop("sync", None)
        kw.pop("config", None)
        return TorchDDP(net, bucket_cap_mb=0.004, **kw)

    def flat(net):
        return torch.cat([v.detach().reshape(-1).double() for v in net.state_dict().values()])

    def train(scenario, use_shoal):
        torch.manual_seed(100 + r)  # different starts: both wrappers broadcast rank 0's
        unused = scenario == "unused"
        net = Net(bn=scenario == "buffers", unused=unused)
        model = wrap(net, use_shoal, **({"find_unused_parameters": True} if unused else {}))
        opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)
        never0 = net.never.weight.detach().clone() if unused else None
        loss = lambda out, y: F.cross_entropy(out, y)  # noqa: E731
        if scenario == "no_sync":
            for k, (x, y) in enumerate(batches(9)):
                if k % 3 != 2:
                    with model.no_sync():
                        loss(model(x), y).backward()
                else:
                    loss(model(x), y).backward()
                    opt.step()
                    opt.zero_grad()
        elif scenario == "join":
            with model.join():
                for x, y in batches(3 + r):
                    opt.zero_grad()
                    loss(model(x), y).backward()
                    opt.step()
        else:
            for k, (x, y) in enumerate(batches(6)):
                opt.zero_grad()
                if scenario == "forward_only":
                    model(x * 2)  # in train mode, no backward: nothing to synchronize
                if scenario == "two_forwards":
                    (loss(model(x), y) + loss(model(x.flip(0)), y)).backward()
                elif scenario == "retain_graph":
                    lo = loss(model(x), y)
                    lo.backward(retain_graph=True)
                    lo.backward()  # this rank's gradient added again, not synchronized (as DDP)
                else:
                    loss(model(x, k, side=unused), y).backward()
                opt.step()
        if scenario == "buffers":  # one more forward, in eval mode: the statistics as they stand
            net.eval()
            with torch.no_grad():
                model(batches(1, 5)[0][0])
        if unused:
            check(net.never.weight.grad is None, "%s: a parameter no rank used has a .grad (shoal=%s)"
                  % (scenario, use_shoal))
            moved = (net.never.weight - never0).abs().max().item()
            check(moved == 0, "unused: a parameter no rank used moved by %g (shoal=%s)" % (moved, use_shoal))
        if use_shoal:
            model.destroy()
        return flat(net)

    for scenario in ("unused", "no_sync", "join", "buffers", "forward_only", "two_forwards", "retain_graph"):
        a = train(scenario, True)
        b = train(scenario, False)
        d = (a - b).abs().max().item()
        if exact:
            check(torch.equal(a, b), "%s: shoal.ddp and torch DDP over Gloo differ by %g at 2 ranks" % (scenario, d))
        else:
            check(torch.allclose(a, b, rtol=1e-5, atol=1e-6), "%s: shoal.ddp and DDP differ by %g" % (scenario, d))
        every = [torch.zeros_like(a) for _ in range(p)]
        dist.all_gather(every, a)
        spread = max((e - a).abs().max().item() for e in every)
        # (a second backward adds each rank's own gradient unsynchronized: DDP's ranks drift apart too)
        check(spread == 0 or scenario == "retain_graph", "%s: the ranks' models differ by %g" % (scenario, spread))
        print("rank %d %s: shoal.ddp == DDP over Gloo (max diff %g)" % (r, scenario, d))

    # -- checkpoint and resume: the run goes on as if never stopped --
    for sync, config in (("localsgd", "period=3"), ("dssync", "pattern=random k=2 seed=4")):
        if sync == "dssync" and p <= 2:
            continue  # groups of 2 among 2 ranks are one global average: the 4-rank run checks it
        def run(steps, ck=None, start=0):
            torch.manual_seed(200 + r)
            net = Net(bn=True)
            model = shoal.ddp.DistributedDataParallel(net, comm, sync=sync, config=config, bucket_mb=0.004)
            opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
            if ck is not None:
                saved = torch.load(io.BytesIO(ck))
                model.load_checkpoint(saved["ddp"])
                opt.load_state_dict(saved["opt"])
            data = batches(8, 40)
            for x, y in data[start:start + steps]:
                opt.zero_grad()
                F.cross_entropy(model(x), y).backward()
                opt.step()
            buf = io.BytesIO()
            torch.save({"ddp": model.checkpoint(), "opt": opt.state_dict()}, buf)
            out = flat(net)
            model.destroy()
            return out, buf.getvalue()
        whole, _ = run(8)
        _, ck = run(5)
        resumed, _ = run(3, ck, 5)
        d = (whole - resumed).abs().max().item()
        check(torch.equal(whole, resumed), "%s: resumed from checkpoints after 5 of 8 steps, the model differs "
              "from the uninterrupted run's by %g" % (sync, d))
        print("rank %d checkpoint %s: resumed == uninterrupted" % (r, sync))

    # -- what must be refused, on every rank alike --
    def refused(make, *words):
        try:
            make()
        except shoal.InvalidArgument as e:
            for w in words:
                check(w in str(e), "error lacks %r: %s" % (w, e))
            return str(e)
        check(False, "no error; expected one saying %s" % (words,))

    e = refused(lambda: shoal.ddp.DistributedDataParallel(nn.Linear(10, 20) if r == 0 else nn.Linear(20, 10), comm),
                "rank 1 differs from rank 0", "parameter 0 weight: (20, 10)", "(10, 20)")

    class Two(nn.Module):
        def __init__(self, swap):
            super().__init__()
            if swap:
                self.b, self.a = nn.Linear(8, 4), nn.Linear(4, 8)
            else:
                self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 4)

        def forward(self, x):
            return self.b(self.a(x))
    refused(lambda: shoal.ddp.DistributedDataParallel(Two(r == p - 1), comm), "rank %d differs" % (p - 1),
            "parameter 0 a.weight", "parameter 0 b.weight")
    refused(lambda: shoal.ddp.DistributedDataParallel(nn.Linear(4, 4), comm, sync="localsgd" if r else "bsp",
                                                      config="period=4" if r else ""),
            "strategy bsp", "strategy localsgd with \"period=4\"")
    refused(lambda: shoal.ddp.DistributedDataParallel(nn.Linear(4, 4), comm, sync="localsgd",
                                                      config="period=4" if r else "period=8"), "\"period=8\"")
    ok = shoal.ddp.DistributedDataParallel(nn.Linear(4, 4), comm, sync="dssync",
                                           config="k=2 seed=3" if r else "seed=3 k=2")  # the same settings
    ok.destroy()
    net = nn.Linear(4, 4)
    model = shoal.ddp.DistributedDataParallel(net, comm)
    net.double()
    refused(lambda: model(torch.ones(2, 4, dtype=torch.float64)), "replaced after wrapping", ".double()")
    model.destroy()
    x = torch.ones(3)
    comm.allreduce(x)
    check(x.tolist() == [float(p)] * 3, "the communicator after the refusals: %s" % x.tolist())
    print("rank %d refusals: ok (%s)" % (r, e))
    comm.destroy()
    dist.destroy_process_group()
    print("OK rank %d of %d" % (r, p))


def main():
    me = os.path.abspath(__file__)
    for n in (2, 4):
        res = harness.torchrun_style(n, me, ["as_torch"], timeout=100,
                                     env={"SHOAL_MASTER_PORT": str(harness.free_port())})
        for r, (rc, out) in enumerate(res):
            check(rc == 0 and "OK rank %d of %d" % (r, n) in out, "%d ranks, rank %d (exit %d):\n%s"
                  % (n, r, rc, out[-3000:]))
        print("\n".join(ln for ln in res[0][1].splitlines() if ln.startswith("rank 0")))
    print("python ddp_as_torch: ok")


if __name__ == "__main__":
    child() if "--child" in sys.argv else main()
