#!/bin/bash
# How much the live workload's draw matters: workload.py's seeds in `shoal sim`
# (measured speed table, the start/restart costs given), average JCT of fifo
# (Slurm's greedy backfill stand-in) and the live runs' policies, and the best
# policy's gain over fifo. The same knobs as run.sh choose the piece; with
# OTHER=K the second user's K plain jobs (OTHER_S s each, at other-times.sh's
# times) are in the simulation as rigid 1-node jobs of OTHER_S s of cnn
# training plus the start cost, and the average JCT is over the workload's jobs
# only, as run.sh's summary counts it.
#   seeds.sh [START_COST (12)] [RESTART_COST (16)]
#     env: SHOAL (build/shoal), SEEDS ("1 2 ... 10"), JOBS (30), WINDOW (240), SCALE (1), OTHER (0),
#          OTHER_S (30), THROUGHPUTS (the workload's lengths, experiments/live-slurm/throughputs.json),
#          SIM_THROUGHPUTS (the simulator's speeds, THROUGHPUTS)
set -u
here=$(cd "$(dirname "$0")" && pwd)
S=${SHOAL:-build/shoal} SC=${1:-12} RC=${2:-16}
SEEDS=${SEEDS:-$(seq 1 10)} JOBS=${JOBS:-30} WINDOW=${WINDOW:-240} SCALE=${SCALE:-1} OTHER=${OTHER:-0} OTHER_S=${OTHER_S:-30}
TP=${THROUGHPUTS:-$here/throughputs.json}
STP=${SIM_THROUGHPUTS:-$TP}
pols=(fifo srtf "tiresias:thresholds=100/800:starve=0:runfrac=0" "elastic:interval=30:gain=1"
      "larr:slot=60:restart=0:fit=0" "larr:slot=60" "larr:slot=60:hold=1")
names=(fifo srtf tiresias elastic larr-0 larr larr-hold)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf "%-5s" seed; for n in "${names[@]}"; do printf " %9s" "$n"; done; printf "  best_gain\n"
for seed in $SEEDS; do
  /usr/bin/python3 "$here/workload.py" "$TP" "$tmp" --jobs "$JOBS" --seed "$seed" --window "$WINDOW" --scale "$SCALE" > /dev/null
  # column 9 marks the workload's jobs (w) and the other user's (o); the simulator's "row" is the line number
  cnn1=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['testbed'][\"('cnn', 1)\"]['null'])" "$STP")
  { head -n 1 "$tmp/trace.csv"
    { tail -n +2 "$tmp/trace.csv" | sed 's/$/,w/'
      [ "$OTHER" -gt 0 ] && "$here/other-times.sh" "$seed" "$WINDOW" "$OTHER" |
        awk -v s="$cnn1" -v d="$OTHER_S" '{ printf "%s,1,%d,cnn,1,1,1,1,o\n", $1, s * d }'
    } | sort -s -t, -k1,1g; } > "$tmp/marked.csv"
  cut -d, -f1-8 "$tmp/marked.csv" > "$tmp/sim.csv"
  printf "%-5s" "$seed"
  vals=()
  for p in "${pols[@]}"; do
    rm -rf "$tmp/out"
    "$S" sim --trace "$tmp/sim.csv" --machines 8 --gpus-per-machine 1 --racks 2 --cpus-per-machine 4 \
      --mem-gb-per-machine 16 --speed table --throughputs "$STP" --gpu testbed --raw-spread \
      --start-cost "$SC" --restart-cost "$RC" --policy "$p" --no-progress --out "$tmp/out" > /dev/null 2>&1
    v=$(awk -F, 'FNR == NR { kind[FNR] = $9; next }
                 FNR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
                 kind[$col["row"]] == "w" { s += $col["jct"]; n++ }
                 END { if (n) printf "%.3f", s / n; else print "nan" }' "$tmp/marked.csv" "$tmp"/out/jobs-*.csv)
    vals+=("$v"); printf " %9.1f" "$v"
  done
  printf "  %s\n" "$(printf "%s\n" "${vals[@]:1}" | sort -g | head -n 1 | awk -v f="${vals[0]}" '{ printf "%.0f%%", 100 * (1 - $1 / f) }')"
done
