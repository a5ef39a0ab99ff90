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
backward(), optimizer step; and where the CPU goes: the training thread's CPU time in forward + backward and
its time runnable but not running during the step (its run-queue wait, /proc/thread-self/schedstat: the
cores were busy with something else, e.g. another rank or a communication thread), and the CPU time the
process's other threads (the backend's progress and completion threads, Gloo's) used per step; and the
first 5 steps. --dump FILE writes every rank's per-step figures (ms) as a table. Random inputs of the
model's shape (the time of the arithmetic does not depend on the data). Run it under `quiet` on a shared machine."""
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
    ap.add_argument("--backend", default="shoal", choices=["shoal", "gloo", "none"],
                    help="none: the model without DDP, no communication in the steps (the limit; a Gloo group "
                         "only gathers the figures at the end)")
    ap.add_argument("--model", default="cnn", choices=["cnn", "mlp"])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--skip", type=int, default=20, help="first steps left out of the medians")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--bucket-mb", type=float, default=4.0)
    ap.add_argument("--dump", help="write every step's figures of every rank to this file")
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
    dist.init_process_group("gloo" if a.backend == "none" else a.backend, init_method="tcp://%s:%d" % (os.environ.get("MASTER_ADDR", "127.0.0.1"), port),
                            rank=rank, world_size=world)
    torch.manual_seed(1)
    model = build_model(torch, a.model)
    if a.backend != "none":
        model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
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

    if a.backend != "none":
        model.register_comm_hook(None, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    shape = (a.batch, 1, 28, 28)
    x, y = torch.randn(*shape), torch.randint(0, 10, (a.batch,))
    rows = []
    cpu, proc = time.thread_time, time.process_time
    dist.barrier()
    for _ in range(a.steps):
        events.clear()
        t0, c0, p0, q0 = now(), cpu(), proc(), runq_wait()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        t1 = now()
        loss.backward()
        t2, c2 = now(), cpu()
        opt.step()
        t3, c3, p3, q3 = now(), cpu(), proc(), runq_wait()
        issues = [t for k, t in events if k == "issue"] or [t2]  # none: no issue, no wait, no all_reduce
        dones = [t for k, t in events if k == "done"] or [t2]
        # the last bucket's issue and completion (the CNN and the MLP have one bucket at 4 MiB); the training
        # thread's CPU in forward + backward, its run-queue wait in the step, the other threads' CPU
        rows.append([t0, t1, t2, t3, issues[-1], dones[-1], c2 - c0, q3 - q0, (p3 - p0) - (c3 - c0)])
    # every rank's rows to rank 0 (the object collective over the same backend, after the clock)
    every = [None] * world
    dist.all_gather_object(every, rows)
    if rank == 0:
        report(every, a)
    dist.barrier()
    # no teardown: Gloo's sometimes hangs (a thread of the group spinning once the other ranks have exited)
    sys.stdout.flush()
    os._exit(0)


def runq_wait():
    """Seconds this thread has spent runnable but not running (schedstat's second field, in ns)."""
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1]) * 1e-9


def report(every, a):
    ms = lambda v: 1e3 * st.median(v)  # noqa: E731
    n = len(every[0])
    for r, rows in enumerate(every):
        keep = range(a.skip, n)
        # the last rank's issue (none: the rank's own end of backward, its ranks are not in step)
        last = [rows[i][4] if a.backend == "none" else max(every[q][i][4] for q in range(len(every))) for i in keep]
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
        print("rank %d CPU: training thread in forward+backward %.3f of %.3f wall | its run-queue wait per step "
              "%.3f (mean %.3f) | other threads' CPU per step %.3f (mean %.3f)  (ms, medians)" % (
                  r, ms([rows[i][6] for i in keep]), ms([rows[i][2] - rows[i][0] for i in keep]),
                  ms([rows[i][7] for i in keep]), 1e3 * st.mean(rows[i][7] for i in keep),
                  ms([rows[i][8] for i in keep]), 1e3 * st.mean(rows[i][8] for i in keep)))
        print("rank %d first steps (ms): %s" % (r, " ".join("%.1f" % (1e3 * (b[3] - b[0])) for b in rows[:5])))
    if a.dump:
        with open(a.dump, "w") as f:
            f.write("# rank step wall forward backward_to_issue wait_last_issue last_issue_to_done optimizer "
                    "thread_cpu_fwd_bwd runq_wait other_threads_cpu (ms)\n")
            for r, rows in enumerate(every):
                for i, b in enumerate(rows):
                    last = b[4] if a.backend == "none" else max(every[q][i][4] for q in range(len(every)))
                    f.write("%d %d %.3f %.3f %.3f %.3f %.3f %.3f %.3f %.3f %.3f\n" % tuple(
                        [r, i] + [1e3 * v for v in (b[3] - b[0], b[1] - b[0], b[4] - b[1], last - b[4], b[5] - last,
                                                    b[3] - b[2], b[6], b[7], b[8])]))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
