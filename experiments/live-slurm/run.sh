#!/bin/bash
# The live workload: N checkpointing jobs (ckjob.sh; 1, 2 or 4 nodes requested,
# elastic range 1-4, 4-40 steps of DT s at the requested size, linear speed-up) with staggered arrivals on an 8-host, 2-rack testbed with
# Slurm, once per scheduler: Slurm's own (backfill, FIFO priority; the jobs are
# released at once with their node count) and shoal's policies through
# `shoal sched serve`. Prints average JCT, makespan and GPU utilization per
# scheduler (JCT from the submit time recorded here to the job's own "done").
#   run.sh [SHOAL_BIN] [N] [SCHEDULERS...]     default: build/shoal 30 slurm fifo srtf tiresias
set -u
S=${1:-build/shoal}; N=${2:-30}; shift 2 2>/dev/null
scheds=("$@"); [ ${#scheds[@]} -eq 0 ] && scheds=(slurm fifo srtf "tiresias:thresholds=20" "elastic:interval=10")
here=$(cd "$(dirname "$0")" && pwd)
job=$here/ckjob.sh NAME=lw$$ DT=0.5 HOSTS=8 GAP=${GAP:-1.0}
out=${OUT:-/tmp/shoal-live-workload}
mkdir -p "$out"
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; "$S" testbed down --name "$NAME" >/dev/null 2>&1; }
trap cleanup EXIT
trap 'exit 130' INT TERM
X() { "$S" testbed exec --name "$NAME" h0 -- "$@"; }
# the workload (seeded, the same for every scheduler): size steps
rand=12345
sizes=(); steps=()
for i in $(seq "$N"); do
  rand=$(( (rand * 1103515245 + 12345) % 2147483648 )); r=$(( rand / 65536 ))
  case $((r % 8)) in 0|1|2|3) g=1;; 4|5|6) g=2;; *) g=4;; esac
  rand=$(( (rand * 1103515245 + 12345) % 2147483648 )); r=$(( rand / 65536 ))
  s=$((4 + r % 37))
  sizes+=("$g"); steps+=("$s")
done
printf "%-26s %8s %10s %8s %6s\n" scheduler avg_jct_s makespan_s util jobs
for sc in "${scheds[@]}"; do
  d=$out/${sc%%:*}; rm -rf "$d"; mkdir -p "$d"
  "$S" testbed up --name "$NAME" --hosts $HOSTS --racks 2 --rate 1gbit --slurm --gpus 1 > "$d/up.log" || exit 1
  if [ "$sc" != slurm ]; then
    "$S" sched serve --testbed "$NAME" --policy "$sc" --journal "$d/journal" --grace 1 --tick 0.5 --until-done "$N" \
      --max-time 900 > "$d/serve.log" 2>&1 &
    pid=$!
  fi
  for i in $(seq 0 $((N - 1))); do
    g=${sizes[$i]} s=${steps[$i]}
    id=$("$S" submit --testbed "$NAME" --gpus "$g" --min 1 --max 4 --work "$s" --name "j$i" --output "$d/%j.out" -- \
      "$job" "$d" "$s" "$DT" "$g")
    echo "$id $g $s $(date +%s.%N)" >> "$d/submitted"
    if [ "$sc" = slurm ]; then
      X scontrol update JobId="$id" NumNodes="$g-$g" NumTasks="$g" StartTime=now >/dev/null && X scontrol release "$id"
    fi
    sleep "$GAP"
  done
  # wait for every job's "done" (bounded)
  for _ in $(seq 1800); do
    k=$(cat "$d"/*.log 2>/dev/null | grep -c '^done') ; [ "$k" -ge "$N" ] && break; sleep 0.5
  done
  [ -n "$pid" ] && { wait "$pid"; pid=; }
  "$S" testbed down --name "$NAME" > /dev/null
  /usr/bin/python3 - "$d" "$HOSTS" "$DT" > "$d/result" <<'PY'
import sys
d, hosts, dt = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
jct, first, last, work, n, miss = 0.0, None, 0.0, 0.0, 0, 0
for line in open(d + "/submitted"):
    jid, g, st, t = line.split()
    t = float(t); first = t if first is None else min(first, t)
    end = None
    try:
        for l in open("%s/%s.log" % (d, jid)):
            if l.startswith("done"): end = float(l.split()[1])
    except OSError: pass
    if end is None: miss += 1; continue
    n += 1; jct += end - t; last = max(last, end); work += int(g) * int(st) * dt
ms = last - first if n else 0
print("%.1f %.1f %.3f %d %d" % (jct / n if n else 0, ms, work / (hosts * ms) if ms > 0 else 0, n, miss))
PY
  read -r jct ms util n miss < "$d/result"
  printf "%-26s %8s %10s %8s %6s%s\n" "$sc" "$jct" "$ms" "$util" "$n" "$([ "$miss" -gt 0 ] && echo " ($miss unfinished)")"
done
