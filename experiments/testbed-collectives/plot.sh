#!/usr/bin/env bash
# SVG plots (gnuplot) of experiments/testbed-collectives/run.sh's outputs: busbw against message size,
# one panel per hosts x ranks-per-host configuration, one line per program, the link limit dashed.
#   experiments/testbed-collectives/plot.sh [OUTDIR (default build/experiments/testbed-collectives)] [FIGDIR (docs/figures)]
#        [RATE_BITS (1e9)]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/experiments/testbed-collectives} fig=${2:-docs/figures} bits=${3:-1e9}
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot missing (apt-get install gnuplot-nox)" >&2; exit 2; }
mkdir -p "$fig"
for f in "$out"/h*-p*-auto.txt; do
  tag=$(basename "$f" -auto.txt); H=${tag#h}; H=${H%%-*}; p=${tag##*-p}
  lim=$(awk -v b="$bits" -v H="$H" -v p="$p" 'BEGIN { B = b / 8e9; print (p == 1) ? B : B * (p * H - 1) / (p * (H - 1)) }')
  plots=()
  for prog in ring rhd hier auto ompi gloo; do
    d=$out/$tag-$prog.txt
    [ -s "$d" ] || continue
    col=11; [ $prog = gloo ] && col=18
    plots+=("'$d' using 1:$col with linespoints title '$prog'")
  done
  [ ${#plots[@]} -gt 0 ] || continue
  (IFS=,; gnuplot <<EOF
set terminal svg size 640,400 font "sans,11"
set output "$fig/testbed-$tag.svg"
set title "allreduce float32 busbw, $H hosts x $p rank(s), host links $(awk -v b="$bits" 'BEGIN { print b / 1e9 }') Gbit/s"
set logscale x 2
set xlabel "message size (bytes)"
set ylabel "busbw (GB/s)"
set key left top
set yrange [0:*]
set grid
plot ${plots[*]}, $lim with lines dashtype 2 lc rgb "black" title "link limit"
EOF
  )
  echo "$fig/testbed-$tag.svg"
done
