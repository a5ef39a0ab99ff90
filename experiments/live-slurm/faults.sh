#!/bin/bash
# Faults on the live controller (8 hosts, 2 racks, Slurm, policy srtf):
#  t=0    job G: 8 nodes, a command that cannot checkpoint (gracejob.sh, 20 s),
#         declared long (--work 1e6), so srtf preempts it for the jobs below;
#         it completes within the grace after the checkpoint request: it must
#         be reported completed and never run again;
#  t=18   12 `shoal train --preemptible` jobs (workload.py --jobs 12, 60 s window);
#  t=45   the controller is killed (SIGKILL); t=55 a new one starts on the journal;
#  t=75   a node under a running job is drained (resumed at t=150);
#  t=100  one rank (SLURM_PROCID 1) of a running multi-node job is killed (SIGKILL).
# Then check.py: every job completed or failed with a reason, none run again
# after it completed, no two runs of a job overlapping, the controller's start
# count equal to the runs the jobs logged.
#   faults.sh [OUT_DIR]       env: SHOAL, CPU (0.2), NAME (lfault), THROUGHPUTS,
#                           DATA (a directory to keep Fashion-MNIST unpacked in; default: a temporary one)
set -u
here=$(cd "$(dirname "$0")" && pwd)
S=$(realpath "${SHOAL:-build/shoal}")
out=$(realpath -m "${1:-build/experiments/live-slurm/faults}")
CPU=${CPU:-0.2} NAME=${NAME:-lfault} HOSTS=8
TP=$(realpath "${THROUGHPUTS:-$here/throughputs.json}")
DATA=${DATA:-} keep_data=1 # Fashion-MNIST unpacked (54 MB): in DATA if given (kept), else a temporary directory removed at exit
[ -n "$DATA" ] || { DATA=$(mktemp -d /tmp/shoal-fmnist-XXXXXX) && keep_data=0; } || exit 1
rm -rf "$out"; mkdir -p "$out" "$DATA" || exit 1
for f in /usr/share/datasets/fashion-mnist/*-ubyte.gz; do
  b=$(basename "$f" .gz); [ -s "$DATA/$b" ] || gunzip -c "$f" > "$DATA/$b" || exit 1
done
/usr/bin/python3 "$here/workload.py" "$TP" "$out" --jobs 12 --seed 7 --window 60 > "$out/workload.txt"
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  "$S" testbed down --name "$NAME" > /dev/null 2>&1
  [ "$keep_data" = 1 ] || rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
uptime > "$out/uptime"
"$S" testbed up --name "$NAME" --hosts $HOSTS --racks 2 --rate 1gbit --oversub 2 --slurm --gpus 1 > "$out/up.log" || exit 1
for h in $(seq 0 $((HOSTS - 1))); do "$S" testbed set --name "$NAME" "h$h" --cpu "$CPU" > /dev/null || exit 1; done
X() { "$S" testbed exec --name "$NAME" h0 -- "$@"; }
ev() { echo "$(date +%s.%N) $*" >> "$out/events"; echo "[fault] $*"; }
serve() {
  "$S" sched serve --testbed "$NAME" --policy srtf --journal "$out/journal" --tick 0.5 --grace 5 --restart-cost 10 \
    --throughputs "$TP" --gpu testbed --raw-spread --until-done 13 --max-time 900 >> "$out/serve.log" 2>&1 &
  pid=$!
}
serve
t0=$(date +%s.%N)
at() { sleep "$(awk -v a="$1" -v t0="$t0" -v n="$(date +%s.%N)" 'BEGIN { d = t0 + a - n; print (d > 0 ? d : 0) }')"; }
G=$("$S" submit --testbed "$NAME" --gpus 8 --work 1000000 --name grace --output "$out/%j.out" -- "$here/gracejob.sh" "$out" 20) || exit 1
echo "$G G 8 8 8 none 1000000 20 $(date +%s.%N)" >> "$out/submitted"
while read -r i arr g lo hi model epochs subset work expect; do
  case $i in \#*) continue;; esac
  at "$(awk -v a="$arr" 'BEGIN { print a + 18 }')"
  id=$("$S" submit --testbed "$NAME" --gpus "$g" --min "$lo" --max "$hi" --model "$model" --work "$work" --name "j$i" \
       --output "$out/%j.out" -- "$here/trainjob.sh" "$S" "$DATA" "$out" "$model" "$epochs" "$subset") || exit 1
  echo "$id $i $g $lo $hi $model $work $expect $(date +%s.%N)" >> "$out/submitted"
done < <(awk '$1 == "#" || $2 + 18 < 45' "$out/jobs.txt")
at 45; kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=; ev "controller killed (SIGKILL)"
echo "--- controller killed" >> "$out/serve.log"
while read -r i arr g lo hi model epochs subset work expect; do  # arrivals while it is down
  case $i in \#*) continue;; esac
  at "$(awk -v a="$arr" 'BEGIN { print a + 18 }')"
  id=$("$S" submit --testbed "$NAME" --gpus "$g" --min "$lo" --max "$hi" --model "$model" --work "$work" --name "j$i" \
       --output "$out/%j.out" -- "$here/trainjob.sh" "$S" "$DATA" "$out" "$model" "$epochs" "$subset") || exit 1
  echo "$id $i $g $lo $hi $model $work $expect $(date +%s.%N)" >> "$out/submitted"
done < <(awk '$1 != "#" && $2 + 18 >= 45 && $2 + 18 < 55' "$out/jobs.txt")
at 55; serve; ev "controller restarted"
while read -r i arr g lo hi model epochs subset work expect; do
  case $i in \#*) continue;; esac
  at "$(awk -v a="$arr" 'BEGIN { print a + 18 }')"
  id=$("$S" submit --testbed "$NAME" --gpus "$g" --min "$lo" --max "$hi" --model "$model" --work "$work" --name "j$i" \
       --output "$out/%j.out" -- "$here/trainjob.sh" "$S" "$DATA" "$out" "$model" "$epochs" "$subset") || exit 1
  echo "$id $i $g $lo $hi $model $work $expect $(date +%s.%N)" >> "$out/submitted"
done < <(awk '$1 != "#" && $2 + 18 >= 55' "$out/jobs.txt")
at 75
node=$(X squeue -h -t R -o '%N' | grep -v '^$' | head -n 1 | sed 's/\[\([0-9]*\).*/\1/; s/,.*//')
if [ -n "$node" ]; then X scontrol update NodeName="$node" State=DRAIN Reason=fault-drill; ev "drained $node"; fi
at 100
victim=
for p in $(pgrep -f "train --model .*--checkpoint $out/"); do
  tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx 'SLURM_PROCID=1' && { victim=$p; break; }
done
if [ -n "$victim" ]; then
  job=$(tr '\0' '\n' < /proc/$victim/environ | sed -n 's/^SLURM_JOB_ID=//p')
  kill -9 "$victim"; ev "killed rank 1 (pid $victim) of job $job"
else ev "no multi-node job running at t=100: no rank killed"; fi
at 150
[ -n "$node" ] && X scontrol update NodeName="$node" State=RESUME && ev "resumed $node"
wait "$pid"; echo "controller exit $?" >> "$out/serve.log"; pid=
X squeue -t all -o '%i %j %T %r %D %N' > "$out/squeue.txt"
"$S" testbed down --name "$NAME" > /dev/null
uptime >> "$out/uptime"
/usr/bin/python3 "$here/check.py" "$out" | tee "$out/result"
