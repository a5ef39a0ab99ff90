#!/bin/sh
# A job that checkpoints: STEPS steps of DT seconds each; progress is kept in
# DIR/<SLURM_JOB_ID>.ckpt (rank 0 writes it). On SIGUSR1 (the controller's
# checkpoint request) or SIGTERM it saves and exits 75 ("checkpointed, requeue
# me", as `shoal train --preemptible` does); a requeued run resumes
# from the saved step. Each run appends "run <restart> <start step> <nodes>"
# and, at the end, "done <time>" to DIR/<SLURM_JOB_ID>.log. With REQ, a step
# takes DT * REQ / nodes seconds: the job's fixed work scales linearly with
# the nodes it is given (an emulation of a data-parallel job's speed-up; the
# steps are sleeps, not computation).
#   ckjob.sh DIR STEPS DT [REQ]
dir=$1 steps=$2 dt=$3 req=${4:-}
[ -n "$req" ] && dt=$(awk -v d="$dt" -v r="$req" -v n="${SLURM_NNODES:-1}" 'BEGIN { printf "%.3f", d * r / n }')
id=${SLURM_JOB_ID:?not in a Slurm job}
ck=$dir/$id.ckpt
rank=${SLURM_PROCID:-0}
i=$(cat "$ck" 2>/dev/null || echo 0)
# (the trap before the run line: a checkpoint request may come as soon as the run is seen)
save() { [ "$rank" = 0 ] && echo "$i" > "$ck.tmp" && mv "$ck.tmp" "$ck"; exit 75; }
trap save USR1 TERM
[ "$rank" = 0 ] && echo "run ${SLURM_RESTART_COUNT:-0} $i ${SLURM_JOB_NODELIST:-?} ${SLURM_NNODES:-1}" >> "$dir/$id.log"
while [ "$i" -lt "$steps" ]; do
  sleep "$dt" & wait $!
  i=$((i + 1))
done
if [ "$rank" = 0 ]; then echo "$i" > "$ck"; echo "done $(date +%s.%N)" >> "$dir/$id.log"; fi
