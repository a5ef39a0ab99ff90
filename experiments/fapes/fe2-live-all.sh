#!/bin/bash
# FE2 live, every policy in one run: static, pollux, reactive and fapes back to back on the same workload
# (experiments/fapes/fe2-live.sh, its environment variables passed on), then one table with fapes against
# the best baseline: training avg JCT (goal: at least 20% lower), SLO attainment per trace minute (goal: no
# lower, and at least 99%; per live minute beside it), goodput against static (goal: at least 1.5x), and the
# controller's retries (a loan's restart is not one), each beside the simulator's figure for the same
# workload (experiments/fapes/fe2-sim.sh, run again here for every policy: its speeds and start-up fitted on the
# static run's jobs, the run's sibling static/).
# About 4 x (DURATION + 1 min).
#   fe2-live-all.sh [--table] [OUT]   (default build/experiments/fapes-fe2-live)
#   env POLICIES (static pollux reactive fapes): the runs to make now, each into OUT/POLICY, so that each can be
#   its own `quiet` command; --table: no run, the table from the four in OUT
set -u
here=$(cd "$(dirname "$0")" && pwd)
table=0
case ${1:-} in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;; --table) table=1; shift;;
  -*) echo "fe2-live-all.sh: unknown option $1 (--help)" >&2; exit 2;; esac
out=$(realpath -m "${1:-build/experiments/fapes-fe2-live}")
mkdir -p "$out" || exit 1
[ $table = 1 ] && POLICIES=
for p in ${POLICIES-static pollux reactive fapes}; do
  echo "== $p $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$here/fe2-live.sh" "$p" "$out/$p" > "$out/$p.log" 2>&1 || { echo "fe2-live-all.sh: $p failed:"; tail -5 "$out/$p.log"; exit 1; }
  tail -2 "$out/$p.log"
done
for p in static pollux reactive fapes; do
  [ -s "$out/$p/jobs.txt" ] && "$here/fe2-sim.sh" "$out/$p" "$p" > /dev/null
done
/usr/bin/python3 - "$out" <<'PY' | tee "$out/table.txt"
import os, re, sys
d = sys.argv[1]
row, sim = {}, {}
base = ("static", "pollux", "reactive")
for p in base + ("fapes",):
    try:
        t = open(os.path.join(d, p, "fe2.txt")).read()
    except OSError:
        sys.exit("fe2-live-all.sh: no %s run in %s" % (p, d))
    s = re.search(r"avg_jct_s\s+([\d.]+).*slo_minutes ([\d.]+)%", open(os.path.join(d, p, "sim.txt")).read())
    sim[p] = (float(s[1]), float(s[2])) if s else (0, 0)
    m = re.search(r"avg_jct_s\s+([\d.]+)\s+done (\d+)/(\d+)\s+makespan_s\s+([\d.]+)\s+goodput ([\d.]+).*slo_minutes (\d+)/(\d+)"
                  r".*slo_trace_minutes (\d+)/(\d+)", t)
    log = open(os.path.join(d, p, "serve.log")).read()
    r = re.search(r"retries (\d+)", log)
    row[p] = dict(jct=float(m[1]), done="%s/%s" % (m[2], m[3]), span=float(m[4]), good=float(m[5]),
                  met=int(m[6]), mins=int(m[7]), tmet=int(m[8]), tmins=int(m[9]), retries=int(r[1]) if r else -1)
print("| policy | avg JCT (s) | done | makespan (s) | goodput (worker-steps/s) | SLO trace minutes | SLO live minutes | retries | sim avg JCT (s) | sim SLO trace minutes |")
print("|---|---|---|---|---|---|---|---|---|---|")
for p, v in row.items():
    print("| %s | %.1f | %s | %.1f | %.1f | %d/%d | %d/%d | %d | %.1f (%+.0f%%) | %.1f%% |" % (p, v["jct"], v["done"], v["span"], v["good"],
          v["tmet"], v["tmins"], v["met"], v["mins"], v["retries"], sim[p][0], 100 * (sim[p][0] / v["jct"] - 1) if v["jct"] else 0, sim[p][1]))
att = {p: v["tmet"] / v["tmins"] if v["tmins"] else 0 for p, v in row.items()}
best = min(base, key=lambda p: row[p]["jct"])
f = row["fapes"]
print("fapes avg JCT %.1f%% below the best baseline (%s; goal 20%%): %s" % (100 * (1 - f["jct"] / row[best]["jct"]), best,
      "met" if f["jct"] <= 0.8 * row[best]["jct"] else "not met"))
bslo = max(att[p] for p in base)
print("fapes SLO attainment %.1f%% of trace minutes, best baseline %.1f%% (goal: no lower, and at least 99%%): %s" % (100 * att["fapes"],
      100 * bslo, "met" if att["fapes"] >= bslo and att["fapes"] >= 0.99 else "not met"))
print("fapes goodput %.2fx static (goal 1.5x): %s" % (f["good"] / row["static"]["good"], "met" if f["good"] >= 1.5 * row["static"]["good"] else "not met"))
PY
