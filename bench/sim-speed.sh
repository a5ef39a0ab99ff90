#!/bin/sh
# Simulator speed (issue 4): every policy on the full Philly-derived trace
# (82,247 jobs) on a 2,048-GPU cluster, then synthetic scaling with 10k, 100k
# and 1M jobs (load 0.8 of 2,048 GPUs). One process per (workload, policy),
# so peak RSS is per policy.
#   bench/sim-speed.sh [BUILD_DIR=build] [--quick|--contended]
#     --quick      skip the 1M-job rows
#     --contended  also Philly on 512 GPUs (heavily contended: thousands of
#                  jobs wait; each run is cut at 120 s)
# Columns: sim_s = engine wall time (reading the trace excluded), proc_s =
# whole process (reading, converting, simulating, metrics), RSS = peak
# resident set (getrusage ru_maxrss via /usr/bin/time), events/s = engine
# events (completions, restarts, arrivals, timers) per second of sim_s,
# x_fifo = sim_s / FIFO's sim_s on the same workload (FIFO is the anchor: the
# cheapest policy, so the ratio is each policy's decision overhead).
set -eu
BUILD=${1:-build}
QUICK=0
CONTENDED=0
for a in "$@"; do
  case $a in
  --quick) QUICK=1 ;;
  --contended) CONTENDED=1 ;;
  esac
done
case $BUILD in --*) BUILD=build ;; esac
cd "$(dirname "$0")/.."
SHOAL=$BUILD/shoal
PHILLY=../shared/data/philly/philly.csv
POLICIES="fifo srtf tiresias optimus drf gavel"
[ -x "$SHOAL" ] || { echo "bench/sim-speed.sh: $SHOAL not built (make BUILD=$BUILD $SHOAL)" >&2; exit 1; }
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench/sim-speed.sh: needs /usr/bin/time (Debian package time)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# shoal sim speed, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg)"
printf '%-26s %-9s %9s %8s %8s %7s %12s %7s\n' workload policy jobs sim_s proc_s RSS_MB events/s x_fifo

run() { # label policy args...
  label=$1; pol=$2; shift 2
  if ! $TIME -f '%e %M' -o "$tmp/time" timeout "${LIMIT:-600}" "$SHOAL" sim --policy "$pol" --no-progress "$@" > "$tmp/out" 2> "$tmp/err"; then
    printf '%-26s %-9s %9s\n' "$label" "$pol" "(failed or cut at ${LIMIT:-600} s)"
    cat "$tmp/err" >&2
    return 0
  fi
  line=$(grep -E "^$pol " "$tmp/out" | head -1)
  jobs=$(echo "$line" | awk '{print $2}')
  sim=$(echo "$line" | awk '{print $13}')
  evs=$(echo "$line" | awk '{print $14}')
  proc=$(awk '{print $1}' "$tmp/time")
  rss=$(awk '{printf "%.1f", $2/1024}' "$tmp/time")
  [ "$pol" = fifo ] && anchor=$sim
  ratio=$(awk -v a="$sim" -v b="$anchor" 'BEGIN{ if (b > 0) printf "%.1f", a/b; else print "-" }')
  printf '%-26s %-9s %9s %8s %8s %7s %12s %7s\n' "$label" "$pol" "$jobs" "$sim" "$proc" "$rss" "$evs" "$ratio"
}

if [ -r "$PHILLY" ]; then
  for p in $POLICIES; do run "philly 2048 GPUs" "$p" --trace "$PHILLY"; done
  if [ "$CONTENDED" = 1 ]; then
    for p in $POLICIES; do LIMIT=120 run "philly 512 GPUs" "$p" --trace "$PHILLY" --machines 64 --racks 8; done
  fi
else
  echo "($PHILLY not found: Philly rows skipped)"
fi
sizes="10000 100000 1000000"
[ "$QUICK" = 1 ] && sizes="10000 100000"
for n in $sizes; do
  for p in $POLICIES; do run "synthetic $n, load 0.8" "$p" --synthetic "$n"; done
done
