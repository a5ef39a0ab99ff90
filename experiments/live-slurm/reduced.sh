#!/bin/bash
# The reduced live run (what `make test` checks): a 2-host testbed with Slurm,
# 3 short checkpointing jobs placed by `shoal sched serve --policy srtf`, one
# preemption (a short job arrives while a 2-node job runs), and the controller
# killed (SIGKILL) mid-run and started again on the same journal. Everything is
# torn down on exit, also on failure or interruption.
#   reduced.sh SHOAL_BIN TESTBED_NAME WORKDIR
set -u
S=${1:?shoal binary} NAME=${2:?testbed name} D=${3:?work dir}
here=$(cd "$(dirname "$0")" && pwd)
job=$here/ckjob.sh
mkdir -p "$D"
pid=
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  "$S" testbed down --name "$NAME" >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$S" testbed up --name "$NAME" --hosts 2 --slurm --gpus 1 || exit 1
sub() { "$S" submit --testbed "$NAME" --output "$D/%j.out" "$@"; }
A=$(sub --gpus 2 --work 1000000 --name A -- "$job" "$D" 16 0.5) || exit 1
"$S" sched serve --testbed "$NAME" --policy srtf --journal "$D/journal" --grace 1 --tick 0.5 --max-time 100 \
  >> "$D/serve.log" 2>&1 &
pid=$!
# wait until A runs, then submit the two short ones: srtf preempts A
for _ in $(seq 100); do grep -q "^run" "$D/$A.log" 2>/dev/null && break; sleep 0.2; done
sleep 1
B=$(sub --gpus 1 --work 10 --name B -- "$job" "$D" 8 0.5) || exit 1
C=$(sub --gpus 1 --work 20 --name C -- "$job" "$D" 8 0.5) || exit 1
# once B runs: kill the controller and start it again
for _ in $(seq 100); do grep -q "^run" "$D/$B.log" 2>/dev/null && break; sleep 0.2; done
sleep 0.5
kill -9 $pid; wait $pid 2>/dev/null
echo "--- controller killed" >> "$D/serve.log"
"$S" sched serve --testbed "$NAME" --policy srtf --journal "$D/journal" --grace 1 --tick 0.5 --until-done 3 \
  --max-time 100 >> "$D/serve.log" 2>&1 &
pid=$!
wait $pid; rc=$?; pid=
echo "$A $B $C" > "$D/ids"
exit $rc
