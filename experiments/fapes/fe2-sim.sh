#!/bin/bash
# FE2 live against the simulator: `shoal sim loaning` on one finished fe2-live.sh run's workload (the same jobs'
# arrivals and GPUs, the same request trace, speed-up and scale, hosts, SLO, hold and spare replicas), with its
# costs calibrated from the live runs rather than assumed:
#   job lengths   each job's run time in the static run (rigid, at its requested GPUs: first run to exit 0) when
#                 STATIC (default: the run's sibling directory static/) holds one, else the measured-throughput
#                 table's estimate (jobs.txt)
#   service       the median of the replicas' own reported seconds a request over the run (replicas.csv), else
#                 SERVICE
#   resize        the mean pause of a resize in the run: a borrower's or a grown job's exit 75 (its checkpoint)
#                 to its next run's start (the jobs' logs); the simulator's --resize and --restart (a resize on
#                 Slurm is a checkpoint and a restart)
#   reclaim       the mean time from the controller's loan stop (its journal) to the borrower's checkpoint exit
#                 (the host is free then) plus REPLICA_START
#   interval      a trace minute (60 / SPEEDUP s): the live SLO is judged per trace minute
# Writes RUN/sim-trace.csv, RUN/sim.csv and RUN/sim.txt (one line: avg JCT, jobs, end, goodput, SLO per interval).
#   fe2-sim.sh RUN POLICY   env: the run's SHOAL, REQUESTS, SPEEDUP, RATE_SCALE, TRAIN, INFER, SLO_MS, SERVICE,
#     HOLD, SPARE (fe2-live.sh's defaults), STATIC, REPLICA_START (1: seconds from a free host to a serving replica)
set -u
case ${1:-} in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;; -*|"") echo "fe2-sim.sh: RUN POLICY (--help)" >&2; exit 2;; esac
out=$1 policy=${2:?fe2-sim.sh: RUN POLICY}
S=$(realpath "${SHOAL:-build/shoal}")
REQ=$(realpath "${REQUESTS:-../shared/data/azure-llm-2023/code.csv}")
SPEEDUP=${SPEEDUP:-20} RATE_SCALE=${RATE_SCALE:-0.1} TRAIN=${TRAIN:-4} INFER=${INFER:-3} SLO_MS=${SLO_MS:-500}
SERVICE=${SERVICE:-0.05} HOLD=${HOLD:-20} SPARE=${SPARE:-1} REPLICA_START=${REPLICA_START:-1}
STATIC=${STATIC:-$out/../static}
[ -s "$out/jobs.txt" ] || { echo "fe2-sim.sh: no jobs.txt in $out" >&2; exit 1; }
/usr/bin/python3 - "$out" "$STATIC" "$SERVICE" > "$out/sim-calibration.txt" <<'PY' || exit 1
import csv, glob, os, statistics, sys
out, static, service = sys.argv[1], sys.argv[2], float(sys.argv[3])
jobs = [l.split() for l in open(os.path.join(out, "jobs.txt")) if l.strip() and not l.startswith("#")]
length = {}  # job index -> its static run time
try:
    for r in csv.DictReader(open(os.path.join(static, "jobs.csv"))):
        if r["first_run"] and r["end"] and r["runs"] == "1":
            length[r["index"]] = float(r["end"]) - float(r["first_run"])
except OSError:
    pass
with open(os.path.join(out, "sim-trace.csv"), "w") as f:
    f.write("arrival,gpus,duration\n")
    for j in jobs:  # index arrival gpus min max model epochs subset work expected
        f.write("%s,%s,%.1f\n" % (j[1], j[2], length.get(j[0], float(j[9]))))
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
print("lengths %d/%d from %s service %.4f (%s) resize %.2f (%d pauses) free %.2f (%d reclaims or loans)" % (len(length),
      len(jobs), static, statistics.median(svc) if svc else service, "measured" if svc else "configured",
      statistics.mean(pauses) if pauses else 1.0, len(pauses), statistics.mean(frees) if frees else 0.5, len(frees)))
PY
read -r _ _ _ _ _ svc _ _ resize _ _ free _ < "$out/sim-calibration.txt"
"$S" sim loaning --trace "$out/sim-trace.csv" --requests "$REQ" --req-speedup "$SPEEDUP" --req-scale "$RATE_SCALE" \
  --gpus $((TRAIN + INFER)) --infer-gpus "$INFER" --service "$svc" --slo "$(awk -v m="$SLO_MS" 'BEGIN { print m / 1000 }')" \
  --hold "$HOLD" --spare "$SPARE" --resize "$resize" --restart "$resize" --replica-start "$REPLICA_START" \
  --reclaim "$(awk -v a="$free" -v b="$REPLICA_START" 'BEGIN { print a + b }')" --load-scale 1 \
  --interval "$(awk -v s="$SPEEDUP" 'BEGIN { print 60 / s }')" --check 1 --burst 1 --policy "$policy" --out "$out/sim" --csv > "$out/sim.csv" &&
  awk -F, -v p="$policy" 'NR == 2 { printf "sim %-3s avg_jct_s %6.1f  done %d/%d  end_s %6.1f  goodput %.2f GPU-eq  slo_minutes %.1f%% of %d\n",
    p, 3600 * $4, $3, $2, 3600 * $15, $11, 100 * $7, $8 }' "$out/sim.csv" | tee "$out/sim.txt"
