#!/usr/bin/env bash
# FE1: the cost of reclaiming one server that inference lent to a training job. 3 emulated hosts
# (`shoal testbed`), one BSP worker on each (MLP, Fashion-MNIST); h2 is the loaned server. A router on h0
# knows h2's replica slot from the start. Some seconds into training the server is reclaimed, by mode:
#   kill-restart        the job is killed (kill -9) and started again on h0,h1 from its last periodic
#                       checkpoint (--checkpoint-every)
#   checkpoint-release  SIGUSR1 to every rank: all stop after the same iteration, rank 0 checkpoints, exit 75;
#                       the job is started again on h0,h1 from that checkpoint
#   shrink              SIGUSR2 to h2's rank (--leavable): it leaves after its iteration, h0,h1 shrink and go
#                       on in the same processes (--on-failure shrink)
# As soon as h2's training process is gone a replica (`shoal serve`) starts there. Per run:
#   free_s     reclaim request -> h2's training process gone
#   serving_s  reclaim request -> the router sees h2's replica ready (it checks every 50 ms)
#   lost_s     the training time lost: the job's end minus the end it would have had had it gone on at once
#              with 2 workers at their measured speed from the iteration reached at the request
# One line per run in $out/results.txt (and the logs beside it).
#   experiments/fapes/fe1.sh [--build DIR] [--modes "kill-restart checkpoint-release shrink"] [--reps 1] [--first-rep 1]
#        [--iters 900] [--at 6] [--ck-every 100] [--out DIR] [--name srv1]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build modes="kill-restart checkpoint-release shrink" reps=1 first=1 iters=900 at=6 ck_every=100 out="" name=srv1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --first-rep) first=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --at) at=$2; shift 2 ;;
    --ck-every) ck_every=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "fe1.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
S=$PWD/$build/shoal
[ -x "$S" ] || { echo "fe1.sh: $S not built" >&2; exit 2; }
out=${out:-$build/experiments/fapes-fe1}
mkdir -p "$out"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$S" testbed down --name "$name" >/dev/null 2>&1 || true
}
trap cleanup EXIT
"$S" testbed down --name "$name" >/dev/null 2>&1 || true
"$S" testbed up --name "$name" --hosts 3 --racks 1 --rate 1gbit >/dev/null
h2addr=$("$S" testbed exec --name "$name" h2 -- hostname -I | awk '{print $1}')
params=$out/mlp.params
[ -s "$params" ] || "$S" train --model mlp --epochs 1 --train-subset 10000 --quiet --params-out "$params"
port=35100 rport=35000
"$S" testbed exec --name "$name" h0 -- "$S" serve --router --port $rport --health-every 0.05 \
  --replica "http://$h2addr:$port" >"$out/router.log" 2>&1 &
pids+=($!)
now() { date +%s.%N; }

# pid of rank $2's `shoal train` under launcher pid $1 (its child, by SHOAL_RANK in its environment)
rank_pid() {
  local p
  for p in $(pgrep -P "$1" 2>/dev/null); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SHOAL_RANK=$2"; then echo "$p"; return; fi
  done
}

# the router's view of h2's replica, polled inside h0 every 20 ms until live: prints the wall clock then
wait_replica_live() {
  "$S" testbed exec --name "$name" h0 -- bash -c "for i in \$(seq 1 3000); do
      curl -s localhost:$rport/router/replicas | grep -q '\"live\":true' && { date +%s.%N; exit 0; }; sleep 0.02; done; exit 1"
}

train_args() { # $1: tag; the rest: extra options
  local tag=$1; shift
  echo --model mlp --batch 64 --lr 0.1 --epochs 100 --max-iters "$iters" --seed 1 --quiet \
    --checkpoint "$out/$tag.ck" --checkpoint-every "$ck_every" --preemptible "$@"
}

run_one() {
  local mode=$1 rep=$2 tag=$1-$2 lpid t_req t_free t_live vp
  rm -f "$out/$tag".*
  local lopt=() topt=()
  [ "$mode" = shrink ] && lopt=(--on-failure continue) && topt=(--on-failure shrink --grow-every 0 --leavable)
  # shellcheck disable=SC2046
  "$S" launch --testbed "$name" -n 3 --per-host 1 --timeout 600 "${lopt[@]}" -- "$S" train \
    $(train_args "$tag" "${topt[@]}" --iter-log "$out/$tag.a.ilog") >"$out/$tag.a.log" 2>&1 &
  lpid=$!
  # wait for the first iterations, then $at seconds of training
  for _ in $(seq 1 3000); do [ -s "$out/$tag.a.ilog" ] && [ "$(wc -l <"$out/$tag.a.ilog")" -gt 2 ] && break; sleep 0.05; done
  sleep "$at"
  vp=$(rank_pid "$lpid" 2)
  [ -n "$vp" ] || { echo "fe1.sh: $tag: rank 2 not found" >&2; return 1; }
  t_req=$(now)
  case $mode in
    kill-restart) kill -9 "$vp" ;;
    checkpoint-release) for r in 0 1 2; do kill -USR1 "$(rank_pid "$lpid" $r)"; done ;;
    shrink) kill -USR2 "$vp" ;;
  esac
  while kill -0 "$vp" 2>/dev/null; do sleep 0.002; done
  t_free=$(now)
  "$S" testbed exec --name "$name" h2 -- "$S" serve --params "$params" --port $port >"$out/$tag.replica.log" 2>&1 &
  local rpid=$!
  t_live=$(wait_replica_live)
  if [ "$mode" != shrink ]; then # the job again, on h0 and h1, from its checkpoint
    wait "$lpid" || true
    "$S" launch --testbed "$name" -n 2 --per-host 1 --hosts h0,h1 --timeout 600 -- "$S" train \
      $(train_args "$tag" --resume "$out/$tag.ck" --iter-log "$out/$tag.b.ilog") >"$out/$tag.b.log" 2>&1
  else
    wait "$lpid" || true
  fi
  kill "$rpid" 2>/dev/null || true
  wait "$rpid" 2>/dev/null || true
  python3 experiments/fapes/fe1_lost.py "$mode" "$rep" "$t_req" "$t_free" "$t_live" "$out/$tag".a.ilog \
    $([ -f "$out/$tag.b.ilog" ] && echo "$out/$tag.b.ilog") | tee -a "$out/results.txt"
}

[ -f "$out/results.txt" ] || echo "mode rep free_s serving_s lost_s iter_at_request redone pause_s it_s_3w it_s_2w" \
  >"$out/results.txt"
for rep in $(seq "$first" $((first + reps - 1))); do
  for mode in $modes; do run_one "$mode" "$rep"; done
done
