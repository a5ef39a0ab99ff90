#!/usr/bin/env bash
# shoal's torch.distributed backend (shoal.torch) against its anchors, in the same run:
#   allreduce  dist.all_reduce over the backend (bench/gloo_allreduce.py --backend shoal) against shoal's
#              own C benchmark (`shoal bench allreduce`, the library called directly) and against Gloo
#              (--backend gloo), float32 sum in place, sizes MIN..MAX, the same method (warm-up, auto
#              iterations, barrier, slowest rank, p50); every side's best of REPS alternating runs.
#              Prints busbw per size and the ratios backend/C (the binding's cost: goal >= 0.9 at >= 1 MiB)
#              and backend/Gloo.
#   binding    the binding's cost in the same processes (bench/gloo_allreduce.py --backend shoal --paired):
#              dist.all_reduce over the backend against libshoal's blocking shoal_allreduce on the group's
#              own communicator and the same tensor, in PAIRED alternating blocks of PAIRED_ITERS; per
#              size the median over blocks of C time / backend time (goal >= 0.9 at >= 1 MiB). Separate
#              processes (the allreduce part) differ from run to run by more than the binding costs.
#   ddp        unmodified torch DistributedDataParallel over the backend against DDP over Gloo on the
#              same script (bench/py-ddp-vs-gloo.sh with DDP_SIDES="ddp-shoal none gloo", no shoal.ddp
#              side), per MODEL; prints samples/s and the ratio (goal >= 1.3), and the limit: the same
#              ranks training at once with no communication at all (side none; its ratio to Gloo is the
#              most any backend can reach).
#
#   bench/torch-backend.sh [BUILD]
#   env: PARTS="allreduce ddp"  RANKS="2 4"  MIN=1M  MAX=64M  REPS=3 (allreduce runs per side)
#        PAIRED=8  PAIRED_ITERS=100 (binding)
#        (RANKS of allreduce and binding: N = N ranks on this host; tb:HxK = H emulated hosts x K ranks on
#        a `shoal testbed` of links RATE (default 1gbit), every side started by `shoal launch --testbed`;
#        needs root. TESTBED=tba<pid> names it; it is brought up once and down at the end)
#        MODELS="mlp cnn"  SETTINGS="1h:2 1h:4 tb:2x1 tb:4x1 tb:2x2"  EPOCHS=1  DDP_REPS=3  EXTRA_ARGS=""
#        (EXTRA_ARGS go to every training run, e.g. "--train-subset 20000"; the rest of py-ddp-vs-gloo.sh's
#        settings pass through)  OUT=/tmp/shoal-torch-bench
# Run it under `quiet` on a shared machine (figures measured under other load are not figures).
set -euo pipefail
. "$(dirname "$0")/common.sh"
case ${1:-} in
-h | --help) script_help; exit 0 ;;
-*) unknown_opt "$1" ;;
esac
build=${1:-build}
[ -x "$build/shoal" ] || { echo "torch-backend.sh: no shoal binary in '$build' (make BUILD=$build)" >&2; exit 2; }
[ -f "$build/_c10d.so" ] || { echo "torch-backend.sh: $build/_c10d.so not built (make builds it where libtorch-dev is installed)" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd)
PARTS=${PARTS:-"allreduce ddp"} RANKS=${RANKS:-"2 4"} MIN=${MIN:-1M} MAX=${MAX:-64M} REPS=${REPS:-3}
MODELS=${MODELS:-"mlp cnn"}
out=${OUT:-/tmp/shoal-torch-bench}; mkdir -p "$out"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 SHOAL_LIBRARY=$build/libshoal.so.0 PYTHONPATH=$repo/python
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
echo "# torch-backend: $(date -u +%FT%TZ) $(uname -n), $(getconf _NPROCESSORS_ONLN) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

# the testbed of the allreduce and binding parts (tb:HxK in RANKS), up once for every such setting
tb=""
cleanup() { [ -z "$tb" ] || "$build/shoal" testbed down --name "$tb" >/dev/null 2>&1; tb=""; }
trap cleanup EXIT
trap 'exit 130' INT TERM
tb_hosts=0
if [[ " $PARTS " == *" allreduce "* || " $PARTS " == *" binding "* ]]; then
  for s in $RANKS; do
    case $s in
      tb:*x*) h=${s#tb:}; h=${h%x*}; [ "$h" -gt "$tb_hosts" ] && tb_hosts=$h;;
      *[!0-9]* | "") echo "torch-backend.sh: RANKS: '$s' is not N or tb:HxK" >&2; exit 2;;
    esac
  done
fi
if [ "$tb_hosts" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "torch-backend.sh: RANKS tb:HxK needs root (network namespaces)" >&2; exit 2; }
  tb=${TESTBED:-tba$(( $$ % 100000 ))}
  "$build/shoal" testbed up --name "$tb" --hosts "$tb_hosts" --rate "${RATE:-1gbit}" >"$out/testbed.log" 2>&1 ||
    { echo "torch-backend.sh: testbed up failed: $(tail -1 "$out/testbed.log")" >&2; tb=""; exit 1; }
fi
# setting -> its rank count; its label
nranks() { case $1 in tb:*) local h=${1#tb:}; echo $(( ${h%x*} * ${h#*x} ));; *) echo "$1";; esac; }
label() { case $1 in tb:*) local h=${1#tb:}; echo "${h%x*} hosts x ${h#*x} ranks, ${RATE:-1gbit} links";; *) echo "$1 ranks, one host (loopback + shared memory)";; esac; }

# a testbed setting's ranks, all through `shoal launch` (only rank 0 prints): setting timeout out err CMD...
tb_launch() {
  local s=$1 t=$2 o=$3 e=$4 h k; shift 4
  h=${s#tb:}; k=${h#*x}; h=${h%x*}
  GLOO_SOCKET_IFNAME=eth0 timeout $((t + 30)) "$build/shoal" launch --timeout "$t" --no-prefix --testbed "$tb" \
    --per-host "$k" --hosts "$(seq -s, 0 $((h - 1)) | sed 's/[0-9]*/h&/g')" -n $((h * k)) -- "$@" >"$o" 2>"$e"
}

# one side of the allreduce sweep, ranks spawned by hand (every side alike): setting side file
run_side() {
  local s=$1 side=$2 f=$3 n port pids=() r
  n=$(nranks "$s")
  if [[ $s == tb:* ]]; then
    if [ "$side" = c ]; then tb_launch "$s" 300 "$f.r0" "$f.err" "$build/shoal" bench allreduce -b "$MIN" -e "$MAX"
    else tb_launch "$s" 300 "$f.r0" "$f.err" /usr/bin/python3 "$repo/bench/gloo_allreduce.py" --backend "$side" -b "$MIN" -e "$MAX"
    fi || { echo "torch-backend.sh: $side run failed: $f.err" >&2; tail -5 "$f.err" >&2; exit 1; }
    grep -E '^(#| +[0-9])' "$f.r0" >"$f"
    return
  fi
  port=$(free_port)
  for ((r = 0; r < n; r++)); do
    if [ "$side" = c ]; then
      SHOAL_RANK=$r SHOAL_WORLD_SIZE=$n SHOAL_MASTER_ADDR=127.0.0.1 SHOAL_MASTER_PORT=$port \
        timeout 300 "$build/shoal" bench allreduce -b "$MIN" -e "$MAX" >"$f.r$r" 2>"$f.err.r$r" & pids+=($!)
    else
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=$n RANK=$r GLOO_SOCKET_IFNAME=lo \
        timeout 300 /usr/bin/python3 "$repo/bench/gloo_allreduce.py" --backend "$side" -b "$MIN" -e "$MAX" \
        >"$f.r$r" 2>"$f.err.r$r" & pids+=($!)
    fi
  done
  for r in "${pids[@]}"; do wait "$r" || { echo "torch-backend.sh: $side run failed: $f.err.r*" >&2; tail -5 "$f".err.r* >&2; exit 1; }; done
  grep -E '^(#| +[0-9])' "$f.r0" >"$f"
}

if [[ " $PARTS " == *" allreduce "* ]]; then
  echo "# all_reduce float32 sum in place, best p50 of $REPS alternating runs per side"
  for s in $RANKS; do
    n=${s/:/-}
    for rep in $(seq 1 "$REPS"); do
      for side in c shoal gloo; do run_side "$s" "$side" "$out/ar-$side-$n.run$rep"; done
    done
    for side in c shoal gloo; do best_of 14 "$out/ar-$side-$n.txt" "$out"/ar-$side-$n.run*[0-9]; done
    printf "# %s\n# %10s | %12s %12s %12s | %9s %9s\n" "$(label "$s")" "size(B)" "C busbw" "backend" "Gloo" \
      "back/C" "back/Gloo"
    # in-place busbw is column 18 of every table (nccl-tests layout)
    join <(awk '!/^#/ { print $1, $18 }' "$out/ar-c-$n.txt" | sort -k1,1) \
         <(awk '!/^#/ { print $1, $18 }' "$out/ar-shoal-$n.txt" | sort -k1,1) |
      join - <(awk '!/^#/ { print $1, $18 }' "$out/ar-gloo-$n.txt" | sort -k1,1) | sort -n |
      awk '{ printf "  %10d | %12.3f %12.3f %12.3f | %9.2f %9.2f\n", $1, $2, $3, $4, $3 / $2, $3 / $4 }'
  done
fi

if [[ " $PARTS " == *" binding "* ]]; then
  for s in $RANKS; do
    if [[ $s == tb:* ]]; then
      f=$out/binding-${s/:/-}
      tb_launch "$s" 600 "$f.r0" "$f.err" /usr/bin/python3 "$repo/bench/gloo_allreduce.py" --backend shoal \
        --paired "${PAIRED:-8}" -n "${PAIRED_ITERS:-100}" -b "$MIN" -e "$MAX" ||
        { echo "torch-backend.sh: binding run failed: $f.err" >&2; tail -5 "$f.err" >&2; exit 1; }
      echo "# $(label "$s")"; grep -E '^(#| +[0-9])' "$f.r0"
      continue
    fi
    n=$s port=$(free_port) pids=()
    for ((r = 0; r < n; r++)); do
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=$n RANK=$r timeout 600 /usr/bin/python3 \
        "$repo/bench/gloo_allreduce.py" --backend shoal --paired "${PAIRED:-8}" -n "${PAIRED_ITERS:-100}" \
        -b "$MIN" -e "$MAX" >"$out/binding-$n.r$r" 2>"$out/binding-$n.err.r$r" & pids+=($!)
    done
    for r in "${pids[@]}"; do
      wait "$r" || { echo "torch-backend.sh: binding run failed: $out/binding-$n.err.r*" >&2; tail -5 "$out"/binding-$n.err.r* >&2; exit 1; }
    done
    cat "$out/binding-$n.r0"
  done
fi

cleanup # py-ddp-vs-gloo.sh brings up its own testbed
if [[ " $PARTS " == *" ddp "* ]]; then
  for model in $MODELS; do
    echo "# DDP, model $model: unmodified DistributedDataParallel over shoal (ddp-shoal) vs over Gloo"
    MODEL=$model STRATEGIES="" DDP_SIDES="ddp-shoal none gloo" SETTINGS=${SETTINGS:-"1h:2 1h:4 tb:2x1 tb:4x1 tb:2x2"} \
      EPOCHS=${EPOCHS:-1} REPS=${DDP_REPS:-3} OUT="$out/ddp-$model" "$repo/bench/py-ddp-vs-gloo.sh" "$build"
  done
fi
