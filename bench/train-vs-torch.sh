#!/bin/sh
# shoal train against PyTorch on the CPU, and the accuracy runs of docs/experiments.md.
#
#   bench/train-vs-torch.sh [BUILD] speed      single process and 4-rank BSP vs torch / DDP-Gloo
#   bench/train-vs-torch.sh [BUILD] accuracy   MLP, full Fashion-MNIST, 4 workers: bsp, dssync, ps
#   bench/train-vs-torch.sh [BUILD] ps         async PS against bounded staleness (SSP 1, 2, 4), 3 workers
#                                              (MODEL=mlp|cnn, W workers, EPOCHS)
#                                              (CSV logs + SVG plot in $OUT, default /tmp/shoal-train-bench)
#
# Same MLP (784-512-256-10), same data and normalization, same per-worker batch
# (BATCH, default 64), same SGD (momentum 0.9, wd 5e-4), one thread per process on
# both sides (OPENBLAS_NUM_THREADS=1, torch.set_num_threads(1)), and in the N-rank
# runs every rank pinned the same way on both sides: rank r on the (r mod n)-th CPU
# of the affinity mask (`shoal launch --bind core`, `torch_mlp.py --bind core`).
# EPOCHS (default 3 for speed) and REPS (default 3 alternating pairs) bound the
# runs; besides samples/s the N-rank runs report the training time (evaluation
# excluded) until the first epoch whose test accuracy reaches TARGET (default 0.85). The machine may be shared and has 2 cores: 4 ranks
# oversubscribe it, equally for both sides; timings are noisy, so run the
# anchor (torch) in the same invocation and read the ratios.
set -eu
. "$(dirname "$0")/common.sh"
case ${1:-} in
-h | --help) script_help; exit 0 ;;
speed | accuracy | ps) BUILD=build MODE=$1 ;; # [BUILD] left out
*) BUILD=${1:-build} MODE=${2:-speed} ;;
esac
SHOAL=$BUILD/shoal
PY=/usr/bin/python3
HERE=$(dirname "$0")
OUT=${OUT:-/tmp/shoal-train-bench}
BATCH=${BATCH:-64}
N=${N:-4}
mkdir -p "$OUT"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

# Start N ranks: `shoal launch` when this build has it, else by hand with the
# launcher-neutral variables (what mpirun/srun wrappers and torchrun set).
launch() {
  n=$1; shift
  if "$SHOAL" launch --help >/dev/null 2>&1; then
    "$SHOAL" launch -n "$n" --bind core "$@"
    return
  fi
  port=$($PY -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  pids=""
  r=1
  while [ "$r" -lt "$n" ]; do
    RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" --quiet &
    pids="$pids $!"
    r=$((r + 1))
  done
  rc=0
  RANK=0 WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" || rc=$?
  for p in $pids; do wait "$p" || rc=1; done
  return $rc
}

sps() { sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p' "$1" | tail -1; }
shoal_sps() { # mean samples/s over the epochs in a shoal CSV
  awk -F, 'NR > 1 { s += $10; n++ } END { if (n) printf "%.1f", s / n }' "$1"
}

if [ "$MODE" = speed ]; then
  # REPS alternating pairs (shoal, torch); every pair's ratio is printed, and the
  # best of each side (least disturbed by other load) is compared at the end.
  EPOCHS=${EPOCHS:-3}
  REPS=${REPS:-3}
  TARGET=${TARGET:-0.85}
  # time_s of the first CSV row with test_acc >= TARGET, else "none"
  shoal_ttt() { awk -F, -v t="$TARGET" 'NR > 1 && $9 >= t { print $7; f = 1; exit } END { if (!f) print "none" }' "$1"; }
  torch_ttt() { sed -n 's/.*time_to_target=\([0-9.a-z]*\).*/\1/p' "$1" | tail -1; }
  : > "$OUT/ttt.txt"
  best() { sort -g | tail -1; }
  : > "$OUT/single.txt"
  : > "$OUT/multi.txt"
  rep=1
  while [ "$rep" -le "$REPS" ]; do
    echo "== rep $rep: single process, batch $BATCH, $EPOCHS epoch(s), 1 thread each"
    "$SHOAL" train --model mlp --epochs "$EPOCHS" --batch "$BATCH" --lr 0.05 --csv "$OUT/shoal-1.csv" --label shoal-1
    $PY "$HERE/torch_mlp.py" --epochs "$EPOCHS" --batch "$BATCH" --lr 0.05 | tee "$OUT/torch-1.log"
    echo "$(shoal_sps "$OUT/shoal-1.csv") $(sps "$OUT/torch-1.log")" >> "$OUT/single.txt"
    echo "== rep $rep: $N processes, shoal BSP vs PyTorch DDP (Gloo), batch $BATCH per rank"
    launch "$N" "$SHOAL" train --model mlp --sync bsp --epochs "$EPOCHS" --batch "$BATCH" --lr 0.1 \
      --csv "$OUT/shoal-bsp$N.csv" --label "shoal-bsp$N"
    $PY "$HERE/torch_mlp.py" --epochs "$EPOCHS" --batch "$BATCH" --lr 0.1 --ddp "$N" --bind core \
      --target-acc "$TARGET" | tee "$OUT/torch-ddp$N.log"
    echo "$(shoal_sps "$OUT/shoal-bsp$N.csv") $(sps "$OUT/torch-ddp$N.log")" >> "$OUT/multi.txt"
    echo "$(shoal_ttt "$OUT/shoal-bsp$N.csv") $(torch_ttt "$OUT/torch-ddp$N.log")" >> "$OUT/ttt.txt"
    rep=$((rep + 1))
  done
  echo
  awk '{ printf "RESULT single  rep %d: shoal %8.0f  torch %8.0f samples/s  ratio %.2f\n", NR, $1, $2, $1/$2 }' "$OUT/single.txt"
  awk -v n="$N" '{ printf "RESULT %d-rank  rep %d: shoal-bsp %8.0f  torch-ddp %8.0f samples/s  ratio %.2f\n", n, NR, $1, $2, $1/$2 }' "$OUT/multi.txt"
  awk -v n="$N" -v t="$TARGET" '{ r = ($1 != "none" && $2 != "none") ? sprintf("%.2f", $2 / $1) : "n/a";
    printf "RESULT %d-rank  rep %d: time to %.0f%% test accuracy: shoal-bsp %s s  torch-ddp %s s  speed-up %s\n",
           n, NR, 100 * t, $1, $2, r }' "$OUT/ttt.txt"
  s1=$(cut -d' ' -f1 "$OUT/single.txt" | best); t1=$(cut -d' ' -f2 "$OUT/single.txt" | best)
  sN=$(cut -d' ' -f1 "$OUT/multi.txt" | best); tN=$(cut -d' ' -f2 "$OUT/multi.txt" | best)
  echo "RESULT best single: shoal $s1 / torch $t1 = $(echo "$s1 $t1" | awk '{printf "%.2f", $1/$2}')"
  echo "RESULT best $N-rank: shoal bsp $sN / torch ddp-gloo $tN = $(echo "$sN $tN" | awk '{printf "%.2f", $1/$2}')"
  exit 0
fi

if [ "$MODE" = accuracy ]; then
  EPOCHS=${EPOCHS:-12}
  common="--model mlp --epochs $EPOCHS --batch $BATCH --lr 0.1 --warmup 100 --decay-epochs 8,11"
  launch "$N" "$SHOAL" train $common --sync bsp --csv "$OUT/bsp.csv" --label "bsp ($N workers)"
  launch "$N" "$SHOAL" train $common --sync dssync --ds-pattern butterfly --ds-k 2 --csv "$OUT/dssync.csv" \
    --label "dssync butterfly k=2"
  launch $((N + 1)) "$SHOAL" train $common --sync ps --servers 1 --ps-mode sync --csv "$OUT/ps.csv" \
    --label "ps sync (1 server)"
  "$SHOAL" train --plot "$OUT/accuracy.svg" --title "MLP on Fashion-MNIST, $N workers" \
    "$OUT/bsp.csv" "$OUT/dssync.csv" "$OUT/ps.csv"
  for f in bsp dssync ps; do
    tail -1 "$OUT/$f.csv" | awk -F, -v f=$f '{ printf "RESULT %-7s epoch %s  test acc %.2f%%  time %.1f s\n", f, $5, 100*$9, $7 }'
  done
  exit 0
fi
if [ "$MODE" = ps ]; then
  # Asynchronous parameter servers: unbounded async against bounded staleness (SSP),
  # W workers (default 3) + 1 server, the accuracy setup above.
  EPOCHS=${EPOCHS:-12}
  W=${W:-3}
  MODEL=${MODEL:-mlp}
  common="--model $MODEL --epochs $EPOCHS --batch $BATCH --lr 0.1 --warmup 100 --decay-epochs 8,11 --sync ps --servers 1"
  for cfg in "async" "ssp 1" "ssp 2" "ssp 4"; do
    set -- $cfg
    tag=$1${2:-}
    launch $((W + 1)) "$SHOAL" train $common --ps-mode "$1" ${2:+--staleness $2} --csv "$OUT/ps-$tag.csv" \
      --label "ps $cfg ($W workers $MODEL)" | tee "$OUT/ps-$tag.log"
  done
  for cfg in async ssp1 ssp2 ssp4; do
    st=$(sed -n 's/.*largest staleness applied \([0-9]*\).*/\1/p' "$OUT/ps-$cfg.log" | sort -n | tail -1)
    fin=$(sed -n 's/.*final model (global average): test acc \([0-9.]*\)%.*/\1/p' "$OUT/ps-$cfg.log" | tail -1)
    tail -1 "$OUT/ps-$cfg.csv" | awk -F, -v f="$cfg" -v st="$st" -v fin="$fin" \
      -v m="$MODEL" '{ printf "RESULT %s ps %-6s epoch %s  test acc (average model) %.2f%%  final model %s%%  max staleness %s  time %.1f s\n", m, f, $5, 100*$9, fin, st, $7 }'
  done
  exit 0
fi
echo "usage: $0 [BUILD] speed|accuracy|ps" >&2
exit 2
