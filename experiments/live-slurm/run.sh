#!/bin/bash
# The live workload on Slurm, one scheduler per run: N `shoal train` jobs
# (workload.py: 1/2/4 workers, mlp and cnn, heavy-tailed lengths, Poisson
# arrivals) on an 8-host, 2-rack testbed with Slurm (one emulated GPU and a
# CPU limit per host), scheduled either by Slurm itself (SCHED=slurm:
# sched/backfill, FIFO priority; every job released at once with its node count
# and a time limit of twice its expected length plus a minute, as users give
# one) or by `shoal sched serve --policy SCHED` (the shoal policy decides
# placement, preemption and size). Per job: submit time, runs (from the job's
# own log), end; then average JCT, makespan, GPU utilization.
# With ACCOUNTING=1 the testbed's Slurm runs with accounting (slurmdbd, fair-share
# priority) and OTHER=K plain jobs of a second user (nobody, account other: one
# node, OTHER_S seconds of sleep each) arrive at random over the window beside
# the workload's; they are nobody's to schedule but Slurm's and hold their node.
#   run.sh SCHED [OUT_DIR]     env: SHOAL (build/shoal), JOBS (30), SEED (8), CPU (0.2), WINDOW (240),
#                              THROUGHPUTS (experiments/live-slurm/throughputs.json), NAME (live),
#                              ACCOUNTING (0), OTHER (0), OTHER_S (30), MAX_TIME (1700),
#                              SCALE (1: every job's length x SCALE, workload.py --scale),
#                              PS (0: the fraction of parameter-server jobs, workload.py --ps; `shoal submit --servers`),
#                              DATA (a directory to keep Fashion-MNIST unpacked in; default: a temporary one),
#                              HOSTS (8), GPUS (1: emulated GPUs per host; the CPU limit CPU is per host, shared by
#                              the jobs on it; utilization then counts hosts held, not GPUs)
set -u
here=$(cd "$(dirname "$0")" && pwd)
case ${1:-} in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;; -*) echo "run.sh: unknown option $1 (--help)" >&2; exit 2;; esac
sched=${1:?scheduler: slurm or a shoal policy (tiresias:..., elastic:..., larr:..., srtf, fifo)}
S=$(realpath "${SHOAL:-build/shoal}")
tag=${sched%%:*}
out=$(realpath -m "${2:-build/experiments/live-slurm/$tag}")
N=${JOBS:-30} SEED=${SEED:-8} CPU=${CPU:-0.2} NAME=${NAME:-live} HOSTS=${HOSTS:-8} GPUS=${GPUS:-1}
TP=$(realpath "${THROUGHPUTS:-$here/throughputs.json}")
DATA=${DATA:-} keep_data=1 # Fashion-MNIST unpacked (54 MB): in DATA if given (kept), else a temporary directory removed at exit
[ -n "$DATA" ] || { DATA=$(mktemp -d /tmp/shoal-fmnist-XXXXXX) && keep_data=0; } || exit 1
GRACE=${GRACE:-5} RESTART=${RESTART_COST:-10} TICK=${TICK:-0.5} WINDOW=${WINDOW:-240}
ACCOUNTING=${ACCOUNTING:-0} OTHER=${OTHER:-0} OTHER_S=${OTHER_S:-30} MAX_TIME=${MAX_TIME:-1700}
rm -rf "$out"; mkdir -p "$out" "$DATA" || exit 1
for f in /usr/share/datasets/fashion-mnist/*-ubyte.gz; do
  b=$(basename "$f" .gz); [ -s "$DATA/$b" ] || gunzip -c "$f" > "$DATA/$b" || exit 1
done
/usr/bin/python3 "$here/workload.py" "$TP" "$out" --jobs "$N" --seed "$SEED" --window "$WINDOW" --scale "${SCALE:-1}" --ps "${PS:-0}" | tee "$out/workload.txt"
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  "$S" testbed down --name "$NAME" > /dev/null 2>&1
  [ "$keep_data" = 1 ] || rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
uptime > "$out/uptime"
"$S" testbed up --name "$NAME" --hosts $HOSTS --racks 2 --rate 1gbit --oversub 2 --slurm --gpus "$GPUS" \
  $([ "$ACCOUNTING" = 1 ] && echo --accounting) > "$out/up.log" || exit 1
for h in $(seq 0 $((HOSTS - 1))); do "$S" testbed set --name "$NAME" "h$h" --cpu "$CPU" > /dev/null || exit 1; done
X() { "$S" testbed exec --name "$NAME" h0 -- "$@"; }
if [ "$sched" != slurm ]; then
  "$S" sched serve --testbed "$NAME" --policy "$sched" --journal "$out/journal" --tick "$TICK" --grace "$GRACE" \
    --restart-cost "$RESTART" --throughputs "$TP" --gpu testbed --raw-spread --until-done "$N" --max-time "$MAX_TIME" \
    > "$out/serve.log" 2>&1 &
  pid=$!
fi
t0=$(date +%s.%N)
echo "$t0" > "$out/t0"
if [ "$OTHER" -gt 0 ]; then # the second user's plain jobs, at seeded random times over the window
  "$here/other-times.sh" "$SEED" "$WINDOW" "$OTHER" | while read -r at; do
    sleep "$(awk -v a="$at" -v t0="$t0" -v n="$(date +%s.%N)" 'BEGIN { d = t0 + a - n; print (d > 0 ? d : 0) }')"
    X sbatch --parsable --uid=nobody -A other -N 1 -o /dev/null --wrap "sleep $OTHER_S" >> "$out/other-submitted"
  done &
fi
while read -r i arr g lo hi model epochs subset work expect servers; do
  case $i in \#*) continue;; esac
  ps=(); [ "${servers:-0}" -gt 0 ] && ps=(--servers "$servers")
  now=$(date +%s.%N)
  wait_s=$(awk -v a="$arr" -v t0="$t0" -v n="$now" 'BEGIN { d = t0 + a - n; print (d > 0 ? d : 0) }')
  sleep "$wait_s"
  id=$("$S" submit --testbed "$NAME" --gpus "$g" --min "$lo" --max "$hi" --model "$model" --work "$work" --name "j$i" "${ps[@]}" \
       --output "$out/%j.out" -- "$here/trainjob.sh" "$S" "$DATA" "$out" "$model" "$epochs" "$subset") || exit 1
  echo "$id $i $g $lo $hi $model $work $expect $(date +%s.%N)" >> "$out/submitted"
  if [ "$sched" = slurm ]; then
    lim=$(awk -v e="$expect" 'BEGIN { printf "%d", (2 * e + 60 + 59) / 60 }')
    X scontrol update JobId="$id" NumNodes="$g-$g" NumTasks="$g" TimeLimit="$lim" StartTime=now > /dev/null &&
      X scontrol release "$id" || exit 1
  fi
done < "$out/jobs.txt"
if [ -n "$pid" ]; then
  wait "$pid"; echo "controller exit $?" >> "$out/serve.log"; pid=
else
  # Slurm alone: until every job ended (bounded)
  for _ in $(seq 3400); do
    left=$(X squeue -h -t PD,R,CG,CF -o %i | wc -l)
    [ "$left" -eq 0 ] && break
    sleep 0.5
  done
  X squeue -t all -o '%i %j %T %r %M %D' > "$out/squeue.txt"
fi
"$S" testbed down --name "$NAME" > /dev/null
uptime >> "$out/uptime"
/usr/bin/python3 "$here/summary.py" "$out" "$HOSTS" "$sched" | tee "$out/result"
