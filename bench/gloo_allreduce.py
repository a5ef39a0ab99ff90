#!/usr/bin/python3
"""PyTorch Gloo anchor for bench/tcp-anchors.sh: dist.all_reduce (in place,
float32 sum) over a size sweep, measured like `shoal bench allreduce`
(warm-up; rank 0 picks the iteration count from its warm-up median and
broadcasts it; a barrier before each iteration; per-iteration time = max over
ranks; p50/p99/max; algbw = S/p50, GB = 1e9; busbw = algbw * 2(n-1)/n).
Prints the same columns as shoal bench; the out-of-place group is '-'
(torch's all_reduce is in place).
--steps N [--step-ms MS] [--seconds S]: instead, N all_reduces of -b bytes in a loop with MS of emulated
compute (sleep) before each (at most S seconds), one line per step (the slowest rank's time, rank 0's
clock), like `shoal bench allreduce --steps`.
--backend shoal: the same over shoal's torch.distributed backend (shoal.torch), the binding's cost
against `shoal bench allreduce` (bench/torch-backend.sh).
--backend shoal --paired BLOCKS: the binding's cost in the same processes: dist.all_reduce and libshoal's
blocking shoal_allreduce (through ctypes, on the group's own communicator and the same tensor) in
alternating blocks of -n iterations (default 100), each timed as above; per size the p50 of each side
over all its iterations and the median over blocks of C time / backend time (the backend's busbw over
C's). Separate processes differ from run to run more than the binding costs on a shared machine.
Spawn ranks by hand with env:// (torchrun is broken on Python 3.11):
  MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 WORLD_SIZE=2 RANK=r GLOO_SOCKET_IFNAME=lo \
      /usr/bin/python3 bench/gloo_allreduce.py -b 8 -e 256M -f 2
"""
import argparse
import math
import time

import torch
import torch.distributed as dist


def size(s):
    mul = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    s = s.strip().lower().rstrip("b")
    if s and s[-1] in mul:
        return int(float(s[:-1]) * mul[s[-1]])
    return int(float(s))


def steps_loop(a, rank):
    """A training-like loop of one size (--steps)."""
    count = max(1, a.b // 4)
    t = (torch.arange(count, dtype=torch.float32) * 7 + rank * 13) % 17 - 8
    if rank == 0:
        print(f"# PyTorch {a.backend} all_reduce --steps {a.steps}: {count * 4} B, step compute {a.step_ms:.1f} ms",
              flush=True)
    total, done, start = 0.0, 0, time.perf_counter()
    for k in range(a.steps):
        if a.step_ms > 0:
            time.sleep(a.step_ms / 1e3)
        t0 = time.perf_counter()
        dist.all_reduce(t)
        # the slowest rank's time, and rank 0's clock since the start
        tv = torch.tensor([time.perf_counter() - t0, time.perf_counter() - start if rank == 0 else 0.0],
                          dtype=torch.float64)
        dist.all_reduce(tv, op=dist.ReduceOp.MAX)
        total += tv[0].item()
        done += 1
        if rank == 0:
            print("  %6d %10.2f %12s %-6s %9.3f" % (k, tv[0].item() * 1e3, "-", a.backend, tv[1].item()), flush=True)
        if a.seconds > 0 and tv[1].item() >= a.seconds:
            break
    if rank == 0:
        print("# steps %d, allreduce time %.3f s in all, mean %.2f ms, wall %.3f s" % (
            done, total, total / done * 1e3, time.perf_counter() - start), flush=True)


def timed(fn, iters):
    """iters calls of fn, a barrier before each; the slowest rank's time of each (seconds)."""
    times = torch.zeros(iters, dtype=torch.float64)
    for i in range(iters):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - t0
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    return times.tolist()


def paired(a, rank, n):
    """--paired: dist.all_reduce over the backend against shoal_allreduce on the group's communicator."""
    import ctypes
    import statistics
    from shoal import _lib
    comm = ctypes.c_void_p(dist.distributed_c10d._get_default_group().handle)
    in_place = ctypes.c_void_p(1)  # SHOAL_IN_PLACE
    iters = a.n or 100
    if rank == 0:
        print("# PyTorch %s shoal backend against libshoal's shoal_allreduce, same processes, communicator and "
              "tensor: %d ranks, float32 sum, %d alternating blocks of %d" % (torch.__version__, n, a.paired, iters))
        print("# %10s %11s | %12s %12s | %9s %9s | %s" % ("size(B)", "count", "backend p50", "C p50", "busbw",
                                                        "C/backend", "per block"), flush=True)
    b = a.b
    while b <= a.e:
        count = b // 4
        if count:
            t = (torch.arange(count, dtype=torch.float32) * 7 + rank * 13) % 17 - 8
            ptr = ctypes.c_void_p(t.data_ptr())

            def c_call():
                if _lib.lib.shoal_allreduce(comm, in_place, ptr, count, 0, 0):  # SHOAL_FLOAT32, SHOAL_SUM
                    raise RuntimeError("shoal_allreduce: " + _lib.lib.shoal_last_error().decode())

            sides = {"backend": lambda: dist.all_reduce(t), "c": c_call}
            got = {"backend": [], "c": []}
            ratios = []
            for k in range(a.paired):
                p50 = {}
                for side in (("backend", "c") if k % 2 == 0 else ("c", "backend")):
                    for _ in range(a.w):
                        sides[side]()
                    ts = timed(sides[side], iters)
                    got[side] += ts
                    p50[side] = statistics.median(ts)
                ratios.append(p50["c"] / p50["backend"])
            if rank == 0:
                pb, pc = statistics.median(got["backend"]), statistics.median(got["c"])
                print("  %10d %11d | %10.1fus %10.1fus | %9.3f %9.2f | %s" % (
                    count * 4, count, pb * 1e6, pc * 1e6, count * 4 / pb * 1e-9 * 2 * (n - 1) / n,
                    statistics.median(ratios), " ".join("%.2f" % r for r in ratios)), flush=True)
        nb = int(b * a.f)
        b = nb if nb > b else b + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-b", type=size, default=8)
    ap.add_argument("-e", type=size, default=256 << 20)
    ap.add_argument("-f", type=float, default=2)
    ap.add_argument("-w", type=int, default=5)
    ap.add_argument("-W", type=float, default=0.02)
    ap.add_argument("-n", type=int, default=0)
    ap.add_argument("-T", type=float, default=0.2)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--step-ms", type=float, default=0)
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--backend", default="gloo", choices=["gloo", "shoal"])
    ap.add_argument("--paired", type=int, default=0)
    a = ap.parse_args()
    if a.paired and a.backend != "shoal":
        ap.error("--paired compares the shoal backend with libshoal's own call: it needs --backend shoal")
    torch.set_num_threads(1)
    if a.backend == "shoal":
        import shoal.torch  # noqa: F401  (registers the backend)
    dist.init_process_group(a.backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    if a.steps > 0:
        steps_loop(a, rank)
        dist.destroy_process_group()
        return
    if a.paired > 0:
        paired(a, rank, n)
        dist.destroy_process_group()
        return
    if rank == 0:
        print(f"# PyTorch {torch.__version__} {a.backend} all_reduce: {n} ranks, float32 sum; same method as shoal bench")
        print("# %10s %11s %8s %5s %5s | %9s %9s %9s %7s %7s %6s | %9s %9s %9s %7s %7s %6s" % (
            "size(B)", "count", "type", "redop", "algo", "p50(us)", "p99(us)", "max(us)", "algbw", "busbw",
            "#wrong", "p50(us)", "p99(us)", "max(us)", "algbw", "busbw", "#wrong"), flush=True)
    b = a.b
    while b <= a.e:
        count = b // 4
        if count:
            t = (torch.arange(count, dtype=torch.float32) * 7 + rank * 13) % 17 - 8
            warm = []
            for _ in range(a.w):
                t0 = time.perf_counter()
                dist.all_reduce(t)
                warm.append(time.perf_counter() - t0)
            # as shoal bench: rank 0 plans the timed iterations and the extra warm-up (-W)
            warm.sort()
            med = max(warm[len(warm) // 2] if warm else 1e-3, 1e-7)
            iters = max(5, a.n) if a.n > 0 else min(2000, max(5, int(a.T / med)))  # as shoal bench
            plan = torch.tensor([iters, min(10000, int(a.W / med))], dtype=torch.int64)
            dist.broadcast(plan, 0)
            iters = int(plan[0].item())
            for _ in range(int(plan[1].item())):
                dist.all_reduce(t)
            times = torch.zeros(iters, dtype=torch.float64)
            for i in range(iters):
                dist.barrier()
                t0 = time.perf_counter()
                dist.all_reduce(t)
                times[i] = time.perf_counter() - t0
            dist.all_reduce(times, op=dist.ReduceOp.MAX)
            ts = sorted(times.tolist())
            # nearest-rank percentiles: the ceil(q*N)-th smallest
            p50, p99, mx = ts[math.ceil(0.5 * iters) - 1], ts[math.ceil(0.99 * iters) - 1], ts[-1]
            algbw = count * 4 / p50 * 1e-9
            busbw = algbw * 2 * (n - 1) / n
            if rank == 0:
                print("  %10d %11d %8s %5s %5s | %9s %9s %9s %7s %7s %6s | %9.1f %9.1f %9.1f %7.3f %7.3f %6s" % (
                    count * 4, count, "float32", "sum", a.backend, "-", "-", "-", "-", "-", "-",
                    p50 * 1e6, p99 * 1e6, mx * 1e6, algbw, busbw, "n/a"), flush=True)
        nb = int(b * a.f)
        b = nb if nb > b else b + 1
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
