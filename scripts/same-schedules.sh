#!/usr/bin/env bash
# Same schedules before and after a change: runs the same `shoal sim` command lines with two
# binaries and compares everything they write, byte for byte: the per-job CSVs, the timelines,
# the plots, summary.json, the --csv line, stderr and the exit status. Only the fields that
# measure the program itself may differ (wall time, rates per wall second, decision times, peak
# RSS). Every policy of the registry (`shoal sim --help`) runs on every input, one process per
# policy, plus parameter variants; the inputs: the named scenarios, a Philly window, synthetic
# parameter-server jobs with and without racks and contention, the Gavel speed table, a cluster
# file, a --horizon cut, the lower bound. Run it from anywhere; it runs in the repository root.
#
#   scripts/same-schedules.sh [options] BEFORE_BIN AFTER_BIN   # prints a verdict; exit 1 if different
#   scripts/same-schedules.sh run BIN DIR [quick|standard|full]  # one binary's outputs into DIR
#   scripts/same-schedules.sh diff DIR_BEFORE DIR_AFTER         # compare two such directories
#
# options:
#   --set quick|standard|full   inputs (default standard, ~2.5 min per binary on one core; quick
#                               drops philly-busy and gavel, ~40 s; full adds the whole Philly trace
#                               with the policies that finish it in minutes)
#   --timeout S                 per run (one input, one policy); default 600
#   --keep DIR                  keep both binaries' outputs in DIR/before, DIR/after (default: a
#                               temporary directory, removed when identical)
#
# Typical use: copy the old tree's build/shoal to /tmp/x-before/shoal before changing anything, then
# `heavy scripts/same-schedules.sh /tmp/x-before/shoal build/shoal`.
set -u
PHILLY=../shared/data/philly/philly.csv
me=$(basename "$0")
die() { echo "$me: $*" >&2; exit 2; }
script_help() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

# The policies of a binary's registry, in its order (the "policies:" part of `shoal sim --help`).
registry() {
  "$1" sim --help 2>&1 | awk '/^policies:/ { p = 1; next } p && /^  [a-z]/ { print $1 }'
}

# name|policies|arguments, one input per line. "all" = every registry policy; "-NAME" drops one
# (gavel's 360 s rounds with checkpoints every 600 s never progress: the engine stops such a run).
inputs() {
  cat <<EOF
synthetic|all,fifo:strict=1,srtf:srgf=1,tiresias:starve=0,gavel:round=100|--scenario synthetic
pollux|all,larr:replan=0,larr:estimate=3600,larr:lpblocks=0,greedy:replan=1,oasis:estimate=3600|--scenario pollux
philly-window|all|--trace $PHILLY --window 2000000:2300000 --machines 16 --racks 4 --oversub 2 --check
ps-racks|all,-gavel,gavel:round=1000|--synthetic 1500 --load 3 --machines 16 --racks 4 --oversub 4 --ps-fraction 0.5 --checkpoint 600 --check --report-jobs 200:1300
ps-flat|all,larr:replan=0,greedy:replan=1|--synthetic 400 --load 2 --machines 8 --racks 1 --ps-fraction 0.6 --ps-ratio 1 --check
ps-small|all,larr:replan=0,larr:lpblocks=2,larr:replanlp=1,larr:slot=900:trials=5:beta=1.2:sigma=1,oasis:slot=1800:mult=2:units=32,oasis:estimate=3600,greedy:replan=1:slot=900|--synthetic 300 --load 2 --machines 6 --racks 2 --oversub 2 --ps-fraction 0.3 --check
table|all|--synthetic 400 --load 1.5 --speed table --gpu k80 --machines 8 --racks 2 --restart-cost 60 --start-cost 10
cluster-file|all|--cluster fuzz/corpus/cluster/two_groups.ini --synthetic 400 --load 6 --arrivals poisson --seed 3
horizon|all|--synthetic 500 --load 2 --machines 8 --horizon 300000 --ps-fraction 0.2
lower-bound|none,fifo,larr,greedy|--synthetic 150 --load 2 --machines 6 --ps-fraction 0.5 --lower-bound --lb-slot 86400
EOF
  case $1 in
  quick) ;;
  standard | full)
    echo "gavel|all|--scenario gavel"
    echo "philly-busy|all|--scenario philly-busy" ;;
  esac
  if [ "$1" = full ]; then
    echo "philly64|fifo,srtf,tiresias,optimus,drf,gavel,elastic,greedy|--trace $PHILLY --machines 64 --racks 8"
  fi
}

expand() { # POLICIES REGISTRY_LIST -> one policy per line
  local spec=$1 reg=$2 p drop=" "
  for p in $(echo "$spec" | tr , ' '); do case $p in -*) drop="$drop${p#-} " ;; esac; done
  for p in $(echo "$spec" | tr , ' '); do
    case $p in
    -*) ;;
    all) for r in $reg; do case $drop in *" $r "*) ;; *) echo "$r" ;; esac; done ;;
    *) echo "$p" ;;
    esac
  done
}

run() {
  local bin=$1 dir=$2 set=${3:-standard} name pols args p o rc n=0 t0=$SECONDS reg
  case $set in quick | standard | full) ;; *) die "unknown set '$set' (quick, standard, full)" ;; esac
  [ -x "$bin" ] || die "$bin: not an executable"
  reg=$(registry "$bin")
  [ -n "$reg" ] || die "$bin sim --help lists no policies"
  mkdir -p "$dir" || die "cannot create $dir"
  echo "$reg" >"$dir/policies"
  while IFS='|' read -r name pols args; do
    for p in $(expand "$pols" "$reg"); do
      o="$dir/$name/$(echo "$p" | tr ':=/' '___')"
      mkdir -p "$o"
      # shellcheck disable=SC2086
      timeout "$TIMEOUT" "$bin" sim $args --policy "$p" --out "$o" --no-progress --csv >"$o/stdout" 2>"$o/stderr"
      rc=$?
      echo "$rc" >"$o/status"
      [ "$rc" = 124 ] && echo "$name $p: killed after $TIMEOUT s" >&2
      [ "$rc" != 0 ] && [ "$rc" != 124 ] && echo "$name $p: exit $rc ($(head -c 200 "$o/stderr"))" >&2
      n=$((n + 1))
    done
    echo "  $(basename "$dir"): $name done ($((SECONDS - t0)) s)" >&2
  done < <(inputs "$set")
  echo "$n" >"$dir/runs"
}

# What measures the program, not the schedule: cut out of summary.json (a policy's fields share one
# line; the rest of the line is compared) and masked in the --csv line (by the header's names).
strip_json() {
  sed -E 's/"(wall_s|events_per_s|sim_s_per_wall_s|peak_rss_mb|decisions_per_s|decide_ms_avg|decide_ms_max)": [^,}]*(, )?//g' "$1"
}
strip_csv() {
  awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++)
                       if ($i ~ /^(wall_s|events_per_s|decisions_per_s|peak_rss_mb|decide_ms_avg|decide_ms_max)$/) m[i] = 1
                       print; next }
                    { for (i in m) $i = "*"; print }' "$1"
}

# log lines name the host and the process: "[shoal HOST:PID] WARN ..."
strip_log() { sed -E 's/^\[shoal [^]]*\]/[shoal]/' "$1"; }

diff_dirs() {
  local a=$1 b=$2 bad=0 runs=0 d rel f base
  [ -d "$a" ] && [ -d "$b" ] || die "diff needs two output directories"
  if ! cmp -s "$a/policies" "$b/policies"; then
    echo "differs: the registry (before: $(tr '\n' ' ' <"$a/policies"); after: $(tr '\n' ' ' <"$b/policies"))"
    bad=1
  fi
  for d in "$b"/*/*/; do [ -d "$a/${d#"$b"/}" ] || { echo "only after: ${d#"$b"/}"; bad=1; }; done
  for d in "$a"/*/*/; do
    [ -d "$d" ] || continue
    rel=${d#"$a"/} runs=$((runs + 1))
    if [ ! -d "$b/$rel" ]; then echo "only before: $rel"; bad=1; continue; fi
    [ "$(cat "$d/status")" = 0 ] || echo "note: $rel exits $(cat "$d/status") in both (see ${d}stderr)" >&2
    for f in "$b/$rel"*; do [ -e "$d$(basename "$f")" ] || { echo "only after: $rel$(basename "$f")"; bad=1; }; done
    for f in "$d"*; do
      base=$(basename "$f")
      if [ ! -e "$b/$rel$base" ]; then echo "only before: $rel$base"; bad=1; continue; fi
      case $base in
      summary.json) cmp -s <(strip_json "$f") <(strip_json "$b/$rel$base") ;;
      stdout) cmp -s <(strip_csv "$f") <(strip_csv "$b/$rel$base") ;;
      stderr) cmp -s <(strip_log "$f") <(strip_log "$b/$rel$base") ;;
      *) cmp -s "$f" "$b/$rel$base" ;;
      esac || { echo "differs: $rel$base"; bad=1; }
    done
  done
  [ "$runs" -gt 0 ] || { echo "no runs in $a"; bad=1; }
  if [ "$bad" = 0 ]; then
    echo "same schedules: $runs runs (inputs x policies) identical: per-job CSVs, timelines, plots, summary.json, --csv line, stderr, exit status (wall-clock fields and log prefixes aside)"
  else
    echo "DIFFERENT (above)"
  fi
  return $bad
}

TIMEOUT=600 SET=standard KEEP=
case ${1:-} in
run | diff) ;;
-h | --help) script_help; exit 0 ;;
"") script_help >&2; exit 2 ;;
esac
if [ "${1:-}" = run ]; then
  [ $# -ge 3 ] || die "usage: $me run BIN DIR [quick|standard|full]"
  bin=$(abs "$2") dir=$(abs "$3")
  cd "$(dirname "$0")/.." && run "$bin" "$dir" "${4:-standard}"
  exit $?
fi
if [ "${1:-}" = diff ]; then
  [ $# -eq 3 ] || die "usage: $me diff DIR_BEFORE DIR_AFTER"
  diff_dirs "$2" "$3"
  exit $?
fi
while [ $# -gt 2 ]; do
  case $1 in
  --set) [ $# -ge 4 ] || die "--set needs a value"; SET=$2; shift 2 ;;
  --timeout) [ $# -ge 4 ] || die "--timeout needs a value"; TIMEOUT=$2; shift 2 ;;
  --keep) [ $# -ge 4 ] || die "--keep needs a value"; KEEP=$(abs "$2"); shift 2 ;;
  *) die "unknown option '$1' (try --help)" ;;
  esac
done
case $TIMEOUT in '' | *[!0-9]*) die "--timeout: a whole number of seconds, not '$TIMEOUT'" ;; esac
[ $# -eq 2 ] || die "usage: $me [options] BEFORE_BIN AFTER_BIN (try --help)"
before=$(abs "$1") after=$(abs "$2")
for b in "$before" "$after"; do [ -x "$b" ] || die "$b: not an executable"; done
work=${KEEP:-$(mktemp -d /tmp/same-schedules.XXXXXX)}
[ -n "$KEEP" ] && { rm -rf "$work/before" "$work/after"; mkdir -p "$work"; }
cd "$(dirname "$0")/.." || exit 2
t0=$SECONDS
echo "$me: set $SET, before $before, after $after, outputs in $work" >&2
run "$before" "$work/before" "$SET" || exit 2
run "$after" "$work/after" "$SET" || exit 2
diff_dirs "$work/before" "$work/after"
rc=$?
echo "($((SECONDS - t0)) s)" >&2
if [ "$rc" = 0 ] && [ -z "$KEEP" ]; then rm -rf "$work"; else echo "outputs kept in $work" >&2; fi
exit $rc
