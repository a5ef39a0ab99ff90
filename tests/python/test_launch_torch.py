"""Unmodified torch.distributed code under `shoal launch`, as under torchrun: init_process_group("gloo") with
env:// binds torch's own store on MASTER_PORT (the launcher leaves it free: shoal's store is on
SHOAL_MASTER_PORT), and shoal's communicator, Gloo's group and a shoal group (when the backend is built)
all work side by side in the same ranks."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402


def child():
    import torch
    import torch.distributed as dist
    import shoal
    torch.set_num_threads(1)
    check(os.environ["MASTER_PORT"] != os.environ["SHOAL_MASTER_PORT"],
          "MASTER_PORT %s is shoal's store port" % os.environ["MASTER_PORT"])
    dist.init_process_group("gloo")  # env://: rank 0's TCPStore listens on MASTER_PORT
    r, p = dist.get_rank(), dist.get_world_size()
    t = torch.full((4,), float(r + 1))
    dist.all_reduce(t)
    check(t.tolist() == [float(p * (p + 1) // 2)] * 4, "gloo all_reduce: %s" % t.tolist())
    comm = shoal.Comm(timeout=30)  # shoal's own store, beside torch's
    check(comm.rank == r and comm.size == p, "shoal rank %d of %d" % (comm.rank, comm.size))
    x = torch.ones(3)
    comm.allreduce(x)
    check(x.tolist() == [float(p)] * 3, "shoal allreduce: %s" % x.tolist())
    comm.destroy()
    try:
        import shoal.torch  # noqa: F401
        g = dist.new_group(backend="shoal")
        y = torch.full((2,), float(r))
        dist.all_reduce(y, group=g)
        check(y.tolist() == [float(p * (p - 1) // 2)] * 2, "shoal group all_reduce: %s" % y.tolist())
        what = "gloo, shoal.Comm and a shoal group"
    except ImportError:
        what = "gloo and shoal.Comm (backend not built)"
    dist.destroy_process_group()
    print("OK rank %d of %d: %s" % (r, p, what))


def main():
    me = os.path.abspath(__file__)
    for n in (2, 3):
        rc, out = harness.launch(n, me, timeout=90)
        check(rc == 0 and all("OK rank %d of %d" % (r, n) in out for r in range(n)),
              "shoal launch -n %d (exit %d):\n%s" % (n, rc, out[-3000:]))
        print("\n".join(ln for ln in out.splitlines() if "OK rank 0" in ln))
    print("python launch_torch: ok")


if __name__ == "__main__":
    child() if "--child" in sys.argv else main()
