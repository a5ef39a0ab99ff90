#!/bin/sh
# Online scheduling on the one engine: the slot planners larr, greedy and
# oasis against FIFO, SRTF, Tiresias, Optimus, DRF and Gavel, all as policies
# of `shoal sim` (the same workloads, placements, speed model and metrics),
# on the contended scenarios, with the offline lower bound where it is
# computable. Sections (PARTS, default all):
#   scenarios  every policy on the synthetic default, philly-busy and gavel
#              scenarios (seed 1; larr and oasis only on synthetic: their cost, docs)
#   pollux     the Pollux-style scenario at load-scale 2, 4, 8 (0.5x-2x), seeds
#              1-3 (the seed draws the 160-job sample), every policy + the bound
#   ablation   what the LP adds: larr vs greedy with the same re-planning
#              (both re-plan by default), both without re-planning (replan=0),
#              without the restart cost and fitted rates (restart=0:fit=0),
#              and larr planning with remaining work estimated online from
#              finished jobs (larr:estimate=3600) instead of known exactly;
#              pollux at load-scale 4 and 8 and all-PS synthetic jobs, seeds 1-3
#   decide     planner decision time per arrival at 100/500/2000 machines
# Writes CSVs (shoal sim's columns) to results/, SVG plots to plots/
# (gnuplot) and results/summary.txt.
#   experiments/online-scheduling/run.sh [BUILD_DIR] [SEEDS]     env: PARTS, PHILLY=FILE (the Philly trace)
set -eu
B=${1:-build}
SEEDS=${2:-"1 2 3"}
SHOAL=$B/shoal
D=$(dirname "$0")
R=$D/results
P=$D/plots
mkdir -p "$R" "$P"
[ -x "$SHOAL" ] || { echo "run.sh: $SHOAL not built (make BUILD=$B $SHOAL)" >&2; exit 1; }
want() { case " ${PARTS:-scenarios pollux ablation decide} " in *" $1 "*) return 0 ;; esac; return 1; }
sim() { "$SHOAL" sim --csv --no-header --no-progress "$@"; }
HDR="tag,policy,jobs,unfinished,jct_avg_s,jct_p50_s,jct_p95_s,jct_p99_s,makespan_s,queue_avg_s,waited,gpu_util,preemptions,ftf_max,ftf_avg,decisions,decide_ms_avg,decide_ms_max,events_per_s,decisions_per_s,wall_s,peak_rss_mb,flow_slots,lb_slots,ratio_lb,policy_stats"
BASE=fifo,srtf,tiresias,optimus,drf,gavel
PHILLY=${PHILLY:-../shared/data/philly/philly.csv}
if [ ! -r "$PHILLY" ] && { want scenarios || want pollux || want ablation; }; then
  echo "run.sh: the Philly trace $PHILLY is not readable: run from the repository root with ../shared beside it, or set PHILLY=FILE" >&2
  exit 1
fi

if want scenarios; then
  echo "== scenarios (seed 1)"
  echo "$HDR" > "$R/scenarios.csv"
  sim --scenario synthetic --policy $BASE,greedy,larr,oasis --tag synthetic >> "$R/scenarios.csv"
  sim --scenario gavel --policy $BASE,greedy --tag gavel >> "$R/scenarios.csv"
  [ -r "$PHILLY" ] && sim --scenario philly-busy --trace "$PHILLY" --policy $BASE,greedy --tag philly-busy >> "$R/scenarios.csv"
fi

if want pollux && [ -r "$PHILLY" ]; then
  echo "== pollux-style, load-scale 2 4 8, seeds $SEEDS, lower bound in 30-minute slots"
  echo "$HDR" > "$R/pollux.csv"
  for s in $SEEDS; do for x in 2 4 8; do
    sim --scenario pollux --trace "$PHILLY" --load-scale $x --seed $s --lower-bound --lb-slot 1800 --lb-time 10 \
      --policy $BASE,greedy,larr,oasis --tag "$x" 2> /dev/null >> "$R/pollux.csv"
  done; done
fi

if want ablation; then
  echo "== ablation: LP vs greedy with the same re-planning; exact vs estimated remaining work"
  echo "$HDR" > "$R/ablation.csv"
  AB=larr,greedy,larr:replan=0,greedy:replan=0,larr:restart=0:fit=0,larr:estimate=3600,greedy:estimate=3600,oasis:replan=1,srtf
  for s in $SEEDS; do
    if [ -r "$PHILLY" ]; then for x in 4 8; do
      sim --scenario pollux --trace "$PHILLY" --load-scale $x --seed $s --policy $AB --tag "pollux-x$x" >> "$R/ablation.csv"
    done; fi
    sim --synthetic 1000 --load 0.9 --machines 8 --ps-fraction 1 --report-jobs 200:800 --seed $s --policy $AB \
      --tag "synthetic-ps" >> "$R/ablation.csv"
  done
fi

if want decide; then
  echo "== decision time per arrival (cluster preloaded to ~70% of its GPU-slots; wall and CPU ms, noisy)"
  "$SHOAL" sched decide-time --machines 100,500,2000 --jobs 20 | tee "$R/decide.txt"
fi

# mean over seeds per (tag, policy) of column $2 of file $1
agg() {
  awk -F, -v col="$2" 'NR > 1 { k = $1 "," $2; s[k] += $col; n[k]++; if (!(k in o)) { o[k] = ++m; key[m] = k } }
    END { for (i = 1; i <= m; i++) { split(key[i], a, ","); printf "%s %s %.4f\n", a[1], a[2], s[key[i]] / n[key[i]] } }' "$1"
}
if [ -r "$R/pollux.csv" ] && command -v gnuplot > /dev/null; then
  agg "$R/pollux.csv" 5 > "$R/pollux.jct.dat"
  agg "$R/pollux.csv" 25 > "$R/pollux.ratio.dat"
  for what in jct ratio; do
    case $what in jct) yl="average JCT (s)" ;; ratio) yl="total flow / lower bound (30-min slots)" ;; esac
    gnuplot <<GP
set terminal svg size 640,400 dynamic font "sans,11"
set output "$P/pollux_$what.svg"
set xlabel "load scale (arrivals compressed; 4 = the scenario)"; set ylabel "$yl"; set key outside right; set grid
set logscale x 2
plot for [pol in "fifo srtf tiresias optimus drf gavel greedy larr oasis"] "< awk '\$2 == \"".pol."\"' $R/pollux.$what.dat" using 1:3 with linespoints title pol
GP
  done
fi

{
  for f in scenarios pollux ablation; do
    [ -r "$R/$f.csv" ] || continue
    echo "## $f: mean over seeds of avg JCT (s), p95 JCT (s), queueing (s), FTF max, decide ms, ratio to LB"
    awk -F, 'NR > 1 { k = $1 SUBSEP $2; j[k] += $5; p[k] += $7; q[k] += $10; f[k] += $14; d[k] += $17; r[k] += $25; n[k]++
        if (!(k in seen)) { seen[k] = 1; keys[++m] = k } }
      END { for (i = 1; i <= m; i++) { k = keys[i]; split(k, a, SUBSEP)
        printf "%-14s %-34s %9.0f %9.0f %8.0f %9.2f %9.4f %7.3f\n", a[1], a[2], j[k] / n[k], p[k] / n[k], q[k] / n[k], f[k] / n[k], d[k] / n[k], r[k] / n[k] } }' "$R/$f.csv"
  done
} > "$R/summary.txt"
cat "$R/summary.txt"
echo "results in $R, plots in $P"
