"""Errors of the shoal backend of torch.distributed: what it cannot do raises a RuntimeError naming the op on
the calling rank and leaves the group usable (bitwise ops on floats, AVG of bools, MAX of complex numbers,
PREMUL_SUM, sparse and non-CPU tensors, a receive from any source, mismatched shapes, a root out of range);
a peer that never comes makes the call raise at the group's timeout naming the peer; a rank SIGKILLed in the
middle of an all_reduce makes the others raise well within the timeout, naming it, with failed work objects
as Gloo's (wait raises, is_completed, not is_success)."""
import os
import signal
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402


def expect(fn, *words):
    try:
        fn()
    except RuntimeError as e:
        for w in words:
            check(w in str(e), "error lacks %r: %s" % (w, e))
        return e
    check(False, "no error; expected one saying %s" % (words,))


def local():
    import torch
    import torch.distributed as dist
    import shoal.torch  # noqa: F401
    R = dist.ReduceOp
    dist.init_process_group("shoal", init_method="tcp://127.0.0.1:%d" % harness.free_port(), rank=0, world_size=1)
    f = torch.ones(4)
    expect(lambda: dist.all_reduce(f, op=R.BAND), "shoal: all_reduce", "band is not defined on float32")
    expect(lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool), op=R.AVG), "all_reduce", "AVG", "bool")
    expect(lambda: dist.all_reduce(torch.ones(4, dtype=torch.complex64), op=R.MAX), "all_reduce", "complex")
    expect(lambda: dist.all_reduce(f, op=dist._make_nccl_premul_sum(2.0)), "all_reduce", "PREMUL_SUM")
    sparse = torch.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (4,))
    expect(lambda: dist.all_reduce(sparse), "shoal: all_reduce", "sparse tensors are not supported")
    # a tensor on another device: torch here has no CUDA (torch.zeros(1, device="cuda") raises its own "not
    # compiled with CUDA"), so the meta device stands in for one (inference mode: no autograd in the dispatch)
    with torch.inference_mode():
        expect(lambda: dist.broadcast(torch.empty(4, device="meta"), 0), "shoal: broadcast", "tensor on meta",
               "CPU tensors")
    expect(lambda: dist.recv(f), "shoal: recv", "any source")
    expect(lambda: dist.all_gather([torch.zeros(3)], f), "shoal: all_gather", "4 elements")
    expect(lambda: dist.all_gather_into_tensor(torch.zeros(3), f), "all_gather_into_tensor")
    expect(lambda: dist.all_to_all_single(torch.zeros(4), f, [3], [4]), "all_to_all_single", "split sizes add up")
    # none of them touched the group: it still works, and the async form of a refused call raises at once
    x = torch.arange(4.0)
    dist.all_reduce(x)
    check(x.tolist() == [0.0, 1.0, 2.0, 3.0], "group after the refusals: %s" % x.tolist())
    expect(lambda: dist.all_reduce(f, op=R.BXOR, async_op=True), "bxor")
    dist.destroy_process_group()
    print("OK local")


def child():
    import torch
    import torch.distributed as dist
    import shoal.torch  # noqa: F401
    mode = sys.argv[sys.argv.index("--child") + 1]
    timeout = {"timeout": 3, "kill": 20}[mode]
    dist.init_process_group("shoal", timeout=timedelta(seconds=timeout))
    r = dist.get_rank()
    dist.barrier()
    if mode == "timeout":
        if r == 1:
            time.sleep(timeout + 4)  # never calls: rank 0 must give up at the timeout
            print("OK timeout rank 1")
            os._exit(0)
        t0 = time.monotonic()
        w = dist.all_reduce(torch.ones(8), async_op=True)
        e = expect(w.wait, "shoal: all_reduce", "timed out", "peer 1")
        took = time.monotonic() - t0
        check(timeout * 0.9 <= took <= timeout + 3, "raised after %.1f s with a %d s timeout" % (took, timeout))
        check(w.is_completed() and not w.is_success(), "failed work: completed %s success %s"
              % (w.is_completed(), w.is_success()))
        expect(lambda: dist.all_reduce(torch.ones(8)), "aborted")  # the group is done for, as Gloo's would be
        print("OK timeout rank 0 (%.2f s): %s" % (took, e))
        os._exit(0)
    big = torch.ones(1 << 22)  # 16 MiB: the victim dies in the middle of it
    if r == 1:
        dist.all_reduce(big, async_op=True)
        time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGKILL)
    t0 = time.monotonic()
    e = expect(lambda: [dist.all_reduce(big) for _ in range(4)], "shoal: all_reduce", "peer 1")
    took = time.monotonic() - t0
    check(took < timeout / 2, "raised after %.1f s: the dead peer was not noticed before the %d s timeout"
          % (took, timeout))
    print("OK kill rank %d (%.2f s): %s" % (r, took, e))
    os._exit(0)  # the group is aborted: no destroy


def main():
    try:
        import shoal.torch  # noqa: F401
    except ImportError as e:
        print("skip: %s" % e)
        sys.exit(77)
    me = os.path.abspath(__file__)
    res = harness.torchrun_style(1, me, ["local"], timeout=60)
    check(res[0][0] == 0 and "OK local" in res[0][1], "local errors (exit %d):\n%s" % res[0])
    res = harness.torchrun_style(2, me, ["timeout"], timeout=60)
    for r, (rc, out) in enumerate(res):
        check(rc == 0 and "OK timeout rank %d" % r in out, "timeout rank %d (exit %d):\n%s" % (r, rc, out))
    print(res[0][1].strip().splitlines()[-1])
    res = harness.torchrun_style(3, me, ["kill"], timeout=60)
    check(res[1][0] == -signal.SIGKILL, "victim exit %d" % res[1][0])
    for r in (0, 2):
        rc, out = res[r]
        check(rc == 0 and "OK kill rank %d" % r in out, "kill rank %d (exit %d):\n%s" % (r, rc, out))
        print(out.strip().splitlines()[-1])
    print("python torch_errors: ok")


if __name__ == "__main__":
    if "--child" in sys.argv and sys.argv[sys.argv.index("--child") + 1] == "local":
        local()
    else:
        child() if "--child" in sys.argv else main()
