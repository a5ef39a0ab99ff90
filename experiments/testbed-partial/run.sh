#!/usr/bin/env bash
# Stragglers: bsp vs partial aggregation (strategy partial: the gradients of the
# workers ready within rank 0's window, late workers relay) on an emulated
# cluster (`shoal testbed`), one worker per host, Fashion-MNIST MLP, under one
# injected straggler pattern per run pair (`shoal train --straggle`):
#   slow    one worker 30% slower      (slow:3:0.3)
#   slow2x  one worker 2x slower       (slow:3:1)
#   jitter  lognormal jitter, sigma 0.2 (jitter:0.2)
#   spike   rare 5x spikes             (spike:0.02:5)
#   spikes  every worker 4x slower in 10% of its steps, drawn apart (spike:0.1:4)
#   spike1  in 30% of the steps one worker, drawn anew each time, 2-5x slower (spike1:0.3:2:5)
#   none    no injection (the cost of partial aggregation itself)
# (3 = the last worker, hosts - 1). Slow-downs multiply the step's whole compute, --compute-ms included.
# For each pattern it runs the strategies one after the other on the same
# testbed and prints, per run: time to the target test accuracy (end of the
# first epoch at or above it), final accuracy, mean iteration time, mean
# compute and communication per iteration, the fraction of the workers'
# gradients in each step's average (fresh, carried) and of steps skipped;
# accuracy-against-time SVGs with `shoal train --plot`.
#   experiments/testbed-partial/run.sh [--build DIR] [--patterns "slow jitter spike none"]
#       [--strategies "bsp partial"] [--hosts 4] [--rate 1gbit] [--epochs 10] [--batch 64] [--decay 5,7]
#       [--config 'carry=1 window=measured'] [--target 0.88] [--compute-ms 0] [--reps 1] [--out DIR] [--name pa]
# --compute-ms: every step computes MS longer, sleeping (shoal train --compute-ms: an accelerator's share of the
# step, which a slow worker multiplies, without taking the 2 shared cores from the others)
# --decay: epochs after which the learning rate drops 10x (shoal train --decay-epochs; default none: the
# MLP then plateaus near 0.875-0.88, so a 0.88 target needs it)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build patterns="slow jitter spike none" strategies="bsp partial" hosts=4 rate=1gbit epochs=10 batch=64
config="carry=1 window=measured" target=0.88 reps=1 out="" name=pa lr=0.1 decay= compute_ms=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --patterns) patterns=$2; shift 2 ;;
    --strategies) strategies=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --lr) lr=$2; shift 2 ;;
    --decay) decay=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --compute-ms) compute_ms=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
S=$PWD/$build/shoal
[ -x "$S" ] || { echo "run.sh: $S not built" >&2; exit 2; }
out=${out:-$build/experiments/testbed-partial}
mkdir -p "$out"
last=$((hosts - 1))
spec_of() {
  case $1 in
    slow) echo "slow:$last:0.3" ;;
    slow2x) echo "slow:$last:1" ;;
    jitter) echo "jitter:0.2" ;;
    spike) echo "spike:0.02:5" ;;
    spikes) echo "spike:0.1:4" ;;
    spike1) echo "spike1:0.3:2:5" ;;
    none) echo "" ;;
    *) echo "run.sh: unknown pattern '$1' (slow, slow2x, jitter, spike, spikes, spike1, none)" >&2; exit 2 ;;
  esac
}
for p in $patterns; do spec_of "$p" >/dev/null; done
trap '"$S" testbed down --name "$name" >/dev/null 2>&1 || true' EXIT
"$S" testbed down --name "$name" >/dev/null 2>&1 || true
"$S" testbed up --name "$name" --hosts "$hosts" --rate "$rate" >/dev/null
# one tuning profile for every run (measured once, then read from the cache): the same link model for
# bsp's algorithm choice and partial's window (S/B)
export SHOAL_TUNE=init SHOAL_TUNE_FILE=$out/tune.cache
echo "# testbed-partial: $(date -u +%FT%TZ), $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $hosts hosts x 1 worker, host links $rate; mlp, batch $batch per worker, lr $lr (warm-up 100${decay:+, /10 after epochs $decay}), $epochs epochs;"
echo "# compute per step: the MLP's + $compute_ms ms emulated (--compute-ms)"
echo "# partial: --sync-config '$config' (+ ahead=2); target $target"
common=(--model mlp --epochs "$epochs" --batch "$batch" --lr "$lr" --warmup 100 --compute-ms "$compute_ms" --quiet)
[ -z "$decay" ] || common+=(--decay-epochs "$decay")
for p in $patterns; do
  spec=$(spec_of "$p")
  for rep in $(seq 1 "$reps"); do
    for st in $strategies; do
      run=$p-$st
      [ "$rep" -gt 1 ] && run=$p-$st-r$rep
      rm -f "$out/$run".*
      args=(--sync "$st" --csv "$out/$run.csv" --label "$st" --iter-log "$out/$run.il.csv")
      [ -n "$spec" ] && args+=(--straggle "$spec")
      [ "$st" = partial ] && args+=(--sync-config "$config log=$out/$run.pa.csv")
      echo "# $run: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
      "$S" launch --testbed "$name" -n "$hosts" --per-host 1 -- "$S" train "${common[@]}" "${args[@]}" \
        >"$out/$run.log" 2>&1 || echo "# $run failed (see $out/$run.log)" >&2
    done
  done
  "$S" train --plot "$out/$p.svg" --title "MLP, $hosts hosts at $rate, straggler: ${spec:-none}" \
    $(for st in $strategies; do ls "$out/$p-$st".csv "$out/$p-$st"-r*.csv 2>/dev/null | grep -v -e '\.il\.' -e '\.pa\.'; done) \
    >/dev/null 2>&1 || true
done
echo
echo "## time to $target test accuracy (end of the first epoch at or above it), final accuracy, per-iteration figures"
printf "%-8s %-10s %10s %8s %8s %10s %9s %9s %8s %8s %8s\n" pattern sync time-to-t final train_s iter_ms compute comm in-avg fresh skipped
for p in $patterns; do
  for st in $strategies; do
   for f in "$out/$p-$st".csv "$out/$p-$st"-r*.csv; do
    [ -e "$f" ] || continue
    case $f in *.il.csv | *.pa.csv) continue ;; esac # the repetitions' iteration and window logs
    run=$(basename "$f" .csv)
    [ -s "$f" ] || { echo "$p $run: no result"; continue; }
    acc=$(awk -F, -v t="$target" 'NR > 1 { if (!hit && $9 >= t) hit = $7; last = $9; tm = $7 }
      END { printf "%10s %8.4f %8.1f", hit ? sprintf("%.1f", hit) : "never", last, tm }' "$f")
    # iteration log of every worker: compute and sync ms; group_size = data sets in the average
    it=$(cat "$out/$run.il.csv"* | awk -F, -v W="$hosts" '$1 ~ /^[0-9]/ && $1 >= 20 { c += $4; s += $5; g += $3; n++ }
      END { printf "%10.1f %9.1f %9.1f %8.3f", (c + s) / n, c / n, s / n, g / n / W }')
    pa="       -        -"
    if [ -s "$out/$run.pa.csv" ]; then
      pa=$(cat "$out/$run.pa.csv"* | awk -F, -v W="$hosts" '$1 ~ /^[0-9]/ { f += $5; k += $2; n++ }
        END { printf "%8.3f %8.3f", f / n / W, k / n }')
    fi
    printf "%-8s %-10s %s %s %s\n" "$p" "${run#$p-}" "$acc" "$it" "$pa"
   done
  done
done
