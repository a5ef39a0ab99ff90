#!/bin/sh
# Compare two shoal binaries on the outputs a refactoring must not change.
#
#   scripts/same-training.sh [--out DIR] [--cases LIST] BEFORE AFTER
#
# BEFORE and AFTER are shoal binaries (say a copy of main's build/shoal and this tree's). Each case is a
# short `shoal train` (mlp, 2000 training and 500 test images, 2 epochs, seed 7) under `shoal launch`,
# run once with each binary, plus the collective check (`shoal selftest`) at 2 and 4 ranks:
#   bsp, dssync, localsgd, ps-sync   deterministic: every worker's per-iteration log (loss, lr, group
#                                    size, consensus, payload bytes; not the times), the per-epoch rows
#                                    (loss, test accuracy) and the final parameters (--params-out) must
#                                    be bit-identical
#   ps-async, partial                the order in which gradients arrive decides the result (two runs of
#                                    one binary differ by up to 20 points of accuracy here): both runs
#                                    must finish, each worker with as many iterations, and the first
#                                    iteration's loss (the seed's parameters and data) bit-identical;
#                                    the final test accuracies are printed side by side
#   selftest                         every PASS line the same
# Cases run at 2 and 4 ranks (ps: the last rank is the server), bsp also over TCP only (SHOAL_SHM=0).
# Options:
#   --out DIR     keep the outputs there (default: a temporary directory, removed)
#   --cases LIST  comma list of case names to run (default: all), e.g. bsp-2,partial-4,selftest-2
# Exit 0 when every case holds, 1 naming each case that differs. Wrap in `heavy` on a shared machine.
set -u
me=$(basename "$0")
out=""
cases=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || { echo "$me: --out needs a value" >&2; exit 2; }; out=$2; shift 2 ;;
    --cases) [ $# -ge 2 ] || { echo "$me: --cases needs a value" >&2; exit 2; }; cases=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "$me: unknown option '$1' (try --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -eq 2 ] || { echo "usage: $me [--out DIR] [--cases LIST] BEFORE AFTER (try --help)" >&2; exit 2; }
before=$1
after=$2
for b in "$before" "$after"; do
  [ -x "$b" ] || { echo "$me: $b: not an executable shoal binary" >&2; exit 2; }
done
data=${SHOAL_DATA:-/usr/share/datasets/fashion-mnist}
[ -d "$data" ] || { echo "$me: no data set at $data (scripts/deps.sh installs dataset-fashion-mnist)" >&2; exit 77; }
if [ -z "$out" ]; then
  out=$(mktemp -d /tmp/same-training.XXXXXX)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

want() { [ -z "$cases" ] && return 0; case ",$cases," in *",$1,"*) return 0 ;; esac; return 1; }

# run SIDE BIN CASE N [VAR=VALUE] -- TRAIN-ARGS: one training run, its outputs in $out/CASE.SIDE.*
run() {
  side=$1 bin=$2 name=$3 n=$4
  shift 4
  envs=""
  while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
  shift
  d=$out/$name.$side
  rm -rf "$d"; mkdir -p "$d"
  env $envs "$bin" launch -n "$n" --timeout 300 -- "$bin" train --model mlp --data "$data" --train-subset 2000 \
    --test-subset 500 --epochs 2 --seed 7 --quiet --iter-log "$d/iter.csv" --csv "$d/epochs.csv" \
    --params-out "$d/params.bin" "$@" >"$d/stdout" 2>"$d/stderr"
  echo $? >"$d/rc"
}

# the columns that do not depend on timing: iteration, epoch, group size, loss, lr, consensus, payload
det_iter() { cut -d, -f1,2,3,6,7,8,9 "$1"; }
# per epoch: label..iters, train loss, test accuracy, consensus, lr
det_epochs() { cut -d, -f1-6,8,9,13,14 "$1"; }

bad=""
note() { echo "$*"; }
differ() { bad="$bad $1"; note "DIFFER  $1: $2"; }

compare_det() {
  name=$1 b=$out/$1.before a=$out/$1.after
  [ "$(cat "$b/rc")" = 0 ] || { differ "$name" "the BEFORE run failed (exit $(cat "$b/rc")): $(tail -1 "$b/stderr")"; return; }
  [ "$(cat "$a/rc")" = 0 ] || { differ "$name" "the AFTER run failed (exit $(cat "$a/rc")): $(tail -1 "$a/stderr")"; return; }
  for f in "$b"/iter.csv*; do
    g=$a/$(basename "$f")
    [ -f "$g" ] || { differ "$name" "no $(basename "$f") after"; return; }
    if ! det_iter "$f" | cmp -s - /dev/stdin <<EOF
$(det_iter "$g")
EOF
    then differ "$name" "per-iteration log $(basename "$f") differs"; return; fi
  done
  if ! det_epochs "$b/epochs.csv" | cmp -s - /dev/stdin <<EOF
$(det_epochs "$a/epochs.csv")
EOF
  then differ "$name" "per-epoch rows differ"; return; fi
  for f in "$b"/params.bin*; do
    cmp -s "$f" "$a/$(basename "$f")" || { differ "$name" "final parameters $(basename "$f") differ"; return; }
  done
  iters=$(tail -n +2 "$b/iter.csv" | wc -l)
  note "SAME    $name: $iters iterations x $(ls "$b"/iter.csv* | wc -l) workers, loss/accuracy/parameters bit-identical"
}

compare_loose() {
  name=$1 b=$out/$1.before a=$out/$1.after
  [ "$(cat "$b/rc")" = 0 ] || { differ "$name" "the BEFORE run failed (exit $(cat "$b/rc")): $(tail -1 "$b/stderr")"; return; }
  [ "$(cat "$a/rc")" = 0 ] || { differ "$name" "the AFTER run failed (exit $(cat "$a/rc")): $(tail -1 "$a/stderr")"; return; }
  for f in "$b"/iter.csv*; do
    g=$a/$(basename "$f")
    [ -f "$g" ] || { differ "$name" "no $(basename "$f") after"; return; }
    [ "$(wc -l <"$f")" = "$(wc -l <"$g")" ] || { differ "$name" "$(basename "$f"): $(wc -l <"$f") lines before, $(wc -l <"$g") after"; return; }
    # the first iteration starts from the seed's parameters and data order, before any gradient arrived
    [ "$(sed -n 2p "$f" | cut -d, -f1,2,6)" = "$(sed -n 2p "$g" | cut -d, -f1,2,6)" ] ||
      { differ "$name" "$(basename "$f"): the first iteration's loss differs"; return; }
  done
  ia=$(tail -1 "$a/epochs.csv" | cut -d, -f6)
  accb=$(tail -1 "$b/epochs.csv" | cut -d, -f9)
  acca=$(tail -1 "$a/epochs.csv" | cut -d, -f9)
  note "ALIKE   $name: $ia iterations both, the first iteration's loss identical; final test accuracy $accb before, $acca after (depends on arrival order)"
}

selftest() {
  n=$1 name=selftest-$1
  for side in before after; do
    bin=$before; [ $side = after ] && bin=$after
    d=$out/$name.$side
    mkdir -p "$d"
    "$bin" launch -n "$n" --timeout 300 -- "$bin" selftest >"$d/stdout" 2>"$d/stderr"
    echo $? >"$d/rc"
  done
  b=$out/$name.before a=$out/$name.after
  [ "$(cat "$b/rc")" = 0 ] && [ "$(cat "$a/rc")" = 0 ] || { differ "$name" "exit $(cat "$b/rc") before, $(cat "$a/rc") after"; return; }
  grep -c PASS "$b/stdout" >/dev/null || { differ "$name" "no PASS line"; return; }
  if sort "$b/stdout" | cmp -s - /dev/stdin <<EOF
$(sort "$a/stdout")
EOF
  then note "SAME    $name: $(grep -c PASS "$b/stdout") PASS lines, identical"
  else differ "$name" "the selftest output differs"; fi
}

case_run() { # KIND NAME N [VAR=VALUE] -- TRAIN-ARGS
  kind=$1 name=$2
  shift 2
  want "$name" || return 0
  run before "$before" "$name" "$@"
  run after "$after" "$name" "$@"
  if [ "$kind" = det ]; then compare_det "$name"; else compare_loose "$name"; fi
}

for n in 2 4; do
  case_run det bsp-$n $n -- --sync bsp
  case_run det dssync-$n $n -- --sync dssync --ds-pattern random
  case_run det localsgd-$n $n -- --sync localsgd --local-h 4
  case_run det ps-sync-$n $n -- --sync ps --ps-mode sync
  case_run loose ps-async-$n $n -- --sync ps --ps-mode async
  case_run loose partial-$n $n -- --sync partial
  want selftest-$n && selftest $n
done
case_run det bsp-tcp-4 4 SHOAL_SHM=0 -- --sync bsp

if [ -n "$bad" ]; then
  echo "$me: differ:$bad"
  exit 1
fi
echo "$me: every case holds"
