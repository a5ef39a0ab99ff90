#!/usr/bin/env bash
# A lost rank mid-training: 8 emulated hosts (`shoal testbed`), one BSP worker each, MLP on Fashion-MNIST;
# `kill -9` of one worker in the middle of an epoch. Modes, each run from a fresh start:
#   none     undisturbed (the reference)
#   shrink   shoal launch --on-failure continue, shoal train --on-failure shrink: the 7 others go on
#   restart  shoal launch --on-failure restart: the same, and the killed worker is started again and re-enters
#   abort    today's default: the job fails; it is started again (8 workers) from its last epoch checkpoint
# Per run: detection latency (kill -> first survivor's error), the stall (kill -> training again), the
# wall time of the whole job, the final test accuracy; one line per run in $out/results.txt.
#   experiments/testbed-shrink/run.sh [--build DIR] [--rate 1gbit] [--epochs 8] [--reps 1] [--first-rep 1]
#        [--modes "none shrink restart abort"] [--kill-epoch 3] [--victim 5] [--out DIR] [--name sg]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build rate=1gbit epochs=8 reps=1 first=1 modes="none shrink restart abort" kill_epoch=3 victim=5 out="" name=sg
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --first-rep) first=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --kill-epoch) kill_epoch=$2; shift 2 ;;
    --victim) victim=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
S=$PWD/$build/shoal
[ -x "$S" ] || { echo "run.sh: $S not built" >&2; exit 2; }
out=${out:-$build/experiments/testbed-shrink}
mkdir -p "$out"
trap '"$S" testbed down --name "$name" >/dev/null 2>&1 || true' EXIT
"$S" testbed down --name "$name" >/dev/null 2>&1 || true
"$S" testbed up --name "$name" --hosts 8 --racks 1 --rate "$rate" >/dev/null
common=(--model mlp --epochs "$epochs" --batch 64 --lr 0.1 --warmup 100 --decay-epochs $((epochs - 2)) --seed 1)
now() { date +%s.%N; }
stamp() { while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done; } # wall clock on every line

# pid of rank $2's `shoal train` under launcher pid $1 (its child, by SHOAL_RANK in its environment)
victim_pid() {
  local p
  for p in $(pgrep -P "$1" 2>/dev/null); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SHOAL_RANK=$2"; then echo "$p"; return; fi
  done
}

# wait until rank 0's CSV has the line of epoch $2, then half an epoch more; kill the victim; print the time
kill_mid_epoch() {
  local lpid=$1 csv=$2 t0 t1 ep
  for _ in $(seq 1 6000); do
    [ -s "$csv" ] && ep=$(tail -n 1 "$csv" | cut -d, -f5) && [ "$ep" = "$kill_epoch" ] && break
    kill -0 "$lpid" 2>/dev/null || return 1
    sleep 0.1
  done
  # half of the last epoch's duration: the kill lands mid-epoch
  t1=$(awk -F, 'NR > 1 { prev = cur; cur = $7 } END { printf "%.2f", (cur - prev) / 2 }' "$csv")
  sleep "$t1"
  local vp; vp=$(victim_pid "$lpid" "$victim")
  [ -n "$vp" ] || return 1
  t0=$(now)
  kill -9 "$vp"
  echo "$t0"
}

run_one() {
  local mode=$1 rep=$2 tag=$1-$2 csv log start end tk=""
  csv=$out/$tag.csv; log=$out/$tag.log
  rm -f "$csv" "$out/$tag.ck"* "$log"
  local lopt=() topt=()
  case $mode in
    shrink) lopt=(--on-failure continue); topt=(--on-failure shrink) ;;
    restart) lopt=(--on-failure restart --max-restarts 1); topt=(--on-failure shrink) ;;
    abort) topt=(--checkpoint "$out/$tag.ck") ;;
  esac
  start=$(now)
  "$S" launch --testbed "$name" -n 8 --per-host 1 --timeout 1500 "${lopt[@]}" -- "$S" train "${common[@]}" \
    "${topt[@]}" --csv "$csv" --label "$tag" > >(stamp >"$log") 2>&1 &
  local lpid=$!
  if [ "$mode" != none ]; then tk=$(kill_mid_epoch "$lpid" "$csv" || true); fi
  wait "$lpid" || true
  if [ "$mode" = abort ] && [ -n "$tk" ]; then # start it again, from the epoch checkpoint
    echo "# restart from $out/$tag.ck at $(now)" >>"$log"
    "$S" launch --testbed "$name" -n 8 --per-host 1 --timeout 1500 -- "$S" train "${common[@]}" \
      --checkpoint "$out/$tag.ck" --resume "$out/$tag.ck" --csv "$csv" --label "$tag" > >(stamp >>"$log") 2>&1 || true
  fi
  end=$(now)
  sleep 0.5 # the last stamped lines
  # accuracy against wall time since the start (the CSV's time_s leaves out evaluation and, after a
  # resume, the time the job was down): the same columns, for shoal train --plot
  awk -v st="$start" -v tag="$tag" 'BEGIN { print "label,model,sync,workers,epoch,iters,time_s,train_loss,test_acc" }
    / \[0\] epoch +[0-9]+\/[0-9]+ +loss/ { split($4, e, "/"); acc = $9; sub(/%/, "", acc)
      printf "%s,mlp,bsp,0,%d,0,%.3f,%s,%.6f\n", tag, e[1], $1 - st, $6, acc / 100 }' "$log" >"$out/$tag.wall.csv"
  local det rec rej acc eps
  det=$(grep -o 'communication failed at iteration [0-9]* (wall clock [0-9.]*' "$log" | sed 's/.*clock //' | sort -n | head -1 || true)
  rec=$(grep -o 'recovery took [0-9.]* s (done at wall clock [0-9.]*' "$log" | sed 's/.*clock //' | head -1 || true)
  rej=$(grep -o 'admission took [0-9.]* s (done at wall clock [0-9.]*' "$log" | sed 's/.*took \([0-9.]*\) s.*/\1/' | head -1 || true)
  acc=$(tail -n 1 "$csv" 2>/dev/null | cut -d, -f9 || true)
  eps=$(tail -n 1 "$csv" 2>/dev/null | cut -d, -f5 || true)
  awk -v m="$mode" -v r="$rep" -v tk="${tk:-0}" -v det="${det:-0}" -v rec="${rec:-0}" -v rej="${rej:-}" \
      -v st="$start" -v en="$end" -v acc="$acc" -v eps="$eps" -v ld="$(cut -d' ' -f1-3 /proc/loadavg)" 'BEGIN {
    dl = (tk > 0 && det > 0) ? sprintf("%.3f", det - tk) : "-";
    sl = (tk > 0 && rec > 0) ? sprintf("%.3f", rec - tk) : "-";
    printf "%-8s %3d %10s %9s %9s %9.1f %8.2f%% %6s   load %s\n", m, r, dl, sl, rej == "" ? "-" : rej, en - st,
           100 * acc, eps, ld }' | tee -a "$out/results.txt"
}

{
  echo "# testbed-shrink: $(date -u +%FT%TZ), $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# 8 hosts x 1 worker, host links $rate; MLP, $epochs epochs, batch 64 per worker; kill -9 of rank $victim half-way through epoch $((kill_epoch + 1))"
  echo "# mode   rep  detect(s)  stall(s) admit(s)  wall(s)  final-acc epochs"
} | tee -a "$out/results.txt"
for rep in $(seq "$first" $((first + reps - 1))); do
  for mode in $modes; do run_one "$mode" "$rep"; done
done
"$S" train --plot "$out/shrink.svg" --title "MLP, 8 hosts, rank $victim killed in epoch $((kill_epoch + 1)): test accuracy against wall time" \
  "$out"/*-"$first".wall.csv >/dev/null 2>&1 || true
