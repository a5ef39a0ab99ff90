#!/usr/bin/env bash
# Measured speeds for the simulator: iteration time of `shoal train` (bsp,
# Fashion-MNIST, batch 64 per worker) per placement and worker count on an
# emulated cluster of 4 hosts in 2 racks (`shoal testbed`: host links RATE,
# rack uplinks oversubscribed 4:1, i.e. RATE/2 for the 2 hosts of a rack), written
# as the Gavel-style throughputs.json that `shoal sim --speed table` reads
# (src/sched/model/speed_table.c):
#   "testbed"                       one host (consolidated)          W = 1, 2, 4, 8
#   "testbed_unconsolidated"        two hosts in one rack (h0,h1)    W = 2, 4, 8
#   "testbed-xrack"                 one host (same numbers as above)
#   "testbed-xrack_unconsolidated"  two hosts in different racks (h0,h2)
# Each entry: {"null": worker-steps/s} = W x 1000 / (median iteration ms), the
# median over rank 0's iterations after the first WARM (per-iteration log).
# One invocation measures the given models and appends to results.csv; the
# JSON and a short `shoal sim` run on it come from every row in results.csv.
#   experiments/testbed-speeds/run.sh [--build DIR] [--rate 1gbit] [--iters 200] [--warm 20]
#        [--models "mlp cnn"] [--out DIR] [--name sp] [--fresh]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build rate=1gbit iters=200 warm=20 models="mlp cnn" out=experiments/testbed-speeds name=sp fresh=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warm) warm=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --fresh) fresh=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
S=$PWD/$build/shoal
[ -x "$S" ] || { echo "run.sh: $S not built" >&2; exit 2; }
mkdir -p "$out"
tmp=$(mktemp -d /tmp/shoal-speeds.XXXXXX)
trap '"$S" testbed down --name "$name" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
"$S" testbed down --name "$name" >/dev/null 2>&1 || true
"$S" testbed up --name "$name" --hosts 4 --racks 2 --rate "$rate" --oversub 4 >/dev/null
res=$out/results.csv
hdr="model,placement,workers,iters,iter_ms_median,iter_ms_p90,worker_steps_per_s,compute_ms,comm_ms,load_start,load_end"
if [ "$fresh" = 1 ] || [ ! -s "$res" ]; then echo "$hdr" >"$res"; fi
echo "# testbed-speeds: $(date -u +%FT%TZ), $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg);" \
  "4 hosts, 2 racks, $rate host links, uplinks 4:1" >&2
run() { # model placement W hosts per_host
  local m=$1 pl=$2 W=$3 hosts=$4 ph=$5 il=$tmp/$1-$2-$3.il.csv
  local l0; l0=$(cut -d' ' -f1 /proc/loadavg)
  sed -i "/^$m,$pl,$W,/d" "$res"
  timeout 300 "$S" launch --testbed "$name" --hosts "$hosts" -n "$W" --per-host "$ph" --timeout 280 -- \
    "$S" train --model "$m" --sync bsp --epochs 4 --batch 64 --max-iters "$iters" --test-subset 500 \
    --iter-log "$il" --quiet >"$tmp/log" 2>&1 || { echo "# $m $pl W=$W failed:" >&2; tail -5 "$tmp/log" >&2; return; }
  # iter,epoch,group_size,compute_ms,sync_ms,...: median and p90 of compute+sync after the warm-up
  awk -F, -v w="$warm" 'NR > 1 && $1 >= w { print $4 + $5, $4, $5 }' "$il" | sort -n | awk -v m="$m" -v pl="$pl" \
    -v W="$W" -v l0="$l0" -v l1="$(cut -d' ' -f1 /proc/loadavg)" '
    { t[NR] = $1; c += $2; s += $3 }
    END { med = t[int((NR + 1) / 2)]; p90 = t[int(0.9 * NR + 0.5)]
          printf "%s,%s,%d,%d,%.2f,%.2f,%.3f,%.2f,%.2f,%s,%s\n", m, pl, W, NR, med, p90, W * 1000 / med, c / NR, s / NR, l0, l1 }' >>"$res"
  tail -1 "$res" >&2
}
for m in $models; do
  for W in 1 2 4 8; do run "$m" onehost "$W" h0 "$W"; done
  for W in 2 4 8; do run "$m" rack "$W" h0,h1 $((W / 2)); done
  for W in 2 4 8; do run "$m" xrack "$W" h0,h2 $((W / 2)); done
done
echo
{ head -1 "$res"; tail -n +2 "$res" | sort -t, -k1,1 -k2,2 -k3,3n; } | column -s, -t
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
# the simulator on the measured numbers: 4 machines x 8 slots, 2 racks, 300 Poisson arrivals offered at
# 1.2x the cluster (jobs queue, so policies and placement classes differ), once per placement class
for g in testbed testbed-xrack; do
  timeout 300 "$S" sim --synthetic 300 --load 1.2 --arrivals poisson --machines 4 --gpus-per-machine 8 --racks 2 \
    --speed table --throughputs "$out/throughputs.json" --gpu "$g" --policy fifo,tiresias,gavel --no-progress 2>&1 |
    grep -E '^(policy|fifo|tiresias|gavel)|warning' | sed "s/^/[sim $g] /"
done
