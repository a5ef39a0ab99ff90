#!/bin/bash
# Live against simulated: for every run.sh result under DIR (one directory per
# scheduler), the same workload (trace.csv) in `shoal sim` with the measured
# speed table and start/restart costs measured in the Slurm run, the
# scheduler's policy with the same parameters (Slurm's own: fifo, greedy
# backfill in arrival order without preemption), and again with the speeds the
# Slurm run's jobs actually had (sim2: throughputs-slurm-run.json). Prints one
# table and draws two SVGs: average JCT live and simulated per scheduler, and
# the live JCT CDFs.
#   compare.sh [DIR (build/experiments/live-slurm)] [FIGDIR (docs/figures)]
#   env: SHOAL (build/shoal), THROUGHPUTS, START_COST / RESTART_COST (s; default: measured)
set -u
here=$(cd "$(dirname "$0")" && pwd)
S=${SHOAL:-build/shoal} D=${1:-build/experiments/live-slurm} FIG=${2:-docs/figures}
TP=${THROUGHPUTS:-$here/throughputs.json}
order=(slurm fifo srtf tiresias-100 tiresias elastic larr)
dirs=()
for s in "${order[@]}"; do [ -s "$D/$s/result" ] && dirs+=("$s"); done
[ ${#dirs[@]} -gt 0 ] || { echo "compare.sh: no results under $D" >&2; exit 2; }
trace=$D/${dirs[0]}/trace.csv
# costs measured live: a run's wall time minus its training time at the table's speed
# (start: jobs of the Slurm run that ran once; restart: the extra time of jobs run more than once
# under the controller, per extra run)
costs=$(/usr/bin/python3 - "$D" "$TP" "${dirs[@]}" <<'PY'
import csv, json, re, sys
d, tp, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
t = json.load(open(tp))
sp = {}
for cls in ("testbed", "testbed_unconsolidated"):
    for k, v in t[cls].items():
        m = re.match(r"\('(.+)', (\d+)\)", k); sp[(m.group(1), int(m.group(2)))] = v["null"]
def rate(model, n):
    if (model, n) in sp: return sp[(model, n)]
    lo = max(k for (m, k) in sp if m == model and k <= n); hi = min(k for (m, k) in sp if m == model and k >= n)
    return sp[(model, lo)] + (n - lo) / (hi - lo) * (sp[(model, hi)] - sp[(model, lo)])
start, extra = [], []
for s in dirs:
    for r in csv.DictReader(open("%s/%s/jobs.csv" % (d, s))):
        if not r["end"] or not r["first_run"]: continue
        wall = float(r["end"]) - float(r["first_run"])
        if s == "slurm" and r["runs"] == "1":
            start.append(wall - float(r["work"]) / rate(r["model"], int(r["gpus"])))
sc = sum(start) / len(start) if start else 10
# the speeds the Slurm run's single-run jobs had: work / (wall - start cost), per model and size;
# classes without such a job keep the table's value
got = {}
for r in csv.DictReader(open("%s/slurm/jobs.csv" % d)) if "slurm" in dirs else []:
    if r["end"] and r["first_run"] and r["runs"] == "1":
        wall = float(r["end"]) - float(r["first_run"]) - sc
        if wall > 0: got.setdefault((r["model"], int(r["gpus"])), []).append(float(r["work"]) / wall)
for cls in ("testbed", "testbed_unconsolidated"):
    for k in t[cls]:
        m = re.match(r"\('(.+)', (\d+)\)", k)
        v = got.get((m.group(1), int(m.group(2))))
        if v: t[cls][k] = {"null": round(sum(v) / len(v), 3)}
json.dump(t, open("%s/throughputs-slurm-run.json" % d, "w"), indent=1)
print("%.1f" % sc)
PY
)
SC=${START_COST:-$costs}
RC=${RESTART_COST:-16}
echo "# start cost ${SC} s (measured: Slurm run, single-run jobs: wall - work/speed), restart cost ${RC} s (the controller's --restart-cost)"
printf "%-38s %8s %8s %8s %8s %8s %7s %6s %5s\n" scheduler live_jct sim_jct sim/live sim2_jct sim2/live live_ms sim_ms runs > "$D/compare.txt"
: > "$D/bars.dat"
for s in "${dirs[@]}"; do
  sched=$(awk '{print $1}' "$D/$s/result")
  pol=$sched; [ "$s" = slurm ] && pol=fifo
  read -r ljct lms lutil runs <<< "$(awk '{print $3, $5, $7, $11}' "$D/$s/result")"
  simr=$("$S" sim --trace "$trace" --machines 8 --gpus-per-machine 1 --racks 2 --cpus-per-machine 4 --mem-gb-per-machine 16 \
         --speed table --throughputs "$TP" --gpu testbed --raw-spread --start-cost "$SC" --restart-cost "$RC" \
         --policy "$pol" --no-progress --csv --no-header 2>/dev/null)
  sjct=$(echo "$simr" | awk -F, '{print $5}') sms=$(echo "$simr" | awk -F, '{print $9}')
  # sim2: the same with the speeds the Slurm run's jobs actually had
  s2=$("$S" sim --trace "$trace" --machines 8 --gpus-per-machine 1 --racks 2 --cpus-per-machine 4 --mem-gb-per-machine 16 \
       --speed table --throughputs "$D/throughputs-slurm-run.json" --gpu testbed --raw-spread --start-cost "$SC" \
       --restart-cost "$RC" --policy "$pol" --no-progress --csv --no-header 2>/dev/null | awk -F, '{print $5}')
  printf "%-38s %8.1f %8.1f %8.2f %8.1f %8.2f %7.0f %6.0f %5s\n" "$sched" "$ljct" "$sjct" \
    "$(awk -v a="$sjct" -v b="$ljct" 'BEGIN { print a / b }')" "$s2" "$(awk -v a="$s2" -v b="$ljct" 'BEGIN { print a / b }')" \
    "$lms" "$sms" "$runs" >> "$D/compare.txt"
  echo "${s} $ljct $sjct $s2" >> "$D/bars.dat"
done
cat "$D/compare.txt"
command -v gnuplot > /dev/null || { echo "compare.sh: gnuplot missing (apt-get install gnuplot-nox): no plots" >&2; exit 0; }
mkdir -p "$FIG"
gnuplot <<EOF
set terminal svg size 640,380 font "sans,11"
set output "$FIG/live-slurm-jct.svg"
set title "30 shoal train jobs on Slurm, 8 hosts: average JCT, live and simulated"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "average JCT (s)"
set yrange [0:*]
set grid ytics
set key top right
plot "$D/bars.dat" using 2:xtic(1) title "live (Slurm, shoal sched serve)", "" using 3 title "shoal sim (speed table)", \
     "" using 4 title "shoal sim (speeds of the Slurm run)"
EOF
plots=()
for s in "${dirs[@]}"; do
  awk -F, 'NR > 1 && $14 != "" { print $14 }' "$D/$s/jobs.csv" | sort -g |
    awk '{ a[NR] = $1 } END { for (i = 1; i <= NR; i++) print a[i], i / NR }' > "$D/$s/cdf.dat"
  plots+=("'$D/$s/cdf.dat' using 1:2 with steps lw 2 title '$s'")
done
(IFS=,; gnuplot <<EOF
set terminal svg size 640,380 font "sans,11"
set output "$FIG/live-slurm-jct-cdf.svg"
set title "30 shoal train jobs on Slurm, 8 hosts: JCT distribution (live)"
set xlabel "job completion time (s)"
set ylabel "fraction of jobs"
set yrange [0:1]
set grid
set key bottom right
plot ${plots[*]}
EOF
)
echo "$FIG/live-slurm-jct.svg $FIG/live-slurm-jct-cdf.svg"
