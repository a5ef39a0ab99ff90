#!/bin/bash
# A job that cannot checkpoint or resize: it ignores the checkpoint request
# (USR1) and runs SECONDS; a preemption kills it after the grace and a later
# run starts from scratch. Logs like trainjob.sh ("run ...", "exit 0 ...").
#   gracejob.sh DIR SECONDS
dir=$1 secs=$2
id=${SLURM_JOB_ID:?not in a Slurm job}
rank=${SLURM_PROCID:-0}
[ "$rank" = 0 ] && echo "run ${SLURM_RESTART_COUNT:-0} $EPOCHREALTIME ${SLURM_NNODES:-1} ${SLURM_JOB_NODELIST:-?}" >> "$dir/$id.log"
trap '' USR1
sleep "$secs"
[ "$rank" = 0 ] && echo "exit 0 $EPOCHREALTIME" >> "$dir/$id.log"
exit 0
