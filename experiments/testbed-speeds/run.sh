#!/usr/bin/env bash
# Measured speeds for the simulator: iteration time of `shoal train` (bsp,
# Fashion-MNIST, MLP and CNN, batch 64 per worker) per placement and worker
# count on an emulated cluster of 4 hosts in 2 racks (`shoal testbed`, host
# links RATE, uplinks oversubscribed 2:1), written as a Gavel-style
# throughputs.json that `shoal sim --speed table` reads:
#   "testbed"                   one host (consolidated)             W = 1, 2, 4, 8
#   "testbed_unconsolidated"    two hosts in one rack (h0,h1)       W = 2, 4, 8
#   "testbed-xrack"             one host (same numbers as above)
#   "testbed-xrack_unconsolidated"  two hosts in different racks (h0,h2)
# Each entry: {"null": worker-steps/s} = W x global iterations/s (samples/s / 64), as
# Gavel's table grows with the scale factor. Then a short `shoal sim` run on it.
#   experiments/testbed-speeds/run.sh [--build DIR] [--rate 1gbit] [--iters N] [--models "mlp cnn"] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build rate=1gbit iters=40 models="mlp cnn" out="" name=ex4
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
S=$PWD/$build/shoal
[ -x "$S" ] || { echo "run.sh: $S not built" >&2; exit 2; }
out=${out:-$build/experiments/testbed-speeds}
mkdir -p "$out"
trap '"$S" testbed down --name "$name" >/dev/null 2>&1 || true' EXIT
"$S" testbed down --name "$name" >/dev/null 2>&1 || true
"$S" testbed up --name "$name" --hosts 4 --racks 2 --rate "$rate" --oversub 2
echo "# testbed-speeds: $(date -u +%FT%TZ), $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
res=$out/results.csv
echo "model,placement,workers,iters,time_s,iter_ms,worker_steps_per_s,compute_s,comm_s" >"$res"
run() { # model placement W hosts per_host
  local m=$1 pl=$2 W=$3 hosts=$4 ph=$5 csv=$out/$1-$2-$3.csv
  rm -f "$csv"
  timeout 300 "$S" launch --testbed "$name" --hosts "$hosts" -n "$W" --per-host "$ph" --timeout 280 -- \
    "$S" train --model "$m" --sync bsp --epochs 1 --batch 64 --train-subset $((64 * W * iters)) --test-subset 500 \
    --csv "$csv" --label "$m-$pl-$W" --quiet >"$out/$m-$pl-$W.log" 2>&1 || { echo "# $m $pl W=$W failed (see $out/$m-$pl-$W.log)" >&2; return; }
  # label,model,sync,workers,epoch,iters,time_s,train_loss,test_acc,samples_per_s,compute_s,comm_s,...
  tail -1 "$csv" | awk -F, -v m="$m" -v pl="$pl" -v W="$W" '{ printf "%s,%s,%d,%d,%.3f,%.2f,%.3f,%.3f,%.3f\n",
    m, pl, W, $6, $7, 1000 * $7 / $6, W * $6 / $7, $11, $12 }' >>"$res"
  tail -1 "$res" >&2
}
for m in $models; do
  for W in 1 2 4 8; do run "$m" onehost "$W" h0 "$W"; done
  for W in 2 4 8; do run "$m" rack "$W" h0,h1 $((W / 2)); done
  for W in 2 4 8; do run "$m" xrack "$W" h0,h2 $((W / 2)); done
done
echo
column -s, -t "$res"
# Gavel-style JSON: ('shoal-<model> (batch size 64)', W) -> {"null": worker-steps/s}
awk -F, 'NR > 1 { v[$2, $1, $3] = $7; ms[$1] = 1 }
  function block(key, pl,   first, m, W) {
    printf "  \"%s\": {\n", key; first = 1
    for (m in ms) for (W = 1; W <= 8; W *= 2) if ((pl, m, W) in v) {
      printf "%s    \"(\x27shoal-%s (batch size 64)\x27, %d)\": {\"null\": %s}", first ? "" : ",\n", m, W, v[pl, m, W]; first = 0 }
    printf "\n  }"
  }
  END { print "{"; block("testbed", "onehost"); print ","; block("testbed_unconsolidated", "rack"); print ",";
        block("testbed-xrack", "onehost"); print ","; block("testbed-xrack_unconsolidated", "xrack"); print "\n}" }' \
  "$res" >"$out/throughputs.json"
echo "# wrote $out/throughputs.json"
# the simulator on the measured numbers: 4 machines x 8 slots, 2 racks
for g in testbed testbed-xrack; do
  timeout 300 "$S" sim --synthetic 60 --load 0.7 --machines 4 --gpus-per-machine 8 --racks 2 --speed table \
    --throughputs "$out/throughputs.json" --gpu "$g" --policy fifo,tiresias --out "$out/sim-$g" --no-progress 2>&1 |
    tail -6 | sed "s/^/[sim $g] /"
done
