#!/usr/bin/env bash
# The host agent's CPU cost (docs/flow.md): a 2-host testbed with flow scheduling (`testbed up --flow`,
# policy mlcc), J 2-rank training jobs on h0,h1 (each job's ring is one cross-host flow out of each host,
# so J jobs are J flows per agent), and over a window of SECONDS once every job's flow carries bytes, each
# agent's utime+stime from /proc/<pid>/stat: CPU seconds / wall seconds = the share of one core. The
# controller's share is printed too (it runs once per cluster, not per host). `shoal flow status` is
# sampled every second of the window: flows per host and how many of them held a rate. Every load is bounded: the
# jobs run under `timeout`, the window is fixed. As root, under `quiet`.
#   experiments/flow/agent-cpu.sh [--jobs J] [--seconds S] [--rate RATE] [--compute-ms C] [--name NAME]
set -euo pipefail
cd "$(dirname "$0")/../.."
jobs=10 secs=60 rate=40mbit compute=500 name=flowcpu
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --compute-ms) compute=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "agent-cpu.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
case $jobs in [1-9]|[1-5][0-9]|60) ;; *) echo "agent-cpu.sh: --jobs $jobs: 1 to 60" >&2; exit 2 ;; esac
case $secs in [1-9]|[1-9][0-9]|[1-2][0-9][0-9]|300) ;; *) echo "agent-cpu.sh: --seconds $secs: 1 to 300" >&2; exit 2 ;; esac
S=$PWD/build/shoal
[ -x "$S" ] || { echo "agent-cpu.sh: $S not built (make -j2)" >&2; exit 2; }
out=/tmp/flow-agent-cpu; rm -rf "$out"; mkdir -p "$out"
launchers=()
cleanup() {
  for p in "${launchers[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  $S testbed down --name "$name" >/dev/null 2>&1 || true
}
trap cleanup EXIT
$S testbed down --name "$name" >/dev/null 2>&1 || true
$S testbed up --name "$name" --hosts 2 --rate "$rate" --flow >/dev/null
pids=/run/shoal-testbed/$name/flow/pids
pid_of() { awk -v w="$1" '$1 == w { print $2 }' "$pids"; }
a0=$(pid_of shoal-agent-h0) a1=$(pid_of shoal-agent-h1) c=$(pid_of shoal-controller)
[ -n "$a0" ] && [ -n "$a1" ] && [ -n "$c" ] || { echo "agent-cpu.sh: no agent or controller pid in $pids" >&2; exit 1; }
# utime + stime in clock ticks (fields 14 and 15; the command name, field 2, may hold spaces: cut after ')')
ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
hz=$(getconf CLK_TCK)

for j in $(seq 1 "$jobs"); do
  timeout -s TERM $((secs + 90)) $S launch --testbed "$name" -n 2 --hosts h0,h1 --timeout $((secs + 85)) -- \
    $S train --max-iters 100000 --batch 32 --train-subset 4096 --compute-ms "$compute" --quiet > "$out/j$j.out" 2>&1 &
  launchers+=($!)
done
# wait (at most 60 s) until every job's flow has carried bytes on every host; a host that shows fewer is
# named and the run stops (each job has one flow out of each host)
hosts="h0 h1"
flows_on() { $S flow status --testbed "$name" 2>/dev/null | awk -v h="$1" '$1 ~ ("-" h "$") { for (i = 1; i < NF; i++) if ($i == "flows") { sub(",", "", $(i + 1)); print $(i + 1) } }'; }
short() { for h in $hosts; do n=$(flows_on "$h"); [ "$n" = "$jobs" ] || printf '%s shows %s flows, not %s; ' "$h" "${n:-no}" "$jobs"; done; }
for _ in $(seq 1 120); do
  [ -z "$(short)" ] && break
  sleep 0.5
done
miss=$(short)
[ -z "$miss" ] || { echo "agent-cpu.sh: after 60 s ${miss%; }" >&2; $S flow status --testbed "$name" >&2; exit 1; }

t0=$(date +%s.%N) s0=$(ticks "$a0") s1=$(ticks "$a1") sc=$(ticks "$c")
: > "$out/status"
end=$(awk -v t="$t0" -v s="$secs" 'BEGIN { printf "%.3f", t + s }')
while awk -v e="$end" -v n="$(date +%s.%N)" 'BEGIN { exit !(n < e - 1) }'; do
  sleep 1
  $S flow status --testbed "$name" >> "$out/status" 2>&1 || true
done
while awk -v e="$end" -v n="$(date +%s.%N)" 'BEGIN { exit !(n < e) }'; do sleep 0.1; done
t1=$(date +%s.%N) e0=$(ticks "$a0") e1=$(ticks "$a1") ec=$(ticks "$c")
alive=0
for p in "${launchers[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
[ "$alive" = "$jobs" ] || { echo "agent-cpu.sh: only $alive of $jobs jobs ran through the window" >&2; tail -3 "$out"/j*.out >&2; exit 1; }

printf '# agent CPU: 2 hosts, links %s, flow policy mlcc, %d 2-rank jobs (%d ms compute), window %.1f s\n' \
  "$rate" "$jobs" "$compute" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
printf '%-12s %8s %10s %16s %14s\n' daemon cpu_s core_pct "flows (min-max)" "paced (mean, max)"
row() { # name start end host
  local fl pc
  fl=$(awk -v h="$4" '$1 ~ ("-" h "$") { for (i = 1; i < NF; i++) if ($i == "flows") { sub(",", "", $(i + 1)); print $(i + 1) } }' "$out/status" | sort -n | sed -n '1p;$p' | paste -sd-)
  pc=$(awk -v h="$4" '$1 ~ ("-" h "$") { for (i = 1; i < NF; i++) if ($i == "paced") { sub(/[:;,]/, "", $(i + 1)); print $(i + 1) } }' "$out/status" | awk '{ s += $1; if ($1 > m) m = $1 } END { if (NR) printf "%.1f, %d", s / NR, m }')
  awk -v n="$1" -v a="$2" -v b="$3" -v hz="$hz" -v t0="$t0" -v t1="$t1" -v fl="${fl:--}" -v pc="${pc:--}" \
    'BEGIN { s = (b - a) / hz; printf "%-12s %8.2f %9.2f%% %16s %14s\n", n, s, 100 * s / (t1 - t0), fl, pc }'
}
row "agent h0" "$s0" "$e0" h0
row "agent h1" "$s1" "$e1" h1
row controller "$sc" "$ec" -
