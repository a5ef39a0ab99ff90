#!/bin/bash
# FE2 live against the simulator: `shoal sim loaning` on one finished fe2-live.sh run's workload (the same jobs'
# arrivals, GPUs, elastic ranges, models and work, the same request trace, speed-up and scale, hosts, SLO, hold and
# spare replicas), trained and loaned as the live controller does, with its costs measured on the testbed:
#   throughput(n) each job's model's measured worker-steps/s on n hosts (TP, a speeds.sh table, one worker a host);
#                 scaled, with the start-up, by a least-squares fit on a finished live run's jobs that ran once on
#                 their requested GPUs (run time = start-up + the table's time / scale; STATIC: a run directory or a
#                 jobs.csv, default the run's sibling static/ when it holds one, else
#                 experiments/live-slurm/results/slurm-quiet-jobs.csv, a quiet run of the same kinds of jobs);
#                 RUN/sim-throughputs.json
#   start-up      a run's process start and data read before it trains: that fit's intercept (fewer than 3 jobs:
#                 the mean of SPEEDS' start-up column, the scale 1); paid by a job's first run (--startup) and by
#                 every restart and resize (a resize on Slurm is a checkpoint and a restart)
#   service       the median of the replicas' own reported seconds a request over the run (replicas.csv), else
#                 SERVICE
#   resize        the mean pause of a resize in the run: a borrower's or a grown job's exit 75 (its checkpoint)
#                 to its next run's start (the jobs' logs), else PAUSE; plus the start-up: the simulator's
#                 --resize and --restart
#   reclaim       the mean time from the controller's loan stop (its journal) to the borrower's checkpoint exit
#                 (the host is free then; else FREE) plus REPLICA_START
#   interval      a trace minute (60 / SPEEDUP s): the live SLO is judged per trace minute
#   policies      static: FIFO that starts any queued job that fits (the live fifo); pollux: the goodput
#                 allocation on VC_train; reactive and fapes: the goodput allocation, queued jobs started on VC_train
#                 only and loaned hosts growing running jobs (--partitions; reactive: --reactive-elastic)
# Writes RUN/sim-calibration.txt, RUN/sim-throughputs.json, RUN/sim.csv and RUN/sim.txt (one line: avg JCT, jobs, end, goodput, SLO per interval).
#   fe2-sim.sh RUN POLICY   env: the run's SHOAL, REQUESTS, SPEEDUP, RATE_SCALE, TRAIN, INFER, SLO_MS, SERVICE,
#     HOLD, SPARE (fe2-live.sh's defaults), STATIC, TP (experiments/live-slurm/throughputs-quiet.json), SPEEDS
#     (its speeds-quiet.txt), PAUSE (2.1) and FREE (0.25): the last measured live runs' means, used when the run's
#     logs have none; REPLICA_START (1: seconds from a free host to a serving replica)
set -u
case ${1:-} in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;; -*|"") echo "fe2-sim.sh: RUN POLICY (--help)" >&2; exit 2;; esac
out=$1 policy=${2:?fe2-sim.sh: RUN POLICY}
here=$(cd "$(dirname "$0")" && pwd)
S=$(realpath "${SHOAL:-build/shoal}")
REQ=$(realpath "${REQUESTS:-../shared/data/azure-llm-2023/code.csv}")
TP=$(realpath "${TP:-$here/../live-slurm/throughputs-quiet.json}") SPEEDS=$(realpath "${SPEEDS:-$here/../live-slurm/speeds-quiet.txt}")
SPEEDUP=${SPEEDUP:-20} RATE_SCALE=${RATE_SCALE:-0.1} TRAIN=${TRAIN:-4} INFER=${INFER:-3} SLO_MS=${SLO_MS:-500}
SERVICE=${SERVICE:-0.05} HOLD=${HOLD:-20} SPARE=${SPARE:-1} REPLICA_START=${REPLICA_START:-1}
PAUSE=${PAUSE:-2.1} FREE=${FREE:-0.25}
STATIC=${STATIC:-$out/../static}
[ -s "$STATIC/jobs.csv" ] || STATIC=$here/../live-slurm/results/slurm-quiet-jobs.csv
case $policy in static|pollux) flags=();; reactive) flags=(--partitions --reactive-elastic);; fapes) flags=(--partitions);;
  *) echo "fe2-sim.sh: unknown policy '$policy' (static, pollux, reactive, fapes)" >&2; exit 2;; esac
[ -s "$out/trace.csv" ] || { echo "fe2-sim.sh: no trace.csv (workload.py's) in $out" >&2; exit 1; }
/usr/bin/python3 - "$out" "$STATIC" "$SERVICE" "$TP" "$SPEEDS" "$PAUSE" "$FREE" > "$out/sim-calibration.txt" <<'PY' || exit 1
import csv, glob, json, os, re, statistics, sys
out, static, service, tp, speeds, pause0, free0 = sys.argv[1:8]
service, pause0, free0 = float(service), float(pause0), float(free0)
startups = [float(l.split()[5]) for l in open(speeds) if l.strip() and not l.startswith("model")]
startup = statistics.mean(startups)
table = json.load(open(tp))
def speed(model, n):  # the table's worker-steps/s on n hosts (one worker a host)
    cls = "testbed" if n == 1 else "testbed_unconsolidated"
    return table[cls]["('%s', %d)" % (model, n)]["null"]
xs, ys = [], []  # the calibration run's jobs that ran once on their requested GPUs: table seconds, run seconds
try:
    for r in csv.DictReader(open(static if static.endswith(".csv") else os.path.join(static, "jobs.csv"))):
        if r["first_run"] and r["end"] and r["runs"] == "1" and r["nodes_per_run"] == r["gpus"]:
            xs.append(int(r["work"]) / speed(r["model"], int(r["gpus"])))
            ys.append(float(r["end"]) - float(r["first_run"]))
except (OSError, KeyError, ValueError):
    pass
scale, fitted = 1.0, False
if len(xs) >= 3 and max(xs) > min(xs):  # least squares: run = start-up + table seconds / scale
    mx, my = statistics.mean(xs), statistics.mean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    if b > 0 and my - b * mx >= 0: scale, startup, fitted = 1 / b, my - b * mx, True
for cls in table.values():
    for v in cls.values(): v["null"] *= scale
json.dump(table, open(os.path.join(out, "sim-throughputs.json"), "w"), indent=1)
svc = []
try:
    for l in open(os.path.join(out, "replicas.csv")):
        p = l.strip().split(",")
        if len(p) >= 3 and float(p[2]) > 0: svc.append(float(p[2]))
except (OSError, ValueError):
    pass
pauses = []  # exit 75 (checkpoint) -> the next run's start, in every job's log
for log in glob.glob(os.path.join(out, "*.log")):
    last = None
    for l in open(log, errors="replace"):
        f = l.split()
        if len(f) >= 3 and f[0] == "exit": last = float(f[2]) if f[1] == "75" else None
        elif len(f) >= 3 and f[0] == "run" and last is not None: pauses.append(float(f[2]) - last); last = None
frees = []  # the controller's loan stop (journal: "stop ID T loan", T after its epoch) -> job ID's next exit 75
try:
    epoch, stops = 0.0, []
    for l in open(os.path.join(out, "journal"), errors="replace"):
        f = l.split()
        if "epoch" in f: epoch = float(f[f.index("epoch") + 1])
        elif len(f) >= 6 and f[2] == "stop" and f[5] == "loan": stops.append((f[3], float(f[4])))
    for sid, t in stops:
        ex = [float(f[2]) for f in (x.split() for x in open(os.path.join(out, sid + ".log")))
              if len(f) >= 3 and f[0] == "exit" and f[1] == "75" and float(f[2]) >= epoch + t]
        if ex: frees.append(min(ex) - epoch - t)
except (OSError, ValueError, IndexError):
    pass
print("service %.4f (%s) pause %.2f (%d measured) free %.2f (%d measured) startup %.2f speed x%.2f (%s)" % (
      statistics.median(svc) if svc else service, "measured" if svc else "configured",
      statistics.mean(pauses) if pauses else pause0, len(pauses), statistics.mean(frees) if frees else free0, len(frees),
      startup, scale, "fitted on %d jobs of %s" % (len(xs), static) if fitted else "start-up: the mean of " + speeds))
PY
read -r _ svc _ _ pause _ _ _ free _ _ _ startup _ < "$out/sim-calibration.txt"
restart=$(awk -v a="$pause" -v b="$startup" 'BEGIN { print a + b }')
"$S" sim loaning --trace "$out/trace.csv" --throughputs "$out/sim-throughputs.json" --startup "$startup" "${flags[@]}" \
  --requests "$REQ" --req-speedup "$SPEEDUP" --req-scale "$RATE_SCALE" \
  --gpus $((TRAIN + INFER)) --infer-gpus "$INFER" --service "$svc" --slo "$(awk -v m="$SLO_MS" 'BEGIN { print m / 1000 }')" \
  --hold "$HOLD" --spare "$SPARE" --resize "$restart" --restart "$restart" --replica-start "$REPLICA_START" \
  --reclaim "$(awk -v a="$free" -v b="$REPLICA_START" 'BEGIN { print a + b }')" --load-scale 1 \
  --interval "$(awk -v s="$SPEEDUP" 'BEGIN { print 60 / s }')" --check 1 --burst 1 --policy "$policy" --out "$out/sim" --csv > "$out/sim.csv" &&
  awk -F, -v p="$policy" 'NR == 2 { printf "sim %-3s avg_jct_s %6.1f  done %d/%d  end_s %6.1f  goodput %.2f GPU-eq  slo_minutes %.1f%% of %d\n",
    p, 3600 * $4, $3, $2, 3600 * $15, $11, 100 * $7, $8 }' "$out/sim.csv" | tee "$out/sim.txt"
