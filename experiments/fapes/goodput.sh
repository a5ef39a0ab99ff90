#!/usr/bin/env bash
# Goodput of the MLP on Fashion-MNIST per (workers n, batch per worker b) on the testbed: throughput(n, b)
# measured (samples/s over the median iteration of a short BSP run, one worker per emulated host), the
# gradient noise scale measured by `shoal train --gns-every` over two epochs at the base batch, and
# goodput = throughput x Pollux's statistical efficiency (gns + M0) / (gns + n b), M0 = the base batch.
# Prints one row per (n, b) and writes $out/goodput.csv.
#   experiments/fapes/goodput.sh [--build DIR] [--workers "1 2 3"] [--batches "32 64 128 256"] [--m0 64]
#        [--iters 60] [--out DIR] [--name srv2]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build workers="1 2 3" batches="32 64 128 256" m0=64 iters=60 out="" name=srv2
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --m0) m0=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "goodput.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
S=$PWD/$build/shoal
[ -x "$S" ] || { echo "goodput.sh: $S not built" >&2; exit 2; }
out=${out:-$build/experiments/fapes-goodput}
mkdir -p "$out"
trap '"$S" testbed down --name "$name" >/dev/null 2>&1 || true' EXIT
"$S" testbed down --name "$name" >/dev/null 2>&1 || true
max=0; for n in $workers; do [ "$n" -gt "$max" ] && max=$n; done
"$S" testbed up --name "$name" --hosts "$max" --racks 1 --rate 1gbit >/dev/null
# the noise scale at the base batch (one process: the small batch is half of it)
"$S" train --model mlp --batch "$m0" --epochs 2 --lr 0.05 --gns-every 5 --csv "$out/gns.csv" --quiet
gns=$(tail -n 1 "$out/gns.csv" | awk -F, '{print $NF}')
echo "gradient noise scale after 2 epochs at batch $m0: $gns"
echo "n,b,M,samples_per_s,efficiency,goodput" >"$out/goodput.csv"
printf '%3s %5s %6s %12s %10s %12s\n' n b M samples/s efficiency goodput
for n in $workers; do
  for b in $batches; do
    log=$out/n$n-b$b.ilog
    "$S" launch --testbed "$name" -n "$n" --per-host 1 -- "$S" train --model mlp --batch "$b" --epochs 1 \
      --max-iters "$iters" --lr 0.05 --quiet --iter-log "$log" >/dev/null
    # the median iteration (compute + exposed communication) of the second half
    python3 - "$log" "$n" "$b" "$gns" "$m0" <<'PY' | tee -a "$out/goodput.csv" |
import csv, statistics, sys
log, n, b, g, m0 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
t = [float(r["compute_ms"]) + float(r["sync_ms"]) for r in csv.DictReader(open(log))]
med = statistics.median(t[len(t) // 2:])
sps, M = n * b / (med / 1e3), n * b
eff = (g + m0) / (g + M) if g > 0 else 1.0
print(f"{n},{b},{M},{sps:.0f},{eff:.3f},{sps * eff:.0f}")
PY
      awk -F, '{ printf "%3d %5d %6d %12.0f %10.3f %12.0f\n", $1, $2, $3, $4, $5, $6 }'
  done
done
