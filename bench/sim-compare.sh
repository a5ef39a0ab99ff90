#!/bin/sh
# Same decisions before and after a change of the simulator or a policy:
# runs a fixed set of scenarios x policies with one `shoal` binary and
# writes every output (per-job CSV, timeline CSV, summary.json) under DIR;
# --diff compares two such directories and lists every difference in the
# schedule (the per-job CSVs, the timelines, every metric of summary.json
# except those that measure the program itself: wall time, rates per wall
# second, decision times, peak RSS).
#
#   bench/sim-compare.sh run BIN DIR [quick|full]   # full adds the whole Philly trace (minutes)
#   bench/sim-compare.sh diff DIR_BEFORE DIR_AFTER  # exit 1 on any difference
#
# Typical use: build the old tree's shoal, `run` it into /tmp/before, build
# the new one, `run` it into /tmp/after, `diff` the two.
set -eu
cd "$(dirname "$0")/.."
PHILLY=../shared/data/philly/philly.csv
BASE="fifo,fifo:strict=1,srtf,srtf:srgf=1,tiresias,tiresias:starve=0,optimus,drf,gavel,gavel:round=100,elastic"

# name|policies|arguments (one scenario per line). Gavel's 100 s rounds are
# not run with checkpoints every 600 s: a job preempted every round before
# its first checkpoint never progresses (the engine stops such a run with an
# error).
scenarios() {
  cat <<EOF
synthetic|$BASE,greedy|--scenario synthetic
gavel|$BASE|--scenario gavel
pollux|$BASE,larr,oasis,greedy,greedy:replan=1,larr:replan=0,larr:estimate=3600|--scenario pollux
busy|$BASE|--scenario philly-busy
ps|$(echo "$BASE" | sed 's/round=100/round=1000/')|--synthetic 1500 --load 3 --machines 16 --racks 4 --oversub 4 --ps-fraction 0.5 --checkpoint 600 --check --report-jobs 200:1300
small|$BASE,larr,oasis,greedy,greedy:replan=1|--synthetic 300 --load 2 --machines 6 --racks 2 --oversub 2 --ps-fraction 0.3 --check
EOF
  if [ "${1:-quick}" = full ]; then
    echo "philly64|$BASE|--trace $PHILLY --machines 64 --racks 8"
    echo "philly32|$BASE|--trace $PHILLY --machines 32 --racks 4"
  fi
}

run() {
  bin=$1 dir=$2 set=${3:-quick}
  mkdir -p "$dir"
  scenarios "$set" | while IFS='|' read -r name pols args; do
    # one process per policy: a failing policy does not hide the others
    for p in $(echo "$pols" | tr , ' '); do
      o="$dir/$name/$(echo "$p" | tr ':=' '__')"
      mkdir -p "$o"
      # shellcheck disable=SC2086
      if ! "$bin" sim $args --policy "$p" --out "$o" --no-progress > "$o/stdout" 2> "$o/stderr"; then
        echo "$name $p: FAILED (see $o/stderr)" >&2
      fi
    done
    echo "$name done" >&2
  done
}

# summary.json without the fields that measure the program (a policy's fields share one line: the
# fields are cut out of it, the rest of the line is compared)
strip_json() {
  sed -E 's/"(wall_s|events_per_s|sim_s_per_wall_s|peak_rss_mb|decisions_per_s|decide_ms_avg|decide_ms_max)": [^,}]*(, )?//g' "$1"
}

diff_dirs() {
  a=$1 b=$2 bad=0
  for d in "$a"/*/*/; do
    rel=${d#"$a"/}
    if [ ! -d "$b/$rel" ]; then echo "missing in $b: $rel"; bad=1; continue; fi
    for f in "$d"jobs-*.csv "$d"timeline-*.csv; do
      [ -e "$f" ] || continue
      if ! cmp -s "$f" "$b/$rel$(basename "$f")"; then echo "differs: $rel$(basename "$f")"; bad=1; fi
    done
    if [ -e "${d}summary.json" ]; then
      if ! strip_json "${d}summary.json" | diff -q - "$b/${rel}summary.json.stripped" >/dev/null 2>&1; then
        strip_json "$b/${rel}summary.json" > "$b/${rel}summary.json.stripped"
        if ! strip_json "${d}summary.json" | diff - "$b/${rel}summary.json.stripped" > "$b/${rel}summary.diff"; then
          echo "differs: ${rel}summary.json ($(grep -c '^<' "$b/${rel}summary.diff") fields; $b/${rel}summary.diff)"
          bad=1
        fi
      fi
    else
      echo "no output: $rel"; bad=1
    fi
  done
  [ "$bad" = 0 ] && echo "identical: every schedule and metric"
  return $bad
}

case ${1:-} in
run) shift; run "$@" ;;
diff) shift; diff_dirs "$@" ;;
*) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
