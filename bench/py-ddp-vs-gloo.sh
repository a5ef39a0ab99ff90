#!/usr/bin/env bash
# End-to-end PyTorch training with shoal's Python binding (shoal.ddp, BSP through include/shoal/sync.h)
# against torch.nn.parallel.DistributedDataParallel over Gloo: the same script
# (examples/python/fashion_mnist.py), model, data, per-rank batch, SGD schedule, bucket size, one torch
# thread per rank, and the same launcher and CPU pinning (`shoal launch`, --bind auto) on both sides.
#
#   bench/py-ddp-vs-gloo.sh [BUILD]        env: RANKS="2 4" EPOCHS=3 REPS=2 TARGET=0.85 BATCH=64 MODEL=mlp
#
# REPS alternating pairs per rank count; each side's best samples/s and best time to TARGET test
# accuracy are compared (the VM is shared: the best run is the least disturbed one). Ratios > 1 favour
# shoal. One host only: the emulated multi-host testbed is not part of this script.
set -euo pipefail
build=${1:-build}
repo=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
RANKS=${RANKS:-"2 4"} EPOCHS=${EPOCHS:-3} REPS=${REPS:-2} TARGET=${TARGET:-0.85} BATCH=${BATCH:-64} MODEL=${MODEL:-mlp}
out=${OUT:-/tmp/shoal-py-bench}; mkdir -p "$out"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 SHOAL_LIBRARY=$(cd "$build" && pwd)/libshoal.so.0
field() { sed -n "s/.*result: .* $1=\([^ ]*\).*/\1/p" "$2" | tail -1; }
free_port() { $PY -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
echo "# PyTorch Fashion-MNIST $MODEL, batch $BATCH per rank, $EPOCHS epochs, target $TARGET; best of $REPS alternating pairs"
printf "# %5s %-6s %12s %12s %10s %12s\n" ranks side samples/s "t_target(s)" final_acc ratio
for n in $RANKS; do
  for rep in $(seq 1 "$REPS"); do
    for side in shoal gloo; do
      log=$out/$side-n$n-r$rep.log
      timeout 900 "$build/shoal" launch -n "$n" -- $PY "$repo/examples/python/fashion_mnist.py" --backend "$side" \
        --model "$MODEL" --batch "$BATCH" --epochs "$EPOCHS" --target "$TARGET" --gloo-port "$(free_port)" --quiet \
        >"$log" 2>&1 || { echo "run failed: $log" >&2; tail -20 "$log" >&2; exit 1; }
    done
  done
  best_sps() { for f in "$out"/$1-n$n-r*.log; do field samples_per_s "$f"; done | sort -g | tail -1; }
  best_tt() { for f in "$out"/$1-n$n-r*.log; do field time_to_target_s "$f"; done | grep -v none | sort -g | head -1; }
  accs() { for f in "$out"/$1-n$n-r*.log; do field final_acc "$f"; done | paste -sd/; }
  s_sps=$(best_sps shoal); g_sps=$(best_sps gloo); s_tt=$(best_tt shoal); g_tt=$(best_tt gloo)
  ratio=$(awk -v a="$s_sps" -v b="$g_sps" 'BEGIN { printf "%.2f", a / b }')
  tratio=$( [ -n "$s_tt" ] && [ -n "$g_tt" ] && awk -v a="$s_tt" -v b="$g_tt" 'BEGIN { printf "%.2f", b / a }' || echo "n/a")
  printf "  %5d %-6s %12s %12s %10s %12s\n" "$n" shoal "$s_sps" "${s_tt:-none}" "$(accs shoal)" "x$ratio"
  printf "  %5d %-6s %12s %12s %10s %12s\n" "$n" gloo "$g_sps" "${g_tt:-none}" "$(accs gloo)" ""
  echo "ratio n=$n: samples/s shoal/gloo $ratio (goal >= 1.3); time to $TARGET gloo/shoal $tratio"
done
