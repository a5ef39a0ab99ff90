#!/usr/bin/env bash
# ME4: 48 simulated GPUs (24 hosts x 2 in 2 racks, host links 40 Mbit/s, uplinks 4:1, the testbed's scale)
# with job arrivals, in the flow-level simulator (the controller's own planner, docs/flow.md#the-simulator).
# N jobs arrive as a Poisson process of mean gap GAP s; each asks for 4, 6 or 8 GPUs (2-4 hosts, placed on
# arrival on free hosts spread over the racks, so every ring crosses the uplinks), runs 20-40 steps of 500,
# 1000 or 1500 ms compute and a 2.14 MB allreduce (ME1's MLP). Per seed: TCP's and mlcc's average JCT, the
# gain, and the mean number of jobs running (the load: sum of JCTs / makespan under TCP). The load grows as
# GAP shrinks; the testbed's ME1 runs 2, 3 and 4 jobs on one uplink pair. Deterministic per seed: `heavy`.
#
#   experiments/flow/me4.sh [--jobs N] [--gap S] [--seeds "1 2 3"] [--jitter S]
set -euo pipefail
cd "$(dirname "$0")/../.."
n=24 gap=6 seeds="1 2 3 4 5 6" jitter=0.005
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) n=$2; shift 2 ;;
    --gap) gap=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --jitter) jitter=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "me4.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
case $n in [1-9]|[1-9][0-9]|1[0-9][0-9]|200) ;; *) echo "me4.sh: --jobs $n: 1 to 200" >&2; exit 2 ;; esac
awk -v g="$gap" 'BEGIN { exit !(g + 0 > 0 && g + 0 <= 600) }' || { echo "me4.sh: --gap $gap: above 0, at most 600" >&2; exit 2; }
S=$PWD/build/shoal
[ -x "$S" ] || { echo "me4.sh: $S not built (make -j2)" >&2; exit 2; }
f=$(mktemp /tmp/shoal-me4.XXXXXX)
trap 'rm -f "$f"' EXIT
printf '# ME4: %d jobs, mean gap %s s, 24 hosts x 2 GPUs, 2 racks, 40 Mbit/s, uplinks 4:1\n' "$n" "$gap"
printf '%5s %9s %9s %8s %6s\n' seed tcp_jct_s mlcc_jct_s gain_% load
for seed in $seeds; do
  awk -v n="$n" -v gap="$gap" -v seed="$seed" 'BEGIN { srand(seed); t = 0; split("4 6 8", sz, " "); split("500 1000 1500", cm, " ")
    for (i = 0; i < n; i++) { printf "%.1f gpus=%d %d %d 2143272\n", t, sz[1 + int(rand() * 3)], 20 + int(rand() * 21), cm[1 + int(rand() * 3)]
      t += -gap * log(1 - rand()) } }' > "$f"
  "$S" flow sim --jobs "$f" --hosts 24 --racks 2 --rate 40mbit --oversub 4 --policy tcp --policy mlcc --jitter "$jitter" \
    --seed "$seed" --per-job | awk -v seed="$seed" '
    $2 == "avg" { avg[$1] = $3 }
    $2 ~ /^[0-9]+$/ && $1 == "tcp" { s += $5; e = $4 + $5; if (e > end) end = e; if (!started || $3 < t0) { t0 = $3; started = 1 } }
    END { printf "%5d %9.2f %9.2f %8.1f %6.2f\n", seed, avg["tcp"], avg["mlcc"], 100 * (avg["mlcc"] / avg["tcp"] - 1), s / (end - t0) }'
done | awk '{ print; t += $2; m += $3; l += $5; k++ } END { printf "%5s %9.2f %9.2f %8.1f %6.2f\n", "mean", t / k, m / k, 100 * (m / t - 1), l / k }'
