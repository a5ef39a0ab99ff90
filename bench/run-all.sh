#!/usr/bin/env bash
# make bench: every benchmark against its anchor, in one go (about 10 minutes on 2 cores; the anchor
# scripts alternate shoal and the anchors 3 times and compare each one's best run).
#   TCP collectives vs Open MPI (btl tcp) and PyTorch Gloo   bench/tcp-anchors.sh
#   shared-memory allreduce vs Open MPI (vader) + memory bound   bench/shm-anchors.sh
#   simulator speed on the Philly trace and synthetic workloads  bench/sim-speed.sh
#   training speed vs PyTorch (single process and DDP/Gloo)      bench/train-vs-torch.sh
#   non-blocking allreduce: communication hidden by computation   bench/overlap.sh
#   PyTorch training via shoal's Python binding vs DDP/Gloo      bench/py-ddp-vs-gloo.sh
# Results and method: docs/performance.md, docs/experiments.md.
set -euo pipefail
build=${1:-build}
here=$(dirname "$0")
"$here/tcp-anchors.sh" --build "$build" --ranks "2 4" --min 8 --max 256M --factor 4 --target 0.1
"$here/shm-anchors.sh" --build "$build" --min 8 --max 256M --factor 4 --target 0.1
"$here/sim-speed.sh" "$build" --quick
"$here/train-vs-torch.sh" "$build" speed
"$here/overlap.sh" "$build"
"$here/py-ddp-vs-gloo.sh" "$build"
