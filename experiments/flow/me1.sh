#!/usr/bin/env bash
# ME1: J concurrent training jobs whose rings cross one oversubscribed rack uplink, on the testbed, under
# each congestion control people run and under shoal's flow scheduling (docs/flow.md, docs/experiments.md).
# 8 hosts in 2 racks, host links RATE, uplinks 4:1 oversubscribed (4 x RATE / 4 = RATE each way); job j
# (1..J) is a 2-rank ring on h<j-1> (rack 0) and h<j+3> (rack 1), so every job's allreduce crosses both
# uplinks and J jobs share them; with --ring 4 (2 jobs at most) job j is a 4-rank ring h<2j-2>,h<2j+2>,
# h<2j-1>,h<2j+3>: all four hops cross an uplink, two on each. Every job: shoal train, MLP on
# Fashion-MNIST (2.1 MB of gradients a step), ITERS steps of COMPUTE ms emulated compute. All jobs start
# together; a job's JCT is its launcher's wall time. Per mode one line per job and the average. As root,
# under `quiet`.
#
#   experiments/flow/me1.sh [--jobs J] [--ring 2|4] [--compute-ms C] [--iters N] [--rate RATE] [--reps R]
#                           [--slot-ms MS] [--modes "cubic reno bbr equal mlcc"] [--slow-start-after-idle 0|1]
#                           [--queue-ms MS] [--name NAME] [--out DIR]
#   experiments/flow/me1.sh --bound [--rate RATE]     the formula's limits for 2-4 jobs and computes 0-5000 ms
# The formula (2-rank rings): a job alone moves its gradients over the uplink in T = 2143272 B / (RATE x
# 1448/1514, TCP's goodput); n jobs whose phases collide share it, C + nT a step; perfectly interleaved,
# max(C + T, nT) (each phase alone, or the uplink never idle). Every run prints both for its setting.
# --reps R runs the list of modes R times over (modes alternate, so a drift of the machine falls on all);
# then a last table gives per mode the mean of the runs' average JCTs and their range.
# --slot-ms: the flow controller's slot (100 ms).
# --queue-ms: the uplinks' queue (tbf latency; the testbed's default 50 ms). A datacenter switch port holds
# well under 1% of an allreduce phase; 50 ms is 11% of a 448 ms phase, enough for TCP's windows to take
# several phases to even out (the job that sent first keeps the uplink, and identical jobs drift apart).
# --slow-start-after-idle: net.ipv4.tcp_slow_start_after_idle in every host's namespace, for every mode
# alike (default 1, the kernel's: a connection idle for an RTO, as in every compute phase, restarts from its
# initial window).
# modes: cubic, reno, bbr   SHOAL_TCP_CONGESTION, no flow control
#        equal              static equal-share pacing (testbed up --flow --flow-policy equal), cubic underneath
#        mlcc, greedy       the flow controller's policies, cubic underneath
set -euo pipefail
cd "$(dirname "$0")/../.."
bound=0 queue= ssai=1 jobs=2 ring=2 reps=1 compute=500 iters=20 rate=40mbit slot=100 modes="cubic reno bbr equal mlcc" name=flowme out=/tmp/flow-me1
while [ $# -gt 0 ]; do
  case "$1" in
    --bound) bound=1; shift ;;
    --jobs) jobs=$2; shift 2 ;;
    --ring) ring=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --compute-ms) compute=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --slot-ms) slot=$2; shift 2 ;;
    --slow-start-after-idle) ssai=$2; shift 2 ;;
    --queue-ms) queue=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "me1.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
# the formula: T in ms of one 2.14 MB phase alone at RATE; step times colliding and interleaved
t_ms() { awk -v r="$1" 'BEGIN { m = r + 0; u = r; sub(/^[0-9.]+/, "", u); f = u == "gbit" ? 1e9 : u == "mbit" ? 1e6 : u == "kbit" ? 1e3 : 1
  printf "%.0f", 2143272 * 8 / (m * f * 1448 / 1514) * 1000 }'; }
limits() { awk -v n="$1" -v c="$2" -v t="$3" 'BEGIN { a = c + n * t; b = c + t > n * t ? c + t : n * t
  printf "%.0f %.0f %.1f", a, b, 100 * (1 - b / a) }'; }
if [ "$bound" = 1 ]; then
  T=$(t_ms "$rate")
  printf '# the formula at %s: T = %d ms alone; colliding C + nT, perfectly interleaved max(C + T, nT), ms a step\n' "$rate" "$T"
  printf '%4s %10s %10s %12s %9s\n' jobs compute_ms collide_ms interleave_ms gain_%
  for n in 2 3 4; do for c in 0 100 250 500 1000 1500 2000 5000; do
    read -r a b g <<< "$(limits "$n" "$c" "$T")"; printf '%4d %10d %10d %12d %9s\n' "$n" "$c" "$a" "$b" "$g"
  done; done
  exit 0
fi
case $jobs in 1|2|3|4) ;; *) echo "me1.sh: --jobs $jobs: 1 to 4" >&2; exit 2 ;; esac
case $ring in 2) ;; 4) [ "$jobs" -le 2 ] || { echo "me1.sh: --ring 4: at most 2 jobs (8 hosts)" >&2; exit 2; } ;;
  *) echo "me1.sh: --ring $ring: 2 or 4" >&2; exit 2 ;; esac
case $queue in '') ;; [1-9]|[1-9][0-9]|[1-4][0-9][0-9]|500) ;; *) echo "me1.sh: --queue-ms $queue: 1 to 500" >&2; exit 2 ;; esac
case $ssai in 0|1) ;; *) echo "me1.sh: --slow-start-after-idle $ssai: 0 or 1" >&2; exit 2 ;; esac
case $reps in [1-9]|1[0-9]|20) ;; *) echo "me1.sh: --reps $reps: 1 to 20" >&2; exit 2 ;; esac
hosts_of() { if [ "$ring" = 2 ]; then echo "h$(($1 - 1)),h$(($1 + 3))"; else echo "h$((2 * $1 - 2)),h$((2 * $1 + 2)),h$((2 * $1 - 1)),h$((2 * $1 + 3))"; fi; }
S=$PWD/build/shoal
burst=$(awk -v r="$rate" 'BEGIN { m = r + 0; u = r; sub(/^[0-9.]+/, "", u); f = u == "gbit" ? 1e9 : u == "mbit" ? 1e6 : u == "kbit" ? 1e3 : 1
  b = m * f / 8 * 5e-3; printf "%.0f", b < 32768 ? 32768 : b }')
[ -x "$S" ] || { echo "me1.sh: $S not built (make -j2)" >&2; exit 2; }
mkdir -p "$out"
trap '$S testbed down --name $name >/dev/null 2>&1 || true' EXIT

# mean step time of a job from its rank 0's iteration log (wall clock between steps, the first step left out)
step_ms() { awk -F, 'NR > 2 { d = $10 - prev; s += d; n++ } NR > 1 { prev = $10 } END { printf "%.0f", n ? 1000 * s / n : 0 }' "$1"; }

printf '# ME1: %d job(s), %d-rank rings, %d steps of %d ms compute, host links %s, uplinks 4:1 (= %s), 2.1 MB allreduce per step, uplink queue %s ms, tcp_slow_start_after_idle %s\n' \
  "$jobs" "$ring" "$iters" "$compute" "$rate" "$rate" "${queue:-50}" "$ssai"
read -r lim_c lim_i lim_g <<< "$(limits "$jobs" "$compute" "$(t_ms "$rate")")"
printf '# the formula: T = %d ms alone; phases colliding %d ms a step, perfectly interleaved %d (-%s%%)\n' \
  "$(t_ms "$rate")" "$lim_c" "$lim_i" "$lim_g"
printf '%-7s %4s %8s %9s\n' mode job jct_s step_ms
: > "$out/avgs"
for rep in $(seq 1 "$reps"); do
for mode in $modes; do
  cc=cubic flow=""
  case $mode in
    cubic|reno|bbr) cc=$mode ;;
    equal|mlcc|greedy) flow="--flow --flow-log --flow-policy $mode --flow-slot-ms $slot" ;;
    *) echo "me1.sh: mode '$mode': expected cubic, reno, bbr, equal, mlcc or greedy" >&2; exit 2 ;;
  esac
  $S testbed down --name "$name" >/dev/null 2>&1 || true
  $S testbed up --name "$name" --hosts 8 --racks 2 --rate "$rate" --oversub 4 $flow >/dev/null
  for h in 0 1 2 3 4 5 6 7; do
    $S testbed exec --name "$name" "h$h" -- sysctl -q -w net.ipv4.tcp_slow_start_after_idle="$ssai" >/dev/null
  done
  # the uplinks' queue (both racks, both ways); burst as the testbed sets it (5 ms at the rate, at least 32 kB)
  if [ -n "$queue" ]; then for dev in up0 dn0 up1 dn1; do
    tc -n "$name-net" qdisc replace dev "$dev" root handle 1: tbf rate "$rate" burst "$burst" latency "${queue}ms"
  done; fi
  d=$out/$mode-j$jobs-r$ring-c$compute-$rep; rm -rf "$d"; mkdir -p "$d"
  t0=$(date +%s.%N)
  for j in $(seq 1 "$jobs"); do
    ( SHOAL_TCP_CONGESTION=$cc timeout 600 $S launch --testbed "$name" -n "$ring" --hosts "$(hosts_of "$j")" --timeout 590 -- \
        $S train --max-iters "$iters" --batch 32 --train-subset 4096 --compute-ms "$compute" --quiet \
        --iter-log "$d/j$j.it" > "$d/j$j.out" 2>&1
      echo "$? $(date +%s.%N)" > "$d/j$j.end" ) &
  done
  wait
  sum=0
  for j in $(seq 1 "$jobs"); do
    read -r rc t1 < "$d/j$j.end"
    [ "$rc" = 0 ] || { echo "me1.sh: $mode job $j failed ($rc): $d/j$j.out" >&2; tail -3 "$d/j$j.out" >&2; exit 1; }
    jct=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    sum=$(awk -v s="$sum" -v x="$jct" 'BEGIN { print s + x }')
    printf '%-7s %4d %8s %9s\n' "$mode" "$j" "$jct" "$(step_ms "$d/j$j.it")"
  done
  avg=$(awk -v s="$sum" -v n="$jobs" 'BEGIN { printf "%.2f", s / n }')
  printf '%-7s %4s %8s\n' "$mode" avg "$avg"
  echo "$mode $avg" >> "$out/avgs"
  [ -z "$flow" ] || cp /run/shoal-testbed/"$name"/flow/controller.* /run/shoal-testbed/"$name"/flow/agent-*.csv "$d/" 2>/dev/null || true
  $S testbed down --name "$name" >/dev/null
done
done
if [ "$reps" -gt 1 ]; then
  printf '# %d runs per mode: mean of the average JCTs (min-max)\n' "$reps"
  for mode in $modes; do
    awk -v m="$mode" '$1 == m { s += $2; n++; if (n == 1 || $2 < lo) lo = $2; if ($2 > hi) hi = $2 }
      END { printf "%-7s mean %8.2f  (%.2f-%.2f)\n", m, s / n, lo, hi }' "$out/avgs"
  done
fi
