#!/usr/bin/env bash
# End-to-end PyTorch training with shoal's Python binding (shoal.ddp through include/shoal/sync.h)
# against torch.nn.parallel.DistributedDataParallel over Gloo. Every side runs the same script
# (examples/python/fashion_mnist.py) with the same model, data, per-rank batch, SGD schedule, one torch
# thread per rank, the same launcher and the same CPU pinning (`shoal launch`, --bind auto: rank r on
# the (r mod ncpu)-th CPU), alternating the sides run by run.
#
#   bench/py-ddp-vs-gloo.sh [BUILD]
#   env: SETTINGS="1h:2 1h:4 tb:2x1 tb:2x2 tb:4x1"   1h:N = N ranks on this host;
#                                                    tb:HxK = H emulated hosts x K ranks (shoal testbed)
#        STRATEGIES="bsp localsgd:period=4"         shoal sides: strategy[:key=value,...] (sync.h); bsp
#                                                    does DDP's arithmetic, the others trade it for less
#                                                    communication and are judged at equal accuracy
#        DDP_SIDES="gloo"                           torch DDP sides: gloo (the anchor, always run) and
#                                                    ddp-shoal (unmodified DDP over the shoal backend);
#                                                    none: the limit, every rank training its shard with
#                                                    no communication, all ranks at once
#        EPOCHS=3 REPS=3 TARGET=0.85 BATCH=64 MODEL=mlp RATE=1gbit (testbed host links)
#        TESTBED=pyb<pid> (the testbed's name: its namespaces are TESTBED-h<i>; brought up and down here)
#        SHOAL_ARGS="" (extra arguments of every shoal side, e.g. "--bucket-mb 1")  OUT=/tmp/shoal-py-bench
#        EXTRA_ARGS="" (extra arguments of every side, e.g. "--train-subset 20000")
#        (with the none side, every setting ends with its limit line: the limit's samples/s over Gloo's,
#        saying so where it is below 1.3x, the goal no backend can reach there)
#        LOAD=0 (a busy machine: LOAD busy-loop processes run beside every run, started before it and
#        stopped after it, unpinned: what other users' jobs cost each side)
#
# Per setting and side: every run's samples/s (training samples over training time, evaluations
# excluded), its time to TARGET test accuracy (4 evaluations per epoch, the mean accuracy of the ranks'
# models) and final accuracy; the median of each side, and ratios of the medians against Gloo:
# samples/s shoal/gloo (goal >= 1.3 at equal accuracy) and time to target gloo/shoal (> 1: shoal
# sooner). The testbed settings need root (network namespaces); they are skipped, saying why, without
# it. $OUT/runs.csv has every run, $OUT/py-ddp.svg the plot (gnuplot, if installed).
set -euo pipefail
. "$(dirname "$0")/common.sh"
case ${1:-} in
-h | --help) script_help; exit 0 ;;
-*) unknown_opt "$1" ;;
esac
build=${1:-build}
[ -d "$build" ] || { echo "py-ddp-vs-gloo.sh: build directory '$build' not found (make BUILD=$build)" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd)
PY=/usr/bin/python3
SETTINGS=${SETTINGS:-"1h:2 1h:4 tb:2x1 tb:2x2 tb:4x1"}
EPOCHS=${EPOCHS:-3} REPS=${REPS:-3} TARGET=${TARGET:-0.85} BATCH=${BATCH:-64} MODEL=${MODEL:-mlp}
RATE=${RATE:-1gbit} SHOAL_ARGS=${SHOAL_ARGS:-} STRATEGIES=${STRATEGIES-"bsp localsgd:period=4"}
# the sides of every setting: one per shoal strategy, then Gloo
SIDES=()
for st in $STRATEGIES; do SIDES+=("shoal-${st}"); done
for d in ${DDP_SIDES:-gloo}; do
  case $d in gloo) ;; ddp-shoal | none) SIDES+=("$d");; *) echo "py-ddp-vs-gloo.sh: DDP_SIDES: '$d' is not gloo, ddp-shoal or none" >&2; exit 2;; esac
done
SIDES+=(gloo)
side_args() { # side -> the example's arguments
  case $1 in
    gloo) echo "--backend gloo";;
    ddp-shoal) echo "--backend ddp-shoal";;
    none) echo "--backend none";;
    shoal-*) local st=${1#shoal-} cfg=""
             case $st in *:*) cfg=${st#*:}; st=${st%%:*};; esac
             echo "--backend shoal --sync $st${cfg:+ --config ${cfg//,/;}} $SHOAL_ARGS";;
  esac
}
out=${OUT:-/tmp/shoal-py-bench}; mkdir -p "$out"; rm -f "$out"/*.log
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 SHOAL_LIBRARY=$build/libshoal.so.0
field() { sed -n "s/.*result: .* $1=\([^ ]*\).*/\1/p" "$2" | tail -1; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (!NR) print "none"; else if (NR % 2) print v[(NR + 1) / 2];
                           else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

tb=""
LOAD=${LOAD:-0}
[[ $LOAD =~ ^[0-9]+$ ]] && [ "$LOAD" -le 16 ] || { echo "py-ddp-vs-gloo.sh: LOAD: '$LOAD' is not 0..16" >&2; exit 2; }
loaders=()
load_start() { local i; for ((i = 0; i < LOAD; i++)); do timeout 600 sh -c 'while :; do :; done' & loaders+=($!); done; }
load_stop() { [ ${#loaders[@]} -eq 0 ] || { kill "${loaders[@]}" 2>/dev/null; wait "${loaders[@]}" 2>/dev/null; loaders=(); } || true; }
cleanup() { load_stop; [ -n "$tb" ] && "$build/shoal" testbed down --name "$tb" >/dev/null 2>&1; tb=""; }
trap cleanup EXIT
trap 'exit 130' INT TERM
need_hosts=0
for s in $SETTINGS; do
  case $s in tb:*x*) h=${s#tb:}; h=${h%x*}; [ "$h" -gt "$need_hosts" ] && need_hosts=$h;; esac
done
tb_skip=""
if [ "$need_hosts" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then tb_skip="not root (the testbed needs network namespaces)"
  else
    tb=${TESTBED:-pyb$(( $$ % 100000 ))}
    "$build/shoal" testbed up --name "$tb" --hosts "$need_hosts" --rate "$RATE" >"$out/testbed.log" 2>&1 ||
      { tb_skip="testbed up failed: $(tail -1 "$out/testbed.log")"; tb=""; }
  fi
fi

echo "# PyTorch Fashion-MNIST $MODEL, batch $BATCH per rank, $EPOCHS epochs, target $TARGET, $REPS alternating pairs;" \
     "$([ "$LOAD" -gt 0 ] && echo "$LOAD busy loops beside every run; ")$(date -u +%Y-%m-%dT%H:%MZ), $(getconf _NPROCESSORS_ONLN) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "setting,side,rep,samples_per_s,time_to_target_s,final_acc,load1" >"$out/runs.csv"
printf "# %-20s %-24s %-20s %7s %8s %9s | %7s %7s\n" setting side "samples/s (each run)" median \
  "t_target" final_acc "sps s/g" "tt g/s"
for s in $SETTINGS; do
  case $s in
    1h:*) n=${s#1h:}; where=(); label="1 host, $n ranks";;
    tb:*x*) h=${s#tb:}; k=${h#*x}; h=${h%x*}; n=$((h * k))
            label="$h hosts x $k, $RATE"
            if [ -n "$tb_skip" ]; then echo "  $label: skipped: $tb_skip"; continue; fi
            where=(--testbed "$tb" --per-host "$k" --hosts "$(seq -s, 0 $((h - 1)) | sed 's/[0-9]*/h&/g')");;
    *) echo "py-ddp-vs-gloo.sh: SETTINGS: '$s' is not 1h:N or tb:HxK" >&2; exit 2;;
  esac
  for rep in $(seq 1 "$REPS"); do
    for side in "${SIDES[@]}"; do
      log=$out/${s/:/-}-${side//[:=,]/_}-r$rep.log
      read -r -a sargs <<<"$(side_args "$side")"
      load=$(cut -d' ' -f1 /proc/loadavg)
      load_start
      # bounded: a rank that hangs after rank 0 printed its result (seen with Gloo at teardown) is killed
      # by the launcher's deadline, and the run counts if the result is there
      timeout 330 "$build/shoal" launch --timeout 300 "${where[@]}" -n "$n" -- $PY "$repo/examples/python/fashion_mnist.py" \
        "${sargs[@]}" ${EXTRA_ARGS:-} --model "$MODEL" --batch "$BATCH" --epochs "$EPOCHS" --target "$TARGET" --quiet \
        >"$log" 2>&1 ||
        if [ -n "$(field samples_per_s "$log")" ]; then echo "  ($s $side run $rep: a rank did not exit cleanly after the result; see $log)" >&2
        else echo "run failed: $log" >&2; tail -20 "$log" >&2; exit 1; fi
      load_stop
      echo "$s,$side,$rep,$(field samples_per_s "$log"),$(field time_to_target_s "$log"),$(field final_acc "$log"),$load" \
        >>"$out/runs.csv"
    done
  done
  col() { awk -F, -v s="$s" -v d="$1" -v c="$2" '$1 == s && $2 == d { print $c }' "$out/runs.csv"; }
  gloo_sps=$(col gloo 4 | median); gloo_tt=$(col gloo 5 | { grep -v none || true; } | median)
  for side in "${SIDES[@]}"; do
    sps=$(col "$side" 4 | median); tt=$(col "$side" 5 | { grep -v none || true; } | median)
    r_sps="" r_tt=""
    if [ "$side" != gloo ]; then
      r_sps=x$(awk -v a="$sps" -v b="$gloo_sps" 'BEGIN { printf "%.2f", a / b }')
      r_tt=$(awk -v a="$tt" -v b="$gloo_tt" 'BEGIN { if (a == "none" || b == "none") print "n/a"; else printf "x%.2f", b / a }')
    fi
    printf "  %-20s %-24s %-20s %7s %8s %9s | %7s %7s\n" "$label" "$side" "$(col "$side" 4 | sed 's/\..*//' | paste -sd' ')" \
      "${sps%.*}" "$tt" "$(col "$side" 6 | median)" "$r_sps" "$r_tt"
  done
  # the limit: no communication at all over Gloo; below the goal no backend can reach the goal here
  if [[ " ${SIDES[*]} " == *" none "* ]]; then
    awk -v a="$(col none 4 | median)" -v b="$gloo_sps" -v l="$label" 'BEGIN { r = a / b
      printf "  %-20s limit x%.2f (no communication / Gloo)%s\n", l, r,
        r < 1.3 ? ": below the 1.3x goal, no backend can reach 1.3x in this setting" : "" }'
  fi
done
cleanup

# The plot: median samples/s per setting, every side side by side.
if command -v gnuplot >/dev/null; then
  awk -F, -v sides="${SIDES[*]}" 'BEGIN { ns = split(sides, sd, " ") } NR > 1 { k = $1 SUBSEP $2; v[k] = v[k] " " $4; if (!($1 in seen)) { seen[$1] = 1; o[++n] = $1 } }
    function med(s,  a, m, i, j, t) { m = split(s, a, " ")
      for (i = 2; i <= m; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
      return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
    END { for (i = 1; i <= n; i++) { line = o[i]; for (k = 1; k <= ns; k++) line = line " " med(v[o[i] SUBSEP sd[k]])
                                      print line } }' \
    "$out/runs.csv" >"$out/medians.dat"
  plot=""
  for k in "${!SIDES[@]}"; do
    case ${SIDES[$k]} in gloo) t="DDP-Gloo";; none) t="no communication (limit)";; ddp-shoal) t="DDP over shoal";; *) t="shoal.ddp (${SIDES[$k]#shoal-})";; esac
    if [ "$k" = 0 ]; then plot="\"$out/medians.dat\" using 2:xtic(1) title \"$t\""
    else plot="$plot, \"\" using $((k + 2)) title \"$t\""; fi
  done
  gnuplot <<EOF
set terminal svg size 640,360 font "sans,11"
set output "$out/py-ddp.svg"
set title "PyTorch $MODEL on Fashion-MNIST, batch $BATCH per rank: median samples/s"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "samples/s"
set yrange [0:*]
set grid ytics
set key left top
plot $plot
EOF
  echo "# plot: $out/py-ddp.svg (1h:N = N ranks on one host, tb:HxK = H emulated hosts x K ranks, links $RATE)"
fi
