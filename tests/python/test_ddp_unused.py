"""shoal.ddp: a parameter that gets no gradient on one rank in a step is reduced as zeros there, whether
the optimizer zeroes .grad or sets it to None (zero_grad(set_to_none=True), torch 2's default)."""
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402


def child():
    import torch
    import torch.nn as nn
    import shoal
    import shoal.ddp
    set_to_none = sys.argv[sys.argv.index("--child") + 1] == "none"
    comm = shoal.Comm(timeout=20)
    r, n = comm.rank, comm.size
    torch.manual_seed(1)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.extra = nn.Linear(4, 4)

        def forward(self, x, use_extra):
            h = self.a(x)
            return h + self.extra(h) if use_extra else h
    net = Net()
    model = shoal.ddp.DistributedDataParallel(net, comm, sync="bsp")
    opt = torch.optim.SGD(net.parameters(), lr=0.0)  # parameters stay put: only gradients matter
    x = torch.ones(2, 4) * (r + 1)
    for step in range(3):
        use = step != 1 or r == 0  # step 1: only rank 0 uses `extra`
        opt.zero_grad(set_to_none=set_to_none)
        if step == 1:
            c = copy.deepcopy(net)
            c.zero_grad()
            c(torch.ones(2, 4), True).sum().backward()
            local = c.extra.bias.grad.clone()  # rank 0's own gradient of extra.bias
        model(x, use).sum().backward()
        if step == 1:
            want = local / n  # rank 0's gradient averaged with rank 1's zeros
            got = net.extra.bias.grad
            check(torch.allclose(got, want), "rank %d set_to_none=%s: extra.bias.grad %s, want %s"
                  % (r, set_to_none, got.tolist(), want.tolist()))
        opt.step()
    model.final()
    model.destroy()
    comm.destroy()
    print("OK rank %d" % r)


def main():
    me = os.path.abspath(__file__)
    for mode in ("zero", "none"):
        res = harness.torchrun_style(2, me, [mode], timeout=60)
        for r, (rc, out) in enumerate(res):
            check(rc == 0 and "OK rank %d" % r in out, "%s rank %d (exit %d):\n%s" % (mode, r, rc, out))
    print("python ddp_unused: ok")


if __name__ == "__main__":
    child() if "--child" in sys.argv else main()
