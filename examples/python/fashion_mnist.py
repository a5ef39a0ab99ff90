#!/usr/bin/python3
"""Train a PyTorch model on Fashion-MNIST with shoal's collectives and synchronization strategies.

  shoal launch -n 2 -- /usr/bin/python3 examples/python/fashion_mnist.py --sync bsp
  shoal launch -n 4 -- /usr/bin/python3 examples/python/fashion_mnist.py --sync dssync --config "k=2"
  # by hand, with torchrun's variables (one command per rank):
  RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 /usr/bin/python3 examples/python/fashion_mnist.py
  RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 /usr/bin/python3 examples/python/fashion_mnist.py

The data are Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist, or --data). Each rank
trains on its shard with a per-rank batch of --batch; shoal.ddp.DistributedDataParallel applies the
strategy (its C implementation, include/shoal/sync.h). --backend gloo runs the same model, data and
schedule with torch.nn.parallel.DistributedDataParallel over Gloo instead (the benchmark's anchor), and
--backend ddp-shoal the same unmodified DDP over shoal's torch.distributed backend (shoal.torch).
--backend none trains every rank's shard alone, with no communication while the clock runs (the ranks
run at once, and a barrier outside the clock starts every timed stretch, between evaluations, on every
rank together, as a synchronous job's ranks are; samples/s from the slowest rank's training time,
exchanged after it): the benchmark's limit, what a synchronous backend's samples/s stays under on the
same cores. Without the barriers, ranks sharing a core drift apart and one rank's evaluation (not
timed) or startup gives the others its core, a speed no synchronous job has.
The last line is a machine-readable summary: samples/s, time to --target accuracy, final accuracy.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))  # the repository's package (else: installed)


def build_model(torch, kind):
    nn = torch.nn
    if kind == "mlp":  # as `shoal train --model mlp`: 784-512-256-10
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    if kind == "cnn":
        return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    raise SystemExit("fashion_mnist.py: --model: '%s' is not mlp or cnn" % kind)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="shoal", choices=["shoal", "gloo", "ddp-shoal", "none"],
                    help="shoal: shoal.ddp; gloo / ddp-shoal: torch's DistributedDataParallel over that backend; "
                         "none: no communication (each rank alone, the limit)")
    ap.add_argument("--sync", default="bsp", help="shoal strategy: bsp, dssync, localsgd")
    ap.add_argument("--config", default="", help='strategy settings, e.g. "k=2 pattern=random" (sync.h)')
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64, help="per rank")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--wd", type=float, default=5e-4)
    ap.add_argument("--bucket-mb", type=float, default=4.0)
    ap.add_argument("--first-bucket-mb", type=float, default=0.0,
                    help="gloo / ddp-shoal: the size of DDP's first bucket (torch's dist._DEFAULT_FIRST_BUCKET_BYTES; "
                         "0: torch's default, 1 MiB)")
    ap.add_argument("--train-subset", type=int, default=0)
    ap.add_argument("--test-subset", type=int, default=0)
    ap.add_argument("--evals", type=int, default=4, help="test-set evaluations per epoch (time to target)")
    ap.add_argument("--target", type=float, default=0.85, help="test accuracy for the time-to-target figure")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=None)
    ap.add_argument("--gloo-port", type=int, default=0, help="gloo, ddp-shoal: torch's store port (default MASTER_PORT + 1)")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()

    import numpy as np
    import torch
    import torch.nn.functional as F
    from shoal import data
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    if a.backend == "shoal":
        import shoal
        import shoal.ddp
        comm = shoal.Comm()  # SHOAL_* from `shoal launch`, or torchrun's RANK/WORLD_SIZE/MASTER_*
        rank, world = comm.rank, comm.size
        model = build_model(torch, a.model)
        net = shoal.ddp.DistributedDataParallel(model, comm, sync=a.sync, config=a.config, bucket_mb=a.bucket_mb)

        def allreduce_sum(t):
            comm.allreduce(t)

        def finish():
            net.final()

        def line_up():
            pass
    elif a.backend == "none":
        rank = int(os.environ.get("RANK", "0"))
        world = int(os.environ.get("WORLD_SIZE", "1"))
        model = net = build_model(torch, a.model)
        if world > 1:  # only to line the ranks up outside the clock and to exchange the times at the end
            import torch.distributed as dist
            port = a.gloo_port or int(os.environ.get("MASTER_PORT", "29500")) + 1
            dist.init_process_group("gloo", init_method="tcp://%s:%d" % (os.environ.get("MASTER_ADDR", "127.0.0.1"),
                                                                         port), rank=rank, world_size=world)

        def allreduce_sum(t):  # no communication: this rank's count stands for every rank's
            t.mul_(world)

        def line_up():  # outside the clock: every timed stretch starts on every rank together
            if world > 1:
                dist.barrier()

        def finish():
            pass
    else:
        import torch.distributed as dist
        if a.backend == "ddp-shoal":
            import shoal.torch  # noqa: F401  (registers the "shoal" backend)
        rank = int(os.environ.get("RANK", "0"))
        world = int(os.environ.get("WORLD_SIZE", "1"))
        port = a.gloo_port or int(os.environ.get("MASTER_PORT", "29500")) + 1
        dist.init_process_group("gloo" if a.backend == "gloo" else "shoal", init_method="tcp://%s:%d" % (
                                os.environ.get("MASTER_ADDR", "127.0.0.1"), port), rank=rank, world_size=world)
        model = build_model(torch, a.model)
        if a.first_bucket_mb > 0:  # read when DDP builds its buckets (after the first step, in backward order)
            dist._DEFAULT_FIRST_BUCKET_BYTES = int(a.first_bucket_mb * 1024 * 1024)
        net = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)

        def allreduce_sum(t):
            dist.all_reduce(t)

        def line_up():  # the collectives keep the ranks in step
            pass

        def finish():
            pass

    x, y = data.load("train", a.data, a.train_subset)
    tx, ty = data.load("t10k", a.data, a.test_subset)
    x, y = torch.from_numpy(x), torch.from_numpy(y).long()
    tx, ty = torch.from_numpy(tx), torch.from_numpy(ty).long()
    shard = x.shape[0] // world
    xs, ys = x[rank * shard:(rank + 1) * shard], y[rank * shard:(rank + 1) * shard]
    iters = shard // a.batch
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.wd)
    gen = torch.Generator().manual_seed(a.seed * 1000 + rank)
    eval_at = set(max(1, (iters * k) // a.evals) for k in range(1, a.evals + 1))

    def evaluate():
        model.eval()
        with torch.no_grad():
            correct = torch.zeros(1, dtype=torch.float64)
            correct[0] = (model(tx).argmax(1) == ty).sum().item()
        model.train()
        allreduce_sum(correct)  # the mean over ranks' models (dssync ranks differ between averages)
        return correct.item() / (world * tx.shape[0])

    train_s, samples, t_target, acc = 0.0, 0, None, 0.0
    for epoch in range(a.epochs):
        perm = torch.randperm(shard, generator=gen)
        line_up()
        t0 = time.perf_counter()
        loss_sum = 0.0
        for i in range(iters):
            idx = perm[i * a.batch:(i + 1) * a.batch]
            opt.zero_grad()
            loss = F.cross_entropy(net(xs[idx]), ys[idx])
            loss.backward()
            opt.step()
            loss_sum += loss.item()
            samples += a.batch * world
            if i + 1 in eval_at:
                train_s += time.perf_counter() - t0
                acc = evaluate()
                if t_target is None and acc >= a.target:
                    t_target = train_s
                line_up()
                t0 = time.perf_counter()
        train_s += time.perf_counter() - t0
        if rank == 0 and not a.quiet:
            print("epoch %d: loss %.4f  test acc %.4f  %.0f samples/s  (%.1f s training)" %
                  (epoch + 1, loss_sum / iters, acc, samples / train_s, train_s), flush=True)
    finish()
    if a.backend == "none" and world > 1:
        # no communication while the clock ran; a synchronous job goes at its slowest rank's pace (the
        # cores need not be equally fast), so the limit counts the slowest rank's training time
        slowest = torch.tensor([train_s], dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        train_s = slowest.item()
        dist.destroy_process_group()
    acc = evaluate()
    if rank == 0:
        print("result: backend=%s sync=%s ranks=%d model=%s batch=%d epochs=%d samples_per_s=%.1f "
              "time_to_target_s=%s target=%.3f final_acc=%.4f train_s=%.2f" %
              (a.backend, a.sync if a.backend == "shoal" else "none" if a.backend == "none" else "ddp", world, a.model, a.batch, a.epochs,
               samples / train_s, "%.2f" % t_target if t_target is not None else "none", a.target, acc, train_s),
              flush=True)
    if a.backend == "shoal":
        net.destroy()
        comm.destroy()
    elif a.backend != "none":
        import torch.distributed as dist
        dist.barrier()  # nobody tears down while a peer is still in a collective (a Gloo rank then spins)
        dist.destroy_process_group()
        # torch 1.13's Gloo can leave rank 0 blocked at interpreter exit (a futex wait after its result
        # was printed, seen in about one run of ten); everything is written, so leave without the join
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    np.random.seed(0)


if __name__ == "__main__":
    main()
