#!/usr/bin/env bash
# Co-location measurements for the interference model (docs/learned-placement.md): how much a job slows
# down when another job shares a resource with it, on an emulated cluster (`shoal testbed`: 4 hosts in
# 2 racks, host links RATE, rack uplinks 2:1, i.e. RATE for the 2 hosts of a rack).
#
# Jobs (each kept on one CPU core with taskset):
#   softmax, mlp, cnn   `shoal train --model M` on Fashion-MNIST (bsp, batch 64); one process on the
#                       host levels, two ranks on two hosts (one per host) on the link levels
#   membw               experiments/interference/membw.c: STREAM triad over 3 x 512 MiB (host levels)
#   net                 iperf3 --bidir between the job's two hosts (link levels)
# Levels (what the pair shares):
#   core     both on host h0, both on CPU 0 (they time-share one core, and its caches)
#   socket   both on h0, CPU 0 and CPU 1 (last-level cache and memory bandwidth)
#   nic      both between h0 and h1 (the two hosts' links), CPU 0 and CPU 1
#   uplink   h0-h2 and h1-h3 (different host links, the racks' uplinks), CPU 0 and CPU 1
# For each level and ordered pair (job, co-runner), ROUNDS times: the job alone, then again with the
# co-runner running in a loop in the background (each alone run right before its pair, so that a drift
# of the machine's speed does not enter the ratio); the row keeps the median alone and the median
# co-located rate of the rounds (one slow or fast run of this virtual machine, which varies by up to
# 1.8x between runs seconds apart, does not make the ratio). A job runs a fixed count of iterations (train: mean compute+sync ms
# after WARM iterations, from its --iter-log; membw: GB/s over 4 s; net: Mbit/s over 4 s, both
# directions). slowdown = median alone rate / median co-located rate. CPU 1 is never idle: a spin loop (registers
# only: no cache or memory traffic) runs there when no co-runner does (the alone runs; the core level's
# pairs), because this virtual machine runs a process on CPU 0 up to 1.4x faster while CPU 1 is busy than
# while it idles, which made co-located runs look faster than alone ones. Before each run the machine must be idle
# (under 15% of its CPU time busy over a second, waiting up to 60 s): `quiet` keeps other helpers'
# builds off, not every process; the busy share seen is recorded.
# Rows go to OUT/measured.csv (a level's rows of the same rep are replaced):
#   level,job,corunner,rep,unit,alone,colocated,slowdown,busy_alone,busy_pair
# Run it under `quiet` (nothing else on the CPU), one level per call (~3.5 min per round):
#   quiet experiments/interference/measure.sh --levels core [--rep 1] [--rounds 3]   (~11 minutes)
# Options: --levels L  --rep N (label of the repetition, 1)  --rounds R (3)  --rate R (200mbit)  --name T (mrl1)
#          --build DIR (build)  --out DIR (experiments/interference/results)  --port P (36100)
#          --host-jobs "J..." (softmax mlp cnn membw: the jobs paired on the host levels)
#          --link-jobs "J..." (softmax mlp cnn net: the jobs paired on the link levels)
#          --idle-wait S (60: the longest wait for an idle machine before a run; the busy share is recorded either way)
#          --toggle P (off: alone and co-located runs alternate as above). Toggled: per pair and round ONE run of the
#                     job (3-10 s alone) while the co-runner, started and warmed up before it, is stopped and continued
#                     (SIGSTOP/SIGCONT of its processes) every P seconds, the spin loop on CPU 1 taking turns with it
#                     (core: the spin stays); every iteration (membw: every pass over its arrays) is timed by the wall
#                     clock and counted as alone or co-located by the phase it lies in (those crossing a switch, or
#                     starting within 0.05 s after one, are left out; split.py); slowdown = median co-located
#                     iteration time / median alone one. Alone and co-located phases are P seconds apart, so a
#                     drift of the machine's speed slower than that does not enter the ratio. Not for net.
set -euo pipefail
cd "$(dirname "$0")/../.."
levels="core socket nic uplink" host_jobs="softmax mlp cnn membw" idle_wait=60 toggle= link_jobs="softmax mlp cnn net" rep=1 rounds=3 rate=200mbit name=mrl1 build=build out=experiments/interference/results port=36100
while [ $# -gt 0 ]; do
  case "$1" in
    --levels) levels=$2; shift 2 ;;
    --rep) rep=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --host-jobs) host_jobs=$2; shift 2 ;;
    --link-jobs) link_jobs=$2; shift 2 ;;
    --idle-wait) idle_wait=$2; shift 2 ;;
    --toggle) toggle=$2; shift 2 ;;
    -h|--help) sed -n '2,44p' "$0"; exit 0 ;;
    *) echo "measure.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
for l in $levels; do
  case $l in core|socket|nic|uplink) ;; *) echo "measure.sh: --levels: unknown level '$l' (core socket nic uplink)" >&2; exit 2 ;; esac
done
for j in $host_jobs; do
  case $j in softmax|mlp|cnn|membw) ;; *) echo "measure.sh: --host-jobs: unknown job '$j' (softmax mlp cnn membw)" >&2; exit 2 ;; esac
done
for j in $link_jobs; do
  case $j in softmax|mlp|cnn|net) ;; *) echo "measure.sh: --link-jobs: unknown job '$j' (softmax mlp cnn net)" >&2; exit 2 ;; esac
done
[ -n "$host_jobs" ] && [ -n "$link_jobs" ] || { echo "measure.sh: --host-jobs and --link-jobs need at least one job" >&2; exit 2; }
case $idle_wait in ''|0|*[!0-9]*) echo "measure.sh: --idle-wait '$idle_wait': expected whole seconds >= 1" >&2; exit 2 ;; esac
if [ -n "$toggle" ]; then
  awk -v p="$toggle" 'BEGIN { exit !(p + 0 >= 0.2 && p + 0 <= 10) }' ||
    { echo "measure.sh: --toggle '$toggle': expected seconds per phase, 0.2..10" >&2; exit 2; }
  case " $link_jobs " in *" net "*) echo "measure.sh: --toggle: net (iperf3) cannot be timed per iteration; leave it out of --link-jobs" >&2; exit 2 ;; esac
fi
case $rep in ''|*[!0-9]*) echo "measure.sh: --rep '$rep': expected a number" >&2; exit 2 ;; esac
case $rounds in ''|0|*[!0-9]*) echo "measure.sh: --rounds '$rounds': expected a number >= 1" >&2; exit 2 ;; esac
S=$PWD/$build/shoal
[ -x "$S" ] || { echo "measure.sh: $S not built (make)" >&2; exit 2; }
case " $link_jobs " in *" net "*) command -v iperf3 >/dev/null || { echo "measure.sh: iperf3 missing (apt-get install iperf3)" >&2; exit 2; } ;; esac
mkdir -p "$out"
tmp=$(mktemp -d /tmp/marl-interf.XXXXXX)
data=/tmp/marl-fmnist-raw
mkdir -p "$data"
for f in /usr/share/datasets/fashion-mnist/*-ubyte.gz; do
  b=$(basename "$f" .gz); [ -s "$data/$b" ] || gunzip -c "$f" > "$data/$b"
done
cc -O2 -o "$tmp/membw" experiments/interference/membw.c
# process groups started for the current measurement (a file: run_job also runs in $(...) subshells)
pg=$tmp/pgids
: >"$pg"
stop_bg() {
  local p
  for p in $(cat "$pg"); do kill -TERM -- "-$p" 2>/dev/null || true; done
  for p in $(cat "$pg"); do
    for _ in $(seq 50); do kill -0 -- "-$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$p" 2>/dev/null || true
  done
  : >"$pg"
}
# spawn OUT CMD: CMD in its own process group (stopped by stop_bg), bounded to 300 s
spawn() { setsid bash -c "exec timeout 300 $2" >"$1" 2>&1 & echo $! >>"$pg"; }
cleanup() { [ -f "$pg" ] && stop_bg; "$S" testbed down --name "$name" >/dev/null 2>&1 || true; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
"$S" testbed down --name "$name" >/dev/null 2>&1 || true
"$S" testbed up --name "$name" --hosts 4 --racks 2 --rate "$rate" --oversub 2 >/dev/null
res=$out/measured.csv
[ -s "$res" ] || echo "level,job,corunner,rep,unit,alone,colocated,slowdown,busy_alone,busy_pair" >"$res"
echo "# interference: $(date -u +%FT%TZ), $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg);" \
  "levels '$levels', rep $rep, $rounds rounds, links $rate, host jobs '$host_jobs', link jobs '$link_jobs'," \
  "$([ -n "$toggle" ] && echo "toggled every $toggle s" || echo "alone and co-located runs alternating")" >&2

# iterations per foreground run (a few seconds each) and the warm-up left out
iters_of() { case $1:$2 in softmax:host) echo 4000 ;; mlp:host) echo 200 ;; cnn:host) echo 400 ;;
  softmax:link) echo 600 ;; mlp:link) echo 60 ;; cnn:link) echo 120 ;; esac; }
# toggled: iterations of the one foreground run (3-10 s alone at this machine's speed in November 2026)
titers_of() { case $1:$2 in softmax:host) echo 50000 ;; mlp:host) echo 1500 ;; cnn:host) echo 3000 ;;
  softmax:link) echo 15000 ;; mlp:link) echo 120 ;; cnn:link) echo 2500 ;; esac; }
WARM=10
train_args() { # model iters log
  echo "train --model $1 --batch 64 --lr 0.05 --data $data --train-subset 6400 --test-subset 100 --epochs 100000" \
    "--max-iters $2 --iter-log $3 --quiet"
}
# where a job runs: level role -> "cpu hostA hostB"
where() {
  local cpu=0; [ "$2" = bg ] && [ "$1" != core ] && cpu=1
  case $1 in
    core|socket) echo "$cpu h0 h0" ;;
    nic) echo "$cpu h0 h1" ;;
    uplink) if [ "$2" = bg ]; then echo "$cpu h1 h3"; else echo "$cpu h0 h2"; fi ;;
  esac
}
hostkind() { case $1 in core|socket) echo host ;; *) echo link ;; esac; }
jobs_of() { case $(hostkind "$1") in host) echo "$host_jobs" ;; link) echo "$link_jobs" ;; esac; }
addr_of() { local i=${1#h}; echo "10.90.$((i / 2)).$((i % 2 + 1))"; } # 2 hosts per rack

# start JOB for LEVEL as role (fg|bg|fgt); fg prints its rate; bg returns at once (its pgid in $pg); fgt (the
# toggled measurement's foreground) starts the job in the background, its pid in $tmp/fgt.pid, its timing in
# $tmp/fgt.il (train) or $tmp/fg.out (membw)
run_job() {
  local level=$1 job=$2 role=$3 w cpu ha hb log iters p=$port
  w=$(where "$level" "$role"); read -r cpu ha hb <<<"$w"
  [ "$role" = bg ] && p=$((port + 1))
  log=$tmp/$role.il
  rm -f "$log" "$log".rank*
  case $role in bg) iters=100000000 ;; fg) iters=$(iters_of "$job" "$(hostkind "$level")") ;;
    fgt) iters=$(titers_of "$job" "$(hostkind "$level")") ;; esac
  local cmd X="$S testbed exec --name $name"
  case $job in
    membw) cmd="$X $ha -- taskset -c $cpu $tmp/membw $(case $role in bg) echo -t 0 ;; fg) echo -t 4 ;; fgt) echo -t 12 -l ;; esac)" ;;
    net)
      spawn "$tmp/$role.srv" "$X $hb -- taskset -c $cpu iperf3 -s -p $p -1"
      sleep 0.5
      cmd="$X $ha -- taskset -c $cpu iperf3 -c $(addr_of "$hb") -p $p --bidir -J -t $([ "$role" = bg ] && echo 300 || echo 4)" ;;
    *)
      if [ "$ha" = "$hb" ]; then cmd="$X $ha -- taskset -c $cpu $S $(train_args "$job" "$iters" "$log")"
      else cmd="taskset -c $cpu $S launch --testbed $name --hosts $ha,$hb -n 2 --per-host 1 --timeout 280 -- $S $(train_args "$job" "$iters" "$log")"; fi ;;
  esac
  if [ "$role" = bg ]; then
    spawn "$tmp/bg.out" "$cmd"
    # steady state before the foreground starts: the co-runner's log has its warm-up behind it
    local i
    for i in $(seq 100); do
      case $job in
        membw|net) [ "$i" -ge 10 ] && break ;;
        *) [ -s "$log" ] && [ "$(wc -l <"$log")" -gt $((WARM + 2)) ] && break ;;
      esac
      sleep 0.2
    done
    return 0
  fi
  if [ "$role" = fgt ]; then
    timeout 200 bash -c "exec $cmd" >"$tmp/fg.out" 2>&1 &
    echo $! >"$tmp/fgt.pid"
    return 0
  fi
  timeout 200 bash -c "exec $cmd" >"$tmp/fg.out" 2>&1 || { echo "# $level $job ($role) failed:" >&2; tail -3 "$tmp/fg.out" >&2; echo nan; return 0; }
  case $job in
    membw) awk '/^GB\/s/ { print $2 }' "$tmp/fg.out" ;;
    net) /usr/bin/python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["end"]; print("%.3f" % ((e["sum_sent"]["bits_per_second"] + e["sum_sent_bidir_reverse"]["bits_per_second"]) / 1e6))' "$tmp/fg.out" ;;
    *) awk -F, -v w="$WARM" 'NR > 1 && $1 >= w { t += $4 + $5; n++ } END { if (n) printf "%.4f\n", 1000 * n / t; else print "nan" }' "$log" ;;
  esac
}
# wait until the machine is idle (busy share of all CPUs over one second < 0.15, at most --idle-wait s); prints the share
cpu_busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat; }
wait_idle() {
  local a b t0 t1 busy i
  for i in $(seq "$idle_wait"); do
    read -r a t0 <<<"$(cpu_busy)"; sleep 1; read -r b t1 <<<"$(cpu_busy)"
    busy=$(awk -v a="$a" -v b="$b" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.3f", (b - a) / (t1 - t0 + 1e-9) }')
    awk -v x="$busy" 'BEGIN { exit !(x < 0.15) }' && break
  done
  echo "$busy"
}
unit_of() { case $1 in membw) [ -n "$toggle" ] && echo passes/s || echo GB/s ;; net) echo Mbit/s ;; *) echo iters/s ;; esac; }

# the median of numbers (nan when any is not a number: a failed run)
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } $1 !~ /^[0-9.]+$/ { bad = 1 }
  END { if (bad || !NR) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
spin() { spawn "$tmp/spin.out" "taskset -c 1 sh -c 'while :; do :; done'"; }
# the processes of the process groups started by spawn (leaders PIDS...) and all their descendants
tree_of() { local p c; for p in "$@"; do echo "$p"; for c in $(pgrep -P "$p"); do tree_of "$c"; done; done; }
# toggled measurement of JOB beside CO at LEVEL; prints "alone colocated" (per second) or "nan nan"
toggled_pair() {
  local level=$1 job=$2 co=$3 copids spinpids fgpid state=off t_end
  run_job "$level" "$co" bg
  copids=$(tree_of $(cat "$pg"))
  spin
  spinpids=""
  [ "$level" = core ] || spinpids=$(tree_of "$(tail -n 1 "$pg")")
  set_phase() { # off: the co-runner stopped (the spin runs); on: the co-runner runs (the spin stopped)
    if [ "$1" = off ]; then kill -STOP $copids 2>/dev/null; [ -z "$spinpids" ] || kill -CONT $spinpids 2>/dev/null
    else [ -z "$spinpids" ] || kill -STOP $spinpids 2>/dev/null; kill -CONT $copids 2>/dev/null; fi
    echo "$(date +%s.%N) $1" >>"$tmp/toggles"
  }
  : >"$tmp/toggles"
  set_phase off
  run_job "$level" "$job" fgt
  fgpid=$(cat "$tmp/fgt.pid")
  t_end=$(( $(date +%s) + 210 ))
  while kill -0 "$fgpid" 2>/dev/null && [ "$(date +%s)" -lt "$t_end" ]; do
    sleep "$toggle"
    if [ "$state" = off ]; then state=on; else state=off; fi
    set_phase "$state"
  done
  kill -CONT $copids $spinpids 2>/dev/null || true
  if ! wait "$fgpid"; then
    echo "# $level $job beside $co (toggled) failed:" >&2; tail -3 "$tmp/fg.out" >&2; stop_bg; echo "nan nan"; return 0
  fi
  stop_bg
  case $job in
    membw) /usr/bin/python3 experiments/interference/split.py passes "$tmp/fg.out" "$tmp/toggles" ;;
    *) /usr/bin/python3 experiments/interference/split.py iters "$tmp/fgt.il" "$tmp/toggles" --warm "$WARM" ;;
  esac
}
for level in $levels; do
  sed -i "/^$level,[^,]*,[^,]*,$rep,/d" "$res"
  for co in $(jobs_of "$level"); do
    for job in $(jobs_of "$level"); do
      as="" cs="" b0=0 b1=0
      for _ in $(seq "$rounds"); do
        if [ -n "$toggle" ]; then
          b=$(wait_idle); b0=$(awk -v a="$b0" -v b="$b" 'BEGIN { print (b > a ? b : a) }'); b1=$b0
          read -r a c _ <<<"$(toggled_pair "$level" "$job" "$co")"
          as="$as $a" cs="$cs $c"
          continue
        fi
        b=$(wait_idle); b0=$(awk -v a="$b0" -v b="$b" 'BEGIN { print (b > a ? b : a) }')
        spin
        as="$as $(run_job "$level" "$job" fg)"
        stop_bg
        b=$(wait_idle); b1=$(awk -v a="$b1" -v b="$b" 'BEGIN { print (b > a ? b : a) }')
        run_job "$level" "$co" bg
        [ "$level" = core ] && spin
        cs="$cs $(run_job "$level" "$job" fg)"
        stop_bg
      done
      a=$(median $as) c=$(median $cs)
      s=$(awk -v a="$a" -v c="$c" 'BEGIN { if (c + 0 > 0 && a + 0 > 0) printf "%.4f", a / c; else print "nan" }')
      echo "$level,$job,$co,$rep,$(unit_of "$job"),$a,$c,$s,$b0,$b1" | tee -a "$res" >&2
    done
  done
done
