#!/usr/bin/env bash
# ME3: how the flow controller's average JCT depends on its settings: the slot length, the horizon K and the
# volume factor, one at a time around the defaults (100 ms, 10, 1.6), in the flow-level simulator (the
# controller's own planner, docs/flow.md#the-simulator) on ME1's testbed setting: 8 hosts in 2 racks, host
# links 40 Mbit/s, uplinks 4:1; J 2-rank rings h<j-1>,h<j+3>, 2.14 MB of gradients, COMPUTE ms a step.
# --jitter S: each compute phase x a lognormal factor of sigma S (the same draws for every setting).
# Deterministic: run it under `heavy`, not `quiet`.
#
#   experiments/flow/me3.sh [--jobs J] [--compute-ms C] [--iters N] [--jitter S] [--policy mlcc|greedy]
set -euo pipefail
cd "$(dirname "$0")/../.."
jobs=3 compute=1000 iters=12 jitter=0 policy=mlcc
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs=$2; shift 2 ;;
    --compute-ms) compute=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --jitter) jitter=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "me3.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
case $jobs in 1|2|3|4) ;; *) echo "me3.sh: --jobs $jobs: 1 to 4" >&2; exit 2 ;; esac
S=$PWD/build/shoal
[ -x "$S" ] || { echo "me3.sh: $S not built (make -j2)" >&2; exit 2; }
f=$(mktemp /tmp/shoal-me3.XXXXXX)
trap 'rm -f "$f"' EXIT
for j in $(seq 1 "$jobs"); do echo "0 h$((j - 1)),h$((j + 3)) $iters $compute 2143272" >> "$f"; done
sim() { "$S" flow sim --jobs "$f" --hosts 8 --racks 2 --rate 40mbit --oversub 4 --jitter "$jitter" "$@" | awk '$2 == "avg" { print $3 }'; }
tcp=$(sim --policy tcp)
printf '# ME3: %d jobs, %d steps of %d ms compute, jitter %s; %s average JCT against TCP (the simulator's model) %.2f s\n' \
  "$jobs" "$iters" "$compute" "$jitter" "$policy" "$tcp"
printf '%-8s %6s %8s %9s\n' setting value jct_s vs_tcp
row() { local j; j=$(sim --policy "$policy" "--$1" "$2"); printf '%-8s %6s %8.2f %+8.1f%%\n' "$1" "$2" "$j" "$(awk -v a="$j" -v b="$tcp" 'BEGIN { print 100 * (a / b - 1) }')"; }
for v in 20 50 100 200; do row slot-ms "$v"; done
for v in 3 5 10 15; do row horizon "$v"; done
for v in 1.0 1.3 1.6 2.0; do row factor "$v"; done
