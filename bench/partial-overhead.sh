#!/usr/bin/env bash
# The partial allreduce's per-step cost taken apart (bench/partial_parts.c): 4 ranks on TCP loopback, no
# training, every rank ready at once, against the plain allreduce of the same size in the same run:
#   allreduce  shoal_allreduce (the chooser's algorithm)
#   relay      the relay trees with every rank in
#   partial    one partial allreduce step, split in p.control (READY to rank 0 and the decision back, on
#              the rank ready last) and p.data (the data plane, on the slowest rank)
#   bench/partial-overhead.sh [--build DIR] [--ranks 4] [--sizes "65536 2142272"] [--iters 200]
# 2143272 B = the Fashion-MNIST MLP's gradient (535818 float32), the partial allreduce of AE4
# (docs/experiments.md). Run it under `quiet`: the figures are times.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
build=build ranks=4 sizes="65536 2143272" iters=200
while [ $# -gt 0 ]; do
  case "$1" in
    --build) val "$@"; build=$2; shift 2 ;;
    --ranks) val "$@"; ranks=$2; shift 2 ;;
    --sizes) val "$@"; sizes=$2; shift 2 ;;
    --iters) val "$@"; iters=$2; shift 2 ;;
    -h|--help) script_help; exit 0 ;;
    *) unknown_opt "$1" ;;
  esac
done
shoal="$build/shoal"
[ -x "$shoal" ] || { echo "partial-overhead.sh: $shoal not built (make BUILD=$build)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/partial-overhead.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -Iinclude bench/partial_parts.c -L"$build" -lshoal -Wl,-rpath,"$(realpath "$build")" -o "$tmp/partial_parts" || exit 2
export SHOAL_SHM=0   # TCP loopback: the ranks stand for hosts
echo "# partial-overhead: $(date -u +%FT%TZ), $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for s in $sizes; do
  timeout 300 "$shoal" launch -n "$ranks" -- "$tmp/partial_parts" "$s" "$iters" 2>"$tmp/err" | sed -n 's/^\[0\] parts: //p' ||
    { echo "partial-overhead.sh: $s B failed:" >&2; tail -5 "$tmp/err" >&2; exit 1; }
done
