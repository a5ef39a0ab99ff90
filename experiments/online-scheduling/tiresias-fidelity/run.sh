#!/usr/bin/env bash
# shoal sim against the Tiresias authors' simulator, job for job, FIFO and SRTF, on the same model: GPU counting
# only (their --scheme=count; for shoal a cluster on which spreading a job over machines costs nothing: equal
# 400 Gbit/s links, zero latencies, one rack) and no restart cost. Their `fifo` is shoal's `fifo:strict=1`,
# their `fjf` shoal's `fifo`, their `shortest` shoal's `srtf`. Workloads: their 60_job.csv on n32g4 (their
# reference; nothing queues there), on 4 x 4 and 2 x 4 GPUs (contended), and three windows of the Philly trace
# (days 20-25 and 30-32 on 32 x 8, days 46-54 on 80 x 8). Prints one line per comparison: jobs with identical
# JCT (1e-6 relative), jobs that differ, the largest difference.
#
#   TIRESIAS=/path/to/Tiresias/simulator experiments/online-scheduling/tiresias-fidelity/run.sh [OUT]
#
# TIRESIAS: the simulator/ directory of https://github.com/SymbioticLab/Tiresias (run_sim.py, 60_job.csv);
# it is copied to OUT and run with python3 after one mechanical change (sys.maxint -> sys.maxsize); numpy is
# needed. About 5 minutes on 2 busy cores (their simulator: 4-85 s a run; shoal: under 0.2 s).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
: "${TIRESIAS:?set TIRESIAS to the simulator/ directory of SymbioticLab/Tiresias}"
[ -f "$TIRESIAS/run_sim.py" ] || { echo "run.sh: $TIRESIAS/run_sim.py not found (TIRESIAS must be their simulator/ directory)" >&2; exit 2; }
S=$root/build/shoal; [ -x "$S" ] || { echo "run.sh: $S not built (make)" >&2; exit 2; }
PY=${PYTHON:-/usr/bin/python3}
"$PY" -c 'import numpy' 2>/dev/null || { echo "run.sh: $PY has no numpy (apt-get install python3-numpy)" >&2; exit 2; }
philly=${PHILLY:-$root/../shared/data/philly/philly.csv}
[ -f "$philly" ] || { echo "run.sh: $philly not found (set PHILLY)" >&2; exit 2; }
O=${1:-$(mktemp -d /tmp/tiresias-fidelity.XXXXXX)}
T=$O/tiresias; C=$O/conv; mkdir -p "$T" "$C"
cp -r "$TIRESIAS"/. "$T"/
sed -i 's/sys\.maxint/sys.maxsize/g' "$T"/*.py
ini() { printf '[cluster]\nmachines = %d\ngpus_per_machine = %d\nracks = 1\nnic_gbps = 400\nintra_gbps = 400\nalpha_intra_us = 0\nalpha_inter_us = 0\n' "$1" "$2" > "$C/n$1g$2.ini"; }
spec() { printf 'num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,%d,%d,%d,%d\n' "$1" "$2" "$3" "$4" > "$T/$5.csv"; }
ini 32 4; ini 4 4; ini 2 4; ini 32 8; ini 80 8
spec 4 4 40 256 n4g4; spec 2 4 40 256 n2g4; spec 32 8 80 1024 n32g8big; spec 80 8 80 1024 n80g8big
"$PY" "$here/tir2shoal.py" "$T/60_job.csv" "$C/60.csv"
for w in "20 25 ph20" "30 32 ph30" "46 54 ph46"; do
  set -- $w
  "$PY" "$here/philly2tir.py" "$philly" $(($1 * 86400)) $(($2 * 86400)) "$C/$3_tir.csv" > /dev/null
  "$PY" "$here/tir2shoal.py" "$C/$3_tir.csv" "$C/$3.csv"
done
for w in "60 $T/60_job.csv $C/60.csv n32g4 n32g4" "60 $T/60_job.csv $C/60.csv n4g4 n4g4" "60 $T/60_job.csv $C/60.csv n2g4 n2g4" \
         "ph20 $C/ph20_tir.csv $C/ph20.csv n32g8big n32g8" "ph30 $C/ph30_tir.csv $C/ph30.csv n32g8big n32g8" \
         "ph46 $C/ph46_tir.csv $C/ph46.csv n80g8big n80g8"; do
  set -- $w; name=$1-$5
  timeout 480 "$S" sim --trace "$3" --cluster "$C/$5.ini" --policy fifo,fifo:strict=1,srtf --restart-cost 0 --check \
    --out "$O/shoal-$name" --no-progress > "$O/shoal-$name.txt"
  for pair in "fifo fifo_strict_1" "fjf fifo" "shortest srtf"; do
    set -- $pair $w
    (cd "$T" && timeout 480 "$PY" run_sim.py --cluster_spec="$6.csv" --scheme=count --trace_file="$4" --schedule="$1" \
       --log_path="$O/tiresias-$name-$1" > "$O/tiresias-$name-$1.txt" 2>&1) || echo "their simulator failed: $name $1 ($O/tiresias-$name-$1.txt)"
    printf '%-12s their %-8s shoal %-14s ' "$name" "$1" "$2"
    "$PY" "$here/compare.py" "$O/tiresias-$name-$1/job.csv" "$O/shoal-$name/jobs-$2.csv" "$5.ids"
  done
done
