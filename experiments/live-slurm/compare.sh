#!/bin/bash
# Live against simulated: for every run.sh result under DIR (one directory per
# scheduler), the same workload (trace.csv) in `shoal sim`, the scheduler's
# policy with the same parameters (Slurm's own: fifo, greedy backfill in
# arrival order without preemption), three times: sim with the speed table
# THROUGHPUTS (speeds.sh) and the start cost of the Slurm run's jobs; sim2 with
# the speeds the Slurm run's jobs had (throughputs-slurm-run.json); sim3 with the
# speeds, start and restart cost each run's own jobs had (its throughputs-own.json: the
# machine's load moves every job's speed, so this one isolates the scheduling
# model from the speeds), and the restart cost its jobs had (decision to the new run
# plus its start-up). Speeds and costs come from fitspeeds.py. Prints
# one table and draws two SVGs: average JCT live and simulated per scheduler,
# and the live JCT CDFs.
#   compare.sh [DIR (build/experiments/live-slurm)] [FIGDIR (docs/figures)]
#   env: SHOAL (build/shoal), THROUGHPUTS, START_COST (s; default: fitted), RESTART_COST (16 s)
set -u
here=$(cd "$(dirname "$0")" && pwd)
S=${SHOAL:-build/shoal} D=${1:-build/experiments/live-slurm} FIG=${2:-docs/figures}
TP=${THROUGHPUTS:-$here/throughputs.json}
order=(slurm fifo srtf tiresias-100 tiresias elastic larr)
dirs=()
for s in "${order[@]}"; do [ -s "$D/$s/result" ] && dirs+=("$s"); done
[ ${#dirs[@]} -gt 0 ] || { echo "compare.sh: no results under $D" >&2; exit 2; }
trace=$D/${dirs[0]}/trace.csv
# Start cost and speeds as a run's jobs really had them (fitspeeds.py: wall = start + work/speed
# over the run's jobs that ran once): from the Slurm run for sim and sim2, from each run itself for sim3
SC=${START_COST:-10}
if [ -s "$D/slurm/jobs.csv" ]; then
  read -r sc _ <<< "$(/usr/bin/python3 "$here/fitspeeds.py" "$D/slurm/jobs.csv" "$TP" "$D/throughputs-slurm-run.json")" || exit 1
  SC=${START_COST:-$sc}
fi
RC=${RESTART_COST:-16}
echo "# start cost ${SC} s (fit over the Slurm run's single-run jobs: wall = start + work/speed), restart cost ${RC} s (the controller's --restart-cost)"
printf "%-38s %8s %8s %8s %8s %8s %8s %8s %6s %8s %7s %6s %5s\n" scheduler live_jct sim_jct sim/live sim2_jct sim2/live \
  sim3_jct sim3/live start3 restart3 live_ms sim_ms runs > "$D/compare.txt"
: > "$D/bars.dat"
simulate() { # TABLE START_COST [RESTART_COST]
  "$S" sim --trace "$trace" --machines 8 --gpus-per-machine 1 --racks 2 --cpus-per-machine 4 --mem-gb-per-machine 16 \
    --speed table --throughputs "$1" --gpu testbed --raw-spread --start-cost "$2" --restart-cost "${3:-$RC}" \
    --policy "$pol" --no-progress --csv --no-header 2>/dev/null
}
r() { awk -v a="$1" -v b="$ljct" 'BEGIN { print a / b }'; } # simulated / live of the scheduler at hand
for s in "${dirs[@]}"; do
  sched=$(awk '{print $1}' "$D/$s/result")
  pol=$sched; [ "$s" = slurm ] && pol=fifo
  read -r ljct lms lutil runs <<< "$(awk '{print $3, $5, $7, $11}' "$D/$s/result")"
  simr=$(simulate "$TP" "$SC")
  sjct=$(echo "$simr" | awk -F, '{print $5}') sms=$(echo "$simr" | awk -F, '{print $9}')
  # sim2: the same with the speeds the Slurm run's jobs actually had
  s2=$(simulate "$D/throughputs-slurm-run.json" "$SC" | awk -F, '{print $5}')
  # sim3: with the speeds, start and restart cost this run's own jobs had (what the machine's load made of them)
  read -r sc3 rc3 <<< "$(/usr/bin/python3 "$here/fitspeeds.py" "$D/$s/jobs.csv" "$TP" "$D/$s/throughputs-own.json" "$RC")" || exit 1
  s3=$(simulate "$D/$s/throughputs-own.json" "$sc3" "$rc3" | awk -F, '{print $5}')
  printf "%-38s %8.1f %8.1f %8.2f %8.1f %8.2f %8.1f %8.2f %6.1f %8.1f %7.0f %6.0f %5s\n" "$sched" "$ljct" "$sjct" "$(r "$sjct")" \
    "$s2" "$(r "$s2")" "$s3" "$(r "$s3")" "$sc3" "$rc3" "$lms" "$sms" "$runs" >> "$D/compare.txt"
  echo "${s} $ljct $sjct $s2 $s3" >> "$D/bars.dat"
done
cat "$D/compare.txt"
command -v gnuplot > /dev/null || { echo "compare.sh: gnuplot missing (apt-get install gnuplot-nox): no plots" >&2; exit 0; }
mkdir -p "$FIG"
gnuplot <<EOF
set terminal svg size 640,380 font "sans,11"
set output "$FIG/live-slurm-jct.svg"
set title "30 shoal train jobs on Slurm, 8 hosts: average JCT, live and simulated"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "average JCT (s)"
set yrange [0:*]
set grid ytics
set key top right
plot "$D/bars.dat" using 2:xtic(1) title "live (Slurm, shoal sched serve)", "" using 3 title "shoal sim (speed table)", \
     "" using 4 title "shoal sim (speeds of the Slurm run)", "" using 5 title "shoal sim (speeds of the run itself)"
EOF
plots=()
for s in "${dirs[@]}"; do
  awk -F, 'NR > 1 && $14 != "" { print $14 }' "$D/$s/jobs.csv" | sort -g |
    awk '{ a[NR] = $1 } END { for (i = 1; i <= NR; i++) print a[i], i / NR }' > "$D/$s/cdf.dat"
  plots+=("'$D/$s/cdf.dat' using 1:2 with steps lw 2 title '$s'")
done
(IFS=,; gnuplot <<EOF
set terminal svg size 640,380 font "sans,11"
set output "$FIG/live-slurm-jct-cdf.svg"
set title "30 shoal train jobs on Slurm, 8 hosts: JCT distribution (live)"
set xlabel "job completion time (s)"
set ylabel "fraction of jobs"
set yrange [0:1]
set grid
set key bottom right
plot ${plots[*]}
EOF
)
echo "$FIG/live-slurm-jct.svg $FIG/live-slurm-jct-cdf.svg"
