#!/bin/bash
# How much the live workload's draw matters: workload.py's seeds 1..10 in
# `shoal sim` (measured speed table, the start/restart costs given), average
# JCT of fifo (Slurm's greedy backfill stand-in) and the live runs' policies,
# and the best policy's gain over fifo. The live runs use seed 8.
#   seeds.sh [START_COST (12)] [RESTART_COST (16)]     env: SHOAL (build/shoal)
set -u
here=$(cd "$(dirname "$0")" && pwd)
S=${SHOAL:-build/shoal} SC=${1:-12} RC=${2:-16}
pols=(fifo srtf "tiresias:thresholds=100/800:starve=0:runfrac=0" "elastic:interval=30:gain=1" "larr:slot=60")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf "%-5s" seed; for p in "${pols[@]}"; do printf " %9s" "${p%%:*}"; done; printf "  best_gain\n"
for seed in $(seq 1 10); do
  /usr/bin/python3 "$here/workload.py" "$here/throughputs.json" "$tmp" --seed "$seed" > /dev/null
  printf "%-5s" "$seed"
  vals=()
  for p in "${pols[@]}"; do
    v=$("$S" sim --trace "$tmp/trace.csv" --machines 8 --gpus-per-machine 1 --racks 2 --cpus-per-machine 4 \
        --mem-gb-per-machine 16 --speed table --throughputs "$here/throughputs.json" --gpu testbed --raw-spread \
        --start-cost "$SC" --restart-cost "$RC" --policy "$p" --no-progress --csv --no-header 2>/dev/null | awk -F, '{print $5}')
    vals+=("$v"); printf " %9.1f" "$v"
  done
  printf "  %s\n" "$(printf "%s\n" "${vals[@]:1}" | sort -g | head -n 1 | awk -v f="${vals[0]}" '{ printf "%.0f%%", 100 * (1 - $1 / f) }')"
done
