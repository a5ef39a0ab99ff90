#!/usr/bin/env bash
# The flow monitor's cost on the send path (docs/flow.md): allreduce busbw across 2 testbed hosts with
# SHOAL_FLOW_MONITOR=off and =on (the segment made, no agent: every cross-host send counts its bytes and
# looks for a rate), alternated REPS times; per size the median busbw of each and on/off. Links unshaped
# by default (the send path at its fastest is where a cost would show). As root, under `quiet`.
# The last line pools every size and run: the geometric mean of on/off and its standard error (run-to-run
# spread on this 2-core machine is several percent, so a 2% question needs many alternated runs).
#   experiments/flow/monitor-overhead.sh [--rate RATE] [--reps N] [--sizes MIN:MAX] [--name NAME]
set -euo pipefail
cd "$(dirname "$0")/../.."
rate=0 reps=3 name=flowmo sizes=1M:64M
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "monitor-overhead.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
S=$PWD/build/shoal
out=/tmp/flow-monitor; rm -rf "$out"; mkdir -p "$out"
trap '$S testbed down --name $name >/dev/null 2>&1 || true; rm -f /dev/shm/shoal-flow.$name-h*' EXIT
$S testbed down --name "$name" >/dev/null 2>&1 || true
$S testbed up --name "$name" --hosts 2 --rate "$rate" >/dev/null
for r in $(seq 1 "$reps"); do
  for mon in off on; do
    SHOAL_FLOW_MONITOR=$mon timeout 120 $S launch --testbed "$name" -n 2 -- $S bench allreduce -b "${sizes%%:*}" -e "${sizes##*:}" -f 4 \
      | sed 's/^\[[0-9]*\] //' | awk '$1 ~ /^[0-9]+$/ { print $1, $(NF-1) }' > "$out/$mon.$r"
  done
done
[ -s "$out/on.1" ] || { echo "monitor-overhead.sh: the bench printed no sizes" >&2; exit 1; }
ls /dev/shm | grep -q "shoal-flow.$name-h0" || { echo "monitor-overhead.sh: no segment was made with =on" >&2; exit 1; }
printf '# allreduce busbw (GB/s), 2 hosts x 1 rank, links %s; median of %d alternated runs each\n' "$rate" "$reps"
printf '%10s %10s %10s %8s\n' size off on on/off
cat "$out"/off.* | awk '{ print $1 }' | sort -n -u | while read -r size; do
  med() { cat "$out"/$1.* | awk -v s="$size" '$1 == s { print $2 }' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
  a=$(med off) b=$(med on)
  printf '%10s %10s %10s %8.3f\n' "$size" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { print b / a }')"
done
for r in $(seq 1 "$reps"); do paste "$out/off.$r" "$out/on.$r"; done |
  awk '$1 == $3 && $2 > 0 { x = log($4 / $2); s += x; ss += x * x; n++ }
       END { m = s / n; se = n > 1 ? sqrt((ss - n * m * m) / (n - 1) / n) : 0
             printf "# all sizes and runs: on/off geometric mean %.3f, standard error %.3f (%d pairs)\n", exp(m), se, n }'
