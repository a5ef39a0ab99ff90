#!/bin/sh
# Simulator speed under contention: every policy on the full Philly-derived
# trace (82,247 jobs) where jobs queue, one process per (cluster, policy), each
# run REPS times (best wall time kept: the machine is shared), against the goals
#   64 x 8 GPUs: every baseline < 2 s wall, peak RSS < 200 MB
#   32 x 8 GPUs (overloaded): every baseline < 5 s
#   64 x 8 GPUs: larr, oasis, greedy < 60 s
# The baselines are every registered policy but the slot planners (larr,
# oasis, greedy), read from `shoal sim --help`.
#   bench/sim-speed.sh [BUILD_DIR=build] [--reps N (3)] [--only 64|32|planners] [--quick: = --only 64]
# Figures for docs: run under the shared lock, one part at a time, e.g.
#   flock /tmp/shoal-measure.lock bench/sim-speed.sh build --only 64
# A run longer than LIMIT seconds (default: 10x its goal) is cut and reported
# as "> LIMIT". Columns: proc_s = whole `shoal sim` process (reading 3.4 MB of
# CSV, model assignment, simulating, metrics; best of REPS), cpu_s = its user +
# system CPU time, sim_s = engine wall time of that run, RSS_MB = peak resident
# set (/usr/bin/time), events/s and decisions/s per second of sim_s,
# decide_ms = mean wall time inside the policy's schedule() per decision,
# waited = jobs that queued at all, verdict against the goal (on proc_s).
set -eu
BUILD=build
REPS=3
ONLY=all
while [ $# -gt 0 ]; do
  case $1 in
  --reps) REPS=$2; shift ;;
  --quick) ONLY=64 ;;
  --only) ONLY=$2; shift ;;
  *) BUILD=$1 ;;
  esac
  shift
done
cd "$(dirname "$0")/.."
SHOAL=$BUILD/shoal
PHILLY=../shared/data/philly/philly.csv
[ -x "$SHOAL" ] || { echo "bench/sim-speed.sh: $SHOAL not built (make BUILD=$BUILD $SHOAL)" >&2; exit 1; }
[ -r "$PHILLY" ] || { echo "bench/sim-speed.sh: $PHILLY not found" >&2; exit 1; }
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench/sim-speed.sh: needs /usr/bin/time (Debian package time)" >&2; exit 1; }
PLANNERS="greedy oasis larr"
BASE=$("$SHOAL" sim --help | awk '/^policies:/ { p = 1; next } p && /^  [a-z]/ { print $1 }' |
  grep -v -x -e greedy -e oasis -e larr | tr '\n' ' ')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "# shoal sim speed under contention, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(load) (1/5/15 min), best of $REPS runs (the planners: one run)"
printf '%-6s %-9s %7s %8s %7s %8s %7s %11s %12s %10s %9s %s\n' cluster policy waited proc_s cpu_s sim_s RSS_MB events/s decisions/s decide_ms avgJCT verdict

run() { # machines goal_s policy
  m=$1; goal=$2; pol=$3
  lim=${LIMIT:-$(awk -v g="$goal" 'BEGIN { print 10 * g }')}
  best=""
  for r in $(seq "$REPS"); do
    if $TIME -f '%e %M %U %S' -o "$tmp/time" timeout "$lim" "$SHOAL" sim --trace "$PHILLY" --machines "$m" --racks $((m / 8)) \
      --policy "$pol" --csv --no-progress > "$tmp/out" 2> "$tmp/err"; then
      t=$(awk '{print $1}' "$tmp/time")
      if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then
        best=$t
        cp "$tmp/out" "$tmp/best"
        rss=$(awk '{printf "%.1f", $2/1024}' "$tmp/time")
        cpu=$(awk '{printf "%.2f", $3 + $4}' "$tmp/time")
      fi
    fi
  done
  if [ -z "$best" ]; then
    printf '%-6s %-9s %7s %8s %7s %8s %7s %11s %12s %10s %9s %s\n' "${m}x8" "$pol" - "> $lim" - - - - - - - "NOT MET (cut at ${lim} s)"
    return 0
  fi
  # CSV fields: 5 jct_avg_s, 11 waited, 17 decide_ms_avg, 19 events_per_s, 20 decisions_per_s, 21 wall_s
  line=$(sed -n 2p "$tmp/best")
  verdict=$(awk -v t="$best" -v g="$goal" -v r="$rss" -v m="$m" 'BEGIN {
    ok = t < g; if (m == 64 && g == 2 && r >= 200) ok = 0; print ok ? "met" : "NOT MET" }')
  echo "$line" | awk -F, -v c="${m}x8" -v p="$pol" -v t="$best" -v u="$cpu" -v r="$rss" -v v="$verdict (goal < $goal s)" \
    '{ printf "%-6s %-9s %7s %8s %7s %8.2f %7s %11.0f %12.0f %10.4f %9.0f %s\n", c, p, $11, t, u, $21, r, $19, $20, $17, $5, v }'
}

if [ "$ONLY" = all ] || [ "$ONLY" = 64 ]; then for p in $BASE; do run 64 2 "$p"; done; fi
if [ "$ONLY" = all ] || [ "$ONLY" = 32 ]; then for p in $BASE; do run 32 5 "$p"; done; fi
if [ "$ONLY" = all ] || [ "$ONLY" = planners ]; then
  REPS=1 # one run each: minutes per run
  for p in $PLANNERS; do run 64 60 "$p"; done
fi
echo "# load average at the end: $(load)"
