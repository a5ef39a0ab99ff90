#!/usr/bin/env bash
# Allreduce float32 sum over TCP loopback: shoal vs Open MPI (btl tcp,self on
# lo) vs PyTorch Gloo, in ONE run, same sweep, same method (see
# docs/performance.md), then a table of ratios per size.
#   bench/tcp-anchors.sh [--build DIR] [--ranks "2 4"] [--sizes 8:256M | --min 8 --max 256M] [--factor 2]
#                        [--iters N] [--target SEC] [--warmup N] [--out DIR] [--skip-mpi] [--skip-gloo]
#                        [--reps R]   (default 3: alternate the programs R times, keep each one's best run)
# Goal: shoal busbw >= Gloo's and >= Open MPI's from 64 KiB up, and
# small-message (8 B..4 KiB) p50 latency <= Open MPI's, at 2 and 4 ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
build=build ranks="2 4" min=8 max=256M factor=2 iters=0 target=0.2 warmup=5 out="" skip_mpi=0 skip_gloo=0 reps=3
while [ $# -gt 0 ]; do
  case "$1" in
    --build) val "$@"; build=$2; shift 2 ;;
    --ranks) val "$@"; ranks=$2; shift 2 ;;
    --min) val "$@"; min=$2; shift 2 ;;
    --sizes) val "$@"; min=${2%%:*}; max=${2##*:}; shift 2 ;;   # MIN:MAX, e.g. 8:256M
    --max) val "$@"; max=$2; shift 2 ;;
    --factor) val "$@"; factor=$2; shift 2 ;;
    --iters) val "$@"; iters=$2; shift 2 ;;
    --target) val "$@"; target=$2; shift 2 ;;
    --warmup) val "$@"; warmup=$2; shift 2 ;;
    --out) val "$@"; out=$2; shift 2 ;;
    --skip-mpi) skip_mpi=1; shift ;;
    --skip-gloo) skip_gloo=1; shift ;;
    --reps) val "$@"; reps=$2; shift 2 ;;
    -h|--help) script_help; exit 0 ;;
    *) unknown_opt "$1" ;;
  esac
done
shoal="$build/shoal"
[ -x "$shoal" ] || { echo "tcp-anchors.sh: $shoal not built (make BUILD=$build)" >&2; exit 2; }
out=${out:-$build/bench/tcp-anchors}
mkdir -p "$out"
args=(-b "$min" -e "$max" -f "$factor" -w "$warmup" -T "$target")
[ "$iters" != 0 ] && args+=(-n "$iters")
# the sweep's options, checked once by shoal bench itself (its error, not a silent failed run)
if ! err=$("$shoal" bench allreduce "${args[@]}" --explain -p 2 2>&1 >/dev/null); then
  echo "tcp-anchors.sh: ${err:-shoal bench refused the options}" >&2
  exit 2
fi
budget=3600   # hard cap per program run, seconds
export SHOAL_SHM=0   # TCP loopback for shoal too: same-host ranks would otherwise use shared memory

if [ $skip_mpi = 0 ]; then
  command -v mpicc.openmpi >/dev/null || { echo "tcp-anchors.sh: mpicc.openmpi missing (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 2; }
  mpicc.openmpi -O2 bench/mpi_allreduce.c -o "$out/mpi_allreduce" -lm
fi
if [ $skip_gloo = 0 ]; then
  /usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' ||
    { echo "tcp-anchors.sh: /usr/bin/python3 has no torch with Gloo (apt-get install python3-torch)" >&2; exit 2; }
fi

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run_shoal() { # n file
  if "$shoal" launch --help >/dev/null 2>&1; then
    timeout $budget "$shoal" launch -n "$1" -- "$shoal" bench allreduce "${args[@]}" >"$2.raw" 2>"$2.err"
    # the launcher prefixes rank output; keep rank 0's table lines without the prefix
    sed -n 's/^\[0\] //p' "$2.raw" | grep -E '^(#| +[0-9])' >"$2"
  else
    echo "tcp-anchors.sh: '$shoal launch' not in this build; spawning ranks by hand" >&2
    local port; port=$(free_port); local pids=()
    for ((r = 0; r < $1; r++)); do
      SHOAL_RANK=$r SHOAL_WORLD_SIZE=$1 SHOAL_MASTER_ADDR=127.0.0.1 SHOAL_MASTER_PORT=$port \
        timeout $budget "$shoal" bench allreduce "${args[@]}" >"$2.r$r" 2>"$2.err.r$r" & pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    cp "$2.r0" "$2"
  fi
}
run_mpi() {
  timeout $budget mpirun.openmpi --allow-run-as-root --oversubscribe -np "$1" --mca btl tcp,self \
    --mca btl_tcp_if_include lo "$out/mpi_allreduce" "${args[@]}" >"$2" 2>"$2.err"
}
run_gloo() {
  local port; port=$(free_port); local pids=()
  for ((r = 0; r < $1; r++)); do
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=$1 RANK=$r GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1 \
      timeout $budget /usr/bin/python3 bench/gloo_allreduce.py "${args[@]}" >"$2.r$r" 2>"$2.err.r$r" & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  cp "$2.r0" "$2"
}

echo "# tcp-anchors: allreduce float32 sum, TCP loopback, sizes $min..$max x$factor, ranks: $ranks"
echo "# $(date -u +%FT%TZ) $(uname -n), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in $ranks; do
  for r in $(seq 1 "$reps"); do
    echo "# running shoal, $n ranks (run $r of $reps) ..." >&2; run_shoal "$n" "$out/shoal-$n.run$r.txt"
    [ $skip_mpi = 0 ] && { echo "# running Open MPI, $n ranks (run $r of $reps) ..." >&2; run_mpi "$n" "$out/mpi-$n.run$r.txt"; }
    [ $skip_gloo = 0 ] && { echo "# running Gloo, $n ranks (run $r of $reps) ..." >&2; run_gloo "$n" "$out/gloo-$n.run$r.txt"; }
  done
  best_of 7 "$out/shoal-$n.txt" "$out"/shoal-$n.run*.txt
  [ $skip_mpi = 0 ] && best_of 7 "$out/mpi-$n.txt" "$out"/mpi-$n.run*.txt
  [ $skip_gloo = 0 ] && best_of 14 "$out/gloo-$n.txt" "$out"/gloo-$n.run*.txt   # Gloo is compared in place
done

# Columns of every table: $1 size, $7 p50 oop, $11 busbw oop, $14 p50 in-place, $18 busbw in-place.
# shoal out-of-place is compared with MPI_Allreduce (out-of-place); shoal in-place with Gloo (in place).
for n in $ranks; do
  echo
  echo "## $n ranks (busbw GB/s; latency = p50 us; ratio > 1 means shoal is faster)"
  awk -v n="$n" -v mpi="$out/mpi-$n.txt" -v gloo="$out/gloo-$n.txt" '
    function load(f, arr_p, arr_b, col_p, col_b,   line, a) {
      while ((getline line < f) > 0) { if (line ~ /^#/) continue; split(line, a); arr_p[a[1]] = a[col_p]; arr_b[a[1]] = a[col_b] }
    }
    function ratio(x, y) { return (y > 0 && x != "" && y != "") ? sprintf("%.2f", x / y) : "-" }
    BEGIN {
      load(mpi, mp, mb, 7, 11); load(gloo, gp, gb, 14, 18)
      printf "%10s | %8s %8s %7s | %8s %8s %7s | %9s %9s %9s %7s %7s | %s\n", "size(B)", "shoal", "ompi", "s/ompi",
             "shoal-ip", "gloo", "s/gloo", "shoal_us", "ompi_us", "gloo_us", "lat o/s", "lat g/s", "goal"
    }
    /^#/ { next }
    {
      s = $1; goal = ""
      r1 = ratio($11, mb[s]); r2 = ratio($18, gb[s])
      l1 = (s <= 4096) ? ratio(mp[s], $7) : "-"; l2 = (s <= 4096) ? ratio(gp[s], $14) : "-"
      if (s >= 65536) goal = ((r1 == "-" || r1 >= 1) && (r2 == "-" || r2 >= 1)) ? "ok" : "BELOW"
      if (s <= 4096) goal = (l1 == "-" || l1 >= 1) ? "ok" : "SLOWER"
      printf "%10s | %8s %8s %7s | %8s %8s %7s | %9s %9s %9s %7s %7s | %s\n", s, $11, mb[s], r1, $18, gb[s], r2,
             $7, (s in mp ? mp[s] : "-"), (s in gp ? gp[s] : "-"), l1, l2, goal
    }' "$out/shoal-$n.txt"
done
echo
echo "# raw outputs in $out/ (shoal-N.txt, mpi-N.txt, gloo-N.txt)"
