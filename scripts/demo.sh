#!/usr/bin/env bash
# make demo: the whole system in a few minutes on one machine.
#   1. communication: 4 local ranks run every collective once with a bit-exact check
#   2. a short allreduce benchmark (nccl-tests columns) over TCP and shared memory
#   3. training: MLP on Fashion-MNIST, 4 ranks, BSP vs DS-Sync, accuracy-vs-time plot
#   4. cluster scheduling: baseline policies on a synthetic Philly-like workload
#      (and on the real Philly-derived trace when ../shared/data is there)
#   5. online worker/parameter-server scheduling: larr, oasis, greedy vs baselines
# Outputs (CSV, JSON, SVG) go to out/demo/.
set -euo pipefail
build=${1:-build}
shoal="$build/shoal"
out=out/demo
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1
bold() { if [ -t 1 ]; then printf '\n\033[1m== %s\033[0m\n' "$*"; else printf '\n== %s\n' "$*"; fi; }

bold "shoal $("$shoal" --version | cut -d' ' -f2): communication, 4 ranks, every collective with a correctness check"
"$shoal" launch -n 4 -- "$shoal" selftest

bold "measure this host's links and fit the cost model (shoal tune), then benchmark with the fitted choice"
"$shoal" launch -n 4 -- "$shoal" tune --file "$out/tune.txt"
export SHOAL_TUNE_FILE="$out/tune.txt"

bold "allreduce benchmark, 4 ranks on this host (shared memory), float32 sum"
"$shoal" launch -n 4 -- "$shoal" bench allreduce -b 8 -e 16M -f 8 -T 0.05 --check

bold "allreduce benchmark, 4 ranks over TCP only (SHOAL_SHM=0)"
SHOAL_SHM=0 "$shoal" launch -n 4 -- "$shoal" bench allreduce -b 8 -e 16M -f 8 -T 0.05 --check

bold "training: MLP on Fashion-MNIST, 4 ranks, 1 epoch on 12k images: BSP, then DS-Sync (butterfly)"
"$shoal" launch -n 4 -- "$shoal" train --model mlp --sync bsp --train-subset 12000 --test-subset 2000 \
  --epochs 1 --batch 32 --csv "$out/train-bsp.csv" --label bsp
"$shoal" launch -n 4 -- "$shoal" train --model mlp --sync dssync --train-subset 12000 --test-subset 2000 \
  --epochs 1 --batch 32 --csv "$out/train-dssync.csv" --label dssync
"$shoal" train --plot "$out/train-accuracy.svg" "$out/train-bsp.csv" "$out/train-dssync.csv"

bold "cluster simulation: 2,000 synthetic Philly-like jobs on 256 x 8 GPUs, every baseline policy"
"$shoal" sim --synthetic 2000 --load 0.9 --policy fifo,srtf,tiresias,optimus,drf,gavel --out "$out/sim-synthetic"

philly=../shared/data/philly/philly.csv
if [ -r "$philly" ]; then
  bold "cluster simulation: the Philly-derived trace (82,247 jobs) on 2,048 GPUs (at this size the trace hardly queues)"
  "$shoal" sim --trace "$philly" --policy fifo,srtf,tiresias --out "$out/sim-philly"
fi

bold "online worker/parameter-server scheduling: larr, oasis, greedy vs FIFO and DRF (300 jobs, 20 machines)"
"$shoal" sched run --machines 20 --jobs 300 --window 40 --lb-time 10

bold "the same policies inside the event-driven simulator, next to Optimus and Tiresias (parameter-server jobs)"
"$shoal" sim --synthetic 60 --machines 4 --ps-fraction 1 --policy larr,oasis,greedy,fifo,drf,optimus,tiresias \
  --no-progress --out "$out/sim-ps"

bold "decision time per arrival of larr"
"$shoal" sched decide-time --machines 100,500 --jobs 10

echo
echo "outputs in $out/: per-job CSVs, JSON summaries, SVG plots (JCT CDF, utilization, accuracy vs time)"
