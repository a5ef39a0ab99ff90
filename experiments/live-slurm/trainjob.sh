#!/bin/bash
# One task of a live-workload job: `shoal train --preemptible` on Fashion-MNIST
# (bsp, one worker per node of the allocation, the rendezvous on its first
# node as `shoal submit`'s batch script sets it; a `shoal submit --servers S`
# job: --sync ps --servers S, one task per worker and per server where the
# controller placed them, SHOAL_PS_SERVERS=S set by the batch script). A checkpoint request (USR1,
# or Slurm's TERM) makes every rank stop after the same iteration, rank 0
# checkpoint to DIR/<job id>.ck and the task exit 75 ("requeue me"); the next
# run, at whatever node count, resumes from it. Rank 0 appends to
# DIR/<job id>.log "run <restart count> <time> <nodes> <node list>" when it
# starts and "exit <status> <time>" when it ends (status 0: finished); the times
# are bash's $EPOCHREALTIME (no process to fork while srun stops the step).
# Every rank appends "task <rank> <node> worker|server <restart count>".
#   trainjob.sh SHOAL DATA_DIR DIR MODEL EPOCHS TRAIN_SUBSET [shoal train options...]
shoal=$1 data=$2 dir=$3 model=$4 epochs=$5 subset=$6
shift 6
id=${SLURM_JOB_ID:?not in a Slurm job}
rank=${SLURM_PROCID:-0}
[ "$rank" = 0 ] && echo "run ${SLURM_RESTART_COUNT:-0} $EPOCHREALTIME ${SLURM_NNODES:-1} ${SLURM_JOB_NODELIST:-?}" >> "$dir/$id.log"
role=worker
if [ -n "${SHOAL_PS_SERVERS:-}" ]; then
  [ "$rank" -ge $((${SLURM_NTASKS:-1} - SHOAL_PS_SERVERS)) ] && role=server
  set -- --sync ps --servers "$SHOAL_PS_SERVERS" "$@"
fi
echo "task $rank ${SLURMD_NODENAME:-?} $role ${SLURM_RESTART_COUNT:-0}" >> "$dir/$id.log"
# The signals are shoal train's to handle (env gives them back their default action before it starts); this
# shell ignores them and only waits. A trap would end the wait early, and when shoal train ends in the same
# instant (a stop request during its start-up ends it at once with 75, and Slurm signals every process of the
# step together) bash loses the status: the task ended 143 or 138 instead of 75. USR2 (leave the job: a
# `shoal submit --leavable` job shrunk in place, with shoal train's --on-failure shrink --leavable) is ignored
# here and by a shoal train that does not take it.
trap '' USR1 TERM USR2
env --default-signal=USR1,TERM "$shoal" train --model "$model" --epochs "$epochs" --train-subset "$subset" \
  --test-subset 500 --data "$data" --batch 64 --lr 0.05 --preemptible --checkpoint "$dir/$id.ck" --quiet "$@" &
wait $!; rc=$?
[ "$rank" = 0 ] && echo "exit $rc $EPOCHREALTIME" >> "$dir/$id.log"
exit $rc
