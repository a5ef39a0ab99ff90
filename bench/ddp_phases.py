#!/usr/bin/python3
"""Where a DDP step's time goes: unmodified torch DistributedDataParallel over the shoal backend (or Gloo)
on the CNN or MLP of examples/python/fashion_mnist.py, every phase of every step timestamped on every rank.
The bucket's all_reduce is issued by a comm hook making the same dist.all_reduce DDP's default hook makes,
which timestamps its issue and (in a callback of its future) its completion; the ranks share one host's
clock (CLOCK_MONOTONIC), so rank 0 can line their steps up: how long each rank waited for the last
rank's issue (the lockstep), the all_reduce from that issue to its completion, and the rest of backward().

  shoal launch -n 2 -- /usr/bin/python3 bench/ddp_phases.py [--backend gloo] [--model mlp] [--steps 300]

Prints per rank the medians (ms) of: step, forward, backward up to the issue, the wait for the last
rank's issue (median and mean), last issue -> completion (median, mean, p90), completion -> end of
backward(), optimizer step; and the first 5 steps. Random inputs of the model's shape (the time of the
arithmetic does not depend on the data). Run it under `quiet` on a shared machine."""
import argparse
import os
import statistics as st
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "python"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="shoal", choices=["shoal", "gloo"])
    ap.add_argument("--model", default="cnn", choices=["cnn", "mlp"])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--skip", type=int, default=20, help="first steps left out of the medians")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--bucket-mb", type=float, default=4.0)
    a = ap.parse_args()
    if a.steps <= a.skip:
        raise SystemExit("ddp_phases.py: --steps %d must exceed --skip %d" % (a.steps, a.skip))

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    import shoal.torch  # noqa: F401  (registers the backend)
    from fashion_mnist import build_model
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    port = int(os.environ.get("MASTER_PORT", "29500")) + 1  # shoal launch keeps MASTER_PORT for torch's store
    dist.init_process_group(a.backend, init_method="tcp://%s:%d" % (os.environ.get("MASTER_ADDR", "127.0.0.1"), port),
                            rank=rank, world_size=world)
    torch.manual_seed(1)
    model = torch.nn.parallel.DistributedDataParallel(build_model(torch, a.model), bucket_cap_mb=a.bucket_mb)
    now = time.perf_counter  # CLOCK_MONOTONIC: one clock for every rank of this host
    events = []

    def hook(_, bucket):
        t = now()
        fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
        events.append(("issue", t))

        def done(f):
            events.append(("done", now()))
            return f.value()[0]
        return fut.then(done)

    model.register_comm_hook(None, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    shape = (a.batch, 1, 28, 28)
    x, y = torch.randn(*shape), torch.randint(0, 10, (a.batch,))
    rows = []
    dist.barrier()
    for _ in range(a.steps):
        events.clear()
        t0 = now()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        t1 = now()
        loss.backward()
        t2 = now()
        opt.step()
        t3 = now()
        issues = [t for k, t in events if k == "issue"]
        dones = [t for k, t in events if k == "done"]
        # the last bucket's issue and completion (the CNN and the MLP have one bucket at 4 MiB)
        rows.append([t0, t1, t2, t3, issues[-1], dones[-1]])
    # every rank's rows to rank 0 (the object collective over the same backend, after the clock)
    every = [None] * world
    dist.all_gather_object(every, rows)
    if rank == 0:
        report(every, a)
    dist.barrier()
    dist.destroy_process_group()


def report(every, a):
    ms = lambda v: 1e3 * st.median(v)  # noqa: E731
    n = len(every[0])
    for r, rows in enumerate(every):
        keep = range(a.skip, n)
        last = [max(every[q][i][4] for q in range(len(every))) for i in keep]
        wait = [last[j] - rows[i][4] for j, i in enumerate(keep)]
        ar = [rows[i][5] - last[j] for j, i in enumerate(keep)]
        print("rank %d %s %s: step %.3f | forward %.3f | backward to issue %.3f | wait for the last issue %.3f "
              "(mean %.3f) | last issue -> done %.3f (mean %.3f, p90 %.3f) | done -> backward end %.3f | "
              "optimizer %.3f  (ms, medians over steps %d..%d)" % (
                  r, a.backend, a.model, ms([rows[i][3] - rows[i][0] for i in keep]),
                  ms([rows[i][1] - rows[i][0] for i in keep]), ms([rows[i][4] - rows[i][1] for i in keep]),
                  ms(wait), 1e3 * st.mean(wait), ms(ar), 1e3 * st.mean(ar), 1e3 * sorted(ar)[int(0.9 * len(ar))],
                  ms([rows[i][2] - rows[i][5] for i in keep]), ms([rows[i][3] - rows[i][2] for i in keep]),
                  a.skip, n - 1))
        print("rank %d first steps (ms): %s" % (r, " ".join("%.1f" % (1e3 * (b[3] - b[0])) for b in rows[:5])))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
