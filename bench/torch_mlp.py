#!/usr/bin/python3
"""PyTorch anchor for `shoal train`: the same MLP (784-512-256-10, ReLU), the
same data (Fashion-MNIST IDX from dataset-fashion-mnist, same normalization),
SGD with the same momentum / weight decay, same per-worker batch, one thread.

  torch_mlp.py [--epochs E] [--batch B] [--lr X] [--ddp N] [--bind core|none] [--target-acc A]

--ddp N spawns N ranks by hand (env:// rendezvous, Gloo backend; torchrun is
broken on Debian's Python 3.11) and trains with DistributedDataParallel, each
rank on its slice of every global batch of N*B, like shoal's BSP. --bind core
pins rank r to the (r mod n)-th CPU of the launcher's affinity mask, as
`shoal launch --bind core` does for shoal's ranks. Prints one line per epoch
and a final `RESULT samples_per_s=... test_acc=... time_to_target=...` line
(training time, evaluation excluded, until the first epoch whose test
accuracy reaches --target-acc; "none" if never)."""
import argparse, gzip, os, socket, struct, subprocess, sys, time

import numpy as np
import torch

DIR = "/usr/share/datasets/fashion-mnist"


def load(split):
    with gzip.open(f"{DIR}/{split}-images-idx3-ubyte.gz") as f:
        magic, n, r, c = struct.unpack(">IIII", f.read(16))
        assert magic == 0x803, f"bad magic in {split} images"
        x = np.frombuffer(f.read(), dtype=np.uint8).reshape(n, r * c)
    with gzip.open(f"{DIR}/{split}-labels-idx1-ubyte.gz") as f:
        magic, n2 = struct.unpack(">II", f.read(8))
        assert magic == 0x801 and n2 == n
        y = np.frombuffer(f.read(), dtype=np.uint8)
    x = (x.astype(np.float32) / 255.0 - 0.2860) / 0.3530
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def run(args, rank, world):
    if args.cpu >= 0:
        os.sched_setaffinity(0, {args.cpu})
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    xtr, ytr = load("train")
    xte, yte = load("t10k")
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10))
    if world > 1:
        torch.distributed.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    lossf = torch.nn.CrossEntropyLoss()
    gb = world * args.batch
    ipe = xtr.shape[0] // gb
    total = 0.0
    to_target = None
    for e in range(args.epochs):
        g = torch.Generator().manual_seed(args.seed * 1000 + e)
        perm = torch.randperm(xtr.shape[0], generator=g)
        model.train()
        t0 = time.perf_counter()
        lsum = 0.0
        for i in range(ipe):
            idx = perm[i * gb + rank * args.batch:i * gb + (rank + 1) * args.batch]
            xb, yb = xtr[idx], ytr[idx]
            opt.zero_grad(set_to_none=True)
            loss = lossf(model(xb), yb)
            loss.backward()
            opt.step()
            lsum += loss.item()
        dt = time.perf_counter() - t0
        if world > 1:  # the slowest rank's time, like shoal's samples/s
            t = torch.tensor([dt])
            torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
            dt = float(t[0])
        total += dt
        model.eval()
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        if to_target is None and acc >= args.target_acc:
            to_target = total
        if rank == 0:
            print(f"torch epoch {e + 1}/{args.epochs}  loss {lsum / ipe:.4f}  test acc {100 * acc:.2f}%  "
                  f"{gb * ipe / dt:.0f} samples/s  time {total:.2f} s", flush=True)
    if rank == 0:
        tt = f"{to_target:.2f}" if to_target is not None else "none"
        print(f"RESULT samples_per_s={gb * ipe * args.epochs / total:.1f} test_acc={acc:.4f} world={world} "
              f"batch={args.batch} target_acc={args.target_acc} time_to_target={tt}", flush=True)
    if world > 1:
        torch.distributed.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ddp", type=int, default=0, help="spawn N ranks with DDP/Gloo")
    ap.add_argument("--bind", choices=["core", "none"], default="none", help="pin each DDP rank to one CPU")
    ap.add_argument("--target-acc", type=float, default=0.85)
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--cpu", type=int, default=-1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank >= 0:
        run(args, args.rank, int(os.environ["WORLD_SIZE"]))
        return
    if args.ddp <= 1:
        run(args, 0, 1)
        return
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    procs = []
    cpus = sorted(os.sched_getaffinity(0))
    for r in range(args.ddp):
        cpu = cpus[r % len(cpus)] if args.bind == "core" else -1
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(args.ddp),
                   RANK=str(r), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, __file__, "--rank", str(r), "--epochs", str(args.epochs),
                                       "--batch", str(args.batch), "--lr", str(args.lr), "--seed", str(args.seed),
                                       "--cpu", str(cpu), "--target-acc", str(args.target_acc)],
                                      env=env))
    rc = 0
    for p in procs:
        rc |= p.wait(timeout=1800)
    sys.exit(rc)


if __name__ == "__main__":
    main()
