#!/usr/bin/env bash
# DS-Sync under a rack bottleneck: 8 emulated hosts in 2 racks (`shoal testbed`),
# rack uplinks oversubscribed 4:1, one worker per host; Fashion-MNIST test
# accuracy against wall time for bsp, ps (7 workers + 1 server on h7) and dssync
# (random, butterfly, topo), each run bounded by --budget seconds; plots with
# `shoal train --plot`, and the time to the target accuracy per strategy.
#   experiments/testbed-dssync/run.sh [--build DIR] [--rate 200mbit] [--models "mlp cnn"] [--epochs E]
#        [--strategies "bsp ps random butterfly topo"] [--budget S] [--target 0.88] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build rate=200mbit models="mlp cnn" epochs=8 strategies="bsp ps random butterfly topo" budget=400 target=0.88 \
  out="" name=ex3
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --strategies) strategies=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
S=$PWD/$build/shoal
[ -x "$S" ] || { echo "run.sh: $S not built" >&2; exit 2; }
out=${out:-$build/experiments/testbed-dssync}
mkdir -p "$out"
trap '"$S" testbed down --name "$name" >/dev/null 2>&1 || true' EXIT
"$S" testbed down --name "$name" >/dev/null 2>&1 || true
"$S" testbed up --name "$name" --hosts 8 --racks 2 --rate "$rate" --oversub 4
echo "# testbed-dssync: $(date -u +%FT%TZ), $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# 8 hosts x 1 worker, 2 racks, host links $rate, uplinks 4:1; $epochs epochs or $budget s per run"
common=(--epochs "$epochs" --batch 64 --lr 0.1 --warmup 100 --quiet)
for m in $models; do
  for st in $strategies; do
    case $st in
      bsp) sync=(--sync bsp) ;;
      ps) sync=(--sync ps --servers 1) ;;
      *) sync=(--sync dssync --ds-pattern "$st" --racks 0,0,0,0,1,1,1,1) ;;
    esac
    csv=$out/$m-$st.csv; rm -f "$csv"
    echo "# $m $st ..." >&2
    SHOAL_DEBUG=${SHOAL_DEBUG:-WARN} timeout $((budget + 30)) "$S" launch --testbed "$name" -n 8 --per-host 1 \
      --timeout "$budget" -- "$S" train --model "$m" "${sync[@]}" "${common[@]}" --csv "$csv" --label "$m-$st" \
      >"$out/$m-$st.log" 2>&1 || echo "# $m $st ended early (budget or error; see $out/$m-$st.log)" >&2
  done
  "$S" train --plot "$out/$m.svg" --title "$m on 8 hosts, 2 racks, $rate links, 4:1 uplinks" "$out"/$m-*.csv >/dev/null 2>&1 || true
  echo
  echo "## $m: time to ${target} test accuracy and final accuracy (CSV: label,...,epoch,iters,time_s,loss,test_acc,...)"
  for st in $strategies; do
    f=$out/$m-$st.csv
    [ -s "$f" ] || { echo "$st: no result"; continue; }
    awk -F, -v t="$target" -v st="$st" 'NR > 1 { if (!hit && $9 >= t) { hit = $7 } last = $9; tm = $7; ep = $5; cm = $12; cp = $11 }
      END { printf "%-10s time-to-%.2f %8s s   final acc %.4f after %d epochs, %.1f s (compute %.1f s, comm %.1f s per worker)\n",
            st, t, hit ? sprintf("%.1f", hit) : "never", last, ep, tm, cp, cm }' "$f"
  done
done
