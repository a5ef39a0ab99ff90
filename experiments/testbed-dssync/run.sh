#!/usr/bin/env bash
# DS-Sync under a rack bottleneck: 8 emulated hosts in 2 racks (`shoal testbed`),
# rack uplinks oversubscribed 4:1, one worker per host; Fashion-MNIST test
# accuracy against wall time for every strategy. One invocation runs the given
# strategies of one model (keep each under ~30 min: one strategy per locked run),
# then `--report` prints the table and draws the plot from the CSVs.
#
#   experiments/testbed-dssync/run.sh --model mlp|cnn --strategies "bsp ..." [--rate R]
#        [--epochs 8] [--batch 32] [--lr 0.1] [--warmup 100] [--decay 5,7] [--budget S]
#        [--name ds] [--build DIR] [--out DIR] [--variant V --train-args "..."]
#   experiments/testbed-dssync/run.sh --report [--model mlp|cnn] [--target 0.88] [--out DIR]
#
# strategies: bsp        shoal's bsp, the communicator's automatic algorithm choice priced on the
#                        link matrix it measures at start (SHOAL_TUNE=init; without a profile the
#                        choice follows the built-in model, which picks rhd here)
#             bsp-ring   bsp with the ring forced (SHOAL_ALGO=ring): the best flat algorithm here
#             ps         8 workers + 8 parameter-server shards, one of each per host (--place rr)
#             random, butterfly, topo           dssync, k = 2, overlapped (--ds-overlap)
#             topo-sync  dssync topo without overlap (average after the step)
#             --variant V: the runs are named STRATEGY-V and get --train-args appended (e.g.
#             --variant h2 --train-args "--bridge-period 2"); --report lists them after the others
# Default link rates: mlp 200mbit, cnn 12mbit (communication 20-40x the compute of an iteration for both).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build model=mlp rate="" epochs=8 batch=32 lr=0.1 warmup=100 decay=5,7 strategies="" budget=1700
target=0.88 out=experiments/testbed-dssync/results name=ds report=0 variant="" train_args=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --lr) lr=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --decay) decay=$2; shift 2 ;;
    --strategies) strategies=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --report) report=1; shift ;;
    --variant) variant=$2; shift 2 ;;
    --train-args) train_args=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
case $model in mlp) rate=${rate:-200mbit} ;; cnn) rate=${rate:-12mbit} ;;
  *) echo "run.sh: --model $model: expected mlp or cnn" >&2; exit 2 ;; esac
S=$PWD/$build/shoal
[ -x "$S" ] || { echo "run.sh: $S not built (make -j2)" >&2; exit 2; }
mkdir -p "$out"

# ---- report: time to target, final accuracy, per-iteration times, plot ----
if [ "$report" = 1 ]; then
  echo "## $model: time to $target test accuracy (end of the first epoch at or above it) and final accuracy"
  printf "%-10s %9s %10s %8s %9s %9s %9s %9s  %s\n" strategy "t-to-$target" "vs bsp" "final" "epochs" "time_s" \
    "iter_ms" "comp_ms" "comm_ms / load at start, end"
  csvs=()
  for f in "$out/$model"-*.csv; do
    [ -s "$f" ] || continue
    csvs+=("$f")
  done
  [ ${#csvs[@]} -gt 0 ] || { echo "no CSV in $out for $model" >&2; exit 1; }
  tb=$(awk -F, -v t="$target" 'NR > 1 && $9 >= t { print $7; exit }' "$out/$model-bsp.csv" 2>/dev/null || true)
  named=(bsp bsp-ring ps random butterfly topo topo-sync)
  others=()
  for f in "${csvs[@]}"; do
    st=$(basename "$f" .csv); st=${st#"$model"-}
    [[ " ${named[*]} " == *" $st "* ]] || others+=("$st")
  done
  for st in "${named[@]}" "${others[@]}"; do
    f=$out/$model-$st.csv
    [ -s "$f" ] || continue
    load=$(sed -n 's/^# load //p' "$out/$model-$st.meta" 2>/dev/null | tr '\n' ' ')
    awk -F, -v t="$target" -v st="$st" -v tb="$tb" -v load="$load" '
      NR > 1 { if (hit == "" && $9 >= t) hit = $7; last = $9; tm = $7; ep = $5; it = $6; cp = $11; cm = $12 }
      END { r = (hit != "" && tb != "") ? sprintf("%.2fx", hit / tb) : "-"
            printf "%-10s %9s %10s %7.2f%% %9d %9.1f %9.1f %9.2f %9.1f  %s\n", st, hit == "" ? "never" : hit, r,
                   100 * last, ep, tm, 1000 * tm / it, 1000 * cp / it, 1000 * cm / it, load }' "$f"
  done
  echo "(vs bsp: time to target over bsp's; iter_ms = training time / iterations; comp_ms and comm_ms: per-worker"
  echo " means per iteration, comm = time blocked in communication, compute = the rest of the step)"
  "$S" train --plot "docs/figures/testbed-dssync-$model.svg" --title \
    "$model on 8 hosts in 2 racks, $rate host links, 4:1 uplinks" "${csvs[@]}" >/dev/null
  echo "# plot: docs/figures/testbed-dssync-$model.svg"
  exit 0
fi

[ -n "$strategies" ] || { echo "run.sh: --strategies is required (one per locked run keeps it short)" >&2; exit 2; }
trap '"$S" testbed down --name "$name" >/dev/null 2>&1 || true' EXIT
"$S" testbed down --name "$name" >/dev/null 2>&1 || true
"$S" testbed up --name "$name" --hosts 8 --racks 2 --rate "$rate" --oversub 4 >/dev/null
common=(train --model "$model" --epochs "$epochs" --batch "$batch" --lr "$lr" --warmup "$warmup" --decay-epochs "$decay")
racks=0,0,0,0,1,1,1,1
for st in $strategies; do
  env=() place=(-n 8 --per-host 1)
  case $st in
    bsp) sync=(--sync bsp); env=(SHOAL_TUNE=init) ;;
    bsp-ring) sync=(--sync bsp); env=(SHOAL_ALGO=ring) ;;
    ps) sync=(--sync ps --servers 8); place=(-n 16 --per-host 2 --place rr) ;;
    random|butterfly) sync=(--sync dssync --ds-pattern "$st" --ds-overlap) ;;
    topo) sync=(--sync dssync --ds-pattern topo --racks "$racks" --ds-overlap) ;;
    topo-sync) sync=(--sync dssync --ds-pattern topo --racks "$racks") ;;
    *) echo "run.sh: unknown strategy '$st'" >&2; exit 2 ;;
  esac
  label=$st${variant:+-$variant}
  base=$out/$model-$label
  rm -f "$base.csv" "$base.il.csv"*
  read -r -a extra <<< "$train_args"
  cmd=("$S" launch --testbed "$name" "${place[@]}" --timeout "$budget" -- "$S" "${common[@]}" "${sync[@]}" "${extra[@]}" \
    --csv "$base.csv" --label "$label" --iter-log "$base.il.csv")
  {
    echo "# $(date -u +%FT%TZ) $(getconf _NPROCESSORS_ONLN) cores; testbed $name: 8 hosts, 2 racks, $rate, 4:1"
    echo "# load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# ${env[*]} ${cmd[*]}"
  } >"$base.meta"
  echo "# $model $label ..." >&2
  t0=$(date +%s)
  env "${env[@]}" SHOAL_DEBUG=${SHOAL_DEBUG:-WARN} timeout $((budget + 60)) "${cmd[@]}" >"$base.log" 2>&1 ||
    echo "# $model $label ended early (budget or error; see $base.log)" | tee -a "$base.meta" >&2
  { echo "# load $(cut -d' ' -f1-3 /proc/loadavg)"; echo "# wall $(( $(date +%s) - t0 )) s"; } >>"$base.meta"
  # per-iteration logs are large: keep rank 0's summary only
  awk -F, 'NR > 1 { n++; c += $4; s += $5; g[$3]++ } END { printf "# rank 0: %d iterations, mean compute %.2f ms, sync %.2f ms; group sizes:", n, c / n, s / n; for (k in g) printf " %s x%d", k, g[k]; print "" }' \
    "$base.il.csv" >>"$base.meta" 2>/dev/null || true
  rm -f "$base.il.csv"*
  tail -4 "$base.meta" >&2
done
