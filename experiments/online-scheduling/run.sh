#!/bin/sh
# Issue 5 experiment: larr / oasis / greedy against FIFO and DRF (same slot
# model) on synthetic PS workloads and the Philly trace mapped to PS jobs.
# Sweeps load (jobs), cluster size, locality ratio; decision time at 100/500/
# 2000 machines. Writes CSVs to results/ and SVG plots to plots/ (gnuplot).
#   experiments/online-scheduling/run.sh [BUILD_DIR] [SEEDS]
#   PARTS="load size locality theta philly decide" selects sections (default all;
#   plots are redrawn from whatever results/ holds).
# Bounded: about 6-10 minutes on a shared 2-core machine.
set -eu
B=${1:-build}
SEEDS=${2:-"1 2 3"}
SHOAL=$B/shoal
D=$(dirname "$0")
R=$D/results
P=$D/plots
mkdir -p "$R" "$P"
[ -x "$SHOAL" ] || { echo "run.sh: $SHOAL not built (make BUILD=$B $SHOAL)" >&2; exit 1; }
LB="--lb-time 10"
want() { case " ${PARTS:-load size locality theta philly decide} " in *" $1 "*) return 0 ;; esac; return 1; }
run() { "$SHOAL" sched run --csv --no-header $LB "$@"; }
HDR="tag,policy,machines,jobs,locality,seed,total_flow,mean_flow,p95_flow,makespan,lb,lb_solo,ratio_lb,decide_ms_mean,decide_ms_max,coloc_share,deferrals,rejections,forced,wall_s"

if want load; then
echo "== load sweep (20 machines, arrivals over 40 slots)"
echo "$HDR" > "$R/load.csv"
for s in $SEEDS; do for n in 100 200 300 400; do
  run --machines 20 --window 40 --jobs $n --seed $s --tag $n >> "$R/load.csv"
done; done
fi

if want size; then
echo "== cluster-size sweep (300 jobs over 40 slots)"
echo "$HDR" > "$R/size.csv"
for s in $SEEDS; do for h in 10 20 40 80; do
  run --machines $h --window 40 --jobs 300 --seed $s --tag $h >> "$R/size.csv"
done; done
fi

if want locality; then
echo "== locality sweep (20 machines, 300 jobs)"
echo "$HDR" > "$R/locality.csv"
for s in $SEEDS; do for l in 1 2 5 10 50; do
  run --machines 20 --window 40 --jobs 300 --locality $l --seed $s --tag $l >> "$R/locality.csv"
done; done
fi

if want theta; then
echo "== theta sweep of larr's prices (20 machines, 300 jobs; spec default 16)"
echo "$HDR" > "$R/theta.csv"
for s in $SEEDS; do for th in 16 4 1 0.5 0.125; do
  run --machines 20 --window 40 --jobs 300 --seed $s --theta $th --policy larr,greedy --no-lb --tag $th >> "$R/theta.csv"
done; done
fi

PHILLY=../shared/data/philly/philly.csv
if want philly && [ -r "$PHILLY" ]; then
  echo "== Philly trace mapped to PS jobs (300 sampled jobs over 40 slots of 1800 s, 5 and 10 machines)"
  echo "$HDR" > "$R/philly.csv"
  for s in $SEEDS; do for h in 5 10; do
    run --trace "$PHILLY" --slot 1800 --machines $h --window 40 --jobs 300 --seed $s --tag $h >> "$R/philly.csv"
  done; done
fi

if want decide; then
echo "== decision time per arrival (cluster preloaded to ~70% of its GPU-slots; wall and CPU ms, noisy)"
"$SHOAL" sched decide-time --machines 100,500,2000 --jobs 20 | tee "$R/decide.txt"
fi

# mean over seeds per (tag, policy) of a column
agg() { # file column -> tag policy mean
  awk -F, -v col="$2" 'NR > 1 { k = $1 "," $2; s[k] += $col; n[k]++; if (!(k in o)) { o[k] = ++m; key[m] = k } }
    END { for (i = 1; i <= m; i++) { split(key[i], a, ","); printf "%s %s %.4f\n", a[1], a[2], s[key[i]] / n[key[i]] } }' "$1"
}
for f in load size locality philly; do
  [ -r "$R/$f.csv" ] || continue
  agg "$R/$f.csv" 13 > "$R/$f.ratio.dat"
  agg "$R/$f.csv" 8 > "$R/$f.mean.dat"
done
[ -r "$R/theta.csv" ] && agg "$R/theta.csv" 7 > "$R/theta.total.dat"

plot() { # name xlabel ylabel datafile logx
  [ -r "$4" ] || return 0
  gnuplot <<GP
set terminal svg size 640,400 dynamic font "sans,11"
set output "$P/$1.svg"
set xlabel "$2"; set ylabel "$3"; set key outside right; set grid
$5
plot for [pol in "larr greedy oasis fifo drf"] "< awk '\$2 == \"".pol."\"' $4" using 1:3 with linespoints title pol
GP
}
plot load_ratio "jobs arriving in 40 slots (20 machines)" "total flow time / lower bound" "$R/load.ratio.dat" ""
plot load_mean "jobs arriving in 40 slots (20 machines)" "mean flow time (slots)" "$R/load.mean.dat" ""
plot size_ratio "machines (300 jobs)" "total flow time / lower bound" "$R/size.ratio.dat" "set logscale x 2"
plot locality_ratio "locality ratio b_in/b_ex (20 machines, 300 jobs)" "total flow time / lower bound" "$R/locality.ratio.dat" "set logscale x"
plot philly_ratio "machines (Philly, 300 jobs)" "total flow time / lower bound" "$R/philly.ratio.dat" ""
echo "results in $R, plots in $P"
