#!/usr/bin/env bash
# The learned placer's experiments (docs/experiments.md "Learned placement"): RE2 (average JCT against the
# heuristics on Philly days not used in training, interference on and off), RE3 (trained on 8 GPUs per server
# and 2:1 uplinks, tested on 4 per server and 4:1, against a policy trained there), RE4 (1/2/4/8 agents on
# 512 GPUs: decision time per job against JCT; run it under `quiet`, the times are measured).
#   experiments/learned-placement/run.sh train [T..] the three weights files (8x2, 4x4, 8x2-small), ~6, ~8, ~5 min
#   experiments/learned-placement/run.sh ship       the shipped weights from scratch (SEED, default 1; ITERS, default 40:
#                                                 the warm start; more adds REINFORCE iterations): the 8x2 file, its
#                                                 agents line set to 1, replaces data/marl-default.weights only if it
#                                                 is better on the held-out cases (`compare`; rebuild after)
#   experiments/learned-placement/run.sh compare FILE  FILE (agents 1) against the shipped weights, default rules, on
#                                                 the held-out cases: 512 GPUs days 46-53 and day 25 on 16 x 8,
#                                                 interference on and off; exit 0 if the geometric mean of FILE's
#                                                 average JCT over the shipped file's is below 1
#   experiments/learned-placement/run.sh re2|re3|re4
#   experiments/learned-placement/run.sh live     the live point: `shoal sched serve --policy marl` and the FIFO queue
#                                                 with consolidation (policy fifo) on the testbed's Slurm, back to back on
#                                                 the same jobs (experiments/live-slurm/run.sh, its piece: JOBS=20
#                                                 WINDOW=90 SCALE=0.6, SEED_LIVE=3, MAX_TIME=430), ~4 min each; POLICIES
#                                                 ("marl fifo") the policies, OUT (build/experiments/learned-placement) where
#                                                 the runs go (live-<policy>/), NAME (mlive) the testbed, HOSTS (4),
#                                                 GPUS (2) per host and CPU (0.4) limit per host
# re2 runs on two clusters: the scenario's 32 x 8 GPUs (no queue to speak of: nothing at stake) and 16 x 8 GPUs
# in 4 racks (jobs queue and co-locate), the shipped weights (`marl`, one agent) and those trained on the
# cluster (W8 / W16, their 2 agents). Options (environment): W8=FILE W4=FILE W16=FILE (the weights; default
# build/marl-8x2.weights, build/marl-4x4.weights, experiments/learned-placement/marl-8x2-small.weights), SEED (1). Training windows: busy Philly days 20-24, 27-28, 29-30, 31-32, 33-34; day 25 (the window [25, 26) days:
# the scenario interference) is never trained on.
set -euo pipefail
cd "$(dirname "$0")/../.."
S=build/shoal W8=${W8:-build/marl-8x2.weights} W4=${W4:-build/marl-4x4.weights} SEED=${SEED:-1} ITERS=${ITERS:-40}
W16=${W16:-experiments/learned-placement/marl-8x2-small.weights}
WINDOWS=20-21,21-22,22-23,23-24,27-28,29-30,31-32,33-34
HEUR=fifo,fifo:place=firstfit,fifo:place=loadbal,fifo:place=pack,fifo:hold=1,fifo:place=pack:hold=1
train() { # topology out
  SHOAL_LIBRARY=$PWD/build/libshoal.so PYTHONPATH=python /usr/bin/python3 -m shoal.marl train --out "$2" --seed "$SEED" --iters "$ITERS" \
    --topology "$1" --agents 2 --windows "$WINDOWS" --log "${2%.weights}.log.csv"
}
case ${1:-} in
  train) # [TOPOLOGY...]: only these (8x2, 4x4, 8x2-small)
    shift; for t in ${@:-8x2 4x4 8x2-small}; do
      case $t in 8x2) train 8x2 "$W8" ;; 4x4) train 4x4 "$W4" ;; 8x2-small) train 8x2-small "$W16" ;;
        *) echo "run.sh train: unknown topology '$t' (8x2, 4x4, 8x2-small)" >&2; exit 2 ;; esac
    done ;;
  ship)
    train 8x2 "$W8"; sed 's/^agents 2$/agents 1/' "$W8" > build/marl-default.candidate.weights
    if "$0" compare build/marl-default.candidate.weights; then
      cp build/marl-default.candidate.weights data/marl-default.weights; echo "# shipped (rebuild the library)"
    else echo "# not better on the held-out cases: data/marl-default.weights kept"; fi ;;
  compare)
    f=${2:?compare FILE}; prod=1
    for c in "--window 3974400:4579200 --load-scale 1 --machines 64 --racks 16" "--machines 16 --racks 4"; do
      for i in shipped off; do
        r=$($S sim --scenario interference $c --interference $i --policy "marl,marl:weights=$f" --no-progress --csv \
          2>/dev/null | awk -F, 'NR>1 {print $5}' | paste -sd' ')
        echo "# $c, interference $i: shipped, $f: $r"
        prod=$(echo "$prod $r" | awk '{print $1 * $3 / $2}')
      done
    done
    echo "# geometric mean of the ratios: $(echo "$prod" | awk '{printf "%.4f", $1 ^ 0.25}')"
    awk -v p="$prod" 'BEGIN {exit !(p < 1)}' ;;
  re2)
    for c in "32 8 $W8" "16 4 $W16"; do
      set -- $c
      for i in shipped off; do
        echo "# interference $i: Philly day 25, $1 x 8 GPUs, $2 racks, 2:1"
        $S sim --scenario interference --interference $i --machines $1 --racks $2 \
          --policy "$HEUR,marl,marl:weights=$3" --no-progress --csv --out "build/re2-$1-$i" 2>/dev/null | cut -d, -f2,5-8
      done
    done
    echo "# floor: no queue, no interference (every job starts at once, consolidated, at its speed alone)"
    $S sim --scenario interference --interference off --machines 1024 --racks 64 --policy fifo --no-progress --csv \
      2>/dev/null | cut -d, -f2,5 ;;
  re3)
    echo "# tested on 64 x 4 GPUs, 8 racks, 4:1 (Philly day 25, interference on)"
    $S sim --scenario interference --machines 64 --gpus-per-machine 4 --racks 8 --oversub 4 \
      --policy "$HEUR,marl:weights=$W8,marl:weights=$W4" --no-progress --csv --out build/re3 2>/dev/null | cut -d, -f2,5-8 ;;
  re4)
    # Days 46-53 (seconds 3974400-4579200, 12,417 jobs) at load x1 queue on 512 GPUs; day 25 does not.
    echo "# 64 x 8 GPUs (512), 16 racks, 2:1, Philly days 46-53, interference on (decision times: run under quiet)"
    p=fifo,fifo:place=pack
    for a in 1 2 4 8; do p="$p,marl:weights=$W8:agents=$a"; done
    $S sim --scenario interference --window 3974400:4579200 --load-scale 1 --machines 64 --racks 16 \
      --policy "$p" --no-progress --out build/re4 2>/dev/null | grep -v "^ *agents=" ;;
  live)
    # GPUS=2 HOSTS=4 CPU=0.4 (the default): jobs share hosts, and a host's CPU limit is shared by the jobs on it:
    # placement matters. GPUS=1 (one GPU per host): no two jobs share a host, so placement chooses only which racks
    # a job spans (the simulator, whose speeds do not depend on racks, gives every placer the same JCT there).
    out=${OUT:-build/experiments/learned-placement} hosts=${HOSTS:-4} gpus=${GPUS:-2}
    for p in ${POLICIES:-marl fifo}; do
      echo "# $p: $(uptime)"
      JOBS=${JOBS:-20} WINDOW=${WINDOW:-90} SCALE=${SCALE:-0.6} SEED=${SEED_LIVE:-3} MAX_TIME=${MAX_TIME:-430} \
        RESTART_COST=${RESTART_COST:-16} NAME=${NAME:-mlive} HOSTS=$hosts GPUS=$gpus CPU=${CPU:-0.4} \
        experiments/live-slurm/run.sh "$p" "$out/live-${p//[:=]/-}" | tail -n 1 || echo "# $p: run.sh failed (see $out/live-${p//[:=]/-})"
    done
    t=$(ls "$out"/live-*/trace.csv 2>/dev/null | head -n 1)
    [ -n "$t" ] || exit 1
    echo "# the same jobs in shoal sim (the testbed's speed table, start cost 12 s): policy, avg JCT (s)"
    $S sim --trace "$t" --machines "$hosts" --gpus-per-machine "$gpus" --racks 2 --cpus-per-machine 4 --mem-gb-per-machine 16 \
      --speed table --throughputs experiments/live-slurm/throughputs.json --gpu testbed --raw-spread --start-cost 12 \
      --restart-cost 16 --policy "$HEUR,marl" --no-progress --csv --no-header 2>/dev/null | cut -d, -f2,5 ;;
  *) sed -n '2,23p' "$0"; exit 2 ;;
esac
