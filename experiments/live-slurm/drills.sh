#!/bin/bash
# Fault drills of the live controller on the testbed's Slurm with accounting (4 hosts, 1 GPU each,
# policy srtf, checkpointing ckjob.sh jobs; another user's plain job on h3):
#  1. the controller killed with SIGKILL at random points ROUNDS times (default 40, at least 20); after each
#     kill its journal's last record is cut at an offset (round k cuts at offset k mod the record's length,
#     so the rounds go through every byte offset of the records they meet), then a new one starts on it;
#  2. a second controller (its own journal, another identity) started while the first runs: refused;
#  3. slurmctld stopped for OUTAGE s (default 60: long enough that Slurm's commands fail) while jobs run;
#  4. a slurmd killed with SIGKILL while its node runs a job, started again 20 s later.
# Then drills_check.py: every job completed exactly once (its own log), no job ran twice at once and no two
# runs shared a node at once (sacct --duplicates: every run of every job, the other user's too), and every
# fault is named in the controller's log. Everything is torn down on exit, also on failure.
#   drills.sh [OUT_DIR]     env: SHOAL (build/shoal), NAME (ldrill), ROUNDS (40), OUTAGE (60), SEED (1)
set -u
here=$(cd "$(dirname "$0")" && pwd)
S=$(realpath "${SHOAL:-build/shoal}")
out=$(realpath -m "${1:-build/experiments/live-slurm/drills}")
NAME=${NAME:-ldrill} ROUNDS=${ROUNDS:-40} OUTAGE=${OUTAGE:-60} SEED=${SEED:-1}
[ "$ROUNDS" -ge 1 ] 2>/dev/null || { echo "drills.sh: ROUNDS=$ROUNDS: a count" >&2; exit 2; }
rm -rf "$out"; mkdir -p "$out" || exit 1
RANDOM=$SEED
pid=
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  "$S" testbed down --name "$NAME" > /dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ev() { echo "$(date +%s.%N) $*" >> "$out/events"; echo "[drill] $*"; }
"$S" testbed up --name "$NAME" --hosts 4 --slurm --gpus 1 --accounting > "$out/up.log" || exit 1
X() { timeout 60 "$S" testbed exec --name "$NAME" h0 -- "$@"; }
sub() { timeout 60 "$S" submit --testbed "$NAME" --output "$out/%j.out" "$@"; }
serve() { # [--id ID --journal FILE ...]: a controller in the background, appending to serve.log
  "$S" sched serve --testbed "$NAME" --policy srtf --journal "$out/journal" --id drill --tick 0.5 --grace 2 \
    --restart-cost 5 --max-time 600 "$@" >> "$out/serve.log" 2>&1 &
  pid=$!
}
kill9() { kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=; }
# the other user's plain job on h3, then 12 shoal jobs of 1 or 2 GPUs, 20-60 steps of 0.5 s
F=$(X sbatch --parsable --uid=nobody -A other -w "$NAME-h3" -o /dev/null --gres=gpu:1 --wrap 'sleep 90') || exit 1
echo "$F other" > "$out/submitted"
for k in $(seq 12); do
  g=$((1 + RANDOM % 2)) steps=$((20 + RANDOM % 41))
  id=$(sub --gpus "$g" --work $((steps * g)) --name "d$k" -- "$here/ckjob.sh" "$out" "$steps" 0.5) || exit 1
  echo "$id shoal" >> "$out/submitted"
done
serve; ev "controller started"
# 1. kill -9 at random points, the journal's last record cut after each kill
for r in $(seq 0 $((ROUNDS - 1))); do
  sleep "$(awk -v x=$RANDOM 'BEGIN { printf "%.2f", 0.6 + 2.4 * x / 32767 }')"
  kill9
  last=$(tail -n 1 "$out/journal"); len=${#last}
  size=$(stat -c %s "$out/journal")
  off=$((r % (len + 1)))
  [ "$off" -lt "$len" ] && truncate -s $((size - len - 1 + off)) "$out/journal"
  ev "round $r: controller killed (SIGKILL); journal's last record ($len bytes) cut at offset $off"
  echo "$r $len $off" >> "$out/cuts"
  echo "--- killed; last record cut at $off of $len" >> "$out/serve.log"
  serve
done
ev "kill rounds done"
sleep 2
# 2. a second controller while the first lives
"$S" sched serve --testbed "$NAME" --policy fifo --journal "$out/journal2" --id second --max-time 5 > "$out/second.log" 2>&1
echo "second controller exit $?" >> "$out/second.log"; ev "second controller tried"
# 3. slurmctld down for OUTAGE s, more work arriving meanwhile (held until Slurm answers again)
"$S" testbed daemon --name "$NAME" stop slurmctld >> "$out/events" 2>&1; ev "slurmctld stopped for $OUTAGE s"
sleep "$OUTAGE"
"$S" testbed daemon --name "$NAME" start slurmctld >> "$out/events" 2>&1; ev "slurmctld started"
for k in 13 14; do
  id=$(sub --gpus 1 --work 40 --name "d$k" -- "$here/ckjob.sh" "$out" 40 0.5) || exit 1
  echo "$id shoal" >> "$out/submitted"
done
# 4. a slurmd killed under a running job, started 20 s later
for _ in $(seq 100); do
  node=$(X squeue -h -t R -u root -o '%N' | grep -v '^$' | grep -v "$NAME-h3" | head -n 1 | sed 's/\[\([0-9]*\).*/\1/; s/,.*//; s/.*-h//')
  [ -n "$node" ] && break; sleep 0.3
done
if [ -n "$node" ]; then
  p=$(awk -v w="slurmd-h$node" '$1 == w { print $2 }' "/run/shoal-testbed/$NAME/slurm/pids")
  kill -9 "$p"; ev "slurmd-h$node (pid $p) killed (SIGKILL)"
  sleep 20
  "$S" testbed daemon --name "$NAME" start "slurmd-h$node" >> "$out/events" 2>&1; ev "slurmd-h$node started"
else ev "no job running: no slurmd killed"; fi
# the last controller runs until every shoal job ended
n=$(grep -c ' shoal$' "$out/submitted")
kill9; serve --until-done "$n"; wait "$pid"; echo "controller exit $?" >> "$out/serve.log"; pid=
for _ in $(seq 100); do [ "$(X squeue -h -j "$F" -o %T)" = "" ] || [ "$(X squeue -h -j "$F" -o %T)" = COMPLETED ] && break; sleep 1; done
X sacct -a -D -n -P -j "$(awk '{print $1}' "$out/submitted" | paste -sd,)" -o JobID,User,State,Start,End,NodeList > "$out/sacct.txt"
"$S" testbed down --name "$NAME" > /dev/null
/usr/bin/python3 "$here/drills_check.py" "$out" | tee "$out/result"
