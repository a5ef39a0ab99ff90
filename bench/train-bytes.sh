#!/bin/sh
# Bytes on the wire per training step: bsp against dssync at 2, 4 and 8 ranks.
#
#   bench/train-bytes.sh [BUILD]
#
# Runs inside a private network namespace (unshare -rn), so the loopback
# counters see only these ranks' traffic; shared memory is off (SHOAL_SHM=0)
# so that every byte crosses a socket, as between hosts. Each configuration
# runs twice (LO and HI iterations, within one epoch) and the difference of
# the loopback byte counts divided by (HI - LO) is the traffic of one step;
# bootstrap, evaluation and the final average cancel out. Printed per rank
# (total / ranks) and as a ratio to bsp.
set -eu
BUILD=${1:-build}
SHOAL=$(cd "$(dirname "$BUILD/shoal")" && pwd)/shoal
if [ -z "${SHOAL_BYTES_IN_NETNS:-}" ]; then
  exec unshare -rn env SHOAL_BYTES_IN_NETNS=1 sh "$0" "$@"
fi
ip link set lo up
export SHOAL_SHM=0 OPENBLAS_NUM_THREADS=1
LO=${LO:-10}
HI=${HI:-40}
MODEL=${MODEL:-mlp}
lo_bytes() { sed 's/:/ /' /proc/net/dev | awk '$1 == "lo" { print $2 }'; }
count() { # ranks iters args...
  n=$1 it=$2
  shift 2
  b0=$(lo_bytes)
  timeout 300 "$SHOAL" launch -n "$n" --no-prefix -- "$SHOAL" train --model "$MODEL" --epochs 1 --batch 32 \
    --train-subset 16384 --test-subset 500 --max-iters "$it" --quiet "$@" >/dev/null
  echo $(($(lo_bytes) - b0))
}
printf "%-6s %-34s %14s %10s\n" ranks config "bytes/step/rank" "vs bsp"
for n in 2 4 8; do
  half=$(awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "%s%d", i ? "," : "", i < n / 2 ? 0 : 1 }')
  base=""
  for cfg in "--sync bsp" "--sync dssync --ds-pattern butterfly --ds-k 2" "--sync dssync --ds-pattern random --ds-k 2" \
             "--sync dssync --ds-pattern topo --ds-k 2 --racks $half"; do
    # shellcheck disable=SC2086
    a=$(count "$n" "$LO" $cfg)
    # shellcheck disable=SC2086
    b=$(count "$n" "$HI" $cfg)
    per=$(awk -v a="$a" -v b="$b" -v n="$n" -v d=$((HI - LO)) 'BEGIN { printf "%.0f", (b - a) / d / n }')
    [ -n "$base" ] || base=$per
    printf "%-6s %-34s %14s %10s\n" "$n" "$(echo "$cfg" | sed 's/--sync //; s/--ds-pattern //; s/--racks .*/(2 racks)/')" \
      "$per" "$(awk -v a="$per" -v b="$base" 'BEGIN { printf "%.3f", a / b }')"
  done
done
