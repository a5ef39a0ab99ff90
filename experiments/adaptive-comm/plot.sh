#!/usr/bin/env bash
# SVG plots (gnuplot) of ae1.sh, ae2.sh and ae3.sh outputs.
#   experiments/adaptive-comm/plot.sh [OUTDIR (build/experiments/adaptive-comm)] [FIGDIR (docs/figures)]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/experiments/adaptive-comm} fig=${2:-docs/figures}
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot missing (apt-get install gnuplot-nox)" >&2; exit 2; }
mkdir -p "$fig"

# AE1: measured vs configured rate per host pair, one series per SHOAL_PROFILE_FLOWS
plots=()
for t in "$out"/ae1-table-f*.txt; do
  [ -s "$t" ] || continue
  f=${t##*-f}; f=${f%.txt}
  awk '$1 ~ /^h[0-9]/ { print $3, $5 }' "$t" >"$out/ae1-points-f$f.dat"
  plots+=("'$out/ae1-points-f$f.dat' using 1:2 with points pt 7 ps 0.6 title 'flows at once: $([ "$f" = 0 ] && echo all || echo "$f")'")
done
if [ ${#plots[@]} -gt 0 ]; then
  (IFS=,; gnuplot <<GP
set terminal svg size 640,440 font "sans,11"
set output "$fig/adaptive-ae1-fidelity.svg"
set title "link profile: measured vs configured rate per host pair (8 hosts)"
set xlabel "configured rate (Mbit/s, the slower host link)"
set ylabel "measured (Mbit/s, TCP payload)"
set logscale xy
set xrange [70:1400]
set yrange [40:1600]
set key left top
set grid
plot x with lines lc rgb "black" title "measured = configured", 0.9*x with lines dt 2 lc rgb "gray" title "-10%", 1.1*x with lines dt 2 lc rgb "gray" title "+10%", ${plots[*]}
GP
  )
  echo "$fig/adaptive-ae1-fidelity.svg"
fi
if [ -s "$out/ae1-time-table.txt" ]; then
  awk '$2 == "all" { print $1, $3, $4, $5 }' "$out/ae1-time-table.txt" >"$out/ae1-time-all.dat"
  awk '$2 == "2" { print $1, $3, $4, $5 }' "$out/ae1-time-table.txt" >"$out/ae1-time-2.dat"
  gnuplot <<GP
set terminal svg size 640,400 font "sans,11"
set output "$fig/adaptive-ae1-time.svg"
set title "time to measure the link matrix (1 Gbit/s links, mean and min-max)"
set xlabel "hosts"
set ylabel "time (ms)"
set xtics (2, 4, 8)
set key left top
set grid
set yrange [0:*]
plot "$out/ae1-time-all.dat" using 1:2:3:4 with yerrorlines title "every host's flows at once", \
     "$out/ae1-time-2.dat" using 1:2:3:4 with yerrorlines title "2 flows at once"
GP
  echo "$fig/adaptive-ae1-time.svg"
fi

# AE2: busbw against size per program, per configuration
for cfg in uniform slow; do
  plots=()
  for p in auto ring before trees1 trees2 trees4 ompi gloo; do
    d=$out/ae2-$cfg-$p.txt
    [ -s "$d" ] || continue
    col=11; [ $p = gloo ] && col=18
    plots+=("'$d' using 1:$col with linespoints title '$p'")
  done
  [ ${#plots[@]} -gt 0 ] || continue
  (IFS=,; gnuplot <<GP
set terminal svg size 640,420 font "sans,11"
set output "$fig/adaptive-ae2-$cfg.svg"
set title "allreduce float32 busbw, 8 hosts x 1 rank, 1 Gbit/s links$([ $cfg = slow ] && echo ', h7 at 250 Mbit/s')"
set logscale x 2
set xlabel "message size (bytes)"
set ylabel "busbw (GB/s)"
set key left top
set yrange [0:*]
set grid
plot ${plots[*]}
GP
  )
  echo "$fig/adaptive-ae2-$cfg.svg"
done

# AE3: allreduce time per step against time, and the replayed rate
if ls "$out"/ae3-*-rates.txt >/dev/null 2>&1; then
  plots=()
  for p in default reprof noreprof ring before ompi gloo; do
    d=$out/ae3-$p.txt
    [ -s "$d" ] || continue
    awk '$1 ~ /^[0-9]+$/ && NF >= 5 { print $5, $2 }' "$d" >"$out/ae3-$p.dat"
    plots+=("'$out/ae3-$p.dat' using 1:2 with lines title '$p'")
  done
  r=$out/ae3-default-rates.txt; [ -s "$r" ] || r=$out/ae3-reprof-rates.txt
  awk 'NR == 1 && $2 == "start" { t0 = $1; next } $2 != "start" { if (!t0) t0 = $1; print $1 - t0, $2 }' "$r" >"$out/ae3-rate.dat"
  (IFS=,; gnuplot <<GP
set terminal svg size 760,440 font "sans,11"
set output "$fig/adaptive-ae3.svg"
set title "allreduce (4 MiB) per step while h7's link replays a trace"
set xlabel "time since start (s)"
set ylabel "allreduce time (ms)"
set y2label "h7 link (Mbit/s)"
set y2tics
set ytics nomirror
set logscale y
set key outside right top
set grid
plot ${plots[*]}, '$out/ae3-rate.dat' using 1:2 axes x1y2 with steps lw 2 lc rgb "black" title 'h7 rate'
GP
  )
  echo "$fig/adaptive-ae3.svg"
fi
