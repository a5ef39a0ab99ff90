#!/usr/bin/env bash
# Randomized fault drill of the communication layer: real ranks under
# `shoal launch` run a checked allreduce benchmark (--check counts wrong
# elements); at a random moment one random rank is killed (kill -9) or
# stopped (SIGSTOP) from outside. Transports: TCP (SHOAL_SHM=0), shared
# memory, and the hierarchy (two emulated hosts). Per drill it records:
#   hang   - the launcher's --timeout (or the outer timeout) had to end it
#   wrong  - a rank printed #wrong > 0 (a silent wrong result)
#   named  - the launcher's summary names the victim (killed / stopped)
#   leaks  - shoal segments left in /dev/shm afterwards
#   survivors naming the victim - per rank other than the victim: its first communication error (a line
#            of its output with "seq N:") names the victim ("peer V" or "rank V", also at the end of a
#            chain of aborts), counted per fault (kill -9, SIGSTOP); a survivor that printed no such error
#            (it finished before noticing) is not counted
# A job that exits 0 although a rank was killed or stopped mid-run counts as
# a silent wrong result too. "missed": the victim was gone before the fault.
# --elastic: the ranks run `shoal train --on-failure shrink` under `shoal launch --on-failure continue`
# (the survivors shrink and finish); a drill passes when the job exits 0 and the launcher names the
# victim, and "wrong" counts a job that failed although it should have shrunk past the fault.
#   bench/fault-drill.sh [--build DIR] [--drills N] [--ranks N] [--seed S] [--max SIZE] [--out FILE] [--elastic]
# Bounded: each drill runs at most ~40 s (SHOAL_TIMEOUT=3, SHOAL_CONNECT_TIMEOUT=5,
# --timeout 30); the fault may land during the start too.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
build=build drills=100 ranks=4 seed=$$ out="" max=4M elastic=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) val "$@"; build=$2; shift 2 ;;
    --drills) val "$@"; drills=$2; shift 2 ;;
    --ranks) val "$@"; ranks=$2; shift 2 ;;
    --seed) val "$@"; seed=$2; shift 2 ;;
    --out) val "$@"; out=$2; shift 2 ;;
    --max) val "$@"; max=$2; shift 2 ;;
    --elastic) elastic=1; shift ;;
    -h|--help) script_help; exit 0 ;;
    *) unknown_opt "$1" ;;
  esac
done
[ -x "$build/shoal" ] || { echo "fault-drill.sh: $build/shoal not built (make BUILD=$build)" >&2; exit 2; }
shoal=$(realpath "$build/shoal")
RANDOM=$seed
tmp=$(mktemp -d /tmp/shoal-drill-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
shm_count() { find /dev/shm -maxdepth 1 -name "shoal-$(id -u)-*" 2>/dev/null | wc -l; }
modes=(tcp shm hier)
hang=0 wrong=0 named=0 counted=0 missed=0 leaks=0 other=0
declare -A by_mode_named by_mode_counted surv_named surv_total
leak0=$(shm_count)
echo "# fault drill: $drills drills, $ranks ranks, seed $seed, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "# %4s %-5s %-5s %8s %6s %7s %5s  %s\n" drill mode fault size victim at_s exit "launcher summary"
for d in $(seq 1 "$drills"); do
  mode=${modes[$((RANDOM % 3))]}
  fault=$([ $((RANDOM % 2)) = 0 ] && echo KILL || echo STOP)
  size=sweep
  victim=$((RANDOM % ranks))
  at_ms=$((200 + RANDOM % 1300))
  shm=1; hosts=0
  [ "$mode" = tcp ] && shm=0
  [ "$mode" = hier ] && hosts=1
  log="$tmp/drill-$d.log"
  export SHOAL_JOB_ID="drill-$seed-$d"
  # each rank: (hier) a host name per pair of ranks; a checked sweep 8 B - max: the fault lands at a random size
  if [ "$elastic" = 1 ]; then
    work="exec '$shoal' train --on-failure shrink --epochs 1 --test-subset 500" onfail="--on-failure continue"
  else
    work="exec '$shoal' bench allreduce -b 8 -e $max -f 4 -T 0.05 -W 0.05 -w 3 --check" onfail=""
  fi
  # shellcheck disable=SC2086 # $onfail: zero or two words
  SHOAL_SHM=$shm SHOAL_TIMEOUT=3 SHOAL_CONNECT_TIMEOUT=5 timeout 40 "$shoal" launch -n "$ranks" $onfail --grace 1 --timeout 30 -- sh -c \
    "[ $hosts = 1 ] && export SHOAL_HOSTNAME=drillhost\$((SHOAL_RANK / 2)); $work" \
    >"$log" 2>&1 &
  lpid=$!
  sleep "$(awk -v m="$at_ms" 'BEGIN { printf "%.3f", m / 1000 }')"
  vpid=""
  for try in $(seq 1 20); do # a loaded machine may not have started the ranks yet: look for up to 2 s more
    for l in $(pgrep -P "$lpid"); do # timeout -> shoal launch -> the ranks
      for p in $(pgrep -P "$l"); do
        if tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "SHOAL_RANK=$victim"; then vpid=$p; break 2; fi
      done
    done
    [ -n "$vpid" ] && break
    sleep 0.1
  done
  [ -n "$vpid" ] && kill -"$fault" "$vpid" 2>/dev/null
  wait "$lpid"; rc=$?
  summary=$(grep '^shoal launch:' "$log" | tail -1)
  if grep -qE '^\[[0-9]+\] +[0-9]+ ' "$log" && awk '/^\[[0-9]+\] +[0-9]+ / { if ($13 + 0 > 0 || $20 + 0 > 0) bad = 1 } END { exit !bad }' "$log"; then
    wrong=$((wrong + 1)); echo "# drill $d: WRONG RESULT" >&2
  fi
  if [ -z "$vpid" ]; then
    missed=$((missed + 1))
  elif [ "$rc" = 124 ] || grep -q -- '--timeout 30 s reached' "$log"; then
    hang=$((hang + 1)); echo "# drill $d: HANG" >&2
  elif [ "$elastic" = 1 ] && [ "$rc" != 0 ]; then # the survivors should have shrunk past the fault
    wrong=$((wrong + 1)); echo "# drill $d: ELASTIC JOB FAILED (exit $rc): $summary" >&2
  elif [ "$elastic" = 0 ] && [ "$rc" = 0 ]; then # every rank "succeeded" although one was killed or stopped mid-run
    wrong=$((wrong + 1)); echo "# drill $d: SUCCESS DESPITE THE FAULT" >&2
  else
    counted=$((counted + 1))
    by_mode_counted[$mode]=$(( ${by_mode_counted[$mode]:-0} + 1 ))
    if { [ "$fault" = KILL ] && grep -q "rank $victim killed by signal 9" <<<"$summary"; } ||
       { [ "$fault" = STOP ] && grep -q "rank $victim was stopped by signal" <<<"$summary"; }; then
      named=$((named + 1)); by_mode_named[$mode]=$(( ${by_mode_named[$mode]:-0} + 1 ))
    else
      echo "# drill $d: wrong name ($fault rank $victim): $summary" >&2
    fi
  fi
  if [ -n "$vpid" ]; then # each survivor's first communication error: does it name the victim?
    for r in $(seq 0 $((ranks - 1))); do
      [ "$r" = "$victim" ] && continue
      first=$(grep -m1 -E "^\[$r\] .*seq [0-9]+:" "$log")
      [ -z "$first" ] && continue
      surv_total[$fault]=$(( ${surv_total[$fault]:-0} + 1 ))
      if grep -qE "(peer|rank) $victim([^0-9]|\$)" <<<"${first#\[$r\] }"; then
        surv_named[$fault]=$(( ${surv_named[$fault]:-0} + 1 ))
      else
        echo "# drill $d: survivor $r does not name rank $victim ($fault): ${first:0:300}" >&2
      fi
    done
  fi
  l=$(shm_count)
  if [ "$l" -gt "$leak0" ]; then leaks=$((leaks + l - leak0)); leak0=$l; fi
  printf "  %4d %-5s %-5s %8s %6s %7.3f %5s  %s\n" "$d" "$mode" "$fault" "$size" "$victim" \
    "$(awk -v m="$at_ms" 'BEGIN { print m / 1000 }')" "$rc" "${summary#shoal launch: }"
  [ -n "$out" ] && cp "$log" "$out.drill-$d.log" 2>/dev/null
done
echo
echo "# drills $drills: faults that hit a running job $counted (missed: victim not found $missed)"
echo "# hangs past the deadline: $hang; silent wrong results: $wrong; leaked /dev/shm segments: $leaks"
pct=$(awk -v a="$named" -v b="$counted" 'BEGIN { printf "%.1f", b ? 100 * a / b : 0 }')
echo "# right rank named by the launcher: $named of $counted ($pct %)"
for m in "${modes[@]}"; do echo "#   $m: ${by_mode_named[$m]:-0} of ${by_mode_counted[$m]:-0}"; done
for f in KILL STOP; do
  pct=$(awk -v a="${surv_named[$f]:-0}" -v b="${surv_total[$f]:-0}" 'BEGIN { printf "%.1f", b ? 100 * a / b : 0 }')
  echo "# survivors naming the victim ($f): ${surv_named[$f]:-0} of ${surv_total[$f]:-0} ($pct %)"
done
