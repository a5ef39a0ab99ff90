#!/bin/sh
# Issue 5 experiment: larr / oasis / greedy against FIFO, DRF, Optimus and
# Tiresias (all in the same slot model) on synthetic PS workloads and the
# Philly trace mapped to PS jobs. Sweeps load (jobs), cluster size, locality
# ratio; larr with and without re-planning; Tiresias thresholds; decision
# time at 100/500/2000 machines. Writes CSVs to results/, SVG plots to plots/
# (gnuplot) and results/summary.txt (larr against the best baseline).
#   experiments/online-scheduling/run.sh [BUILD_DIR] [SEEDS]
#   PARTS="load size locality theta philly replan tiresias decide" selects
#   sections (default all; plots and summary are redrawn from results/).
# Bounded: about 10-15 minutes on a shared 2-core machine with 3 seeds.
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
want() { case " ${PARTS:-load size locality theta philly replan tiresias decide} " in *" $1 "*) return 0 ;; esac; return 1; }
run() { "$SHOAL" sched run --csv --no-header $LB "$@"; }
HDR="tag,policy,machines,jobs,locality,seed,total_flow,mean_flow,p95_flow,makespan,lb,lb_solo,ratio_lb,decide_ms_mean,decide_ms_max,coloc_share,deferrals,rejections,forced,wall_s"

if want load; then
echo "== load sweep (20 machines, arrivals over 40 slots)"
echo "$HDR" > "$R/load.csv"
for s in $SEEDS; do for n in 100 200 300 400 500; do
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

if want replan; then
  # larr as the spec has it (commit on arrival, never revise) against the
  # default re-planning, at the loaded points; policy column "larr-norp"
  echo "== larr without re-planning (--replan 0)"
  echo "$HDR" > "$R/replan.csv"
  for s in $SEEDS; do
    for n in 300 400 500; do
      run --machines 20 --window 40 --jobs $n --seed $s --policy larr --replan 0 --no-lb --tag "synth-$n" | sed 's/,larr,/,larr-norp,/' >> "$R/replan.csv"
    done
    if [ -r "$PHILLY" ]; then for h in 5 10; do
      run --trace "$PHILLY" --slot 1800 --machines $h --window 40 --jobs 300 --seed $s --policy larr --replan 0 --no-lb --tag "philly-$h" | sed 's/,larr,/,larr-norp,/' >> "$R/replan.csv"
    done; fi
  done
fi

if want tiresias; then
  # Tiresias's queue thresholds (attained GPU-slots); default 4,32
  echo "== Tiresias thresholds"
  echo "$HDR" > "$R/tiresias.csv"
  for s in $SEEDS; do for th in 4,32 8,64 16,128 32,256; do
    thc=$(echo "$th" | tr , :)
    for n in 300 400; do
      run --machines 20 --window 40 --jobs $n --seed $s --policy tiresias --tiresias-thr $th --no-lb --tag "synth-$n" | sed "s/,tiresias,/,tiresias-$thc,/" >> "$R/tiresias.csv"
    done
    if [ -r "$PHILLY" ]; then for h in 5 10; do
      run --trace "$PHILLY" --slot 1800 --machines $h --window 40 --jobs 300 --seed $s --policy tiresias --tiresias-thr $th --no-lb --tag "philly-$h" | sed "s/,tiresias,/,tiresias-$thc,/" >> "$R/tiresias.csv"
    done; fi
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
plot for [pol in "larr greedy oasis fifo drf optimus tiresias"] "< awk '\$2 == \"".pol."\"' $4" using 1:3 with linespoints title pol
GP
}
plot load_ratio "jobs arriving in 40 slots (20 machines)" "total flow time / lower bound" "$R/load.ratio.dat" ""
plot load_mean "jobs arriving in 40 slots (20 machines)" "mean flow time (slots)" "$R/load.mean.dat" ""
plot size_ratio "machines (300 jobs)" "total flow time / lower bound" "$R/size.ratio.dat" "set logscale x 2"
plot locality_ratio "locality ratio b_in/b_ex (20 machines, 300 jobs)" "total flow time / lower bound" "$R/locality.ratio.dat" "set logscale x"
plot philly_ratio "machines (Philly, 300 jobs)" "total flow time / lower bound" "$R/philly.ratio.dat" ""
# larr against the best of FIFO, DRF, Optimus, Tiresias per sweep point
# (means over seeds): total flow, ratio to LB, and larr / best - 1
summary() { # file label
  [ -r "$1" ] || return 0
  echo "## $2 (mean over seeds; total flow, [ratio to LB])"
  awk -F, 'NR > 1 { k = $1 SUBSEP $2; f[k] += $7; rl[k] += $13; n[k]++; if (!($1 in seen)) { seen[$1] = 1; tags[++m] = $1 }; pols[$2] = 1 }
    END {
      printf "%-6s", "point"; split("larr greedy oasis fifo drf optimus tiresias", P, " ")
      for (q = 1; q <= 7; q++) printf " %17s", P[q]; printf " %10s %8s\n", "best-base", "larr/best"
      for (i = 1; i <= m; i++) {
        t = tags[i]; printf "%-6s", t; best = -1; bn = ""
        for (q = 1; q <= 7; q++) { k = t SUBSEP P[q]; if (!(k in n)) { printf " %17s", "-"; continue }
          v = f[k] / n[k]; printf " %9.0f [%5.2f]", v, rl[k] / n[k]
          if (q >= 4 && (best < 0 || v < best)) { best = v; bn = P[q] } }
        l = t SUBSEP "larr"; if (best > 0 && (l in n)) printf " %10s %+7.1f%%\n", bn, 100 * (f[l] / n[l] / best - 1); else printf "\n"
      } }' "$1"
}
{
  summary "$R/load.csv" "load sweep, 20 machines"
  summary "$R/size.csv" "cluster size, 300 jobs"
  summary "$R/locality.csv" "locality ratio, 20 machines, 300 jobs"
  summary "$R/philly.csv" "Philly mapped to PS jobs, 300 jobs"
  for f in replan tiresias; do
    [ -r "$R/$f.csv" ] || continue
    echo "## $f (mean total flow over seeds)"
    awk -F, 'NR > 1 { k = $1 " " $2; s[k] += $7; n[k]++; if (!(k in o)) { o[k] = ++m; key[m] = k } }
      END { for (i = 1; i <= m; i++) printf "%-12s %-18s %8.0f\n", substr(key[i], 1, index(key[i], " ") - 1), substr(key[i], index(key[i], " ") + 1), s[key[i]] / n[key[i]] }' "$R/$f.csv"
  done
} > "$R/summary.txt"
cat "$R/summary.txt"
echo "results in $R, plots in $P"
