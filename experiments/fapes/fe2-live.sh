#!/bin/bash
# FE2 live: training and inference sharing the testbed's Slurm, one policy per run.
# Hosts: TRAIN (VC_train, partition train) + INFER (VC_infer, partition infer) emulated hosts with one GPU
# and a CPU limit each (the default partition holds both sides: a borrower grows by a restart into it), and
# one front host outside Slurm (drained) for the router (`shoal serve --router`) and the load generator.
# Training: experiments/live-slurm/workload.py's `shoal train` jobs (mlp and cnn, 1-4 workers, three
# quarters elastic), submitted to partition train at their arrival times and placed by `shoal sched serve`.
# Inference: `shoal serve` replicas of a CNN (one per VC_infer host, each a Slurm job that joins the router),
# and `shoal loadgen` replaying the Azure code trace (SPEEDUP times faster, RATE_SCALE times the requests,
# ROWS images a request) against the router, open loop.
#   static  INFER replicas for the whole run; training by `--policy fifo` (rigid, FIFO) on VC_train
#   pollux  INFER replicas for the whole run; training by `--policy elastic` (grows and shrinks jobs)
#   reactive  training by `--policy elastic`, and the controller loans as fapes does, but the replicas wanted are
#           reactive threshold autoscaling's (`--loan-autoscale reactive`: the utilization of the requests that
#           arrived in the last 10 s between 0.4 and 0.8, a decision every 10 s): no forecast, no waiting requests
#   fapes   training by `--policy elastic`, and the controller loans: replicas started when the forecast of the
#           requests arriving (counted since its last decision, a second before) or the waiting requests need them (counted with the replicas' own measured seconds a request, which
#           they report through the router; SERVICE until the first report) plus SPARE ready ones, idle VC_infer
#           hosts lent to running elastic jobs, reclaimed (reactive and fapes: the jobs are submitted --leavable, a
#           reclaim shrinks the borrower in place at an iteration boundary; a lend grows it by a restart)
# `fe2-live.sh --post POLICY OUT` summarizes the run in OUT again (no run). Per run (OUT): jobs.csv and result (experiments/live-slurm/summary.py: JCT from each job's submission to
# its "exit 0"), timeline.csv (loadgen, one row per minute: P99, SLO met), requests.csv (each request's
# scheduled time and latency), replicas.csv (the router's live replicas and their mean reported seconds a request,
# every 2 s), serve.log (the controller),
# fe2.txt (one line: avg JCT, SLO attainment per live minute and per trace minute, goodput = the jobs' work in
# worker-steps / the makespan), sim.txt (experiments/fapes/fe2-sim.sh: the simulator on the same workload). A trace minute is 60 / SPEEDUP s of the run (3 s at 20): the requests the trace
# sends in one minute, so the run's DURATION of 180 s holds the trace hour's 60 SLO minutes; its P99 is the
# nearest rank (ceil(0.99 n)-th latency, a failed request counting as infinite), as the loadgen's per window. Needs root; about DURATION + 1 min. The defaults
# are a contended workload: 10 jobs, 650 GPU-s at their requested sizes arriving within 81 s on 4 GPUs,
# beside the whole trace hour (3,600 s / SPEEDUP 20).
#   fe2-live.sh POLICY [OUT]  env: SHOAL (build/shoal), JOBS (10), SEED (8), WINDOW (60), SCALE (0.5),
#     CPU (0.2), TRAIN (4), INFER (3), SPEEDUP (20), DURATION (180: load seconds), RATE_SCALE (0.1),
#     ROWS (64), SLO_MS (500), SERVICE (0.05: seconds a request on one replica until the replicas report theirs),
#     SPARE (1: fapes' replicas ready beyond the need), HOLD (20), NAME (svfe),
#     PORT (35001), MAX_TIME (420), DATA (Fashion-MNIST unpacked; default a temporary directory)
set -u
here=$(cd "$(dirname "$0")" && pwd)
live=$here/../live-slurm
post=0; [ "${1:-}" = --post ] && { post=1; shift; }
case ${1:-} in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;; -*|"") echo "fe2-live.sh: POLICY: static, pollux, reactive or fapes (--help)" >&2; exit 2;; esac
policy=$1
case $policy in static) tpol=fifo;; pollux|reactive|fapes) tpol=elastic;; *) echo "fe2-live.sh: unknown policy '$policy' (static, pollux, reactive, fapes)" >&2; exit 2;; esac
loans=0; case $policy in reactive|fapes) loans=1;; esac
S=$(realpath "${SHOAL:-build/shoal}")
out=$(realpath -m "${2:-build/experiments/fapes-fe2-live/$policy}")
N=${JOBS:-10} SEED=${SEED:-8} WINDOW=${WINDOW:-60} SCALE=${SCALE:-0.5} CPU=${CPU:-0.2}
TRAIN=${TRAIN:-4} INFER=${INFER:-3} SPEEDUP=${SPEEDUP:-20} DURATION=${DURATION:-180} RATE_SCALE=${RATE_SCALE:-0.1}
ROWS=${ROWS:-64} SLO_MS=${SLO_MS:-500} SERVICE=${SERVICE:-0.05} SPARE=${SPARE:-1} HOLD=${HOLD:-20} NAME=${NAME:-svfe}
PORT=${PORT:-35001} RPORT=35100 MAX_TIME=${MAX_TIME:-420} RETRIES=${RETRIES:-50}
TP=$(realpath "$live/throughputs.json") REQ=$(realpath "${REQUESTS:-../shared/data/azure-llm-2023/code.csv}")
HOSTS=$((TRAIN + INFER + 1))
if [ $post = 0 ]; then # the run (--post: only the summary of the run in OUT, below)
DATA=${DATA:-} keep_data=1
[ -n "$DATA" ] || { DATA=$(mktemp -d /tmp/shoal-fmnist-XXXXXX) && keep_data=0; } || exit 1
rm -rf "$out"; mkdir -p "$out" "$DATA" || exit 1
for f in /usr/share/datasets/fashion-mnist/*-ubyte.gz; do
  b=$(basename "$f" .gz); [ -s "$DATA/$b" ] || gunzip -c "$f" > "$DATA/$b" || exit 1
done
/usr/bin/python3 "$live/workload.py" "$TP" "$out" --jobs "$N" --seed "$SEED" --window "$WINDOW" --scale "$SCALE" | tee "$out/workload.txt"
params=$(dirname "$out")/cnn.params # the served model, trained once per output tree
[ -s "$params" ] || "$S" train --model cnn --epochs 1 --train-subset 6000 --test-subset 500 --data "$DATA" --quiet \
  --params-out "$params" > /dev/null || exit 1
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  "$S" testbed down --name "$NAME" > /dev/null 2>&1
  [ "$keep_data" = 1 ] || rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
uptime > "$out/uptime"
"$S" testbed down --name "$NAME" > /dev/null 2>&1
timeout 120 "$S" testbed up --name "$NAME" --hosts $HOSTS --racks 1 --rate 1gbit --slurm --gpus 1 > "$out/up.log" 2>&1 ||
  { cat "$out/up.log"; exit 1; }
X() { timeout 60 "$S" testbed exec --name "$NAME" h0 -- "$@"; }
nodes=($(X sinfo -h -N -o %N | sort -u -V))
[ ${#nodes[@]} -eq $HOSTS ] || { echo "fe2-live.sh: Slurm shows ${#nodes[@]} nodes, not $HOSTS" >&2; exit 1; }
front=${nodes[$((HOSTS - 1))]}
trainl=$(IFS=,; echo "${nodes[*]:0:$TRAIN}") inferl=$(IFS=,; echo "${nodes[*]:$TRAIN:$INFER}")
X scontrol create PartitionName=train Nodes="$trainl" State=UP > /dev/null || exit 1
X scontrol create PartitionName=infer Nodes="$inferl" State=UP > /dev/null || exit 1
X scontrol update NodeName="$front" State=DRAIN Reason=front > /dev/null || exit 1
for h in $(seq 0 $((HOSTS - 2))); do "$S" testbed set --name "$NAME" "h$h" --cpu "$CPU" > /dev/null || exit 1; done
fh=h$((HOSTS - 1))
faddr=$("$S" testbed exec --name "$NAME" $fh -- hostname -I | awk '{print $1}')
router=http://$faddr:$PORT
"$S" testbed exec --name "$NAME" $fh -- "$S" serve --router --port "$PORT" --health-every 0.1 > "$out/router.log" 2>&1 &
pids+=($!)
replica="$S serve --model cnn --params $params --port $RPORT --max-batch 64"
if [ $loans = 0 ]; then # VC_infer: one replica per host for the whole run
  for n in ${nodes[@]:$TRAIN:$INFER}; do
    X sbatch --parsable -p infer -w "$n" -o "$out/replica-%j.out" --export=ALL,SHOAL_SERVE_ROUTER="$router" \
      --wrap "exec $replica" >> "$out/replicas-submitted" || exit 1
  done
fi
router_stats() { # KEY...: their values in /router/stats, comma-separated (0 where unanswered)
  "$S" testbed exec --name "$NAME" $fh -- curl -s -m 2 "localhost:$PORT/router/stats" |
    /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); print(",".join(str(j.get(k, 0)) for k in sys.argv[1:]))' "$@" 2>/dev/null ||
    (IFS=,; a=("${@/*/0}"); echo "${a[*]}")
}
live_replicas() { router_stats live_replicas; }
want=$([ $loans = 1 ] && echo 0 || echo "$INFER")
for _ in $(seq 120); do [ "$(live_replicas)" -ge "$want" ] && break; sleep 0.5; done
[ "$(live_replicas)" -ge "$want" ] || { echo "fe2-live.sh: the router has not $want live replicas" >&2; exit 1; }
loan=()
[ $loans = 1 ] && loan=(--loan-from infer --loan-router "$router" --loan-replica "$replica"
  --loan-service "$SERVICE" --loan-slo "$(awk -v m="$SLO_MS" 'BEGIN { print m / 1000 }')" --loan-hold "$HOLD" --loan-every 1)
[ "$policy" = reactive ] && loan+=(--loan-autoscale reactive --loan-every 10)
[ "$policy" = fapes ] && loan+=(--loan-spare "$SPARE")
"$S" sched serve --testbed "$NAME" --partition train --policy "$tpol" --journal "$out/journal" --tick 0.5 --grace 5 \
  --restart-cost 10 --retries "$RETRIES" --throughputs "$TP" --gpu testbed --raw-spread --until-done "$N" --max-time "$MAX_TIME" "${loan[@]}" \
  > "$out/serve.log" 2>&1 &
cpid=$!
pids+=($cpid)
t0=$(date +%s.%N)
echo "$t0" > "$out/t0"
"$S" testbed exec --name "$NAME" $fh -- "$S" loadgen --url "$router" --model cnn --rows "$ROWS" --trace "$REQ" \
  --speedup "$SPEEDUP" --rate-scale "$RATE_SCALE" --duration "$DURATION" --slo-ms "$SLO_MS" --window 60 \
  --timeline "$out/timeline.csv" --requests-csv "$out/requests.csv" --data "$DATA" > "$out/loadgen.log" 2>&1 &
lpid=$!
pids+=($lpid)
( while kill -0 $cpid 2>/dev/null; do
    echo "$(awk -v t0="$t0" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - t0 }'),$(router_stats live_replicas service_s)"; sleep 2
  done ) > "$out/replicas.csv" &
pids+=($!)
# the router's live replicas every 0.2 s, wall clock (reclaims.txt: each reclaim's time to a serving replica)
"$S" testbed exec --name "$NAME" $fh -- bash -c "for i in \$(seq $(( (MAX_TIME + 60) * 5 ))); do
  echo \"\$(date +%s.%N) \$(curl -s -m 1 localhost:$PORT/router/stats | grep -o '\"live_replicas\":[0-9]*' | cut -d: -f2)\"
  sleep 0.2; done" > "$out/live.txt" 2>/dev/null &
pids+=($!)
leave=() leave_train=() # loaning: a borrower gives a lent host back in place (its rank there leaves at an iteration boundary)
[ $loans = 1 ] && leave=(--leavable) leave_train=(--on-failure shrink --grow-every 0 --leavable)
while read -r i arr g lo hi model epochs subset work expect _; do
  case $i in \#*) continue;; esac
  sleep "$(awk -v a="$arr" -v t0="$t0" -v n="$(date +%s.%N)" 'BEGIN { d = t0 + a - n; print (d > 0 ? d : 0) }')"
  id=$("$S" submit --testbed "$NAME" --partition train --gpus "$g" --min "$lo" --max "$hi" --model "$model" \
       --work "$work" --name "j$i" --output "$out/%j.out" "${leave[@]}" -- "$live/trainjob.sh" "$S" "$DATA" "$out" \
       "$model" "$epochs" "$subset" "${leave_train[@]}") || exit 1
  echo "$id $i $g $lo $hi $model $work $expect $(date +%s.%N)" >> "$out/submitted"
done < "$out/jobs.txt"
wait $lpid; echo "loadgen exit $?" >> "$out/loadgen.log"
wait $cpid; echo "controller exit $?" >> "$out/serve.log"
X squeue -t all -o '%i %j %P %T %N %k' > "$out/squeue.txt"
uptime >> "$out/uptime"
"$S" testbed down --name "$NAME" > /dev/null
fi
/usr/bin/python3 "$live/summary.py" "$out" "$TRAIN" "$policy" > "$out/result"
# Each reclaim (a step whose log line says "reclaimed"): from the step's start (its log time, controller clock ~
# t0, minus what the step took) to the first poll where the router has more live replicas than just before it.
[ -s "$out/live.txt" ] && /usr/bin/python3 - "$out" <<'PY' | tee "$out/reclaims.txt"
import os, re, sys
d = sys.argv[1]
t0 = float(open(os.path.join(d, "t0")).read())
live = []
for l in open(os.path.join(d, "live.txt")):
    f = l.split()
    if len(f) == 2: live.append((float(f[0]) - t0, int(f[1])))
out = []
for l in open(os.path.join(d, "serve.log")):
    m = re.match(r"\[\s*([0-9.]+)\] loaning: .*reclaimed from job.*\(the step took ([0-9.]+) s\)", l)
    if not m: continue
    start = float(m.group(1)) - float(m.group(2))
    before = [n for t, n in live if t <= start]
    if not before: continue
    up = [t for t, n in live if t > start and n > before[-1]]
    out.append((start, up[0] - start if up else None))
for s, v in out: print("reclaim at %.1f s: a replica serving after %s" % (s, "%.2f s" % v if v is not None else "never"))
v = [x for s, x in out if x is not None]
print("reclaims %d, serving after %s s (mean %s, max %s; polled every 0.2 s)" % (len(out), " ".join("%.2f" % x for x in v),
      "%.2f" % (sum(v) / len(v)) if v else "-", "%.2f" % max(v) if v else "-"))
PY
/usr/bin/python3 - "$out" "$policy" "$SPEEDUP" "$SLO_MS" <<'PY' | tee "$out/fe2.txt"
import csv, math, os, sys
d, pol, speedup, slo_ms = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
jobs = list(csv.DictReader(open(os.path.join(d, "jobs.csv"))))
done = [j for j in jobs if j["jct_s"]]
jct = sum(float(j["jct_s"]) for j in done) / len(done) if done else 0
span = max(float(j["end"]) for j in done) - min(float(j["submit"]) for j in jobs) if done else 0
work = sum(int(j["work"]) for j in done)
tl = list(csv.DictReader(open(os.path.join(d, "timeline.csv"))))
met = sum(int(r["slo_met"]) for r in tl if int(r["requests"]) > 0)
n = sum(1 for r in tl if int(r["requests"]) > 0)
req = sum(int(r["requests"]) for r in tl); fail = sum(int(r["failed"]) for r in tl)
win = {}  # trace minutes: windows of 60 / speedup s of scheduled time
for r in csv.DictReader(open(os.path.join(d, "requests.csv"))):
    lat = float(r["latency_ms"]) if r["status"] == "200" else math.inf
    win.setdefault(int(float(r["t_s"]) // (60 / speedup)), []).append(lat)
tmet = sum(1 for v in win.values() if sorted(v)[math.ceil(0.99 * len(v)) - 1] <= slo_ms)
print("%-8s avg_jct_s %6.1f  done %d/%d  makespan_s %6.1f  goodput %.2f worker-steps/s  slo_minutes %d/%d (%.1f%%)  "
      "slo_trace_minutes %d/%d (%.1f%%)  requests %d failed %d" % (pol, jct, len(done), len(jobs), span, work / span if span else 0,
      met, n, 100.0 * met / n if n else 0, tmet, len(win), 100.0 * tmet / len(win) if win else 0, req, fail))
PY
# the simulator's prediction for the same workload, its costs calibrated from the live runs (fe2-sim.sh)
SHOAL=$S REQUESTS=$REQ SPEEDUP=$SPEEDUP RATE_SCALE=$RATE_SCALE TRAIN=$TRAIN INFER=$INFER SLO_MS=$SLO_MS SERVICE=$SERVICE \
  HOLD=$HOLD SPARE=$SPARE "$here/fe2-sim.sh" "$out" "$policy"
